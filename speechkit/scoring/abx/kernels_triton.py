"""A Triton DTW kernel for :mod:`speechkit.scoring.abx` on CUDA: one program per token pair walks its anti-diagonals.

:func:`dtw_batch` computes what :func:`speechkit.scoring.abx.dtw.batched_dtw` computes -- the DTW cost and both
ABXpy path lengths of a padded batch of frame-distance matrices -- in one kernel launch per batch instead of
about fifteen torch operations per anti-diagonal. Program ``b`` owns pair ``b``; its lanes are the rows ``i``
of the current anti-diagonal ``k`` (cell ``(i, k - i)``). The last two diagonals (cost and the two path lengths)
live in a per-program scratch area in global memory, slot ``i + 1`` for row ``i`` and slot 0 a ``+inf``
sentinel for row ``-1``; cells off the matrix are stored as ``+inf``, so that no border needs a special case.
A barrier after each diagonal's stores makes them visible to the next diagonal's loads (and keeps a diagonal's
reads ahead of the overwrite of its slot two diagonals later); the scratch loads bypass L1 (``.cg``). Each
program walks its own pair's ``n + m - 1`` diagonals, a run-time bound (no compilation per length, no diagonal
off the matrix); under Triton's interpreter, which runs no ``for`` loop over a run-time bound with numpy 2.5, the same
diagonal step (:func:`_diagonal`) in a ``while`` loop.
So the kernel is compiled once per ``BLOCK`` (a power of two >= the longest token of the batch): ``NMAX`` and
``MMAX`` (address arithmetic only) are not specialized on, so that their divisibility by 16 does not multiply
the compilations (each a few tenths of a second in a process's first calls, until Triton's disk cache holds
it).

Same additions in the same order and the same tie-breaks as the torch and numba paths, float64: the same bits.
Correctness is tested on the CPU with Triton's interpreter (``TRITON_INTERPRET=1``, test_abx.py) against
:func:`~speechkit.scoring.abx.dtw.batched_dtw`; on a GPU by the CUDA tests (docs/gpu_checks.md).
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl


@triton.jit
def _diagonal(k, last, i, slot, width, base, cost, lens, inf, n, m, MMAX, total_ptr, lrc_ptr, lcr_ptr, b
              ):  # pragma: no cover - compiled
    """Anti-diagonal ``k`` of one pair (cells ``(i, k - i)``): its costs and both path lengths from diagonals
    ``k - 1`` and ``k - 2``; at ``k == last`` the pair's result."""
    j = k - i
    valid = (i < n) & (j >= 0) & (j < m)
    d = tl.load(base + i.to(tl.int64) * MMAX + j, mask=valid, other=0.0)
    p1 = ((k + 2) % 3) * width  # diagonal k - 1
    p2 = ((k + 1) % 3) * width  # diagonal k - 2
    cur = (k % 3) * width
    up = tl.load(cost + p1 + i, cache_modifier=".cg")  # (i - 1, j): slot i of diagonal k - 1
    left = tl.load(cost + p1 + slot, cache_modifier=".cg")  # (i, j - 1): slot i + 1 of diagonal k - 1
    dg = tl.load(cost + p2 + i, cache_modifier=".cg")  # (i - 1, j - 1): slot i of diagonal k - 2
    rc_up = tl.load(lens + p1 + i, cache_modifier=".cg")
    rc_left = tl.load(lens + p1 + slot, cache_modifier=".cg")
    rc_dg = tl.load(lens + p2 + i, cache_modifier=".cg")
    cr_up = tl.load(lens + 3 * width + p1 + i, cache_modifier=".cg")
    cr_left = tl.load(lens + 3 * width + p1 + slot, cache_modifier=".cg")
    cr_dg = tl.load(lens + 3 * width + p2 + i, cache_modifier=".cg")
    is_diag = (dg <= left) & (dg <= up)
    best = tl.minimum(tl.minimum(up, left), dg)
    new_cost = d + best
    new_rc = tl.where(is_diag, rc_dg, tl.where(left <= up, rc_left, rc_up)) + 1
    new_cr = tl.where(is_diag, cr_dg, tl.where(up <= left, cr_up, cr_left)) + 1
    first = valid & (k == 0)  # cell (0, 0): its distance, one frame pair
    new_cost = tl.where(first, d, new_cost)
    new_rc = tl.where(first, 1, new_rc)
    new_cr = tl.where(first, 1, new_cr)
    tl.debug_barrier()  # every lane has read diagonal k - 2 before its slot takes diagonal k
    tl.store(cost + cur + slot, tl.where(valid, new_cost, inf))
    tl.store(lens + cur + slot, new_rc)
    tl.store(lens + 3 * width + cur + slot, new_cr)
    end = valid & (k == last) & (i == n - 1)
    tl.store(total_ptr + b + i * 0, new_cost, mask=end)
    tl.store(lrc_ptr + b + i * 0, new_rc.to(tl.int64), mask=end)
    tl.store(lcr_ptr + b + i * 0, new_cr.to(tl.int64), mask=end)
    tl.debug_barrier()  # diagonal k stored before diagonal k + 1 reads it


@triton.jit(do_not_specialize=["NMAX", "MMAX"])  # one compilation per BLOCK, not per divisibility
def _dtw_kernel(dist_ptr, n_rows_ptr, n_cols_ptr, cost_ptr, lens_ptr, total_ptr, lrc_ptr, lcr_ptr,
                NMAX, MMAX, BLOCK: tl.constexpr, INTERPRETED: tl.constexpr):  # pragma: no cover - compiled
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(n_rows_ptr + b).to(tl.int32)
    m = tl.load(n_cols_ptr + b).to(tl.int32)
    i = tl.arange(0, BLOCK)
    slot = i + 1
    width = BLOCK + 1
    base = dist_ptr + b * NMAX * MMAX
    cost = cost_ptr + b * 3 * width  # 3 diagonals x (BLOCK + 1) slots, float64
    lens = lens_ptr + b * 6 * width  # len_rc of 3 diagonals, then len_cr of 3 diagonals, int32
    inf = tl.full([BLOCK], float("inf"), tl.float64)
    zero = tl.zeros([BLOCK], tl.int32)
    # every slot of the three diagonals +inf (slot 0 included: the row -1 sentinel); lengths 0
    for r in range(3):
        tl.store(cost + r * width + i, inf)
        tl.store(cost + r * width + BLOCK + i * 0, inf, mask=i == 0)
        tl.store(lens + r * width + i, zero)
        tl.store(lens + (3 + r) * width + i, zero)
    tl.debug_barrier()
    last = n + m - 2  # this pair's n + m - 1 diagonals
    if INTERPRETED:  # Triton's interpreter runs no for loop over a run-time bound (numpy 2.5): the same, as while
        k = 0
        while k <= last:
            _diagonal(k, last, i, slot, width, base, cost, lens, inf, n, m, MMAX, total_ptr, lrc_ptr, lcr_ptr, b)
            k += 1
    else:
        for k in range(0, last + 1):
            _diagonal(k, last, i, slot, width, base, cost, lens, inf, n, m, MMAX, total_ptr, lrc_ptr, lcr_ptr, b)


def dtw_batch(dist: torch.Tensor, n_rows: torch.Tensor, n_cols: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`speechkit.scoring.abx.dtw.batched_dtw` in one Triton launch (CUDA; the CPU under ``TRITON_INTERPRET=1``).

    Args:
        dist: ``(B, N, M)`` float64 frame distances (padding ignored).
        n_rows, n_cols: ``(B,)`` int rows/columns used per pair, each ``>= 1``, on ``dist``'s device.

    Returns:
        ``(cost, len_rc, len_cr)``: ``(B,)`` float64, int64, int64, as :func:`~speechkit.scoring.abx.dtw.batched_dtw`.

    Raises:
        ValueError: ``dist`` is not a 3-d float64 tensor.
    """
    if dist.ndim != 3 or dist.dtype != torch.float64:
        raise ValueError(f"dist must be (B, N, M) float64, got {tuple(dist.shape)} {dist.dtype}")
    bsz, nmax, mmax = dist.shape
    dist = dist.contiguous()
    dev = dist.device
    block = max(16, triton.next_power_of_2(nmax))
    cost = torch.empty((bsz, 3, block + 1), dtype=torch.float64, device=dev)
    lens = torch.empty((bsz, 6, block + 1), dtype=torch.int32, device=dev)
    total = torch.empty(bsz, dtype=torch.float64, device=dev)
    len_rc = torch.empty(bsz, dtype=torch.int64, device=dev)
    len_cr = torch.empty(bsz, dtype=torch.int64, device=dev)
    if bsz:
        _dtw_kernel[(bsz,)](dist, n_rows.to(device=dev, dtype=torch.int64).contiguous(),
                            n_cols.to(device=dev, dtype=torch.int64).contiguous(), cost, lens, total, len_rc, len_cr,
                            nmax, mmax, BLOCK=block, INTERPRETED=os.environ.get("TRITON_INTERPRET") == "1",
                            num_warps=max(1, min(8, block // 32)))
    return total, len_rc, len_cr
