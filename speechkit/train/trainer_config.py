"""The ``trainer:`` section of every task's config, and the optimizer it configures.

:class:`TrainerConfig` is one typed dataclass (checked on creation: a bad value raises
:class:`~speechkit.utils.config.FieldError` naming the field); :func:`build_optimizer` turns its
``optimizer`` / ``lr`` / ``betas`` / ``eps`` / ``momentum`` / ``weight_decay`` into a torch optimizer,
and :func:`apply_optimizer_hparams` puts those configured values back over an optimizer state
loaded from a checkpoint (so a resumed run uses the config's, not the checkpoint's).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from speechkit.utils.config import ConfigError, FieldError


@dataclass
class TrainerConfig:
    """Training-loop settings shared by every task (the ``trainer:`` section of each config).

    Attributes:
        max_epochs: stop after this many epochs (passes over the training batches). May be raised
            to continue a finished run.
        max_steps: stop after this many optimizer updates (0 = no limit); checked after every update.
        batch_size: utterances per batch in the default length-bucketed batching (ignored when
            batch_frames > 0).
        batch_frames: if > 0, fill each batch up to this many padded frames (utterances x longest)
            instead of batch_size utterances.
        num_workers: DataLoader worker processes (0 = load in the training process). Resume is
            bitwise exact with 0, or when datasets derive any randomness from the item index.
        optimizer: adam | adamw (decoupled weight decay, Loshchilov & Hutter 2019) | sgd.
        lr: learning rate (the peak one with a warmup schedule). With scheduler=noam and
            model_dim > 0 it is the scale factor of Vaswani et al. (2017) eq. (3) (1.0 in the paper).
        betas: Adam/AdamW coefficients (beta1, beta2).
        eps: Adam/AdamW epsilon.
        momentum: SGD momentum.
        weight_decay: L2 penalty (adam, sgd) or decoupled weight decay (adamw).
        scheduler: learning-rate schedule as a function of the update number: none | noam |
            warmup_constant | warmup_linear | warmup_cosine (see speechkit.train.schedulers).
        warmup_steps: updates of linear warmup; for noam the warmup_steps of eq. (3) (required).
        model_dim: noam only: d_model of eq. (3); 0 = use lr as the peak learning rate instead.
        min_lr: final learning rate of warmup_linear / warmup_cosine, reached at the last update
            (max_steps, else max_epochs x updates per epoch).
        grad_clip: clip the global gradient L2 norm to this value (0 = no clipping; the norm is
            logged either way). An update whose gradient norm is not finite is skipped (logged).
        accum_grad: accumulate gradients over this many batches per update (each loss divided by
            the group size).
        seed: seeds model initialization, batch order and all random generators; the same seed
            gives the same run.
        log_interval: log mean training statistics every this many updates (train.log,
            metrics.jsonl).
        save_interval_steps: also save a checkpoint every this many updates inside an epoch
            (0 = only at the end of each epoch).
        keep_last: number of newest full checkpoints to keep (0 = all); best.pt is kept apart.
        best_metric: the metric that selects best.pt and drives early stopping, 'valid/<stat>' or
            'train/<stat>' with <stat> a key returned by the task (e.g. valid/loss).
        best_mode: min if a lower best_metric is better, max if higher.
        patience: stop after this many consecutive epochs without improvement of best_metric
            (0 = no early stopping).
        num_threads: torch CPU threads (0 = torch default); bitwise reproducibility on CPU needs
            the same value.
        device: cpu | cuda | auto (cuda when available).
    """

    max_epochs: int = 10
    max_steps: int = 0
    batch_size: int = 32
    batch_frames: int = 0
    num_workers: int = 0
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum: float = 0.0
    weight_decay: float = 0.0
    scheduler: Literal["none", "noam", "warmup_constant", "warmup_linear", "warmup_cosine"] = "none"
    warmup_steps: int = 0
    model_dim: int = 0
    min_lr: float = 0.0
    grad_clip: float = 0.0
    accum_grad: int = 1
    seed: int = 0
    log_interval: int = 50
    save_interval_steps: int = 0
    keep_last: int = 3
    best_metric: str = "valid/loss"
    best_mode: Literal["min", "max"] = "min"
    patience: int = 0
    num_threads: int = 0
    device: Literal["cpu", "cuda", "auto"] = "auto"

    def __post_init__(self) -> None:
        for name in ("max_epochs", "accum_grad", "log_interval"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")
        for name in ("max_steps", "batch_frames", "num_workers", "warmup_steps", "model_dim",
                     "save_interval_steps", "keep_last", "patience", "num_threads"):
            if getattr(self, name) < 0:
                raise FieldError(name, f"must be >= 0, got {getattr(self, name)}")
        for name in ("lr", "eps", "momentum", "weight_decay", "min_lr", "grad_clip"):
            if not getattr(self, name) >= 0:
                raise FieldError(name, f"must be >= 0, got {getattr(self, name)}")
        if self.batch_frames == 0 and self.batch_size < 1:
            raise FieldError("batch_size", f"must be >= 1 (or set batch_frames), got {self.batch_size}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise FieldError("betas", f"each must be in [0, 1), got {list(self.betas)}")
        if self.scheduler == "noam" and self.warmup_steps < 1:
            raise FieldError("warmup_steps", "scheduler noam needs warmup_steps >= 1")
        if self.model_dim and self.scheduler != "noam":
            raise FieldError("model_dim", f"only used by scheduler noam (scheduler is {self.scheduler!r})")
        prefix, _, stat = self.best_metric.partition("/")
        if prefix not in ("train", "valid") or not stat:
            raise FieldError("best_metric", f"must look like 'valid/<stat>' or 'train/<stat>', got {self.best_metric!r}")


def build_optimizer(model: torch.nn.Module, tc: TrainerConfig) -> torch.optim.Optimizer:
    """The optimizer named by ``tc.optimizer`` over the trainable parameters of ``model``."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    if tc.optimizer == "adam":
        return torch.optim.Adam(params, lr=tc.lr, betas=tuple(tc.betas), eps=tc.eps, weight_decay=tc.weight_decay)
    if tc.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=tc.lr, betas=tuple(tc.betas), eps=tc.eps, weight_decay=tc.weight_decay)
    if tc.optimizer == "sgd":
        return torch.optim.SGD(params, lr=tc.lr, momentum=tc.momentum, weight_decay=tc.weight_decay)
    raise ConfigError(f"key 'trainer.optimizer': unknown optimizer {tc.optimizer!r}")


def apply_optimizer_hparams(optimizer: torch.optim.Optimizer, tc: TrainerConfig) -> None:
    """After loading a saved optimizer state, put the *configured* hyper-parameters back."""
    for group in optimizer.param_groups:
        group["initial_lr"] = tc.lr
        group["weight_decay"] = tc.weight_decay
        if tc.optimizer in ("adam", "adamw"):
            group["betas"] = tuple(tc.betas)
            group["eps"] = tc.eps
        else:
            group["momentum"] = tc.momentum
