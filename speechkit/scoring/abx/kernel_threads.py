"""What both sets of compiled ABX kernels (numba's and C's) share: the thread pool (:func:`run_tasks`: many small
tasks taken by ``n`` threads from one queue; a thread on a busy core simply takes fewer tasks, where a static split
(OpenMP's, torch's intra-op pool) waits for the slowest thread at every barrier; the kernels release the GIL:
numba's ``nogil``, ctypes' calls) and the padded-batch form of their DTW (:func:`padded_dtw`)."""
from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

import numpy as np


@functools.lru_cache(maxsize=None)
def _pool(n: int) -> ThreadPoolExecutor:
    """The process's pool of ``n`` threads (made on first use, then reused)."""
    return ThreadPoolExecutor(max_workers=n, thread_name_prefix="speechkit-abx")


def run_tasks(fn: Callable[[object], None], tasks: Sequence | Iterable, n_threads: int) -> None:
    """Run ``fn(task)`` for every task on ``n_threads`` threads taking tasks from one queue (in order);
    the first exception is raised once the running tasks are done. ``n_threads`` 1 runs them here."""
    tasks = list(tasks)
    if n_threads <= 1 or len(tasks) <= 1:
        for t in tasks:
            fn(t)
        return
    n = min(n_threads, len(tasks))
    pool = _pool(n)
    it = iter(tasks)
    lock = threading.Lock()
    failed: list[BaseException] = []

    def worker():
        while not failed:
            with lock:
                t = next(it, _DONE)
            if t is _DONE:
                return
            try:
                fn(t)
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                failed.append(e)
                return

    for f in [pool.submit(worker) for _ in range(n)]:
        f.result()
    if failed:
        raise failed[0]


_DONE = object()


def padded_dtw(dtw_strided: Callable, dist, n_rows, n_cols, total, len_rc, len_cr) -> None:
    """``dtw_strided`` (either kernel set's) of a padded batch: ``dist`` (B, N, M) float64, C-contiguous, pair
    ``b``'s entries ``dist[b, :n_rows[b], :n_cols[b]]``; the same outputs (``total``, ``len_rc``, ``len_cr``)."""
    bsz, nmax, mmax = dist.shape
    base = np.arange(bsz, dtype=np.int64) * (nmax * mmax)
    dtw_strided(dist.reshape(-1), base, np.full(bsz, mmax, dtype=np.int64), np.ones(bsz, dtype=np.int64),
                np.ascontiguousarray(n_rows, dtype=np.int64), np.ascontiguousarray(n_cols, dtype=np.int64), total,
                len_rc, len_cr)
