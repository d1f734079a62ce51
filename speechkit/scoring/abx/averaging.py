"""Averaging: cell scores into the ABX error, under either ZeroSpeech convention (fastabx's pooling).

* ``zr2019`` (ABXpy's ``analyze`` and zerospeech2020's ``_average``): the triplets of one (context, phone pair,
  speaker(s)) cell averaged, then over contexts, then over speakers (ordered (A/B speaker, X speaker) pairs when
  across), then over ordered phone pairs.
* ``zr2021`` (Libri-Light's ``eval_ABX``, as ``fastabx.zerospeech_abx``): per (phone pair, A/B speaker) the cells
  averaged over contexts and X speakers together, then over A/B speakers, then over phone pairs (within speakers
  the same as ``zr2019``).

Error = 100 * (1 - mean). The result keeps the per-speaker means (:attr:`AbxResult.speaker_scores`) that the
speaker bootstrap (:mod:`speechkit.scoring.abx.bootstrap`) resamples.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from speechkit.scoring.abx.arrays import run_bounds

CONVENTIONS = ("zr2019", "zr2021")


@dataclass
class PhonePairScore:
    """The ABX figure of one ordered phone pair (A/X phone, B phone)."""

    phone_1: str
    phone_2: str
    error: float  # percent
    n_triplets: int
    n_cells: int  # (context, speaker(s)) cells averaged


@dataclass
class AbxResult:
    """Result of :func:`speechkit.scoring.abx.abx_error`; ``error`` is in percent (lower is better)."""

    error: float
    mode: str
    distance: str
    normalize: bool
    frame_shift: float
    n_items: int
    n_items_dropped: int
    n_triplets: int
    n_cells: int
    n_phone_pairs: int
    n_dtw_pairs: int
    by_phone_pair: list[PhonePairScore] = field(default_factory=list)
    n_items_overlap: int = 0  # items with no frame centre inside that took their overlapping frame(s)
    empty_items: str = "overlap"
    convention: str = "zr2019"  # the averaging: CONVENTIONS
    # (A/X phone, B phone) -> speaker key ((A/B speaker, X speaker) across, (speaker,) within) -> the
    # mean over contexts of its cells' scores (accuracies in [0, 1]); what bootstrap_interval resamples
    speaker_scores: dict[tuple[str, str], dict[tuple[str, ...], float]] = field(default_factory=dict, repr=False)
    # the same keys -> how many cells (contexts) that mean is over (zr2021 across weighs the keys by it)
    speaker_counts: dict[tuple[str, str], dict[tuple[str, ...], int]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (per-pair breakdown included, per-speaker scores left out)."""
        d = asdict(self)
        d.pop("speaker_scores")
        d.pop("speaker_counts")
        return d

    def summary(self) -> str:
        """The ZeroSpeech-style figure line, e.g. ``ABX error (across speakers): 21.34 %``."""
        what = "across speakers" if self.mode == "across" else "within speakers"
        return f"ABX error ({what}): {self.error:.2f} %"


def average(cells, cell_group, cell_spk_x, cell_n, score, mode, convention, distance, normalize, frame_shift,
            n_items, n_dropped, n_overlap, empty_items, n_dtw_pairs) -> AbxResult:
    """Average the cell scores under ``convention`` (module docstring) into an :class:`AbxResult`.

    ``cells``: the cell groups (:class:`~speechkit.scoring.abx.cells.CellGroup`); per cell, ``(C,)`` arrays of
    :func:`~speechkit.scoring.abx.counting.count_triplets`: its group (``cell_group``), the index of its X speaker
    in its group's ``x_spk`` (``cell_spk_x``), its triplets (``cell_n``) and its score in [0, 1] (``score``). The
    other arguments are copied into the result."""
    across = mode == "across"
    pairs = sorted({(c.p1, c.p2) for c in cells})
    pair_index = {k: i for i, k in enumerate(pairs)}
    g_pair = np.array([pair_index[(c.p1, c.p2)] for c in cells], dtype=np.int64)
    # across, cells share their X speaker lists (enumerate_cells); within, X's speaker is A's
    x_lists = {id(c.x_spk): c.x_spk for c in cells} if across else {}
    speakers = sorted({c.spk for c in cells} | {s for xs in x_lists.values() for s in xs})
    spk_index = {s: i for i, s in enumerate(speakers)}
    g_spk = np.array([spk_index[c.spk] for c in cells], dtype=np.int64)
    c_pair, c_spk = g_pair[cell_group], g_spk[cell_group]
    if across:
        x_ids = {k: np.array([spk_index[s] for s in xs], dtype=np.int64) for k, xs in x_lists.items()}
        c_spk_x = np.concatenate([x_ids[id(c.x_spk)] for c in cells])
    else:
        c_spk_x = np.full(len(score), -1, dtype=np.int64)
    n_spk = len(speakers)

    def mean_by(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct keys in order of first appearance, the mean of the values of each (summed in order, as
        Python's ``sum``: the same bits as averaging lists built in that order), and how many values each has."""
        uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        inv = rank[inv.reshape(-1)]
        counts = np.bincount(inv)
        return uniq[np.argsort(rank)], np.bincount(inv, weights=values) / counts, counts

    # per (phone pair, speaker key): the mean over contexts of the key's cells, the key being the (A/B speaker,
    # X speaker) pair across, the speaker within (zr2019's level, and what the bootstrap resamples)
    key_x = c_spk_x + 1 if across else np.zeros_like(c_spk)
    keys, key_means, key_counts = mean_by((c_pair * n_spk + c_spk) * (n_spk + 1) + key_x, score)
    k_pair = keys // ((n_spk + 1) * n_spk)
    k_spk = (keys // (n_spk + 1)) % n_spk
    k_x = keys % (n_spk + 1) - 1
    # {phone pair: {speaker key: value}}, both levels in order of first appearance (the keys' order), one dict per
    # phone pair from its run of keys (no Python loop over the keys: hundreds of thousands on a large task)
    names = ([(a, x) for a in speakers for x in speakers] if across else [(a,) for a in speakers])
    code = k_spk * n_spk + k_x if across else k_spk
    by_pair = np.argsort(k_pair, kind="stable")
    kp = k_pair[by_pair]
    bounds = run_bounds(kp)
    starts, ends = bounds[:-1], bounds[1:]
    code_l, mean_l, count_l = (a[by_pair].tolist() for a in (code, key_means, key_counts))
    speaker_scores: dict[tuple[str, str], dict[tuple[str, ...], float]] = {}
    speaker_counts: dict[tuple[str, str], dict[tuple[str, ...], int]] = {}
    for g in np.argsort(by_pair[starts], kind="stable").tolist():  # phone pairs by first appearance
        a, b = int(starts[g]), int(ends[g])
        spk_keys = [names[c] for c in code_l[a:b]]
        speaker_scores[pairs[int(kp[a])]] = dict(zip(spk_keys, mean_l[a:b]))
        speaker_counts[pairs[int(kp[a])]] = dict(zip(spk_keys, count_l[a:b]))
    if across and convention == "zr2021":  # the mean over contexts and X speakers together, per A/B speaker
        keys, key_means, _ = mean_by(c_pair * n_spk + c_spk, score)
        k_pair = keys // n_spk
    p_ids, p_acc, _ = mean_by(k_pair, key_means)
    pair_acc = np.empty(len(pairs))
    pair_acc[p_ids] = p_acc
    pair_trip = np.bincount(c_pair, weights=cell_n, minlength=len(pairs))
    pair_cells = np.bincount(c_pair, minlength=len(pairs))
    per_pair = [PhonePairScore(p1, p2, float(100.0 * (1.0 - acc)), int(nt), int(nc))
                for (p1, p2), acc, nt, nc in zip(pairs, pair_acc.tolist(), pair_trip.tolist(), pair_cells.tolist())]
    error = float(100.0 * (1.0 - sum(pair_acc.tolist()) / len(pairs)))
    return AbxResult(
        error=error,
        mode=mode,
        distance=distance,
        normalize=normalize,
        frame_shift=frame_shift,
        n_items=n_items,
        n_items_dropped=n_dropped,
        n_items_overlap=n_overlap,
        empty_items=empty_items,
        speaker_scores=speaker_scores,
        speaker_counts=speaker_counts,
        n_triplets=int(cell_n.sum()),
        n_cells=len(score),
        n_phone_pairs=len(per_pair),
        n_dtw_pairs=n_dtw_pairs,
        by_phone_pair=per_pair,
        convention=convention,
    )
