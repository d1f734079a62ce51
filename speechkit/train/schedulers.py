"""Learning-rate schedules as pure functions of the update number, wrapped as torch schedulers.

All schedules here depend only on ``n``, the 1-based number of the optimizer update about to be
taken, so resuming from a checkpoint needs nothing but the step count, and a schedule parameter
changed between runs (e.g. ``max_epochs`` raised, which moves the end of a decay) takes effect
on resume instead of being overwritten by stale saved values.

Schedules (``base`` is the configured ``lr``, ``w`` = ``warmup_steps``, ``N`` = ``total_steps``):

- ``none``: ``base``.
- ``noam`` (Vaswani et al., 2017, "Attention is all you need", Sec. 5.3, eq. (3)):
  ``lrate = d_model^-0.5 * min(n^-0.5, n * w^-1.5)``. With ``model_dim = d_model > 0`` the result
  is multiplied by ``base`` (a scale factor; 1.0 in the paper, ESPnet's ``transformer-lr``).
  The SALAD paper (Pascual et al., IberSPEECH 2018, sec. 3.3) uses the same formula,
  ``lr = H^-0.5 min(s^-0.5, s w^-1.5)``, with ``H`` the embedding size and ``w = 4000``.
  With ``model_dim = 0`` the curve is rescaled so that ``base`` is the *peak* learning rate,
  reached at ``n = w``: ``base * w^0.5 * min(n^-0.5, n * w^-1.5)``.
- ``warmup_constant``: linear warmup to ``base`` over ``w`` updates, then constant.
- ``warmup_linear``: linear warmup, then linear decay from ``base`` to ``min_lr`` at update ``N``.
- ``warmup_cosine``: linear warmup, then half-cosine decay from ``base`` to ``min_lr`` at ``N``
  (Loshchilov & Hutter, 2017, "SGDR", eq. (5) without restarts).

Warmup is ``base * n / w`` for ``n <= w`` (no warmup when ``w = 0``).
"""
from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LRScheduler

__all__ = ["SCHEDULERS", "noam_lr", "lr_at", "StepSchedule"]

SCHEDULERS = ("none", "noam", "warmup_constant", "warmup_linear", "warmup_cosine")


def noam_lr(step: int, warmup_steps: int, model_dim: int = 0, scale: float = 1.0) -> float:
    """Noam learning rate for update ``step`` (1-based).

    Vaswani et al. (2017), eq. (3): ``model_dim^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)``,
    times ``scale``. With ``model_dim = 0``, ``scale`` is the peak value (reached at
    ``step = warmup_steps``) instead.

    Raises:
        ValueError: ``step < 1`` or ``warmup_steps < 1`` or ``model_dim < 0``.
    """
    if step < 1:
        raise ValueError(f"noam_lr: step is 1-based, got {step}")
    if warmup_steps < 1:
        raise ValueError(f"noam_lr: warmup_steps must be >= 1, got {warmup_steps}")
    if model_dim < 0:
        raise ValueError(f"noam_lr: model_dim must be >= 0, got {model_dim}")
    shape = min(step ** -0.5, step * warmup_steps ** -1.5)
    if model_dim > 0:
        return scale * model_dim ** -0.5 * shape
    return scale * warmup_steps ** 0.5 * shape


def lr_at(kind: str, n: int, base: float, warmup_steps: int = 0, model_dim: int = 0,
          total_steps: int = 0, min_lr: float = 0.0) -> float:
    """The learning rate of schedule ``kind`` for the ``n``-th update (1-based); see the module doc.

    Raises:
        ValueError: unknown ``kind``; ``noam`` without ``warmup_steps``; a decaying schedule
            without ``total_steps > warmup_steps``.
    """
    if kind == "none":
        return base
    if kind == "noam":
        return noam_lr(n, warmup_steps, model_dim, base)
    if kind not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {kind!r}; choose from: {', '.join(SCHEDULERS)}")
    if warmup_steps > 0 and n <= warmup_steps:
        return base * n / warmup_steps
    if kind == "warmup_constant":
        return base
    if total_steps <= warmup_steps:
        raise ValueError(f"scheduler {kind!r} needs total_steps ({total_steps}) > warmup_steps ({warmup_steps})")
    progress = min(1.0, (n - warmup_steps) / (total_steps - warmup_steps))
    if kind == "warmup_linear":
        return base + (min_lr - base) * progress
    return min_lr + 0.5 * (base - min_lr) * (1.0 + math.cos(math.pi * progress))


class StepSchedule(LRScheduler):
    """A ``torch.optim.lr_scheduler.LRScheduler`` following :func:`lr_at`.

    Call ``step()`` after each ``optimizer.step()``. After ``k`` calls the optimizer's learning
    rate is the one for update ``k + 1``. The state (``state_dict``) is only the step count; the
    schedule's parameters come from the constructor, so changed settings apply on resume.

    Args:
        optimizer: the optimizer; every parameter group's ``initial_lr`` (its configured ``lr``) is
            the ``base`` of :func:`lr_at`.
        kind, warmup_steps, model_dim, total_steps, min_lr: see :func:`lr_at`.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, kind: str = "none", warmup_steps: int = 0,
                 model_dim: int = 0, total_steps: int = 0, min_lr: float = 0.0) -> None:
        self.kind = kind
        self.warmup_steps = warmup_steps
        self.model_dim = model_dim
        self.total_steps = total_steps
        self.min_lr = min_lr
        lr_at(kind, 1, 1.0, warmup_steps, model_dim, max(total_steps, warmup_steps + 1), min_lr)  # validate
        if kind in ("warmup_linear", "warmup_cosine"):
            lr_at(kind, warmup_steps + 1, 1.0, warmup_steps, model_dim, total_steps, min_lr)
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:  # noqa: D102 (torch API)
        n = self.last_epoch + 1
        return [lr_at(self.kind, n, base, self.warmup_steps, self.model_dim, self.total_steps, self.min_lr)
                for base in self.base_lrs]

    def state_dict(self) -> dict:
        """Only the step count (``last_epoch``, ``_step_count``)."""
        return {"last_epoch": self.last_epoch, "_step_count": self._step_count}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the step count and set the optimizer's learning rates for the next update."""
        self.last_epoch = int(state_dict["last_epoch"])
        self._step_count = int(state_dict.get("_step_count", self.last_epoch + 1))
        self.sync()

    def sync(self) -> None:
        """Set every group's ``lr`` to the schedule's value for the next update."""
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = lrs
