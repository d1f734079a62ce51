"""The ``vqvae`` task: train a Transformer (or convolutional) VQ-VAE on a data dir's features.

Tjandra, Sakti & Nakamura, "Transformer VQ-VAE for Unsupervised Unit Discovery and Speech
Synthesis: ZeroSpeech 2020 Challenge", Interspeech 2020 (model: :mod:`speechkit.models.vqvae`).

Data
    ``data.train_dir`` (and optionally ``data.valid_dir``) are Kaldi data dirs with ``feats.scp``
    (``speechkit-compute-feats``; MFCC + deltas in the paper) and ``utt2spk``; with
    ``data.cmvn: speaker`` or ``global`` also ``cmvn.scp`` (``speechkit-compute-cmvn-stats``),
    applied on load as Kaldi's ``apply-cmvn``. Every matrix is loaded into memory once.
Speakers
    The decoder's speaker table ``V`` has one row per speaker of ``train_dir/utt2spk``, in C order
    (:func:`speaker_table`); ``model.num_speakers`` must be at least their number (0 = no speaker
    conditioning). The table is written to ``EXP/speakers`` (``<speaker> <row>``) at the end of
    training. Validation utterances of speakers not in the table use row 0 (their
    reconstruction is then only indicative; codes do not depend on the speaker). A speed-perturbed
    dir (``utils/perturb_data_dir_speed_3way.sh``: ids prefixed ``sp0.9-`` / ``sp1.1-``) has three
    speakers per original one, so three rows each (egs/zerospeech2019 ``--corpus local``: 1746 rows for
    582 speakers). The paper's table ``V = [v_1, .., v_L]`` (Tjandra et al. 2020, sec. 3, Fig. 2) has one
    row per speaker ID ``s`` of the input; it does not state ``L``.
Training items
    ``data.crop_frames > 0``: each training utterance contributes one random window of that many
    frames per epoch (the whole utterance when shorter), drawn from the torch generator (so a
    resumed run draws the same windows); batches are then about ``batch_size`` x ``crop_frames``
    frames. Validation always uses whole utterances.
Logged statistics
    ``recon``, ``commitment``, ``smoothing`` (eq. 7, 9-10; weighted as in the loss), ``perplexity``
    and ``codes_used`` of each batch's codes; on validation ``perplexity`` and ``codes_used`` are
    those of the code histogram of the whole validation set.

Bad input (each a :class:`~speechkit.utils.fileio.DataError` naming the data dir and utterance):
an utterance of ``utt2spk`` without features, NaN/Inf in a feature matrix, an utterance shorter
than the total stride ``model.stride``. A feature dimension other than ``model.input_dim`` or too
small a ``model.num_speakers`` is a :class:`~speechkit.utils.cli.ConfigError` naming the key.

Example::

    speechkit-train vqvae --config conf/train_vqvae.yaml --exp-dir exp/vqvae \\
        --data.train_dir dump/mfcc/train --data.valid_dir dump/mfcc/dev --model.num_speakers 6
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

import torch
from torch import nn
from torch.utils.data import Dataset

from speechkit.data.fingerprint import DataInput
from speechkit.features.io import load_features
from speechkit.models.vqvae import VQVAE, VQVAEConfig
from speechkit.nn.vector_quantizer import code_perplexity
from speechkit.train.task import Task, batch_index_lists
from speechkit.train.trainer import TrainerConfig
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import FieldError
from speechkit.utils.fileio import DataError, read_table, write_table

__all__ = ["VQVAEDataConfig", "VQVAETaskConfig", "VQVAETask", "FeatureDataset", "speaker_table", "pad_batch"]

log = logging.getLogger(__name__)


@dataclass
class VQVAEDataConfig:
    """Where the features come from and how training items are cut.

    Attributes:
        train_dir: data dir with feats.scp and utt2spk (and cmvn.scp unless cmvn is none).
        valid_dir: data dir for validation (whole utterances); '' = no validation set (then
            trainer.best_metric must be a train/ statistic).
        cmvn: CMVN applied on load from each dir's cmvn.scp: speaker (per-speaker stats,
            speechkit-compute-cmvn-stats --per-speaker), global (one entry, or the sum of the
            per-speaker ones), or none.
        norm_vars: also normalise the variances (Kaldi apply-cmvn --norm-vars).
        crop_frames: training items are random windows of this many input frames (one per
            utterance per epoch; shorter utterances whole); 0 = whole utterances. A multiple of
            model.stride keeps the code frames aligned.
    """

    train_dir: str = "dump/mfcc/train"
    valid_dir: str = ""
    cmvn: Literal["none", "global", "speaker"] = "speaker"
    norm_vars: bool = True
    crop_frames: int = 0

    def __post_init__(self) -> None:
        if not self.train_dir:
            raise FieldError("train_dir", "must name a data dir with feats.scp")
        if self.crop_frames < 0:
            raise FieldError("crop_frames", f"must be >= 0, got {self.crop_frames}")


def _vqvae_trainer_defaults() -> TrainerConfig:
    return TrainerConfig(max_epochs=20, batch_size=32, lr=1e-3, grad_clip=5.0, log_interval=50, keep_last=2)


@dataclass
class VQVAETaskConfig:
    """Configuration of the vqvae task (``speechkit-train vqvae --print-config`` shows every key).

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig).
        model: VQ-VAE hyper-parameters (speechkit.models.vqvae.VQVAEConfig).
        data: features, CMVN and training crops.
    """

    trainer: TrainerConfig = field(default_factory=_vqvae_trainer_defaults)
    model: VQVAEConfig = field(default_factory=VQVAEConfig)
    data: VQVAEDataConfig = field(default_factory=VQVAEDataConfig)


def speaker_table(utt2spk: dict[str, str]) -> dict[str, int]:
    """Speaker -> row of the decoder's speaker table: the distinct speakers of ``utt2spk`` in C order."""
    speakers = sorted(set(utt2spk.values()), key=lambda s: s.encode("utf-8"))
    return {spk: i for i, spk in enumerate(speakers)}


class FeatureDataset(Dataset):
    """Feature matrices with speaker indices; item ``i`` is ``{"feats": (T, D), "speaker": int, "utt": str}``.

    Args:
        utts: utterance ids.
        feats: ``(T_i, D)`` float tensors.
        speakers: speaker row of each utterance.
        crop_frames: if > 0, :meth:`__getitem__` returns a random window of this many frames
            (start drawn from the torch generator) of a longer utterance.
    """

    def __init__(self, utts: list[str], feats: list[torch.Tensor], speakers: list[int], crop_frames: int = 0) -> None:
        if not (len(utts) == len(feats) == len(speakers)):
            raise ValueError("utts, feats and speakers must have the same length")
        self.utts, self.feats, self.speakers, self.crop_frames = utts, feats, speakers, crop_frames

    def __len__(self) -> int:
        return len(self.utts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        x = self.feats[i]
        c = self.crop_frames
        if c > 0 and len(x) > c:
            start = int(torch.randint(0, len(x) - c + 1, (1,)))
            x = x[start:start + c]
        return {"feats": x, "speaker": self.speakers[i], "utt": self.utts[i]}

    def lengths(self) -> list[int]:
        """Frames per item (after cropping)."""
        c = self.crop_frames
        return [min(len(x), c) if c > 0 else len(x) for x in self.feats]


def pad_batch(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Pad to ``feats (B, T_max, D)``; ``lengths (B,)``, ``speakers (B,)`` long; ``utts`` list."""
    feats = [it["feats"] for it in items]
    return {
        "feats": nn.utils.rnn.pad_sequence(feats, batch_first=True),
        "lengths": torch.tensor([len(x) for x in feats], dtype=torch.long),
        "speakers": torch.tensor([it["speaker"] for it in items], dtype=torch.long),
        "utts": [it["utt"] for it in items],
    }


class VQVAETask(Task):
    """Train :class:`~speechkit.models.vqvae.VQVAE` (see the module docstring)."""

    name = "vqvae"
    Config = VQVAETaskConfig

    def __init__(self) -> None:
        self.use_speakers = True
        self.codebook_size = 0

    def build_model(self, cfg: VQVAETaskConfig) -> VQVAE:
        self.use_speakers = cfg.model.num_speakers > 0
        self.codebook_size = cfg.model.codebook_size
        return VQVAE(cfg.model)

    def data_inputs(self, cfg: VQVAETaskConfig) -> dict[str, DataInput]:
        """``data.train_dir`` / ``data.valid_dir``: feats.scp, feats.yaml, utt2spk (and the CMVN
        stats unless ``data.cmvn`` is none)."""
        d = cfg.data
        tables = ("feats.scp", "feats.yaml", "utt2spk") + (("cmvn.scp", "cmvn_global.ark") if d.cmvn != "none" else ())
        return {f"data.{k}": DataInput(getattr(d, k), tables) for k in ("train_dir", "valid_dir") if getattr(d, k)}

    def build_datasets(self, cfg: VQVAETaskConfig) -> tuple[FeatureDataset, FeatureDataset | None]:
        d, m = cfg.data, cfg.model
        train_dir = Path(d.train_dir)
        utt2spk = read_table(train_dir / "utt2spk")
        spk2idx = speaker_table(utt2spk)
        if m.num_speakers and m.num_speakers < len(spk2idx):
            raise ConfigError(f"key 'model.num_speakers': {m.num_speakers}, but {train_dir}/utt2spk has "
                              f"{len(spk2idx)} speakers; set model.num_speakers={len(spk2idx)} (or 0: no speaker "
                              f"conditioning)")
        if m.num_speakers > len(spk2idx):
            log.warning("model.num_speakers=%d but %s has %d speakers; %d rows of the speaker table stay unused",
                        m.num_speakers, train_dir, len(spk2idx), m.num_speakers - len(spk2idx))
        train = self._dataset(train_dir, cfg, spk2idx, d.crop_frames)
        valid = self._dataset(Path(d.valid_dir), cfg, spk2idx, 0) if d.valid_dir else None
        return train, valid

    def _dataset(self, data_dir: Path, cfg: VQVAETaskConfig, spk2idx: dict[str, int], crop: int) -> FeatureDataset:
        utt2spk = read_table(data_dir / "utt2spk")
        utts, feats = load_features(data_dir, cfg.data.cmvn, cfg.data.norm_vars, utt2spk.keys(),
                                    min_frames=cfg.model.stride, min_frames_key="model.stride")
        if not utts:
            raise DataError(f"{data_dir}: no utterances")
        dim = feats[0].shape[1]
        if dim != cfg.model.input_dim:
            raise ConfigError(f"key 'model.input_dim': {cfg.model.input_dim}, but the features in {data_dir}/feats.scp "
                              f"have {dim} dimensions; set model.input_dim={dim}")
        unknown = sorted({utt2spk[u] for u in utts if utt2spk[u] not in spk2idx})
        if unknown and self.use_speakers:
            log.warning("%s: %d speaker(s) not in the training set (e.g. %s) use speaker row 0",
                        data_dir, len(unknown), unknown[0])
        speakers = [spk2idx.get(utt2spk[u], 0) for u in utts]
        n_frames = sum(len(x) for x in feats)
        log.info("%s: %d utterances, %d speakers, %d frames (%.2f h at 10 ms)", data_dir, len(utts),
                 len({utt2spk[u] for u in utts}), n_frames, n_frames / 360000)
        return FeatureDataset(utts, feats, speakers, crop)

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return pad_batch(items)

    def forward_loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Total loss ``recon + commitment + smoothing`` (eq. 7 + 9); stats as in the module docstring."""
        out = model(batch["feats"], batch["lengths"], batch["speakers"] if self.use_speakers else None)
        stats = {k: float(out.losses[k].detach()) for k in ("recon", "commitment", "smoothing")}
        stats["perplexity"] = float(out.stats["perplexity"])
        stats["codes_used"] = float(out.stats["codes_used"])
        return out.losses["total"], stats

    @torch.no_grad()
    def validate(self, model: nn.Module, loader: Iterable) -> dict[str, float]:
        """Utterance-weighted mean losses; perplexity and codes used of the whole set's code histogram."""
        totals: dict[str, float] = defaultdict(float)
        weight = 0
        counts = None
        sizes = batch_index_lists(loader)
        for i, batch in enumerate(loader):
            n = len(sizes[i]) if sizes is not None else len(batch["utts"])
            out = model(batch["feats"], batch["lengths"], batch["speakers"] if self.use_speakers else None)
            for k in ("recon", "commitment", "smoothing", "total"):
                totals["loss" if k == "total" else k] += float(out.losses[k]) * n
            weight += n
            h = torch.bincount(out.codes[out.mask].flatten(), minlength=self.codebook_size).double()
            counts = h if counts is None else counts + h
        if weight == 0:
            return {}
        stats = {k: v / weight for k, v in totals.items()}
        stats["perplexity"] = float(code_perplexity(counts))
        stats["codes_used"] = float((counts > 0).sum())
        return stats

    def on_train_end(self, model: nn.Module, cfg: VQVAETaskConfig, exp_dir: Path) -> None:
        """Write ``EXP/speakers`` (``<speaker> <row of the speaker table>``)."""
        spk2idx = speaker_table(read_table(Path(cfg.data.train_dir) / "utt2spk"))
        write_table(exp_dir / "speakers", {s: str(i) for s, i in spk2idx.items()})
