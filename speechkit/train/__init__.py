"""speechkit.train: the trainer, task interface, LR schedules, checkpoints and batching.

Public API::

    from speechkit.train import Task, Trainer, TrainerConfig

A trained model is rebuilt by its task: :meth:`Task.build_model_from_file`, or
:func:`speechkit.tasks.load_model` for the task a checkpoint records.
"""
from speechkit.train.task import Task
from speechkit.train.trainer import Trainer, TrainerConfig, TrainState

__all__ = ["Task", "Trainer", "TrainerConfig", "TrainState"]
