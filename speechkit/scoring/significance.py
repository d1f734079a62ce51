"""Paired bootstrap of error rates (WER/CER) between two systems on one test set.

Bisani & Ney, "Bootstrap estimates for confidence intervals in ASR performance evaluation",
ICASSP 2004: the test utterances are resampled with replacement, the *same* resample for both
systems, and on each resample the pooled error rate of each system (errors over reference
tokens, section 2) and their difference are computed. The percentile interval of the difference
and the "probability of improvement" (the share of resamples on which system B makes fewer
errors than system A, their section 3) say whether a difference survives the sampling of
utterances. What it does not cover: training variance (another seed), which a single training
per system leaves unmeasured.

Per-utterance counts come from the Kaldi-style ``per_utt`` files that ``speechkit-score-wer``
writes (``<utt> #csid <correct> <subs> <ins> <dels>`` lines): errors = S + I + D, reference
tokens = C + S + D.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = ["read_per_utt_counts", "PairedBootstrap", "paired_bootstrap"]


def read_per_utt_counts(path: str | os.PathLike) -> dict[str, tuple[int, int]]:
    """Per-utterance ``(errors, reference tokens)`` from a ``per_utt`` file's ``#csid`` lines.

    Args:
        path: a ``per_utt`` / ``per_utt.char`` file of ``speechkit-score-wer`` (Kaldi's layout);
            its ``ref`` / ``hyp`` / ``op`` lines are skipped.

    Returns:
        ``{utt: (S + I + D, C + S + D)}`` in file order.

    Raises:
        ValueError: a ``#csid`` line without four non-negative integers, or an utterance listed
            twice (the message names file and line).
        OSError: the file cannot be read.
    """
    out: dict[str, tuple[int, int]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) < 2 or parts[1] != "#csid":
                continue
            try:
                c, s, i, d = (int(x) for x in parts[2:])
                if min(c, s, i, d) < 0:
                    raise ValueError
            except ValueError:
                raise ValueError(f"{path}:{n}: expected '<utt> #csid C S I D' with four counts >= 0, "
                                 f"got {line.strip()!r}") from None
            if parts[0] in out:
                raise ValueError(f"{path}:{n}: utterance {parts[0]!r} listed twice")
            out[parts[0]] = (s + i + d, c + s + d)
    return out


@dataclass(frozen=True)
class PairedBootstrap:
    """Result of :func:`paired_bootstrap`; rates and differences in percent.

    Attributes:
        rate_a, rate_b: pooled error rates of A and B on the full test set (%).
        delta: ``rate_b - rate_a`` (percentage points; negative = B better).
        interval: the percentile interval of ``delta`` over the resamples (points).
        level: its coverage (e.g. 0.95).
        prob_b_better: share of resamples with strictly fewer pooled errors for B than for A,
            relative to the resample's reference tokens (Bisani & Ney's probability of improvement).
        n_resamples, num_utts: resamples drawn, utterances in the test set.
    """
    rate_a: float
    rate_b: float
    delta: float
    interval: tuple[float, float]
    level: float
    prob_b_better: float
    n_resamples: int
    num_utts: int

    def verdict(self) -> str:
        """``'B better'`` / ``'A better'`` when the interval excludes 0, else ``'within noise'``."""
        lo, hi = self.interval
        if hi < 0:
            return "B better"
        if lo > 0:
            return "A better"
        return "within noise"


def paired_bootstrap(a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]], *,
                     n_resamples: int = 1000, seed: int = 0, level: float = 0.95,
                     chunk: int = 200) -> PairedBootstrap:
    """Paired utterance-level bootstrap of the error-rate difference B - A (Bisani & Ney 2004).

    Args:
        a, b: ``{utt: (errors, reference tokens)}`` of the two systems (:func:`read_per_utt_counts`),
            over the same utterances with the same reference lengths.
        n_resamples: bootstrap resamples (each draws ``len(a)`` utterances with replacement).
        seed: seed of the generator (numpy PCG64); the same seed gives the same interval.
        level: coverage of the percentile interval, in (0, 1).
        chunk: resamples drawn at once (memory: ``chunk x len(a)`` indices).

    Returns:
        a :class:`PairedBootstrap`.

    Raises:
        ValueError: the utterance sets differ (the first missing ids are named), an utterance has
            different reference lengths in ``a`` and ``b`` (different references), the set is empty
            or has no reference token, ``n_resamples < 1`` or ``level`` outside (0, 1).
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        raise ValueError("the two systems were scored on different utterances: "
                         + "; ".join(f"{len(x)} only in {w} (e.g. {', '.join(x[:3])})"
                                     for w, x in (("A", only_a), ("B", only_b)) if x))
    utts = sorted(a)
    if not utts:
        raise ValueError("no utterance to resample")
    bad = [u for u in utts if a[u][1] != b[u][1]]
    if bad:
        raise ValueError(f"{len(bad)} utterance(s) have different reference lengths in A and B "
                         f"(different references?), e.g. {bad[0]!r}: {a[bad[0]][1]} vs {b[bad[0]][1]}")
    ea = np.array([a[u][0] for u in utts], dtype=np.int64)
    eb = np.array([b[u][0] for u in utts], dtype=np.int64)
    ref = np.array([a[u][1] for u in utts], dtype=np.int64)
    if ref.sum() == 0:
        raise ValueError("the reference has no token")
    rng = np.random.default_rng(seed)
    n = len(utts)
    deltas = np.empty(n_resamples)
    better = 0
    done = 0
    while done < n_resamples:
        k = min(chunk, n_resamples - done)
        idx = rng.integers(0, n, size=(k, n))
        r = ref[idx].sum(axis=1)
        sa, sb = ea[idx].sum(axis=1), eb[idx].sum(axis=1)
        deltas[done:done + k] = np.where(r > 0, 100.0 * (sb - sa) / np.maximum(r, 1), 0.0)
        better += int((sb < sa).sum())
        done += k
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(deltas, [alpha, 1.0 - alpha])
    rate_a = 100.0 * ea.sum() / ref.sum()
    rate_b = 100.0 * eb.sum() / ref.sum()
    return PairedBootstrap(rate_a=float(rate_a), rate_b=float(rate_b), delta=float(rate_b - rate_a),
                           interval=(float(lo), float(hi)), level=level,
                           prob_b_better=better / n_resamples, n_resamples=n_resamples, num_utts=n)
