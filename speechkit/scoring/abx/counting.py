"""Counting: the wins and ties of every triplet of every cell, from the table of token distances.

A triplet ``(A, B, X)`` scores 1 if ``d(A, X) < d(B, X)``, 0.5 on a tie, 0 otherwise (ABXpy). The compiled kernels
count on the CPU (for each X, the ``d(B, X)`` sorted once and each ``d(A, X)`` placed among them by binary
search); :func:`count_cells_torch` compares every ``d(A, X)`` with every ``d(B, X)`` in torch, on the table's
device (CUDA's counting, and the ``torch`` backend's). Only comparisons: the same integers either way.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from speechkit.scoring.abx import dispatch
from speechkit.scoring.abx.arrays import run_bounds
from speechkit.scoring.abx.cells import CellGroup


def count_triplets(cells: list[CellGroup], dflat: np.ndarray | torch.Tensor, g_off: np.ndarray, g_w: np.ndarray,
                    to_block: tuple[np.ndarray, np.ndarray] | None, mode: str, kernels, n_threads: int):
    """Wins and ties per cell ((context, phone pair, speaker(s)) cell; a cell group holds one cell per X speaker).

    Cell group ``g`` reads its distances from the ``g_w[g] x g_w[g]`` row-major matrix at ``dflat[g_off[g]:]``;
    its tokens' context-local indices index that matrix directly, or, with ``to_block = (index, start)``, through
    ``index[start[context] + i]`` (within speakers: the index of token ``i`` in its speaker's matrix).

    ``kernels`` (C's or numba's, :func:`~speechkit.scoring.abx.dispatch.load_kernels`; ``dflat`` a numpy array) count on
    the CPU on ``n_threads`` threads; without them :func:`count_cells_torch` counts in torch on ``dflat``'s device (a
    tensor there: on CUDA the distance table never leaves the GPU). The same integers either way: only comparisons.

    Returns ``(wins, ties, n, group, spk_x)``, per cell: triplets won (``d(A, X) < d(B, X)``), tied,
    scored, the index of its cell group in ``cells``, and the index of its X speaker in its group's ``x_spk``.
    """
    within = mode == "within"
    n_groups = len(cells)
    na = np.array([len(c.a) for c in cells], dtype=np.int64)
    nb = np.array([len(c.b) for c in cells], dtype=np.int64)
    nx = np.array([len(c.x) for c in cells], dtype=np.int64)
    ncell = np.array([len(c.x_start) for c in cells], dtype=np.int64)
    cell_ptr = np.concatenate([[0], np.cumsum(ncell)]).astype(np.int64)
    n_cells = int(cell_ptr[-1])
    cell_group = np.repeat(np.arange(n_groups, dtype=np.int64), ncell)
    cell_spk_x = np.arange(n_cells, dtype=np.int64) - cell_ptr[:-1][cell_group]
    x_ptr = np.concatenate([[0], np.cumsum(nx)]).astype(np.int64)
    # X tokens per cell: a group's cells are its X speakers, starting at x_start within its X tokens
    x_sizes = np.diff(np.append(np.concatenate([c.x_start for c in cells]) + np.repeat(x_ptr[:-1], ncell), x_ptr[-1]))
    a_ptr = np.concatenate([[0], np.cumsum(na)]).astype(np.int64)
    b_ptr = np.concatenate([[0], np.cumsum(nb)]).astype(np.int64)
    a_pool = np.concatenate([c.a for c in cells]).astype(np.int64)
    b_pool = np.concatenate([c.b for c in cells]).astype(np.int64)
    x_pool = np.concatenate([c.x for c in cells]).astype(np.int64)
    if to_block is not None:
        index, start = to_block
        g_start = start[np.array([c.context for c in cells], dtype=np.int64)]
        a_pool = index[np.repeat(g_start, na) + a_pool]
        b_pool = index[np.repeat(g_start, nb) + b_pool]
        x_pool = index[np.repeat(g_start, nx) + x_pool]
    x_cell = np.repeat(np.arange(n_cells, dtype=np.int64), x_sizes)
    if kernels is not None:  # the compiled kernel (C's or numba's: dispatch.load_kernels)
        K = kernels
        wins = np.zeros(n_cells, dtype=np.int64)
        ties = np.zeros(n_cells, dtype=np.int64)
        # chunks of about equal work (X tokens x (A + B) tokens), many per thread so a slow thread takes fewer
        work = np.cumsum(nx * (na + nb) + 1)
        n_chunks = max(1, min(n_groups, 16 * n_threads, int(work[-1] // 20000) + 1))
        cuts = np.unique(np.searchsorted(work, np.linspace(0, work[-1], n_chunks + 1)[1:-1]))
        edges = np.concatenate([[0], cuts, [n_groups]]).astype(np.int64)
        chunks = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        K.run_tasks(lambda ch: K.count_cells(ch[0], ch[1], dflat, g_off, g_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr,
                                             x_pool, x_cell, within, wins, ties), chunks, n_threads)
    else:
        with dispatch.torch_threads(n_threads):
            wins, ties = count_cells_torch(torch.as_tensor(dflat), g_off, g_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr,
                                            x_pool, x_cell, within, n_cells)
    n = (na[cell_group] * x_sizes - (na[cell_group] if within else 0)) * nb[cell_group]
    return wins, ties, n, cell_group, cell_spk_x


def count_cells_torch(dflat: torch.Tensor, g_off: np.ndarray, g_w: np.ndarray, a_ptr: np.ndarray,
                       a_pool: np.ndarray, b_ptr: np.ndarray, b_pool: np.ndarray, x_ptr: np.ndarray,
                       x_pool: np.ndarray, x_cell: np.ndarray, within: bool, n_cells: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The triplet counting of :func:`count_triplets` in torch, on ``dflat``'s device (the CPU, or CUDA: the
    distance table stays there; only ``(n_cells,)`` counts come back).

    Group ``g``'s A tokens are ``a_pool[a_ptr[g]:a_ptr[g + 1]]`` (indices into its ``g_w[g] x g_w[g]`` matrix at
    ``dflat[g_off[g]:]``), its B and X tokens likewise; X token ``k`` of the pool belongs to cell ``x_cell[k]``.
    The groups are bucketed by their A and B counts rounded up to powers of two; a bucket's X tokens are taken a chunk
    at a time (:data:`~speechkit.scoring.abx.dispatch.COUNT_ELEMENTS` comparisons, ``COUNT_ELEMENTS_CUDA`` on CUDA),
    each as an ``(X, A, B)`` comparison of ``d(A, X)`` with ``d(B, X)`` gathered from ``dflat``, the padding NaN (a NaN
    is neither less than nor equal to anything, so it counts nowhere), and within speakers the A token that is X itself
    NaN too. Wins (``<``) and ties (``==``) are summed per X token, then per cell.

    Returns ``(wins, ties)``: ``(n_cells,)`` int64 numpy arrays.
    """
    dev = dflat.device
    na, nb, nx = np.diff(a_ptr), np.diff(b_ptr), np.diff(x_ptr)
    wins = torch.zeros(n_cells, dtype=torch.int64, device=dev)
    ties = torch.zeros(n_cells, dtype=torch.int64, device=dev)
    limit = dispatch.COUNT_ELEMENTS_CUDA if dev.type == "cuda" else dispatch.COUNT_ELEMENTS
    # buckets of groups with the same A and B counts rounded up to powers of two: at most 4x padded comparisons
    bucket = _ceil_log2(na) * 64 + _ceil_log2(nb)
    order = np.argsort(bucket, kind="stable")
    bounds = run_bounds(bucket[order])
    nan = torch.tensor(math.nan, dtype=dflat.dtype, device=dev)
    for r in range(len(bounds) - 1):
        groups = order[bounds[r]:bounds[r + 1]]
        a_mat, a_ok = _padded_rows(a_pool, a_ptr, groups)  # (G, NA) token indices (0 where padded), mask
        b_mat, b_ok = _padded_rows(b_pool, b_ptr, groups)
        width = g_w[groups][:, None]
        a_row = torch.from_numpy(g_off[groups][:, None] + a_mat * width).to(dev)  # the row of each A token
        b_row = torch.from_numpy(g_off[groups][:, None] + b_mat * width).to(dev)
        a_ok_t, b_ok_t = torch.from_numpy(a_ok).to(dev), torch.from_numpy(b_ok).to(dev)
        a_tok = torch.from_numpy(a_mat).to(dev) if within else None
        # the bucket's X tokens: their group (in the bucket), index in their group's matrix, cell
        col = _ranges(x_ptr[groups], nx[groups])
        col_g = torch.from_numpy(np.repeat(np.arange(len(groups), dtype=np.int64), nx[groups])).to(dev)
        col_x = torch.from_numpy(x_pool[col]).to(dev)
        col_cell = torch.from_numpy(x_cell[col]).to(dev)
        n_a, n_b = a_mat.shape[1], b_mat.shape[1]
        step = max(1, limit // (n_a * n_b))
        for c0 in range(0, len(col), step):
            g, x = col_g[c0:c0 + step], col_x[c0:c0 + step, None]
            da = torch.where(a_ok_t[g], dflat[a_row[g] + x], nan)  # (C, NA): d(A, X) (entry [A, X])
            if within:
                da = torch.where(a_tok[g] == x, nan, da)  # X != A
            db = torch.where(b_ok_t[g], dflat[b_row[g] + x], nan)  # (C, NB)
            da, db = da[:, :, None], db[:, None, :]
            cell = col_cell[c0:c0 + step]
            wins.index_add_(0, cell, (da < db).sum((1, 2)))
            ties.index_add_(0, cell, (da == db).sum((1, 2)))
    return wins.cpu().numpy(), ties.cpu().numpy()


def _ceil_log2(n: np.ndarray) -> np.ndarray:
    """``ceil(log2(n))`` of positive integers ``n`` ((N,) int64, below 2^53), exactly: 0 for 1, 1 for 2, 2 for 3
    and 4; the bit length of ``n - 1``, frexp's exponent of it."""
    return np.frexp((n - 1).astype(np.float64))[1].astype(np.int64)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without the loop ((sum(counts),) int64)."""
    total = int(counts.sum())
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - first, counts)


def _padded_rows(pool: np.ndarray, ptr: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lists ``pool[ptr[g]:ptr[g + 1]]`` of ``groups`` as the rows of a ``(len(groups), longest)`` int64 matrix,
    padded with 0, and the ``(len(groups), longest)`` bool mask of the entries that are not padding."""
    counts = ptr[groups + 1] - ptr[groups]
    width = int(counts.max())
    ok = np.arange(width)[None, :] < counts[:, None]
    mat = np.zeros((len(groups), width), dtype=np.int64)
    mat[ok] = pool[_ranges(ptr[groups], counts)]
    return mat, ok
