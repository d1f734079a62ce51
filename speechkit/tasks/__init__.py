"""Registry of trainable tasks, by name (ESPnet2 ``tasks/`` style).

``TASKS`` maps a name to ``"module:Class"``; modules are imported only when their task is asked
for, so a broken or heavy task module does not slow down or break the others. To add a task,
write a :class:`speechkit.train.Task` subclass and add one line here::

    TASKS = {
        "toy": "speechkit.tasks.toy:ToyTask",
        "vqvae": "speechkit.tasks.vqvae:VQVAETask",
    }

then ``speechkit-train vqvae --config conf/train_vqvae.yaml --exp-dir exp/vqvae``.
"""
from __future__ import annotations

import difflib
import importlib

from speechkit.utils.cli import ConfigError
from speechkit.utils.errors import naming_parameters

# train.task (torch) and train.checkpoint (numpy) are imported where used: the registry lists and checks task names
# without them (speechkit-train --help).

__all__ = ["TASKS", "task_names", "get_task", "register_task", "load_model"]

TASKS: dict[str, str] = {
    "toy": "speechkit.tasks.toy:ToyTask",
    "vqvae": "speechkit.tasks.vqvae:VQVAETask",
    "inverter": "speechkit.tasks.inverter:InverterTask",
    "rnnt": "speechkit.tasks.rnnt:RNNTTask",
    "salad": "speechkit.tasks.acoustic:SaladTask",
    "musa_rnn": "speechkit.tasks.acoustic:MusaRnnTask",
    "tacotron2": "speechkit.tasks.tacotron2:Tacotron2Task",
}


def task_names() -> list[str]:
    """Registered task names, sorted."""
    return sorted(TASKS)


def register_task(name: str, target: str | type) -> None:
    """Register ``target`` (a Task subclass or ``"module:Class"``) under ``name`` (e.g. from a plugin).

    Raises:
        ValueError: ``name`` is already registered to something else.
    """
    if not isinstance(target, str):
        target = f"{target.__module__}:{target.__qualname__}"
    if name in TASKS and TASKS[name] != target:
        raise ValueError(f"task {name!r} is already registered as {TASKS[name]}")
    TASKS[name] = target


def get_task(name: str):
    """A new instance of the task registered as ``name``.

    Raises:
        ConfigError: unknown name (lists the known ones, with a suggestion).
        ImportError / AttributeError: the registered module or class is missing (a bug).
    """
    from speechkit.train.task import Task

    if name not in TASKS:
        close = difflib.get_close_matches(name, TASKS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"unknown task '{name}'{hint}; known tasks: {', '.join(task_names())}")
    module_name, _, cls_name = TASKS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TypeError(f"task {name!r}: {TASKS[name]} is not a speechkit.train.Task subclass")
    task = cls()
    if not task.name:
        task.name = name
    return task


def load_model(path, task=None, device="cpu", expect=None):
    """Rebuild a trained model for inference from an experiment directory or a checkpoint file.

    The task recorded in the checkpoint (or ``task``) rebuilds it:
    :meth:`speechkit.train.Task.build_model_from_file`.

    Args:
        path: ``exp/<tag>`` (loads ``checkpoints/best.pt``, else the latest checkpoint), its
            ``checkpoints/`` directory, or any checkpoint file (``best.pt``, ``ckpt-*.pt``).
        task: the task (instance or registered name); default: the one recorded in the checkpoint.
        device: where to put the model (``str`` or ``torch.device``).
        expect: the task names the caller accepts (``("salad", "musa_rnn", "tacotron2")``); a checkpoint
            of another task is refused before its model is built.

    Returns:
        ``(model, cfg)``: the model in eval mode with the checkpoint's weights, and the config it
        was trained with (an instance of ``task.Config``).

    Raises:
        FileNotFoundError: no checkpoint there (:func:`speechkit.train.checkpoint.resolve_checkpoint`).
        CheckpointError: unreadable checkpoint, or one that does not record its task (and no ``task``).
        ConfigError: the saved config does not fit the task's current schema (names the key), or
            ``task`` is given (or ``expect``) and the checkpoint is another task's model (names both).
    """
    from speechkit.train.checkpoint import CheckpointError, load_checkpoint, resolve_checkpoint

    path = resolve_checkpoint(path)
    ckpt = load_checkpoint(path)
    if task is None:
        task = ckpt.get("task")
        if not task:
            raise CheckpointError(f"{path}: checkpoint does not record its task; pass task=")
    if isinstance(task, str):
        task = get_task(task)
    saved = ckpt.get("task")
    if expect is not None and saved not in tuple(expect):
        raise naming_parameters(ConfigError(f"{path}: not a model of {' | '.join(expect)} (a '{saved}' model: the "
                                            "wrong `model_dir` or checkpoint?)"))
    if saved and getattr(task, "name", None) and saved != task.name:
        raise naming_parameters(ConfigError(f"{path}: holds a model of task '{saved}', not '{task.name}' (the wrong "
                                            "`model_dir` or checkpoint?)"))
    return task.build_model_from_checkpoint(ckpt, path, device)
