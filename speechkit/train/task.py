"""The :class:`Task` interface: what a model family tells the :class:`~speechkit.train.Trainer`.

A task (ESPnet2 ``tasks/`` style) bundles a config schema, model and dataset construction,
batching and the loss. Tasks are registered by name in :mod:`speechkit.tasks` and chosen on the
command line (``speechkit-train vqvae ...``). The trainer owns everything else: optimizer,
schedule, checkpoints, resume, logging, early stopping, devices and distributed training.

Minimal example::

    @dataclass
    class MyConfig:
        \"\"\"Attributes:
            trainer: training loop settings.
            model: model settings.
        \"\"\"
        trainer: TrainerConfig = field(default_factory=TrainerConfig)
        model: MyModelConfig = field(default_factory=MyModelConfig)

    class MyTask(Task):
        name = "mine"
        Config = MyConfig
        def build_model(self, cfg): return MyModel(cfg.model)
        def build_datasets(self, cfg): return train_set, valid_set
        def collate(self, items): return pad_and_stack(items)
        def forward_loss(self, model, batch):
            loss = model(batch["feats"], batch["lengths"])
            return loss, {"loss": loss.item()}

Rules that keep training reproducible and resumable:

- All randomness in ``forward_loss`` must come from torch/NumPy/Python global generators (restored
  on resume) or be derived from the item index and epoch; a dataset with random augmentation
  under ``num_workers > 0`` should seed it from the index.
- ``make_batches`` must depend only on ``(dataset, cfg, epoch, seed)``.
- Call ``model(...)`` rather than reaching into submodules in ``forward_loss``, so the model can
  be wrapped (``DistributedDataParallel``) later.
"""
from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from torch.utils.data import Dataset

from speechkit.data.fingerprint import DataInput
from speechkit.train.batching import bucket_batches, epoch_rng
from speechkit.train.checkpoint import BEST, CheckpointError, load_checkpoint, resolve_checkpoint
from speechkit.utils.config import from_dict

__all__ = ["Task", "batch_index_lists", "checkpoint_input", "data_paths", "KALDI_TABLES"]

# The tables of a data dir that the default :meth:`Task.data_inputs` fingerprints.
KALDI_TABLES = ("feats.scp", "feats.yaml", "cmvn.scp", "text", "utt2spk", "utt2lang", "segments", "labels.scp")


class Task:
    """Base class of a trainable model family; subclass it and register it in :mod:`speechkit.tasks`.

    Attributes:
        name: registry name (``speechkit-train NAME``).
        Config: dataclass config schema; must have a ``trainer: TrainerConfig`` field.
        find_unused_parameters: set True (on the class, or in :meth:`build_model` from the
            config) when some parameters get no gradient in some batches (e.g. the other
            languages' output layers of a multi-softmax model); distributed training
            (DistributedDataParallel) then looks for them at every step.
    """

    name: str = ""
    Config: type = None  # type: ignore[assignment]
    find_unused_parameters: bool = False

    # -- required ---------------------------------------------------------------------------

    def build_model(self, cfg: Any) -> torch.nn.Module:
        """Build a freshly initialized model from ``cfg`` (called after seeding all RNGs)."""
        raise NotImplementedError(f"task {self.name!r} must implement build_model")

    def build_datasets(self, cfg: Any) -> tuple[Dataset, Dataset | None]:
        """Return ``(train, valid)`` map-style datasets; ``valid`` may be ``None``.

        A dataset with a ``lengths()`` method (frames per item, same order as indices) gets
        length-bucketed batches from the default :meth:`make_batches`.
        """
        raise NotImplementedError(f"task {self.name!r} must implement build_datasets")

    def forward_loss(self, model: torch.nn.Module, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """Compute the scalar training loss of one batch (already on the model's device).

        Returns:
            ``(loss, stats)``: ``loss`` a 0-dim tensor to minimize; ``stats`` floats to log
            (``loss`` is added from the tensor unless given). Stats are averaged over batches
            weighted by the number of utterances in each batch.
        """
        raise NotImplementedError(f"task {self.name!r} must implement forward_loss")

    # -- optional ---------------------------------------------------------------------------

    def collate(self, items: list) -> Any:
        """Merge dataset items into a batch; default ``torch.utils.data.default_collate``."""
        return torch.utils.data.default_collate(items)

    def make_batches(self, dataset: Dataset, cfg: Any, epoch: int, seed: int) -> list[list[int]]:
        """The training batches of epoch ``epoch`` (1-based) as lists of dataset indices.

        Default: :func:`~speechkit.train.batching.bucket_batches` with ``cfg.trainer.batch_size``
        utterances or ``cfg.trainer.batch_frames`` padded frames per batch, using
        ``dataset.lengths()`` if it exists, shuffled deterministically from ``(seed, epoch)``.
        Override it for task-specific sampling (one language per batch, ...); it must depend on
        its arguments only.
        """
        lengths = dataset.lengths() if hasattr(dataset, "lengths") else None
        tc = cfg.trainer
        return bucket_batches(lengths, len(dataset), tc.batch_size, tc.batch_frames, epoch_rng(seed, epoch))

    def make_valid_batches(self, dataset: Dataset, cfg: Any) -> list[list[int]]:
        """Validation batches: every item exactly once, in a fixed length-sorted order.

        Deliberately not :meth:`make_batches`, which may sample; override only if validation
        needs special grouping.
        """
        lengths = dataset.lengths() if hasattr(dataset, "lengths") else None
        tc = cfg.trainer
        return bucket_batches(lengths, len(dataset), tc.batch_size, tc.batch_frames, rng=None)

    @torch.no_grad()
    def validate(self, model: torch.nn.Module, loader: Iterable) -> dict[str, float]:
        """Validation statistics (the trainer prefixes them with ``valid/``).

        Default: the utterance-weighted mean of :meth:`forward_loss` stats over ``loader``, under
        ``torch.no_grad()`` (the trainer has already called ``model.eval()``). ``loader`` yields
        batches on the model's device and has a ``batches`` attribute (the index lists).
        """
        totals: dict[str, float] = defaultdict(float)
        weight = 0
        sizes = batch_index_lists(loader)
        for i, batch in enumerate(loader):
            n = len(sizes[i]) if sizes is not None else 1
            loss, stats = self.forward_loss(model, batch)
            stats = {"loss": float(loss.detach()), **stats}
            for k, v in stats.items():
                totals[k] += float(v) * n
            weight += n
        if weight == 0:
            return {}
        return {k: v / weight for k, v in totals.items()}

    def data_inputs(self, cfg: Any) -> dict[str, DataInput]:
        """The data ``cfg`` names that training reads, by config key (e.g. ``data.train_dir``).

        The trainer records their content fingerprint
        (:func:`~speechkit.data.fingerprint.fingerprint_inputs`) in every checkpoint and refuses
        to resume, or to call a finished run done, when it differs (naming the key, the path and
        what changed). Override it to name exactly the files the task reads, so that a file it
        does not read appearing in a data dir later (a ``cmvn.scp`` of a later stage) is no change.

        Default: every non-empty string key ``data.<name>_dir`` of ``cfg`` as a data dir with the
        :data:`KALDI_TABLES` (an absent one recorded as absent).
        """
        data = getattr(cfg, "data", None)
        if data is None or not dataclasses.is_dataclass(data):
            return {}
        return {f"data.{f.name}": DataInput(str(getattr(data, f.name)), KALDI_TABLES)
                for f in dataclasses.fields(data)
                if f.name.endswith("_dir") and isinstance(getattr(data, f.name), str) and getattr(data, f.name)}

    def on_train_end(self, model: torch.nn.Module, cfg: Any, exp_dir: Path) -> None:
        """Hook called once when training completes (the best weights are loaded into ``model``).

        Use it for plots or exports under ``exp_dir``; the default does nothing.
        """

    # -- inference --------------------------------------------------------------------------

    def build_model_from_file(self, path: str | os.PathLike, device: str | torch.device = "cpu"
                              ) -> tuple[torch.nn.Module, Any]:
        """Rebuild a model of this task trained earlier (ESPnet2's ``Task.build_model_from_file``).

        :func:`speechkit.tasks.load_model` does the same for the task a checkpoint records.

        Args:
            path: ``exp/<tag>``, its ``checkpoints/`` directory or a checkpoint file
                (:func:`~speechkit.train.checkpoint.resolve_checkpoint`: ``best.pt``, else the latest).
            device: where to put the model.

        Returns:
            ``(model, cfg)``: the model in eval mode with the checkpoint's weights, and the config it
            was trained with (an instance of ``self.Config``).

        Raises:
            FileNotFoundError: no checkpoint there.
            CheckpointError: unreadable checkpoint.
            ConfigError: the saved config does not fit the task's current schema (names the key).
        """
        path = resolve_checkpoint(path)
        return self.build_model_from_checkpoint(load_checkpoint(path), path, device)

    def build_model_from_checkpoint(self, ckpt: dict[str, Any], source: str | os.PathLike,
                                    device: str | torch.device = "cpu") -> tuple[torch.nn.Module, Any]:
        """:meth:`build_model_from_file` for a checkpoint already loaded (``source``: its path, for errors).

        Raises:
            ConfigError: the saved config does not fit the task's current schema (names the key).
        """
        cfg = from_dict(self.Config, ckpt["config"], source=f"{source} (saved config)")
        model = self.build_model(cfg)
        model.load_state_dict(ckpt["model"])
        model.to(device).eval()
        return model, cfg


def checkpoint_input(exp_dir: str) -> DataInput:
    """The :class:`DataInput` of the checkpoint a task loads from the experiment dir ``exp_dir``
    (``checkpoints/best.pt``, else the latest checkpoint; a missing one is recorded as absent)."""
    try:
        path = resolve_checkpoint(exp_dir)
    except (FileNotFoundError, CheckpointError):  # none yet, or a dangling latest.pt: the task's load names it
        path = Path(exp_dir) / "checkpoints" / BEST
    return DataInput(str(path))


def batch_index_lists(loader: Any) -> Sequence[Sequence[int]] | None:
    """The index lists behind a loader's batches: ``loader.batches`` or a DataLoader's ``batch_sampler``."""
    batches = getattr(loader, "batches", None)
    if batches is None:
        sampler = getattr(loader, "batch_sampler", None)
        if isinstance(sampler, Sequence):
            batches = sampler
    return batches


#: data-section keys that name a file (keys ending in _dir name a directory); an experiment dir read from.
_DATA_FILE_KEYS = ("codes", "speaker_embeddings", "cmvn_stats")
_DATA_EXPERIMENT_KEYS = ("vqvae_dir",)


def data_paths(cfg) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The paths a config's ``data`` section names, as ``(inputs, experiment_dirs)`` of
    :func:`speechkit.utils.outputs.check_output_dir`: every non-empty string under a key ending in
    ``_dir`` or in :data:`_DATA_FILE_KEYS` (labelled ``data.<key>``); ``vqvae_dir`` is an
    experiment dir (an exp dir inside it is allowed)."""
    data = getattr(cfg, "data", None)
    if data is None or not dataclasses.is_dataclass(data):
        return [], []
    inputs, experiments = [], []
    for f in dataclasses.fields(data):
        value = getattr(data, f.name)
        if not isinstance(value, str) or not value:
            continue
        if f.name in _DATA_EXPERIMENT_KEYS:
            experiments.append((f"data.{f.name}", value))
        elif f.name.endswith("_dir") or f.name in _DATA_FILE_KEYS:
            inputs.append((f"data.{f.name}", value))
    return inputs, experiments
