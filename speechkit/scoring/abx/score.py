"""The ABX pipeline: :func:`abx_error` runs the stages of :mod:`speechkit.scoring.abx` on features and items.

Items and frames (:mod:`.frames`) -> cells (:mod:`.cells`) -> the token pairs they need and their table
(:mod:`.pairs`) -> frame distances (:mod:`.distances`) and the DTW of every pair (:mod:`.tiles`, :mod:`.batches`,
on the backend :mod:`.dispatch` chooses) -> counting (:mod:`.counting`) -> averaging (:mod:`.averaging`).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from speechkit.scoring.abx import averaging, cells, counting, dispatch, frames, pairs, tiles
from speechkit.scoring.abx.averaging import CONVENTIONS, AbxResult
from speechkit.scoring.abx.cells import MODES
from speechkit.scoring.abx.distances import FRAME_DISTANCES, check_distance
from speechkit.scoring.abx.frames import DEFAULT_TOLERANCE, EMPTY_ITEM_RULES
from speechkit.scoring.abx_items import Item
from speechkit.utils.perf import gc_paused


def check_options(mode: str, distance: str, empty_items: str, convention: str, num_threads: int | None) -> None:
    """Raise ``ValueError`` naming the parameter for an unknown ``mode``, ``empty_items``, ``distance`` or
    ``convention``, or ``num_threads`` below 1."""
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}', expected across or within")
    if empty_items not in EMPTY_ITEM_RULES:
        raise ValueError(f"unknown empty_items rule '{empty_items}', expected one of {', '.join(EMPTY_ITEM_RULES)}")
    check_distance(distance)
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention '{convention}', expected one of {', '.join(CONVENTIONS)}")
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")


@gc_paused
def abx_error(
    features: Mapping[str, np.ndarray],
    items: Sequence[Item],
    mode: str = "across",
    distance: str = "cosine",
    frame_shift: float = 0.01,
    normalize: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    source: str = "items",
    max_batch_elements: int = dispatch.MAX_BATCH_ELEMENTS,
    progress: bool = False,
    device: str | torch.device = "cpu",
    empty_items: str = "overlap",
    convention: str = "zr2019",
    num_threads: int | None = None,
    backend: str = "auto",
) -> AbxResult:
    """ZeroSpeech ABX error of frame-level ``features`` on ``items`` (see :mod:`speechkit.scoring.abx`).

    Args:
        features: ``{file: (frames, dim) array}``; every item's file must be present.
        items: ABX items (:func:`speechkit.scoring.abx_items.read_item_file`).
        mode: ``"across"`` or ``"within"`` speakers.
        distance: frame distance, one of :data:`~speechkit.scoring.abx.distances.DISTANCES`.
        frame_shift: seconds between frames; frame ``i`` lies at ``(i + 0.5) * frame_shift``.
        empty_items: an item with no frame centre inside: ``overlap`` (default) takes the frame(s)
            overlapping it, ``drop`` drops it (see :mod:`speechkit.scoring.abx`).
        normalize: divide each DTW cost by its path length (ZeroSpeech default).
        tolerance: seconds an item may run past the end of its feature file.
        source: item file name for error messages.
        max_batch_elements: bound on ``batch * (N + M - 1) * N`` per DTW batch (memory; on CUDA the
            default is raised to ``1 << 25``: fewer, larger batches).
        progress: show a tqdm bar over DTW batches.
        device: torch device for frame distances and DTW (float64 throughout). Under ``backend="auto"`` a small
            task (fewer than 20 000 DTW pairs and 2 M triplets, or whose CPU work is estimated under a second on
            ``num_threads`` threads: :func:`~speechkit.scoring.abx.dispatch.cpu_seconds`) is scored on the CPU
            whatever the device: the same result, without CUDA's start and kernel compilation (which cost more
            than such a task).
        convention: ``zr2019`` (ABXpy's averaging and argument order, ZeroSpeech 2017/2019/2020) or
            ``zr2021`` (Libri-Light's, as ``fastabx.zerospeech_abx``; ZeroSpeech 2021 and later); see
            :mod:`speechkit.scoring.abx`.
        num_threads: CPU threads (default: ``torch.get_num_threads()``): the compiled kernels' threads,
            torch's intra-op pool being set to one thread meanwhile; the torch path's intra-op pool (under
            ``auto`` a small task, fewer than 20 000 DTW pairs and 2 M triplets, runs on one thread); the large
            torch operations around them (needed-pair masks of 4 M elements or more, the pair and table
            assembly). Every other torch operation runs on one thread. Torch's setting is restored after.
        backend: ``auto`` (the compiled kernels on the CPU, C's where built, else numba's when numba
            imports, except for small tasks until numba's have been loaded (torch's path then); on CUDA
            the DTW is a Triton kernel, one program per pair, where triton imports, else
            :func:`~speechkit.scoring.abx.dtw.batched_dtw`, and the triplets are counted in torch on the GPU: the
            distance table never leaves it), ``c``, ``numba``, ``triton`` (CUDA; the CPU only under Triton's
            interpreter, for tests) or ``torch`` (``batched_dtw`` and torch's counting,
            :func:`~speechkit.scoring.abx.counting.count_cells_torch`). All give the same bits but for the compiled
            path's tiles (:mod:`speechkit.scoring.abx.dispatch`: the last bit of a frame distance).

    Returns:
        :class:`~speechkit.scoring.abx.averaging.AbxResult`.

    Raises:
        ValueError: unknown mode/distance/convention/backend, ``num_threads`` < 1, ``backend="numba"``
            without numba or on CUDA, ``backend="c"`` without its built library or on CUDA, or no triplet can
            be formed.
        DataError: missing feature file, item past its file's end, NaN/Inf in features, or
            (``kl``) negative / all-zero frames.
    """
    check_options(mode, distance, empty_items, convention, num_threads)
    route = dispatch.route(backend, torch.device(device))
    sel = frames.select_items(features, items, frame_shift, tolerance, source, empty_items, convention == "zr2021")
    n_req = num_threads if num_threads is not None else max(1, torch.get_num_threads())
    with dispatch.torch_threads(1):  # small torch operations on one thread; the large ones say otherwise
        task = cells.build_task(sel.kept, mode)
        # a small task goes to the CPU: decided on a bound of the pairs before CUDA is touched (its context costs
        # ~0.3 s), then on the pairs
        route = dispatch.cpu_if_small(route, backend, task.pairs_bound, sel.lengths, task.n_upper, n_req)
        plan = pairs.plan_pairs(task, sel.kept, mode, route.pair_device, n_req)
        route = dispatch.cpu_if_small(route, backend, plan.n_pairs, sel.lengths, task.n_upper, n_req)
        route = dispatch.with_kernels(route, backend, plan.n_pairs, task.n_upper, n_req)
        # numba's kernels load in the background while the pairs' DTW runs (on CUDA the host waits); C's are loaded
        warm = route.kernels.warm_up_in_background() if route.kernels is not None else None
        used, gu, gv, groups = pairs.compact_tokens(plan, task, len(sel.kept), route.pair_device, route.n_threads,
                                                    grouped=route.compiled_dtw)

        # the frames of the tokens that take part in some triplet, one after the other
        flat = frames.token_frames(features, sel, used, distance, source)
        lengths = sel.lengths[used]
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        frame_dist = FRAME_DISTANCES[distance](torch.from_numpy(flat).to(route.device))
        del flat
        tile_layout = None
        if route.compiled_dtw and frame_dist.tileable:
            tile_layout = tiles.make_tiles(groups, lengths, groups if mode == "within" else groups >> 32)
        if route.device.type == "cuda" and max_batch_elements == dispatch.MAX_BATCH_ELEMENTS:
            max_batch_elements = dispatch.MAX_BATCH_ELEMENTS_CUDA

        # one DTW per unordered token pair: d_uv (u as rows), d_vu (v as rows)
        dtw_fn = None if route.compiled_dtw else dispatch.device_dtw(backend, route.device)
        d_uv, d_vu = tiles.pair_distances(offsets, lengths, gu, gv, frame_dist, normalize, max_batch_elements,
                                          progress, route.device, route.compiled_dtw, route.n_threads, dtw_fn,
                                          tile_layout, route.kernels)
        del gu, gv
        # entry [p, x] of the table: the distance of token p to X token x, the DTW with p as its rows (ABXpy:
        # d(A, X)) under zr2019, with x as its rows (fastabx: d(X, A)) under zr2021
        if convention == "zr2021":
            d_uv, d_vu = d_vu, d_uv
        with dispatch.torch_threads(route.n_threads):
            # the compiled kernels count on the CPU (there the same memory, no copy); torch counts on pair_device
            table = pairs.distance_table(plan, d_uv, d_vu, route.pair_device, on_host=route.kernels is not None)
        del d_uv, d_vu
        if warm is not None:
            warm.join()

        g_off, g_w, to_block = pairs.cell_blocks(plan, task.cells, mode)
        wins, ties, cell_n, cell_group, cell_spk_x = counting.count_triplets(
            task.cells, table, g_off, g_w, to_block, mode, route.kernels, route.n_threads)
        del table
        score = (wins + 0.5 * ties) / cell_n
        return averaging.average(task.cells, cell_group, cell_spk_x, cell_n, score, mode, convention, distance,
                                 normalize, frame_shift, len(sel.kept), sel.n_dropped, sel.n_overlap, empty_items,
                                 plan.n_pairs)
