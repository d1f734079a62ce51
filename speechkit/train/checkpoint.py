"""Checkpoint files: atomic save, safe load, RNG state capture, ``latest.pt`` pointer, pruning.

Layout of ``exp/<tag>/checkpoints/``::

    ckpt-e0003-s00001200.pt   full training state after update 1200, during/after epoch 3
    latest.pt -> ckpt-...pt   relative symlink to the newest complete checkpoint
    best.pt                   model weights (+ config) of the best validation so far

A checkpoint is written to a temporary file in the same directory, fsync'ed and renamed onto its
final name; ``latest.pt`` is re-pointed (again by rename) only after that, so a crash at any
moment leaves ``latest.pt`` on a complete file. Everything inside is plain containers, numbers,
strings and tensors, loadable with ``torch.load(path, weights_only=True)``.
"""
from __future__ import annotations

import contextlib
import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speechkit.utils.fileio import DataError, atomic_write

__all__ = [
    "CheckpointError",
    "CHECKPOINT_FORMAT",
    "checkpoint_name",
    "parse_checkpoint_name",
    "save_checkpoint",
    "load_checkpoint",
    "latest_checkpoint",
    "set_latest",
    "list_checkpoints",
    "prune_checkpoints",
    "remove_stale_temp_files",
    "average_checkpoints",
    "get_rng_state",
    "set_rng_state",
]

CHECKPOINT_FORMAT = "speechkit-checkpoint-v1"
LATEST = "latest.pt"
BEST = "best.pt"
_NAME_RE = re.compile(r"^ckpt-e(\d+)-s(\d+)\.pt$")


class CheckpointError(DataError):
    """A checkpoint file cannot be used (truncated, corrupt, wrong format); the message names it."""


def checkpoint_name(epoch: int, step: int) -> str:
    """File name of the checkpoint taken after update ``step`` in epoch ``epoch`` (1-based).

    Names sort in training order (epoch, then step).
    """
    return f"ckpt-e{epoch:04d}-s{step:08d}.pt"


def parse_checkpoint_name(name: str) -> tuple[int, int] | None:
    """``(epoch, step)`` from a :func:`checkpoint_name`, or ``None`` for any other file name."""
    m = _NAME_RE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` with ``torch.save`` atomically (temp file, fsync, ``os.replace``, dir fsync)."""
    path = Path(path)
    with atomic_write(path, "wb") as f:
        torch.save(state, f)
    _fsync_dir(path.parent)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu",
                    expect_format: bool = True) -> dict[str, Any]:
    """Load a checkpoint with ``torch.load(weights_only=True)``.

    Args:
        path: checkpoint file (a symlink such as ``latest.pt`` is followed).
        map_location: device for the tensors.
        expect_format: require the ``format`` tag written by the trainer.

    Raises:
        FileNotFoundError: no such file (or a dangling ``latest.pt``).
        CheckpointError: truncated/corrupt file, not a dict, or not a speechkit checkpoint.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint" + (
            f" (dangling link to {os.readlink(path)})" if path.is_symlink() else ""))
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many types for damaged files
        real = f" (-> {path.resolve().name})" if path.is_symlink() else ""
        unsafe = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
        if unsafe:
            raise CheckpointError(
                f"{path}{real}: holds a {unsafe.group(1)} object, which torch.load(weights_only=True) "
                f"refuses to unpickle; not a checkpoint written by speechkit") from None
        raise CheckpointError(
            f"{path}{real}: cannot load checkpoint, file is truncated or corrupt "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); delete it (and latest.pt) "
            f"to resume from an older checkpoint, or start over with --resume false") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a checkpoint (a {type(state).__name__}, expected a dict)")
    if expect_format and state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a speechkit checkpoint (format {state.get('format')!r}, "
                              f"expected {CHECKPOINT_FORMAT!r})")
    return state


def latest_checkpoint(ckpt_dir: str | os.PathLike) -> Path | None:
    """The checkpoint ``ckpt_dir/latest.pt`` points to, or ``None`` if there is no pointer.

    Raises:
        CheckpointError: ``latest.pt`` exists but points to a missing file.
    """
    link = Path(ckpt_dir) / LATEST
    if not link.is_symlink() and not link.exists():
        return None
    if link.is_symlink():
        target = link.parent / os.readlink(link)
        if not target.exists():
            raise CheckpointError(f"{link}: points to missing file {target.name}; delete {link} to "
                                  f"resume from an older checkpoint, or start over with --resume false")
        return target
    return link  # a regular file named latest.pt (e.g. copied without symlinks)


def set_latest(ckpt_dir: str | os.PathLike, name: str) -> None:
    """Atomically point ``ckpt_dir/latest.pt`` at ``name`` (a file in ``ckpt_dir``)."""
    ckpt_dir = Path(ckpt_dir)
    tmp = ckpt_dir / f".{LATEST}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(name, tmp)
    os.replace(tmp, ckpt_dir / LATEST)
    _fsync_dir(ckpt_dir)


def list_checkpoints(ckpt_dir: str | os.PathLike) -> list[Path]:
    """Full checkpoints in ``ckpt_dir`` (not ``latest.pt``/``best.pt``), oldest first."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    found = [(parse_checkpoint_name(p.name), p) for p in ckpt_dir.iterdir() if p.is_file() and not p.is_symlink()]
    return [p for key, p in sorted((k, p) for k, p in found if k is not None)]


def prune_checkpoints(ckpt_dir: str | os.PathLike, keep_last: int) -> list[Path]:
    """Delete all but the ``keep_last`` newest full checkpoints (0 = keep all); return the deleted.

    The file ``latest.pt`` points to is never deleted; ``best.pt`` is a separate file and untouched.
    """
    if keep_last <= 0:
        return []
    ckpts = list_checkpoints(ckpt_dir)
    latest = latest_checkpoint(ckpt_dir)
    deleted = []
    for p in ckpts[: max(0, len(ckpts) - keep_last)]:
        if latest is not None and p.resolve() == latest.resolve():
            continue
        p.unlink()
        deleted.append(p)
    return deleted


def average_checkpoints(paths: list[str | os.PathLike]) -> dict[str, Any]:
    """Average the model weights of several checkpoints of one training run.

    The element-wise mean of every floating-point tensor of the checkpoints' ``model`` state dicts
    (accumulated in float64, cast back to each tensor's dtype); integer and boolean tensors (step
    counters such as BatchNorm's ``num_batches_tracked``) are taken from the last checkpoint.
    This is ESPnet's ``average_checkpoints.py`` and icefall's ``--avg N`` (plain mean of the
    last N epoch checkpoints), used to smooth the end of training before decoding.

    Args:
        paths: two or more checkpoint files (``ckpt-*.pt`` or ``best.pt``), in training order;
            the result's ``config``, ``task``, ``epoch`` and ``step`` are those of the last one.

    Returns:
        A ``best.pt``-style dict: ``format``, ``kind`` = ``"averaged"``, ``task``, ``config``,
        ``model`` (the averaged state dict), ``epoch``, ``step`` and ``averaged_from`` (the file
        names, in order). Loadable by :func:`speechkit.train.load_model` and
        ``speechkit-asr-decode --checkpoint``.

    Raises:
        ValueError: fewer than two paths.
        CheckpointError: a checkpoint without ``model`` weights, or whose task, tensor names or
            shapes differ from the first one's (names the file and the key).
        FileNotFoundError: a path that does not exist.
    """
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise ValueError(f"average_checkpoints: need at least 2 checkpoints, got {len(paths)}")
    total: dict[str, torch.Tensor] = {}
    ref_task, ref_model = None, None  # the first checkpoint's task and weights (no optimizer state kept)
    for i, path in enumerate(paths):
        state = load_checkpoint(path)
        model = state.get("model")
        if not isinstance(model, dict) or not model:
            raise CheckpointError(f"{path}: holds no model weights (key 'model')")
        if i == 0:
            ref_task, ref_model = state.get("task"), model
        else:
            if state.get("task") != ref_task:
                raise CheckpointError(f"{path}: task {state.get('task')!r} differs from {paths[0]}'s {ref_task!r}")
            missing = sorted(set(ref_model) ^ set(model))
            if missing:
                raise CheckpointError(f"{path}: model tensors differ from {paths[0]}'s, e.g. {missing[0]!r} "
                                      f"({len(missing)} name(s) in one file only)")
        for key, value in model.items():
            if value.shape != ref_model[key].shape:
                raise CheckpointError(f"{path}: model tensor {key!r} has shape {tuple(value.shape)}, "
                                      f"{paths[0]} has {tuple(ref_model[key].shape)}")
            if value.is_floating_point():
                acc = value.detach().to(torch.float64)
                total[key] = acc if key not in total else total[key] + acc
    last = state  # the newest checkpoint: its integer tensors, config, task and progress
    averaged = {key: (total[key] / len(paths)).to(value.dtype) if value.is_floating_point() else value.clone()
                for key, value in last["model"].items()}
    progress = last.get("state") or last  # a training checkpoint keeps epoch/step in 'state'
    return {"format": CHECKPOINT_FORMAT, "kind": "averaged", "task": last.get("task"),
            "config": last.get("config"), "model": averaged, "epoch": progress.get("epoch"),
            "step": progress.get("step"), "averaged_from": [p.name for p in paths]}


def remove_stale_temp_files(ckpt_dir: str | os.PathLike) -> list[Path]:
    """Delete temporary files left by a run killed while writing (``.<name>.*.tmp``); return them.

    Call only while no other process writes to ``ckpt_dir`` (the trainer holds the exp-dir lock).
    """
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    stale = [p for p in ckpt_dir.iterdir()
             if p.name.startswith(".") and p.name.endswith(".tmp")
             and (p.name.startswith((".ckpt-", f".{BEST}.", f".{LATEST}.")))]
    for p in stale:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    return stale


def get_rng_state() -> dict[str, Any]:
    """Python, NumPy (legacy global) and torch (CPU + initialized CUDA) RNG states.

    Returned as lists/numbers/tensors so that ``torch.load(weights_only=True)`` accepts them.
    """
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss},
        "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
        "cuda": [],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [s.cpu() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the states captured by :func:`get_rng_state` (CUDA only if saved and available)."""
    py = state["python"]
    random.setstate((int(py["version"]), tuple(int(x) for x in py["internal"]), py["gauss_next"]))
    npst = state["numpy"]
    np.random.set_state((npst["name"], npst["keys"].numpy().astype(np.uint32), int(npst["pos"]),
                         int(npst["has_gauss"]), float(npst["cached_gaussian"])))
    torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])


def _fsync_dir(path: Path) -> None:
    """fsync a directory so that a rename in it survives a power loss (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
