"""Which backend, device and thread count each ABX stage runs on, and every tuning constant of the ABX stages.

Backends (``backend=``): ``auto``, ``c``, ``numba``, ``torch``, ``triton``.

* The DTW of token pairs: every distinct token pair needed by some triplet gets one DTW (fastabx computes
  d(X, A) and d(X, B) per cell group, so most pairs twice); one dynamic programme serves both argument orders
  (the frame distances are symmetric and the cost matrix of (X, P) is the transpose of that of (P, X); only the
  tie-break of the path length differs, and both lengths are carried forward with the cost). On the compiled CPU
  path the tokens are laid out by context and speaker and cut into tiles of about :data:`TILE_FRAMES` frames;
  where the pairs between two tiles cover :data:`TILE_MIN_DENSITY` of their frame pairs or more (within a
  speaker, across two speakers, inside a large context), one matrix product gives the tile pair's frame
  distances and every such pair's DTW reads its own from it in place
  (:mod:`speechkit.scoring.abx.tiles`). The other pairs are batched by size
  (:mod:`speechkit.scoring.abx.batches`); a batch's frame distances are one torch computation (float64), its
  DTW a compiled kernel on the CPU (C, :mod:`speechkit.scoring.abx.kernels_c`, built by ``tools/install.sh``:
  it loads in a millisecond; else numba's, :mod:`speechkit.scoring.abx.kernels_numba`, whose start costs
  0.3-0.45 s in a fresh process; the same bits), a Triton kernel on CUDA
  (:mod:`speechkit.scoring.abx.kernels_triton`, one program per pair) or the anti-diagonal recursion as torch
  vector operations (:func:`speechkit.scoring.abx.dtw.batched_dtw`: without compiled kernels or triton, or
  ``backend="torch"``).
* The counting of triplets (:mod:`speechkit.scoring.abx.counting`): by the compiled kernel on the CPU, which
  sorts a cell's ``d(B, X)`` once per X and places every ``d(A, X)`` among them by binary search; on CUDA (and
  without compiled kernels) by comparing every ``d(A, X)`` with every ``d(B, X)`` in torch, many X tokens at a
  time, where the distance table is (on CUDA it never comes to the host).
* Threads: on the CPU, ``num_threads`` threads take batches, tiles and cell groups from one queue
  (:mod:`speechkit.scoring.abx.kernel_threads`), so a thread on a busy core takes fewer (torch's and OpenMP's
  static splits wait for the slowest thread at every step); the many small torch operations around them run on
  one thread (:func:`torch_threads`).

The backends give the same bits, except that a tile's matrix product may round a frame distance differently in
the last bit from the batched one (triplet outcomes alike in the tests; identical tokens still tie).
:func:`route`, :func:`cpu_if_small` and :func:`with_kernels` make the choices of one call of
:func:`speechkit.scoring.abx.abx_error`, as a :class:`Route`.
"""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch

from speechkit.scoring.abx import kernels_c
from speechkit.scoring.abx.dtw import batched_dtw

# kernels_triton (triton: optional, in CUDA builds of torch only) and kernels_numba (numba: heavy) are imported where
# a backend needs them.

logger = logging.getLogger(__package__)  # "speechkit.scoring.abx": every stage logs under the package's name

BACKENDS = ("auto", "c", "numba", "torch", "triton")

# ------------------------------------------------------------------------------------------ tuning constants
# backend "auto": below both sizes, and until numba's kernels have been loaded in the process, the torch path
# (where the C kernels are not built); with the C kernels, one thread
NUMBA_MIN_PAIRS = 20_000
NUMBA_MIN_TRIPLETS = 2_000_000
# backend "auto" with a CUDA device: a task whose CPU work is estimated under CUDA_MIN_CPU_SECONDS is scored on the
# CPU (CUDA's fixed costs in a process: its context and first kernel launches), the estimate
# being frame pairs x CPU_NS_PER_FRAME_PAIR + triplets x CPU_NS_PER_TRIPLET, a CPU_SERIAL_FRACTION of it on one
# thread and the rest over the threads (the compiled CPU path, every phase, one thread, fitted on the bench tasks:
# see cpu_seconds)
CUDA_MIN_CPU_SECONDS = 1.0
CPU_NS_PER_FRAME_PAIR = 10.0
CPU_NS_PER_TRIPLET = 11.0
CPU_SERIAL_FRACTION = 0.1
# contexts of fewer tokens find their needed pairs on the CPU whatever the device, and within speakers with one
# mask over all their tokens (a larger one: one speaker's block at a time)
DEVICE_PAIRS_MIN_TOKENS = 512
# a context of fewer tokens than DEVICE_PAIRS_MIN_TOKENS finds its needed pairs in numpy on the CPU (the same pairs)
SMALL_PAIRS_IN_NUMPY = True
# a needed-pair mask of fewer elements is built on one thread (torch_threads)
THREADED_MASK_ELEMENTS = 1 << 22
# a large context's needed-pair masks across speakers are built this many elements (rows x tokens) at a time
PAIR_MASK_ELEMENTS = 1 << 22
PAIR_MASK_ELEMENTS_CUDA = 1 << 26
# distinct frame vectors up to which hamming uses a symbol table (and has tiles)
HAMMING_TABLE_MAX = 4096
# default bound on batch * (N + M - 1) * N per DTW batch (memory), on the CPU and on CUDA (fewer, larger batches)
MAX_BATCH_ELEMENTS = 1 << 21
MAX_BATCH_ELEMENTS_CUDA = 1 << 25
# batching cost model: one batch costs ~BATCH_OVERHEAD padded cell updates per anti-diagonal (a Python-level loop of
# a few torch calls) on top of one unit per padded cell; with a compiled DTW a few torch calls for its frame
# distances and one kernel call
BATCH_OVERHEAD = 800
BATCH_OVERHEAD_NUMBA = 100
# tiles of frame distances (compiled path): a tile holds up to TILE_FRAMES frames (consecutive tokens of one context
# and speaker, or of several small ones); a tile pair is computed in one matrix product when its pairs' frame pairs
# fill at least TILE_MIN_DENSITY of it (a tile's frame pair costs about a quarter of a batched pair's)
TILE_FRAMES = 1024
TILE_MIN_DENSITY = 0.25
# tiles.tile_tasks reads the pairs in chunks of TILE_CHUNK, each a task for the threads: its temporaries stay a few MB
# (reused, in cache), where arrays of every pair cost a fresh allocation each (first-touch page faults); tile pairs
# are counted in a table up to TILE_TABLE_MAX of them, else by sorting their keys, and the (chunks x dense tile pairs)
# counts of the second pass stay under TILE_TABLE_MAX entries
TILE_CHUNK = 1 << 20
TILE_TABLE_MAX = 1 << 20
# (X token, A token, B token) comparisons per step of the torch counting, on the CPU and on CUDA (a few hundred MB
# of temporaries)
COUNT_ELEMENTS = 1 << 22
COUNT_ELEMENTS_CUDA = 1 << 26


@contextlib.contextmanager
def torch_threads(n: int):
    """Torch's intra-op pool at ``n`` threads inside the block, restored after. abx_error runs its many small torch
    operations on one thread: a parallel region waits for every pool thread to be scheduled, which on a loaded
    machine costs a time slice per operation and spins the other threads meanwhile; only the large operations use
    ``n``."""
    prev = torch.get_num_threads()
    if n != prev:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != prev:
            torch.set_num_threads(prev)


@dataclass(frozen=True)
class Route:
    """Where and how one ABX call runs: the scoring ``device``; whether the DTW (``compiled_dtw``) and the
    triplet counting (``compiled_count``) run the compiled CPU kernels, and which (``kernels``: the
    :mod:`~speechkit.scoring.abx.kernels_c` or :mod:`~speechkit.scoring.abx.kernels_numba` module, set by
    :func:`with_kernels`); the CPU threads of the kernels and the large torch operations (``n_threads``)."""

    device: torch.device
    compiled_dtw: bool
    compiled_count: bool
    kernels: object = None
    n_threads: int = 1

    @property
    def pair_device(self) -> torch.device:
        """Where every per-pair array lives: the scoring device on CUDA (the host never holds an array of pairs
        there), the CPU otherwise (numpy views of its tensors feed the compiled kernels)."""
        return self.device if self.device.type == "cuda" else torch.device("cpu")


def resolve_backend(backend: str, dev: torch.device) -> tuple[bool, bool]:
    """``(compiled DTW, compiled triplet counting)``, the kernels being C's or numba's (:func:`load_kernels`):
    both on the CPU under ``auto``, ``c`` and ``numba``; on CUDA the DTW is torch's or Triton's
    (:func:`device_dtw`) and the counting torch's, on the GPU; ``torch``: neither, on any device. ``triton`` on
    the CPU (Triton's interpreter) counts with the compiled kernels.

    Raises:
        ValueError: an unknown backend, ``c`` or ``numba`` on a non-CPU device, ``c`` without its built library,
            ``numba`` without numba, ``triton`` without triton or on the CPU outside Triton's interpreter
            (``TRITON_INTERPRET=1``).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}', expected one of {', '.join(BACKENDS)}")
    if backend == "torch":
        return False, False
    if backend in ("c", "numba") and dev.type != "cpu":
        raise ValueError(f"backend '{backend}' runs on the CPU, not on {dev}")
    if backend == "c":
        if not kernels_c.available():
            raise ValueError(f"backend 'c': {kernels_c.why_not()}")
        return True, True
    if backend == "triton":
        if importlib.util.find_spec("triton") is None:
            raise ValueError("backend 'triton' needs triton (shipped with CUDA builds of torch)")
        if dev.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError(f"backend 'triton' runs on CUDA (or on the CPU under TRITON_INTERPRET=1), not on {dev}")
    if importlib.util.find_spec("numba") is None and (backend == "numba" or not kernels_c.available()):
        # numba is imported later, only when used (it costs about 0.5 s)
        if backend == "numba":
            raise ValueError("backend 'numba' needs numba, which is not installed")
        logger.warning("neither the C kernels (%s) nor numba: ABX uses the slower torch DTW and counting",
                       kernels_c.why_not())
        return False, False
    return dev.type == "cpu" and backend != "triton", dev.type == "cpu"


def route(backend: str, device: torch.device) -> Route:
    """The :class:`Route` of ``backend`` on ``device`` (:func:`resolve_backend`; raises what it raises)."""
    return Route(device, *resolve_backend(backend, device))


def cpu_seconds(n_pairs: int, lengths: np.ndarray, n_triplets: int, n_threads: int) -> float:
    """Rough wall seconds of a task on the compiled CPU path: its frame pairs (``n_pairs`` DTW pairs of tokens of
    ``lengths`` frames on average) and triplets at :data:`CPU_NS_PER_FRAME_PAIR` and :data:`CPU_NS_PER_TRIPLET`,
    :data:`CPU_SERIAL_FRACTION` of that on one thread and the rest shared by ``n_threads`` (Amdahl's law).

    The constants are fitted on one-thread runs of every phase of test/bench/bench_abx.py's tasks (C kernels), the
    serial part on 1- and 2-thread runs; the runs are in test/bench/results/abx_history.md."""
    mean_len = float(np.mean(lengths)) if len(lengths) else 0.0
    ns = n_pairs * mean_len * mean_len * CPU_NS_PER_FRAME_PAIR + n_triplets * CPU_NS_PER_TRIPLET
    return ns * 1e-9 * (CPU_SERIAL_FRACTION + (1.0 - CPU_SERIAL_FRACTION) / n_threads)


def on_cpu_anyway(n_pairs: int, lengths: np.ndarray, n_triplets: int, n_threads: int) -> bool:
    """Whether ``backend="auto"`` scores a task on the CPU although a CUDA device was asked for: a small one
    (fewer than :data:`NUMBA_MIN_PAIRS` DTW pairs and :data:`NUMBA_MIN_TRIPLETS` triplets) or one whose CPU work
    (:func:`cpu_seconds`) is under :data:`CUDA_MIN_CPU_SECONDS`. Increasing in ``n_pairs``: true of an upper
    bound of the pairs (:func:`speechkit.scoring.abx.cells.pairs_bound`), it is true of the pairs themselves."""
    return ((n_pairs < NUMBA_MIN_PAIRS and n_triplets < NUMBA_MIN_TRIPLETS)
            or cpu_seconds(n_pairs, lengths, n_triplets, n_threads) < CUDA_MIN_CPU_SECONDS)


def cpu_if_small(r: Route, backend: str, n_pairs: int, lengths: np.ndarray, n_triplets: int,
                 n_threads: int) -> Route:
    """``r``, or its CPU route when ``backend="auto"`` on CUDA finds the task small (:func:`on_cpu_anyway`: the
    same result, without CUDA's start and kernel compilation, which cost more than such a task). Asked
    first of an upper bound of the pairs, before CUDA is touched (its context costs ~0.3 s), then of the pairs."""
    if backend == "auto" and r.device.type == "cuda" and on_cpu_anyway(n_pairs, lengths, n_triplets, n_threads):
        return route(backend, torch.device("cpu"))
    return r


def numba_kernels_loaded() -> bool:
    """Whether numba's kernels are imported and loaded in this process (their start, 0.3-0.45 s, is paid)."""
    mod = sys.modules.get(f"{__package__}.kernels_numba")
    return mod is not None and bool(mod.count_cells.signatures)


def with_kernels(r: Route, backend: str, n_pairs: int, n_triplets: int, n_threads: int) -> Route:
    """``r`` with its compiled kernels loaded (:func:`load_kernels`; none where they do not load) and its thread
    count: ``n_threads``, except for a small task under ``auto`` (fewer than :data:`NUMBA_MIN_PAIRS` DTW pairs and
    :data:`NUMBA_MIN_TRIPLETS` triplets), which runs on one thread: a pool costs more than it gives on small
    operations (far more on a busy core); with C's kernels, else on the torch path until numba's have been loaded
    (their start costs more than the whole task)."""
    dtw, count = r.compiled_dtw, r.compiled_count
    small = count and backend == "auto" and n_pairs < NUMBA_MIN_PAIRS and n_triplets < NUMBA_MIN_TRIPLETS
    if small and not numba_kernels_loaded() and not kernels_c.available():
        dtw = count = False
    kernels = load_kernels(backend) if count else None
    if kernels is None:
        dtw = count = False
    return replace(r, compiled_dtw=dtw, compiled_count=count, kernels=kernels, n_threads=1 if small else n_threads)


def device_dtw(backend: str, dev: torch.device) -> Callable:
    """The batch DTW of the torch path: the Triton kernel (:mod:`speechkit.scoring.abx.kernels_triton`) under
    ``triton``, and under ``auto`` on CUDA when triton imports; :func:`~speechkit.scoring.abx.dtw.batched_dtw`
    otherwise. Under ``auto`` a kernel that fails to compile falls back to ``batched_dtw`` (with a warning)."""
    if backend == "triton" or (backend == "auto" and dev.type == "cuda" and importlib.util.find_spec("triton")):
        try:  # optional: triton ships with CUDA builds of torch only
            from speechkit.scoring.abx.kernels_triton import dtw_batch
        except Exception as e:  # noqa: BLE001 - ImportError, or triton failing to initialise
            if backend == "triton":
                raise ValueError(f"backend 'triton': {type(e).__name__}: {e}") from None
            logger.warning("triton does not load (%s: %s): ABX uses the torch DTW", type(e).__name__, e)
            return batched_dtw
        if backend == "triton":
            return dtw_batch
        state = {"fn": dtw_batch}

        def guarded(d, n_rows, n_cols):
            try:
                return state["fn"](d, n_rows, n_cols)
            except Exception as e:  # noqa: BLE001 - a compilation failure; a CUDA fault would not get here
                if state["fn"] is batched_dtw:
                    raise
                logger.warning("the Triton DTW kernel failed (%s: %s): ABX uses the torch DTW", type(e).__name__, e)
                state["fn"] = batched_dtw
                return batched_dtw(d, n_rows, n_cols)

        return guarded
    return batched_dtw


def load_kernels(backend: str):
    """The compiled CPU kernels: the C ones (:func:`speechkit.scoring.abx.kernels_c.load`) under ``c``, and under
    ``auto`` and ``triton`` where they are built and current; numba's (:mod:`speechkit.scoring.abx.kernels_numba`)
    under ``numba`` and otherwise. None (with a warning) where neither loads under ``auto`` / ``triton``.

    Raises:
        ValueError: numba's kernels do not import under ``backend="numba"``.
    """
    if backend == "c" or (backend != "numba" and kernels_c.available()):
        return kernels_c.load()  # a CKernels; under "c", resolve_backend has checked that it loads
    try:
        from speechkit.scoring.abx import kernels_numba
    except Exception as e:  # noqa: BLE001 - ImportError, or numba failing to initialise
        if backend == "numba":
            raise ValueError(f"backend 'numba': the numba kernels do not load ({type(e).__name__}: {e})") from None
        logger.warning("the numba kernels do not load (%s: %s): ABX uses the slower torch DTW and counting",
                       type(e).__name__, e)
        return None
    return kernels_numba
