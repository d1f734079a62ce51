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

The same resampling of a pooled ratio of per-utterance sums (an MCD: dB summed over frames, over
frames) is :func:`paired_ratio_bootstrap`. When the units are few and each is a whole run (a
continual-learning run over one speaker order), :func:`paired_t_interval` gives Student's t interval
of the mean paired difference instead.

What the statistics cannot support they refuse with :class:`NotComparable` (a ``ValueError``) and
a message that says why, for a results page to print instead of the comparison: fewer than
:data:`MIN_PAIRED_UTTS` paired utterances (one utterance gives a zero-width interval that would
read as a verdict), different utterance sets or reference lengths, counts that are not finite
non-negative integers and sums that are not finite (naming the utterance).
"""
from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

# scipy.stats is imported where used (heavy): only a t interval needs it.

__all__ = ["read_per_utt_counts", "PairedBootstrap", "paired_bootstrap", "PairedRatioBootstrap",
           "paired_ratio_bootstrap", "PairedTInterval", "paired_t_interval", "t_quantile",
           "NotComparable", "MIN_PAIRED_UTTS"]

#: The fewest paired utterances a bootstrap gives a verdict on: with one, every resample is the
#: original sample and the interval has zero width.
MIN_PAIRED_UTTS = 2


class NotComparable(ValueError):
    """Two systems' scores that the paired bootstrap cannot compare; the message says why (and names
    the utterance at fault), for a results page to print in place of the comparison."""


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


def _check_options(n_resamples: int, level: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _paired_utts(a: Mapping, b: Mapping) -> list[str]:
    """The utterances of both systems, sorted; :class:`NotComparable` when the sets differ or hold fewer
    than :data:`MIN_PAIRED_UTTS`."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        raise NotComparable("the two systems were scored on different utterances: "
                            + "; ".join(f"{len(x)} only in {w} (e.g. {', '.join(x[:3])})"
                                        for w, x in (("A", only_a), ("B", only_b)) if x))
    utts = sorted(a)
    if not utts:
        raise NotComparable("no utterance to resample")
    if len(utts) < MIN_PAIRED_UTTS:
        raise NotComparable(f"{len(utts)} paired utterance ({utts[0]}): a bootstrap needs at least "
                            f"{MIN_PAIRED_UTTS} (with one, every resample is the sample itself: no interval)")
    return utts


def _count(x, what: str, utt: str, name: str) -> int:
    """``x`` as an int: a finite non-negative integer (``2.0`` accepted), else :class:`NotComparable`."""
    ok = isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 \
        and float(x).is_integer()
    if not ok:
        raise NotComparable(f"utterance {utt!r}: {name}'s {what} {x!r} is not a finite non-negative integer")
    return int(x)


def _check_count(pair, utt: str, name: str) -> None:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise NotComparable(f"utterance {utt!r}: {name}'s counts {pair!r} are not a pair (errors, reference tokens)")
    _count(pair[0], "error count", utt, name)
    _count(pair[1], "reference length", utt, name)


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
            over the same utterances (at least :data:`MIN_PAIRED_UTTS`) with the same reference
            lengths; counts are non-negative integers (``2.0`` is read as 2).
        n_resamples: bootstrap resamples (each draws ``len(a)`` utterances with replacement).
        seed: seed of the generator (numpy PCG64); the same seed gives the same interval.
        level: coverage of the percentile interval, in (0, 1).
        chunk: resamples drawn at once (memory: ``chunk x len(a)`` indices).

    Returns:
        a :class:`PairedBootstrap`.

    Raises:
        NotComparable (a ValueError): the utterance sets differ (the first missing ids are named),
            fewer than :data:`MIN_PAIRED_UTTS` utterances, a count that is not a finite non-negative
            integer (``0.5``, ``-5``, NaN; the utterance and system are named), an utterance with
            different reference lengths in ``a`` and ``b`` (different references), no reference token.
        ValueError: ``n_resamples < 1`` or ``level`` outside (0, 1).
    """
    _check_options(n_resamples, level)
    utts = _paired_utts(a, b)
    for name, counts in (("A", a), ("B", b)):
        for u in utts:
            _check_count(counts[u], u, name)
    bad = [u for u in utts if a[u][1] != b[u][1]]
    if bad:
        raise NotComparable(f"{len(bad)} utterance(s) have different reference lengths in A and B "
                            f"(different references?), e.g. {bad[0]!r}: {a[bad[0]][1]} vs {b[bad[0]][1]}")
    ea = np.array([a[u][0] for u in utts], dtype=np.int64)
    eb = np.array([b[u][0] for u in utts], dtype=np.int64)
    ref = np.array([a[u][1] for u in utts], dtype=np.int64)
    if ref.sum() == 0:
        raise NotComparable("the reference has no token")
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


@dataclass(frozen=True)
class PairedRatioBootstrap:
    """Result of :func:`paired_ratio_bootstrap`, in the unit of the pooled ratio (e.g. dB).

    Attributes:
        ratio_a, ratio_b: pooled ratios (sum of values over sum of weights) of A and B on the full set.
        delta: ``ratio_b - ratio_a`` (negative: B lower).
        interval: the percentile interval of ``delta`` over the resamples.
        level: its coverage (e.g. 0.95).
        n_resamples, num_utts: resamples drawn, utterances in the set.
    """
    ratio_a: float
    ratio_b: float
    delta: float
    interval: tuple[float, float]
    level: float
    n_resamples: int
    num_utts: int


def paired_ratio_bootstrap(a: Mapping[str, tuple[float, int]], b: Mapping[str, tuple[float, int]], *,
                           n_resamples: int = 2000, seed: int = 0, level: float = 0.95) -> PairedRatioBootstrap:
    """Paired utterance-level bootstrap of the difference B - A of two pooled ratios (an MCD pooled over
    frames: the sum over utterances of each utterance's dB summed over its frames, over the frames).

    The test utterances are resampled with replacement, the same resample for both systems (Bisani &
    Ney 2004, applied to a pooled mean instead of an error rate); the interval is the percentile
    interval of the resampled differences. Utterances are taken in ``a``'s order (the resamples index
    them), all ``n_resamples`` drawn at once (memory: ``n_resamples x len(a)`` indices).

    Args:
        a, b: ``{utt: (sum of the values, weight)}`` of the two systems (e.g. ``(mcd_db * n_frames,
            n_frames)``), over the same utterances (at least :data:`MIN_PAIRED_UTTS`) with the same
            weights; sums finite, weights non-negative integers, their total positive.
        n_resamples: bootstrap resamples.
        seed: seed of the generator (numpy PCG64); the same seed gives the same interval.
        level: coverage of the percentile interval, in (0, 1).

    Returns:
        a :class:`PairedRatioBootstrap`.

    Raises:
        NotComparable (a ValueError): the utterance sets differ, fewer than :data:`MIN_PAIRED_UTTS`
            utterances, a sum that is not finite (NaN: the utterance and system are named), a weight
            that is not a non-negative integer, an utterance weighted differently in A and B, no weight.
        ValueError: ``n_resamples < 1`` or ``level`` outside (0, 1).
    """
    _check_options(n_resamples, level)
    _paired_utts(a, b)
    utts = list(a)
    for name, sums in (("A", a), ("B", b)):
        for u in utts:
            pair = sums[u]
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise NotComparable(f"utterance {u!r}: {name}'s {pair!r} is not a pair (sum, weight)")
            v, w = pair
            _count(w, "weight (frames)", u, name)
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v):
                raise NotComparable(f"utterance {u!r}: {name}'s value {v!r} is not a finite number")
    bad = [u for u in utts if int(a[u][1]) != int(b[u][1])]
    if bad:
        raise NotComparable(f"{len(bad)} utterance(s) scored on different numbers of frames in A and B, e.g. "
                            f"{bad[0]!r}: {a[bad[0]][1]} vs {b[bad[0]][1]}")
    ma = np.array([a[u][0] for u in utts], dtype=float)
    mb = np.array([b[u][0] for u in utts], dtype=float)
    n = np.array([a[u][1] for u in utts], dtype=float)
    if n.sum() == 0:
        raise NotComparable("no frame to pool (every utterance has weight 0)")
    ratio_a, ratio_b = ma.sum() / n.sum(), mb.sum() / n.sum()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(utts), size=(n_resamples, len(utts)))
    nr = n[idx].sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a resample of weight-0 utterances only
        d = mb[idx].sum(1) / nr - ma[idx].sum(1) / nr
    d = d[nr > 0]
    alpha = round((1.0 - level) / 2.0, 12)
    lo, hi = np.percentile(d, [100 * alpha, 100 * (1 - alpha)])
    return PairedRatioBootstrap(ratio_a=float(ratio_a), ratio_b=float(ratio_b), delta=float(ratio_b - ratio_a),
                                interval=(float(lo), float(hi)), level=level, n_resamples=n_resamples,
                                num_utts=len(utts))


@dataclass(frozen=True)
class PairedTInterval:
    """Result of :func:`paired_t_interval`, in the unit of the differences.

    Attributes:
        mean: the mean paired difference.
        interval: Student's t interval of the mean, ``None`` with a single difference (no spread to
            estimate).
        level: its coverage (e.g. 0.95).
        num_pairs: the differences it rests on.
    """
    mean: float
    interval: tuple[float, float] | None
    level: float
    num_pairs: int


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom, rounded to 3
    decimals as printed tables give it (``t_quantile(1) == 12.706``, ``t_quantile(10) == 2.228``).

    Raises:
        ValueError: ``df < 1`` or ``level`` outside (0, 1).
    """
    from scipy.stats import t

    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return round(float(t.ppf(1.0 - (1.0 - level) / 2.0, df)), 3)


def paired_t_interval(differences: Sequence[float], level: float = 0.95) -> PairedTInterval:
    """Mean of paired differences (system minus reference, one per unit: a speaker order) and its
    Student's t interval: ``mean +/- t_{n-1} * sd / sqrt(n)``, ``sd`` with ``n - 1`` in the
    denominator, ``t_{n-1}`` from :func:`t_quantile` (the textbook interval of a mean; the units are
    taken as independent, which the caller must judge).

    Args:
        differences: the paired differences, finite numbers (at least one).
        level: coverage, in (0, 1).

    Returns:
        a :class:`PairedTInterval` (``interval`` None for a single difference).

    Raises:
        NotComparable: no difference, or one that is not a finite number.
        ValueError: ``level`` outside (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    given = list(differences)
    if not given:
        raise NotComparable("no paired difference")
    for i, x in enumerate(given):
        if not isinstance(x, numbers.Real) or isinstance(x, bool) or not math.isfinite(x):
            raise NotComparable(f"difference {i + 1} of {len(given)} is {x!r}, not a finite number")
    a = np.asarray(given, dtype=float)
    mean = float(a.mean())
    if len(a) < 2:
        return PairedTInterval(mean=mean, interval=None, level=level, num_pairs=1)
    half = t_quantile(len(a) - 1, level) * a.std(ddof=1) / math.sqrt(len(a))
    return PairedTInterval(mean=mean, interval=(mean - half, mean + half), level=level, num_pairs=len(a))
