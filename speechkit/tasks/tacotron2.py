"""The ``tacotron2`` task: train :class:`~speechkit.models.tacotron2.Tacotron2` on phones and log-mel frames.

Shen et al., ICASSP 2018 (model: :mod:`speechkit.models.tacotron2`), conditioned on a speaker
vector as the base TTS of Hemati & Borth 2021 (sec. 2.1, Figure 2). Teacher-forced training
(Shen et al., sec. 3.1).

Data
    ``data.train_dir`` / ``data.valid_dir``: Kaldi data dirs holding

    - ``data.phone_file`` (default ``text``): ``<utt> <phone> <phone> ...``, space-separated phone
      symbols -- the ``text`` of a phone dir written by ``speechkit-g2p``
      (:mod:`speechkit.text.g2p`), or any ``phones`` file of that shape;
    - ``feats.scp``: float32 ``(T, n_mels)`` natural-log mel features of the ``logmel`` front end
      (``utils/make_feats.sh --config conf/logmel.yaml``; ``feats.yaml`` records its config, copied
      to ``EXP/feats.yaml`` for :func:`~speechkit.decode.griffin_lim.mel_to_waveform`);
    - ``utt2spk`` when ``data.speaker_embeddings`` is set.

    Utterances present in only one of the phone file and ``feats.scp``, or with no phone, are
    skipped (counted, warned with the first ids); an unreadable matrix, NaN/Inf or a channel count
    other than ``model.n_mels`` is a :class:`DataError` naming the file and utterance.
Phone vocabulary
    ``data.token_list`` (ESPnet's name): ``<pad>`` (id 0), ``<unk>`` (id 1), then the phones.
    Left empty, it is built from ``train_dir``'s phone file (C-sorted phones) when the config is
    loaded, so ``config.yaml`` and every checkpoint carry it, and ``model.num_phones`` is its
    length. Give it explicitly to keep one vocabulary across trainings (e.g. the episodes of
    continual learning, fine-tuning); phones outside it then map to ``<unk>`` (counted, warned).
    ``EXP/phones.txt`` (Kaldi symbol table ``<phone> <id>``) is written at the end of training.
Speaker conditioning (Jia et al. 2018; Hemati & Borth 2021, sec. 2.1)
    ``data.speaker_embeddings``: a ``spk_embeddings.scp`` (``speechkit-embed-speakers``: speaker
    -> ``(E,)`` mean GE2E embedding); each utterance gets its speaker's vector (``utt2spk``),
    concatenated to every encoder output; ``model.speaker_dim`` is read from it at config load.
    ``EXP/speakers`` lists the trained speakers. A speaker without a vector is a
    :class:`DataError` naming it.
Targets
    ``log(max(mel, data.mel_floor))`` (NVIDIA Tacotron 2's dynamic range compression clips at
    1e-5; the paper clips magnitudes at 0.01, sec. 2.1), then normalised per channel to zero
    mean and unit variance over the training frames (statistics kept in the model:
    ``model.mel_mean``, ``model.mel_std``).
Loss (sec. 2.2)
    ``MSE(mel_before) + MSE(mel_after) + BCE(stop)`` over the unpadded frames (stop target 1
    from the last frame on, ``loss.stop_pos_weight`` on the positive class), plus
    ``loss.guided_attention_weight`` x the guided attention loss (Tachibana et al. 2018; off by
    default). Logged: ``loss``, ``mel_before``, ``mel_after``, ``stop`` (and ``guided_attention``).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from speechkit.data.expdir import copy_feats_yaml
from speechkit.data.fingerprint import DataInput
from speechkit.data.speakers import read_speaker_vectors, utterance_speakers, write_speakers
from speechkit.features.io import FeatureReader
from speechkit.models.tacotron2 import (
    Tacotron2,
    Tacotron2Config,
    count_parameters,
    guided_attention_weights,
    length_mask,
    stop_targets,
)
from speechkit.train.task import Task
from speechkit.train.trainer import TrainerConfig
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import FieldError
from speechkit.utils.fileio import DataError, atomic_write, read_table

__all__ = ["Tacotron2DataConfig", "Tacotron2LossConfig", "Tacotron2TaskConfig", "Tacotron2Task", "PhoneMelSet",
           "PAD", "UNK", "read_phone_table", "build_token_list", "encode_phones", "write_symbol_table",
           "load_phone_mel_dir",
           "synthesize", "PAPER_PARAMETERS"]

log = logging.getLogger(__name__)

PAD, UNK = "<pad>", "<unk>"
#: Tacotron 2's size as usually quoted (NVIDIA's reference implementation, 148 input symbols).
PAPER_PARAMETERS = 28.2e6


# ----------------------------------------------------------------------------------------------
# configs


@dataclass
class Tacotron2DataConfig:
    """Training / validation data (see the module docstring).

    Attributes:
        train_dir: data dir with the phone file, feats.scp (log-mel) and utt2spk.
        valid_dir: the same for validation ('' = none; then trainer.best_metric must be train/...).
        phone_file: name of the file of space-separated phones in each dir ('text' of speechkit-g2p, or 'phones').
        token_list: the phone vocabulary, ['<pad>', '<unk>', phones...]; [] = built from
            train_dir's phone file when the config is loaded.
        speaker_embeddings: '' (no speaker) or a spk_embeddings.scp (speaker -> (E,) vector,
            speechkit-embed-speakers); sets model.speaker_dim.
        mel_floor: targets are log(max(mel, mel_floor)), i.e. log-mel clipped at log(mel_floor); 0 = no clipping.
    """

    train_dir: str = ""
    valid_dir: str = ""
    phone_file: str = "text"
    token_list: list[str] = field(default_factory=list)
    speaker_embeddings: str = ""
    mel_floor: float = 1e-5

    def __post_init__(self) -> None:
        if self.mel_floor < 0:
            raise FieldError("mel_floor", f"must be >= 0 (got {self.mel_floor!r})")
        if self.token_list:
            if self.token_list[:2] != [PAD, UNK]:
                raise FieldError("token_list", f"must start with {PAD!r}, {UNK!r} (got {self.token_list[:2]})")
            dup = [t for i, t in enumerate(self.token_list) if t in self.token_list[:i]]
            if dup:
                raise FieldError("token_list", f"phone {dup[0]!r} appears twice")


@dataclass
class Tacotron2LossConfig:
    """Loss weights.

    Attributes:
        stop_pos_weight: weight of the positive (stop) class in the stop-token BCE (1 = plain BCE
            as the paper; ESPnet uses 5).
        guided_attention_weight: weight of the guided attention loss (Tachibana et al. 2018); 0 = off.
        guided_attention_sigma: its width g.
    """

    stop_pos_weight: float = 1.0
    guided_attention_weight: float = 0.0
    guided_attention_sigma: float = 0.4

    def __post_init__(self) -> None:
        for key in ("stop_pos_weight", "guided_attention_sigma"):
            if getattr(self, key) <= 0:
                raise FieldError(key, f"must be > 0 (got {getattr(self, key)!r})")
        if self.guided_attention_weight < 0:
            raise FieldError("guided_attention_weight", f"must be >= 0 (got {self.guided_attention_weight!r})")


def _tacotron2_trainer_defaults() -> TrainerConfig:
    # Shen et al. sec. 3.1: Adam (0.9, 0.999, eps 1e-6), lr 1e-3, L2 weight 1e-6, batch 64 (here 32);
    # the paper's exponential decay to 1e-5 has no scheduler here. Gradient clipping at 1 as NVIDIA's.
    return TrainerConfig(max_epochs=200, batch_size=32, optimizer="adam", lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
                         weight_decay=1e-6, grad_clip=1.0, best_metric="valid/loss", best_mode="min", patience=20,
                         log_interval=20, keep_last=2)


@dataclass
class Tacotron2TaskConfig:
    """Configuration of the tacotron2 task (``speechkit-train tacotron2 --print-config`` shows every key).

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig); defaults: Adam as Shen et
            al. sec. 3.1, gradient clipping 1, early stopping on valid/loss.
        model: Tacotron 2 hyper-parameters (speechkit.models.tacotron2.Tacotron2Config).
        data: phones, log-mel features, vocabulary, speaker vectors.
        loss: loss weights.
    """

    trainer: TrainerConfig = field(default_factory=_tacotron2_trainer_defaults)
    model: Tacotron2Config = field(default_factory=Tacotron2Config)
    data: Tacotron2DataConfig = field(default_factory=Tacotron2DataConfig)
    loss: Tacotron2LossConfig = field(default_factory=Tacotron2LossConfig)

    def __post_init__(self) -> None:
        _resolve(self, strict=False)


def _resolve(cfg: Tacotron2TaskConfig, strict: bool) -> None:
    """Fill data.token_list, model.num_phones and model.speaker_dim from the data (``strict``: raise
    ConfigError when they cannot be read; otherwise leave them unset)."""
    d, m = cfg.data, cfg.model
    try:
        if not d.token_list and d.train_dir:
            d.token_list = build_token_list(read_phone_table(Path(d.train_dir) / d.phone_file).values())
        if m.speaker_dim == 0 and d.speaker_embeddings:
            m.speaker_dim = int(next(iter(read_speaker_vectors(d.speaker_embeddings).values())).shape[0])
    except (FileNotFoundError, DataError) as e:
        if strict:
            raise ConfigError(f"cannot read the phone vocabulary or speaker dimension from the data: {e}") from None
        return
    if m.num_phones == 0 and d.token_list:
        m.num_phones = len(d.token_list)
    if strict:
        if not d.token_list:
            raise ConfigError("key 'data.token_list': empty and no data.train_dir to build it from; "
                              "set data.train_dir or data.token_list")
        if m.num_phones != len(d.token_list):
            raise ConfigError(f"key 'model.num_phones': {m.num_phones}, but data.token_list has "
                              f"{len(d.token_list)} symbols; set model.num_phones=0 (from the list)")


# ----------------------------------------------------------------------------------------------
# phones


def read_phone_table(path: str | os.PathLike) -> dict[str, list[str]]:
    """``<utt> <phone> <phone> ...`` -> utt -> phones (an utterance with no phone gets ``[]``).

    Raises:
        FileNotFoundError: no such file.
        DataError: duplicate utterance (names file and line), or a reserved symbol (``<pad>``,
            ``<unk>``) used as a phone (names file, line and utterance).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no phone transcriptions (run speechkit-g2p, or set data.phone_file)")
    out: dict[str, list[str]] = {}
    for utt, value in read_table(path, allow_empty_value=True).items():
        phones = value.split()
        for p in phones:
            if p in (PAD, UNK):
                raise DataError(f"{path}: utterance '{utt}': {p!r} is reserved and cannot be a phone")
        out[utt] = phones
    return out


def build_token_list(transcripts: Any) -> list[str]:
    """``[<pad>, <unk>]`` + the C-sorted set of phones of ``transcripts`` (an iterable of phone lists)."""
    phones = {p for t in transcripts for p in t}
    return [PAD, UNK] + sorted(phones, key=lambda p: p.encode("utf-8"))


def encode_phones(phones: Sequence[str], token_list: Sequence[str] | dict[str, int], strict: bool = True,
                  what: str = "") -> torch.Tensor:
    """Phone symbols -> ``(N,)`` long ids of ``token_list``.

    Args:
        strict: a phone outside the vocabulary is an error; otherwise it becomes ``<unk>``.
        what: context for the error message (e.g. the utterance).

    Raises:
        DataError: (strict) an unknown phone, naming it and ``what``.
    """
    index = token_list if isinstance(token_list, dict) else {t: i for i, t in enumerate(token_list)}
    ids = []
    for p in phones:
        i = index.get(p)
        if i is None:
            if strict:
                raise DataError(f"{what + ': ' if what else ''}phone {p!r} is not in the model's vocabulary "
                                f"(data.token_list, {len(index)} symbols)")
            i = index[UNK]
        ids.append(i)
    return torch.tensor(ids, dtype=torch.long)


def write_symbol_table(path: str | os.PathLike, token_list: Sequence[str]) -> None:
    """Write a Kaldi symbol table ``<symbol> <id>`` (``phones.txt``), atomically."""
    with atomic_write(path) as f:
        for i, t in enumerate(token_list):
            f.write(f"{t} {i}\n")


# ----------------------------------------------------------------------------------------------
# data


class PhoneMelSet(Dataset):
    """Utterances as ``{"utt": str, "phones": (N,) long, "mels": (T, n_mels) float, "speaker": (E,) float}``
    (``speaker`` is ``(0,)`` without conditioning); :meth:`lengths` gives frames for bucketing."""

    def __init__(self, utts: list[str], phones: list[torch.Tensor], mels: list[torch.Tensor],
                 speakers: list[torch.Tensor]) -> None:
        self.utts, self.phones, self.mels, self.speakers = utts, phones, mels, speakers

    def __len__(self) -> int:
        return len(self.utts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"utt": self.utts[i], "phones": self.phones[i], "mels": self.mels[i], "speaker": self.speakers[i]}

    def lengths(self) -> list[int]:
        return [len(m) for m in self.mels]


def _warn_skipped(data_dir: Path, what: str, utts: list[str]) -> None:
    if utts:
        log.warning("%s: skipping %d utterance(s) with %s: %s%s", data_dir, len(utts), what, ", ".join(utts[:5]),
                    " ..." if len(utts) > 5 else "")


def load_phone_mel_dir(data_dir: str | os.PathLike, d: Tacotron2DataConfig, n_mels: int,
                       vectors: dict[str, np.ndarray] | None
                       ) -> tuple[list[str], list[list[str]], list[np.ndarray], list[str]]:
    """Read one data dir (module docstring, "Data"): utterances with both phones and features.

    Args:
        d: the data config (``phone_file``, ``mel_floor``, ``speaker_embeddings`` for messages).
        n_mels: expected channels.
        vectors: speaker -> vector (None: no speakers; each utterance's speaker is then '').

    Returns:
        ``(utts, phones, log_mels, speakers)``: C-sorted ids, phone lists, float32 ``(T, n_mels)``
        log-mel clipped at ``log(d.mel_floor)``, speaker ids.

    Raises:
        FileNotFoundError: no phone file, feats.scp or (with vectors) utt2spk.
        DataError: no usable utterance, a bad matrix, a speaker without a vector (names file and
            utterance / speaker). Skipped utterances are counted and warned about.
    """
    data_dir = Path(data_dir)
    table = read_phone_table(data_dir / d.phone_file)
    reader = FeatureReader(data_dir)
    if reader.conf is not None and reader.conf.get("type") != "logmel":
        log.warning("%s/feats.yaml: features of type %r; mel_to_waveform (Griffin-Lim) needs 'logmel' ones",
                    data_dir, reader.conf.get("type"))
    _warn_skipped(data_dir, "phones but no features in feats.scp", [u for u in table if u not in reader])
    _warn_skipped(data_dir, f"features but no phones in {d.phone_file}", [u for u in reader.keys() if u not in table])
    _warn_skipped(data_dir, f"an empty phone sequence in {d.phone_file}", [u for u in table if not table[u]])
    utts = [u for u in reader.keys() if u in table and table[u]]
    if not utts:
        raise DataError(f"{data_dir}: no utterance with both phones ({d.phone_file}) and features (feats.scp)")
    speakers = utterance_speakers(data_dir, utts, vectors, d.speaker_embeddings) if vectors is not None \
        else [""] * len(utts)
    scp = data_dir / "feats.scp"
    log_floor = float(np.log(d.mel_floor)) if d.mel_floor > 0 else None
    mels = []
    for utt in utts:
        m = reader[utt]
        if m.shape[1] != n_mels or m.shape[0] == 0:
            raise DataError(f"{scp}: '{utt}': a {m.shape} matrix, expected (frames >= 1, {n_mels}) (model.n_mels)")
        if not np.isfinite(m).all():
            raise DataError(f"{scp}: '{utt}': NaN or infinite values")
        mels.append(np.maximum(m, log_floor) if log_floor is not None else m)
    return utts, [table[u] for u in utts], mels, speakers


# ----------------------------------------------------------------------------------------------
# task


class Tacotron2Task(Task):
    """Train :class:`~speechkit.models.tacotron2.Tacotron2` (``speechkit-train tacotron2``; module docstring).

    Attributes:
        model: the model built by the last :meth:`build_model` (its target statistics are set
            from the training data by :meth:`build_datasets`).
        trained_speakers: speakers of the training data (written to ``EXP/speakers``).
        recompute_stats: True (default): :meth:`build_datasets` sets the model's target
            statistics from ``data.train_dir``; False keeps those already in the model (e.g. a
            subclass whose :meth:`build_model` loads pre-trained weights, as continual episodes do,
            so that every episode normalises its targets as the base model did).
    """

    name = "tacotron2"
    Config = Tacotron2TaskConfig

    def __init__(self) -> None:
        self.model: Tacotron2 | None = None
        self.trained_speakers: list[str] = []
        self._loss = Tacotron2LossConfig()
        self._r = 1
        self.recompute_stats = True

    def build_model(self, cfg: Tacotron2TaskConfig) -> Tacotron2:
        """The model of ``cfg.model`` (vocabulary and speaker size resolved from the data); logs its size.

        Raises:
            ConfigError: no vocabulary (no data.train_dir, data.token_list or model.num_phones), or
                sizes that contradict each other.
        """
        _resolve(cfg, strict=True)
        model = Tacotron2(cfg.model)
        n = count_parameters(model)
        log.info("tacotron2: %s parameters (%.2f M) for %d input symbols, speaker_dim %d, r=%d; Tacotron 2 as "
                 "usually quoted: %.1f M for 148 symbols", f"{n:,}", n / 1e6, cfg.model.num_phones,
                 cfg.model.speaker_dim, cfg.model.reduction_factor, PAPER_PARAMETERS / 1e6)
        self.model = model
        self._loss = cfg.loss
        self._r = cfg.model.reduction_factor
        return model

    def data_inputs(self, cfg: Tacotron2TaskConfig) -> dict[str, DataInput]:
        """``data.train_dir`` / ``data.valid_dir`` (the phone file, feats.scp, feats.yaml; with speaker
        conditioning utt2spk) and ``data.speaker_embeddings``."""
        d = cfg.data
        tables = (d.phone_file, "feats.scp", "feats.yaml") + (("utt2spk",) if d.speaker_embeddings else ())
        out = {f"data.{k}": DataInput(getattr(d, k), tables) for k in ("train_dir", "valid_dir") if getattr(d, k)}
        if d.speaker_embeddings:
            out["data.speaker_embeddings"] = DataInput(d.speaker_embeddings)
        return out

    def build_datasets(self, cfg: Tacotron2TaskConfig) -> tuple[PhoneMelSet, PhoneMelSet | None]:
        """Training and validation utterances (normalised targets); sets the model's target statistics.

        Raises:
            ConfigError: data.train_dir not set.
            FileNotFoundError, DataError: missing files, bad matrices, speakers without a vector.
        """
        d, m = cfg.data, cfg.model
        if not d.train_dir:
            raise ConfigError("key 'data.train_dir' is required (a dir with phones, feats.scp and utt2spk)")
        _resolve(cfg, strict=True)
        vectors = read_speaker_vectors(d.speaker_embeddings) if d.speaker_embeddings else None
        if vectors is not None:
            dim = int(next(iter(vectors.values())).shape[0])
            if dim != m.speaker_dim:
                raise ConfigError(f"key 'model.speaker_dim': {m.speaker_dim}, but {d.speaker_embeddings} holds "
                                  f"({dim},) vectors")
        elif m.speaker_dim > 0:
            raise ConfigError(f"key 'model.speaker_dim': {m.speaker_dim} needs data.speaker_embeddings")
        if self.model is None:
            raise RuntimeError("Tacotron2Task.build_datasets: call build_model first (it holds the target statistics)")
        utts, phones, mels, spk = load_phone_mel_dir(d.train_dir, d, m.n_mels, vectors)
        if self.recompute_stats:
            frames = np.concatenate(mels).astype(np.float64)
            self.model.set_stats(torch.from_numpy(frames.mean(0)), torch.from_numpy(frames.std(0)))
            del frames
        self.trained_speakers = sorted(set(spk), key=lambda s: s.encode("utf-8")) if vectors is not None else []
        train = self.make_dataset(cfg, utts, phones, mels, spk, vectors, d.train_dir)
        log.info("tacotron2: %d training utterances%s, %d frames, %d phones in the vocabulary", len(train),
                 f" of {len(self.trained_speakers)} speakers" if vectors is not None else "",
                 sum(train.lengths()), len(d.token_list))
        valid = None
        if d.valid_dir:
            v = load_phone_mel_dir(d.valid_dir, d, m.n_mels, vectors)
            valid = self.make_dataset(cfg, *v, vectors, d.valid_dir)
            log.info("tacotron2: %d validation utterances", len(valid))
        return train, valid

    def make_dataset(self, cfg: Tacotron2TaskConfig, utts: list[str], phones: list[list[str]],
                     log_mels: list[np.ndarray], speakers: list[str], vectors: dict[str, np.ndarray] | None,
                     where: str | os.PathLike = "") -> PhoneMelSet:
        """A :class:`PhoneMelSet` from in-memory utterances (e.g. an episode's data plus a replay buffer).

        Phones are encoded with ``cfg.data.token_list`` (unknown ones -> ``<unk>``, counted and
        warned about, naming ``where``); log-mel frames are normalised with the model's current
        statistics; ``speakers[i]`` is looked up in ``vectors`` (ignored when None).

        Raises:
            RuntimeError: :meth:`build_model` not called yet.
        """
        if self.model is None:
            raise RuntimeError("Tacotron2Task.make_dataset: call build_model first (it holds the target statistics)")
        index = {t: i for i, t in enumerate(cfg.data.token_list)}
        unknown = sorted({p for ph in phones for p in ph if p not in index})
        if unknown:
            n = sum(p not in index for ph in phones for p in ph)
            log.warning("%s: %d phone token(s) of %d symbol(s) outside data.token_list map to %s: %s%s",
                        where or "data", n, len(unknown), UNK, " ".join(unknown[:10]),
                        " ..." if len(unknown) > 10 else "")
        ids = [encode_phones(ph, index, strict=False) for ph in phones]
        with torch.no_grad():
            targets = [self.model.normalize(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
                       for x in log_mels]
        vecs = [torch.from_numpy(vectors[s].astype(np.float32)) if vectors is not None else torch.zeros(0)
                for s in speakers]
        return PhoneMelSet(utts, ids, targets, vecs)

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """-> ``phones (B, N)`` (0-padded), ``phone_lens (B,)``, ``mels (B, T, n_mels)`` (0-padded),
        ``mel_lens (B,)``, ``speaker (B, E)`` (``E`` may be 0), ``utts``."""
        pad = nn.utils.rnn.pad_sequence
        return {"phones": pad([it["phones"] for it in items], batch_first=True),
                "phone_lens": torch.tensor([len(it["phones"]) for it in items], dtype=torch.long),
                "mels": pad([it["mels"] for it in items], batch_first=True),
                "mel_lens": torch.tensor([len(it["mels"]) for it in items], dtype=torch.long),
                "speaker": torch.stack([it["speaker"] for it in items]),
                "utts": [it["utt"] for it in items]}

    def forward_loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Masked ``MSE(before) + MSE(after) + BCE(stop)`` (+ guided attention); see the module docstring."""
        mels, mel_lens = batch["mels"], batch["mel_lens"]
        speaker = batch["speaker"] if batch["speaker"].shape[1] > 0 else None
        out = model(batch["phones"], batch["phone_lens"], mels, speaker, mel_lens)
        mask = length_mask(mel_lens, mels.shape[1])
        frames = mask.sum()
        w = mask[:, :, None].to(mels.dtype)
        before = ((out.mel_before - mels).square() * w).sum() / (frames * mels.shape[2])
        after = ((out.mel_after - mels).square() * w).sum() / (frames * mels.shape[2])
        pos_weight = torch.tensor(self._loss.stop_pos_weight, device=mels.device)
        stop = nn.functional.binary_cross_entropy_with_logits(
            out.stop_logits, stop_targets(mel_lens, mels.shape[1]), reduction="none", pos_weight=pos_weight)
        stop = (stop * mask).sum() / frames
        loss = before + after + stop
        stats = {"mel_before": float(before.detach()), "mel_after": float(after.detach()),
                 "stop": float(stop.detach())}
        if self._loss.guided_attention_weight > 0:
            steps = -(-mel_lens // self._r)
            g = guided_attention_weights(batch["phone_lens"], steps, self._loss.guided_attention_sigma)
            n_valid = (length_mask(steps)[:, :, None] & length_mask(batch["phone_lens"])[:, None, :]).sum()
            ga = (out.alignments[:, : g.shape[1], : g.shape[2]] * g).sum() / n_valid
            loss = loss + self._loss.guided_attention_weight * ga
            stats["guided_attention"] = float(ga.detach())
        stats["loss"] = float(loss.detach())
        return loss, stats

    def on_train_end(self, model: nn.Module, cfg: Tacotron2TaskConfig, exp_dir: Path) -> None:
        """Write ``EXP/phones.txt``, ``EXP/speakers`` (conditioned models), ``EXP/feats.yaml`` (the
        training data's front end, for Griffin-Lim) and ``EXP/num_parameters``."""
        write_symbol_table(exp_dir / "phones.txt", cfg.data.token_list)
        if self.trained_speakers:
            write_speakers(exp_dir / "speakers", self.trained_speakers)
        copy_feats_yaml(cfg.data.train_dir, exp_dir)
        with atomic_write(exp_dir / "num_parameters") as f:
            f.write(f"{count_parameters(model)}\n")


@torch.no_grad()
def synthesize(model: Tacotron2, token_list: Sequence[str], phones: Sequence[str], speaker: np.ndarray | None = None,
               max_frames: int = 1000, seed: int | None = 0) -> np.ndarray:
    """Log-mel frames of one phone sequence: encode, :meth:`Tacotron2.inference`, denormalise.

    Args:
        model: a trained model (put in eval mode here).
        token_list: its vocabulary (``cfg.data.token_list`` of :func:`speechkit.tasks.load_model`).
        phones: phone symbols.
        speaker: the ``(E,)`` speaker vector, or None for an unconditioned model.
        max_frames: frame limit (a warning is logged when the stop token never fired).
        seed: seeds torch's RNG for the prenet dropout (None = leave it alone).

    Returns:
        float32 ``(T, n_mels)`` natural-log mel energies (input of
        :func:`~speechkit.decode.griffin_lim.mel_to_waveform`).

    Raises:
        DataError: a phone outside ``token_list`` or an empty sequence.
    """
    if not phones:
        raise DataError("synthesize: empty phone sequence")
    ids = encode_phones(phones, token_list, strict=True)
    device = next(model.parameters()).device
    model.eval()
    if seed is not None:
        torch.manual_seed(seed)
    spk = None if speaker is None else torch.tensor(np.asarray(speaker, np.float32), device=device)[None]
    out = model.inference(ids[None].to(device), spk, max_frames=max_frames)
    if not bool(out.stopped[0]):
        log.warning("synthesize: the stop token did not fire within %d frames; output cut there", max_frames)
    return model.denormalize(out.mel[0, : int(out.lengths[0])]).cpu().numpy().astype(np.float32)
