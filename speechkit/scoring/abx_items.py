"""ABX item files (the ZeroSpeech / ABXpy ``.item`` format) and building them from phone alignments.

An item file is a header line then one item (a phone token) per line::

    #file onset offset #phone prev-phone next-phone speaker
    fvmh0_sa1 0.4882500 0.5941875 sh h# iy fvmh0

``file`` is the utterance id (the feature file without ``.txt``), ``onset``/``offset`` are in
seconds. The header names the columns as ABXpy does: the label after the second ``#`` is the
"on" label (the phone), the last column is the speaker and every column in between is context
(ZeroSpeech: ``prev-phone next-phone``; a single ``context`` column is accepted too).

Phone alignments (``phone_alignments`` in a data directory, as the corpus preparers write it) are
``<utt> <start-s> <end-s> <phone>`` lines. :func:`make_abx_items` turns them into one item per
phone, with the phones before and after it in the same utterance as context.
"""
from __future__ import annotations

import logging
import math
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, read_lines
from speechkit.utils.perf import gc_paused

logger = logging.getLogger(__name__)

ITEM_HEADER = "#file onset offset #phone prev-phone next-phone speaker"
DEFAULT_EXCLUDE_PHONES = ("h#", "pau", "epi", "sil")
BOUNDARY = "SIL"


@dataclass(frozen=True)
class Item:
    """One ABX item: a phone token of an utterance.

    Attributes:
        file: utterance id (feature file name without ``.txt``).
        onset: start time, seconds.
        offset: end time, seconds.
        phone: the "on" label.
        context: the "by" labels (ZeroSpeech: ``(prev_phone, next_phone)``).
        speaker: the speaker label ("across" / "by" for within).
        line: 1-based line in the item file (0 when built in memory), for error messages.
    """

    file: str
    onset: float
    offset: float
    phone: str
    context: tuple[str, ...]
    speaker: str
    line: int = 0


@gc_paused
def read_item_file(path: str | os.PathLike) -> list[Item]:
    """Parse an item file.

    Raises:
        FileNotFoundError: no such file.
        DataError: a bad header, a line with the wrong number of columns, a non-numeric or
            non-finite time, or ``offset < onset``; the message names file and line.
    """
    path = Path(path)
    lines = read_lines(path)
    if not lines or not lines[0].startswith("#file"):
        raise DataError(f"{path}:1: expected a header like '{ITEM_HEADER}'")
    cols = lines[0].split()
    if len(cols) < 5 or cols[1:3] != ["onset", "offset"] or not cols[3].startswith("#"):
        raise DataError(
            f"{path}:1: header must be '#file onset offset #<phone> [context columns...] <speaker>' "
            f"(e.g. '{ITEM_HEADER}'), got {lines[0]!r}"
        )
    ncol = len(cols)
    items: list[Item] = []
    for lineno, line in enumerate(lines[1:], 2):
        toks = line.split()
        if not toks:
            continue
        if len(toks) != ncol:
            raise DataError(f"{path}:{lineno}: {len(toks)} columns, the header has {ncol}")
        try:
            onset, offset = float(toks[1]), float(toks[2])
        except ValueError:
            raise DataError(f"{path}:{lineno}: onset/offset are not numbers: {toks[1]!r} {toks[2]!r}") from None
        if not (math.isfinite(onset) and math.isfinite(offset)) or onset < 0:
            raise DataError(f"{path}:{lineno}: bad times {toks[1]} {toks[2]}")
        if offset < onset:
            raise DataError(f"{path}:{lineno}: offset {offset} is before onset {onset}")
        items.append(Item(toks[0], onset, offset, toks[3], tuple(toks[4:-1]), toks[-1], lineno))
    if not items:
        raise DataError(f"{path}: no items")
    return items


def write_item_file(path: str | os.PathLike, rows: Iterable[Sequence[str]]) -> int:
    """Write an item file atomically: :data:`ITEM_HEADER` then one space-joined row per item.

    Args:
        rows: ``(file, onset, offset, phone, prev_phone, next_phone, speaker)`` string tuples.

    Returns:
        the number of items written.
    """
    n = 0
    with atomic_write(path) as f:
        f.write(ITEM_HEADER + "\n")
        for row in rows:
            if len(row) != 7:
                raise ValueError(f"item row must have 7 fields, got {row!r}")
            f.write(" ".join(row) + "\n")
            n += 1
    return n


@dataclass(frozen=True)
class PhoneSegment:
    """One line of ``phone_alignments``; times kept as the original strings too (no rounding)."""

    utt: str
    start: float
    end: float
    phone: str
    start_str: str
    end_str: str
    line: int


def read_phone_alignments(path: str | os.PathLike) -> dict[str, list[PhoneSegment]]:
    """Read ``<utt> <start-s> <end-s> <phone>`` lines into ``{utt: segments sorted by start}``.

    Raises:
        DataError: wrong number of fields, non-numeric or negative times, ``end < start``, or
            two segments of one utterance that overlap (by more than 0.1 ms); names file and line.
    """
    path = Path(path)
    by_utt: dict[str, list[PhoneSegment]] = defaultdict(list)
    for lineno, line in enumerate(read_lines(path), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) != 4:
            raise DataError(f"{path}:{lineno}: expected '<utt> <start-s> <end-s> <phone>', got {line.strip()!r}")
        utt, s, e, phone = toks
        try:
            start, end = float(s), float(e)
        except ValueError:
            raise DataError(f"{path}:{lineno}: times are not numbers: {s!r} {e!r}") from None
        if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end < start:
            raise DataError(f"{path}:{lineno}: bad segment {s}-{e} (need 0 <= start <= end)")
        by_utt[utt].append(PhoneSegment(utt, start, end, phone, s, e, lineno))
    if not by_utt:
        raise DataError(f"{path}: no phone segments")
    for utt, segs in by_utt.items():
        segs.sort(key=lambda g: (g.start, g.end))
        for a, b in zip(segs, segs[1:]):
            if b.start < a.end - 1e-4:  # times are often written with 4 decimals
                raise DataError(
                    f"{path}:{b.line}: segment {b.start_str}-{b.end_str} of '{utt}' overlaps "
                    f"line {a.line} ({a.start_str}-{a.end_str})"
                )
    return dict(by_utt)


def speaker_of(utt: str, utt2spk: Mapping[str, str] | None) -> str:
    """The speaker of ``utt``: ``utt2spk[utt]`` when a table is given, else the id before the first ``_``.

    Raises:
        DataError: ``utt`` is missing from ``utt2spk``, or (no table) has no ``_`` in it.
    """
    if utt2spk is not None:
        try:
            return utt2spk[utt]
        except KeyError:
            raise DataError(f"utt2spk: no speaker for utterance '{utt}'") from None
    if "_" not in utt:
        raise naming_parameters(DataError(
            f"utterance '{utt}' has no '_' to take a speaker prefix from; give `utt2spk`"
        ))
    return utt.split("_", 1)[0]


def make_abx_items(
    alignments: Mapping[str, Sequence[PhoneSegment]],
    utt2spk: Mapping[str, str] | None = None,
    exclude_phones: Iterable[str] = DEFAULT_EXCLUDE_PHONES,
    min_duration: float = 0.0,
    boundary: str = BOUNDARY,
) -> list[tuple[str, str, str, str, str, str, str]]:
    """One ABX item per phone token, with its neighbours in the utterance as context.

    The context of a phone is the label of the segment just before it and just after it in the
    same utterance (excluded labels such as ``h#`` still serve as context: they mark silence);
    at an utterance edge the context is ``boundary``. Phones in ``exclude_phones``, zero-length
    phones and phones shorter than ``min_duration`` seconds get no item. The item's times are the
    alignment's strings, unchanged.

    Returns:
        ``(file, onset, offset, phone, prev_phone, next_phone, speaker)`` rows, sorted by
        utterance (C order) then onset.

    Raises:
        DataError: an utterance without a speaker (see :func:`speaker_of`).
    """
    exclude = set(exclude_phones)
    rows = []
    for utt in sorted(alignments, key=lambda k: k.encode("utf-8")):
        segs = alignments[utt]
        spk = speaker_of(utt, utt2spk)
        for k, seg in enumerate(segs):
            if seg.phone in exclude or seg.end <= seg.start or seg.end - seg.start < min_duration - 1e-9:
                continue
            prev = segs[k - 1].phone if k > 0 else boundary
            nxt = segs[k + 1].phone if k + 1 < len(segs) else boundary
            rows.append((utt, seg.start_str, seg.end_str, seg.phone, prev, nxt, spk))
    return rows
