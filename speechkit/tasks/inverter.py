"""The ``inverter`` task: train the codebook inverter (Code2Spec) on a target voice.

Tjandra, Sakti & Nakamura, Interspeech 2020, sec. 4 (model: :mod:`speechkit.models.inverter`): the
code sequence that a trained VQ-VAE assigns to an utterance of the target voice is mapped to that
utterance's linear magnitude spectrogram. The loss is the recipe's squared error per frame
(:func:`~speechkit.models.inverter.inverter_loss`), where the paper's eq. 14 is the L2 norm
``||X^R - X^R_hat||_2`` of the whole spectrogram difference.

Data
    ``data.codes``: a Kaldi text table ``<utt> <code> <code> ...`` (``speechkit-extract-units``
    writes it as ``OUT_DIR/codes``; one code per ``model.upsample_ratio`` spectrogram frames).
    ``data.feats_dir``: a data dir whose ``feats.scp`` holds linear magnitude spectrograms
    (``conf/spectrogram.yaml``) of the same utterances. Utterances in only one of them are skipped
    with a warning. ``data.num_valid`` utterances (every k-th of the C-sorted list) are held out
    for validation.
Codebook
    ``data.vqvae_dir``: the VQ-VAE experiment whose codes these are; its codebook initialises the
    code embedding (frozen with ``data.freeze_codebook``), and ``model.codebook_size`` /
    ``model.input_dim`` must equal its ``K`` / ``De``. '' = learn the code embedding from scratch.
Voices
    ``model.num_speakers > 0`` adds a voice embedding with one row per speaker of
    ``feats_dir/utt2spk`` (C order), written to ``EXP/speakers`` at the end of training
    (``speechkit-resynthesize --speaker`` picks a row by name); 0 = one voice.
Training items
    ``data.crop_codes > 0``: one random window of that many codes (and the matching
    ``crop_codes * upsample_ratio`` spectrogram frames) per utterance and epoch.
Logged statistics
    ``loss`` (mean over frames of the squared L2 norm of the magnitude error; cf. eq. 14) and, on
    validation, ``spectral_convergence`` (``||S - S_hat||_F / ||S||_F`` over the whole set).
Files
    ``EXP/frontend.yaml``: the spectrogram front-end config of ``feats_dir`` (its ``feats.yaml``),
    which ``speechkit-resynthesize`` uses for Griffin-Lim's STFT parameters.

Bad input (:class:`~speechkit.utils.fileio.DataError`, naming the file and line or utterance): a
code that is not an integer in ``[0, model.codebook_size)``, a spectrogram whose length does not
match its codes (outside ``[(T'-1) r, (T'+1) r]`` frames), NaN/Inf or negative magnitudes, no
utterance in common.
"""
from __future__ import annotations

import logging
import os
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch
import yaml
from torch import nn
from torch.utils.data import Dataset

from speechkit.data.fingerprint import DataInput
from speechkit.features.codes import read_codes
from speechkit.features.io import load_features
from speechkit.models.inverter import CodebookInverter, InverterConfig, inverter_loss
from speechkit.tasks.vqvae import speaker_table
from speechkit.train.checkpoint import CheckpointError, load_checkpoint, resolve_checkpoint
from speechkit.train.task import Task, batch_index_lists, checkpoint_input
from speechkit.train.trainer import TrainerConfig
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import FieldError
from speechkit.utils.fileio import DataError, read_table, write_table

__all__ = ["InverterDataConfig", "InverterTaskConfig", "InverterTask", "CodeSpecDataset", "load_vqvae_codebook"]

log = logging.getLogger(__name__)


@dataclass
class InverterDataConfig:
    """Inputs (codes), targets (spectrograms) and the VQ-VAE they come from.

    Attributes:
        codes: Kaldi text table '<utt> <code> <code> ...' (speechkit-extract-units OUT_DIR/codes).
        feats_dir: data dir whose feats.scp holds linear magnitude spectrograms of the same
            utterances (conf/spectrogram.yaml, log: false).
        vqvae_dir: VQ-VAE experiment dir whose codebook initialises the code embedding; '' = learn
            the embedding from scratch.
        freeze_codebook: keep the code embedding fixed at the VQ-VAE codebook (only with vqvae_dir).
        num_valid: utterances held out for validation (every k-th of the sorted list); 0 = none.
        crop_codes: training items are random windows of this many codes; 0 = whole utterances.
    """

    codes: str = ""
    feats_dir: str = ""
    vqvae_dir: str = ""
    freeze_codebook: bool = True
    num_valid: int = 4
    crop_codes: int = 0

    def __post_init__(self) -> None:
        if self.num_valid < 0:
            raise FieldError("num_valid", f"must be >= 0, got {self.num_valid}")
        if self.crop_codes < 0:
            raise FieldError("crop_codes", f"must be >= 0, got {self.crop_codes}")


def _inverter_trainer_defaults() -> TrainerConfig:
    return TrainerConfig(max_epochs=50, batch_size=16, lr=1e-3, grad_clip=5.0, log_interval=20, keep_last=2)


@dataclass
class InverterTaskConfig:
    """Configuration of the inverter task (``speechkit-train inverter --print-config`` shows every key).

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig).
        model: inverter hyper-parameters (speechkit.models.inverter.InverterConfig).
        data: codes, spectrograms and the VQ-VAE they come from.
    """

    trainer: TrainerConfig = field(default_factory=_inverter_trainer_defaults)
    model: InverterConfig = field(default_factory=InverterConfig)
    data: InverterDataConfig = field(default_factory=InverterDataConfig)


def load_vqvae_codebook(vqvae_dir: str | os.PathLike) -> torch.Tensor:
    """The codebook ``(K, De)`` of a trained VQ-VAE (``EXP/checkpoints/best.pt``, else the latest).

    Raises:
        FileNotFoundError: no checkpoint.
        CheckpointError: unreadable, or not a VQ-VAE checkpoint.
    """
    path = resolve_checkpoint(vqvae_dir)
    state = load_checkpoint(path)["model"]
    if "quantizer.codebook" not in state:
        raise CheckpointError(f"{path}: no quantizer.codebook: not a VQ-VAE checkpoint")
    return state["quantizer.codebook"].float()


class CodeSpecDataset(Dataset):
    """Pairs of code sequences and spectrograms; item ``i`` is
    ``{"codes": (T',) long, "spec": (S, F) float, "speaker": int, "utt": str}``.

    Args:
        crop_codes: if > 0, a random window of this many codes (start from the torch generator)
            and the spectrogram frames ``[start * r, (start + crop) * r)`` (to the end for the last window).
        ratio: ``r``, spectrogram frames per code.
    """

    def __init__(self, utts: list[str], codes: list[torch.Tensor], specs: list[torch.Tensor], speakers: list[int],
                 ratio: int, crop_codes: int = 0) -> None:
        self.utts, self.codes, self.specs, self.speakers = utts, codes, specs, speakers
        self.ratio, self.crop_codes = ratio, crop_codes

    def __len__(self) -> int:
        return len(self.utts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        codes, spec = self.codes[i], self.specs[i]
        c, r = self.crop_codes, self.ratio
        if c > 0 and len(codes) > c:
            start = int(torch.randint(0, len(codes) - c + 1, (1,)))
            end = start + c
            spec = spec[start * r: (end * r if end < len(codes) else len(spec))]
            codes = codes[start:end]
        return {"codes": codes, "spec": spec, "speaker": self.speakers[i], "utt": self.utts[i]}

    def lengths(self) -> list[int]:
        """Spectrogram frames per item (after cropping)."""
        c, r = self.crop_codes, self.ratio
        return [min(len(s), c * r) if c > 0 and len(k) > c else len(s) for k, s in zip(self.codes, self.specs)]


class InverterTask(Task):
    """Train :class:`~speechkit.models.inverter.CodebookInverter` (see the module docstring).

    Attributes:
        init_from_vqvae: copy the VQ-VAE codebook into a freshly built model (``data.vqvae_dir``);
            set it to False to rebuild a trained model without the VQ-VAE at hand (inference).
    """

    name = "inverter"
    Config = InverterTaskConfig

    def __init__(self) -> None:
        self.init_from_vqvae = True
        self.use_speakers = False

    def build_model(self, cfg: InverterTaskConfig) -> CodebookInverter:
        self.use_speakers = cfg.model.num_speakers > 0
        model = CodebookInverter(cfg.model)
        if cfg.data.vqvae_dir and self.init_from_vqvae:
            codebook = load_vqvae_codebook(cfg.data.vqvae_dir)
            k, de = codebook.shape
            for key, want, have in (("model.codebook_size", k, cfg.model.codebook_size),
                                    ("model.input_dim", de, cfg.model.input_dim)):
                if want != have:
                    raise ConfigError(f"key '{key}': {have}, but the VQ-VAE in {cfg.data.vqvae_dir} has {want}; "
                                      f"set {key}={want}")
            model.init_from_codebook(codebook, freeze=cfg.data.freeze_codebook)
            log.info("code embedding initialised from the codebook of %s (%s)", cfg.data.vqvae_dir,
                     "frozen" if cfg.data.freeze_codebook else "trainable")
        return model

    def data_inputs(self, cfg: InverterTaskConfig) -> dict[str, DataInput]:
        """``data.codes``, ``data.feats_dir`` (feats.scp, feats.yaml, utt2spk) and the checkpoint of
        ``data.vqvae_dir`` whose codebook initialises the model."""
        d = cfg.data
        out = {}
        if d.codes:
            out["data.codes"] = DataInput(d.codes)
        if d.feats_dir:
            out["data.feats_dir"] = DataInput(d.feats_dir, ("feats.scp", "feats.yaml", "utt2spk"))
        if d.vqvae_dir:
            out["data.vqvae_dir"] = checkpoint_input(d.vqvae_dir)
        return out

    def build_datasets(self, cfg: InverterTaskConfig) -> tuple[CodeSpecDataset, CodeSpecDataset | None]:
        d, m = cfg.data, cfg.model
        if not d.codes or not d.feats_dir:
            raise ConfigError("keys 'data.codes' and 'data.feats_dir' are required (codes of the voice set from "
                              "speechkit-extract-units, and its linear spectrograms)")
        feats_dir = Path(d.feats_dir)
        check_spectrogram_conf(feats_dir)
        codes = read_codes(d.codes, m.codebook_size)
        utt2spk = read_table(feats_dir / "utt2spk")
        common = [u for u in codes if u in utt2spk]
        if not common:
            raise DataError(f"{d.codes} and {feats_dir}/utt2spk have no utterance in common")
        for what, n in (("codes without spectrogram", len(codes) - len(common)),
                        ("spectrograms without codes", len(utt2spk) - len(common))):
            if n:
                log.warning("inverter: skipping %d utterance(s) with %s", n, what)
        utts, specs = load_features(feats_dir, "none", utts=common)
        if specs[0].shape[1] != m.output_dim:
            raise ConfigError(f"key 'model.output_dim': {m.output_dim}, but the spectrograms in {feats_dir} have "
                              f"{specs[0].shape[1]} bins; set model.output_dim={specs[0].shape[1]}")
        r = m.upsample_ratio
        code_list = []
        for utt, spec in zip(utts, specs):
            t = len(codes[utt])
            if not (t - 1) * r <= len(spec) <= (t + 1) * r:
                raise DataError(f"{feats_dir}/feats.scp: utterance '{utt}': {len(spec)} spectrogram frames do not "
                                f"match its {t} codes x model.upsample_ratio {r} (expected {(t - 1) * r}.."
                                f"{(t + 1) * r}); were the codes made from these utterances with this stride?")
            if bool((spec < 0).any()):
                raise DataError(f"{feats_dir}/feats.scp: utterance '{utt}': negative magnitudes (log spectrogram?)")
            code_list.append(torch.from_numpy(codes[utt]))
        spk2idx = speaker_table(utt2spk)
        if self.use_speakers and m.num_speakers < len(spk2idx):
            raise ConfigError(f"key 'model.num_speakers': {m.num_speakers}, but {feats_dir}/utt2spk has "
                              f"{len(spk2idx)} voices; set model.num_speakers={len(spk2idx)} (or 0: one voice)")
        speakers = [spk2idx[utt2spk[u]] if self.use_speakers else 0 for u in utts]
        n_valid = min(d.num_valid, len(utts) - 1)
        valid_idx = set(np.linspace(0, len(utts) - 1, n_valid).round().astype(int).tolist()) if n_valid > 0 else set()
        train_idx = [i for i in range(len(utts)) if i not in valid_idx]

        def make(idx: Iterable[int], crop: int) -> CodeSpecDataset:
            idx = list(idx)
            return CodeSpecDataset([utts[i] for i in idx], [code_list[i] for i in idx], [specs[i] for i in idx],
                                   [speakers[i] for i in idx], r, crop)

        train = make(train_idx, d.crop_codes)
        valid = make(sorted(valid_idx), 0) if valid_idx else None
        log.info("inverter: %d training and %d validation utterances, %d spectrogram frames", len(train),
                 len(valid) if valid else 0, sum(len(s) for s in specs))
        return train, valid

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Pad to ``codes (B, T'_max)``, ``spec (B, S_max, F)``; lengths of both; ``speakers (B,)``."""
        return {
            "codes": nn.utils.rnn.pad_sequence([it["codes"] for it in items], batch_first=True),
            "code_lengths": torch.tensor([len(it["codes"]) for it in items], dtype=torch.long),
            "spec": nn.utils.rnn.pad_sequence([it["spec"] for it in items], batch_first=True),
            "spec_lengths": torch.tensor([len(it["spec"]) for it in items], dtype=torch.long),
            "speakers": torch.tensor([it["speaker"] for it in items], dtype=torch.long),
            "utts": [it["utt"] for it in items],
        }

    def forward_loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean over valid frames of ``||S_s - S_hat_s||^2`` (the recipe's form of eq. 14; ``inverter_loss``)."""
        pred, lengths = model(batch["codes"], batch["code_lengths"], batch["speakers"] if self.use_speakers else None,
                              target_lengths=batch["spec_lengths"])
        loss = inverter_loss(pred, batch["spec"], lengths)
        return loss, {"loss": float(loss.detach())}

    @torch.no_grad()
    def validate(self, model: nn.Module, loader: Iterable) -> dict[str, float]:
        """Utterance-weighted mean loss and the spectral convergence of the whole set."""
        totals: dict[str, float] = defaultdict(float)
        weight = 0
        err2 = ref2 = 0.0
        sizes = batch_index_lists(loader)
        for i, batch in enumerate(loader):
            n = len(sizes[i]) if sizes is not None else len(batch["utts"])
            pred, lengths = model(batch["codes"], batch["code_lengths"],
                                  batch["speakers"] if self.use_speakers else None, target_lengths=batch["spec_lengths"])
            totals["loss"] += float(inverter_loss(pred, batch["spec"], lengths)) * n
            weight += n
            err2 += float(((pred - batch["spec"]) ** 2).sum())  # padded frames are 0 in both
            ref2 += float((batch["spec"] ** 2).sum())
        if weight == 0:
            return {}
        stats = {k: v / weight for k, v in totals.items()}
        stats["spectral_convergence"] = float(np.sqrt(err2 / max(ref2, 1e-30)))
        return stats

    def on_train_end(self, model: nn.Module, cfg: InverterTaskConfig, exp_dir: Path) -> None:
        """Write ``EXP/frontend.yaml`` (the spectrogram config) and, with voices, ``EXP/speakers``."""
        feats_yaml = Path(cfg.data.feats_dir) / "feats.yaml"
        if feats_yaml.is_file():
            tmp = exp_dir / "frontend.yaml.tmp"
            shutil.copyfile(feats_yaml, tmp)
            os.replace(tmp, exp_dir / "frontend.yaml")
        if self.use_speakers:
            spk2idx = speaker_table(read_table(Path(cfg.data.feats_dir) / "utt2spk"))
            write_table(exp_dir / "speakers", {s: str(i) for s, i in spk2idx.items()})


def check_spectrogram_conf(feats_dir: Path) -> dict | None:
    """The front-end config of ``feats_dir`` (``feats.yaml``), checked to be a linear magnitude spectrogram.

    Returns:
        the config dict, or None (with a warning) when ``feats.yaml`` is absent.

    Raises:
        DataError: the features are of another type or a log spectrogram.
    """
    f = feats_dir / "feats.yaml"
    if not f.is_file():
        log.warning("%s: no feats.yaml; cannot check that the targets are linear magnitude spectrograms", feats_dir)
        return None
    conf = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
    if conf.get("type") != "spectrogram" or conf.get("log", False):
        raise DataError(f"{f}: the inverter predicts linear magnitude spectrograms (type: spectrogram, log: false), "
                        f"these features are type: {conf.get('type')!r}, log: {conf.get('log')!r}")
    return conf
