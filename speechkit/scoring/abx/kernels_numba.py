"""Compiled CPU kernels of :mod:`speechkit.scoring.abx` (numba; the thread pool that runs them: ``kernel_threads``).

Two kernels, both ``nogil`` so that several Python threads run them at once:

* :func:`dtw_strided` -- DTW cost and the two path lengths (both ABXpy tie-breaks) of a block of token pairs,
  each reading its frame distances in place from one array (a padded batch, or a tile shared by many pairs).
  Float64, the recursion and the tie-breaks of :func:`speechkit.scoring.abx.dtw.batched_dtw` exactly (same
  additions in the same order: from the same frame distances, the same bits).
* :func:`count_cells` -- wins and ties of every (A, B, X) triplet of a range of cell groups, from the
  per-context token-distance matrices: for each X, the ``d(B, X)`` are sorted once and each ``d(A, X)``
  is placed among them by binary search, ``O((nA + nB) log nB)`` per X instead of ``nA * nB``.

Work is cut into many small tasks taken by ``n`` threads from one queue
(:func:`speechkit.scoring.abx.kernel_threads.run_tasks`). :mod:`speechkit.scoring.abx.kernels_c` holds the same two
kernels in C (the same bits), which ``auto`` prefers where they were built: they load in a millisecond, where
numba's start costs 0.3-0.45 s in a fresh process.

Compilation: ``cache=True`` when numba can write its cache (``NUMBA_CACHE_DIR``, else next to this file,
else numba's user-wide cache); without a writable cache the kernels compile once per process (a few
seconds). Import this module lazily: importing numba costs about half a second.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from speechkit.scoring.abx.kernel_threads import padded_dtw, run_tasks  # noqa: F401 - run_tasks: the pool both sets use


def _jit(fn):
    """``numba.njit(nogil=True, cache=True)``, without the cache where numba finds nowhere to write it."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available" (read-only package, no cache dir)
        return numba.njit(nogil=True, cache=False)(fn)


@_jit
def dtw_strided(flat, base, row_stride, col_stride, n_rows, n_cols, total, len_rc, len_cr):  # pragma: no cover
    """DTW of ``B`` token pairs whose frame distances lie in one float64 array ``flat``: pair ``b``'s entry
    ``[i, j]`` (row frame ``i`` < ``n_rows[b]``, column frame ``j`` < ``n_cols[b]``) at
    ``flat[base[b] + i * row_stride[b] + j * col_stride[b]]`` (all (B,) int64). A padded ``(B, N, M)`` batch is
    ``base = b * N * M``, strides ``M`` and ``1``; a pair inside a tile of frame distances (``tiles.tile_tasks``)
    reads it in place, transposed where its rows are the tile's columns.

    Writes ``total`` (B,) float64, the minimal path cost, and the number of frame pairs on the minimal path
    when ties between equal-cost predecessors go diagonal, then column-1 (``len_rc``, ABXpy's length with
    the rows as its first argument), or diagonal, then row-1 (``len_cr``), both (B,) int64. The path length
    of each cell is carried forward from the predecessor the backtrack would choose (the backtrack makes
    at every cell the same choice among the same three costs), so no cost matrix is kept: two rows.
    """
    bsz = base.shape[0]
    mmax = 1
    for b in range(bsz):
        mmax = max(mmax, n_cols[b])
    prev = np.empty(mmax)
    cur = np.empty(mmax)
    prc = np.empty(mmax, dtype=np.int64)
    crc = np.empty(mmax, dtype=np.int64)
    pcr = np.empty(mmax, dtype=np.int64)
    ccr = np.empty(mmax, dtype=np.int64)
    for b in range(bsz):
        n = n_rows[b]
        m = n_cols[b]
        o = base[b]
        rs = row_stride[b]
        cs = col_stride[b]
        prev[0] = flat[o]
        prc[0] = 1
        pcr[0] = 1
        for j in range(1, m):
            prev[j] = flat[o + j * cs] + prev[j - 1]
            prc[j] = j + 1
            pcr[j] = j + 1
        for i in range(1, n):
            q = o + i * rs
            # the predecessor's choice without branches: it is data-dependent, and a mispredicted branch costs more
            # than the cell (LLVM turns an if/else, even as conditional expressions, into jumps; min() and 0/1 integer
            # masks give the same bits without them). min(a, b) is a unless b < a (Python's rule),
            # so best is diag when diag <= left and diag <= up (t_d), else left when left <= up, else up: the
            # choice the masks make for the path lengths. The diagonal neighbour is the previous cell's upper one,
            # kept from there.
            left = flat[q] + prev[0]
            lrc = i + 1
            lcr = i + 1
            cur[0] = left
            crc[0] = lrc
            ccr[0] = lcr
            diag = prev[0]
            drc = prc[0]
            dcr = pcr[0]
            for j in range(1, m):
                q += cs
                up = prev[j]
                urc = prc[j]
                ucr = pcr[j]
                # ties: diagonal first; then column-1 (left) for len_rc, row-1 (up) for len_cr; 0/1 integer masks
                t_lu = np.int64(left <= up)
                t_ul = np.int64(up <= left)
                t_d = np.int64(diag <= left) * np.int64(diag <= up)
                lu = min(left, up)
                best = min(diag, lu)
                nrc = t_d * drc + (1 - t_d) * (t_lu * lrc + (1 - t_lu) * urc)
                ncr = t_d * dcr + (1 - t_d) * (t_ul * ucr + (1 - t_ul) * lcr)
                left = flat[q] + best
                lrc = nrc + 1
                lcr = ncr + 1
                cur[j] = left
                crc[j] = lrc
                ccr[j] = lcr
                diag = up
                drc = urc
                dcr = ucr
            prev, cur = cur, prev
            prc, crc = crc, prc
            pcr, ccr = ccr, pcr
        total[b] = prev[m - 1]
        len_rc[b] = prc[m - 1]
        len_cr[b] = pcr[m - 1]


def dtw_block(dist, n_rows, n_cols, total, len_rc, len_cr) -> None:
    """:func:`dtw_strided` of a padded batch: ``dist`` (B, N, M) float64, C-contiguous; same outputs."""
    padded_dtw(dtw_strided, dist, n_rows, n_cols, total, len_rc, len_cr)


@_jit
def count_cells(g0, g1, dflat, ctx_off, ctx_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr, x_pool, x_cell,
                within, wins, ties):  # pragma: no cover - compiled
    """Wins and ties of the triplets of cell groups ``g0 .. g1-1``.

    Group ``g``: tokens ``a_pool[a_ptr[g]:a_ptr[g+1]]`` (A), ``b_pool[...]`` (B), ``x_pool[x_ptr[g]:...]``
    (X), local indices into its context's ``ctx_w[g] x ctx_w[g]`` distance matrix, stored row-major at
    ``dflat[ctx_off[g]:]`` (entry ``[p, x]`` = the distance of token ``p`` to X token ``x``). X token
    ``k`` of the group belongs to cell ``x_cell[k]``. A triplet wins when ``d(A, X) < d(B, X)``, ties on
    equality; ``within``: the triplets with A = X are skipped. Adds to ``wins`` and ``ties`` (int64, per cell).
    """
    for g in range(g0, g1):
        off = ctx_off[g]
        w = ctx_w[g]
        b0 = b_ptr[g]
        nb = b_ptr[g + 1] - b0
        buf = np.empty(nb)
        for k in range(x_ptr[g], x_ptr[g + 1]):
            x = x_pool[k]
            for q in range(nb):
                buf[q] = dflat[off + b_pool[b0 + q] * w + x]
            buf.sort()
            nw = 0
            nt = 0
            for p in range(a_ptr[g], a_ptr[g + 1]):
                a = a_pool[p]
                if within and a == x:
                    continue
                v = dflat[off + a * w + x]
                lo = np.searchsorted(buf, v, side="left")
                hi = np.searchsorted(buf, v, side="right")
                nw += nb - hi
                nt += hi - lo
            c = x_cell[k]
            wins[c] += nw
            ties[c] += nt


def warm_up() -> None:
    """Load both kernels (from numba's cache, else compile them) for the argument types abx_error passes, on no
    work: 0.1-0.7 s on a process's first call, which :func:`speechkit.scoring.abx.abx_error` spends in a
    background thread (:func:`warm_up_in_background`) while the DTW runs instead of before the counting."""
    z = np.zeros(1, dtype=np.int64)
    f = np.zeros(1)
    dtw_strided(f, z[:0], z[:0], z[:0], z[:0], z[:0], f[:0], z[:0], z[:0])
    count_cells(0, 0, f, z, z, z, z, z, z, z, z, z, False, z, z)


def warm_up_in_background() -> threading.Thread:
    """:func:`warm_up` in a started daemon thread (join it before the kernels' first use). A failure there is
    dropped: the kernel's own first call raises it again, with its arguments."""
    def run():
        try:
            warm_up()
        except Exception:  # noqa: BLE001 - re-raised by the real call
            pass

    thread = threading.Thread(target=run, name="speechkit-abx-warm-up", daemon=True)
    thread.start()
    return thread
