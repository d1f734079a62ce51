"""The DTW of token pairs that share tiles of frame distances (the compiled CPU path), and the entry of the DTW
stage, :func:`pair_distances`.

The tokens are laid out consecutively, grouped by context and speaker, and cut into tiles of about
:data:`~speechkit.scoring.abx.dispatch.TILE_FRAMES` frames (:func:`make_tiles`). Where the needed pairs between two
tiles cover :data:`~speechkit.scoring.abx.dispatch.TILE_MIN_DENSITY` of their frame pairs or more (within a
speaker, across two speakers, inside a large context: :func:`tile_tasks`), one matrix product gives the tile pair's
frame distances and every such pair's DTW reads its own from it in place (the kernels' ``dtw_strided``), at about a
quarter of a batched pair's cost per frame pair; the other pairs are batched (:mod:`.batches`). A tile's product
may round a frame distance differently in the last bit from the batched one.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from speechkit.scoring.abx import batches, dispatch
from speechkit.scoring.abx.arrays import run_bounds
from speechkit.scoring.abx.distances import FrameDistance
from speechkit.scoring.abx.kernel_threads import run_tasks


def pair_distances(
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
    tiles: tuple[np.ndarray, np.ndarray] | None = None,
    kernels=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DTW distances ``d(u, v)`` and ``d(v, u)`` for token pairs ``(gu[k], gv[k])``: with ``tiles`` (compiled path,
    ``use_numba``: ``(tile_of, tile_start)`` from :func:`make_tiles`) the pairs of dense tile pairs through
    :func:`tiled_pair_distances`, the others (all of them without tiles) through
    :func:`~speechkit.scoring.abx.batches.batched_pair_distances`, whose arguments the others are.

    Returns:
        ``(d_uv, d_vu)``: ``(P,)`` float64 tensors on ``gu``'s device, each DTW cost divided by the length of the
        path ABXpy backtracks with ``u`` (resp. ``v``) as the rows (``normalize``), else the cost.
    """
    if use_numba and tiles is not None and len(gu):
        out = tiled_pair_distances(offsets, lengths, gu, gv, frame_dist, normalize, max_batch_elements, progress,
                                   n_threads, tiles, kernels)
        if out is not None:
            return out
    return batches.batched_pair_distances(offsets, lengths, gu, gv, frame_dist, normalize, max_batch_elements,
                                          progress, device, use_numba, n_threads, dtw_fn, kernels)


def make_tiles(groups: np.ndarray, lengths: np.ndarray, pair_groups: np.ndarray,
                tile_frames: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Tokens laid out consecutively (token ``k``: ``lengths[k]`` frames, sorted by ``groups``, ``(U,)`` int64,
    the (context, speaker) each belongs to), cut into tiles of about ``tile_frames`` frames: a group that fits
    stays in one tile (several small groups share one), a larger one is split at token boundaries (a tile then
    runs past ``tile_frames`` by less than one token).

    ``tile_frames``: default :data:`~speechkit.scoring.abx.dispatch.TILE_FRAMES`. ``pair_groups`` ``(U,)``: the
    tokens' groups within which pairs are needed (the context across speakers, the (context, speaker) within).
    When no such group holds ``TILE_MIN_DENSITY * tile_frames`` frames, no tile pair can be dense enough (the frame
    pairs of a tile pair are at most its largest group's frames times the tile's) and None is returned.

    Returns:
        ``(tile_of, tile_start)``: each token's tile (``(U,)`` int64, non-decreasing) and each tile's first frame,
        with the total frame count last (``(n_tiles + 1,)`` int64).
    """
    tile_frames = tile_frames or dispatch.TILE_FRAMES
    n = len(groups)
    if n == 0:
        return None
    lengths = np.asarray(lengths, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(lengths)])
    pb = run_bounds(pair_groups)
    if np.diff(cum[pb]).max() < dispatch.TILE_MIN_DENSITY * tile_frames:
        return None
    gb = run_bounds(groups)
    tile_of = np.empty(n, dtype=np.int64)
    t, fill = 0, 0
    for a, b in zip(gb[:-1].tolist(), gb[1:].tolist()):
        frames = int(cum[b] - cum[a])
        if frames > tile_frames:  # split: a token goes to the chunk where it starts
            if fill:
                t, fill = t + 1, 0
            chunk = (cum[a:b] - cum[a]) // tile_frames
            tile_of[a:b] = t + chunk
            t += int(chunk[-1]) + 1
            continue
        if fill and fill + frames > tile_frames:
            t, fill = t + 1, 0
        tile_of[a:b] = t
        fill += frames
    first = run_bounds(tile_of)[:-1]
    # numbered densely: a token longer than a tile leaves the chunk numbers it spans unused
    tile_of = np.concatenate([[0], np.cumsum(np.diff(tile_of) != 0)]).astype(np.int64)
    return tile_of, np.concatenate([cum[first], cum[-1:]])


def tile_tasks(gu: np.ndarray, gv: np.ndarray, lengths: np.ndarray, tile_of: np.ndarray,
                tile_start: np.ndarray, n_threads: int = 1) -> tuple[list[tuple], np.ndarray | None, np.ndarray | None]:
    """The token pairs (``gu[k]``, ``gv[k]``; ``(P,)`` int64, either order) of the tile pairs dense enough to
    compute whole (:data:`~speechkit.scoring.abx.dispatch.TILE_MIN_DENSITY`: their pairs' frame pairs,
    ``lengths[gu] * lengths[gv]`` summed, fill that share of the tile pair).

    Returns ``(tasks, dense, sparse)``: ``dense`` the positions ``k`` of those pairs ordered by tile pair, in
    increasing order inside one (int32 below 2^31 pairs); ``tasks`` one ``("tile", lo, hi, s, e)`` per dense tile
    pair ``lo <= hi`` (its pairs: ``dense[s:e]``), the largest tile pairs first; ``sparse`` the other positions,
    increasing (int64). ``([], None, None)`` where no tile pair is dense. Three passes over the pairs in chunks
    (:data:`~speechkit.scoring.abx.dispatch.TILE_CHUNK`), each chunk a task for ``n_threads`` threads (numpy
    releases the GIL in these operations; the result does not depend on the threads): each pair's tile pair (kept,
    2-4 bytes a pair) and each tile pair's frame pairs and pair count; then each chunk's pairs per dense tile pair;
    then, from where each chunk's pairs of a tile pair start (a prefix sum over the chunks), a stable counting sort
    into ``dense``."""
    n_tiles = len(tile_start) - 1
    n = len(gu)
    tile_of = np.asarray(tile_of, dtype=np.int64)
    n_keys = n_tiles * n_tiles
    key_type = np.uint16 if n_keys <= 1 << 16 else np.uint32 if n_keys <= 1 << 32 else np.int64
    pair_key = np.empty(n, dtype=key_type)  # each pair's tile pair, min(tile) * n_tiles + max(tile)
    spans = [(s, min(s + dispatch.TILE_CHUNK, n)) for s in range(0, n, dispatch.TILE_CHUNK)]
    table = n_keys <= dispatch.TILE_TABLE_MAX  # tile pairs indexed directly
    lock = threading.Lock()
    sums: list[tuple[np.ndarray, np.ndarray]] = []  # table: per thread, frame pairs and pairs per tile pair
    mine = threading.local()
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * len(spans)  # no table: per chunk

    def count(c: int) -> None:
        s, e = spans[c]
        tu, tv = tile_of[gu[s:e]], tile_of[gv[s:e]]
        k = np.minimum(tu, tv)
        np.maximum(tu, tv, out=tu)
        k *= n_tiles
        k += tu
        pair_key[s:e] = k
        cells = lengths[gu[s:e]] * lengths[gv[s:e]]
        if table:
            acc = getattr(mine, "acc", None)
            if acc is None:
                acc = mine.acc = (np.zeros(n_keys), np.zeros(n_keys, dtype=np.int64))
                with lock:
                    sums.append(acc)
            filled_t, count_t = acc
            filled_t += np.bincount(k, weights=cells, minlength=n_keys)
            count_t += np.bincount(k, minlength=n_keys)
        else:
            u, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
            parts[c] = (u, np.bincount(inv.reshape(-1), weights=cells), cnt)

    run_tasks(count, range(len(spans)), n_threads)
    if table:
        filled, count_all = (sum(a[i] for a in sums) for i in (0, 1)) if sums else (np.zeros(n_keys),) * 2
        keys_all = np.nonzero(count_all)[0]
        filled, count_all = filled[keys_all], count_all[keys_all].astype(np.int64)
    elif n:
        u, inv = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
        keys_all = u
        filled = np.bincount(inv.reshape(-1), weights=np.concatenate([p[1] for p in parts]), minlength=len(u))
        count_all = np.bincount(inv.reshape(-1), weights=np.concatenate([p[2] for p in parts]),
                                minlength=len(u)).astype(np.int64)
    else:
        keys_all, filled, count_all = (np.zeros(0, dtype=np.int64),) * 3
    del parts, sums
    size = np.diff(tile_start)
    is_dense = filled >= dispatch.TILE_MIN_DENSITY * size[keys_all // n_tiles] * size[keys_all % n_tiles]
    ok = keys_all[is_dense]  # the dense tile pairs, ascending: rank 0 .. len(ok) - 1
    if len(ok) == 0:
        return [], None, None
    counts = count_all[is_dense]
    ends = np.cumsum(counts)
    if table:
        rank_of = np.full(n_keys, -1, dtype=np.int64)
        rank_of[ok] = np.arange(len(ok))
    # the second and third passes in chunks few enough that a (chunks x dense tile pairs) table stays small
    step = max(dispatch.TILE_CHUNK, -(-n * len(ok) // dispatch.TILE_TABLE_MAX))
    spans = [(s, min(s + step, n)) for s in range(0, n, step)]

    def ranks(s: int, e: int) -> np.ndarray:  # each pair's dense tile pair, -1 for a sparse one
        k = pair_key[s:e]
        if table:
            return rank_of[k]
        k = k.astype(np.int64)
        rank = np.searchsorted(ok, k)
        rank[ok[np.minimum(rank, len(ok) - 1)] != k] = -1
        return rank

    per_chunk = np.zeros((len(spans), len(ok)), dtype=np.int64)  # each chunk's pairs per dense tile pair
    sparse_parts: list[np.ndarray | None] = [None] * len(spans)

    def tally(c: int) -> None:
        s, e = spans[c]
        rank = ranks(s, e)
        sparse_parts[c] = np.nonzero(rank < 0)[0] + s
        per_chunk[c] = np.bincount(rank[rank >= 0], minlength=len(ok))

    run_tasks(tally, range(len(spans)), n_threads)
    # where chunk c's pairs of tile pair r start in dense: the tile pair's start, then the earlier chunks' pairs
    first_at = (ends - counts)[None, :] + np.cumsum(per_chunk, axis=0) - per_chunk
    del per_chunk
    dense = np.empty(int(ends[-1]), dtype=np.int32 if n < 1 << 31 else np.int64)  # half the memory to fault in

    def place(c: int) -> None:
        s, e = spans[c]
        rank = ranks(s, e)
        at = np.nonzero(rank >= 0)[0]
        if len(at) == 0:  # a chunk of sparse pairs only
            return
        rk = rank[at]
        order = np.argsort(rk.astype(np.uint16) if len(ok) <= 1 << 16 else rk, kind="stable")
        rk, at = rk[order], at[order]
        bounds = run_bounds(rk)
        first, run = bounds[:-1], np.diff(bounds)
        dense[first_at[c, rk] + np.arange(len(rk)) - np.repeat(first, run)] = at + s

    run_tasks(place, range(len(spans)), n_threads)
    sparse = np.concatenate(sparse_parts) if sparse_parts else np.zeros(0, dtype=np.int64)
    tasks = [("tile", int(k // n_tiles), int(k % n_tiles), int(e - c), int(e))
             for k, c, e in zip(ok.tolist(), counts.tolist(), ends.tolist())]
    tasks.sort(key=lambda t: -int(size[t[1]]) * int(size[t[2]]))  # the largest first: the threads end together
    return tasks, dense, sparse


def tiled_pair_distances(offsets, lengths, gu, gv, frame_dist, normalize, max_batch_elements, progress, n_threads,
                          tiles, kernels=None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`pair_distances` of the compiled path with tiles (CPU; ``gu``, ``gv`` (P,) int64 CPU tensors): the
    pairs of dense tile pairs (:func:`tile_tasks`), one task per tile pair (its frame distances in one matrix product,
    :meth:`FrameDistance.block`, that every pair's DTW reads in place: ``dtw_strided``), the others through
    :func:`~speechkit.scoring.abx.batches.batched_pair_distances`. Each pair has the longer token on the rows, as
    there. A task writes its pairs' ``d_uv``, ``d_vu`` itself (the longer token on the rows, the division by the
    path lengths), so that no pass over all pairs runs on one thread after the threaded ones. None where no tile
    pair is dense. ``kernels``: the compiled kernels (:func:`~speechkit.scoring.abx.dispatch.load_kernels`;
    default numba's)."""
    K = kernels if kernels is not None else dispatch.load_kernels("numba")

    len64 = np.ascontiguousarray(lengths, dtype=np.int64)
    gu_np, gv_np = gu.numpy(), gv.numpy()
    tasks, dense, sparse = tile_tasks(gu_np, gv_np, len64, *tiles, n_threads=n_threads)
    if dense is None:
        return None
    tile_of, tile_start = tiles
    d_uv, d_vu = np.empty(len(gu_np)), np.empty(len(gu_np))
    bar = None
    if progress:
        bar = tqdm(total=len(tasks), desc="DTW tiles", unit="tile", leave=False)
    bar_lock = threading.Lock()

    def work(task):  # the pairs dense[s:e], all between tiles lo <= hi
        _, lo, hi, s, e = task
        pos = dense[s:e]
        u, v = gu_np[pos], gv_np[pos]
        lu, lv = len64[u], len64[v]
        swap = lv > lu  # the longer token on the rows
        r, c, lr, lc = np.where(swap, v, u), np.where(swap, u, v), np.where(swap, lv, lu), np.where(swap, lu, lv)
        x0, y0, w = tile_start[lo], tile_start[hi], tile_start[hi + 1] - tile_start[hi]
        flat = frame_dist.block(x0, tile_start[lo + 1], y0, tile_start[hi + 1]).reshape(-1)
        r_lo = tile_of[r] == lo  # rows in tile lo read the tile as it is, the others transposed
        base = np.where(r_lo, (offsets[r] - x0) * w + offsets[c] - y0, (offsets[c] - x0) * w + offsets[r] - y0)
        tot, rc, cr = np.empty(e - s), np.empty(e - s, dtype=np.int64), np.empty(e - s, dtype=np.int64)
        K.dtw_strided(flat, base, np.where(r_lo, w, 1), np.where(r_lo, 1, w), lr, lc, tot, rc, cr)
        if normalize:
            rows_first, cols_first = tot / rc, tot / cr  # d(rows, cols), d(cols, rows)
        else:
            rows_first = cols_first = tot
        d_uv[pos] = np.where(swap, cols_first, rows_first)
        d_vu[pos] = np.where(swap, rows_first, cols_first)
        if bar is not None:
            with bar_lock:
                bar.update(1)

    with dispatch.torch_threads(1):
        K.run_tasks(work, tasks, n_threads)
    if bar is not None:
        bar.close()
    if len(sparse):
        sparse_t = torch.from_numpy(sparse)
        s_uv, s_vu = batches.batched_pair_distances(offsets, lengths, gu[sparse_t], gv[sparse_t], frame_dist,
                                                    normalize, max_batch_elements, progress, torch.device("cpu"),
                                                    True, n_threads, kernels=K)
        d_uv[sparse], d_vu[sparse] = s_uv.numpy(), s_vu.numpy()
    return torch.from_numpy(d_uv), torch.from_numpy(d_vu)
