"""The ``salad`` and ``musa_rnn`` tasks: frame-level acoustic models for statistical parametric TTS.

Pascual, Bonafonte & Serrà, "Self-Attention Linguistic-Acoustic Decoder", IberSPEECH 2018 (authors'
code: santi-pdp/musa_tts). Both tasks map frame-level linguistic label vectors to WORLD vocoder
features with forced durations; they share all code here and differ in the model
(:mod:`speechkit.models.salad`, :mod:`speechkit.models.musa_rnn`) and the optimiser defaults.

Data
    ``data.train_dir`` and ``data.valid_dir``: directories holding ``labels.scp`` (float32
    ``(T, D)`` label vectors, ``speechkit-make-labels``) and ``feats.scp`` (float32 ``(T, 43)`` WORLD
    features ``[mcep 40, c0 first | lf0 | vuv | bap]``, ``utils/make_feats.sh --config conf/world.yaml``)
    of the same utterances, plus ``feats.yaml`` (the WORLD config; its ``mcep_dim`` locates the
    streams, else the 43-dim layout above is assumed). An utterance in only one of the two scp
    files is skipped (counted, warned with the first ids); a label sequence whose frame count
    differs from its features is a :class:`DataError` naming the utterance. ``model.input_dim`` = 0
    is read from the first matrix of ``train_dir/labels.scp`` when the config is loaded.
Speaker conditioning (Hemati & Borth 2021, sec. 2.1)
    With ``data.speaker_embeddings`` (a ``spk_embeddings.scp`` of ``speechkit-embed-speakers``:
    one ``(E,)`` vector per speaker, the mean GE2E embedding) every label frame of an utterance
    gets its speaker's vector appended, speakers taken from ``utt2spk`` of the data dir: the
    model's input is ``[labels (D) | speaker vector (E)]`` and ``model.input_dim = D + E`` (read
    at config load). The vectors are looked up per frame when a window is built, so the stateful
    streams, which cross utterance and speaker boundaries, carry each frame's own speaker without
    storing ``E`` extra columns per training frame. A speaker of ``utt2spk`` missing from the
    scp, or an utterance missing from ``utt2spk``, is a :class:`DataError` naming it.
    ``EXP/speakers`` lists the speakers the model was trained on (``speechkit-tts-synthesize``
    refuses any other).
Normalisation
    Targets are min-max normalised per dimension to [0, 1] on the training frames; the statistics
    are buffers of the model (``model.normalizer``), so every checkpoint carries them, and
    ``EXP/output_stats.npz`` (``minimum``, ``maximum``) is written at the end of training.
    Loss: mean squared error on the normalised targets.
Stateful training (sec. 3.3)
    All training utterances are concatenated in a fixed (C-sorted) order, the same every epoch,
    and the sequence is cut into ``data.num_streams`` contiguous streams of equal length
    (``L // num_streams`` frames; the last ``L mod num_streams`` frames are dropped). Batch ``k``
    holds window ``k`` (frames ``[k W, (k+1) W)``, ``W = data.window``; the last window may be
    shorter) of every stream, so each batch continues the previous one: the MUSA-RNN's LSTM states
    are carried over (detached: truncated BPTT) and SALAD's positions start at ``k W``. The
    carried states restart at zero at the start of every epoch, and also when the trainer resumes
    a run in the middle of an epoch (the states are not in the checkpoint; the first resumed window
    then starts from zero state, a small difference from an uninterrupted run for the RNN only).
    ``trainer.batch_size`` is not used: a batch is ``num_streams`` windows.
Validation
    Each validation utterance runs through the model alone (RNN from zero state, SALAD from
    position 0), is denormalised and scored: ``valid/mcd`` = (10 sqrt(2) / ln 10) x mean over frames
    of ``||mcep[1:] - mcep_hat[1:]||_2`` in dB (c0 excluded), ``valid/f0_rmse`` in Hz over frames
    voiced in both (predicted V/UV > 0.5; F0 = exp(lf0)), ``valid/vuv_acc`` in % over all frames
    (means over all frames of the set), ``valid/uv_recall`` (% of the unvoiced reference frames
    predicted unvoiced), and ``valid/loss`` (normalised MSE). The configs select
    ``best.pt`` and stop early on ``valid/mcd``.
Files (written at the end of training)
    ``EXP/output_stats.npz``, ``EXP/feats.yaml`` (the training data's WORLD config, for
    ``speechkit-tts-synthesize``), ``EXP/num_parameters``.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from speechkit.data.expdir import copy_feats_yaml
from speechkit.data.fingerprint import DataInput
from speechkit.data.speakers import read_speaker_dim, read_speaker_vectors, utterance_speakers, write_speakers
from speechkit.features.io import ScpReader
from speechkit.features.world import feature_streams, stream_layout
from speechkit.models.musa_rnn import MusaRnn, MusaRnnConfig, detach_state
from speechkit.models.salad import OutputNormalizer, Salad, SaladConfig, count_parameters, format_parameters
from speechkit.scoring.mcd import frame_mcd_db
from speechkit.train.task import Task
from speechkit.train.trainer import TrainerConfig
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import FieldError
from speechkit.utils.fileio import DataError, atomic_write

__all__ = ["AcousticDataConfig", "SaladTaskConfig", "MusaRnnTaskConfig", "AcousticTask", "SaladTask", "MusaRnnTask",
           "StreamWindows", "UtteranceSet", "load_pairs", "read_label_dim", "AcousticScores", "PAPER_PARAMETERS",
           "append_speaker", "SpeakerTable", "predict_features"]

log = logging.getLogger(__name__)


#: Table 2 of the paper, "#Params" (the same for both speakers): Small RNN, Small SALAD, Big RNN, Big SALAD.
PAPER_PARAMETERS = {"musa_rnn_small": 1.17e6, "salad_small": 1.04e6, "musa_rnn_big": 9.85e6, "salad_big": 9.66e6}


# ----------------------------------------------------------------------------------------------
# configs


@dataclass
class AcousticDataConfig:
    """Training / validation data and the stateful batching of sec. 3.3.

    Attributes:
        train_dir: dir with labels.scp and feats.scp (and feats.yaml) of the training utterances.
        valid_dir: the same for validation ('' = none; then trainer.best_metric must be train/...).
        num_streams: streams the concatenated training sequence is cut into (= windows per batch; paper: 32).
        window: frames per training window (paper: 120, i.e. 0.6 s at 5 ms).
        speaker_embeddings: '' (no speaker conditioning) or a spk_embeddings.scp (speaker -> (E,)
            vector, speechkit-embed-speakers); each label frame gets its speaker's vector (utt2spk
            of train_dir / valid_dir) appended, and model.input_dim counts those E dims too.
    """

    train_dir: str = ""
    valid_dir: str = ""
    num_streams: int = 32
    window: int = 120
    speaker_embeddings: str = ""

    def __post_init__(self) -> None:
        for key in ("num_streams", "window"):
            v = getattr(self, key)
            if not isinstance(v, int) or v < 1:
                raise FieldError(key, f"must be an integer >= 1 (got {v!r})")


def _salad_trainer_defaults() -> TrainerConfig:
    # Noam (Vaswani et al. 2017, eq. 3; SALAD paper sec. 3.3 with d = H, w = 4000): lr = d^-0.5 min(s^-0.5, s w^-1.5),
    # Adam(0.9, 0.98, 1e-9).
    return TrainerConfig(max_epochs=300, patience=20, optimizer="adam", lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                         scheduler="noam", warmup_steps=4000, model_dim=128, best_metric="valid/mcd",
                         best_mode="min", log_interval=50, keep_last=2)


def _rnn_trainer_defaults() -> TrainerConfig:
    # Adam with PyTorch's defaults.
    return TrainerConfig(max_epochs=300, patience=20, optimizer="adam", lr=1e-3, best_metric="valid/mcd",
                         best_mode="min", log_interval=50, keep_last=2)


def _resolve_input_dim(model_cfg: Any, data: AcousticDataConfig) -> None:
    if model_cfg.input_dim == 0 and data.train_dir:
        dim = read_label_dim(data.train_dir, strict=False)
        if dim is not None and data.speaker_embeddings:
            spk_dim = read_speaker_dim(data.speaker_embeddings, strict=False)
            dim = None if spk_dim is None else dim + spk_dim
        if dim is not None:
            model_cfg.input_dim = dim


@dataclass
class SaladTaskConfig:
    """Configuration of the salad task (``speechkit-train salad --print-config`` shows every key).

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig); defaults: Noam schedule with
            model_dim = model.embed_dim, at most 300 epochs, early stopping on valid/mcd (patience 20).
        model: SALAD hyper-parameters (speechkit.models.salad.SaladConfig).
        data: training / validation data and stateful batching.
    """

    trainer: TrainerConfig = field(default_factory=_salad_trainer_defaults)
    model: SaladConfig = field(default_factory=SaladConfig)
    data: AcousticDataConfig = field(default_factory=AcousticDataConfig)

    def __post_init__(self) -> None:
        _resolve_input_dim(self.model, self.data)


@dataclass
class MusaRnnTaskConfig:
    """Configuration of the musa_rnn task (``speechkit-train musa_rnn --print-config`` shows every key).

    Attributes:
        trainer: training loop settings (speechkit.train.TrainerConfig); defaults: Adam with PyTorch's
            defaults, at most 300 epochs, early stopping on valid/mcd (patience 20).
        model: MUSA-RNN hyper-parameters (speechkit.models.musa_rnn.MusaRnnConfig).
        data: training / validation data and stateful batching.
    """

    trainer: TrainerConfig = field(default_factory=_rnn_trainer_defaults)
    model: MusaRnnConfig = field(default_factory=MusaRnnConfig)
    data: AcousticDataConfig = field(default_factory=AcousticDataConfig)

    def __post_init__(self) -> None:
        _resolve_input_dim(self.model, self.data)


# ----------------------------------------------------------------------------------------------
# data


def read_label_dim(data_dir: str | os.PathLike, strict: bool = True) -> int | None:
    """The label dimension ``D``: columns of the first matrix of ``data_dir/labels.scp``.

    Args:
        strict: raise on a missing or unreadable file; otherwise return None.

    Raises:
        FileNotFoundError: no labels.scp (strict).
        DataError: empty or unreadable (strict); names the file and utterance.
    """
    scp = Path(data_dir) / "labels.scp"
    try:
        labels = ScpReader(scp, what="label vectors", missing="no label vectors (run speechkit-make-labels)")
        if not labels.table:
            raise DataError(f"{scp}: empty")
        return int(labels.matrix(next(iter(labels.table))).shape[1])  # the first line's
    except (FileNotFoundError, DataError):
        if strict:
            raise
        return None


def append_speaker(labels: np.ndarray | torch.Tensor, vector: np.ndarray | torch.Tensor):
    """``[labels | vector]`` on every frame: ``(T, D)`` + ``(E,)`` -> ``(T, D + E)`` (same type as labels)."""
    if isinstance(labels, torch.Tensor):
        v = torch.as_tensor(vector, dtype=labels.dtype, device=labels.device)
        return torch.cat([labels, v.expand(labels.shape[0], -1)], dim=1)
    v = np.asarray(vector, dtype=labels.dtype)
    return np.concatenate([labels, np.broadcast_to(v, (labels.shape[0], v.shape[0]))], axis=1)


def predict_features(model: nn.Module, labels: np.ndarray, vector: np.ndarray | None = None,
                     vuv_index: int | None = None) -> np.ndarray:
    """One utterance through a trained acoustic model, as synthesis runs it.

    SALAD from position 0, the MUSA-RNN from zero state, the whole utterance at once
    (Pascual et al. 2018); the prediction is denormalised with the model's min-max statistics.

    Args:
        model: a SALAD / MUSA-RNN model (``infer`` and ``normalizer``), in eval mode.
        labels: float32 ``(T, D)`` label vectors (without the speaker vector).
        vector: ``(E,)`` speaker vector appended to every frame (a conditioned model), or None.
        vuv_index: column of the V/UV flag to threshold to 0/1 at 0.5 (None: left continuous).

    Returns:
        float32 ``(T, O)`` raw WORLD features, one frame per label frame.
    """
    x = append_speaker(labels, vector) if vector is not None else labels
    dev = next(model.parameters()).device
    with torch.no_grad():
        y = model.normalizer.denormalize(model.infer(torch.from_numpy(np.ascontiguousarray(x))[None].to(dev)))
    y = y[0].cpu().numpy()
    if vuv_index is not None:
        y[:, vuv_index] = (y[:, vuv_index] > 0.5).astype(y.dtype)
    return y


def load_pairs(data_dir: str | os.PathLike, input_dim: int | None = None, output_dim: int | None = None
               ) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """Load the (labels, features) pairs of a data dir, checked.

    Args:
        data_dir: dir with ``labels.scp`` and ``feats.scp``.
        input_dim, output_dim: expected label / feature dimensions (None = not checked).

    Returns:
        ``(utts, labels, feats)``: C-sorted ids of the utterances in both scp files, float32
        ``(T, D)`` and ``(T, O)`` matrices with equal ``T``.

    Raises:
        FileNotFoundError: a missing scp file.
        DataError: no utterance in common; an unreadable matrix; a frame-count mismatch between an
            utterance's labels and features; a wrong dimension; NaN/Inf. Names file and utterance.
    """
    data_dir = Path(data_dir)
    lab_scp, feat_scp = data_dir / "labels.scp", data_dir / "feats.scp"
    for scp, how in ((lab_scp, "speechkit-make-labels"), (feat_scp, "utils/make_feats.sh --config conf/world.yaml")):
        if not scp.is_file():
            raise FileNotFoundError(f"{scp}: not found (run {how})")
    labels_of, feats_of = ScpReader(lab_scp, what="label vectors"), ScpReader(feat_scp, what="features")
    lab_table, feat_table = labels_of.table, feats_of.table
    utts = sorted((u for u in lab_table if u in feat_table), key=lambda u: u.encode("utf-8"))
    for what, only in (("labels but no features", [u for u in lab_table if u not in feat_table]),
                       ("features but no labels", [u for u in feat_table if u not in lab_table])):
        if only:
            log.warning("%s: skipping %d utterance(s) with %s: %s%s", data_dir, len(only), what,
                        ", ".join(only[:5]), " ..." if len(only) > 5 else "")
    if not utts:
        raise DataError(f"{lab_scp} and {feat_scp} have no utterance in common")
    labels, feats = [], []
    for utt in utts:
        x = labels_of.matrix(utt, np.float32, copy=True, non_empty=True, dim=input_dim, dim_of="model.input_dim",
                             finite=True)
        y = feats_of.matrix(utt, np.float32, copy=True, non_empty=True, dim=output_dim, dim_of="model.output_dim",
                            finite=True)
        if x.shape[0] != y.shape[0]:
            raise DataError(f"{data_dir}: utterance '{utt}': {x.shape[0]} label frames in labels.scp but "
                            f"{y.shape[0]} feature frames in feats.scp (labels must have the WORLD frame count "
                            f"of utt2num_frames)")
        labels.append(x)
        feats.append(y)
    return utts, labels, feats


@dataclass
class SpeakerTable:
    """Speaker vectors of a frame sequence: ``speakers[index[t]]`` is frame ``t``'s speaker.

    Attributes:
        speakers: speaker ids, in the order of ``vectors``' rows.
        vectors: float32 ``(N, E)``.
        index: long ``(L,)`` row of ``vectors`` for each frame.
    """

    speakers: list[str]
    vectors: torch.Tensor
    index: torch.Tensor

    @classmethod
    def build(cls, utt_speakers: list[str], lengths: list[int], vectors: dict[str, np.ndarray]) -> "SpeakerTable":
        """From each utterance's speaker and frame count (concatenation order) and speaker -> ``(E,)``."""
        speakers = sorted(set(utt_speakers), key=lambda s: s.encode("utf-8"))
        row = {s: i for i, s in enumerate(speakers)}
        table = torch.from_numpy(np.stack([vectors[s] for s in speakers]).astype(np.float32))
        index = torch.from_numpy(np.repeat(np.array([row[s] for s in utt_speakers], np.int64), lengths))
        return cls(speakers, table, index)


class StreamWindows(Dataset):
    """Windows of the stateful training streams (sec. 3.3); see the module docstring.

    Item ``i`` is window ``k = i // S`` of stream ``s = i % S``:
    ``{"labels": (w, D), "feats": (w, O), "window": k, "stream": s}`` with ``w = W`` except maybe
    for the last window. :meth:`batches` groups the ``S`` streams of each window, in window order.
    With a :class:`SpeakerTable`, ``labels`` is ``(w, D + E)``: each frame's speaker vector appended.

    Args:
        labels: ``(L, D)`` concatenated label vectors.
        feats: ``(L, O)`` concatenated (normalised) targets.
        num_streams: ``S``.
        window: ``W`` frames.
        speakers: optional speaker of every frame (``speakers.index`` of length ``L``).

    Raises:
        DataError: fewer than ``S`` frames in all.
    """

    def __init__(self, labels: torch.Tensor, feats: torch.Tensor, num_streams: int, window: int,
                 speakers: SpeakerTable | None = None) -> None:
        total = labels.shape[0]
        stream_len = total // num_streams
        if stream_len < 1:
            raise DataError(f"only {total} training frames: fewer than data.num_streams={num_streams}")
        used = stream_len * num_streams
        self.labels = labels[:used].reshape(num_streams, stream_len, -1)
        self.feats = feats[:used].reshape(num_streams, stream_len, -1)
        self.speaker_vectors = speakers.vectors if speakers is not None else None
        self.speaker_index = speakers.index[:used].reshape(num_streams, stream_len) if speakers is not None else None
        self.num_streams, self.window, self.stream_len = num_streams, window, stream_len
        self.num_windows = -(-stream_len // window)
        self.dropped_frames = total - used

    def __len__(self) -> int:
        return self.num_windows * self.num_streams

    def __getitem__(self, i: int) -> dict[str, Any]:
        k, s = divmod(int(i), self.num_streams)
        sl = slice(k * self.window, min((k + 1) * self.window, self.stream_len))
        labels = self.labels[s, sl]
        if self.speaker_vectors is not None:
            labels = torch.cat([labels, self.speaker_vectors[self.speaker_index[s, sl]]], dim=1)
        return {"labels": labels, "feats": self.feats[s, sl], "window": k, "stream": s}

    def batches(self) -> list[list[int]]:
        """One batch per window, in order: ``[[k S, ..., k S + S - 1] for k in range(K)]``."""
        S = self.num_streams
        return [list(range(k * S, (k + 1) * S)) for k in range(self.num_windows)]


class UtteranceSet(Dataset):
    """Whole utterances; item ``i`` is ``{"utt": str, "labels": (T, D), "feats": (T, O)}`` (raw targets)."""

    def __init__(self, utts: list[str], labels: list[torch.Tensor], feats: list[torch.Tensor]) -> None:
        self.utts, self.labels, self.feats = utts, labels, feats

    def __len__(self) -> int:
        return len(self.utts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"utt": self.utts[i], "labels": self.labels[i], "feats": self.feats[i]}

    def lengths(self) -> list[int]:
        return [len(x) for x in self.labels]


# ----------------------------------------------------------------------------------------------
# scores


class AcousticScores:
    """Accumulates MCD, F0 RMSE and V/UV accuracy of denormalised predictions over frames.

    Args:
        streams: column slices of the features (:func:`speechkit.features.world.stream_layout`).
    """

    def __init__(self, streams: dict[str, slice]) -> None:
        self.streams = streams
        self.frames = 0
        self.mcd_sum = 0.0
        self.f0_sq_sum = 0.0
        self.f0_frames = 0
        self.vuv_correct = 0
        self.ref_unvoiced = 0
        self.unvoiced_both = 0

    def add(self, pred: np.ndarray, ref: np.ndarray) -> None:
        """Add one utterance: ``pred``, ``ref`` ``(T, O)`` denormalised features."""
        s = self.streams
        self.mcd_sum += float(frame_mcd_db(ref[:, s["mcep"]], pred[:, s["mcep"]], include_c0=False).sum())
        self.frames += len(ref)
        pv, rv = pred[:, s["vuv"]][:, 0] > 0.5, ref[:, s["vuv"]][:, 0] > 0.5
        self.vuv_correct += int((pv == rv).sum())
        self.ref_unvoiced += int((~rv).sum())
        self.unvoiced_both += int((~rv & ~pv).sum())
        both = pv & rv
        if both.any():
            f0p = np.exp(pred[both, s["lf0"]][:, 0].astype(np.float64))
            f0r = np.exp(ref[both, s["lf0"]][:, 0].astype(np.float64))
            self.f0_sq_sum += float(((f0p - f0r) ** 2).sum())
            self.f0_frames += int(both.sum())

    def result(self) -> dict[str, float]:
        """``{"mcd": dB, "f0_rmse": Hz (absent if no frame is voiced in both), "vuv_acc": %,
        "uv_recall": % of the reference's unvoiced frames predicted unvoiced (absent if there is none)}``."""
        if self.frames == 0:
            return {}
        out = {"mcd": self.mcd_sum / self.frames, "vuv_acc": 100.0 * self.vuv_correct / self.frames}
        if self.ref_unvoiced:
            out["uv_recall"] = 100.0 * self.unvoiced_both / self.ref_unvoiced
        if self.f0_frames:
            out["f0_rmse"] = math.sqrt(self.f0_sq_sum / self.f0_frames)
        return out


# ----------------------------------------------------------------------------------------------
# tasks


class AcousticTask(Task):
    """Shared code of :class:`SaladTask` and :class:`MusaRnnTask` (see the module docstring).

    Attributes:
        model: the model built by the last :meth:`build_model` (its normalisation buffers are set
            from the training data by :meth:`build_datasets`).
    """

    model_key = ""  # "salad" | "musa_rnn", for PAPER_PARAMETERS
    carries_state = False  # whether the model has a recurrent state carried across windows

    def __init__(self) -> None:
        self.model: nn.Module | None = None
        self._state: Any = None
        self._next_window = 0
        self._window = 120
        self._streams = stream_layout()
        #: speakers of the training data (conditioned models), written to EXP/speakers at the end.
        self.trained_speakers: list[str] = []

    # -- model --------------------------------------------------------------------------------

    def _make_model(self, cfg: Any) -> nn.Module:
        raise NotImplementedError

    def build_model(self, cfg: Any) -> nn.Module:
        """The model of ``cfg.model``; logs its parameter count next to the paper's Table 2.

        Raises:
            ConfigError: ``model.input_dim`` is 0 and cannot be read from data.train_dir/labels.scp.
        """
        if cfg.model.input_dim == 0:
            if not cfg.data.train_dir:
                raise ConfigError("key 'model.input_dim': 0 (read from the data) needs data.train_dir; "
                                  "set data.train_dir or model.input_dim")
            try:
                dim = read_label_dim(cfg.data.train_dir)
                if cfg.data.speaker_embeddings:
                    dim += read_speaker_dim(cfg.data.speaker_embeddings)
            except (FileNotFoundError, DataError) as e:
                raise ConfigError(f"key 'model.input_dim': 0 (read from the data), but {e}") from None
            cfg.model.input_dim = dim
        model = self._make_model(cfg)
        n = count_parameters(model)
        size = "big" if cfg.model.embed_dim >= 512 else "small"
        paper = PAPER_PARAMETERS.get(f"{self.model_key}_{size}")
        log.info("%s: %s parameters (%s) for %d label dims%s", self.name or self.model_key, f"{n:,}",
                 format_parameters(n), cfg.model.input_dim,
                 f"; paper Table 2, {size}: {format_parameters(int(paper))} for 364 inputs" if paper else "")
        self.model = model
        self._window = cfg.data.window
        return model

    # -- data ---------------------------------------------------------------------------------

    def data_inputs(self, cfg: Any) -> dict[str, DataInput]:
        """``data.train_dir`` (labels.scp, feats.scp, feats.yaml), ``data.valid_dir`` (labels.scp,
        feats.scp), with speaker conditioning their utt2spk and ``data.speaker_embeddings``."""
        d = cfg.data
        spk = ("utt2spk",) if d.speaker_embeddings else ()
        out = {}
        if d.train_dir:
            out["data.train_dir"] = DataInput(d.train_dir, ("labels.scp", "feats.scp", "feats.yaml") + spk)
        if d.valid_dir:
            out["data.valid_dir"] = DataInput(d.valid_dir, ("labels.scp", "feats.scp") + spk)
        if d.speaker_embeddings:
            out["data.speaker_embeddings"] = DataInput(d.speaker_embeddings)
        return out

    def build_datasets(self, cfg: Any) -> tuple[StreamWindows, UtteranceSet | None]:
        """Training windows (normalised targets) and whole validation utterances (raw targets).

        Also sets the normalisation statistics of the model built by :meth:`build_model`.
        With ``data.speaker_embeddings``, training windows and validation labels carry each
        frame's speaker vector (module docstring).

        Raises:
            ConfigError: data.train_dir not set.
            FileNotFoundError, DataError: see :func:`load_pairs` and
                :func:`speechkit.data.speakers.utterance_speakers`.
        """
        d, m = cfg.data, cfg.model
        if not d.train_dir:
            raise ConfigError("key 'data.train_dir' is required (a dir with labels.scp and feats.scp)")
        self._streams = feature_streams(d.train_dir)  # also checks feats.yaml
        self._window = d.window
        vectors = read_speaker_vectors(d.speaker_embeddings) if d.speaker_embeddings else None
        label_dim = self.label_dim(m.input_dim, vectors)
        utts, labels, feats = load_pairs(d.train_dir, label_dim, m.output_dim)
        speakers = None
        if vectors is not None:
            spk = utterance_speakers(d.train_dir, utts, vectors, d.speaker_embeddings)
            speakers = SpeakerTable.build(spk, [len(a) for a in labels], vectors)
            self.trained_speakers = list(speakers.speakers)
        x = torch.from_numpy(np.concatenate(labels))
        y = torch.from_numpy(np.concatenate(feats))
        del labels, feats
        lo, hi = y.min(dim=0).values, y.max(dim=0).values
        normalizer = self.model.normalizer if self.model is not None else OutputNormalizer(m.output_dim)
        normalizer.set_stats(lo, hi)
        train = StreamWindows(x, normalizer.normalize(y), d.num_streams, d.window, speakers)
        log.info("%s: %d training utterances%s, %d frames (%.1f min) -> %d streams x %d frames, %d windows of %d "
                 "(%d frames dropped)", self.name, len(utts),
                 f" of {len(self.trained_speakers)} speakers" if speakers is not None else "", len(x),
                 len(x) * 0.005 / 60, d.num_streams, train.stream_len, train.num_windows, d.window,
                 train.dropped_frames)
        valid = None
        if d.valid_dir:
            v_utts, v_labels, v_feats = load_pairs(d.valid_dir, label_dim, m.output_dim)
            if vectors is not None:
                v_spk = utterance_speakers(d.valid_dir, v_utts, vectors, d.speaker_embeddings)
                v_labels = [append_speaker(a, vectors[s]) for a, s in zip(v_labels, v_spk)]
            valid = UtteranceSet(v_utts, [torch.from_numpy(a) for a in v_labels],
                                 [torch.from_numpy(a) for a in v_feats])
            log.info("%s: %d validation utterances", self.name, len(valid))
        return train, valid

    @staticmethod
    def label_dim(input_dim: int, vectors: dict[str, np.ndarray] | None) -> int:
        """The label columns of ``model.input_dim`` (minus the speaker vector's ``E``).

        Raises:
            ConfigError: ``input_dim`` not larger than ``E``.
        """
        if vectors is None:
            return input_dim
        spk_dim = int(next(iter(vectors.values())).shape[0])
        if input_dim <= spk_dim:
            raise ConfigError(f"key 'model.input_dim': {input_dim} leaves no label dims next to the "
                              f"{spk_dim}-dim speaker vectors of data.speaker_embeddings")
        return input_dim - spk_dim

    def make_batches(self, dataset: Dataset, cfg: Any, epoch: int, seed: int) -> list[list[int]]:
        """Window order of sec. 3.3: batch ``k`` = window ``k`` of every stream (the same every epoch)."""
        if isinstance(dataset, StreamWindows):
            return dataset.batches()
        return super().make_batches(dataset, cfg, epoch, seed)

    def make_valid_batches(self, dataset: Dataset, cfg: Any) -> list[list[int]]:
        """One utterance per batch (each runs from zero state / position 0)."""
        return [[i] for i in range(len(dataset))]

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Training windows -> ``labels (S, w, D)``, ``feats (S, w, O)``, ``window`` k;
        utterances -> padded ``labels (B, T, D)``, ``feats (B, T, O)``, ``lengths (B,)``, ``utts``.

        Raises:
            ValueError: windows of different positions in one batch.
        """
        if "window" in items[0]:
            k = items[0]["window"]
            if any(it["window"] != k for it in items):
                raise ValueError("a stateful training batch must hold one window position of every stream")
            return {"labels": torch.stack([it["labels"] for it in items]),
                    "feats": torch.stack([it["feats"] for it in items]), "window": k}
        return {"labels": nn.utils.rnn.pad_sequence([it["labels"] for it in items], batch_first=True),
                "feats": nn.utils.rnn.pad_sequence([it["feats"] for it in items], batch_first=True),
                "lengths": torch.tensor([len(it["labels"]) for it in items], dtype=torch.long),
                "utts": [it["utt"] for it in items]}

    # -- training -----------------------------------------------------------------------------

    def reset_state(self) -> None:
        """Forget the carried stream state (next window starts from zero state)."""
        self._state, self._next_window = None, 0

    def _forward_window(self, model: nn.Module, labels: torch.Tensor, window: int, window_size: int
                        ) -> torch.Tensor:
        raise NotImplementedError

    def forward_loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE of the normalised targets on one window of every stream, continuing the previous window.

        The carried state restarts at zero whenever the window is not the successor of the last
        one seen (the first window of an epoch, or the first after resuming mid-epoch).
        """
        k = int(batch["window"])
        if k != self._next_window:
            if k > 0 and self.carries_state:
                log.info("%s: training resumes at window %d of the epoch without the carried stream state; "
                         "it restarts from zero", self.name, k)
            self._state = None
        pred = self._forward_window(model, batch["labels"], k, self._window)
        self._next_window = k + 1
        loss = nn.functional.mse_loss(pred, batch["feats"])
        return loss, {"loss": float(loss.detach())}

    @torch.no_grad()
    def validate(self, model: nn.Module, loader: Iterable) -> dict[str, float]:
        """Each utterance alone from zero state / position 0: loss, mcd, f0_rmse, vuv_acc (module docstring)."""
        scores = AcousticScores(self._streams)
        se, n = 0.0, 0
        for batch in loader:
            pred = model.infer(batch["labels"])
            for b, length in enumerate(batch["lengths"].tolist()):
                p, ref = pred[b, :length], batch["feats"][b, :length]
                se += float(((p - model.normalizer.normalize(ref)) ** 2).sum())
                n += p.numel()
                scores.add(model.normalizer.denormalize(p).cpu().numpy(), ref.cpu().numpy())
        if n == 0:
            return {}
        return {"loss": se / n, **scores.result()}

    def on_train_end(self, model: nn.Module, cfg: Any, exp_dir: Path) -> None:
        """Write ``EXP/output_stats.npz``, ``EXP/feats.yaml``, ``EXP/num_parameters`` and, for a
        speaker-conditioned model, ``EXP/speakers`` (:attr:`trained_speakers`)."""
        if cfg.data.speaker_embeddings and self.trained_speakers:
            write_speakers(exp_dir / "speakers", self.trained_speakers)
        norm = model.normalizer
        lo = norm.minimum.cpu().numpy()
        with atomic_write(exp_dir / "output_stats.npz", "wb") as f:
            np.savez(f, minimum=lo, maximum=lo + norm.range.cpu().numpy())
        copy_feats_yaml(cfg.data.train_dir, exp_dir)
        with atomic_write(exp_dir / "num_parameters") as f:
            f.write(f"{count_parameters(model)}\n")


class SaladTask(AcousticTask):
    """Train :class:`~speechkit.models.salad.Salad` (``speechkit-train salad``)."""

    name = "salad"
    model_key = "salad"
    Config = SaladTaskConfig

    def _make_model(self, cfg: SaladTaskConfig) -> Salad:
        tc = cfg.trainer
        if tc.scheduler == "noam" and tc.model_dim not in (0, cfg.model.embed_dim):
            log.warning("trainer.model_dim=%d differs from model.embed_dim=%d: the Noam schedule uses "
                        "model_dim^-0.5", tc.model_dim, cfg.model.embed_dim)
        return Salad(cfg.model)

    def _forward_window(self, model: nn.Module, labels: torch.Tensor, window: int, window_size: int) -> torch.Tensor:
        # Window k of a stream starts at frame k * W of that stream: the position offset carried.
        return model(labels, offset=window * window_size)


class MusaRnnTask(AcousticTask):
    """Train :class:`~speechkit.models.musa_rnn.MusaRnn` (``speechkit-train musa_rnn``)."""

    name = "musa_rnn"
    model_key = "musa_rnn"
    carries_state = True
    Config = MusaRnnTaskConfig

    def _make_model(self, cfg: MusaRnnTaskConfig) -> MusaRnn:
        return MusaRnn(cfg.model)

    def _forward_window(self, model: nn.Module, labels: torch.Tensor, window: int, window_size: int) -> torch.Tensor:
        pred, state = model(labels, self._state)
        self._state = detach_state(state)
        return pred
