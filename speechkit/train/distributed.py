"""Multi-process training with ``torch.distributed``: process group, DDP wrapping, rank statistics.

The trainer runs unchanged under ``torchrun`` (or ``speechkit-train --nproc N`` / ``--ngpu N``,
which launch ``torchrun --standalone`` on this machine)::

    torchrun --standalone --nproc_per_node 4 -m speechkit.bin.train vqvae --config conf/train.yaml --exp-dir exp/vqvae
    speechkit-train --ngpu 4 vqvae --config conf/train.yaml --exp-dir exp/vqvae

Data parallelism, and what stays the same as one process:

- ``batch_size`` / ``batch_frames`` are *global*: the task's batches are built exactly as for one
  process, and each rank takes a contiguous slice of every batch (sizes differ by at most one:
  :func:`~speechkit.train.batching.slice_batch`), so a single-language batch (RNN-T) keeps all
  ranks on the same language. Validation batches are dealt out whole, in turn.
- Gradients are averaged by :class:`~torch.nn.parallel.DistributedDataParallel`; each rank's
  loss is first weighted by its share of the batch's utterances (``world_size * n_rank / n``),
  so an update equals one process's update on the whole batch when the task's loss is a mean
  over utterances (RNN-T), and when it is a mean over frames if the slices hold equally many
  frames (in length-bucketed batches they nearly do).
- Batch statistics (loss, ...) are combined over ranks as utterance-weighted means before they
  are logged or checkpointed, so every rank holds the same numbers; the EMA vector quantizer
  all-reduces its codebook statistics itself (:mod:`speechkit.nn.vector_quantizer`).
- Validation: with the default :meth:`~speechkit.train.task.Task.validate` (utterance-weighted
  means) the ranks validate shares of the batches and combine; a task with its own ``validate``
  (statistics of the whole set, e.g. code perplexity) is validated by rank 0 alone, and every
  rank gets rank 0's numbers, so best-checkpoint and early-stopping decisions agree.
- A batch with fewer utterances than processes cannot be sliced and is skipped by every rank
  (logged); random layers (dropout, jitter) draw from per-rank streams, so runs with different
  numbers of processes agree in distribution, not bit for bit.

Backends: gloo on CPU, nccl on CUDA (one GPU per process: ``cuda:LOCAL_RANK``).
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterator, Sequence

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from speechkit.utils.cli import ConfigError
from speechkit.utils.errors import ParameterError

__all__ = ["DistInfo", "distributed_session", "launched_by_torchrun", "wrap_model",
           "all_gather_objects", "barrier", "combine_weighted_stats",
           "end_distributed_session", "num_processes", "strip_launch_options", "launch_torchrun"]

log = logging.getLogger(__name__)

#: How long a rank waits for the others in a collective before giving up.
TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: ``rank`` of ``world_size``, ``local_rank`` on its machine, ``device``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0: the only process that writes files and logs."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def launched_by_torchrun() -> bool:
    """Whether this process is a worker started by ``torchrun`` (its environment says so)."""
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer") from None


@contextlib.contextmanager
def distributed_session(device: torch.device) -> Iterator[DistInfo]:
    """Join the process group described by torchrun's environment, and leave it at the end.

    Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (and ``MASTER_ADDR``/``MASTER_PORT``, which
    ``init_process_group`` reads); with ``WORLD_SIZE`` unset or 1 it yields a single-process
    :class:`DistInfo` and does nothing. A process group initialized by the caller is used as it is
    (and left open).

    Args:
        device: the configured device (``cpu`` or ``cuda``): gloo for cpu, nccl for cuda, which
            also selects ``cuda:LOCAL_RANK``.

    Raises:
        ConfigError: ``device`` is cuda and ``LOCAL_RANK`` has no GPU (more processes than GPUs).
    """
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        local = _env_int("LOCAL_RANK", rank)
        yield DistInfo(rank, world, local, _rank_device(device, local, world))
        return
    world = _env_int("WORLD_SIZE", 1)
    if world <= 1:
        yield DistInfo(device=device)
        return
    rank, local = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    dev = _rank_device(device, local, world)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, timeout=TIMEOUT)
    log.info("rank %d of %d (local rank %d): joined the %s process group, device %s",
             rank, world, local, backend, dev)
    try:
        yield DistInfo(rank, world, local, dev)
    finally:
        end_distributed_session()


def end_distributed_session() -> None:
    """Collect garbage, then destroy the default process group (no-op without one).

    A DistributedDataParallel wrapper left in a reference cycle keeps the gloo process group alive
    past ``destroy_process_group``; it is then destroyed during interpreter shutdown, where gloo
    aborts the process ("terminate called without an active exception", exit -6). Seen in 5 of 54
    runs of the two-process fixture of ``test/unit/train/test_ddp.py`` (on the rank that left first,
    after its ``destroy_process_group``); none in 70 with the collection first.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()
    dist.destroy_process_group()


def _rank_device(device: torch.device, local_rank: int, world_size: int) -> torch.device:
    if device.type != "cuda" or world_size <= 1:
        return device
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise ConfigError(f"process with LOCAL_RANK {local_rank} has no GPU: {count} visible "
                          f"(start at most {count} processes per machine, or train on cpu)")
    return torch.device("cuda", local_rank)


def wrap_model(model: torch.nn.Module, info: DistInfo, find_unused_parameters: bool = False) -> torch.nn.Module:
    """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel` when distributed, else as it is.

    ``find_unused_parameters``: some parameters get no gradient in some batches (e.g. the other
    languages' softmax layers of a multi-softmax RNN-T); DDP must then look for them every step.
    """
    if not info.distributed:
        return model
    ids = [info.device.index] if info.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, output_device=ids[0] if ids else None,
                                   find_unused_parameters=find_unused_parameters)


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` without a process group."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def combine_weighted_stats(parts: Sequence[tuple[dict[str, float], float]]) -> tuple[dict[str, float], float]:
    """Merge per-rank ``(stats, weight)`` into weighted means and the total weight.

    A statistic missing on some ranks is averaged over the ranks that have it. Ranks are taken in
    order, so every rank computes bitwise the same result from the same gathered list.
    """
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    total = 0.0
    for stats, weight in parts:
        total += weight
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + float(v) * weight
            weights[k] = weights.get(k, 0.0) + weight
    return {k: sums[k] / weights[k] for k in sums if weights[k] > 0}, total


# ------------------------------------------------------------------ speechkit-train --nproc / --ngpu


def num_processes(nproc: int, ngpu: int | None) -> int:
    """Processes to start for ``nproc``/``ngpu`` (speechkit-train's ``--nproc``/``--ngpu``; ``ngpu`` wins
    when >= 1).

    Raises:
        ParameterError: a negative count, or ``nproc`` and ``ngpu`` >= 1 that disagree.
    """
    if nproc < 1:
        raise ParameterError("nproc", f"`nproc` must be >= 1, got {nproc}")
    if ngpu is None or ngpu == 0:
        return nproc
    if ngpu < 0:
        raise ParameterError("ngpu", f"`ngpu` must be >= 0, got {ngpu}")
    if nproc not in (1, ngpu):
        raise ParameterError("nproc", f"`nproc` {nproc} and `ngpu` {ngpu} disagree (with GPUs, one process per GPU)")
    return ngpu


def strip_launch_options(argv: list[str]) -> list[str]:
    """``argv`` without --nproc/--ngpu (and their values), for the torchrun workers."""
    out, skip = [], False
    for tok in argv:
        if skip:
            skip = False
            continue
        name = tok.split("=", 1)[0].replace("_", "-")
        if name in ("--nproc", "--ngpu"):
            skip = "=" not in tok
            continue
        out.append(tok)
    return out


def launch_torchrun(nproc: int, worker_argv: list[str], logger: logging.Logger = log) -> int:
    """Run ``speechkit-train worker_argv`` in ``nproc`` processes under ``torchrun --standalone``.

    SIGINT/SIGTERM are passed on to torchrun (which stops the workers); returns its exit status
    (128 + N when signal N was passed on). The command is logged to ``logger``.
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "speechkit.bin.train", *worker_argv]
    logger.info("launching %d processes: %s", nproc, " ".join(cmd))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default, without its warning
    proc = subprocess.Popen(cmd, env=env)

    received: list[int] = []

    def forward(signum, frame):
        received.append(signum)
        proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = proc.wait()
        if received:  # interrupted: the shell's 128 + N, whatever torchrun made of it
            return 128 + received[0]
        return 128 - rc if rc < 0 else rc
    finally:
        for s, h in old.items():
            signal.signal(s, h)
