"""The one training loop of speechkit: optimizer, LR schedule, checkpoints, resume, early stopping.

Every model family trains through :class:`Trainer` via its :class:`~speechkit.train.task.Task`.
What lands in ``exp_dir``::

    config.yaml          the resolved config (rewritten at each (re)start)
    train.log            the log (appended across restarts; also on stderr)
    metrics.jsonl        one JSON record per log interval and per epoch (see speechkit.train.report)
    loss.png             train/valid loss and learning-rate curves (written at the end)
    checkpoints/         ckpt-e<epoch>-s<step>.pt, latest.pt -> newest, best.pt (see checkpoint.py)

Reproducibility contract (CPU, same ``num_threads``, ``num_workers = 0``): the same config gives
bitwise the same weights, and a run killed at any moment (even SIGKILL) and re-run finishes with
exactly the weights of an uninterrupted run. This holds because

- batches are a pure function of ``(seed, epoch)`` (:meth:`Task.make_batches`), regenerated on
  resume with the batches already done skipped;
- checkpoints (taken only between updates) hold model, optimizer, scheduler step, the position
  in the epoch, running statistics, early-stopping state and the Python/NumPy/torch RNG states;
- DataLoaders get their own generators, so creating one does not consume the global torch RNG.

Data: every checkpoint (and best.pt) records the content fingerprint of the data the config
names (:meth:`Task.data_inputs`, :mod:`speechkit.data.fingerprint`: table bytes and the arks they
point to, not paths or times). A resumed run, or one that is already finished, whose data now differ
is refused with an error naming the key, the path and what changed, as a changed config key is;
a checkpoint written before fingerprints were recorded resumes with a warning that its data cannot
be checked.

Distributed training (see :mod:`speechkit.train.distributed`): under ``torchrun`` the trainer joins
the process group, wraps the model in DistributedDataParallel and trains each rank on its slice
of every global batch; only rank 0 writes files and logs. Checkpoints also hold every rank's RNG
states, so a multi-process run resumes as exactly as a single-process one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from speechkit.data.fingerprint import diff_fingerprints, fingerprint_inputs
from speechkit.train.batching import derive_seed, shard_batches, slice_batch
from speechkit.train.distributed import (
    DistInfo,
    all_gather_objects,
    barrier,
    combine_weighted_stats,
    distributed_session,
    wrap_model,
)
from speechkit.train.checkpoint import (
    BEST,
    CHECKPOINT_FORMAT,
    DATA_FINGERPRINT,
    CheckpointError,
    checkpoint_name,
    get_rng_state,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    remove_stale_temp_files,
    save_checkpoint,
    set_latest,
    set_rng_state,
)
from speechkit.train.report import MetricsLog, plot_losses
from speechkit.train.schedulers import StepSchedule
from speechkit.train.task import Task
from speechkit.utils.config import ConfigError, FieldError, config_diff, dump_config, from_dict, to_dict

__all__ = ["TrainerConfig", "Trainer", "TrainState", "ExperimentBusyError", "resolve_device",
           "seed_everything", "move_to_device", "build_optimizer", "check_data_fingerprint"]

log = logging.getLogger(__name__)

# Trainer fields that may change between a run and its resumption without changing what the
# remaining updates compute (other trainer fields may change too, with a warning).
_SAFE_TO_CHANGE = {"max_epochs", "max_steps", "patience", "log_interval", "save_interval_steps",
                   "keep_last", "num_threads", "device", "num_workers"}
# Trainer fields that cannot change on resume.
_FROZEN_ON_RESUME = {"optimizer", "best_metric", "best_mode"}


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


class _RunningMeans:
    """Weighted sums of named statistics (restorable from a checkpoint)."""

    def __init__(self, state: dict | None = None) -> None:
        self.sums: dict[str, float] = dict((state or {}).get("sums", {}))
        self.weights: dict[str, float] = dict((state or {}).get("weights", {}))

    def add(self, stats: dict[str, float], weight: float = 1.0) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v) * weight
            self.weights[k] = self.weights.get(k, 0.0) + weight

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}

    def reset(self) -> None:
        self.sums.clear()
        self.weights.clear()

    def state(self) -> dict:
        return {"sums": dict(self.sums), "weights": dict(self.weights)}


@dataclass
class TrainState:
    """Progress counters saved in every checkpoint.

    Attributes:
        step: optimizer updates done.
        epoch: epochs completed.
        batches_done: batches of epoch ``epoch + 1`` already trained (0 between epochs).
        best_value: best value of ``best_metric`` so far (None before the first validation).
        best_epoch: epoch of ``best_value``.
        best_step: update step of ``best_value``.
        bad_epochs: consecutive epochs without improvement (early stopping counter).
        skipped_updates: updates skipped for a non-finite gradient norm.
    """

    step: int = 0
    epoch: int = 0
    batches_done: int = 0
    best_value: float | None = None
    best_epoch: int = 0
    best_step: int = 0
    bad_epochs: int = 0
    skipped_updates: int = 0
    epoch_stats: _RunningMeans = field(default_factory=_RunningMeans)
    interval_stats: _RunningMeans = field(default_factory=_RunningMeans)

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["epoch_stats"] = self.epoch_stats.state()
        d["interval_stats"] = self.interval_stats.state()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainState":
        d = dict(d)
        epoch_stats = _RunningMeans(d.pop("epoch_stats", None))
        interval_stats = _RunningMeans(d.pop("interval_stats", None))
        known = {f.name for f in dataclasses.fields(cls)}
        st = cls(**{k: v for k, v in d.items() if k in known})
        st.epoch_stats, st.interval_stats = epoch_stats, interval_stats
        return st


class _DeviceLoader:
    """Iterates a DataLoader moving each batch to ``device``; ``batches`` holds the index lists."""

    def __init__(self, loader: DataLoader, batches: list[list[int]], device: torch.device) -> None:
        self.loader, self.batches, self.device = loader, batches, device

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            yield move_to_device(batch, self.device)


class Trainer:
    """Train ``task``'s model with ``cfg`` into ``exp_dir``; see the module docstring for the files.

    Args:
        task: the task instance (model, data, loss).
        cfg: an instance of ``task.Config`` (with a ``trainer: TrainerConfig`` field).
        exp_dir: experiment directory, created if needed.
        resume: resume from ``exp_dir/checkpoints/latest.pt`` if present (default). ``False``
            starts over, first moving an earlier run's checkpoints, metrics and config to
            ``exp_dir/prev-<time>/`` (nothing is deleted).

    Attributes:
        rank, world_size: this process's place in distributed training (0 and 1 outside
            ``torchrun``); set by :meth:`fit`.
    """

    def __init__(self, task: Task, cfg: Any, exp_dir: str | os.PathLike, resume: bool = True) -> None:
        tc = getattr(cfg, "trainer", None)
        if not isinstance(tc, TrainerConfig):
            raise TypeError(f"config of task {task.name!r} needs a 'trainer: TrainerConfig' field")
        self.task, self.cfg, self.tc = task, cfg, tc
        self.exp_dir = Path(exp_dir)
        self.ckpt_dir = self.exp_dir / "checkpoints"
        self.resume = resume
        self.rank, self.world_size = 0, 1
        self.dist = DistInfo()
        self.metrics = MetricsLog(self.exp_dir / "metrics.jsonl")
        self.data_fingerprint: dict = {}

    @property
    def is_main(self) -> bool:
        """Whether this process writes files (rank 0)."""
        return self.rank == 0

    @property
    def best_path(self) -> Path:
        return self.ckpt_dir / BEST

    # ------------------------------------------------------------------------------------------

    def fit(self) -> Path:
        """Train until ``max_epochs``/``max_steps``/early stopping; return the best checkpoint's path.

        Resumes from the latest checkpoint when there is one (logged), returns at once when the
        saved run already met its stopping criterion.

        Raises:
            ConfigError: config differs from the saved run in a non-trainer field (names it), a
                frozen trainer field changed, the content of the data it names changed (names
                the key, path and file; see :meth:`_check_data`), ``best_metric`` not produced by
                the task, no CUDA for ``device: cuda``.
            CheckpointError: the latest checkpoint is truncated or corrupt (names the file).
            ExperimentBusyError: another process is training in ``exp_dir``.
        """
        device = resolve_device(self.tc.device)
        with distributed_session(device) as info:
            self.dist, self.rank, self.world_size = info, info.rank, info.world_size
            if self.is_main:
                self.exp_dir.mkdir(parents=True, exist_ok=True)
            with _exclusive(self.exp_dir if self.is_main else None), \
                    _log_to_file(self.exp_dir / "train.log" if self.is_main else None):
                return self._fit(info.device)

    def epoch_batches(self, dataset: Dataset, epoch: int) -> list[list[int]]:
        """The global training batches of ``epoch`` (the task's batches), the same on every rank.

        Each rank trains on its :func:`~speechkit.train.batching.slice_batch` of each; with several
        ranks, a batch with fewer utterances than ranks cannot be sliced and is left out (warned).
        """
        batches = self.task.make_batches(dataset, self.cfg, epoch, self.tc.seed)
        if self.world_size > 1:
            kept = [b for b in batches if len(b) >= self.world_size]
            if len(kept) < len(batches) and self.is_main:
                log.warning("epoch %d: skipping %d of %d batches that hold fewer utterances than the %d processes",
                            epoch, len(batches) - len(kept), len(batches), self.world_size)
            batches = kept
        return batches

    # ------------------------------------------------------------------------------------------

    def _fit(self, device: torch.device) -> Path:
        tc, cfg, task = self.tc, self.cfg, self.task
        if tc.num_threads > 0:
            torch.set_num_threads(tc.num_threads)

        ckpt_path = self._find_resume_point()
        ckpt = None
        state = TrainState()
        self.data_fingerprint = fingerprint_inputs(task.data_inputs(cfg))
        if ckpt_path is not None:
            ckpt = load_checkpoint(ckpt_path)
            self._check_resume(ckpt, ckpt_path)
            self._check_data(ckpt, ckpt_path)
            state = TrainState.from_dict(ckpt["state"])
            reason = self._stop_reason(state)
            if reason is not None:
                log.info("%s: training already finished (%s) at epoch %d, step %d; nothing to do",
                         self.exp_dir, reason, state.epoch, state.step)
                return self.best_path if self.best_path.exists() else ckpt_path
            where = (f"{state.batches_done} batches into epoch {state.epoch + 1}" if state.batches_done
                     else f"after epoch {state.epoch}")
            log.info("resuming from %s: step %d, %s", ckpt_path, state.step, where)

        seed_everything(tc.seed)
        model = task.build_model(cfg).to(device)
        train_set, valid_set = task.build_datasets(cfg)
        if len(train_set) == 0:
            raise ValueError(f"task {task.name!r}: the training set is empty")
        if tc.best_metric.startswith("valid/") and valid_set is None:
            raise ConfigError(f"key 'trainer.best_metric': {tc.best_metric!r} needs a validation set and "
                              f"task {task.name!r} has none here; use e.g. trainer.best_metric=train/loss")
        first = self.epoch_batches(train_set, 1)
        if not first:
            raise ValueError(f"task {task.name!r}: no training batches for epoch 1")
        updates_per_epoch = math.ceil(len(first) / tc.accum_grad)
        total_steps = tc.max_steps if tc.max_steps > 0 else tc.max_epochs * updates_per_epoch
        optimizer = build_optimizer(model, tc)
        warmup = tc.warmup_steps
        if tc.scheduler in ("warmup_linear", "warmup_cosine") and warmup >= total_steps:
            # a small data set (e.g. a 12-utterance voice) plans fewer updates than the warm-up:
            # warm up over a tenth of them instead of failing
            warmup = total_steps // 10
            log.warning("trainer.warmup_steps %d >= the %d planned updates: warming up over %d (10 %%)",
                        tc.warmup_steps, total_steps, warmup)
        scheduler = StepSchedule(optimizer, tc.scheduler, warmup, tc.model_dim, total_steps, tc.min_lr)
        if ckpt is not None:
            _unwrap(model).load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            _apply_optimizer_hparams(optimizer, tc)
            scheduler.load_state_dict(ckpt["scheduler"])
            self._restore_rng(ckpt, state)
            del ckpt
        elif self.rank > 0:
            # Same initial weights on every rank (above); from here on, each rank its own random stream.
            seed_everything(_rank_seed(tc.seed, self.rank, 0))
        model = wrap_model(model, self.dist, find_unused_parameters=task.find_unused_parameters)
        if self.is_main:
            dropped = self.metrics.truncate_after(state.step)
            if dropped:
                log.info("metrics.jsonl: dropped %d record(s) written after step %d by the interrupted run",
                         dropped, state.step)
            dump_config(cfg, self.exp_dir / "config.yaml")
        n_params = sum(p.numel() for p in model.parameters())
        log.info("task %s: %s parameters, %d training items (%d batches/epoch, %d updates/epoch)%s, device %s%s",
                 task.name, f"{n_params:,}", len(train_set), len(first), updates_per_epoch,
                 f", {len(valid_set)} validation items" if valid_set is not None else "", device,
                 f", {self.world_size} processes" if self.world_size > 1 else "")

        valid_batches = None
        if valid_set is not None and len(valid_set) > 0:
            valid_batches = task.make_valid_batches(valid_set, cfg)
            if self.world_size > 1:  # shared out when the stats are means; else rank 0 validates alone
                valid_batches = shard_batches(valid_batches, self.rank, self.world_size, even=False) \
                    if self._shard_validation else (valid_batches if self.is_main else [])

        reason = self._stop_reason(state)
        while reason is None:
            epoch = state.epoch + 1
            batches = first if epoch == 1 else self.epoch_batches(train_set, epoch)
            with logging_redirect_tqdm():
                complete = self._train_epoch(model, optimizer, scheduler, train_set, batches, epoch, state, device)
            valid_loader = None
            if valid_batches is not None:
                valid_loader = self._loader(valid_set, valid_batches, device, derive_seed(tc.seed, epoch, 2))
            self._end_of_epoch(model, optimizer, scheduler, state, epoch, valid_loader, partial=not complete)
            reason = self._stop_reason(state)
        log.info("training finished: %s (epoch %d, step %d); best %s = %s at epoch %d",
                 reason, state.epoch, state.step, tc.best_metric,
                 "n/a" if state.best_value is None else f"{state.best_value:.6g}", state.best_epoch)
        if state.skipped_updates:
            log.warning("%d update(s) were skipped for non-finite gradients", state.skipped_updates)

        if self.is_main:
            if plot_losses(self.exp_dir / "metrics.jsonl", self.exp_dir / "loss.png",
                           title=f"{task.name}: {self.exp_dir.name}"):
                log.info("wrote %s", self.exp_dir / "loss.png")
            if self.best_path.exists():
                _unwrap(model).load_state_dict(load_checkpoint(self.best_path, map_location=device)["model"])
            model.eval()
            task.on_train_end(_unwrap(model), cfg, self.exp_dir)
        return self.best_path if self.best_path.exists() else latest_checkpoint(self.ckpt_dir)

    def _train_epoch(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: StepSchedule,
                     dataset: Dataset, batches: list[list[int]], epoch: int, state: TrainState,
                     device: torch.device) -> bool:
        """Train over ``batches`` from ``state.batches_done`` on; return whether the epoch is complete."""
        tc = self.tc
        n = len(batches)
        skip = state.batches_done
        if skip >= n:
            log.warning("epoch %d has %d batches but the checkpoint had done %d (batching changed?); "
                        "ending the epoch", epoch, n, skip)
            state.batches_done = n
            return True
        world = self.world_size
        local = batches if world == 1 else [slice_batch(b, self.rank, world) for b in batches]
        loader = self._loader(dataset, local[skip:], device, derive_seed(tc.seed, epoch, 1))
        params = [p for p in model.parameters() if p.requires_grad]
        max_norm = tc.grad_clip if tc.grad_clip > 0 else float("inf")
        accum = tc.accum_grad
        model.train()
        bar = tqdm(total=n, initial=skip, desc=f"epoch {epoch}", unit="batch", leave=False,
                   dynamic_ncols=True, disable=None if self.is_main else True)
        try:
            for i, batch in enumerate(loader, start=skip):
                group_end = min((i // accum + 1) * accum, n)
                group_size = group_end - (i // accum) * accum
                # DDP all-reduces gradients in the backward of a group's last batch only.
                with (model.no_sync() if world > 1 and i + 1 < group_end else contextlib.nullcontext()):
                    loss, stats = self.task.forward_loss(model, batch)
                    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                        raise ValueError(f"task {self.task.name!r}: forward_loss must return a 0-dim loss tensor, "
                                         f"got {getattr(loss, 'shape', type(loss).__name__)}")
                    if world == 1:
                        (loss / group_size).backward()
                    else:  # DDP averages over ranks: weight each by its share of the batch's utterances
                        (loss * (world * len(local[i]) / len(batches[i])) / group_size).backward()
                stats = {"loss": float(loss.detach()), **{k: float(v) for k, v in stats.items()}}
                weight = len(batches[i])
                if world > 1:
                    stats, _ = combine_weighted_stats(all_gather_objects((stats, len(local[i]))))
                state.epoch_stats.add(stats, weight)
                state.interval_stats.add(stats, weight)
                state.batches_done = i + 1
                bar.update(1)
                if i + 1 < group_end:
                    continue
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
                if math.isfinite(grad_norm):
                    optimizer.step()
                else:
                    state.skipped_updates += 1
                    log.warning("epoch %d, step %d: gradient norm is %s; update skipped",
                                epoch, state.step + 1, grad_norm)
                optimizer.zero_grad(set_to_none=True)
                lr = optimizer.param_groups[0]["lr"]
                state.step += 1
                scheduler.step()
                state.interval_stats.add({"grad_norm": grad_norm if math.isfinite(grad_norm) else 0.0}, 1.0)
                if state.step % tc.log_interval == 0:
                    self._log_interval(state, epoch, lr)
                    bar.set_postfix(loss=f"{stats['loss']:.4g}", lr=f"{lr:.3g}", refresh=False)
                if tc.max_steps > 0 and state.step >= tc.max_steps:
                    break
                if tc.save_interval_steps > 0 and state.step % tc.save_interval_steps == 0 and i + 1 < n:
                    self._save(model, optimizer, scheduler, state)
        finally:
            bar.close()
        return state.batches_done >= n

    def _log_interval(self, state: TrainState, epoch: int, lr: float) -> None:
        means = state.interval_stats.means()
        state.interval_stats.reset()
        if not self.is_main:
            return
        record = {"kind": "train", "epoch": epoch, "step": state.step, "lr": lr, **means, "time": time.time()}
        self.metrics.write(record)
        shown = " ".join(f"{k}={v:.4g}" for k, v in means.items())
        log.info("epoch %d step %d: %s lr=%.3g", epoch, state.step, shown, lr)

    def _end_of_epoch(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: StepSchedule,
                      state: TrainState, epoch: int, valid_loader: _DeviceLoader | None, partial: bool) -> None:
        """Validate, update best/early-stopping state, record metrics, save a checkpoint.

        ``partial``: training stopped inside the epoch (max_steps); the early-stopping counter is
        then left alone and the position in the epoch kept.
        """
        tc = self.tc
        metrics = {f"train/{k}": v for k, v in state.epoch_stats.means().items()}
        if valid_loader is not None:
            vstats: dict[str, float] = {}
            if len(valid_loader) > 0:
                model.eval()
                with torch.no_grad():  # the bare model: ranks may validate unequal numbers of batches
                    vstats = {k: float(v) for k, v in self.task.validate(_unwrap(model), valid_loader).items()}
                model.train()
            if self.world_size > 1:
                gathered = all_gather_objects((vstats, sum(len(b) for b in valid_loader.batches)))
                vstats = combine_weighted_stats(gathered)[0] if self._shard_validation else gathered[0][0]
            metrics.update({f"valid/{k}": float(v) for k, v in vstats.items()})
        if tc.best_metric not in metrics:
            raise ConfigError(f"key 'trainer.best_metric': {tc.best_metric!r} is not among the metrics of task "
                              f"{self.task.name!r}: {', '.join(sorted(metrics)) or '(none)'}")
        value = metrics[tc.best_metric]
        improved = _is_better(value, state.best_value, tc.best_mode)
        if improved:
            state.best_value, state.best_epoch, state.best_step = value, epoch, state.step
            state.bad_epochs = 0
            if self.is_main:
                # best.pt before the checkpoint: a crash in between redoes this epoch identically.
                save_checkpoint(self.best_path, {
                    "format": CHECKPOINT_FORMAT, "kind": "best", "task": self.task.name,
                    "config": to_dict(self.cfg), "model": _unwrap(model).state_dict(),
                    "epoch": epoch, "step": state.step, "metric": tc.best_metric, "value": value,
                    DATA_FINGERPRINT: self.data_fingerprint})
        elif not partial:
            state.bad_epochs += 1
        if not partial:
            state.epoch = epoch
            state.batches_done = 0
            state.epoch_stats.reset()
        if self.is_main:
            record = {"kind": "epoch", "epoch": epoch, "step": state.step, **metrics,
                      "lr": optimizer.param_groups[0]["lr"], "best": improved, "time": time.time()}
            if partial:
                record["partial"] = True
            self.metrics.write(record)
            shown = " ".join(f"{k}={v:.4g}" for k, v in metrics.items())
            best = (f"new best {tc.best_metric}" if improved else
                    f"best {tc.best_metric}={state.best_value:.4g} at epoch {state.best_epoch}, "
                    f"{state.bad_epochs} epoch(s) without improvement")
            log.info("epoch %d%s done (step %d): %s (%s)", epoch, " (partial)" if partial else "",
                     state.step, shown, best)
        self._save(model, optimizer, scheduler, state)

    def _save(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: StepSchedule,
              state: TrainState) -> None:
        """Write a training checkpoint (rank 0; every rank must call it: it gathers their RNG states)."""
        rng = get_rng_state()
        rng_ranks = all_gather_objects(rng) if self.world_size > 1 else None
        if not self.is_main:
            return
        epoch_label = state.epoch + 1 if state.batches_done else state.epoch
        name = checkpoint_name(epoch_label, state.step)
        save_checkpoint(self.ckpt_dir / name, {
            "format": CHECKPOINT_FORMAT,
            "kind": "train",
            "task": self.task.name,
            "config": to_dict(self.cfg),
            "model": _unwrap(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "state": state.to_dict(),
            "rng": rng,
            **({"world_size": self.world_size, "rng_ranks": rng_ranks} if rng_ranks else {}),
            "torch_version": str(torch.__version__),
            DATA_FINGERPRINT: self.data_fingerprint,
        })
        set_latest(self.ckpt_dir, name)
        for p in prune_checkpoints(self.ckpt_dir, self.tc.keep_last):
            log.debug("pruned %s", p)
        log.debug("saved %s", self.ckpt_dir / name)

    def _loader(self, dataset: Dataset, batches: list[list[int]], device: torch.device, seed: int) -> _DeviceLoader:
        gen = torch.Generator()
        gen.manual_seed(seed)
        loader = DataLoader(dataset, batch_sampler=batches, collate_fn=self.task.collate,
                            num_workers=self.tc.num_workers, pin_memory=device.type == "cuda", generator=gen)
        return _DeviceLoader(loader, batches, device)

    @property
    def _shard_validation(self) -> bool:
        """Whether ranks may validate shares of the batches: only with :meth:`Task.validate` as it
        is (utterance-weighted means, which combine exactly); a task's own validate may compute
        statistics of the whole set (e.g. a code histogram), so rank 0 then validates alone."""
        return type(self.task).validate is Task.validate

    def _restore_rng(self, ckpt: dict, state: TrainState) -> None:
        """Put back this rank's RNG states (re-seed ranks > 0 when the number of processes changed)."""
        saved_world = int(ckpt.get("world_size", 1))
        if saved_world == self.world_size:
            set_rng_state(ckpt["rng_ranks"][self.rank] if self.world_size > 1 else ckpt["rng"])
            return
        log.info("resuming a run of %d process(es) with %d: rank 0 continues rank 0's random streams, "
                 "the others are re-seeded", saved_world, self.world_size)
        if self.rank == 0:
            set_rng_state(ckpt["rng"])
        else:
            seed_everything(_rank_seed(self.tc.seed, self.rank, state.step))

    def _stop_reason(self, state: TrainState) -> str | None:
        tc = self.tc
        if state.epoch >= tc.max_epochs:
            return f"reached max_epochs={tc.max_epochs}"
        if tc.max_steps > 0 and state.step >= tc.max_steps:
            return f"reached max_steps={tc.max_steps}"
        if tc.patience > 0 and state.bad_epochs >= tc.patience:
            return (f"early stopping: {tc.best_metric} did not improve for {state.bad_epochs} epochs "
                    f"(patience {tc.patience})")
        return None

    def _find_resume_point(self) -> Path | None:
        """The checkpoint to resume from, or None; with resume=False, moves an earlier run aside."""
        if self.is_main:
            for p in remove_stale_temp_files(self.ckpt_dir):
                log.info("removed %s (left by an interrupted write)", p)
        barrier()  # rank 0 has cleaned up before any rank looks
        latest = latest_checkpoint(self.ckpt_dir)
        listed = list_checkpoints(self.ckpt_dir)
        if not self.resume:
            if (latest is not None or listed or self.best_path.exists()) and self.is_main:
                self._move_previous_run()
            return None
        if latest is None and listed:
            log.warning("%s: no latest.pt pointer; using the newest checkpoint %s", self.ckpt_dir, listed[-1].name)
            latest = listed[-1]
        return latest

    def _move_previous_run(self) -> None:
        dest = self.exp_dir / time.strftime("prev-%Y%m%d-%H%M%S")
        k = 1
        while dest.exists():
            dest = self.exp_dir / f"{time.strftime('prev-%Y%m%d-%H%M%S')}.{k}"
            k += 1
        dest.mkdir()
        for name in ("checkpoints", "metrics.jsonl", "config.yaml", "loss.png"):
            if (self.exp_dir / name).exists():
                shutil.move(str(self.exp_dir / name), str(dest / name))
        log.info("resume=false: moved the previous run's checkpoints, metrics and config to %s; starting over", dest)

    def _check_resume(self, ckpt: dict, path: Path) -> None:
        if ckpt.get("kind", "train") != "train" or "state" not in ckpt:
            raise CheckpointError(f"{path}: not a training checkpoint (no optimizer/progress state)")
        if ckpt.get("task") != self.task.name:
            raise ConfigError(f"{path}: checkpoint is from task {ckpt.get('task')!r}, not {self.task.name!r}; "
                              f"use a new --exp-dir or --resume false")
        diffs = config_diff(ckpt["config"], to_dict(self.cfg))
        show = lambda v: "(absent)" if v is dataclasses.MISSING else repr(v)  # noqa: E731
        # A key absent from the saved config is a field added to the schema since; its default is
        # assumed to keep the old behaviour (warned below), so old experiments stay resumable.
        fixed = [d for d in diffs if d[1] is not dataclasses.MISSING and (
            not d[0].startswith("trainer.") or d[0][len("trainer."):] in _FROZEN_ON_RESUME)]
        if fixed:
            key, old, new = fixed[0]
            more = f" (and {len(fixed) - 1} more: {', '.join(d[0] for d in fixed[1:4])}{'...' if len(fixed) > 4 else ''})" \
                if len(fixed) > 1 else ""
            raise ConfigError(f"key '{key}': differs from the run saved in {path} (saved {show(old)}, now {show(new)})"
                              f"{more}; to start over use --resume false or a new --exp-dir")
        for key, old, new in diffs:
            name = key[len("trainer."):]
            if old is dataclasses.MISSING:
                log.warning("resuming: %s is not in the saved config (a newer field); using %s", key, show(new))
            elif name in _SAFE_TO_CHANGE:
                log.info("resuming with %s changed: %s -> %s", key, show(old), show(new))
            else:
                log.warning("resuming with %s changed: %s -> %s; the rest of the run will differ from one "
                            "trained with either value throughout", key, show(old), show(new))

    def _check_data(self, ckpt: dict, path: Path) -> None:
        """Refuse to resume (or to call the run finished) when the data it was trained on changed.

        Compares the content fingerprint of the task's :meth:`~speechkit.train.Task.data_inputs`
        saved in ``ckpt`` with that of the data the config names now (paths are not compared: a
        moved data dir with the same content is the same data). A checkpoint without one (written
        before fingerprints were recorded) resumes with a warning.

        Raises:
            ConfigError: the data of a key changed (names the key, its path and what changed).
        """
        check_data_fingerprint(ckpt.get(DATA_FINGERPRINT), self.data_fingerprint, self.exp_dir, path)


# ----------------------------------------------------------------------------------------------


def check_data_fingerprint(saved: dict | None, current: dict, exp_dir: str | os.PathLike,
                           saved_in: str | os.PathLike, remedy: str | None = None) -> None:
    """Refuse a run whose data changed since ``exp_dir`` was trained on them (see :meth:`Trainer.fit`).

    Args:
        saved: the fingerprint recorded in the checkpoint ``saved_in`` (``None``: an older
            checkpoint without one; warned, not checked).
        current: :func:`~speechkit.data.fingerprint.fingerprint_inputs` of the task's
            :meth:`~speechkit.train.Task.data_inputs` now.
        exp_dir: the experiment dir (named in the message).
        saved_in: the checkpoint file (named in the message).
        remedy: what the message tells the user to do (default: a new --exp-dir or --resume false).

    Raises:
        ConfigError: the content of an input changed (names the key, its path now and what
            changed); keys read by only one of the two runs are warned about.
    """
    exp_dir = Path(exp_dir)
    if saved is None:
        if current:
            log.warning("%s: saved without a fingerprint of its data (an older checkpoint): cannot check that "
                        "%s still hold the data it was trained on", saved_in, ", ".join(current))
        return
    changes, unmatched = diff_fingerprints(saved, current)
    if changes:
        c = changes[0]
        more = f" (and {len(changes) - 1} more: {', '.join(d.key for d in changes[1:4])})" if len(changes) > 1 else ""
        remedy = remedy or (f"to train on these data use a new --exp-dir, or --resume false to start over (the old "
                            f"run is moved to {exp_dir}/prev-<time>)")
        raise ConfigError(f"key '{c.key}' ({c.path}): {c.what} since the run in {exp_dir} was trained "
                          f"on it (saved in {saved_in}){more}; {remedy}")
    for key in unmatched:
        if key in current:
            log.warning("resuming: %s (%s) was not read by the saved run (a newer input); cannot check it",
                        key, current[key]["path"])
        else:
            log.warning("resuming: the saved run also read %s (%s), which is not read any more", key,
                        saved[key].get("path", ""))


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch.manual_seed(seed)


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


# ----------------------------------------------------------------------------------------------


def _rank_seed(seed: int, rank: int, step: int) -> int:
    """The seed of rank ``rank``'s random streams (``rank > 0``), fresh or re-seeded at ``step``."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, rank, step, 0xD1D]).generate_state(1)[0])


def _is_better(value: float, best: float | None, mode: str) -> bool:
    if not math.isfinite(value):
        return False
    if best is None:
        return True
    return value < best if mode == "min" else value > best


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The bare module inside a (Distributed)DataParallel wrapper."""
    wrappers = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)
    return model.module if isinstance(model, wrappers) else model


def resolve_device(name: str, option: str = "key 'trainer.device'") -> torch.device:
    """``cpu`` | ``cuda`` | ``auto`` (cuda when there is one) -> a torch device.

    Raises:
        ConfigError: ``cuda`` without a CUDA device (the message names ``option``).
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{option}: 'cuda' requested but no CUDA device is available (use cpu or auto)")
    return torch.device(name)


def _apply_optimizer_hparams(optimizer: torch.optim.Optimizer, tc: TrainerConfig) -> None:
    """After loading a saved optimizer state, put the *configured* hyper-parameters back."""
    for group in optimizer.param_groups:
        group["initial_lr"] = tc.lr
        group["weight_decay"] = tc.weight_decay
        if tc.optimizer in ("adam", "adamw"):
            group["betas"] = tuple(tc.betas)
            group["eps"] = tc.eps
        else:
            group["momentum"] = tc.momentum


class ExperimentBusyError(ValueError):
    """Another process holds ``exp_dir/.lock`` (is training in the same experiment directory)."""


@contextlib.contextmanager
def _exclusive(exp_dir: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``exp_dir/.lock`` (released by the OS even on SIGKILL)."""
    if exp_dir is None:
        yield
        return
    import fcntl

    path = exp_dir / ".lock"
    with open(path, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise ExperimentBusyError(f"{exp_dir}: another training process (pid {holder}) is using this "
                                      f"experiment directory; wait for it or use another --exp-dir") from None
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _log_to_file(path: Path | None) -> Iterator[None]:
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
