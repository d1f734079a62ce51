"""speechkit.train: the trainer, task interface, LR schedules, checkpoints and batching.

Public API::

    from speechkit.train import Task, Trainer, TrainerConfig

A trained model is rebuilt by its task: :meth:`Task.build_model_from_file`, or
:func:`speechkit.tasks.load_model` for the task a checkpoint records.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from speechkit.train.task import Task
    from speechkit.train.trainer import Trainer, TrainerConfig, TrainState

__all__ = ["Task", "Trainer", "TrainerConfig", "TrainState"]
_HOME = {"Task": "speechkit.train.task", "Trainer": "speechkit.train.trainer",
         "TrainerConfig": "speechkit.train.trainer", "TrainState": "speechkit.train.trainer"}


def __getattr__(name: str):
    """The public names, imported on first use (PEP 562): importing a torch-free submodule such as
    ``speechkit.train.checkpoint`` for :func:`~speechkit.train.checkpoint.resolve_checkpoint` then does not
    import torch through the trainer."""
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
