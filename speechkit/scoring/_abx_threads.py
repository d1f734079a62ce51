"""The thread pool of the compiled ABX kernels (numba's and C's): many small tasks taken by ``n`` threads from one
queue. A thread on a busy core simply takes fewer tasks, where a static split (OpenMP's, torch's intra-op pool)
waits for the slowest thread at every barrier. The kernels release the GIL (numba's ``nogil``, ctypes' calls)."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def run_tasks(fn: Callable[[object], None], tasks: Sequence | Iterable, n_threads: int) -> None:
    """Run ``fn(task)`` for every task on ``n_threads`` threads taking tasks from one queue (in order);
    the first exception is raised once the running tasks are done. ``n_threads`` 1 runs them here."""
    tasks = list(tasks)
    if n_threads <= 1 or len(tasks) <= 1:
        for t in tasks:
            fn(t)
        return
    n = min(n_threads, len(tasks))
    with _POOLS_LOCK:
        pool = _POOLS.get(n)
        if pool is None:
            pool = _POOLS[n] = ThreadPoolExecutor(max_workers=n, thread_name_prefix="speechkit-abx")
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
