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

The loop is this module (:class:`Trainer`: epochs, updates with gradient accumulation and clipping,
validation, best/early stopping, checkpoints); around it, one job per module:
:mod:`speechkit.train.trainer_config` (:class:`TrainerConfig`, the optimizer),
:mod:`speechkit.train.train_state` (:class:`TrainState`, the progress a checkpoint saves),
:mod:`speechkit.train.resume` (where to resume from, whether the config and data allow it, RNG states),
:mod:`speechkit.train.runtime` (device, seeds, the experiment lock, train.log). Their public names
used before the split are also importable from here.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from speechkit.data.fingerprint import fingerprint_inputs
from speechkit.train.batching import derive_seed, shard_batches, slice_batch
from speechkit.train.checkpoint import (
    BEST,
    CHECKPOINT_FORMAT,
    DATA_FINGERPRINT,
    checkpoint_name,
    get_rng_state,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    set_latest,
)
from speechkit.train.distributed import (
    DistInfo,
    all_gather_objects,
    combine_weighted_stats,
    distributed_session,
    wrap_model,
)
from speechkit.train.report import MetricsLog, plot_losses
from speechkit.train.resume import (
    check_data_fingerprint,
    check_resume_config,
    find_resume_point,
    refuse_changes_to_finished_run,
    restore_rng,
)
from speechkit.train.runtime import (
    DeviceLoader,
    ExperimentBusyError,
    experiment_lock,
    log_to_file,
    move_to_device,
    rank_seed,
    resolve_device,
    seed_everything,
    unwrap_model,
)
from speechkit.train.schedulers import StepSchedule
from speechkit.train.task import Task
from speechkit.train.train_state import TrainState
from speechkit.train.trainer_config import TrainerConfig, apply_optimizer_hparams, build_optimizer
from speechkit.utils.config import ConfigError, dump_config, to_dict

__all__ = ["TrainerConfig", "Trainer", "TrainState", "ExperimentBusyError", "resolve_device",
           "seed_everything", "move_to_device", "build_optimizer", "check_data_fingerprint"]

log = logging.getLogger(__name__)


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
                the key, path and file; see :func:`~speechkit.train.resume.check_data_fingerprint`),
                ``best_metric`` not produced by the task, no CUDA for ``device: cuda``.
            CheckpointError: the latest checkpoint is truncated or corrupt (names the file).
            ExperimentBusyError: another process is training in ``exp_dir``.
        """
        device = resolve_device(self.tc.device)
        with distributed_session(device) as info:
            self.dist, self.rank, self.world_size = info, info.rank, info.world_size
            if self.is_main:
                self.exp_dir.mkdir(parents=True, exist_ok=True)
            with experiment_lock(self.exp_dir if self.is_main else None), \
                    log_to_file(self.exp_dir / "train.log" if self.is_main else None):
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

        ckpt_path = find_resume_point(self.exp_dir, self.ckpt_dir, self.resume, self.is_main)
        ckpt = None
        state = TrainState()
        self.data_fingerprint = fingerprint_inputs(task.data_inputs(cfg))
        if ckpt_path is not None:
            ckpt = load_checkpoint(ckpt_path)
            changes = check_resume_config(ckpt, ckpt_path, task.name, cfg)
            check_data_fingerprint(ckpt.get(DATA_FINGERPRINT), self.data_fingerprint, self.exp_dir,
                                   ckpt_path)
            state = TrainState.from_dict(ckpt["state"])
            reason = self._stop_reason(state)
            if reason is not None:
                refuse_changes_to_finished_run(changes, ckpt_path, reason)
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
            unwrap_model(model).load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            apply_optimizer_hparams(optimizer, tc)
            scheduler.load_state_dict(ckpt["scheduler"])
            restore_rng(ckpt, self.rank, self.world_size, tc.seed, state.step)
            del ckpt
        elif self.rank > 0:
            # Same initial weights on every rank (above); from here on, each rank its own random stream.
            seed_everything(rank_seed(tc.seed, self.rank, 0))
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
                unwrap_model(model).load_state_dict(load_checkpoint(self.best_path, map_location=device)["model"])
            model.eval()
            task.on_train_end(unwrap_model(model), cfg, self.exp_dir)
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
                      state: TrainState, epoch: int, valid_loader: DeviceLoader | None, partial: bool) -> None:
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
                    vstats = {k: float(v) for k, v in self.task.validate(unwrap_model(model), valid_loader).items()}
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
                    "config": to_dict(self.cfg), "model": unwrap_model(model).state_dict(),
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
            "model": unwrap_model(model).state_dict(),
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

    def _loader(self, dataset: Dataset, batches: list[list[int]], device: torch.device, seed: int) -> DeviceLoader:
        gen = torch.Generator()
        gen.manual_seed(seed)
        loader = DataLoader(dataset, batch_sampler=batches, collate_fn=self.task.collate,
                            num_workers=self.tc.num_workers, pin_memory=device.type == "cuda", generator=gen)
        return DeviceLoader(loader, batches, device)

    @property
    def _shard_validation(self) -> bool:
        """Whether ranks may validate shares of the batches: only with :meth:`Task.validate` as it
        is (utterance-weighted means, which combine exactly); a task's own validate may compute
        statistics of the whole set (e.g. a code histogram), so rank 0 then validates alone."""
        return type(self.task).validate is Task.validate

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


def _is_better(value: float, best: float | None, mode: str) -> bool:
    if not math.isfinite(value):
        return False
    if best is None:
        return True
    return value < best if mode == "min" else value > best
