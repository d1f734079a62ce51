"""Statistics of an ABX error: a speaker-level percentile bootstrap interval, and the paired bootstrap of the
difference between two systems scored on the same triplets.

Speakers are the sampling unit (ABX items of one speaker are not independent; speakers are the population a test
set samples): a replicate recomputes the error with every speaker's per-speaker means
(:attr:`~speechkit.scoring.abx.averaging.AbxResult.speaker_scores`) weighted by how often the speaker was drawn,
through the averaging of its convention. This is not :mod:`speechkit.scoring.significance`'s resampling (utterances
resampled, pooled error counts): the two differ in unit and estimator, so only the refusal of what cannot be
compared is shared (:class:`~speechkit.scoring.significance.NotComparable`).
"""
from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from speechkit.scoring.abx.averaging import AbxResult
from speechkit.scoring.significance import NotComparable
from speechkit.utils.errors import naming_parameters

# scipy.sparse is imported where used (heavy): only a bootstrap needs it.

logger = logging.getLogger(__package__)  # "speechkit.scoring.abx": every stage logs under the package's name


@dataclass
class BootstrapInterval:
    """Percentile bootstrap interval of an ABX error (:func:`bootstrap_interval`); errors in percent."""

    low: float
    high: float
    level: float  # 0.95 for a 95 % interval
    std: float  # standard deviation of the replicates
    n_resamples: int  # replicates drawn
    n_valid: int  # replicates in which some phone pair kept a speaker (the others are left out)
    seed: int
    unit: str = "speaker"
    errors: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # (n_valid,) replicates
    n_distinct: int = 0  # distinct speaker resamples among the n_valid (1: the interval cannot vary)
    n_speakers: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("errors")
        return d

    def summary(self) -> str:
        """E.g. ``95 % interval (bootstrap over speakers, 1000 resamples): [20.10, 22.45] %``; with
        replicates left out ``(..., 497 of 1000 resamples used, 503 drew a single speaker)``."""
        return (f"{100 * self.level:g} % interval (bootstrap over {self.unit}s, "
                f"{_resamples_used(self.n_valid, self.n_resamples)}): [{self.low:.2f}, {self.high:.2f}] %"
                + _no_variation(self.n_distinct, self.n_speakers, self.unit))


class TooFewResamplesError(ValueError):
    """Too few usable bootstrap replicates for the interval asked for (see :func:`min_usable_resamples`).

    Attributes: ``n_valid`` (usable), ``n_resamples`` (drawn), ``minimum``.
    """

    def __init__(self, message: str, n_valid: int, n_resamples: int, minimum: int):
        super().__init__(message)
        self.n_valid, self.n_resamples, self.minimum = n_valid, n_resamples, minimum


def min_usable_resamples(level: float = 0.95) -> int:
    """Fewest usable replicates for a percentile interval of coverage ``level``: ``2 / (1 - level)``
    (40 for 95 %), so that each tail, ``(1 - level) / 2`` of the replicates, holds at least one
    replicate. With fewer, the bounds are the most extreme replicates (the range of a handful of
    draws), not percentiles."""
    return math.ceil(round(2.0 / (1.0 - level), 6))


def _resamples_used(n_valid: int, n_resamples: int) -> str:
    if n_valid == n_resamples:
        return f"{n_resamples} resamples"
    return f"{n_valid} of {n_resamples} resamples used, {n_resamples - n_valid} drew a single speaker"


def _no_variation(n_distinct: int, n_speakers: int, unit: str) -> str:
    if n_distinct != 1:
        return ""
    return (f"; every usable resample is the original {n_speakers} {unit}s, so the interval cannot vary "
            "(too few speakers to say anything)")


def _usable(kind: str, valid: np.ndarray, n_resamples: int, level: float, min_usable: int | None) -> None:
    """Raise :class:`TooFewResamplesError` when fewer than the minimum replicates are usable."""
    minimum = min_usable_resamples(level) if min_usable is None else min_usable
    if len(valid) < minimum:
        dropped = n_resamples - len(valid)
        raise TooFewResamplesError(
            f"only {len(valid)} of {n_resamples} speaker resamples are usable"
            + (f" ({dropped} drew a single speaker and were left out)" if dropped else "")
            + f"; a {100 * level:g} % {kind} needs at least {minimum} (2 / (1 - level), so that each tail holds "
            "a replicate): ask for more resamples" + (" (with few speakers many are left out)" if dropped else ""),
            len(valid), n_resamples, minimum)


def _distinct(draws: np.ndarray, valid: np.ndarray) -> int:
    """How many different speaker multisets the usable rows of ``draws`` are."""
    rows = np.sort(draws[valid], axis=1)
    return len(np.unique(rows, axis=0)) if len(rows) else 0


def bootstrap_interval(result: AbxResult, n_resamples: int = 1000, seed: int = 0,
                       level: float = 0.95, min_usable: int | None = None) -> BootstrapInterval:
    """Speaker-level percentile bootstrap of the ABX error of ``result``.

    Speakers are the sampling unit (ABX items of one speaker are not independent; speakers are the
    population a test set samples). Procedure, exactly (so that it can be replayed):

    1. ``S`` = the speakers of ``result.speaker_scores`` in sorted order;
       ``draws = numpy.random.default_rng(seed).integers(0, S, size=(n_resamples, S))``: each row is
       one resample of ``S`` speakers with replacement; ``m_s`` = how often speaker ``s`` was drawn.
    2. A replicate recomputes the error with every speaker's scores repeated ``m_s`` times, each copy
       a distinct speaker: within speakers, speaker key ``(s,)`` gets weight ``m_s``; across, key
       ``(a, x)`` gets ``m_a * m_x`` (two copies of one speaker are never an across pair). Per phone
       pair the weighted mean over speaker keys, then the mean over the phone pairs that kept some
       weight -- the averaging of :func:`~speechkit.scoring.abx.abx_error` (contexts, then speakers, then phone pairs).
    3. The interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles (numpy's linear
       interpolation) of the replicates. Replicates in which no phone pair kept a speaker key
       (across, all draws one speaker) are left out and counted: ``n_valid`` of ``n_resamples``
       are used, and the summary says so. With two speakers across, every usable replicate is the
       original pair (``n_distinct`` 1): the interval has no width, and the summary says it
       cannot vary.

    Args:
        result: an :class:`AbxResult` of :func:`~speechkit.scoring.abx.abx_error` (with its ``speaker_scores``).
        n_resamples: number of replicates (>= 1; 1000 is usual).
        seed: seed of the resampling.
        level: coverage in ``(0, 1)``.
        min_usable: fewest usable replicates (default :func:`min_usable_resamples`, 40 for 95 %).

    Raises:
        ValueError: bad arguments, a result without speaker scores, or no valid replicate.
        TooFewResamplesError: fewer than ``min_usable`` usable replicates (says how many, and why).
    """
    _check_bootstrap_args(n_resamples, level)
    speakers = _result_speakers(result)
    draws = np.random.default_rng(seed).integers(0, len(speakers), size=(n_resamples, len(speakers)))
    errors = _replicate_errors(result, speakers, draws)
    ok = np.isfinite(errors)
    valid = errors[ok]
    if not len(valid):
        raise ValueError("no bootstrap replicate kept a phone pair (too few speakers to resample)")
    if len(valid) < n_resamples:
        logger.warning("%d of %d bootstrap replicates drew a single speaker and are left out",
                       n_resamples - len(valid), n_resamples)
    _usable("interval", valid, n_resamples, level, min_usable)
    low, high = np.percentile(valid, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return BootstrapInterval(low=float(low), high=float(high), level=level, std=float(valid.std()),
                             n_resamples=n_resamples, n_valid=len(valid), seed=seed, errors=valid,
                             n_distinct=_distinct(draws, ok), n_speakers=len(speakers))


@dataclass
class PairedDifference:
    """ABX error of a system minus that of a reference on the same triplets, with a paired bootstrap
    interval (:func:`paired_bootstrap_difference`); in percentage points, negative = the system is better."""

    difference: float  # result.error - reference.error
    low: float
    high: float
    level: float
    std: float
    share_better: float  # share of the replicates in which the system's error is below the reference's
    n_resamples: int
    n_valid: int
    seed: int
    unit: str = "speaker"
    differences: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # (n_valid,) replicates
    n_distinct: int = 0  # distinct speaker resamples among the n_valid
    n_speakers: int = 0

    @property
    def significant(self) -> bool:
        """True when the interval excludes 0 (a gain or a loss beyond speaker-sampling noise)."""
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("differences")
        d["significant"] = self.significant
        return d

    def summary(self) -> str:
        """E.g. ``difference -1.63 points, 95 % paired interval (bootstrap over speakers, 1000 resamples):
        [-2.71, -0.52]``."""
        return (f"difference {self.difference:+.2f} points, {100 * self.level:g} % paired interval (bootstrap over "
                f"{self.unit}s, {_resamples_used(self.n_valid, self.n_resamples)}): "
                f"[{self.low:+.2f}, {self.high:+.2f}]")


def paired_bootstrap_difference(result: AbxResult, reference: AbxResult, n_resamples: int = 1000, seed: int = 0,
                                level: float = 0.95, min_usable: int | None = None) -> PairedDifference:
    """Paired speaker-level bootstrap of ``result.error - reference.error``.

    Both results must be scored on the same triplets (the same item file, mode and empty-item rule):
    each replicate draws one speaker resample -- exactly the draws of :func:`bootstrap_interval` with
    the same ``seed`` -- and recomputes both errors on it, so the speaker sampling that moves both
    systems together cancels in their difference. The interval is the percentile interval of the
    replicate differences; a difference whose interval excludes 0 is beyond speaker-sampling noise
    (the test set's speakers as a sample of a population of speakers; the training run's own
    randomness is not in it).

    Args:
        result: the system's :class:`AbxResult` (with its ``speaker_scores``).
        reference: the reference system's result on the same items.
        n_resamples: number of replicates (>= 1; 1000 is usual).
        seed: seed of the resampling.
        level: coverage in ``(0, 1)``.
        min_usable: fewest usable replicates (default :func:`min_usable_resamples`, 40 for 95 %).

    Raises:
        ValueError: bad arguments, results without speaker scores, or no valid replicate.
        NotComparable (a ValueError, :mod:`speechkit.scoring.significance`'s): results that are not on the same
            triplets (mode, speakers, phone pairs or triplet count differ) or under different conventions, or
            usable replicates that are all the same speakers (two speakers across: every one is
            the original pair, so the interval has no width and no verdict can be drawn from it).
        TooFewResamplesError: fewer than ``min_usable`` usable replicates (says how many, and why).
    """
    _check_bootstrap_args(n_resamples, level)
    for what, r in (("result", result), ("reference", reference)):
        if not r.speaker_scores:
            raise ValueError(f"the ABX {what} has no per-speaker scores to resample")
    if result.mode != reference.mode:
        raise NotComparable(f"cannot pair an ABX {result.mode} result with a {reference.mode} one")
    if result.convention != reference.convention:
        raise NotComparable(f"cannot pair an ABX result under {result.convention} with one under "
                            f"{reference.convention}")
    speakers = _result_speakers(result)
    if speakers != _result_speakers(reference) or set(result.speaker_scores) != set(reference.speaker_scores) \
            or result.n_triplets != reference.n_triplets:
        raise naming_parameters(NotComparable(
            "the two ABX results are not on the same triplets (speakers, phone pairs or triplet counts differ: "
            f"{result.n_triplets} vs {reference.n_triplets} triplets); score both on one item file with one "
            "`empty_items` rule"))
    draws = np.random.default_rng(seed).integers(0, len(speakers), size=(n_resamples, len(speakers)))
    diff = _replicate_errors(result, speakers, draws) - _replicate_errors(reference, speakers, draws)
    ok = np.isfinite(diff)
    valid = diff[ok]
    if not len(valid):
        raise ValueError("no bootstrap replicate kept a phone pair (too few speakers to resample)")
    if len(valid) < n_resamples:
        logger.warning("%d of %d bootstrap replicates drew a single speaker and are left out",
                       n_resamples - len(valid), n_resamples)
    _usable("paired interval", valid, n_resamples, level, min_usable)
    n_distinct = _distinct(draws, ok)
    if n_distinct == 1:
        raise NotComparable(f"every usable speaker resample is the original {len(speakers)} speakers, so a paired "
                            "interval cannot vary: no verdict on speaker-sampling noise can be drawn (too few "
                            "speakers)")
    low, high = np.percentile(valid, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return PairedDifference(difference=float(result.error - reference.error), low=float(low), high=float(high),
                            level=level, std=float(valid.std()), share_better=float(np.mean(valid < 0)),
                            n_resamples=n_resamples, n_valid=len(valid), seed=seed, differences=valid,
                            n_distinct=n_distinct, n_speakers=len(speakers))


def _check_bootstrap_args(n_resamples: int, level: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _result_speakers(result: AbxResult) -> list[str]:
    if not result.speaker_scores:
        raise ValueError("the ABX result has no per-speaker scores to resample")
    return sorted({s for scores in result.speaker_scores.values() for key in scores for s in key})


def _replicate_errors(result: AbxResult, speakers: list[str], draws: np.ndarray) -> np.ndarray:
    """The ABX error (percent) of ``result`` on each speaker resample (rows of ``draws``, indices into
    ``speakers``); NaN where no phone pair kept a speaker key."""
    import scipy.sparse

    across = result.mode == "across"
    spk_index = {s: i for i, s in enumerate(speakers)}
    pair_id, sa, sx, score, count = [], [], [], [], []
    for p, key in enumerate(sorted(result.speaker_scores)):
        for spk, acc in result.speaker_scores[key].items():
            pair_id.append(p)
            sa.append(spk_index[spk[0]])
            sx.append(spk_index[spk[1]] if across else -1)
            score.append(acc)
            count.append(result.speaker_counts.get(key, {}).get(spk, 1))
    n_pairs = len(result.speaker_scores)
    pair_id, sa, sx, score, count = map(np.asarray, (pair_id, sa, sx, score, count))
    if across and getattr(result, "convention", "zr2019") == "zr2021":
        return _replicate_errors_zr2021(pair_id, sa, sx, score, count, n_pairs, len(speakers), draws)
    pair_sum = scipy.sparse.csr_matrix((np.ones(len(pair_id)), (pair_id, np.arange(len(pair_id)))),
                                       shape=(n_pairs, len(pair_id)))  # sums entries per phone pair
    n_spk = len(speakers)
    n_resamples = len(draws)
    errors = np.empty(n_resamples)
    chunk = max(1, (1 << 22) // max(1, len(score)))
    for start in range(0, n_resamples, chunk):
        d = draws[start:start + chunk]
        m = np.zeros((len(d), n_spk))
        np.add.at(m, (np.repeat(np.arange(len(d)), n_spk), d.ravel()), 1.0)
        w = m[:, sa] * m[:, sx] if across else m[:, sa]  # (c, E)
        num = np.asarray(pair_sum @ (w * score).T).T  # (c, n_pairs)
        den = np.asarray(pair_sum @ w.T).T
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = num / den
        kept = den > 0
        n_kept = kept.sum(1)
        errors[start:start + chunk] = np.where(
            n_kept > 0, 100.0 * (1.0 - np.where(kept, acc, 0.0).sum(1) / np.maximum(n_kept, 1)), np.nan)
    return errors


def _replicate_errors_zr2021(pair_id, sa, sx, score, count, n_pairs, n_spk, draws) -> np.ndarray:
    """:func:`_replicate_errors` for zr2021 across: per (phone pair, A/B speaker copy) the mean of the cells
    over contexts and X speakers, each X speaker's ``count`` cells (mean ``score``) weighted by its copies;
    then the mean over the A/B speaker copies, then over the phone pairs that kept some."""
    import scipy.sparse

    g_keys, g_of = np.unique(pair_id * n_spk + sa, return_inverse=True)  # (phone pair, A/B speaker) groups
    g_of = g_of.reshape(-1)
    g_pair, g_spk = g_keys // n_spk, g_keys % n_spk
    to_group = scipy.sparse.csr_matrix((np.ones(len(g_of)), (g_of, np.arange(len(g_of)))),
                                       shape=(len(g_keys), len(g_of)))
    to_pair = scipy.sparse.csr_matrix((np.ones(len(g_keys)), (g_pair, np.arange(len(g_keys)))),
                                      shape=(n_pairs, len(g_keys)))
    errors = np.empty(len(draws))
    chunk = max(1, (1 << 22) // max(1, len(score)))
    for start in range(0, len(draws), chunk):
        d = draws[start:start + chunk]
        m = np.zeros((len(d), n_spk))
        np.add.at(m, (np.repeat(np.arange(len(d)), n_spk), d.ravel()), 1.0)
        wx = m[:, sx] * count  # (c, E): cells of each entry, times the copies of its X speaker
        num = np.asarray(to_group @ (wx * score).T).T  # (c, G)
        den = np.asarray(to_group @ wx.T).T
        with np.errstate(invalid="ignore", divide="ignore"):
            val = np.where(den > 0, num / den, 0.0)
        wa = m[:, g_spk] * (den > 0)  # copies of the A/B speaker, where it kept some X
        pnum = np.asarray(to_pair @ (wa * val).T).T  # (c, P)
        pden = np.asarray(to_pair @ wa.T).T
        kept = pden > 0
        n_kept = kept.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(kept, pnum / pden, 0.0)
        errors[start:start + chunk] = np.where(n_kept > 0, 100.0 * (1.0 - acc.sum(1) / np.maximum(n_kept, 1)), np.nan)
    return errors
