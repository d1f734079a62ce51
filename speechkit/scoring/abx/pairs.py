"""The token pairs an ABX task needs a DTW of, and the table their distances are kept in for the counting.

A pair of tokens of one context needs its DTW when some triplet of the task compares them: (A, X) or (B, X).
:func:`plan_pairs` finds them context by context (:func:`needed_pairs`: masks over the context's tokens, in numpy
for a small context, in torch on the scoring device for a large one) and lays out the distance table: per context
a ``w x w`` matrix across speakers; within speakers one ``n x n`` matrix per speaker of the context (its ``n``
tokens, in order), as a pair never joins two speakers there: ``sum(n^2)`` entries, not ``w^2``.
:func:`compact_tokens` numbers the tokens that take part, :func:`distance_table` fills the table from the pairs'
distances and :func:`cell_blocks` says where each cell group reads it.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from speechkit.scoring.abx import dispatch
from speechkit.scoring.abx.arrays import cat_onto
from speechkit.scoring.abx.cells import AbxTask, CellGroup
from speechkit.scoring.abx_items import Item


def needed_pairs(phones: Sequence[str] | np.ndarray, speakers: Sequence[str] | np.ndarray, mode: str,
                  device: torch.device = torch.device("cpu")) -> tuple[torch.Tensor, torch.Tensor]:
    """Token pairs ``(u, v)``, ``u < v``, of one context whose distance some triplet needs (the pairs
    (A, X) and (B, X) of the cells of :func:`speechkit.scoring.abx.cells.enumerate_cells`), from the tokens' phones
    and speakers: labels, or ``(W,)`` non-negative integer codes (numpy) in the labels' order (equal codes for
    equal labels; within a large context the pairs come one speaker at a time, in that order).

    Across: (A, X) when same phone, other speaker, and A's speaker has a token of another phone (a B);
    (B, X) when other phone, other speaker, and B's speaker has a token of X's phone (an A). Within: the
    same with one speaker, A != X, and an A/X phone with at least two tokens of the speaker.

    Returns ``(u, v)``: ``(P,)`` int64 tensors on ``device`` (row-major order of the token x token mask, which
    is built there: on CUDA the ``N x N`` masks of a large context never touch the host).
    """
    ph_np, sp_np = _codes(phones), _codes(speakers)
    if device.type == "cpu" and len(ph_np) < dispatch.DEVICE_PAIRS_MIN_TOKENS and dispatch.SMALL_PAIRS_IN_NUMPY:
        u, v = _needed_pairs_small(ph_np, sp_np, mode)
        return torch.from_numpy(u), torch.from_numpy(v)
    ph, sp = torch.from_numpy(ph_np), torch.from_numpy(sp_np)
    n_ph, n_sp = int(ph.max()) + 1, int(sp.max()) + 1
    cnt = torch.bincount(sp * n_ph + ph, minlength=n_sp * n_ph).view(n_sp, n_ph).to(device)
    ph, sp = ph.to(device), sp.to(device)
    n_phones = (cnt > 0).sum(1)  # distinct phones per speaker
    has_b = (n_phones[sp] - (cnt[sp, ph] > 0).long()) > 0  # the token's speaker has another phone: B tokens exist
    if mode == "within":
        if len(ph) < dispatch.DEVICE_PAIRS_MIN_TOKENS or n_sp == 1:
            return _within_block(ph, has_b, sp=sp, cnt=cnt)
        # a large context: one speaker's block at a time (the mask across speakers would be mostly False)
        us, vs = [], []
        for s in range(n_sp):
            idx = (sp == s).nonzero().view(-1)  # ascending: u < v within the block is u < v in the context
            if len(idx) >= 2:
                u, v = _within_block(ph[idx], has_b[idx], cnt_spk=cnt[s])
                us.append(idx[u])
                vs.append(idx[v])
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return (torch.cat(us), torch.cat(vs)) if us else (empty, empty)
    # need[i, j] | need[j, i], i < j, where need[a, x] = other speakers and (same phone and a B for a, or other
    # phones and a's speaker has x's phone): (A, X) or (B, X). A block of rows at a time (against the columns
    # past its first row): a few MB of masks instead of N x N ones
    has = cnt > 0
    n = len(ph)
    step = max(1, (dispatch.PAIR_MASK_ELEMENTS if device.type == "cpu" else dispatch.PAIR_MASK_ELEMENTS_CUDA) // n)
    us, vs = [], []
    for i0 in range(0, n - 1, step):
        i1, j0 = min(i0 + step, n), i0 + 1
        pi, si, bi = ph[i0:i1, None], sp[i0:i1, None], has_b[i0:i1, None]
        pj, sj, bj = ph[None, j0:], sp[None, j0:], has_b[None, j0:]
        same_ph = pi == pj
        need = (same_ph & (bi | bj)) | (~same_ph & (has[si, pj] | has[sj, pi]))
        need &= si != sj
        r, c = torch.triu(need).nonzero(as_tuple=True)  # column c >= row r: token j0 + c > token i0 + r
        us.append(r.add_(i0))
        vs.append(c.add_(j0))
    if not us:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return empty, empty
    return cat_onto(us, device), cat_onto(vs, device)


def _codes(labels: Sequence[str] | np.ndarray) -> np.ndarray:
    """``(W,)`` int64 codes of ``labels``: an integer numpy array as it is (renumbered 0 .. n-1, in order, where
    its codes reach past both 255 and ``W``: the count tables are (speakers x phones)), else each distinct label's
    rank."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iu":
        if len(labels) and labels.max() >= max(256, len(labels)):
            return np.unique(labels, return_inverse=True)[1].reshape(-1).astype(np.int64)
        return labels.astype(np.int64, copy=False)
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1).astype(np.int64)


def _needed_pairs_small(ph: np.ndarray, sp: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`needed_pairs` of a small context in numpy (its many small torch operations cost ~4x more): ``ph``,
    ``sp`` (W,) int64 phone and speaker codes (0 .. n-1); the same pairs in the same order, as (P,) int64 arrays."""
    n_ph, n_sp = int(ph.max()) + 1, int(sp.max()) + 1
    cnt = np.bincount(sp * n_ph + ph, minlength=n_sp * n_ph).reshape(n_sp, n_ph)
    has_b = (cnt > 0).sum(1)[sp] - (cnt[sp, ph] > 0) > 0  # the token's speaker has another phone: B tokens exist
    same_ph = ph[:, None] == ph[None, :]
    same_sp = sp[:, None] == sp[None, :]
    if mode == "within":
        ax = same_ph & same_sp & has_b[:, None]
        np.fill_diagonal(ax, False)
        bx = ~same_ph & same_sp & (cnt >= 2)[sp[:, None], ph[None, :]]  # two tokens of X's phone: A != X
    else:
        ax = same_ph & ~same_sp & has_b[:, None]
        bx = ~same_ph & ~same_sp & (cnt > 0)[sp[:, None], ph[None, :]]  # B's speaker has X's phone
    need = ax | bx
    u, v = np.nonzero(np.triu(need | need.T, 1))
    return u.astype(np.int64), v.astype(np.int64)


def _within_block(ph: torch.Tensor, has_b: torch.Tensor, cnt_spk: torch.Tensor | None = None,
                  sp: torch.Tensor | None = None, cnt: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`needed_pairs` within speakers: the pairs ``u < v`` of one speaker's tokens (phones ``ph``, B tokens
    exist ``has_b``, the speaker's token count per phone ``cnt_spk``), or of all tokens with their speakers ``sp``
    and the (speaker, phone) counts ``cnt`` (a same-speaker mask then)."""
    same_ph = ph[:, None] == ph[None, :]
    if sp is None:
        ax = same_ph & has_b[:, None]
        bx = ~same_ph & (cnt_spk >= 2)[ph][None, :]  # two tokens of X's phone: A != X
    else:
        same_sp = sp[:, None] == sp[None, :]
        ax = same_ph & same_sp & has_b[:, None]
        bx = ~same_ph & same_sp & (cnt >= 2)[sp[:, None], ph[None, :]]
    ax.fill_diagonal_(False)
    need = ax | bx
    del ax, bx, same_ph
    return torch.triu(need | need.T, diagonal=1).nonzero(as_tuple=True)


def speaker_blocks(speakers: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, tuple[int, int]],
                                                      int]:
    """The speakers' blocks of one context's within-speaker distances: its tokens (``speakers[i]``: token ``i``'s)
    grouped by speaker, in order of first appearance, each speaker's ``n`` tokens an ``n x n`` matrix after the
    previous ones. Returns ``(local, offset, width, by_speaker, size)``: per token its index in its speaker's block,
    the block's offset and width (``(W,)`` int64 each), per speaker ``(offset, width)``, and the entries in all."""
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(s, len(index)) for s in speakers], dtype=np.int64)
    counts = np.bincount(codes, minlength=len(index)).astype(np.int64)
    starts = np.cumsum(counts) - counts
    local = np.empty(len(codes), dtype=np.int64)
    local[np.argsort(codes, kind="stable")] = np.arange(len(codes), dtype=np.int64) - np.repeat(starts, counts)
    offsets = np.cumsum(counts * counts) - counts * counts
    by_speaker = {s: (int(offsets[i]), int(counts[i])) for s, i in index.items()}
    return local, offsets[codes], counts[codes], by_speaker, int((counts * counts).sum())


def token_groups(speaker_code: np.ndarray, members: Mapping[tuple[str, ...], list[int]]) -> np.ndarray:
    """``(len(speaker_code),)`` int64: each token's context (by first appearance, high 32 bits) and speaker (by
    first appearance, low 32 bits; contexts in ``members``' order, each one's tokens in order), from each token's
    speaker code (``(N,)`` int64, equal codes for equal speakers) and ``members`` (context -> its tokens' indices)."""
    sizes = np.fromiter((len(m) for m in members.values()), dtype=np.int64, count=len(members))
    order = np.fromiter(itertools.chain.from_iterable(members.values()), dtype=np.int64, count=int(sizes.sum()))
    seq = speaker_code[order]
    codes, first = np.unique(seq, return_index=True)
    rank = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
    rank[codes[np.argsort(first, kind="stable")]] = np.arange(len(codes), dtype=np.int64)
    out = np.empty(len(speaker_code), dtype=np.int64)
    out[order] = (np.repeat(np.arange(len(sizes), dtype=np.int64), sizes) << 32) | rank[seq]
    return out


@dataclass
class PairPlan:
    """The needed pairs of a task, context by context, and the layout of their distance table (:func:`plan_pairs`)."""

    pair_tokens: list[tuple[torch.Tensor, torch.Tensor]]  # per context: (u, v), u < v, indices into the items
    table_index: list[tuple[torch.Tensor, torch.Tensor]]  # per context: the entries [u, v] and [v, u] in the table
    blocks: list[dict[str, tuple[int, int]]]  # per context: speaker (within) or "" -> its matrix (offset, width)
    local: list[np.ndarray]  # within: per context, each token's index inside its speaker's matrix
    size: int  # entries of the table
    speaker_code: np.ndarray  # (len(items),) int64: each item's speaker as a code, in the speakers' order
    n_pairs: int  # DTW pairs in all


def plan_pairs(task: AbxTask, kept: Sequence[Item], mode: str, pair_dev: torch.device, n_threads: int) -> PairPlan:
    """The needed pairs of every context of ``task`` (:func:`needed_pairs`: on ``pair_dev`` for a context of
    :data:`~speechkit.scoring.abx.dispatch.DEVICE_PAIRS_MIN_TOKENS` tokens or more, else on the CPU, moved later
    with the others; its masks on ``n_threads`` threads from
    :data:`~speechkit.scoring.abx.dispatch.THREADED_MASK_ELEMENTS` elements, else on one) and the table layout."""
    pair_g: list[tuple[torch.Tensor, torch.Tensor]] = []
    pair_flat: list[tuple[torch.Tensor, torch.Tensor]] = []
    blocks: list[dict[str, tuple[int, int]]] = []
    local: list[np.ndarray] = []
    ctx_size = 0
    # every token's phone and speaker as integer codes in the labels' order, once (not per context)
    ph_rank = {p: i for i, p in enumerate(sorted({it.phone for it in kept}))}
    sp_rank = {s: i for i, s in enumerate(sorted({it.speaker for it in kept}))}
    ph_code = np.array([ph_rank[it.phone] for it in kept], dtype=np.int64)
    sp_code = np.array([sp_rank[it.speaker] for it in kept], dtype=np.int64)
    for ctx, _, per_speaker in task.contexts:
        mem = np.asarray(task.members[ctx], dtype=np.int64)
        w = len(mem)
        mask_dev = pair_dev if w >= dispatch.DEVICE_PAIRS_MIN_TOKENS else torch.device("cpu")
        # one speaker's block at a time within speakers
        side = max(per_speaker.values()) if mode == "within" and w >= dispatch.DEVICE_PAIRS_MIN_TOKENS else w
        with dispatch.torch_threads(n_threads if side * side >= dispatch.THREADED_MASK_ELEMENTS else 1):
            u, v = needed_pairs(ph_code[mem], sp_code[mem], mode, mask_dev)
            if w == len(kept):  # the context holds every token, in order (members): its indices are theirs
                pair_g.append((u, v))
            else:
                m = torch.from_numpy(mem).to(mask_dev)
                pair_g.append((m[u], m[v]))  # on mask_dev: moved to pair_dev together later
            if mode == "within":
                loc, tok_off, tok_w, by_speaker, size = speaker_blocks([kept[k].speaker for k in mem])
                loc_t, off_t, w_t = (torch.from_numpy(a).to(mask_dev) for a in (loc, tok_off, tok_w))
                base, width, lu, lv = ctx_size + off_t[u], w_t[u], loc_t[u], loc_t[v]
                if not torch.equal(off_t[u], off_t[v]):
                    raise AssertionError("a within-speaker DTW pair joins two speakers")
                pair_flat.append((base + lu * width + lv, base + lv * width + lu))
                blocks.append({spk: (ctx_size + o, n) for spk, (o, n) in by_speaker.items()})
                local.append(loc)
            else:
                uv, vu = u * w, v * w  # ctx_size + u * w + v, ctx_size + v * w + u, without temporaries
                pair_flat.append((uv.add_(v).add_(ctx_size), vu.add_(u).add_(ctx_size)))
                blocks.append({"": (ctx_size, w)})
                size = w * w
        ctx_size += size
    return PairPlan(pair_g, pair_flat, blocks, local, ctx_size, sp_code, sum(len(g[0]) for g in pair_g))


def compact_tokens(plan: PairPlan, task: AbxTask, n_items: int, pair_dev: torch.device, n_threads: int,
                   grouped: bool) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, np.ndarray | None]:
    """The tokens that take part in some pair, numbered ``0 .. U-1``, and every pair in those numbers.

    ``plan``'s pairs are joined on ``pair_dev`` (and left out of ``plan``). With ``grouped`` (the compiled path,
    which cuts tiles from them) the tokens are ordered by context and speaker (:func:`token_groups`), in item order
    inside, else in item order.

    Returns ``(used, gu, gv, groups)``: ``(U,)`` int64 the items of the tokens; ``(P,)`` int64 tensors on
    ``pair_dev``, each pair's two tokens; ``(U,)`` int64 each token's group (``grouped``, else None).
    """
    gu = cat_onto([g[0] for g in plan.pair_tokens], pair_dev)
    gv = cat_onto([g[1] for g in plan.pair_tokens], pair_dev)
    plan.pair_tokens.clear()
    group_of = None
    with dispatch.torch_threads(n_threads):
        mark = torch.zeros(n_items, dtype=torch.bool, device=pair_dev)
        mark[gu] = True
        mark[gv] = True
        used_t = mark.nonzero().view(-1)  # = unique(cat([gu, gv])), without sorting tens of millions
        if grouped:  # grouped by context and speaker, in item order inside: tiles of shared frame distances
            group_of = token_groups(plan.speaker_code, task.members)
            used_t = used_t[torch.from_numpy(np.argsort(group_of[used_t.numpy()], kind="stable"))]
        used = used_t.cpu().numpy()
        pos = torch.full((n_items,), -1, dtype=torch.long, device=pair_dev)
        pos[used_t] = torch.arange(len(used_t), device=pair_dev)
        gu, gv = pos[gu], pos[gv]
        del mark, pos, used_t
    return used, gu, gv, (group_of[used] if group_of is not None else None)


def distance_table(plan: PairPlan, d_uv: torch.Tensor, d_vu: torch.Tensor, pair_dev: torch.device,
                   on_host: bool) -> np.ndarray | torch.Tensor:
    """The ``(plan.size,)`` float64 table: entry ``[p, x]`` of a context's (or speaker's) matrix is ``d_uv`` of the
    pair ``(p, x)`` when ``p < x``, else ``d_vu`` of ``(x, p)``; NaN where no pair is. Built on ``pair_dev``; a
    numpy array on the host when ``on_host`` (the compiled counting), else the tensor (the torch counting: on CUDA
    the table never leaves the GPU). ``plan``'s table indices are left out of it."""
    table = torch.full((plan.size,), math.nan, dtype=torch.float64, device=pair_dev)
    table[cat_onto([f[0] for f in plan.table_index], pair_dev)] = d_uv
    table[cat_onto([f[1] for f in plan.table_index], pair_dev)] = d_vu
    plan.table_index.clear()
    return table.cpu().numpy() if on_host else table


def cell_blocks(plan: PairPlan, cells: Sequence[CellGroup], mode: str
                ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Where each cell group reads the table: ``(offset, width, to_block)``, its matrix's first entry and width
    (``(G,)`` int64 each: its context's, or within speakers its speaker's there) and, within speakers,
    ``(index, start)``: token ``i`` of context ``c`` is row ``index[start[c] + i]`` of its speaker's matrix
    (None across: a token's index in its context is its row)."""
    key = (lambda c: c.spk) if mode == "within" else (lambda c: "")
    g_block = np.array([plan.blocks[c.context][key(c)] for c in cells], dtype=np.int64).reshape(-1, 2)
    if mode == "within":
        tok_start = np.concatenate([[0], np.cumsum([len(x) for x in plan.local])]).astype(np.int64)
        to_block = (np.concatenate(plan.local), tok_start)
    else:
        to_block = None
    return g_block[:, 0].copy(), g_block[:, 1].copy(), to_block
