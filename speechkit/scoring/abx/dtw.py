"""The DTW of ABX as torch vector operations (the ``torch`` backend, and the reference of the compiled kernels).

ABXpy's ``dtw.pyx`` recursion with steps (1,0), (0,1), (1,1) over a frame distance,
``cost[i, j] = f(p_i, x_j) + min(cost[i-1, j], cost[i-1, j-1], cost[i, j-1])``, and the length of the minimal path
backtracked from the end preferring the diagonal step, then the step along the second argument, on ties; one
programme gives both argument orders' lengths. The C, numba and Triton kernels
(:mod:`speechkit.scoring.abx.dispatch`) compute the same additions in the same order: the same bits.
"""
from __future__ import annotations

import numpy as np
import torch

_INF = float("inf")


def batched_dtw(
    dist: torch.Tensor, n_rows: torch.Tensor, n_cols: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DTW over a padded batch of frame-distance matrices, by anti-diagonals (torch: CPU or CUDA).

    Recursion (ABXpy ``dtw.pyx``): ``cost[0,0] = d[0,0]``; first row/column cumulative sums;
    ``cost[i,j] = d[i,j] + min(cost[i-1,j], cost[i-1,j-1], cost[i,j-1])``. Every cell of one
    anti-diagonal ``i + j = k`` depends only on diagonals ``k-1`` and ``k-2``, so each diagonal is
    one vector operation over the whole batch. Values outside ``[:n_rows[b], :n_cols[b]]`` are
    ignored (no valid cell depends on them).

    Path lengths are carried forward with the costs: a cell's length is one more than that of the
    predecessor ABXpy's backtrack would step to from it (the same three costs, the same tie-break),
    so the backtrack from the last cell follows exactly those predecessors and no cost matrix is kept
    (three diagonals; no host synchronisation inside the loop on CUDA).

    Args:
        dist: ``(B, N, M)`` frame distances, any padding beyond each pair's size.
        n_rows: ``(B,)`` int, rows used per pair (>= 1).
        n_cols: ``(B,)`` int, columns used per pair (>= 1).

    Returns:
        ``(cost, len_rc, len_cr)``, each ``(B,)`` on ``dist``'s device: the total cost of the minimal
        path; the number of frame pairs on the path backtracked with ties going diagonal, then
        column-1 (``j``), then row-1 (``i``) -- ABXpy's length when rows are its first argument --
        and the same with the column/row preference swapped (ABXpy's length for the transposed call).

    Raises:
        ValueError: ``dist`` is not 3-d.
    """
    if dist.ndim != 3:
        raise ValueError(f"dist must be (B, N, M), got {tuple(dist.shape)}")
    bsz, nmax, mmax = dist.shape
    dev, dt = dist.device, dist.dtype
    rows_host = n_rows.detach().cpu().long()
    cols_host = n_cols.detach().cpu().long()
    kmax = nmax + mmax - 1
    # skewed view, no copy: skew[b, k, i] = dist[b, i, k - i] (offset i*M + k - i stays inside the
    # pair's block for every k, i; entries with k - i outside [0, M) are never used)
    dist = dist.contiguous()
    skew = dist.as_strided((bsz, kmax, nmax), (nmax * mmax, 1, mmax - 1), dist.storage_offset())
    # three rolling diagonals: cost[.][b, 1 + i] = cost of cell (i, k - i); column 0 is a +inf sentinel
    # for i = -1, and one +inf is written past each diagonal's last cell (the j = -1 neighbour of the next)
    cost = torch.full((3, bsz, nmax + 2), _INF, dtype=dt, device=dev)
    lrc = torch.zeros((3, bsz, nmax + 2), dtype=torch.long, device=dev)
    lcr = torch.zeros((3, bsz, nmax + 2), dtype=torch.long, device=dev)
    cost[0, :, 1] = skew[:, 0, 0]
    lrc[0, :, 1] = 1
    lcr[0, :, 1] = 1
    total = torch.empty(bsz, dtype=dt, device=dev)
    len_rc = torch.empty(bsz, dtype=torch.long, device=dev)
    len_cr = torch.empty(bsz, dtype=torch.long, device=dev)
    ends = (rows_host + cols_host - 2).numpy()
    by_end: dict[int, np.ndarray] = {}
    for k in sorted(set(ends.tolist())):  # (np.unique's first call in a process imports numpy.ma: 10 ms)
        by_end[k] = np.nonzero(ends == k)[0]

    def collect(k: int, slot: int) -> None:
        sel = by_end.get(k)
        if sel is None:
            return
        b = torch.from_numpy(sel).to(dev)
        col = rows_host[sel].to(dev)  # slot of the last row, 1 + (n_rows - 1)
        total[b] = cost[slot, b, col]
        len_rc[b] = lrc[slot, b, col]
        len_cr[b] = lcr[slot, b, col]

    collect(0, 0)
    for k in range(1, kmax):
        cur, p1, p2 = k % 3, (k - 1) % 3, (k - 2) % 3
        lo, hi = max(0, k - mmax + 1), min(k, nmax - 1)
        up = cost[p1, :, lo : hi + 1]  # (i-1, j)
        left = cost[p1, :, lo + 1 : hi + 2]  # (i, j-1)
        if k >= 2:
            dg = cost[p2, :, lo : hi + 1]  # (i-1, j-1)
        else:
            dg = torch.full_like(up, _INF)
        is_diag = (dg <= left) & (dg <= up)
        left_first = left <= up  # column step on an up/left tie
        up_first = up <= left  # row step on an up/left tie
        best = torch.minimum(torch.minimum(up, left), dg)
        cost[cur, :, lo + 1 : hi + 2] = skew[:, k, lo : hi + 1] + best
        l_up, l_left = lrc[p1, :, lo : hi + 1], lrc[p1, :, lo + 1 : hi + 2]
        l_dg = lrc[p2, :, lo : hi + 1]
        lrc[cur, :, lo + 1 : hi + 2] = torch.where(is_diag, l_dg, torch.where(left_first, l_left, l_up)) + 1
        l_up, l_left = lcr[p1, :, lo : hi + 1], lcr[p1, :, lo + 1 : hi + 2]
        l_dg = lcr[p2, :, lo : hi + 1]
        lcr[cur, :, lo + 1 : hi + 2] = torch.where(is_diag, l_dg, torch.where(up_first, l_up, l_left)) + 1
        cost[cur, :, hi + 2] = _INF
        collect(k, cur)
    return total, len_rc, len_cr
