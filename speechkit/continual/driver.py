"""Continual speaker adaptation of a speaker-conditioned acoustic model, one speaker per episode.

Hemati & Borth (2021), "Continual Speaker Adaptation for Text-to-Speech Synthesis", Algorithm 1:
a model pre-trained on some speakers (``theta_init``: an experiment dir of ``speechkit-train salad``,
``musa_rnn`` or ``tacotron2`` trained with ``data.speaker_embeddings``) is adapted to the continual speakers one per episode, in
row ``order`` of their Williams design (:func:`~speechkit.train.continual_strategies.design_order`; ``order`` 0:
a permutation drawn from ``seed``; :class:`~speechkit.train.continual_strategies.EpisodePlan`), with one of the
strategies of :mod:`speechkit.train.continual_strategies` (``jt jt_cumulative sa ewc er er_kd er_br``). Episode ``t``:

1. starts from the best weights of episode ``t-1`` (``theta_init`` for ``t = 1``); ``jt`` (the
   paper's joint training, sec. 3.1, eq. 3: one training from ``theta_init`` on all continual
   speakers) from ``theta_init`` at every episode: its episode ``t`` is the model trained jointly
   on the continual speakers seen up to ``t``, evaluated at that episode boundary like the others
   (its last episode is the paper's JT);
2. ``ewc``: computes the diagonal Fisher (sec. 3.2.2, eq. 5) on the *previous* episode's training
   data at those weights (episode 1: on ``pretrain_dir`` if given, else no penalty) and adds
   ``(lambda/2) sum_i F_i (theta_i - theta*_i)^2`` to every training loss (eq. 5 is printed
   without the square; the standard form of Kirkpatrick et al. is kept, see
   :class:`~speechkit.train.continual_strategies.EWC`);
3. trains a *fresh* :class:`~speechkit.train.Trainer` (new optimiser and schedule: the optimiser
   state is reset at every episode) on the episode's data -- ``jt``, ``jt_cumulative``: every
   speaker seen so far; ``sa``/``ewc``: the new speaker; ``er``: the new speaker + ``N_B`` buffered
   utterances of every
   earlier speaker, shuffled together; ``er_kd`` (the paper's ER-KD, sec. 3.2.3): the same with
   the buffer's targets the features the model produced at the end of that speaker's episode;
   ``er_br`` (ER-BR, buffer replication, sec. 3.2.4): buffer items replicated ``K`` times -- with
   early stopping on the validation loss of the new speaker's utterances of
   ``valid_dir`` (``trainer.best_metric = valid/loss``; ``jt``: of every seen speaker's utterances);
4. then puts ``N_B`` of the new speaker's training utterances into the replay buffer (ER
   strategies; ER-KD with the best weights' outputs as targets). Algorithm 1 prints the
   episode's training set as ``D_tr^t U B_t``, ``B_t`` being made only after that training: it is
   read as ``B_{t-1}``, the buffer of the earlier speakers.

The model's output normalisation stays the pre-trained model's throughout (the buffers travel
with the weights); the stateful streams of each episode concatenate its utterances in the
episode's order (shuffled for the ER strategies).

Tacotron 2 (``theta_init`` of ``speechkit-train tacotron2``; Hemati & Borth's base model): the
train/valid/pretrain dirs hold the phones (``data.phone_file`` of theta_init, default ``text``),
log-mel ``feats.scp`` (+ ``feats.yaml``) and ``utt2spk``. Every episode keeps theta_init's
vocabulary (``data.token_list``; phones outside it map to ``<unk>``, warned) and its per-channel
log-mel statistics (``recompute_stats`` off); batches are theta_init's length-bucketed ones of
``trainer.batch_size`` utterances (``num_streams``/``window`` do not apply). EWC's per-utterance
loss (eq. 5) is the task's full loss (``MSE(before) + MSE(after) + BCE(stop)``) of a one-utterance
batch; ER-KD's buffer targets are the model's *teacher-forced* ``mel_after`` (denormalised log-mel,
as many frames as the ground truth, prenet dropout seeded), since free-running decoding of a
freshly adapted model may not stop or may lose the alignment.

Files (``EXP = exp_dir``)::

    EXP/plan.json                    the EpisodePlan (strategy, order, seed, N_B, K, lambda; ``extra``:
                                     ``order_design``, how the order was made) and the
                                     training settings (:func:`training_settings`: trainer, model, data
                                     options) with their SHA-256; a resumed run asking for other ones
                                     is an error naming the keys and both values
    EXP/episode_<tt>_<spk>/          a speechkit-train experiment dir (config.yaml, checkpoints/
                                     best.pt, metrics.jsonl, ...), usable as --model-dir of
                                     speechkit-tts-synthesize; plus
        speakers                     the speakers the model has been trained on (pre-training ones
                                     and the continual ones up to this episode)
        ewc.pt / buffer.pt           EWC state at the start / replay buffer at the end of the episode
        episode.json                 what was trained (written last: the episode's done marker)
    EXP/episodes.jsonl               one JSON line per finished episode (episode.json's)

Resume: re-running continues where a kill stopped it -- finished episodes (with episode.json)
are skipped, an unfinished one resumes from its latest checkpoint (the trainer's bitwise-exact
resume). Both only for the same data: an episode whose train/valid dirs, speaker vectors, initial
weights (theta_init's or the previous episode's) or, for EWC's episode 1, ``pretrain_dir`` differ
in content from those its checkpoint records (:meth:`Trainer.fit`'s data fingerprint) is an
error naming the key and what changed. And only for the same settings: a run whose training
settings (:func:`training_settings`: every trainer, model and data option but those that only
change how it runs, such as ``trainer.num_threads`` or ``trainer.device``) differ from plan.json's
is a :class:`~speechkit.train.continual_strategies.PlanMismatchError` naming the keys, before any episode is
reused (a plan.json written before it recorded them resumes unchecked, with a warning).

Evaluation (synthesis, the speaker verifier, RA/FG) is the recipe's: it runs
``speechkit-tts-synthesize --model-dir EXP/episode_<tt>_<spk> --speaker SPK`` for each seen
speaker, or passes ``after_episode`` to :func:`run_continual`.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import torch
from torch import nn

from speechkit.data.expdir import trained_speakers
from speechkit.data.fingerprint import DataInput, fingerprint_inputs
from speechkit.data.speakers import read_speaker_vectors, utterance_speakers, write_speakers
from speechkit.features.world import feature_streams
from speechkit.tasks import get_task
from speechkit.tasks.acoustic import (
    AcousticTask, MusaRnnTask, SaladTask, SpeakerTable, StreamWindows, UtteranceSet, append_speaker, load_pairs,
    predict_features,
)
from speechkit.tasks.tacotron2 import Tacotron2Task, load_phone_mel_dir
from speechkit.train.checkpoint import (
    DATA_FINGERPRINT, latest_checkpoint, load_checkpoint, resolve_checkpoint, save_checkpoint,
)
from speechkit.train.continual_strategies import EWC, EpisodePlan, ReplayBuffer, design_order, williams_design
from speechkit.train.trainer import Trainer, TrainerConfig, check_data_fingerprint
from speechkit.utils.config import ConfigError, FieldError, from_dict, to_dict
from speechkit.utils.fileio import DataError, atomic_write

__all__ = ["ContinualConfig", "run_continual", "episode_dir_name", "EpisodeData", "episode_task",
           "Tacotron2EpisodeTask", "teacher_forced_mels", "training_settings", "order_design"]

log = logging.getLogger(__name__)

DONE = "episode.json"


def _default_trainer() -> TrainerConfig:
    # Adaptation from a trained model: a small constant Adam step, early stopping on the new speaker.
    return TrainerConfig(max_epochs=50, patience=5, optimizer="adam", lr=1e-4, best_metric="valid/loss",
                         best_mode="min", log_interval=50, keep_last=1)


@dataclass
class ContinualConfig:
    """Configuration of ``speechkit-train-continual`` (``--print-config`` shows every key).

    Attributes:
        trainer: each episode's training loop (a fresh optimiser per episode); early stopping on
            trainer.best_metric (valid/loss: the new speaker's validation utterances; jt: every seen
            speaker's).
        init_dir: the pre-trained model theta_init: an exp dir of speechkit-train salad | musa_rnn |
            tacotron2 trained with data.speaker_embeddings.
        train_dir: dir with labels.scp (tacotron2: the phone file, e.g. text), feats.scp, utt2spk
            of the continual speakers' training utterances (all speakers in one dir; each episode
            selects its speaker by utt2spk).
        valid_dir: the same for validation (each speaker needs at least one utterance).
        speaker_embeddings: spk_embeddings.scp with a vector for every continual speaker (''= the
            one theta_init was trained with).
        speakers: the continual speakers ([] = every speaker of train_dir/utt2spk); their order: see
            order.
        pretrain_dir: optional dir with theta_init's training data (as train_dir):
            EWC's Fisher at episode 1; without it episode 1 of ewc trains without a penalty.
        strategy: jt | jt_cumulative | sa | ewc | er | er_kd | er_br (Hemati & Borth 2021, sec. 3;
            jt: the paper's joint training from theta_init, at every episode; jt_cumulative: this
            toolkit's own variant, all seen speakers fine-tuned from the previous episode and
            early-stopped on the new speaker).
        order: the speaker order: K >= 1, row K of the Williams design over the C-sorted continual
            speakers (speechkit.train.continual_strategies.design_order: rows 1..n are distinct permutations, no
            two beginning with the same speaker; odd n: rows n+1..2n reverse them); 0, a
            permutation drawn from seed (what every run did before this key existed).
        seed: replay selection and shuffling; the speaker order too when order is 0.
        buffer_size: N_B, utterances per past speaker in the replay buffer (er, er_kd, er_br).
        replicate: K, copies of each buffer item (er_br; 1 otherwise).
        ewc_lambda: EWC's lambda (ewc: finite, > 0).
        ewc_mode: online (one running Fisher sum, latest anchor) | per_episode (one penalty per
            past episode); see speechkit.train.continual_strategies.EWC.
        num_streams: stateful streams per batch (0 = theta_init's data.num_streams; salad/musa_rnn).
        window: frames per training window (0 = theta_init's data.window; salad/musa_rnn).
    """

    trainer: TrainerConfig = field(default_factory=_default_trainer)
    init_dir: str = ""
    train_dir: str = ""
    valid_dir: str = ""
    speaker_embeddings: str = ""
    speakers: list[str] = field(default_factory=list)
    pretrain_dir: str = ""
    strategy: Literal["jt", "jt_cumulative", "sa", "ewc", "er", "er_kd", "er_br"] = "sa"
    order: int = 0
    seed: int = 0
    buffer_size: int = 0
    replicate: int = 1
    ewc_lambda: float = 0.0
    ewc_mode: Literal["online", "per_episode"] = "online"
    num_streams: int = 0
    window: int = 0

    def __post_init__(self) -> None:
        for key in ("buffer_size", "num_streams", "window"):
            if getattr(self, key) < 0:
                raise FieldError(key, f"must be >= 0, got {getattr(self, key)}")
        if self.replicate < 1:
            raise FieldError("replicate", f"must be >= 1, got {self.replicate}")
        if not 0 <= self.ewc_lambda < float("inf"):
            raise FieldError("ewc_lambda", f"must be a finite number >= 0, got {self.ewc_lambda}")
        if self.seed < 0:
            raise FieldError("seed", f"must be >= 0, got {self.seed}")
        if self.order < 0:
            raise FieldError("order", f"must be >= 0 (0: drawn from seed; K: row K of the Williams design), "
                                      f"got {self.order}")


def order_design(speakers: list[str], row: int, seed: int) -> dict[str, Any]:
    """How a run's speaker order was made, as plan.json's ``extra.order_design`` records it.

    Returns:
        ``{"design": "williams", "row": K, "rows": R, "speakers": the C-sorted speakers}`` for
        ``row`` K >= 1 (``R``: the design's number of rows, :func:`williams_design`), else
        ``{"design": "seed", "seed": seed, "speakers": ...}`` (a permutation drawn from ``seed``).
    """
    spk = _c_sorted(set(speakers))
    if row:
        return {"design": "williams", "row": int(row), "rows": len(williams_design(len(spk))), "speakers": spk}
    return {"design": "seed", "seed": int(seed), "speakers": spk}


def episode_dir_name(t: int, speaker: str) -> str:
    """``episode_<tt>_<speaker>`` (``t`` 1-based, two digits)."""
    return f"episode_{t:02d}_{speaker}"


# ----------------------------------------------------------------------------------------------
# data


@dataclass
class EpisodeData:
    """An episode's utterances, in training order.

    Attributes:
        keys: utterance ids (a replicated ER-BR item appears K times).
        labels: float32 ``(T, D)`` label vectors (without the speaker vector); tacotron2: the
            utterance's phone symbols (``list[str]``).
        feats: float32 ``(T, O)`` raw (not normalised) targets (tacotron2: ``(T, n_mels)`` natural-log
            mel, clipped at ``log(data.mel_floor)``); ER-KD buffer items: the model's outputs.
        speakers: each utterance's speaker.
    """

    keys: list[str] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    feats: list[np.ndarray] = field(default_factory=list)
    speakers: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: str, labels: np.ndarray | list[str], feats: np.ndarray, speaker: str) -> None:
        self.keys.append(key)
        self.labels.append(labels)
        self.feats.append(feats)
        self.speakers.append(speaker)


class _Corpus:
    """Labels, features and speakers of one data dir, checked, by utterance."""

    def __init__(self, data_dir: str, label_dim: int, output_dim: int, vectors: dict[str, np.ndarray],
                 scp: str) -> None:
        utts, labels, feats = load_pairs(data_dir, label_dim, output_dim)
        self._fill(data_dir, utts, labels, feats, vectors, scp)

    def _fill(self, data_dir: str, utts: list[str], labels: list, feats: list[np.ndarray],
              vectors: dict[str, np.ndarray], scp: str) -> None:
        spk = utterance_speakers(data_dir, utts, None)
        self.dir = data_dir
        self.labels = dict(zip(utts, labels))
        self.feats = dict(zip(utts, feats))
        self.utt2spk = dict(zip(utts, spk))
        self.spk2utts: dict[str, list[str]] = {}
        for u, s in zip(utts, spk):
            self.spk2utts.setdefault(s, []).append(u)
        self.vectors, self.scp = vectors, scp

    def check_vectors(self, speakers: list[str]) -> None:
        for s in speakers:
            if s not in self.vectors:
                raise DataError(f"{self.scp}: no vector for speaker '{s}' (of {self.dir}/utt2spk)")

    def utts(self, speaker: str, what: str) -> list[str]:
        if not self.spk2utts.get(speaker):
            raise DataError(f"{self.dir}: speaker '{speaker}' has no {what} utterances")
        return self.spk2utts[speaker]

    def data(self, speakers: list[str], what: str) -> EpisodeData:
        d = EpisodeData()
        for s in speakers:
            for u in self.utts(s, what):
                d.add(u, self.labels[u], self.feats[u], s)
        return d


class _PhoneMelCorpus(_Corpus):
    """Phones and log-mel features of one data dir (tacotron2), checked, by utterance: ``labels``
    are phone lists, ``feats`` log-mel matrices clipped at ``log(data_cfg.mel_floor)``
    (:func:`~speechkit.tasks.tacotron2.load_phone_mel_dir`; its skipped utterances are warned about)."""

    def __init__(self, data_dir: str, data_cfg: Any, n_mels: int, vectors: dict[str, np.ndarray], scp: str) -> None:
        utts, phones, mels, _ = load_phone_mel_dir(data_dir, data_cfg, n_mels, None)
        self._fill(data_dir, utts, phones, mels, vectors, scp)


def _predict(model: nn.Module, labels: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """The model's raw (denormalised, continuous V/UV) output for one utterance from position 0 / zero state."""
    return predict_features(model, labels, vector)


def utterance_loss(model: nn.Module, labels: np.ndarray, feats: np.ndarray, vector: np.ndarray) -> torch.Tensor:
    """MSE of the normalised targets of one whole utterance (position 0 / zero state): the loss whose
    squared gradients make EWC's Fisher (eq. 5)."""
    dev = next(model.parameters()).device
    x = torch.from_numpy(append_speaker(labels, vector))[None].to(dev)
    y = model.normalizer.normalize(torch.from_numpy(feats)[None].to(dev))
    out = model(x)  # SALAD: from position 0; MUSA-RNN: (prediction, state) from zero state
    return nn.functional.mse_loss(out[0] if isinstance(out, tuple) else out, y)


def _phone_mel_items(task: Any, cfg: Any, data: EpisodeData, vectors: dict[str, np.ndarray], where: str) -> list:
    """The utterances of ``data`` as items of ``task.make_dataset`` (targets normalised with ``task.model``)."""
    ds = task.make_dataset(cfg, list(data.keys), data.labels, data.feats, data.speakers, vectors, where)
    return [ds[i] for i in range(len(ds))]


@torch.no_grad()
def teacher_forced_mels(task: Any, model: nn.Module, cfg: Any, data: EpisodeData, vectors: dict[str, np.ndarray],
                        seed: int = 0) -> list[np.ndarray]:
    """Tacotron 2's teacher-forced ``mel_after`` of each utterance of ``data``, denormalised: the ER-KD
    targets of a tacotron2 buffer. Hemati & Borth 2021 (sec. 3.2.3, Algorithm 1) keep "the output
    Mel-spectrogram obtained from the best-trained model", ``mel = Model(text | theta*_t)``, i.e.
    synthesized from the text; teacher forcing is this toolkit's choice (see the module docstring).

    Args:
        task: a :class:`~speechkit.tasks.tacotron2.Tacotron2Task` whose ``model`` is ``model``
            (its statistics normalise the teacher-forcing inputs).
        model: the trained model (put in eval mode; the prenet's dropout stays on, so torch's RNG
            is seeded with ``seed`` before each utterance inside a forked RNG state, leaving the
            caller's untouched).
        cfg: the task config (``data.token_list``).
        data: utterances (``labels`` phone lists, ``feats`` ``(T, n_mels)`` log-mel).
        vectors: speaker -> ``(E,)`` vector.

    Returns:
        float32 ``(T_u, n_mels)`` natural-log mel per utterance, ``T_u`` the ground truth's frames.
    """
    model.eval()
    out = []
    with torch.random.fork_rng():
        for item in _phone_mel_items(task, cfg, data, vectors, "ER-KD buffer"):
            torch.manual_seed(seed)  # per utterance: its targets do not depend on the others
            b = task.collate([item])
            dev = next(model.parameters()).device
            y = model(b["phones"].to(dev), b["phone_lens"].to(dev), b["mels"].to(dev),
                      b["speaker"].to(dev) if b["speaker"].shape[1] else None, b["mel_lens"].to(dev))
            out.append(model.denormalize(y.mel_after[0]).cpu().numpy().astype(np.float32))
    return out


# ----------------------------------------------------------------------------------------------
# the episode task


class _EpisodeMixin:
    """Trains on given in-memory utterances from given initial weights, optionally with EWC.

    Set :attr:`episode` (an :class:`EpisodeData`), :attr:`valid` (EpisodeData), :attr:`vectors`,
    :attr:`init_checkpoint`, :attr:`ewc` (or None) before :meth:`Trainer.fit`. The model's output
    normalisation comes from the initial weights and is not recomputed.
    """

    episode: EpisodeData
    valid: EpisodeData
    vectors: dict[str, np.ndarray]
    init_checkpoint: Path
    ewc: EWC | None = None
    #: inputs of the episode beside the config's data and the initial weights (EWC's pretrain_dir)
    extra_inputs: dict[str, DataInput] = {}
    #: name of the task's own loss in the logged stats when EWC adds its penalty
    task_loss_stat = "mse"

    def data_inputs(self, cfg: Any) -> dict[str, DataInput]:
        """The task's data (the continual speakers' train/valid dirs, the speaker vectors), the
        initial weights (:attr:`init_checkpoint`: theta_init's or the previous episode's) and
        :attr:`extra_inputs`."""
        return {**super().data_inputs(cfg),  # type: ignore[misc]
                "init_checkpoint": DataInput(str(self.init_checkpoint)), **self.extra_inputs}

    def build_model(self, cfg: Any) -> nn.Module:
        model = super().build_model(cfg)  # type: ignore[misc]
        model.load_state_dict(load_checkpoint(self.init_checkpoint)["model"])
        return model

    def build_datasets(self, cfg: Any) -> tuple[StreamWindows, UtteranceSet]:
        d = cfg.data
        self._streams = feature_streams(d.train_dir)
        self._window = d.window
        ep = self.episode
        x = torch.from_numpy(np.concatenate(ep.labels))
        y = torch.from_numpy(np.concatenate(ep.feats))
        table = SpeakerTable.build(ep.speakers, [len(a) for a in ep.labels], self.vectors)
        train = StreamWindows(x, self.model.normalizer.normalize(y), d.num_streams, d.window, table)
        log.info("%s: %d training utterances of %d speaker(s), %d frames -> %d streams x %d frames",
                 self.name, len(ep), len(table.speakers), len(x), d.num_streams, train.stream_len)
        v = self.valid
        valid = UtteranceSet(list(v.keys), [torch.from_numpy(append_speaker(a, self.vectors[s]))
                                            for a, s in zip(v.labels, v.speakers)],
                             [torch.from_numpy(a) for a in v.feats])
        return train, valid

    def forward_loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """The task's loss plus, for EWC after a consolidation, the penalty (stats: the task's own,
        with ``loss`` the total, :attr:`task_loss_stat` the task's loss, ``ewc`` the penalty)."""
        loss, stats = super().forward_loss(model, batch)  # type: ignore[misc]
        if self.ewc is None or not self.ewc.terms:
            return loss, stats
        penalty = self.ewc.penalty(getattr(model, "module", model))
        total = loss + penalty
        return total, {**stats, "loss": float(total.detach()), self.task_loss_stat: float(loss.detach()),
                       "ewc": float(penalty.detach())}


class Tacotron2EpisodeTask(_EpisodeMixin, Tacotron2Task):
    """A continual episode of :class:`~speechkit.tasks.tacotron2.Tacotron2Task`: theta_init's (or the
    previous episode's) weights, vocabulary and log-mel statistics; training/validation items built
    with :meth:`~speechkit.tasks.tacotron2.Tacotron2Task.make_dataset` from :attr:`episode` /
    :attr:`valid` (replay buffer included). With EWC, ``train/tts_loss`` is the task's loss."""

    task_loss_stat = "tts_loss"

    def __init__(self) -> None:
        super().__init__()
        self.recompute_stats = False

    def build_datasets(self, cfg: Any) -> tuple[Any, Any]:
        if self.model is None:
            raise RuntimeError("Tacotron2EpisodeTask.build_datasets: call build_model first")
        ep, v = self.episode, self.valid
        train = self.make_dataset(cfg, list(ep.keys), ep.labels, ep.feats, ep.speakers, self.vectors,
                                  f"{cfg.data.train_dir} (episode data)")
        valid = self.make_dataset(cfg, list(v.keys), v.labels, v.feats, v.speakers, self.vectors, cfg.data.valid_dir)
        log.info("%s: %d training utterances of %d speaker(s), %d frames; %d validation utterances", self.name,
                 len(train), len(set(ep.speakers)), sum(train.lengths()), len(valid))
        return train, valid


_EPISODE_TASKS = {"salad": type("SaladEpisodeTask", (_EpisodeMixin, SaladTask), {}),
                  "musa_rnn": type("MusaRnnEpisodeTask", (_EpisodeMixin, MusaRnnTask), {}),
                  "tacotron2": Tacotron2EpisodeTask}


def episode_task(name: str) -> AcousticTask:
    """A fresh episode task for the task ``name`` (salad | musa_rnn | tacotron2); its checkpoints
    carry ``name``, so episode dirs load with :func:`~speechkit.tasks.load_model`.

    Raises:
        ConfigError: another task.
    """
    if name not in _EPISODE_TASKS:
        raise ConfigError(f"theta_init was trained by task {name!r}; continual adaptation supports "
                          f"{', '.join(_EPISODE_TASKS)}")
    return _EPISODE_TASKS[name]()


# ----------------------------------------------------------------------------------------------
# the driver


def _c_sorted(xs) -> list[str]:
    return sorted(xs, key=lambda s: s.encode("utf-8"))


def _save_state(path: Path, state: dict) -> None:
    save_checkpoint(path, state)


def _load_state(path: Path) -> dict:
    return load_checkpoint(path, expect_format=False)


#: trainer keys that change how an episode runs or is logged, not what it trains: a resumed run may change them
RUN_ONLY_TRAINER_KEYS = ("log_interval", "save_interval_steps", "keep_last", "num_threads", "num_workers", "device")
#: data keys whose content (not path) every episode's checkpoints fingerprint (:meth:`Trainer.fit`): checked there
_CONTENT_CHECKED_DATA_KEYS = ("train_dir", "valid_dir", "speaker_embeddings")


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict) or not d:
        return {prefix[:-1]: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}."))
    return out


def training_settings(cfg: ContinualConfig, ep_cfg: Any) -> dict[str, Any]:
    """What decides the episodes' training beside the plan's own keys (strategy, order, seed, N_B, K,
    lambda), flat ``{"dotted.key": value}``, recorded in plan.json and compared on resume: every key
    of the resolved episode config ``ep_cfg`` (the trainer section, theta_init's model and data
    sections with this run's ``data.num_streams``/``data.window``) except

    * :data:`RUN_ONLY_TRAINER_KEYS` (how it runs: threads, device, logging, checkpoint keeping);
    * ``data.train_dir``, ``data.valid_dir``, ``data.speaker_embeddings``: paths, whose *content*
      each episode's checkpoints record and :func:`run_continual` checks;

    plus, for ``ewc``, ``ewc_mode`` and whether ``pretrain_dir`` is given (episode 1's Fisher).
    """
    flat = _flat(to_dict(ep_cfg))
    for key in RUN_ONLY_TRAINER_KEYS:
        flat.pop(f"trainer.{key}", None)
    for key in _CONTENT_CHECKED_DATA_KEYS:
        flat.pop(f"data.{key}", None)
    if cfg.strategy == "ewc":
        flat["ewc_mode"] = cfg.ewc_mode
        flat["pretrain_dir"] = "(given)" if cfg.pretrain_dir else ""
    return flat


def run_continual(cfg: ContinualConfig, exp_dir: str | os.PathLike,
                  after_episode: Callable[[int, Path], None] | None = None) -> list[dict]:
    """Run (or resume) every episode of Algorithm 1 into ``exp_dir`` (see the module docstring).

    Args:
        cfg: the configuration.
        exp_dir: output dir.
        after_episode: called as ``after_episode(t, episode_dir)`` when episode ``t`` finishes in
            this call (not again for episodes a resumed run skips).

    Returns:
        One record per episode (``episode.json``): ``episode``, ``speaker``, ``strategy``,
        ``model_dir``, ``initial_weights`` (what the episode started from: ``theta_init`` for
        episode 1 and every ``jt`` episode, else the previous episode's dir name), ``seen_speakers``,
        ``training_speakers``,
        ``valid_speakers``, ``buffer_speakers``,
        ``utterances`` (``new``, ``own`` = utterances of the training speakers, ``buffer`` = buffer
        items incl. replicas, ``total``), ``buffer_size`` (unique buffered utterances),
        ``valid_utterances``, ``epochs``, ``steps``, ``best_epoch``, ``best_valid_loss`` (of
        ``trainer.best_metric``), ``ewc_terms``.

    Raises:
        ConfigError: missing keys, theta_init not speaker-conditioned or not an acoustic model.
        PlanMismatchError: exp_dir holds a run with another order/strategy/setting or other training
            settings (:func:`training_settings`; names the keys and both values).
        FileNotFoundError, DataError: missing or bad data (names file, speaker, utterance).
    """
    exp = Path(exp_dir)
    for key in ("init_dir", "train_dir", "valid_dir"):
        if not getattr(cfg, key):
            raise ConfigError(f"key '{key}' is required")
    init_dir = Path(cfg.init_dir)
    init_ckpt = resolve_checkpoint(init_dir, "best")  # theta_init: the best weights, never the latest
    saved = load_checkpoint(init_ckpt)
    task_name = saved.get("task", "")
    episode_task(task_name)  # checks the task
    base = get_task(task_name)  # builds models for inference (Fisher, ER-KD)
    init_cfg = from_dict(type(base).Config, saved["config"], source=f"{init_ckpt} (saved config)")
    del saved
    if not init_cfg.data.speaker_embeddings:
        raise ConfigError(f"key 'init_dir': {init_dir} was trained without data.speaker_embeddings; continual "
                          f"speaker adaptation needs a speaker-conditioned model")
    scp = cfg.speaker_embeddings or init_cfg.data.speaker_embeddings
    vectors = read_speaker_vectors(scp)
    tts = task_name == "tacotron2"
    if tts:
        dim = len(next(iter(vectors.values())))
        if dim != init_cfg.model.speaker_dim:
            raise DataError(f"{scp}: ({dim},) vectors do not fit theta_init's model.speaker_dim "
                            f"{init_cfg.model.speaker_dim}")

        def make_corpus(data_dir: str) -> _Corpus:
            return _PhoneMelCorpus(data_dir, init_cfg.data, init_cfg.model.n_mels, vectors, scp)
    else:
        label_dim = AcousticTask.label_dim(init_cfg.model.input_dim, vectors)
        if init_cfg.model.input_dim != label_dim + len(next(iter(vectors.values()))):
            raise DataError(f"{scp}: vectors do not fit theta_init's input_dim {init_cfg.model.input_dim}")
        out_dim = init_cfg.model.output_dim

        def make_corpus(data_dir: str) -> _Corpus:
            return _Corpus(data_dir, label_dim, out_dim, vectors, scp)
    pretrain_speakers = trained_speakers(init_dir, init_cfg)

    train = make_corpus(str(cfg.train_dir))
    valid = make_corpus(str(cfg.valid_dir))
    speakers = list(cfg.speakers) or _c_sorted(train.spk2utts)
    for s in speakers:
        train.utts(s, "training")
        valid.utts(s, "validation")
    train.check_vectors(speakers)
    overlap = [s for s in speakers if s in pretrain_speakers]
    if overlap:
        log.warning("continual speakers also in theta_init's training data: %s", ", ".join(overlap[:5]))

    ep_cfg = copy.deepcopy(init_cfg)
    ep_cfg.trainer = copy.deepcopy(cfg.trainer)
    if tts:  # same vocabulary (data.token_list) as theta_init: it is in init_cfg.data
        if cfg.num_streams or cfg.window:
            log.warning("num_streams / window do not apply to tacotron2 (batches of trainer.batch_size utterances)")
        ep_cfg.data = dataclasses.replace(init_cfg.data, train_dir=str(cfg.train_dir), valid_dir=str(cfg.valid_dir),
                                          speaker_embeddings=str(scp))
    else:
        ep_cfg.data = dataclasses.replace(init_cfg.data, train_dir=str(cfg.train_dir),
                                          valid_dir=str(cfg.valid_dir), speaker_embeddings=str(scp),
                                          num_streams=cfg.num_streams or init_cfg.data.num_streams,
                                          window=cfg.window or init_cfg.data.window)

    if cfg.order:
        try:
            design_order(speakers, cfg.order)
        except ValueError as e:
            raise FieldError("order", str(e)) from None
    exp.mkdir(parents=True, exist_ok=True)
    requested = EpisodePlan.create(speakers, cfg.strategy, cfg.seed, row=cfg.order,
                                   buffer_size=cfg.buffer_size if cfg.strategy in ("er", "er_kd", "er_br") else 0,
                                   replicate=cfg.replicate, ewc_lambda=cfg.ewc_lambda if cfg.strategy == "ewc" else 0.0,
                                   extra={"init_dir": str(init_dir), "pretrain_speakers": pretrain_speakers,
                                          "order_design": order_design(speakers, cfg.order, cfg.seed)},
                                   training=training_settings(cfg, ep_cfg))
    plan = EpisodePlan.resume_or_save(requested, exp / "plan.json")
    design = plan.extra.get("order_design") or {}
    how = (f"row {design['row']} of the Williams design" if design.get("design") == "williams"
           else f"drawn from seed {plan.seed}")
    log.info("continual run %s: strategy %s, order %s (%s)", exp, plan.strategy, " ".join(plan.order), how)

    records: list[dict] = []
    prev_ckpt, prev_dir = init_ckpt, None
    for t in range(1, plan.num_episodes + 1):
        spk = plan.speaker(t)
        ep_dir = exp / episode_dir_name(t, spk)
        task = episode_task(task_name)
        task.vectors, task.init_checkpoint = vectors, init_ckpt if plan.restarts else prev_ckpt
        if plan.uses_ewc and t == 1 and cfg.pretrain_dir:  # episode 1's Fisher is of theta_init's data
            pre_cfg = copy.deepcopy(ep_cfg)
            pre_cfg.data.train_dir = str(cfg.pretrain_dir)
            task.extra_inputs = {"pretrain_dir": task.data_inputs(pre_cfg)["data.train_dir"]}
        if (ep_dir / DONE).is_file():
            # a finished episode is reused only for the data (and initial weights) it was trained on
            weights = resolve_checkpoint(ep_dir)  # best.pt, else (no validation improvement) the latest
            check_data_fingerprint(load_checkpoint(weights).get(DATA_FINGERPRINT),
                                   fingerprint_inputs(task.data_inputs(ep_cfg)), ep_dir, weights,
                                   remedy=f"episode {t} ({spk}) of this continual run was trained on other data: "
                                          f"use a new exp dir for these data")
            records.append(json.loads((ep_dir / DONE).read_text(encoding="utf-8")))
            log.info("episode %d (%s): already done, skipped", t, spk)
            prev_ckpt, prev_dir = weights, ep_dir
            continue
        ep_dir.mkdir(parents=True, exist_ok=True)

        # replay buffer of episodes 1..t-1
        buffer = None
        if plan.uses_buffer:
            buffer = ReplayBuffer(plan.buffer_size, plan.seed)
            if prev_dir is not None:
                buffer.load_state_dict(_load_state(prev_dir / "buffer.pt"))

        # EWC: Fisher of the previous episode's data at the previous episode's weights
        if plan.uses_ewc:
            task.ewc = _ewc_for_episode(t, plan, cfg, ep_dir, prev_dir, prev_ckpt, base, ep_cfg, train,
                                        make_corpus, vectors)

        # the episode's training set
        spk2items = {s: {u: u for u in train.spk2utts[s]} for s in plan.training_speakers(t)}
        episode = EpisodeData()
        for key, item in plan.training_set(t, spk2items, buffer):
            feats = torch.as_tensor(item["feats"]).numpy() if isinstance(item, dict) else train.feats[key]
            episode.add(key, train.labels[key], feats, train.utt2spk[key])
        task.episode, task.valid = episode, valid.data(plan.validation_speakers(t), "validation")
        n_buffer = len(buffer.items(plan.replicate)) if buffer is not None else 0
        log.info("episode %d/%d (%s, %s): %d utterances (%d buffered incl. replicas), %d validation; from %s",
                 t, plan.num_episodes, spk, plan.strategy, len(episode), n_buffer, len(task.valid),
                 task.init_checkpoint)

        seen = _c_sorted(set(pretrain_speakers) | set(plan.seen(t)))
        task.trained_speakers = seen
        cfg_t = copy.deepcopy(ep_cfg)
        best_path = Trainer(task, cfg_t, ep_dir).fit()
        model = base.build_model(copy.deepcopy(cfg_t))
        model.load_state_dict(load_checkpoint(best_path)["model"])
        model.eval()
        task.on_train_end(model, cfg_t, ep_dir)  # idempotent; also after a kill between the end and here
        write_speakers(ep_dir / "speakers", seen)

        if buffer is not None:
            produce = None
            if plan.distills and tts:
                def produce(chosen, model=model, spk=spk, cfg_t=cfg_t):
                    data = EpisodeData()
                    for k, _ in chosen:
                        data.add(k, train.labels[k], train.feats[k], spk)
                    return [{"feats": torch.from_numpy(y)}
                            for y in teacher_forced_mels(base, model, cfg_t, data, vectors, seed=plan.seed + t)]
            elif plan.distills:
                def produce(chosen, model=model, spk=spk):
                    return [{"feats": torch.from_numpy(_predict(model, train.labels[k], vectors[spk]))}
                            for k, _ in chosen]
            buffer.add_speaker(spk, {u: u for u in train.spk2utts[spk]}, produce)
            _save_state(ep_dir / "buffer.pt", buffer.state_dict())

        record = _episode_record(t, spk, plan, ep_dir, best_path, seen, episode, buffer, n_buffer, task)
        with atomic_write(ep_dir / DONE) as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        records.append(record)
        log.info("episode %d (%s) done: %d epochs, best %s %.4g", t, spk, record["epochs"],
                 cfg.trainer.best_metric, record["best_valid_loss"])
        with atomic_write(exp / "episodes.jsonl") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        if after_episode is not None:
            after_episode(t, ep_dir)
        prev_ckpt, prev_dir = best_path, ep_dir
    with atomic_write(exp / "episodes.jsonl") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return records


def _ewc_for_episode(t: int, plan: EpisodePlan, cfg: ContinualConfig, ep_dir: Path, prev_dir: Path | None,
                     prev_ckpt: Path, base: Any, ep_cfg: Any, train: _Corpus,
                     make_corpus: Callable[[str], _Corpus], vectors: dict[str, np.ndarray]) -> EWC:
    """The EWC state of episode ``t``: loaded from ``ep_dir/ewc.pt`` on resume, else the previous
    episode's state plus the Fisher of the previous episode's data at ``prev_ckpt`` (saved)."""
    ewc = EWC(plan.ewc_lambda, cfg.ewc_mode)
    path = ep_dir / "ewc.pt"
    if path.is_file():
        ewc.load_state_dict(_load_state(path))
        return ewc
    if prev_dir is not None:
        ewc.load_state_dict(_load_state(prev_dir / "ewc.pt"))
        prev = train.data([plan.speaker(t - 1)], "training")
    elif cfg.pretrain_dir:
        pre = make_corpus(str(cfg.pretrain_dir))
        pre.check_vectors(_c_sorted(pre.spk2utts))
        prev = pre.data(_c_sorted(pre.spk2utts), "training")
    else:
        prev = None
        log.info("episode 1: no pretrain_dir, so no Fisher of theta_init's data: no EWC penalty in this episode")
    if prev is not None:
        model = base.build_model(copy.deepcopy(ep_cfg))
        model.load_state_dict(load_checkpoint(prev_ckpt)["model"])
        if isinstance(base, Tacotron2Task):
            # eq. 5 with the task's loss of a one-utterance batch; the prenet's dropout stays on in
            # eval mode, so the RNG is seeded (and the caller's RNG state kept)
            batches = _phone_mel_items(base, ep_cfg, prev, vectors, "EWC Fisher data")
            with torch.random.fork_rng():
                torch.manual_seed(plan.seed + t)
                fisher = ewc.consolidate(model, lambda m, b: base.forward_loss(m, base.collate([b]))[0], batches,
                                         episode=t - 1)
        else:
            batches = list(zip(prev.labels, prev.feats, prev.speakers))
            fisher = ewc.consolidate(model, lambda m, b: utterance_loss(m, b[0], b[1], vectors[b[2]]), batches,
                                     episode=t - 1)
        log.info("episode %d: EWC Fisher on %d utterances of episode %d's data (mean F %.3g)", t, len(batches),
                 t - 1, float(torch.cat([f.flatten() for f in fisher.values()]).mean()))
    _save_state(path, ewc.state_dict())
    return ewc


def _episode_record(t: int, spk: str, plan: EpisodePlan, ep_dir: Path, best_path: Path, seen: list[str],
                    episode: EpisodeData, buffer: ReplayBuffer | None, n_buffer: int, task: Any) -> dict:
    best = load_checkpoint(best_path)
    latest = latest_checkpoint(ep_dir / "checkpoints")
    state = load_checkpoint(latest)["state"] if latest is not None else {}
    own = sum(1 for k, s in zip(episode.keys, episode.speakers) if s in plan.training_speakers(t))
    return {"episode": t, "speaker": spk, "strategy": plan.strategy, "model_dir": str(ep_dir),
            "initial_weights": ("theta_init" if plan.restarts or t == 1
                                else episode_dir_name(t - 1, plan.speaker(t - 1))),
            "seen_speakers": plan.seen(t), "training_speakers": plan.training_speakers(t),
            "valid_speakers": plan.validation_speakers(t),
            "buffer_speakers": plan.order[:t - 1] if buffer is not None else [],
            "utterances": {"new": sum(1 for s in episode.speakers if s == spk), "own": own, "buffer": n_buffer,
                           "total": len(episode)},
            "buffer_size": len(set(k for k, s in zip(episode.keys, episode.speakers)
                                   if s not in plan.training_speakers(t))),
            "valid_utterances": len(task.valid), "epochs": int(state.get("epoch", 0)),
            "steps": int(state.get("step", 0)), "best_epoch": int(best.get("epoch", 0)),
            "best_valid_loss": float(best.get("value", float("nan"))),
            "ewc_terms": len(task.ewc.terms) if task.ewc is not None else 0}

