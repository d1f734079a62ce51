"""Cells: the ABX task over a set of items (fastabx's task and cells).

Triplets ``(A, B, X)``: A and X carry the same phone, B another; all three share the context (previous and next
phone). *Across* speakers (ABXpy ``on phone, by context, across speaker``): A and B come from one speaker, X from
another. *Within* (``on phone, by context+speaker``): all three from one speaker, X a different token from A. A
cell is the triplets of one (context, A/X phone, B phone, speaker(s)); a :class:`CellGroup` holds the cells that
share (context, A/X phone, B phone, A/B speaker), one per X speaker across. Every triplet is scored (ABXpy's
optional per-cell sampling of large cells is not applied). Items whose context is ``()`` (all alike) make the
"no context" task (fastabx ``context="any"``).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from speechkit.scoring.abx_items import Item

MODES = ("across", "within")


@dataclass
class CellGroup:
    """The cells sharing (context, A/X phone, B phone, A/B speaker): one per X speaker when across."""

    context: int
    p1: str
    p2: str
    spk: str  # speaker of A and B
    a: np.ndarray  # local indices (within the context) of the A, B and X tokens
    b: np.ndarray
    x: np.ndarray  # X tokens, grouped by speaker
    x_spk: list[str]  # speaker of each X group
    x_start: np.ndarray  # start of each X group in x


def enumerate_cells(context: int, groups: Mapping[str, Mapping[str, list[int]]], mode: str) -> list[CellGroup]:
    """The cell groups of one context: per (A/X phone, B phone, A/B speaker) with a token of each, its A, B and
    X tokens (X: A's phone, every other speaker across; A's own tokens within). Cells share their arrays (one
    array per phone and speaker, one X set per A phone and speaker): read-only."""
    cells = []
    phones = sorted(groups)
    arrays: dict[tuple[str, str], np.ndarray] = {}  # (phone, speaker) -> its tokens, made when a cell needs them

    def tokens(p: str, s: str) -> np.ndarray:
        arr = arrays.get((p, s))
        if arr is None:
            arr = arrays[p, s] = np.asarray(groups[p][s], dtype=np.int64)
        return arr

    one_group = np.zeros(1, dtype=np.int64)
    for p1 in phones:
        g1 = groups[p1]
        spk1 = sorted(g1)
        # no cell with A's phone p1: across, a single speaker has it (no X); within, none has it twice
        if (len(spk1) < 2) if mode == "across" else all(len(g1[s]) < 2 for s in spk1):
            continue
        x_sets = {}  # A/B speaker -> (X speakers, X tokens grouped by speaker, start of each group): across only
        if mode == "across":
            for s in spk1:
                xs = [sx for sx in spk1 if sx != s]
                starts = np.cumsum([0] + [len(g1[sx]) for sx in xs[:-1]]).astype(np.int64)
                x_sets[s] = (xs, np.concatenate([tokens(p1, sx) for sx in xs]), starts)
        for p2 in phones:
            if p1 == p2:
                continue
            g2 = groups[p2]
            for s in spk1:
                if s not in g2:
                    continue
                if mode == "within":
                    if len(g1[s]) >= 2:
                        a = tokens(p1, s)
                        cells.append(CellGroup(context, p1, p2, s, a, tokens(p2, s), a, [s], one_group))
                else:
                    xs, x, starts = x_sets[s]
                    cells.append(CellGroup(context, p1, p2, s, tokens(p1, s), tokens(p2, s), x, xs, starts))
    return cells


def speaker_counts(groups: Mapping[str, Mapping[str, list[int]]]) -> dict[str, int]:
    """Tokens per speaker of one context (``groups``: phone -> speaker -> tokens)."""
    per_speaker: dict[str, int] = defaultdict(int)
    for by_speaker in groups.values():
        for spk, idx in by_speaker.items():
            per_speaker[spk] += len(idx)
    return per_speaker


def pairs_bound(per_speaker: Mapping[str, int], mode: str) -> int:
    """An upper bound of the DTW pairs :func:`speechkit.scoring.abx.pairs.needed_pairs` finds in one context of
    ``per_speaker[s]`` tokens of speaker ``s`` (:func:`speaker_counts`): every pair of its tokens of one speaker
    (``within``: A, B and X share it) or of two (``across``: X is of another speaker than A and B), without looking
    at their phones."""
    per_speaker = per_speaker.values()
    same = sum(n * (n - 1) // 2 for n in per_speaker)
    if mode == "within":
        return same
    w = sum(per_speaker)
    return w * (w - 1) // 2 - same


@dataclass
class AbxTask:
    """The cells of a set of items (:func:`build_task`)."""

    members: dict[tuple[str, ...], list[int]]  # context -> its tokens (indices into the items), in order
    # (context, its cell groups, its tokens per speaker), for the contexts with a cell, in order of first appearance
    contexts: list[tuple[tuple[str, ...], list[CellGroup], dict[str, int]]]
    cells: list[CellGroup]  # every context's cell groups, in that order
    n_upper: int  # sum over cell groups of A x B x X tokens (>= the triplets: the A = X ones included)
    pairs_bound: int  # an upper bound of the DTW pairs (pairs_bound of each context)


def build_task(kept: Sequence[Item], mode: str) -> AbxTask:
    """The cell groups of the items ``kept`` (tokens: their indices), context by context, each context's
    tokens grouped by phone and speaker in order.

    Raises:
        ValueError: no triplet can be formed.
    """
    # context -> phone -> speaker -> local token indices
    tree: dict[tuple[str, ...], dict[str, dict[str, list[int]]]] = {}
    members: dict[tuple[str, ...], list[int]] = {}
    for k, it in enumerate(kept):
        mem = members.setdefault(it.context, [])
        tree.setdefault(it.context, {}).setdefault(it.phone, {}).setdefault(it.speaker, []).append(len(mem))
        mem.append(k)
    contexts = []
    for ctx, groups in tree.items():
        if len(groups) >= 2:
            new_cells = enumerate_cells(len(contexts), groups, mode)
            if new_cells:
                contexts.append((ctx, new_cells, speaker_counts(groups)))
    if not contexts:
        raise ValueError(f"no ABX triplet can be formed from these items ({mode} speakers)")
    n_upper = sum(len(c.a) * len(c.b) * len(c.x) for _, cs, _ in contexts for c in cs)
    n_bound = sum(pairs_bound(counts, mode) for _, _, counts in contexts)
    return AbxTask(members, contexts, [c for _, cs, _ in contexts for c in cs], n_upper, n_bound)
