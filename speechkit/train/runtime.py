"""What a training process needs around its loop: the device, random seeds, batches on the device,
the experiment's lock and its log file.

- :func:`resolve_device` maps ``cpu`` / ``cuda`` / ``auto`` to a torch device;
  :func:`move_to_device` moves every tensor of a nested batch there and :class:`DeviceLoader`
  does so for each batch of a DataLoader.
- :func:`seed_everything` seeds Python, NumPy and torch; :func:`rank_seed` derives the seed of
  rank ``r``'s random streams in distributed training (a NumPy ``SeedSequence`` of seed, rank, step).
- :func:`experiment_lock` holds an exclusive ``flock`` on ``exp_dir/.lock`` while a run trains
  (:class:`ExperimentBusyError` when another process holds it; the OS releases it even on SIGKILL).
- :func:`log_to_file` appends the ``speechkit.*`` log records to ``train.log`` while the run lasts.
- :func:`unwrap_model` returns the bare module inside a (Distributed)DataParallel wrapper.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
import random
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader

from speechkit.utils.config import ConfigError
from speechkit.utils.errors import naming_parameters


def resolve_device(name: str, what: str = "key 'trainer.device'") -> torch.device:
    """``cpu`` | ``cuda`` | ``auto`` (cuda when there is one) -> a torch device.

    Args:
        name: the device asked for.
        what: where ``name`` came from, named in the error: a config key (the default), or a parameter
            (```device```, :mod:`speechkit.utils.errors`; a CLI spells it as its flag).

    Raises:
        ConfigError: ``cuda`` without a CUDA device (the message names ``what``).
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise naming_parameters(ConfigError(f"{what}: 'cuda' requested but no CUDA device is available "
                                            "(use cpu or auto)"))
    return torch.device(name)


def move_to_device(batch: Any, device: torch.device | str) -> Any:
    """Move every tensor in a (nested) dict/list/tuple/namedtuple/dataclass batch to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return type(batch)((k, move_to_device(v, device)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to_device(v, device) for v in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(batch, **{f.name: move_to_device(getattr(batch, f.name), device)
                                             for f in dataclasses.fields(batch) if f.init})
    return batch


class DeviceLoader:
    """Iterates a DataLoader moving each batch to ``device``; ``batches`` holds the index lists."""

    def __init__(self, loader: DataLoader, batches: list[list[int]], device: torch.device) -> None:
        self.loader, self.batches, self.device = loader, batches, device

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            yield move_to_device(batch, self.device)


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch.manual_seed(seed)


def rank_seed(seed: int, rank: int, step: int) -> int:
    """The seed of rank ``rank``'s random streams (``rank > 0``), fresh or re-seeded at ``step``."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, rank, step, 0xD1D]).generate_state(1)[0])


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The bare module inside a (Distributed)DataParallel wrapper."""
    wrappers = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    return model.module if isinstance(model, wrappers) else model


class ExperimentBusyError(ValueError):
    """Another process holds ``exp_dir/.lock`` (is training in the same experiment directory)."""


@contextlib.contextmanager
def experiment_lock(exp_dir: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``exp_dir/.lock`` (released by the OS even on SIGKILL)."""
    if exp_dir is None:
        yield
        return
    path = exp_dir / ".lock"
    with open(path, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise naming_parameters(ExperimentBusyError(
                f"{exp_dir}: another training process (pid {holder}) is using this experiment directory; wait for "
                "it or use another `exp_dir`")) from None
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def log_to_file(path: Path | None) -> Iterator[None]:
    """Append ``speechkit.*`` log records (INFO and up) to ``path`` while the block runs."""
    if path is None:
        yield
        return
    logger = logging.getLogger("speechkit")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    old_level = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(old_level)
