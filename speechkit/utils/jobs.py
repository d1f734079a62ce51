"""Worker processes: a library function over a list of jobs (:func:`map_jobs`), or a CLI's parts.

:func:`map_jobs` runs a function over a list of jobs in spawned worker processes: the pool under
:func:`speechkit.inference.parts.run_parts` (a model applied to a data dir in parts) and the
vocoders of :mod:`speechkit.decode.vocode`. :func:`run_local_jobs` runs the parts of
``speechkit-compute-feats --nj N`` as child processes of the CLI itself (``--job J``), one log per
part, when no external job runner is used; under ``utils/run.pl`` / ``utils/slurm.pl`` the parts
are started by the runner instead.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any
from pathlib import Path

from speechkit.utils.fileio import ensure_writable_dir, naming_write_errors

# tqdm is imported where used: the CLIs import this module at start-up.


def run_local_jobs(jobs: Sequence[int], argv_of: Callable[[int], list[str]], log_of: Callable[[int], Path],
                   max_jobs: int, num_threads: int = 1, desc: str | None = None) -> list[tuple[int, Path]]:
    """Run ``argv_of(job)`` for every job, at most ``max_jobs`` at a time, and wait for all.

    Each job's stdout and stderr go to ``log_of(job)``, framed by Kaldi-style ``# <command>`` /
    ``# Started at`` / ``# Ended (code N) at`` lines. Children get ``OMP_NUM_THREADS`` and
    ``MKL_NUM_THREADS`` = ``num_threads``. With ``desc`` a tqdm bar counts finished jobs.

    Returns the failed jobs as ``(job, log path)``, in job order. If this process is interrupted
    (KeyboardInterrupt, SIGTERM turned into an exception), the running children are terminated and
    waited for before the exception propagates.
    """
    from tqdm import tqdm

    if max_jobs < 1:
        raise ValueError(f"max_jobs must be >= 1, got {max_jobs}")
    env = dict(os.environ, OMP_NUM_THREADS=str(num_threads), MKL_NUM_THREADS=str(num_threads))
    pending, running, failed = list(jobs), {}, []
    bar = tqdm(total=len(pending), desc=desc, unit="job", file=sys.stderr, disable=None if desc else True)
    try:
        while pending or running:
            while pending and len(running) < max_jobs:
                job = pending.pop(0)
                log = Path(log_of(job))
                argv = argv_of(job)
                with naming_write_errors(log):  # a full disk: "cannot write LOG: ...", not a bare errno
                    ensure_writable_dir(log.parent)
                    fh = open(log, "w", encoding="utf-8")
                    try:
                        fh.write(f"# {' '.join(argv)}\n# Started at {time.ctime()}\n#\n")
                        fh.flush()
                    except OSError:
                        fh.close()
                        raise
                running[job] = (subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env), fh, log)
            time.sleep(0.05)
            for job, (proc, fh, log) in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                with naming_write_errors(log):
                    try:
                        fh.write(f"# Ended (code {rc}) at {time.ctime()}\n")
                    finally:
                        fh.close()
                del running[job]
                bar.update(1)
                if rc != 0:
                    failed.append((job, log))
    except BaseException:
        for proc, _, _ in running.values():
            proc.terminate()
        for proc, fh, _ in running.values():
            proc.wait()
            fh.close()
        raise
    finally:
        bar.close()
    return sorted(failed)


def describe_failures(failed: Sequence[tuple[int, Path]]) -> list[str]:
    """One line per failed job: ``job J (see LOG): <last non-comment line of its log>``."""
    msgs = []
    for job, log in failed:
        lines = [ln for ln in Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
                 if ln.strip() and not ln.startswith("#")]
        msgs.append(f"job {job} (see {log}): {lines[-1] if lines else 'no output'}")
    return msgs


def map_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], nj: int = 1) -> list:
    """``[fn(*job) for job in jobs]``, in ``min(nj, len(jobs))`` spawned processes when ``nj > 1``
    and there are several jobs (``fn`` and the jobs' arguments must then pickle).

    Returns:
        The results in the order of ``jobs``.

    Raises:
        Whatever ``fn`` raises (the first failing job's error; a pool's other jobs are cancelled).
    """
    if nj > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(min(nj, len(jobs)), mp_context=multiprocessing.get_context("spawn")) as ex:
            return list(ex.map(fn, *zip(*jobs)))
    return [fn(*j) for j in jobs]
