"""speechkit.train: the trainer, task interface, LR schedules, checkpoints and batching.

Public API::

    from speechkit.train import Task, Trainer, TrainerConfig, load_model
"""
from speechkit.train.task import Task
from speechkit.train.trainer import Trainer, TrainerConfig, TrainState, load_model

__all__ = ["Task", "Trainer", "TrainerConfig", "TrainState", "load_model"]
