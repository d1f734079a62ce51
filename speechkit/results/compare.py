"""Paired comparisons of two systems on a results page: one result type, two methods.

A comparison is always *system minus reference*, measured on the same units (test utterances, speaker
orders), so that what the units share cancels:

- :func:`compare`, the paired bootstrap over utterances (Bisani & Ney, ICASSP 2004;
  :mod:`speechkit.scoring.significance`): ``"error_rate"`` for pooled error rates (WER/CER from
  per-utterance ``(errors, reference tokens)``), ``"pooled_ratio"`` for pooled means (an MCD from
  per-utterance ``(dB summed over frames, frames)``);
- :func:`t_interval`, Student's t interval of the mean of a few paired differences, each a whole run
  (a continual-learning run over one speaker order), where there are too few units to resample.

Both give a :class:`PairedComparison`. What they cannot support they refuse with
:class:`~speechkit.scoring.significance.NotComparable` (a ``ValueError`` saying why), for the page to
print instead of the comparison.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from speechkit.scoring.significance import (NotComparable, paired_bootstrap, paired_ratio_bootstrap,
                                            paired_t_interval)

__all__ = ["PairedComparison", "compare", "t_interval", "NotComparable", "STATISTICS"]

#: The statistics :func:`compare` resamples.
STATISTICS = ("error_rate", "pooled_ratio")


@dataclass(frozen=True)
class PairedComparison:
    """System minus reference, with its interval.

    Attributes:
        method: ``"bootstrap"`` (percentile interval over resamples of the units) or ``"t"``.
        delta: system minus reference (points for error rates, the ratio's unit for pooled ratios, the
            differences' unit for ``"t"``): negative when the system's figure is lower.
        interval: the interval of ``delta`` at ``level``; None when it cannot be estimated (one difference).
        level: the interval's coverage (0.95).
        n: the paired units (utterances, orders).
        reference, system: each one's figure on the whole set (bootstrap; None for ``"t"``).
        prob_system_better: the share of resamples with fewer errors for the system (``"error_rate"`` only:
            Bisani & Ney's probability of improvement).
        n_resamples: the resamples drawn (bootstrap).
    """
    method: str
    delta: float
    interval: tuple[float, float] | None
    level: float
    n: int
    reference: float | None = None
    system: float | None = None
    prob_system_better: float | None = None
    n_resamples: int | None = None

    def direction(self) -> int:
        """``-1`` when the interval lies below 0 (the system's figure lower), ``+1`` above 0, ``0`` when it holds
        0 or there is no interval (within noise)."""
        if self.interval is None:
            return 0
        lo, hi = self.interval
        return -1 if hi < 0 else 1 if lo > 0 else 0


def compare(reference: Mapping[str, tuple], system: Mapping[str, tuple], *, statistic: str,
            n_resamples: int = 1000, seed: int = 0, level: float = 0.95) -> PairedComparison:
    """The paired bootstrap of system minus reference over the utterances both were scored on.

    Args:
        reference, system: ``{utt: (errors, reference tokens)}`` for ``"error_rate"``
            (:func:`speechkit.scoring.significance.read_per_utt_counts`), ``{utt: (sum of the values,
            weight)}`` for ``"pooled_ratio"``; the same utterances (at least two) in both.
        statistic: one of :data:`STATISTICS`.
        n_resamples: resamples drawn; the same resample is used for both systems.
        seed: seed of the generator (numpy PCG64): the same seed gives the same interval.
        level: coverage of the percentile interval, in (0, 1).

    Returns:
        a :class:`PairedComparison` (``method="bootstrap"``; error rates in percent, delta in points).

    Raises:
        NotComparable (a ValueError): the utterance sets differ, fewer than two, a count or value that is
            not finite (the utterance and the system, ``A`` = reference, ``B`` = system, are named).
        ValueError: an unknown ``statistic``, ``n_resamples < 1`` or ``level`` outside (0, 1).
    """
    if statistic == "error_rate":
        r = paired_bootstrap(reference, system, n_resamples=n_resamples, seed=seed, level=level)
        return PairedComparison("bootstrap", r.delta, r.interval, r.level, r.num_utts, r.rate_a, r.rate_b,
                                r.prob_b_better, r.n_resamples)
    if statistic == "pooled_ratio":
        r = paired_ratio_bootstrap(reference, system, n_resamples=n_resamples, seed=seed, level=level)
        return PairedComparison("bootstrap", r.delta, r.interval, r.level, r.num_utts, r.ratio_a, r.ratio_b,
                                None, r.n_resamples)
    raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")


def t_interval(differences: Sequence[float], level: float = 0.95) -> PairedComparison:
    """The mean of paired differences (system minus reference, one per unit) and its Student's t interval
    (:func:`speechkit.scoring.significance.paired_t_interval`; ``interval`` None for one difference).

    Raises:
        NotComparable: no difference, or one that is not a finite number.
        ValueError: ``level`` outside (0, 1).
    """
    r = paired_t_interval(differences, level)
    return PairedComparison("t", r.mean, r.interval, r.level, r.num_pairs)
