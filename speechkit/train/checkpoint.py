"""Checkpoint files: atomic save, safe load, RNG state capture, ``latest.pt`` pointer, pruning.

Layout of ``exp/<tag>/checkpoints/``::

    ckpt-e0003-s00001200.pt   full training state after update 1200, during/after epoch 3
    latest.pt -> ckpt-...pt   relative symlink to the newest complete checkpoint
    best.pt                   model weights (+ config) of the best validation so far
    avg5.pt                   mean weights of the 5 newest checkpoints (speechkit-average-checkpoints --last 5)

A checkpoint is written to a temporary file in the same directory, fsync'ed and renamed onto its
final name; ``latest.pt`` is re-pointed (again by rename) only after that, so a crash at any
moment leaves ``latest.pt`` on a complete file. Everything inside is plain containers, numbers,
strings and CPU tensors (whatever device trained the model), loadable with
``torch.load(path, weights_only=True)`` anywhere.

Which checkpoint a model is loaded from (``best``, ``latest``, ``avgN``, a file name in the
directory, a path; by default ``best.pt``, else the latest) is decided in one place,
:func:`resolve_checkpoint`, behind every CLI that takes a model (their options come from
:func:`speechkit.utils.cli.add_model_args`) and every library loader (:func:`speechkit.tasks.load_model`,
the continual driver and evaluation).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import os
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from speechkit.data.fingerprint import diff_fingerprints
from speechkit.utils.config import config_diff
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, atomic_write

if TYPE_CHECKING:
    import torch
# torch is imported inside the functions that use it: resolving a checkpoint's path (resolve_checkpoint, the
# merge step of a split decode) then costs no torch import (about 1.2 s per process)

__all__ = [
    "CheckpointError",
    "CHECKPOINT_FORMAT",
    "DATA_FINGERPRINT",
    "checkpoint_name",
    "parse_checkpoint_name",
    "save_checkpoint",
    "load_checkpoint",
    "to_cpu",
    "latest_checkpoint",
    "resolve_checkpoint",
    "set_latest",
    "list_checkpoints",
    "prune_checkpoints",
    "remove_stale_temp_files",
    "average_checkpoints",
    "get_rng_state",
    "set_rng_state",
]

CHECKPOINT_FORMAT = "speechkit-checkpoint-v1"
# Key of the content fingerprint of the training data (speechkit.data.fingerprint.fingerprint_inputs,
# by config key) in the trainer's checkpoints and best.pt; absent in checkpoints written before it.
DATA_FINGERPRINT = "data_fingerprint"
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


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor on the CPU: tensors on another device (CUDA, ...) are copied there,
    inside dicts (their type kept: ``OrderedDict`` state dicts stay ordered), lists and tuples, to any
    depth; CPU tensors and everything else are returned as they are (not copied)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj if obj.device.type == "cpu" else obj.detach().cpu()
    if isinstance(obj, dict):
        new = copy.copy(obj)  # a shallow copy of the same type: an OrderedDict state dict keeps its _metadata
        for k, v in obj.items():
            new[k] = to_cpu(v)
        return new
    if isinstance(obj, list):
        return [to_cpu(v) for v in obj]
    if isinstance(obj, tuple):
        items = [to_cpu(v) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    return obj


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` with ``torch.save`` atomically (temp file, fsync, ``os.replace``, dir fsync).

    Every tensor is saved on the CPU (:func:`to_cpu`: model, optimizer, scheduler, RNG, EMA buffers,
    whatever ``state`` holds), so a checkpoint written by a GPU run loads with a plain
    ``torch.load(path, weights_only=True)`` in a process without CUDA; ``load_state_dict`` puts
    the weights and the optimizer state back on the model's device.
    """
    import torch

    path = Path(path)
    state = to_cpu(state)
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
    import torch

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
        raise naming_parameters(CheckpointError(
            f"{path}{real}: cannot load checkpoint, file is truncated or corrupt "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); delete it (and latest.pt) "
            f"to resume from an older checkpoint, or start over with `resume=false`")) from None
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
            raise naming_parameters(CheckpointError(
                f"{link}: points to missing file {target.name}; delete {link} to resume from an older checkpoint, "
                "or start over with `resume=false`"))
        return target
    return link  # a regular file named latest.pt (e.g. copied without symlinks)


_AVG_RE = re.compile(r"^avg(\d+)$")


def resolve_checkpoint(model: str | os.PathLike, checkpoint: str | None = None, *,
                       param: str | None = None) -> Path:
    """The checkpoint file a model is loaded from: the one rule behind ``--model-dir`` / ``--checkpoint``.

    Args:
        model: an experiment dir ``exp/<tag>`` (its checkpoints in ``exp/<tag>/checkpoints/``), that
            ``checkpoints/`` directory itself, or a checkpoint file.
        checkpoint: which checkpoint of the experiment:

            - ``None`` (the default): ``best.pt``, else the latest checkpoint (training without
              validation writes no ``best.pt``);
            - ``"best"``: ``best.pt`` only; ``"latest"``: the checkpoint ``latest.pt`` points to;
            - ``"avgN"`` (``avg5``): ``avgN.pt``, written by ``speechkit-average-checkpoints --last N``;
            - any other string: a path to a checkpoint file if there is one, else a file of that
              name in the checkpoints directory (``ckpt-e0010-s00000500.pt``, ``avg5.pt``).

            With ``model`` a checkpoint file, only ``None`` or a path to a file may be given.
        param: the parameter of the caller's own that ``model`` came from (``"model_dir"``), named in the
            errors together with ``checkpoint`` (:mod:`speechkit.utils.errors`: a CLI spells them as its
            flags, ``--model-dir`` / ``--checkpoint``); ``None``: the errors name the path alone.

    Returns:
        The checkpoint file (``latest.pt`` resolved to the file it points to).

    Raises:
        FileNotFoundError: ``model`` does not exist, or the experiment has no such checkpoint; the
            message names the experiment dir, what was asked for and the checkpoints that exist.
        ParameterError: a checkpoint name or keyword asked of a model given as a file.
        CheckpointError: ``latest.pt`` points to a missing file.
    """
    model = Path(model)
    label = f"`{param}` {model}" if param else str(model)
    ckpt_opt = "`checkpoint`" if param else "checkpoint"
    if checkpoint is not None and not (checkpoint in ("best", "latest") or _AVG_RE.match(checkpoint)) \
            and Path(checkpoint).is_file():
        return Path(checkpoint)
    if model.is_file():
        if checkpoint is not None:
            raise ParameterError("checkpoint", f"{ckpt_opt} {checkpoint}: needs {label} to be an experiment "
                                 "directory, not a checkpoint file")
        return model
    if not model.is_dir():
        if checkpoint is not None and not (checkpoint in ("best", "latest") or _AVG_RE.match(checkpoint)):
            raise naming_parameters(FileNotFoundError(f"{ckpt_opt} {checkpoint}: no such file; {label}: no such "
                                                      "checkpoint file, and no such experiment directory"))
        raise naming_parameters(FileNotFoundError(f"{label}: no such checkpoint file, and no such experiment "
                                                  "directory"))
    ckpt_dir = model / "checkpoints" if (model / "checkpoints").is_dir() else model

    def missing(asked: str, looked_for: str, hint: str = "") -> FileNotFoundError:
        return naming_parameters(FileNotFoundError(f"{ckpt_opt} {asked}: no such file ({looked_for}); {label}: "
                                                   f"{_checkpoints_held(model, ckpt_dir)}{hint}"))

    if checkpoint is None:
        if (ckpt_dir / BEST).is_file():
            return ckpt_dir / BEST
        latest = latest_checkpoint(ckpt_dir)
        if latest is None:
            raise missing("(default: best, else latest)", f"{ckpt_dir / BEST} or {ckpt_dir / LATEST}",
                          "; train the model first")
        return latest
    if checkpoint == "best":
        if not (ckpt_dir / BEST).is_file():
            hint = ("; training without validation writes none" + (": use `checkpoint=latest`" if param else "")
                    if latest_checkpoint(ckpt_dir) is not None else "")
            raise missing(checkpoint, str(ckpt_dir / BEST), hint)
        return ckpt_dir / BEST
    if checkpoint == "latest":
        latest = latest_checkpoint(ckpt_dir)
        if latest is None:
            raise missing(checkpoint, str(ckpt_dir / LATEST))
        return latest
    m = _AVG_RE.match(checkpoint)
    name = f"avg{m.group(1)}.pt" if m else checkpoint
    if not (ckpt_dir / name).is_file():
        hint = f"; make it with speechkit-average-checkpoints --last {m.group(1)} {model}" if m else ""
        raise missing(checkpoint, f"not a file, nor in {ckpt_dir}" if not m else str(ckpt_dir / name), hint)
    return ckpt_dir / name


def _checkpoints_held(model: Path, ckpt_dir: Path) -> str:
    """What the experiment holds, for :func:`resolve_checkpoint`'s errors."""
    if ckpt_dir == model and not any(ckpt_dir.glob("*.pt")):
        return f"no {model / 'checkpoints'} directory"
    names = sorted(p.name + (f" -> {os.readlink(p)}" if p.is_symlink() else "")
                   for p in ckpt_dir.iterdir() if p.name.endswith(".pt") and not p.name.startswith("."))
    if not names:
        return f"{ckpt_dir} holds no checkpoint"
    shown = names if len(names) <= 8 else names[:7] + [f"... ({len(names) - 7} more)"]
    return f"{ckpt_dir} holds {', '.join(shown)}"


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


#: Trainer settings a run may change when it is resumed (speechkit-train allows it, with a log line or a
#: warning); any other difference between the saved configs means checkpoints of different runs. The
#: seed may change on resume too, but two runs differing only in it are the usual different runs.
_RUN_TRAINER_KEYS = frozenset({"optimizer", "best_metric", "best_mode", "seed"})


def _run_config_diff(a: Any, b: Any) -> tuple[str, Any, Any] | None:
    """The first config key (dotted) telling two checkpoints' runs apart, with both values, or None."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None if a == b else ("config", a, b)
    for key, va, vb in config_diff(a, b):
        if va is dataclasses.MISSING or vb is dataclasses.MISSING:
            continue  # a field added to the schema since (the trainer resumes such runs)
        if key.startswith("trainer.") and key[len("trainer."):] not in _RUN_TRAINER_KEYS:
            continue  # max_epochs, lr, keep_last ... may change when a run is resumed
        return key, va, vb
    return None


def _progress(state: dict[str, Any]) -> tuple[int | None, int | None]:
    """``(epoch, step)`` of a checkpoint (a training checkpoint keeps them in ``state``)."""
    progress = state.get("state") if isinstance(state.get("state"), dict) else state
    return progress.get("epoch"), progress.get("step")


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def average_checkpoints(paths: list[str | os.PathLike]) -> dict[str, Any]:
    """Average the model weights of several checkpoints of one training run.

    The element-wise mean of every floating-point tensor of the checkpoints' ``model`` state dicts
    (accumulated in float64 in step order, cast back to each tensor's dtype); integer and boolean
    tensors (step counters such as BatchNorm's ``num_batches_tracked``) are taken from the newest
    checkpoint. This is ESPnet's ``average_checkpoints.py`` and icefall's ``--avg N`` (plain mean
    of the last N epoch checkpoints), used to smooth the end of training before decoding.

    The inputs are ordered by their update step (then epoch), whatever the order given, so the
    newest is the one with the most updates. Refused, naming both files and why:

    - checkpoints of different runs: another ``task``; a saved ``config`` that differs in a key a
      resumed run cannot change (any key outside ``trainer.``, and ``trainer.seed``, ``optimizer``,
      ``best_metric``, ``best_mode``; ``max_epochs``, ``lr``, ``keep_last``... may differ); for
      checkpoints that record the content fingerprint of their training data
      (:data:`DATA_FINGERPRINT`), different data;
    - the same weights twice: the same file, two files with the same bytes, or two checkpoints
      after the same update step (``best.pt`` is a copy of the weights of the epoch checkpoint at
      its step).

    Args:
        paths: two or more checkpoint files (``ckpt-*.pt``, ``best.pt``) of one run, in any order.
            Their model weights are held in memory together (not their optimizer states).

    Returns:
        A ``best.pt``-style dict: ``format``, ``kind`` = ``"averaged"``, ``task``, ``config``,
        ``model`` (the averaged state dict), ``epoch``, ``step`` (those of the newest checkpoint),
        ``averaged_from`` (the file names, oldest first) and the newest one's ``data_fingerprint``
        if it has one. Loadable by :func:`speechkit.tasks.load_model` and
        ``speechkit-asr-decode --checkpoint``.

    Raises:
        ValueError: fewer than two paths.
        CheckpointError: a checkpoint without ``model`` weights or without an update step; the
            refusals above; tensor names or shapes that differ (names the file and the key).
        FileNotFoundError: a path that does not exist.
    """
    import torch

    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise ValueError(f"average_checkpoints: need at least 2 checkpoints, got {len(paths)}")
    loaded = []  # (path, the checkpoint without its optimizer/RNG state)
    for path in paths:
        state = load_checkpoint(path)
        model = state.get("model")
        if not isinstance(model, dict) or not model:
            raise CheckpointError(f"{path}: holds no model weights (key 'model')")
        epoch, step = _progress(state)
        if not isinstance(step, int):
            raise CheckpointError(f"{path}: holds no update step (key 'step'), so it cannot be ordered among the "
                                  "checkpoints averaged")
        loaded.append((path, {"task": state.get("task"), "config": state.get("config"), "model": model,
                              "epoch": epoch, "step": step, "data_fingerprint": state.get(DATA_FINGERPRINT)}))
        del state
    path0, first = loaded[0]
    for path, ck in loaded[1:]:
        if ck["task"] != first["task"]:
            raise CheckpointError(f"{path}: task {ck['task']!r} differs from {path0}'s {first['task']!r}: checkpoints "
                                  "of different runs")
        diff = _run_config_diff(first["config"], ck["config"])
        if diff is not None:
            key, v0, v = diff
            raise CheckpointError(f"{path} and {path0} are checkpoints of different runs: config key '{key}' differs "
                                  f"({v!r} in the first, {v0!r} in the second); average the checkpoints of one run")
        if first["data_fingerprint"] and ck["data_fingerprint"]:
            changes, _ = diff_fingerprints(first["data_fingerprint"], ck["data_fingerprint"])
            if changes:
                raise CheckpointError(f"{path} and {path0} are checkpoints of different runs: trained on different "
                                      f"data (key '{changes[0].key}': {changes[0].what})")
    digests = []
    for i, (path, ck) in enumerate(loaded):
        digests.append(_file_sha256(path))
        for j, (other, ok) in enumerate(loaded[:i]):
            if path.resolve() == other.resolve():
                raise CheckpointError(f"{path} and {other} are the same file: averaging it with itself counts its "
                                      "weights twice")
            if digests[i] == digests[j]:
                raise CheckpointError(f"{path} has the same content as {other} (a copy): the same weights twice")
            if ck["step"] == ok["step"]:
                raise CheckpointError(f"{path} and {other} both hold the weights after update step {ck['step']} "
                                      f"(epoch {ck['epoch']}): the same weights twice (best.pt is a copy of the "
                                      "epoch checkpoint at its step); leave one out")
    loaded.sort(key=lambda x: (x[1]["step"], x[1]["epoch"] if isinstance(x[1]["epoch"], int) else -1))
    total: dict[str, torch.Tensor] = {}
    path0, ref_model = loaded[0][0], loaded[0][1]["model"]  # the oldest: tensor names and shapes
    for path, ck in loaded:
        model = ck["model"]
        missing = sorted(set(ref_model) ^ set(model))
        if missing:
            raise CheckpointError(f"{path}: model tensors differ from {path0}'s, e.g. {missing[0]!r} "
                                  f"({len(missing)} name(s) in one file only)")
        for key, value in model.items():
            if value.shape != ref_model[key].shape:
                raise CheckpointError(f"{path}: model tensor {key!r} has shape {tuple(value.shape)}, "
                                      f"{path0} has {tuple(ref_model[key].shape)}")
            if value.is_floating_point():
                acc = value.detach().to(torch.float64)
                total[key] = acc if key not in total else total[key] + acc
    newest = loaded[-1][1]  # its integer tensors, config, task and progress
    averaged = {key: (total[key] / len(loaded)).to(value.dtype) if value.is_floating_point() else value.clone()
                for key, value in newest["model"].items()}
    out = {"format": CHECKPOINT_FORMAT, "kind": "averaged", "task": newest["task"], "config": newest["config"],
           "model": averaged, "epoch": newest["epoch"], "step": newest["step"],
           "averaged_from": [p.name for p, _ in loaded]}
    if newest["data_fingerprint"] is not None:
        out[DATA_FINGERPRINT] = newest["data_fingerprint"]
    return out


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
    import torch

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
    import torch

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
