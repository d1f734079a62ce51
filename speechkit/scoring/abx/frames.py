"""Items and frames: which frames of its file each ABX item takes, and the frames of the tokens a task scores.

An item's frames are the frames ``i`` of its file whose time ``(i + 0.5) * frame_shift`` lies in
``[onset, offset]`` (ABXpy's and fastabx's convention: frame ``i`` is at ``t_i = dt/2 + i dt``). Items with no
frame centre inside (a phone shorter than a frame shift) take, by default (``empty_items="overlap"``), the frames
whose span ``[i dt, (i + 1) dt)`` overlaps ``(onset, offset)``, clamped to the file; ``empty_items="drop"`` drops
them (counted and warned). See :mod:`speechkit.scoring.abx` for why.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from speechkit.scoring.abx.distances import check_kl_frames
from speechkit.scoring.abx_items import Item
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__package__)  # "speechkit.scoring.abx": every stage logs under the package's name

EMPTY_ITEM_RULES = ("overlap", "drop")
DEFAULT_TOLERANCE = 0.05  # s an item may run past the last frame (features shorter than the audio)
_EXACT_EPS = 1e-9  # frames: float error allowed when placing a time on the frame grid (exact_times)


def select_frames(
    items: Sequence[Item],
    n_frames: Mapping[str, int],
    frame_shift: float,
    tolerance: float = DEFAULT_TOLERANCE,
    source: str = "items",
    empty_items: str = "drop",
    exact_times: bool = False,
) -> np.ndarray:
    """Frame range ``[start, stop)`` of every item: frames whose centre ``(i + 0.5) * frame_shift``
    lies in ``[onset, offset]``; with ``empty_items="overlap"``, an item with no such frame gets the
    frames whose span ``[i * frame_shift, (i + 1) * frame_shift)`` overlaps ``(onset, offset)``
    (at least one; clamped to ``[0, n)``).

    Args:
        items: the items.
        n_frames: frames per file.
        frame_shift: seconds.
        tolerance: seconds an item's offset may pass the end of its file (``n * frame_shift``);
            feature extractors drop the audio's last partial window.
        source: the item file's name, for messages.

        empty_items: ``drop`` (leave ``stop == start``) or ``overlap``.
        exact_times: compare in exact arithmetic (fastabx's decimal slicing: frames
            ``ceil(onset / dt - 1/2) .. floor(offset / dt - 1/2)``, a centre on a boundary inside);
            otherwise the centres ``(i + 0.5) * frame_shift`` are compared as floats, as ABXpy's time
            arrays are (a centre on a boundary is in or out as float rounding falls: 0.695 s at 10 ms
            leaves frame 69, computed at 0.6950000000000001 s, out).

    Returns:
        ``(len(items), 2)`` int64 array; ``stop == start`` for an item with no frame (``drop`` only).

    Raises:
        DataError: an item names a file with no features, or ends beyond its file
            (``offset > n * frame_shift + tolerance``); names the item file line.
    """
    out = np.empty((len(items), 2), dtype=np.int64)
    by_file: dict[str, list[int]] = defaultdict(list)
    for k, it in enumerate(items):
        by_file[it.file].append(k)
    for f, ks in by_file.items():
        n = n_frames.get(f)
        if n is None:
            raise DataError(f"{source}:{items[ks[0]].line}: item names '{f}', which has no features")
        on = np.array([items[k].onset for k in ks])
        off = np.array([items[k].offset for k in ks])
        end = n * frame_shift
        bad = np.nonzero(off > end + tolerance)[0]
        if len(bad):
            it = items[ks[bad[0]]]
            raise DataError(
                f"{source}:{it.line}: item {it.onset}-{it.offset} s ends beyond '{f}' "
                f"({n} frames x {frame_shift} s = {end:.4f} s)"
            )
        if exact_times:  # frame i inside iff i >= on / dt - 1/2 and i <= off / dt - 1/2, in exact arithmetic
            start = np.clip(np.ceil(on / frame_shift - 0.5 - _EXACT_EPS), 0, n).astype(np.int64)
            stop = np.clip(np.floor(off / frame_shift - 0.5 + _EXACT_EPS) + 1, 0, n).astype(np.int64)
            stop = np.maximum(stop, start)
        else:
            t = (np.arange(n) + 0.5) * frame_shift
            start = np.searchsorted(t, on, side="left")
            stop = np.searchsorted(t, off, side="right")
        if empty_items == "overlap":
            empty = np.nonzero(stop <= start)[0]
            if len(empty) and n > 0:
                eps = 1e-9  # a boundary hit by rounding (0.12 / 0.04 = 2.9999999999999996) is not an overlap
                first = np.floor(on[empty] / frame_shift + eps).astype(np.int64)
                last = np.ceil(off[empty] / frame_shift - eps).astype(np.int64)  # exclusive
                first = np.clip(first, 0, n - 1)
                last = np.clip(np.maximum(last, first + 1), 1, n)
                start[empty], stop[empty] = first, last
        elif empty_items != "drop":
            raise ValueError(f"unknown empty_items rule {empty_items!r}, expected one of {', '.join(EMPTY_ITEM_RULES)}")
        out[ks, 0] = start
        out[ks, 1] = stop
    return out


@dataclass
class Selection:
    """The items an ABX task scores and their frames (:func:`select_items`)."""

    kept: list[Item]  # the items that select some frame, in order
    ranges: np.ndarray  # (len(kept), 2) int64: each one's frames [start, stop) in its file
    lengths: np.ndarray  # (len(kept),) int64: stop - start (>= 1)
    n_dropped: int  # items that select no frame (empty_items="drop" only)
    n_overlap: int  # items with no frame centre inside that took their overlapping frame(s)


def select_items(features: Mapping[str, np.ndarray], items: Sequence[Item], frame_shift: float, tolerance: float,
                 source: str, empty_items: str, exact_times: bool) -> Selection:
    """The frames of every item (:func:`select_frames`, first without the overlap rule, to count the items that
    need it), the items that select none left out (warned, with the first few named).

    Raises:
        DataError: an item names a file with no features, or ends beyond its file; the feature files of the items
            differ in dimension.
        ValueError: no item selects any frame.
    """
    files = sorted({it.file for it in items})
    n_frames = {}
    for f in files:
        if f not in features:
            line = next(it.line for it in items if it.file == f)
            raise DataError(f"{source}:{line}: item names '{f}', which has no features")
        n_frames[f] = len(features[f])
    ranges = select_frames(items, n_frames, frame_shift, tolerance, source, "drop", exact_times)
    n_overlap = 0
    if empty_items == "overlap":
        n_overlap = int((ranges[:, 1] <= ranges[:, 0]).sum())
        if n_overlap:
            ranges = select_frames(items, n_frames, frame_shift, tolerance, source, "overlap", exact_times)
            logger.info("%d of %d items hold no frame centre (frame shift %g s) and take the frame(s) "
                        "overlapping them", n_overlap, len(items), frame_shift)
    lengths = ranges[:, 1] - ranges[:, 0]
    keep = np.nonzero(lengths > 0)[0]
    n_dropped = len(items) - len(keep)
    if n_dropped:
        examples = ", ".join(f"{items[k].file} {items[k].onset}-{items[k].offset}"
                             for k in np.nonzero(lengths == 0)[0][:3])
        logger.warning("%d of %d items select no frame (frame shift %g s) and are dropped, e.g. %s",
                       n_dropped, len(items), frame_shift, examples)
    kept = [items[k] for k in keep]
    ranges, lengths = ranges[keep], lengths[keep]

    if not kept:
        raise ValueError("no item selects any frame")
    dims = {features[f].shape[1] for f in files}
    if len(dims) != 1:
        raise DataError(f"feature files have different dimensions: {sorted(dims)}")
    return Selection(kept, ranges, lengths, n_dropped, n_overlap)


def token_frames(features: Mapping[str, np.ndarray], sel: Selection, used: np.ndarray, distance: str,
                 source: str) -> np.ndarray:
    """The frames of the tokens ``used`` (indices into ``sel.kept``), one after the other: ``(sum of their
    lengths, D)`` float64.

    Raises:
        DataError: NaN or Inf in a token's frames, or (``kl``) a negative or all-zero frame; names the feature
            file, the frames and the item's line.
    """
    kept, ranges = sel.kept, sel.ranges
    chunks = [np.asarray(features[kept[k].file][ranges[k, 0] : ranges[k, 1]], dtype=np.float64) for k in used]
    allf = np.concatenate(chunks)
    if not np.isfinite(allf).all() or (distance == "kl" and ((allf < 0).any() or (allf.sum(1) <= 0).any())):
        for k, mat in zip(used, chunks):  # find the culprit for the message
            it, (s, e) = kept[k], ranges[k]
            where = f"features of '{it.file}' frames {s}-{e} (item at {source}:{it.line})"
            if not np.isfinite(mat).all():
                raise DataError(f"{where}: NaN or Inf")
            if distance == "kl":
                check_kl_frames(mat, where)
    return allf
