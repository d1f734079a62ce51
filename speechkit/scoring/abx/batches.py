"""The DTW of token pairs in padded batches of like sizes (every pair where no tile holds it: :mod:`.tiles`).

The pairs are sorted by size (the longer token on the rows) and cut into batches whose padding costs less than a
batch's fixed cost (:func:`plan_groups`); a batch's frame distances are one torch computation, its DTW one call of
the compiled kernel (CPU, batches shared by the threads) or of the device DTW (torch's or Triton's).
"""
from __future__ import annotations

import bisect
import threading
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from speechkit.scoring.abx import dispatch
from speechkit.scoring.abx.arrays import run_bounds
from speechkit.scoring.abx.distances import FrameDistance
from speechkit.scoring.abx.dtw import batched_dtw


def batched_pair_distances(
    offsets: np.ndarray,
    lengths: np.ndarray,
    gu: torch.Tensor,
    gv: torch.Tensor,
    frame_dist: FrameDistance,
    normalize: bool,
    max_batch_elements: int,
    progress: bool,
    device: torch.device = torch.device("cpu"),
    use_numba: bool = False,
    n_threads: int = 1,
    dtw_fn: Callable | None = None,
    kernels=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DTW distances ``d(u, v)`` and ``d(v, u)`` for token pairs ``(gu[k], gv[k])``, batched by size.

    ``gu``, ``gv``: ``(P,)`` int64 tensors of token indices (into ``offsets`` / ``lengths``, the tokens' first
    frame in the flat frame array and their frame counts), on the device where the per-pair work is done: the
    scoring device on CUDA, the CPU otherwise. The pairs are ordered by size there (longer token on the rows;
    rows, then cols, descending), planned into batches from the counts of each size (:func:`plan_groups`),
    and their results stay there: on CUDA the host never touches an array of pairs. Each batch's frame
    distances are computed in torch (on ``device``), then its DTW: the compiled kernel (``use_numba``, CPU:
    ``kernels``, numba's by default; batches shared by ``n_threads`` threads, torch's intra-op pool set to one
    thread meanwhile) or ``dtw_fn`` (:func:`~speechkit.scoring.abx.dtw.batched_dtw` or the Triton kernel, one batch
    at a time; on the CPU with torch's pool set to ``n_threads`` threads).

    Returns:
        ``(d_uv, d_vu)``: ``(P,)`` float64 tensors on ``gu``'s device, each DTW cost divided by the length of the
        path ABXpy backtracks with ``u`` (resp. ``v``) as the rows (``normalize``), else the cost.
    """
    pdev = gu.device
    len_t = torch.from_numpy(np.ascontiguousarray(lengths, dtype=np.int64)).to(pdev)
    lu, lv = len_t[gu], len_t[gv]
    swap = lv > lu  # put the longer token on the rows (smaller skewed layout)
    nr, nc = torch.where(swap, lv, lu), torch.where(swap, lu, lv)
    base = int(nc.max()) + 1
    key = nr * base + nc
    del lu, lv, nr, nc
    # by rows, then cols, descending: on the CPU numpy's stable radix sort of a small key (twice as fast as
    # torch's sort there), on CUDA torch's
    if pdev.type == "cpu":
        k = key.numpy()
        desc = int(k.max()) - k
        order = torch.from_numpy(np.argsort(desc.astype(np.uint16) if desc.max() < 1 << 16 else desc, kind="stable"))
        del k, desc
    else:
        order = torch.sort(key, descending=True, stable=True)[1]
    sizes, counts = torch.unique_consecutive(key[order], return_counts=True)
    del key
    sizes, counts = sizes.cpu().numpy(), counts.cpu().numpy()
    rows = torch.where(swap, gv, gu)[order]  # in batch order from here on
    cols = torch.where(swap, gu, gv)[order]
    swap = swap[order]
    n = len(order)
    total = torch.empty(n, dtype=torch.float64, device=pdev)
    len_rc = torch.empty(n, dtype=torch.long, device=pdev)
    len_cr = torch.empty(n, dtype=torch.long, device=pdev)
    overhead = dispatch.BATCH_OVERHEAD_NUMBA if use_numba else dispatch.BATCH_OVERHEAD
    batches = plan_groups(sizes // base, sizes % base, counts, max_batch_elements, frame_dist.scratch, overhead)
    bar = None
    if progress:
        bar = tqdm(total=len(batches), desc="DTW batches", unit="batch", leave=False)
    bar_lock = threading.Lock()
    last = int(offsets[-1] + lengths[-1]) - 1  # frames past a token's end are clamped, never used

    if use_numba:
        K = kernels if kernels is not None else dispatch.load_kernels("numba")
        rows_np, cols_np = rows.numpy(), cols.numpy()
        tot_np, rc_np, cr_np = total.numpy(), len_rc.numpy(), len_cr.numpy()
        len64 = np.ascontiguousarray(lengths, dtype=np.int64)

        def work(batch):
            start, stop, nmax, mmax = batch
            r, c = rows_np[start:stop], cols_np[start:stop]
            ix = torch.from_numpy(np.minimum(offsets[r][:, None] + np.arange(nmax), last))
            iy = torch.from_numpy(np.minimum(offsets[c][:, None] + np.arange(mmax), last))
            d = np.ascontiguousarray(frame_dist.batch(ix, iy).numpy())
            K.dtw_block(d, len64[r], len64[c], tot_np[start:stop], rc_np[start:stop], cr_np[start:stop])
            if bar is not None:
                with bar_lock:
                    bar.update(1)

        with dispatch.torch_threads(1):
            K.run_tasks(work, batches, n_threads)
    else:
        with dispatch.torch_threads(n_threads if device.type == "cpu" else torch.get_num_threads()):
            torch_batches(batches, rows, cols, offsets, len_t, last, frame_dist, device, total, len_rc, len_cr, bar,
                           dtw_fn or batched_dtw)
    if bar is not None:
        bar.close()
    del rows, cols
    if normalize:
        d_rows_first = total / len_rc.to(torch.float64)  # d(rows, cols)
        d_cols_first = total / len_cr.to(torch.float64)  # d(cols, rows)
    else:
        d_rows_first = d_cols_first = total
    del len_rc, len_cr
    d_uv = torch.empty(n, dtype=torch.float64, device=pdev)
    d_vu = torch.empty(n, dtype=torch.float64, device=pdev)
    d_uv[order] = torch.where(swap, d_cols_first, d_rows_first)
    d_vu[order] = torch.where(swap, d_rows_first, d_cols_first)
    return d_uv, d_vu


def torch_batches(batches, rows, cols, offsets, len_t, last, frame_dist, device, total, len_rc, len_cr, bar,
                   dtw_fn: Callable) -> None:
    """The torch path of :func:`batched_pair_distances`: frame distances and ``dtw_fn`` (:func:`batched_dtw` or the
    Triton kernel), batch by batch, over ``rows`` / ``cols`` (token indices in batch order, on ``device``),
    writing ``total``, ``len_rc``, ``len_cr`` (on ``device``) in place: on CUDA no batch waits for the host."""
    off_t = torch.from_numpy(offsets).to(device)
    rows, cols, len_t = rows.to(device), cols.to(device), len_t.to(device)
    ar = torch.arange(max((max(b[2], b[3]) for b in batches), default=1), device=device)[None, :]
    for start, stop, nmax, mmax in batches:
        r, c = rows[start:stop], cols[start:stop]
        ix = (off_t[r][:, None] + ar[:, :nmax]).clamp_(max=last)
        iy = (off_t[c][:, None] + ar[:, :mmax]).clamp_(max=last)
        d = frame_dist.batch(ix, iy)
        tot, a, b = dtw_fn(d, len_t[r], len_t[c])
        total[start:stop] = tot
        len_rc[start:stop] = a
        len_cr[start:stop] = b
        if bar is not None:
            bar.update(1)


def plan_batches(
    nr: np.ndarray, nc: np.ndarray, max_elements: int, scratch: Callable[[int, int], int] = lambda n, m: 0,
    overhead: int = dispatch.BATCH_OVERHEAD,
) -> list[tuple[int, int, int, int]]:
    """Split pairs sorted by (rows, cols) descending into ``(start, stop, n_rows, n_cols)`` batches:
    :func:`plan_groups` on the runs of equal sizes of ``nr`` / ``nc``."""
    n = len(nr)
    if n == 0:
        return []
    key = nr.astype(np.int64) * (int(nc.max()) + 1) + nc
    bounds = run_bounds(key)
    return plan_groups(nr[bounds[:-1]], nc[bounds[:-1]], np.diff(bounds), max_elements, scratch, overhead)


def plan_groups(
    group_nr: np.ndarray, group_nc: np.ndarray, counts: np.ndarray, max_elements: int,
    scratch: Callable[[int, int], int] = lambda n, m: 0, overhead: int = dispatch.BATCH_OVERHEAD,
) -> list[tuple[int, int, int, int]]:
    """Batches ``(start, stop, n_rows, n_cols)`` of pairs sorted by (rows, cols) descending, given as runs:
    ``counts[g]`` pairs of ``group_nr[g]`` x ``group_nc[g]`` frames, in that order.

    A batch is padded to its first pair's rows and its largest cols and holds at most
    ``max_elements // (N * (N + M) + scratch(N, M))`` pairs (frame distances + skewed cost +
    the frame distance's temporaries). A new batch starts
    before a group of same-size pairs when padding them (and the batch so far) costs more than the
    fixed cost of another batch, ``overhead * (rows + cols - 1)``. The loop is over the runs and the
    batches, never over pairs.
    """
    group_nr = [int(x) for x in group_nr]
    group_nc = [int(x) for x in group_nc]
    if not group_nr:
        return []
    ends = np.cumsum(counts).tolist()
    starts = [0] + ends[:-1]
    n = ends[-1]
    batches = []
    cur, nmax, mmax = 0, group_nr[0], group_nc[0]
    for g, (s, e) in enumerate(zip(starts, ends)):
        r, c = group_nr[g], group_nc[g]
        if s > cur:
            m2 = max(mmax, c)
            pad_cost = (e - s) * nmax * m2 + (s - cur) * nmax * (m2 - mmax)
            new_cost = overhead * (r + c - 1) + (e - s) * r * c
            if new_cost < pad_cost:
                batches.append((cur, s, nmax, mmax))
                cur, nmax, mmax = s, r, c
        mmax = max(mmax, c)
        while e - cur > (cap := max(1, max_elements // (nmax * (nmax + mmax) + scratch(nmax, mmax)))):
            batches.append((cur, cur + cap, nmax, mmax))
            cur += cap
            g0 = bisect.bisect_right(starts, cur) - 1  # the run holding pair cur
            nmax, mmax = group_nr[g0], max(group_nc[g0: g + 1])
    batches.append((cur, n, nmax, mmax))
    return batches
