"""Forced phone alignment: a flat-start HMM-GMM (monophones, then tied triphones) trained by
Baum-Welch and Viterbi re-estimation.

The recipe of Kaldi's ``steps/train_mono.sh`` + ``steps/train_deltas.sh`` + ``steps/align_si.sh``
(optionally ``train_lda_mllt.sh`` and ``train_sat.sh``), in numpy:

1. **Features**: 13 MFCC + delta + delta-delta (:class:`~speechkit.features.frontends.MfccFrontend`,
   25 ms Hamming window, 10 ms shift by default), mean and variance normalised per speaker
   (Kaldi's ``apply-cmvn --norm-vars``).
2. **Model**: one left-to-right HMM per phone (``num_states`` emitting states, self-loop and
   forward transitions, optionally a skip over one state), a diagonal-covariance GMM per state.
   ``sil`` is the optional-silence model that may be inserted at the start, at the end and, when
   ``phone_info`` gives word indices, between words (probability ``sil_prob``, as the lexicon FST
   of Kaldi's ``prepare_lang.sh``).
3. **Flat start**: every GMM starts as the global mean and variance (``gmm-init-mono``); the first
   statistics come from an equal alignment (each utterance's frames split evenly over the states
   of its phone sequence, ``align-equal-compiled``).
4. **Training**: ``num_iters`` passes. The first ``baum_welch_iters`` take forward-backward
   (Baum-Welch) statistics with acoustic scale ``train_acoustic_scale`` (soft posteriors, far more
   robust from a flat start than Viterbi, as HTK's ``HERest`` flat start); the rest are Viterbi
   passes that re-align the data on the passes in ``realign_iters`` (Kaldi's schedule). Each pass
   takes one EM step per GMM and re-estimates the transitions; the number of Gaussians grows
   linearly to ``total_gauss`` over the first ``max_iter_inc`` passes (split targets proportional
   to occupancy^0.2, ``gmm-est --mix-up``). Viterbi statistics leave out the frames of tokens
   whose duration is an outlier for their phone (``duration_outlier_k`` robust standard
   deviations of the log duration from the phone's median): a flat start otherwise lets a few
   models (a glottal stop, /s/) swallow stretches of other phones and learn them, and every
   later pass reinforces that.
5. **Triphones** (``tri_leaves``, Kaldi's ``train_deltas.sh``): from the monophone alignment,
   each phone state in its (left, right) phone context; a decision tree per (phone, state), with
   questions from a clustering of the monophone means (``cluster-phones``), ties them into at most
   ``tri_leaves`` pdfs, re-trained for ``tri_iters`` Viterbi passes. Optional, off by default:
   an LDA+MLLT stage (``lda_dim``) and a speaker-adaptive fMLLR stage (``sat_iters``).
6. **Optional hybrid refinement** (``refine_iters``): an MLP frame classifier trained on the
   alignment, whose scaled likelihoods replace the GMMs' (off by default: +0.7 % on TIMIT).
7. **Alignment** with the final model (Viterbi); log-likelihoods scaled by ``acoustic_scale`` and
   self-loops by ``self_loop_scale``, as ``gmm-align-compiled`` (0.1 and 0.1 in Kaldi).

Accuracy (``test/bench/bench_align_timit.py``, train-and-align on the 80-utterance TIMIT sample,
61 phones; mean over seeds 0-2): 72 % of internal boundaries within 20 ms of the hand labels
(monophones alone, without the duration outlier rule: 68.5 %), 88 % within 40 ms. LDA+MLLT,
SAT and the hybrid refinement gave no further gain there.

Frame ``t`` is centred on sample ``t * hop``; a boundary between frames ``t-1`` and ``t`` is
placed at ``(t - 0.5) * frame_shift`` seconds; the first segment starts at 0 and the last ends at
the end of the audio.

Python API::

    aligner = train_aligner("data/train_phones", "exp/align")      # trains, saves, returns Aligner
    result = aligner.align("data/train_phones")                    # AlignResult
    result.alignments["utt1"]   # [(0.0, 0.1225, 'sil'), (0.1225, 0.2, 'h'), ...]
    aligner = Aligner.load("exp/align")
"""
from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal, Optional

import numpy as np

from speechkit.data.audio import read_audio
from speechkit.data.corpora._common import write_phone_alignments
from speechkit.data.datadir import DataDir, iter_audio
from speechkit.decode.hmm import (MAX_PRED, NEG_INF, AlignGraph, DiagGmmSet, build_context_tree,
                                  forward_backward_batch, phone_questions, split_targets, viterbi_batch)
from speechkit.utils.config import FieldError, dump_config, load_config
from speechkit.utils.fileio import DataError, atomic_write, read_lines, write_table

logger = logging.getLogger(__name__)

__all__ = ["AlignerConfig", "Aligner", "AlignResult", "train_aligner", "read_phone_info", "SIL",
           "MODEL_FILE", "PHONES_FILE", "CONFIG_FILE", "UNALIGNED_FILE", "ALIGNMENTS_FILE"]

#: Label of the optional-silence model and of the segments it produces.
SIL = "sil"
MODEL_FILE = "final.mdl"
PHONES_FILE = "phones.txt"
CONFIG_FILE = "config.yaml"
ALIGNMENTS_FILE = "phone_alignments"
UNALIGNED_FILE = "unaligned"
#: Format version of final.mdl.
MODEL_VERSION = 1
#: How many utterance ids a skip warning lists.
MAX_LISTED = 5


def _kaldi_realign_iters() -> list[int]:
    return [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 23, 26, 29, 32, 35, 38]


@dataclass
class AlignerConfig:
    """Configuration of :func:`train_aligner` (defaults follow Kaldi's ``train_mono.sh``).

    Attributes:
        sample_rate: audio sample rate in Hz (other rates are an unreadable-audio skip; resample
            with a ``sox ... |`` pipe in wav.scp).
        frame_shift: seconds between frames.
        frame_length: analysis window in seconds.
        n_mfcc: cepstral coefficients (c0 included); deltas and delta-deltas are appended.
        n_mels: mel bands before the DCT.
        delta_width: delta window in frames (odd, >= 3).
        cmvn: mean and variance normalisation per 'speaker' (utt2spk), per 'utterance', or 'none'.
        num_states: emitting states per phone HMM.
        sil_num_states: emitting states of the silence model.
        skip: allow a transition from state s to s+2 inside a phone (minimum duration
            num_states - 1 frames instead of num_states).
        optional_silence: insert optional 'sil' at the start, the end and word boundaries.
        sil_prob: probability of taking each optional silence.
        num_iters: training passes.
        baum_welch_iters: the first passes use forward-backward (Baum-Welch) statistics instead
            of a Viterbi alignment (more robust from a flat start, as HTK's HERest).
        train_acoustic_scale: acoustic scale of the Baum-Welch posteriors (< 1 smooths them).
        train_acoustic_scale_final: if set, the Baum-Welch scale moves geometrically from
            train_acoustic_scale to this over the Baum-Welch passes (deterministic annealing).
        realign_iters: passes that start by re-aligning the data (Kaldi's list).
        max_iter_inc: passes over which the Gaussian count grows to total_gauss.
        duration_outlier_k: Viterbi-pass statistics (GMMs, triphone tree) leave out the frames of
            tokens whose log duration is more than this many robust standard deviations
            (1.4826 MAD, at least 0.25) from their phone's median in the current alignment
            (0 = use every frame).
        total_gauss: target total number of Gaussians.
        power: exponent of the occupancy when sharing Gaussians out to states.
        min_gauss_count: minimum frames per Gaussian when sharing them out.
        min_count: a component with fewer frames than this is removed.
        var_floor: variance floor, as a fraction of the global variance.
        perturb: mean perturbation of a split, in standard deviations.
        self_loop_init: initial self-loop probability.
        transition_floor: floor of every re-estimated transition probability.
        acoustic_scale: scale of the acoustic log-likelihoods in alignment.
        transition_scale: scale of the transition log-probabilities.
        self_loop_scale: scale of the self-loop log-probabilities (Kaldi's --self-loop-scale).
        tri_leaves: if > 0, a triphone stage as Kaldi's ``train_deltas.sh`` after the monophones:
            the states of each phone in its (left, right) phone context are tied by a decision
            tree per (phone, state) (questions from a clustering of the monophone means) into at
            most tri_leaves pdfs, trained from the monophone alignment for tri_iters Viterbi
            passes (realigning on tri_realign_iters) with up to tri_total_gauss Gaussians.
        tri_min_count: fewest frames of a tied state.
        tri_iters: passes of the triphone stage.
        tri_realign_iters: passes of that stage that start by re-aligning the data.
        tri_total_gauss: Gaussians of the triphone (and a later LDA+MLLT) model.
        lda_dim: if > 0, a second stage as Kaldi's ``train_lda_mllt.sh``: the static cepstra,
            spliced over +-lda_context frames, are projected to lda_dim dimensions by an LDA whose
            classes are the pdfs of the monophone alignment, then rotated by an MLLT (semi-tied
            covariance) re-estimated on the passes in mllt_iters; the GMMs are re-trained on
            these features for lda_iters Viterbi passes (realigning on lda_realign_iters).
        lda_context: frames of context each side of the LDA input.
        lda_iters: training passes of the LDA+MLLT stage.
        lda_realign_iters: passes of that stage that start by re-aligning the data.
        mllt_iters: passes of that stage that start by re-estimating the MLLT.
        sat_iters: if > 0, a speaker-adaptive training stage as Kaldi's ``train_sat.sh`` after the
            others: per-speaker (utt2spk) fMLLR transforms of the features, re-estimated on the
            passes in sat_fmllr_iters, the GMMs re-estimated on the transformed features for
            sat_iters passes (realigning on sat_realign_iters). Alignment with such a model
            estimates each speaker's fMLLR first (two rounds of align + estimate, ``align_fmllr.sh``).
        sat_fmllr_iters: passes of that stage that re-estimate the fMLLR transforms.
        sat_realign_iters: passes of that stage that start by re-aligning the data.
        fmllr_update_iters: row-by-row sweeps of each fMLLR estimate.
        fmllr_min_frames: a speaker with fewer frames keeps the identity transform.
        refine_iters: rounds of hybrid refinement after the GMM training: a frame classifier
            (MLP over +-mlp_context spliced frames) is trained on the current alignment's pdfs,
            then the data are re-aligned with its scaled likelihoods ``log p(s|x) - log p(s)``
            (0 = GMM alignment only).
        mlp_context: frames of context each side of the classifier's input.
        mlp_hidden: hidden units per layer.
        mlp_layers: hidden layers.
        mlp_epochs: passes over the frames per refinement round.
        mlp_lr: Adam learning rate.
        mlp_acoustic_scale: scale of the classifier's scaled log-likelihoods in alignment.
        chunk_frames: frames per Viterbi batch (memory: about 9 bytes x states x frames).
        seed: seed of the Gaussian splits.
    """

    sample_rate: int = 16000
    frame_shift: float = 0.01
    frame_length: float = 0.025
    n_mfcc: int = 13
    n_mels: int = 40
    delta_width: int = 5
    cmvn: Literal["speaker", "utterance", "none"] = "speaker"
    num_states: int = 3
    sil_num_states: int = 3
    skip: bool = False
    optional_silence: bool = True
    sil_prob: float = 0.5
    num_iters: int = 30
    baum_welch_iters: int = 10
    train_acoustic_scale: float = 0.1
    train_acoustic_scale_final: Optional[float] = None
    realign_iters: list[int] = field(default_factory=_kaldi_realign_iters)
    max_iter_inc: int = 25
    duration_outlier_k: float = 2.0
    total_gauss: int = 1000
    power: float = 0.2
    min_gauss_count: float = 20.0
    min_count: float = 3.0
    var_floor: float = 0.01
    perturb: float = 0.2
    self_loop_init: float = 0.75
    transition_floor: float = 0.01
    acoustic_scale: float = 0.1
    transition_scale: float = 1.0
    self_loop_scale: float = 0.1
    tri_leaves: int = 500
    tri_min_count: float = 50.0
    tri_iters: int = 20
    tri_realign_iters: list[int] = field(default_factory=lambda: [5, 10, 15])
    tri_total_gauss: int = 1500
    lda_dim: int = 0
    lda_context: int = 3
    lda_iters: int = 20
    lda_realign_iters: list[int] = field(default_factory=lambda: [5, 10, 15])
    mllt_iters: list[int] = field(default_factory=lambda: [2, 4, 6, 12])
    sat_iters: int = 0
    sat_fmllr_iters: list[int] = field(default_factory=lambda: [1, 3, 6])
    sat_realign_iters: list[int] = field(default_factory=lambda: [2, 4, 8])
    fmllr_update_iters: int = 10
    fmllr_min_frames: int = 500
    refine_iters: int = 0
    mlp_context: int = 5
    mlp_hidden: int = 256
    mlp_layers: int = 2
    mlp_epochs: int = 8
    mlp_lr: float = 0.001
    mlp_acoustic_scale: float = 1.0
    chunk_frames: int = 20000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.sample_rate <= 0:
            raise FieldError("sample_rate", f"must be positive, got {self.sample_rate}")
        if not 0 < self.frame_shift <= self.frame_length:
            raise FieldError("frame_shift", f"must be in (0, frame_length], got {self.frame_shift}")
        if round(self.frame_shift * self.sample_rate) < 1:
            raise FieldError("frame_shift", "is shorter than one sample")
        if self.delta_width < 3 or self.delta_width % 2 == 0:
            raise FieldError("delta_width", f"must be an odd integer >= 3, got {self.delta_width}")
        if not 0 < self.n_mfcc <= self.n_mels:
            raise FieldError("n_mfcc", f"must be in 1..n_mels, got {self.n_mfcc}")
        for key in ("num_states", "sil_num_states"):
            if getattr(self, key) < 1:
                raise FieldError(key, f"must be >= 1, got {getattr(self, key)}")
        if not 0 < self.sil_prob < 1:
            raise FieldError("sil_prob", f"must be in (0, 1), got {self.sil_prob}")
        if self.num_iters < 1:
            raise FieldError("num_iters", f"must be >= 1, got {self.num_iters}")
        if not 0 < self.self_loop_init < 1:
            raise FieldError("self_loop_init", f"must be in (0, 1), got {self.self_loop_init}")
        if self.duration_outlier_k < 0:
            raise FieldError("duration_outlier_k", f"must be >= 0, got {self.duration_outlier_k}")
        if not 0 < self.transition_floor < 0.5:
            raise FieldError("transition_floor", f"must be in (0, 0.5), got {self.transition_floor}")
        if self.total_gauss < 1:
            raise FieldError("total_gauss", f"must be >= 1, got {self.total_gauss}")
        if self.var_floor <= 0:
            raise FieldError("var_floor", f"must be positive, got {self.var_floor}")
        if self.chunk_frames < 1:
            raise FieldError("chunk_frames", f"must be >= 1, got {self.chunk_frames}")

    @property
    def hop_length(self) -> int:
        """Frame shift in samples."""
        return int(round(self.frame_shift * self.sample_rate))

    def frontend_conf(self) -> dict:
        """The :func:`~speechkit.features.frontends.build_frontend` config of the features."""
        win = int(round(self.frame_length * self.sample_rate))
        n_fft = 1 << max(0, (win - 1).bit_length())
        return {"type": "mfcc", "sample_rate": self.sample_rate, "n_fft": n_fft, "win_length": win,
                "hop_length": self.hop_length, "window": "hamming", "n_mfcc": self.n_mfcc,
                "n_mels": self.n_mels, "fmin": 20.0, "htk": True, "delta_order": 2,
                "delta_width": self.delta_width}


# ================================================================================ input reading
def read_phone_info(path: str | os.PathLike, tokens: dict[str, list[str]]) -> dict[str, list[int]]:
    """Word index of every token from a ``phone_info`` file (``<utt> <stress>:<syllable>:<word> ...``).

    Args:
        path: the ``phone_info`` file.
        tokens: utterance -> tokens of ``text`` (the fields must be 1:1 with them).

    Returns:
        utterance -> word index per token (utterances absent from the file are absent here).

    Raises:
        DataError: a malformed field, a token count that differs from ``text``, a decreasing word
            index, or an utterance not in ``text`` (names file and line).
    """
    out: dict[str, list[int]] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            raise DataError(f"{path}:{lineno}: empty line")
        utt, fields = parts[0], parts[1:]
        if utt not in tokens:
            raise DataError(f"{path}:{lineno}: utterance '{utt}' is not in text")
        if len(fields) != len(tokens[utt]):
            raise DataError(f"{path}:{lineno}: '{utt}' has {len(fields)} fields but text has "
                            f"{len(tokens[utt])} tokens")
        words = []
        for f in fields:
            bits = f.split(":")
            if len(bits) != 3 or not all(b.isdigit() for b in bits):
                raise DataError(f"{path}:{lineno}: '{utt}': field {f!r} is not <stress>:<syllable>:<word>")
            words.append(int(bits[2]))
        if any(b < a for a, b in zip(words, words[1:])):
            raise DataError(f"{path}:{lineno}: '{utt}': word indices decrease")
        out[utt] = words
    return out


def _read_inputs(data_dir: str | os.PathLike) -> tuple[DataDir, dict[str, list[str]], dict[str, list[int]] | None]:
    d = DataDir.load(data_dir)
    if d.text is None:
        raise FileNotFoundError(f"{data_dir}/text: missing (the token sequences to align)")
    if d.wav_scp is None:
        raise FileNotFoundError(f"{data_dir}/wav.scp: missing (the audio to align)")
    tokens = {u: d.text[u].split() for u in d.utts if u in d.text}
    missing = [u for u in d.utts if u not in d.text]
    if missing:
        raise DataError(f"{data_dir}/text: no entry for utterance '{missing[0]}' ({len(missing)} missing)")
    unlisted = [u for u in d.text if u not in d.utt2spk]
    if unlisted:  # it would be dropped without a word (and phone_info blamed for naming it)
        raise DataError(f"{data_dir}/utt2spk: no entry for utterance '{unlisted[0]}' of text "
                        f"({len(unlisted)} missing)")
    if d.segments is not None:
        missing = [u for u in d.utts if u not in d.segments]
        if missing:
            raise DataError(f"{data_dir}/segments: no entry for utterance '{missing[0]}' "
                            f"({len(missing)} of {len(d.utts)} missing)")
    pi = Path(data_dir) / "phone_info"
    words = read_phone_info(pi, tokens) if pi.is_file() else None
    return d, tokens, words


def _read_audio_all(d: DataDir, utts: list[str], sample_rate: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Samples of every utterance; an unreadable one goes to the failures (utt -> message)."""
    out: dict[str, np.ndarray] = {}
    failed: dict[str, str] = {}
    by_rec: dict[str, list[str]] = {}
    for u in utts:
        by_rec.setdefault(d.recording_of(u), []).append(u)
    for rec, rutts in by_rec.items():
        sub = DataDir(wav_scp={rec: d.wav_scp[rec]} if rec in d.wav_scp else {},
                      utt2spk={u: d.utt2spk[u] for u in rutts},
                      segments=None if d.segments is None else {u: d.segments[u] for u in rutts if u in d.segments},
                      path=d.path)
        try:
            for u, x, _ in iter_audio(sub, expected_sr=sample_rate):
                out[u] = x
        except DataError:
            for u in rutts:  # find which ones fail
                if u in out:
                    continue
                try:
                    if d.segments is None:
                        if u not in d.wav_scp:
                            raise DataError(f"{d.path}/wav.scp: no entry for utterance '{u}'")
                        x, _ = read_audio(d.wav_scp[u], key=u, expected_sr=sample_rate,
                                          source=f"{d.path}/wav.scp")
                    else:
                        if u not in d.segments or d.segments[u].recording not in d.wav_scp:
                            raise DataError(f"{d.path}/segments: '{u}' has no recording in wav.scp")
                        s = d.segments[u]
                        x, _ = read_audio(d.wav_scp[s.recording], key=u, start=s.start, end=s.end,
                                          expected_sr=sample_rate, source=f"{d.path}/wav.scp")
                    out[u] = x
                except DataError as e:
                    failed[u] = str(e)
    return out, failed


def _mfcc_worker(args):
    conf, items = args
    from speechkit.features.frontends import build_frontend

    fe = build_frontend(conf, source="aligner")
    res = {}
    for u, x in items:
        try:
            res[u] = fe(x)
        except ValueError as e:
            res[u] = str(e)
    return res


def compute_features(d: DataDir, utts: list[str], config: AlignerConfig, nj: int = 1
                     ) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, str]]:
    """MFCC + deltas with CMVN for ``utts`` of ``d``.

    Returns:
        ``(feats, durations, failures)``: utt -> float32 ``(T, 3 * n_mfcc)``; utt -> audio
        duration in seconds; utt -> reason for utterances whose audio could not be read.
    """
    audio, failed = _read_audio_all(d, utts, config.sample_rate)
    durs = {u: len(x) / config.sample_rate for u, x in audio.items()}
    items = list(audio.items())
    conf = config.frontend_conf()
    parts = [items[i::nj] for i in range(nj)] if nj > 1 else [items]
    results = _pmap(_mfcc_worker, [(conf, p) for p in parts], nj)
    feats: dict[str, np.ndarray] = {}
    for r in results:
        for u, f in r.items():
            if isinstance(f, str):
                failed[u] = f"unreadable audio: {f}"
            else:
                feats[u] = f
    failed = {u: (m if m.startswith("unreadable") else f"unreadable audio: {m}") for u, m in failed.items()}
    if config.cmvn != "none":
        groups: dict[str, list[str]] = {}
        for u in feats:
            key = d.utt2spk.get(u, u) if config.cmvn == "speaker" else u
            groups.setdefault(key, []).append(u)
        for us in groups.values():
            allf = np.concatenate([feats[u] for u in us]).astype(np.float64)
            mean = allf.mean(0)
            std = np.sqrt(np.maximum(allf.var(0), 1e-20))
            for u in us:
                feats[u] = ((feats[u] - mean) / std).astype(np.float32)
    return feats, durs, failed


def _pmap(fn, args: list, nj: int) -> list:
    if nj <= 1 or len(args) <= 1:
        return [fn(a) for a in args]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(min(nj, len(args))) as pool:
        return pool.map(fn, args)


# ================================================================================ the model
@dataclass
class AlignResult:
    """Output of :meth:`Aligner.align`.

    Attributes:
        alignments: utt -> ``[(start_s, end_s, label), ...]`` contiguous from 0 to the audio's end.
        unaligned: utt -> reason, for every utterance that could not be aligned.
        log_likelihood: utt -> acoustic log-likelihood per frame of the best path.
    """

    alignments: dict[str, list[tuple[float, float, str]]]
    unaligned: dict[str, str]
    log_likelihood: dict[str, float] = field(default_factory=dict)

    def write(self, exp_dir: str | os.PathLike) -> int:
        """Write ``exp_dir/phone_alignments`` and ``exp_dir/unaligned`` (``<utt> <reason>``), atomically.

        Returns the number of alignment lines.
        """
        exp_dir = Path(exp_dir)
        rows = [(u, s, e, p) for u, segs in self.alignments.items() for s, e, p in segs]
        n = write_phone_alignments(exp_dir / ALIGNMENTS_FILE, rows)
        write_table(exp_dir / UNALIGNED_FILE, {u: " ".join(r.split()) for u, r in self.unaligned.items()})
        return n


class Aligner:
    """A monophone HMM-GMM forced aligner (see the module docstring).

    Attributes:
        config: the :class:`AlignerConfig` it was trained with.
        phones: phone symbols; index = phone id.
        gmm: one GMM per (phone, HMM state); pdf of state ``s`` of phone ``p`` is ``pdf_offset[p] + s``.
        trans: float64 ``(num_phones, max_states, 3)`` transition probabilities ``[self, next, skip]``.
    """

    def __init__(self, config: AlignerConfig, phones: list[str], gmm: DiagGmmSet | None = None,
                 trans: np.ndarray | None = None):
        self.config = config
        self.phones = list(phones)
        self.phone_id = {p: i for i, p in enumerate(self.phones)}
        self.num_states = np.array([config.sil_num_states if p == SIL else config.num_states for p in self.phones])
        self.pdf_offset = np.concatenate([[0], np.cumsum(self.num_states)])[:-1]
        self.num_pdfs = int(self.num_states.sum())
        ms = int(self.num_states.max())
        if trans is None:
            a = config.self_loop_init
            trans = np.zeros((len(self.phones), ms, 3))
            trans[:, :, 0] = a
            trans[:, :, 1] = 1 - a
            if config.skip:
                for p, n in enumerate(self.num_states):
                    for s in range(n - 2):
                        trans[p, s, 1] = trans[p, s, 2] = (1 - a) / 2
        self.trans = trans
        self.gmm = gmm
        self.mlp: FrameClassifier | None = None
        #: LDA+MLLT projection ``(lda_dim, n_mfcc * (2 lda_context + 1))`` of the spliced static
        #: cepstra, or None (the model reads MFCC + deltas).
        self.transform: np.ndarray | None = None
        #: Triphone state tying: pdf of each ``(left, phone, right, state)``, int
        #: ``(num_phones + 1, num_phones, num_phones + 1, max_states)`` (index ``num_phones`` = the
        #: utterance edge), or None (monophones: pdf ``pdf_offset[phone] + state``).
        self.ctx_pdf: np.ndarray | None = None

    def set_tree(self, ctx_pdf: np.ndarray | None) -> None:
        """Use the tied triphone states ``ctx_pdf`` (see :attr:`ctx_pdf`; None = monophones)."""
        self.ctx_pdf = ctx_pdf
        self.num_pdfs = int(self.num_states.sum()) if ctx_pdf is None else int(ctx_pdf.max()) + 1

    def model_features(self, feats: np.ndarray) -> np.ndarray:
        """The features the model reads, from :func:`compute_features`'s ``(T, 3 n_mfcc)``:
        themselves, or the LDA+MLLT projection of the spliced static cepstra ``(T, lda_dim)``."""
        if self.transform is None:
            return feats
        x = splice(np.asarray(feats[:, :self.config.n_mfcc], np.float32), self.config.lda_context)
        return (x @ self.transform.T.astype(np.float32)).astype(np.float32)

    @property
    def sil_id(self) -> int | None:
        return self.phone_id.get(SIL) if self.config.optional_silence else None

    # ------------------------------------------------------------------ graphs
    def _scaled_trans(self) -> np.ndarray:
        """Log transition weights with Kaldi's self-loop scaling: ``s log a`` for the self-loop and
        ``log(b / (1 - a)) + s log(1 - a)`` for a forward transition of probability ``b``; all
        times ``transition_scale``."""
        c = self.config
        t = np.maximum(self.trans, 1e-300)
        a = t[..., 0]
        with np.errstate(divide="ignore"):
            out = np.empty_like(t)
            out[..., 0] = c.self_loop_scale * np.log(a)
            fwd = np.log(t[..., 1:]) - np.log1p(-a)[..., None] + c.self_loop_scale * np.log1p(-a)[..., None]
            out[..., 1:] = np.where(self.trans[..., 1:] > 0, fwd, NEG_INF)
        return c.transition_scale * out

    def make_graph(self, tokens: list[str], words: list[int] | None = None, *, equal_path: bool = False,
                   silence: bool = True, _lt: np.ndarray | None = None) -> AlignGraph:
        """The alignment graph of a token sequence.

        Args:
            tokens: phone symbols (all in :attr:`phones`).
            words: word index per token; optional silence goes between tokens whose word index
                differs (only with ``optional_silence``).
            equal_path: build the flat-start path instead: silence (if optional) only at the start
                and end, taken, for an equal alignment.
            silence: ``False`` leaves the optional silence out.

        Raises:
            KeyError: a token not in :attr:`phones`.
        """
        c = self.config
        lt = self._scaled_trans() if _lt is None else _lt
        sil = self.sil_id if silence else None
        lsil, lnosil = (c.transition_scale * math.log(c.sil_prob), c.transition_scale * math.log1p(-c.sil_prob))
        # blocks: (phone id, token position or -1-k, optional?)
        blocks: list[tuple[int, int, bool]] = []
        nsil = 0
        for i, tok in enumerate(tokens):
            pid = self.phone_id[tok]
            boundary = i == 0 or (words is not None and words[i] != words[i - 1])
            if sil is not None and boundary and not (equal_path and i > 0):
                blocks.append((sil, -1 - nsil, not equal_path))
                nsil += 1
            blocks.append((pid, i, False))
        if sil is not None:
            blocks.append((sil, -1 - nsil, not equal_path))
        S = int(sum(self.num_states[b[0]] for b in blocks))
        pdf = np.zeros(S, dtype=np.int64)
        token = np.zeros(S, dtype=np.int64)
        label = np.zeros(S, dtype=np.int64)
        hst = np.zeros(S, dtype=np.int64)
        pred = np.full((S, MAX_PRED), -1, dtype=np.int64)
        ltr = np.full((S, MAX_PRED), NEG_INF)
        init = np.full(S, NEG_INF)
        final = np.full(S, NEG_INF)
        j = 0
        prev_last = -1  # last state of the previous block
        prev_exit = 0.0  # log weight of leaving the previous block
        skip_src, skip_w = -1, NEG_INF  # state before an optional block, and its weight to bypass it
        for bi, (pid, tpos, optional) in enumerate(blocks):
            n = int(self.num_states[pid])
            idx = np.arange(j, j + n)
            if self.ctx_pdf is None:
                pdf[idx] = self.pdf_offset[pid] + np.arange(n)
            else:
                E = len(self.phones)
                left = self.phone_id[tokens[tpos - 1]] if tpos > 0 else E  # optional silence: (E, E)
                right = self.phone_id[tokens[tpos + 1]] if 0 <= tpos < len(tokens) - 1 else E
                pdf[idx] = self.ctx_pdf[left, pid, right, :n]
            token[idx], label[idx], hst[idx] = tpos, pid, np.arange(n)
            pred[idx, 0] = idx
            ltr[idx, 0] = lt[pid, :n, 0]
            pred[idx[1:], 1] = idx[:-1]
            ltr[idx[1:], 1] = lt[pid, :n - 1, 1]
            if n > 2:
                pred[idx[2:], 2] = idx[:-2]
                ltr[idx[2:], 2] = lt[pid, :n - 2, 2]
            w_in = lsil if optional else 0.0
            if prev_last < 0:
                init[j] = w_in
            else:
                pred[j, 1] = prev_last
                ltr[j, 1] = prev_exit + w_in
            if skip_src >= 0 and not optional:
                pred[j, 3] = skip_src
                ltr[j, 3] = skip_w
            elif skip_src == -2 and not optional:  # bypassed an optional block at the very start
                init[j] = lnosil
            exit_w = lt[pid, n - 1, 1]
            if optional:
                # the next block may be reached from before this block, bypassing it
                if prev_last >= 0:
                    skip_src, skip_w = prev_last, prev_exit + lnosil
                else:
                    skip_src = -2
            else:
                skip_src, skip_w = -1, NEG_INF
            prev_last, prev_exit = j + n - 1, exit_w
            j += n
        final[prev_last] = prev_exit
        if skip_src >= 0:  # the last block is optional: ending without it
            final[skip_src] = skip_w
        return AlignGraph(pdf, token, label, hst, pred, ltr, init, final)

    # ------------------------------------------------------------------ alignment
    def _emissions(self, graphs: list[AlignGraph], feats: list[np.ndarray], scale: float | None = None
                   ) -> list[np.ndarray]:
        """Scaled log-likelihoods ``(T_u, S_u)`` of each utterance's frames in its graph's states
        (only the pdfs of the utterance are evaluated)."""
        if self.mlp is not None:
            return [self.config.mlp_acoustic_scale * self.mlp.log_likelihood(f)[:, g.pdf].astype(np.float64)
                    for g, f in zip(graphs, feats)]
        scale = self.config.acoustic_scale if scale is None else scale
        out = []
        for g, f in zip(graphs, feats):
            pdfs, inverse = np.unique(g.pdf, return_inverse=True)
            ll = self.gmm.log_likelihood(f, pdfs)
            out.append(scale * ll[:, inverse].astype(np.float64))
        return out

    def viterbi(self, graphs: list[AlignGraph], feats: list[np.ndarray], nj: int = 1
                ) -> list[tuple[float, np.ndarray]]:
        """Best state path of each utterance (batched by about ``chunk_frames`` frames, length-sorted).

        Returns:
            Per utterance ``(log-likelihood of the path's frames (unscaled), path)``; ``-inf`` and
            a ``-1`` path when no path fits.
        """
        chunks = self._chunks(feats)
        res = _pmap(_viterbi_worker, [(self, [graphs[i] for i in ch], [feats[i] for i in ch]) for ch in chunks], nj)
        out: list = [None] * len(graphs)
        for ch, r in zip(chunks, res):
            for i, v in zip(ch, r):
                out[i] = v
        return out

    def forward_backward(self, graphs: list[AlignGraph], feats: list[np.ndarray], nj: int = 1,
                         scale: float | None = None) -> list:
        """Forward-backward of each utterance (see :func:`~speechkit.decode.hmm.forward_backward_batch`),
        emissions scaled by ``scale`` (default ``train_acoustic_scale``); batched as :meth:`viterbi`."""
        scale = self.config.train_acoustic_scale if scale is None else scale
        chunks = self._chunks(feats)
        res = _pmap(_fb_worker, [(self, [graphs[i] for i in ch], [feats[i] for i in ch], scale) for ch in chunks], nj)
        out: list = [None] * len(graphs)
        for ch, r in zip(chunks, res):
            for i, v in zip(ch, r):
                out[i] = v
        return out

    def _chunks(self, feats: list[np.ndarray]) -> list[list[int]]:
        order = sorted(range(len(feats)), key=lambda i: len(feats[i]))
        chunks, cur, nfr = [], [], 0
        for i in order:
            cur.append(i)
            nfr += len(feats[i])
            if nfr >= self.config.chunk_frames:
                chunks.append(cur)
                cur, nfr = [], 0
        if cur:
            chunks.append(cur)
        return chunks

    def align_features(self, feats: dict[str, np.ndarray], tokens: dict[str, list[str]],
                       words: dict[str, list[int]] | None = None, durations: dict[str, float] | None = None,
                       nj: int = 1, utt2spk: dict[str, str] | None = None) -> AlignResult:
        """Align utterances given their features (already normalised) and tokens.

        Args:
            feats: utt -> ``(T, D)`` features from :func:`compute_features`.
            tokens: utt -> phone symbols.
            words: utt -> word index per token (optional silence between words).
            durations: utt -> audio duration in seconds (end of the last segment); default
                ``T * frame_shift``.
            nj: parallel processes.
            utt2spk: utt -> speaker, for the per-speaker fMLLR of a speaker-adaptively trained
                model (default: each utterance its own speaker).

        Returns:
            :class:`AlignResult`; utterances with an empty token list, unknown tokens or too few
            frames are in ``unaligned``.
        """
        unaligned: dict[str, str] = {}
        graphs, keys = [], []
        lt = self._scaled_trans()
        for u in sorted(feats):
            toks = tokens.get(u, [])
            if not toks:
                unaligned[u] = "empty text"
                continue
            unknown = sorted({t for t in toks if t not in self.phone_id})
            if unknown:
                unaligned[u] = "unknown tokens: " + " ".join(unknown[:10])
                continue
            g = self.make_graph(toks, None if words is None else words.get(u), _lt=lt)
            need = g.min_frames()
            if len(feats[u]) < need:
                unaligned[u] = f"too few frames: {len(feats[u])} frames for {len(toks)} tokens (needs {need})"
                continue
            graphs.append(g)
            keys.append(u)
        F = [self.model_features(feats[u]) for u in keys]
        if self.config.sat_iters > 0:
            F = self._speaker_adapt(graphs, F, [utt2spk.get(u, u) if utt2spk else u for u in keys], nj)
        res = self.viterbi(graphs, F, nj=nj)
        out: dict[str, list[tuple[float, float, str]]] = {}
        lls: dict[str, float] = {}
        for u, g, (score, path) in zip(keys, graphs, res):
            if not np.isfinite(score):
                unaligned[u] = "no alignment (no path through the graph)"
                continue
            dur = durations[u] if durations and u in durations else len(path) * self.config.frame_shift
            out[u] = self._segments(g, path, dur, tokens[u])
            lls[u] = score
        return AlignResult(out, unaligned, lls)

    def _segments(self, g: AlignGraph, path: np.ndarray, duration: float, toks: list[str]
                  ) -> list[tuple[float, float, str]]:
        tok = g.token[path]
        change = np.nonzero(np.diff(tok))[0] + 1
        starts = np.concatenate([[0], change])
        ends = np.concatenate([change, [len(path)]])
        fs = self.config.frame_shift
        segs = []
        for a, b in zip(starts, ends):
            t0 = 0.0 if a == 0 else (a - 0.5) * fs
            t1 = duration if b == len(path) else (b - 0.5) * fs
            k = int(tok[a])
            segs.append((t0, t1, toks[k] if k >= 0 else SIL))
        return segs

    def align(self, data_dir: str | os.PathLike, nj: int = 1) -> AlignResult:
        """Align every utterance of a data directory (``wav.scp``, ``text``, optional ``segments``,
        ``phone_info``).

        Raises:
            FileNotFoundError: missing data dir, ``text`` or ``wav.scp``.
            DataError: malformed tables or ``phone_info`` (names file and line).
        """
        d, tokens, words = _read_inputs(data_dir)
        feats, durs, failed = compute_features(d, d.utts, self.config, nj)
        res = self.align_features(feats, tokens, words if self.config.optional_silence else None, durs, nj,
                                  utt2spk=d.utt2spk)
        res.unaligned.update(failed)
        res.unaligned = dict(sorted(res.unaligned.items()))
        return res

    def _speaker_adapt(self, graphs: list[AlignGraph], F: list[np.ndarray], spk: list[str], nj: int,
                       rounds: int = 2) -> list[np.ndarray]:
        """Per-speaker fMLLR of the features ``F`` for this (speaker-adaptively trained) model, as
        Kaldi's ``align_fmllr.sh``: align, estimate each speaker's transform from the alignment,
        transform, ``rounds`` times. Returns the transformed features."""
        W: dict[str, np.ndarray] = {}
        Ft = F
        for _ in range(rounds):
            res = self.viterbi(graphs, Ft, nj=nj)
            ok = [i for i, (sc, _) in enumerate(res) if np.isfinite(sc)]
            W = _estimate_speaker_fmllr(self, [graphs[i] for i in ok], [F[i] for i in ok], [Ft[i] for i in ok],
                                        [res[i][1] for i in ok], [spk[i] for i in ok], W)
            Ft = [_apply_fmllr(W.get(s), f) for s, f in zip(spk, F)]
        return Ft

    # ------------------------------------------------------------------ persistence
    def save(self, exp_dir: str | os.PathLike) -> None:
        """Write ``final.mdl`` (npz), ``phones.txt`` (``<phone> <id>``) and ``config.yaml``, atomically."""
        exp_dir = Path(exp_dir)
        exp_dir.mkdir(parents=True, exist_ok=True)
        meta = {"version": MODEL_VERSION, "phones": self.phones}
        with atomic_write(exp_dir / MODEL_FILE, "wb") as f:
            extra = self.mlp.arrays() if self.mlp is not None else {}
            if self.transform is not None:
                extra["transform"] = self.transform
            if self.ctx_pdf is not None:
                extra["ctx_pdf"] = self.ctx_pdf.astype(np.int32)
            np.savez(f, means=self.gmm.means, vars=self.gmm.vars, log_weights=self.gmm.log_weights,
                     trans=self.trans, meta=np.array(json.dumps(meta)), **extra)
        with atomic_write(exp_dir / PHONES_FILE) as f:
            for i, p in enumerate(self.phones):
                f.write(f"{p} {i}\n")
        dump_config(self.config, exp_dir / CONFIG_FILE)

    @classmethod
    def load(cls, model_dir: str | os.PathLike) -> "Aligner":
        """Load an aligner saved by :meth:`save` / :func:`train_aligner`.

        Raises:
            FileNotFoundError: ``final.mdl`` or ``config.yaml`` missing.
            ConfigError: a malformed ``config.yaml`` (names the file and key).
            DataError: a ``final.mdl`` that is truncated, corrupt, of another version, or whose
                arrays (GMMs, transitions, tree, transforms) disagree with each other or with
                ``config.yaml``; the message names the file and the array.
        """
        model_dir = Path(model_dir)
        mdl = model_dir / MODEL_FILE
        if not mdl.is_file():
            raise FileNotFoundError(f"{mdl}: no such file (train an aligner into {model_dir} first)")
        config = load_config(AlignerConfig, model_dir / CONFIG_FILE)
        z = _read_model_file(mdl)
        try:
            meta = json.loads(str(z["meta"]))
        except (KeyError, ValueError) as e:
            raise DataError(f"{mdl}: not a speechkit aligner model (no readable 'meta': {e})") from None
        if not isinstance(meta, dict) or meta.get("version") != MODEL_VERSION:
            version = meta.get("version") if isinstance(meta, dict) else None
            raise DataError(f"{mdl}: model version {version} (expected {MODEL_VERSION})")
        phones = meta.get("phones")
        if not isinstance(phones, list) or not phones or \
                not all(isinstance(p, str) and p.split() == [p] for p in phones):
            raise DataError(f"{mdl}: 'phones' must be a non-empty list of phone symbols, got {phones!r:.80}")
        if len(set(phones)) != len(phones):
            raise DataError(f"{mdl}: 'phones' lists a phone twice")
        for key in ("means", "vars", "log_weights", "trans"):
            if key not in z:
                raise DataError(f"{mdl}: not a speechkit aligner model (no array '{key}')")
            if not np.issubdtype(z[key].dtype, np.floating):
                raise DataError(f"{mdl}: '{key}' holds {z[key].dtype} values, expected floats")
        try:
            gmm = DiagGmmSet(z["means"], z["vars"], z["log_weights"])
        except ValueError as e:
            raise DataError(f"{mdl}: {e}") from None
        al = cls(config, phones, gmm, z["trans"])
        ctx_pdf = z.get("ctx_pdf")
        if ctx_pdf is not None:
            N, S = len(phones), int(al.num_states.max())
            if not np.issubdtype(ctx_pdf.dtype, np.integer) or ctx_pdf.shape != (N + 1, N, N + 1, S) \
                    or ctx_pdf.min() < 0:
                raise DataError(f"{mdl}: 'ctx_pdf' (the triphone tree) must be non-negative integers of shape "
                                f"{(N + 1, N, N + 1, S)} for {N} phones, got {ctx_pdf.dtype} {ctx_pdf.shape}")
            ctx_pdf = ctx_pdf.astype(np.int64)
        al.set_tree(ctx_pdf)
        if gmm.num_pdfs != al.num_pdfs:
            raise DataError(f"{mdl}: {gmm.num_pdfs} GMMs but the topology has {al.num_pdfs} states")
        used = np.isfinite(gmm.log_weights)
        if not used.any(1).all() or not np.isfinite(gmm.means[used]).all() or \
                not (np.isfinite(gmm.vars[used]) & (gmm.vars[used] > 0)).all():
            raise DataError(f"{mdl}: the GMMs hold a pdf without components, non-finite means or "
                            "non-positive variances")
        shape = (len(phones), int(al.num_states.max()), 3)
        if al.trans.shape != shape or not ((al.trans >= 0) & (al.trans <= 1)).all():
            raise DataError(f"{mdl}: 'trans' must be probabilities of shape {shape}, got {al.trans.shape}")
        transform = z.get("transform")
        if transform is not None:
            cols = config.n_mfcc * (2 * config.lda_context + 1)
            if transform.ndim != 2 or transform.shape != (gmm.dim, cols) or not np.isfinite(transform).all():
                raise DataError(f"{mdl}: 'transform' (LDA+MLLT) must be finite of shape {(gmm.dim, cols)} "
                                f"(GMM dimension, n_mfcc x (2 lda_context + 1) of {model_dir / CONFIG_FILE}), "
                                f"got {transform.shape}")
        elif gmm.dim != 3 * config.n_mfcc:
            raise DataError(f"{mdl}: GMMs of dimension {gmm.dim}, but {model_dir / CONFIG_FILE} gives "
                            f"n_mfcc {config.n_mfcc} (features of dimension {3 * config.n_mfcc})")
        al.transform = transform
        if "mlp_log_prior" in z:
            try:
                al.mlp = FrameClassifier.from_arrays(z)
            except KeyError as e:
                raise DataError(f"{mdl}: incomplete frame classifier (no array {e})") from None
            except (ValueError, TypeError) as e:
                raise DataError(f"{mdl}: malformed frame classifier ({e})") from None
            dims = [w.shape for w, _ in al.mlp.layers]
            want_in = gmm.dim * (2 * al.mlp.context + 1)
            if not dims or any(len(d) != 2 for d in dims) or dims[0][0] != want_in or dims[-1][1] != al.num_pdfs \
                    or any(a[1] != b[0] for a, b in zip(dims, dims[1:])) \
                    or any(b.shape != (w.shape[1],) for w, b in al.mlp.layers) \
                    or al.mlp.log_prior.shape != (al.num_pdfs,):
                raise DataError(f"{mdl}: the frame classifier's layers {dims} do not map {want_in} inputs to "
                                f"{al.num_pdfs} pdfs")
        return al


def _read_model_file(mdl: Path) -> dict[str, np.ndarray]:
    """Every array of an aligner's ``final.mdl`` (an npz archive).

    Raises:
        DataError: an empty file, not an npz archive, or a truncated/corrupt one (names the file).
        OSError: the file cannot be read (permissions).
    """
    with open(mdl, "rb") as f:
        head = f.read(4)
    if head != b"PK\x03\x04":
        what = "an empty file" if not head else "not an npz archive"
        raise DataError(f"{mdl}: not a speechkit aligner model ({what}); train the aligner again")
    try:
        with np.load(mdl, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(f"{mdl}: truncated or corrupt aligner model ({type(e).__name__}: {e}); "
                        f"train the aligner again") from None


def _viterbi_worker(args):
    aligner, graphs, feats = args
    em = aligner._emissions(graphs, feats)
    res = viterbi_batch(graphs, em)
    # report the unscaled log-likelihood per frame of the path
    out = []
    for g, e, (score, path) in zip(graphs, em, res):
        if np.isfinite(score):
            ac = float(e[np.arange(len(path)), path].sum()) / aligner.config.acoustic_scale
            out.append((ac / len(path), path))
        else:
            out.append((score, path))
    return out


def _fb_worker(args):
    aligner, graphs, feats, scale = args
    em = aligner._emissions(graphs, feats, scale=scale)
    return forward_backward_batch(graphs, em)


# ================================================================================ hybrid refinement
def splice(x: np.ndarray, context: int) -> np.ndarray:
    """``(T, D)`` -> ``(T, D * (2 context + 1))``: each frame with ``context`` neighbours each side
    (edge frames repeated), as Kaldi's ``splice-feats``."""
    if context == 0:
        return np.ascontiguousarray(x)
    p = np.pad(x, ((context, context), (0, 0)), mode="edge")
    w = np.lib.stride_tricks.sliding_window_view(p, 2 * context + 1, axis=0)  # (T, D, 2c+1)
    return np.ascontiguousarray(w.transpose(0, 2, 1).reshape(len(x), -1))


def estimate_lda(x: np.ndarray, labels: np.ndarray, dim: int, num_classes: int | None = None) -> np.ndarray:
    """Linear discriminant analysis (Kaldi's ``acc-lda`` + ``est-lda``; Duda, Hart & Stork 2001, sec. 3.8.3).

    With ``W = sum_c (n_c / n) Cov_c`` (within-class scatter) and ``B = Cov(x) - W`` (between-class),
    the rows of the result are the ``dim`` generalised eigenvectors ``B v = lambda W v`` of largest
    ``lambda``, normalised to ``v^T W v = 1`` (the projected within-class covariance is the identity).

    Args:
        x: ``(N, D)`` frames.
        labels: int ``(N,)`` class (pdf) of each frame.
        dim: output dimension (``<= D``).
        num_classes: number of classes (default ``labels.max() + 1``).

    Returns:
        float64 ``(dim, D)``: project with ``x @ lda.T``.

    Raises:
        ValueError: ``dim`` out of range or fewer than two classes with frames.
    """
    import scipy.linalg

    x = np.asarray(x, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    N, D = x.shape
    if not 1 <= dim <= D:
        raise ValueError(f"LDA dimension {dim} not in 1..{D}")
    K = int(labels.max()) + 1 if num_classes is None else num_classes
    n = np.bincount(labels, minlength=K).astype(np.float64)
    if (n > 0).sum() < 2:
        raise ValueError("LDA needs frames of at least two classes")
    mean = x.mean(0)
    xc = x - mean
    total = xc.T @ xc / N
    cm = np.zeros((K, D))
    np.add.at(cm, labels, xc)
    cm /= np.maximum(n, 1)[:, None]
    between = (cm * (n / N)[:, None]).T @ cm
    within = total - between
    within += 1e-6 * np.trace(within) / D * np.eye(D)
    evals, evecs = scipy.linalg.eigh(between, within)
    return evecs[:, ::-1][:, :dim].T.copy()


def estimate_mllt(covs: np.ndarray, counts: np.ndarray, num_iters: int = 20,
                  init: np.ndarray | None = None) -> np.ndarray:
    """Maximum likelihood linear transform / semi-tied covariance (Gales 1999, "Semi-tied covariance
    matrices for hidden Markov models", eqs. 19-22; Kaldi's ``est-mllt``).

    Finds the square ``A`` maximising ``sum_c n_c (log |det A|^2 - log |diag(A S_c A^T)|)``, the
    likelihood gain of diagonal-covariance Gaussians in the space ``A x``, by row-wise updates
    ``a_i = c_i G_i^{-1} sqrt(n / (c_i G_i^{-1} c_i^T))``, ``G_i = sum_c n_c S_c / (a_i S_c a_i^T)``
    (``c_i`` the cofactor row of ``A``).

    Args:
        covs: ``(C, D, D)`` full covariances of the Gaussians (classes) in the current space.
        counts: ``(C,)`` frames of each.
        num_iters: sweeps over the rows.
        init: starting ``A`` (default identity).

    Returns:
        float64 ``(D, D)`` ``A``.
    """
    covs = np.asarray(covs, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    keep = counts > 0
    covs, counts = covs[keep], counts[keep]
    D = covs.shape[1]
    A = np.eye(D) if init is None else np.array(init, dtype=np.float64)
    beta = counts.sum()
    for _ in range(num_iters):
        for i in range(D):
            cof = np.linalg.det(A) * np.linalg.inv(A).T[i]  # cofactor row i
            var = np.einsum("d,cde,e->c", A[i], covs, A[i])
            G = np.einsum("c,cde->de", counts / var, covs)
            gc = np.linalg.solve(G, cof)
            A[i] = gc * math.sqrt(beta / float(cof @ gc))
        A /= abs(np.linalg.det(A)) ** (1.0 / D)  # the objective is invariant to scale; keep det 1
    return A


def estimate_fmllr(beta: float, K: np.ndarray, G: np.ndarray, num_iters: int = 10,
                   init: np.ndarray | None = None) -> np.ndarray:
    """Feature-space MLLR (constrained MLLR) of one speaker, by Gales' row-by-row update (Gales 1998,
    "Maximum likelihood linear transformations for HMM-based speech recognition", eqs. 27-31;
    Kaldi's ``FmllrDiagGmmAccs::Update``).

    The transform ``x' = W [x; 1]`` (``W = [A b]``) maximises
    ``beta log |det A| - 1/2 sum_i (w_i G_i w_i^T - 2 w_i k_i^T)``, the diagonal-GMM log-likelihood of
    the transformed frames, with the sufficient statistics
    ``K = sum_t sum_m gamma_tm (mu_m / var_m) xi_t^T`` and ``G_i = sum_t sum_m gamma_tm / var_mi xi_t xi_t^T``
    (``xi_t = [x_t; 1]``, ``gamma_tm`` the posterior of Gaussian ``m``).

    Args:
        beta: frames (occupancy) of the speaker.
        K: ``(D, D + 1)``.
        G: ``(D, D + 1, D + 1)``.
        num_iters: sweeps over the rows.
        init: starting ``W`` ``(D, D + 1)`` (default ``[I 0]``).

    Returns:
        float64 ``(D, D + 1)`` ``W``.
    """
    D = K.shape[0]
    W = np.hstack([np.eye(D), np.zeros((D, 1))]) if init is None else np.array(init, dtype=np.float64)
    Ginv = np.linalg.inv(G + 1e-10 * np.eye(D + 1)[None])
    for _ in range(num_iters):
        for i in range(D):
            A = W[:, :D]
            p = np.append(np.linalg.det(A) * np.linalg.inv(A).T[i], 0.0)  # extended cofactor row
            gp, gk = Ginv[i] @ p, Ginv[i] @ K[i]
            e1, e2 = float(p @ gp), float(p @ gk)
            disc = math.sqrt(e2 * e2 + 4.0 * beta * e1)
            roots = [(-e2 + disc) / (2 * e1), (-e2 - disc) / (2 * e1)]
            alpha = max(roots, key=lambda a: beta * math.log(max(abs(a * e1 + e2), 1e-300)) - 0.5 * a * a * e1)
            W[i] = alpha * gp + gk
    return W


def fmllr_objective(W: np.ndarray, beta: float, K: np.ndarray, G: np.ndarray) -> float:
    """The auxiliary function of :func:`estimate_fmllr` (up to a constant)."""
    D = K.shape[0]
    _, logdet = np.linalg.slogdet(W[:, :D])
    return float(beta * logdet - 0.5 * np.einsum("ij,ijk,ik->", W, G, W) + np.sum(W * K))


def mllt_objective(A: np.ndarray, covs: np.ndarray, counts: np.ndarray) -> float:
    """``sum_c n_c (log |det A|^2 - log |diag(A S_c A^T)|) / 2``: the log-likelihood gain of
    :func:`estimate_mllt`'s transform (up to a constant)."""
    keep = np.asarray(counts) > 0
    covs, counts = np.asarray(covs)[keep], np.asarray(counts)[keep]
    _, logdet = np.linalg.slogdet(A)
    var = np.einsum("id,cde,ie->ci", A, covs, A)
    return float(0.5 * np.sum(counts * (2 * logdet - np.log(var).sum(1))))


class FrameClassifier:
    """An MLP from spliced frames to HMM-state (pdf) posteriors, used as a hybrid acoustic model:
    ``log p(x | s) ~ log p(s | x) - log p(s)`` (Bourlard & Morgan 1994, "scaled likelihoods").

    Attributes:
        layers: ``[(W (in, out), b (out,)), ...]`` float32; ReLU between layers.
        context: frames each side of the input.
        log_prior: ``(P,)`` log state priors (training frame frequencies, smoothed).
    """

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], context: int, log_prior: np.ndarray):
        self.layers = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in layers]
        self.context = int(context)
        self.log_prior = np.asarray(log_prior, np.float32)
        self.train_accuracy = float("nan")

    def log_likelihood(self, x: np.ndarray) -> np.ndarray:
        """``(T, P)`` scaled log-likelihoods of frames ``x`` ``(T, D)``."""
        import torch

        h = torch.from_numpy(splice(np.asarray(x, np.float32), self.context))
        with torch.no_grad():
            for i, (w, b) in enumerate(self.layers):
                h = h @ torch.from_numpy(w) + torch.from_numpy(b)
                if i + 1 < len(self.layers):
                    h = torch.relu(h)
            out = torch.log_softmax(h, dim=1).numpy()
        return out - self.log_prior[None]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"mlp_log_prior": self.log_prior, "mlp_context": np.array(self.context)}
        for i, (w, b) in enumerate(self.layers):
            out[f"mlp_w{i}"], out[f"mlp_b{i}"] = w, b
        return out

    @classmethod
    def from_arrays(cls, z) -> "FrameClassifier":
        n = sum(1 for k in z.keys() if k.startswith("mlp_w"))
        return cls([(z[f"mlp_w{i}"], z[f"mlp_b{i}"]) for i in range(n)], int(z["mlp_context"]), z["mlp_log_prior"])

    @classmethod
    def train(cls, feats: list[np.ndarray], targets: list[np.ndarray], num_pdfs: int, config: AlignerConfig,
              seed: int = 0) -> "FrameClassifier":
        """Train on frames ``feats`` (list of ``(T, D)``) labelled with pdf ids ``targets`` (cross-entropy, Adam)."""
        import torch

        g = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        X = torch.from_numpy(np.concatenate([splice(f.astype(np.float32), config.mlp_context) for f in feats]))
        Y = torch.from_numpy(np.concatenate(targets).astype(np.int64))
        dims = [X.shape[1]] + [config.mlp_hidden] * config.mlp_layers + [num_pdfs]
        mods: list[torch.nn.Module] = []
        for i in range(len(dims) - 1):
            mods.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i + 2 < len(dims):
                mods.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*mods)
        opt = torch.optim.Adam(net.parameters(), lr=config.mlp_lr)
        bs = 256
        for _ in range(config.mlp_epochs):
            perm = torch.randperm(len(X), generator=g)
            for b in range(0, len(X), bs):
                idx = perm[b:b + bs]
                loss = torch.nn.functional.cross_entropy(net(X[idx]), Y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        counts = np.bincount(Y.numpy(), minlength=num_pdfs).astype(np.float64) + 1.0
        lin = [m for m in net if isinstance(m, torch.nn.Linear)]
        clf = cls([(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in lin],
                  config.mlp_context, np.log(counts / counts.sum()))
        with torch.no_grad():
            clf.train_accuracy = float((net(X).argmax(1) == Y).float().mean())
        return clf


# ================================================================================ training
class _TrainLog:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "w", encoding="utf-8")

    def __call__(self, msg: str) -> None:
        logger.info(msg)
        self.f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def _duration_inliers(aligner: Aligner, graphs: list[AlignGraph], paths: list[np.ndarray], k: float
                      ) -> list[np.ndarray]:
    """Per utterance, bool ``(T,)``: the frame's token has a plausible duration for its phone,
    ``|log d - median| <= k * max(1.4826 MAD, 0.25)`` over the phone's tokens in this alignment
    (robust z-score of the log duration)."""
    runs = []
    for g, p in zip(graphs, paths):
        tok = g.token[p]
        starts = np.concatenate([[0], np.nonzero(np.diff(tok))[0] + 1])
        lens = np.diff(np.append(starts, len(p)))
        runs.append((g.label[p[starts]], lens, starts))
    lab = np.concatenate([r[0] for r in runs])
    logd = np.log(np.concatenate([r[1] for r in runs]).astype(np.float64))
    med = np.zeros(len(aligner.phones))
    spread = np.ones(len(aligner.phones))
    for ph in np.unique(lab):
        v = logd[lab == ph]
        med[ph] = np.median(v)
        spread[ph] = max(1.4826 * np.median(np.abs(v - med[ph])), 0.25)
    out = []
    for (l, lens, starts), p in zip(runs, paths):
        ok = np.abs(np.log(lens) - med[l]) <= k * spread[l]
        out.append(np.repeat(ok, lens))
    return out


def _accumulate(aligner: Aligner, graphs: list[AlignGraph], feats: list[np.ndarray],
                paths: list[np.ndarray]) -> tuple[list[np.ndarray | None], np.ndarray]:
    """Frames per pdf and transition counts ``(num_phones, max_states, 3)`` from state paths
    (with ``duration_outlier_k`` > 0, frames of tokens of implausible duration are left out)."""
    k = aligner.config.duration_outlier_k
    if k > 0:
        keep = _duration_inliers(aligner, graphs, paths, k)
        feats = [f[m] for f, m in zip(feats, keep)]
        pdfs = [g.pdf[p][m] for g, p, m in zip(graphs, paths, keep)]
    else:
        pdfs = [g.pdf[p] for g, p in zip(graphs, paths)]
    X = np.concatenate(feats)
    pdf_of_frame = np.concatenate(pdfs)
    order = np.argsort(pdf_of_frame, kind="stable")
    bounds = np.searchsorted(pdf_of_frame[order], np.arange(aligner.num_pdfs + 1))
    frames = [X[order[bounds[p]:bounds[p + 1]]] if bounds[p + 1] > bounds[p] else None
              for p in range(aligner.num_pdfs)]
    counts = np.zeros(aligner.trans.shape)
    for g, p in zip(graphs, paths):
        a, b = p[:-1], p[1:]
        kind = np.where(a == b, 0, np.where((g.label[a] == g.label[b]) & (g.token[a] == g.token[b])
                                            & (g.hmm_state[b] == g.hmm_state[a] + 2), 2, 1))
        np.add.at(counts, (g.label[a], g.hmm_state[a], kind), 1)
        counts[g.label[p[-1]], g.hmm_state[p[-1]], 1] += 1
    return frames, counts


def _accumulate_posteriors(aligner: Aligner, graphs: list[AlignGraph], feats: list[np.ndarray],
                           fb: list) -> tuple[list, np.ndarray]:
    """Like :func:`_accumulate`, from forward-backward output (weighted frames, expected transition counts)."""
    X = np.concatenate(feats)
    offs = np.concatenate([[0], np.cumsum([len(f) for f in feats])])
    rows, pdfs, ws = [], [], []
    counts = np.zeros(aligner.trans.shape)
    slot_kind = np.array([0, 1, 2, 1])
    for g, o, (logz, (tt, jj, w), xi) in zip(graphs, offs[:-1], fb):
        if not np.isfinite(logz):
            continue
        rows.append(tt + o)
        pdfs.append(g.pdf[jj])
        ws.append(w)
        j, k = np.nonzero(xi > 0)
        i = g.pred[j, k]
        np.add.at(counts, (g.label[i], g.hmm_state[i], slot_kind[k]), xi[j, k])
        last = tt == tt.max()
        np.add.at(counts, (g.label[jj[last]], g.hmm_state[jj[last]], 1), w[last])
    rows, pdfs, ws = np.concatenate(rows), np.concatenate(pdfs), np.concatenate(ws)
    order = np.argsort(pdfs, kind="stable")
    bounds = np.searchsorted(pdfs[order], np.arange(aligner.num_pdfs + 1))
    frames = [(X[rows[order[bounds[p]:bounds[p + 1]]]], ws[order[bounds[p]:bounds[p + 1]]])
              if bounds[p + 1] > bounds[p] else None for p in range(aligner.num_pdfs)]
    return frames, counts


def _update_trans(aligner: Aligner, counts: np.ndarray) -> None:
    floor = aligner.config.transition_floor
    allowed = aligner.trans > 0
    tot = counts.sum(-1, keepdims=True)
    new = np.where(allowed, np.maximum(counts / np.maximum(tot, 1e-300), floor), 0.0)
    new /= np.maximum(new.sum(-1, keepdims=True), 1e-300)
    has = (tot[..., 0] > 0)
    aligner.trans[has] = new[has]


def _realign(al: Aligner, keys: list[str], tokens, words, F: list[np.ndarray], nj: int):
    """Viterbi paths of the training data: ``(ok, graphs, paths, log-likelihood per frame)`` for
    the indices ``ok`` of the utterances that have a path."""
    lt = al._scaled_trans()
    graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
    res = al.viterbi(graphs, F, nj=nj)
    ok = [i for i, (s, _) in enumerate(res) if np.isfinite(s)]
    avg = float(np.sum([res[i][0] * len(F[i]) for i in ok]) / max(1, sum(len(F[i]) for i in ok)))
    return ok, [graphs[i] for i in ok], [res[i][1] for i in ok], avg


def _pdf_covariances(frames: list) -> tuple[np.ndarray, np.ndarray]:
    """``(P, D, D)`` full covariances and ``(P,)`` counts of the frames of each pdf (0 for a pdf
    with no more frames than dimensions)."""
    D = next(f.shape[1] for f in frames if f is not None)
    covs = np.zeros((len(frames), D, D))
    n = np.zeros(len(frames))
    for p, f in enumerate(frames):
        if f is not None and len(f) > D:  # fewer frames give a singular covariance
            f = np.asarray(f, np.float64)
            n[p] = len(f)
            covs[p] = np.cov(f, rowvar=False, bias=True)
    return covs, n


def _apply_fmllr(W: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """``x @ A^T + b`` for ``W = [A b]`` (None = identity)."""
    if W is None:
        return x
    D = x.shape[1]
    return (x @ W[:, :D].T + W[:, D]).astype(np.float32)


def _estimate_speaker_fmllr(al: Aligner, graphs: list[AlignGraph], F: list[np.ndarray], Ft: list[np.ndarray],
                            paths: list[np.ndarray], spk: list[str], init: dict[str, np.ndarray]
                            ) -> dict[str, np.ndarray]:
    """fMLLR ``(D, D + 1)`` of each speaker from the state ``paths``: Gaussian posteriors from the
    model on the current features ``Ft``, statistics on the untransformed ``F``
    (:func:`estimate_fmllr`). A speaker with fewer than ``fmllr_min_frames`` frames keeps ``init``."""
    c = al.config
    out = dict(init)
    by_spk: dict[str, list[int]] = {}
    for i, s in enumerate(spk):
        by_spk.setdefault(s, []).append(i)
    gm = al.gmm
    for s, idx in by_spk.items():
        x = np.concatenate([F[i] for i in idx]).astype(np.float64)
        xt = np.concatenate([Ft[i] for i in idx]).astype(np.float64)
        if len(x) < c.fmllr_min_frames:
            continue
        pdf = np.concatenate([graphs[i].pdf[paths[i]] for i in idx])
        D = x.shape[1]
        xi = np.hstack([x, np.ones((len(x), 1))])
        a = np.zeros((len(x), D))  # sum_m gamma_tm / var_m
        b = np.zeros((len(x), D))  # sum_m gamma_tm mu_m / var_m
        for p in np.unique(pdf):
            rows = np.nonzero(pdf == p)[0]
            lc = gm.component_log_likelihood(xt[rows], int(p))
            g = np.exp(lc - np.max(lc, 1, keepdims=True))
            g /= g.sum(1, keepdims=True)
            used = np.isfinite(gm.log_weights[p])
            g = g[:, used]
            a[rows] = g @ (1.0 / gm.vars[p, used])
            b[rows] = g @ (gm.means[p, used] / gm.vars[p, used])
        K = b.T @ xi
        G = np.einsum("ti,tj,tk->ijk", a, xi, xi, optimize=True)
        out[s] = estimate_fmllr(float(len(x)), K, G, num_iters=c.fmllr_update_iters, init=out.get(s))
    return out


def _train_sat(al: Aligner, keys: list[str], tokens, words, F: list[np.ndarray], spk: list[str],
               rng: np.random.Generator, log, nj: int, callback, it_offset: int) -> list[np.ndarray]:
    """Speaker-adaptive training (Kaldi's ``train_sat.sh``; Anastasakos et al. 1996) continuing the
    current model: per-speaker fMLLR re-estimated on the passes in ``sat_fmllr_iters``, the GMMs
    re-estimated on the transformed features every pass, re-aligning on ``sat_realign_iters``.
    Returns the transformed training features."""
    c = al.config
    ok, pg, paths, _ = _realign(al, keys, tokens, words, F, nj)
    Ft = F
    W: dict[str, np.ndarray] = {}
    X = np.concatenate(F).astype(np.float64)
    var_floor = c.var_floor * X.var(0)
    for it in range(1, c.sat_iters + 1):
        t0 = time.time()
        msg = []
        if it in set(c.sat_fmllr_iters):
            W = _estimate_speaker_fmllr(al, pg, [F[i] for i in ok], [Ft[i] for i in ok], paths,
                                        [spk[i] for i in ok], W)
            Ft = [_apply_fmllr(W.get(s), f) for s, f in zip(spk, F)]
            msg.append(f"fMLLR of {len(W)} speakers")
        if it in set(c.sat_realign_iters):
            ok, pg, paths, avg = _realign(al, keys, tokens, words, Ft, nj)
            msg.append(f"realigned, log-likelihood per frame {avg:.3f}")
        frames, counts = _accumulate(al, pg, [Ft[i] for i in ok], paths)
        al.gmm.em_update(frames, var_floor, c.min_count)
        _update_trans(al, counts)
        log(f"SAT iteration {it}: {'; '.join(msg) or 'no realignment'} ({time.time() - t0:.1f} s)")
        if callback is not None:
            callback(it_offset + it, al)
    return Ft


def _train_stage(al: Aligner, name: str, keys: list[str], tokens, words, F: list[np.ndarray],
                 ok: list[int], paths: list[np.ndarray], num_iters: int, realign_iters: list[int],
                 mllt_iters: list[int], total_gauss: int, rng: np.random.Generator, log, nj: int,
                 callback, it_offset: int) -> list[np.ndarray]:
    """Viterbi training of ``al``'s current pdfs from the state ``paths`` of utterances ``ok``
    (Kaldi's ``train_deltas.sh`` / ``train_lda_mllt.sh`` loop): single Gaussians from the
    alignment, then ``num_iters`` EM passes, mixing up to ``total_gauss`` over the first
    ``max_iter_inc``, re-aligning on ``realign_iters`` and re-estimating an MLLT (when the model
    has an LDA transform) on ``mllt_iters``. Returns the training features (changed by an MLLT)."""
    c = al.config
    lt = al._scaled_trans()
    pg = [al.make_graph(tokens[keys[i]], None if words is None else words.get(keys[i]), _lt=lt) for i in ok]
    X = np.concatenate(F).astype(np.float64)
    var_floor = c.var_floor * X.var(0)
    al.gmm = DiagGmmSet.single(al.num_pdfs, X.mean(0), X.var(0))
    frames, _ = _accumulate(al, pg, [F[i] for i in ok], paths)
    al.gmm.em_update(frames, var_floor, c.min_count)
    realign, mllt = set(realign_iters), set(mllt_iters)
    num_gauss = float(al.num_pdfs)
    inc = max(0, total_gauss - num_gauss) / max(1, min(c.max_iter_inc, num_iters))
    for it in range(1, num_iters + 1):
        t0 = time.time()
        msg = []
        if it in mllt and al.transform is not None:
            frames, _ = _accumulate(al, pg, [F[i] for i in ok], paths)
            covs, n = _pdf_covariances(frames)
            A = estimate_mllt(covs, n)
            gain = mllt_objective(A, covs, n) - mllt_objective(np.eye(len(A)), covs, n)
            al.transform = A @ al.transform
            F = [(f @ A.T).astype(np.float32) for f in F]
            al.gmm.means = al.gmm.means @ A.T  # variances are re-estimated below (gmm-transform-means)
            al.gmm._cache = None
            var_floor = c.var_floor * np.concatenate(F).astype(np.float64).var(0)
            msg.append(f"MLLT, log-likelihood gain per frame {gain / max(1.0, n.sum()):.3f}")
        if it in realign:
            ok, pg, paths, avg = _realign(al, keys, tokens, words, F, nj)
            msg.append(f"realigned, log-likelihood per frame {avg:.3f}")
        frames, counts = _accumulate(al, pg, [F[i] for i in ok], paths)
        occ = al.gmm.em_update(frames, var_floor, c.min_count)
        _update_trans(al, counts)
        if it <= c.max_iter_inc:
            num_gauss = min(total_gauss, num_gauss + inc)
            al.gmm.split(split_targets(occ, int(round(num_gauss)), c.power, c.min_gauss_count), c.perturb, rng)
        log(f"{name} iteration {it}: {'; '.join(msg) or 'no realignment'}; "
            f"{int(al.gmm.num_components().sum())} Gaussians ({time.time() - t0:.1f} s)")
        if callback is not None:
            callback(it_offset + it, al)
    return F


def _train_triphones(al: Aligner, keys: list[str], tokens, words, F: list[np.ndarray],
                     rng: np.random.Generator, log, nj: int, callback, it_offset: int) -> list[np.ndarray]:
    """Triphone stage (Kaldi's ``train_deltas.sh``): statistics of every seen (left, phone, right,
    state) from the current alignment, questions from a clustering of the phones' monophone means,
    a tree per (phone, state) grown to ``tri_leaves`` leaves, then :func:`_train_stage`."""
    c = al.config
    t0 = time.time()
    ok, pg, paths, _ = _realign(al, keys, tokens, words, F, nj)
    N = len(al.phones)
    E = N
    ctxs = []
    for i, g, p in zip(ok, pg, paths):
        tid = np.array([al.phone_id[t] for t in tokens[keys[i]]])
        left = np.concatenate([[E], tid[:-1]])
        right = np.concatenate([tid[1:], [E]])
        tok = g.token[p]
        inside = tok >= 0
        ctxs.append(np.stack([np.where(inside, left[np.maximum(tok, 0)], E), g.label[p],
                              np.where(inside, right[np.maximum(tok, 0)], E), g.hmm_state[p]], 1))
    ctx = np.concatenate(ctxs)
    X = np.concatenate([F[i] for i in ok]).astype(np.float64)
    if c.duration_outlier_k > 0:
        keep = np.concatenate(_duration_inliers(al, pg, paths, c.duration_outlier_k))
        ctx, X = ctx[keep], X[keep]
    code = ((ctx[:, 0] * N + ctx[:, 1]) * (N + 1) + ctx[:, 2]) * al.num_states.max() + ctx[:, 3]
    uniq, inv = np.unique(code, return_inverse=True)
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv] = np.arange(len(inv))
    n = np.bincount(inv, minlength=len(uniq)).astype(np.float64)
    sx = np.zeros((len(uniq), X.shape[1]))
    sxx = np.zeros_like(sx)
    np.add.at(sx, inv, X)
    np.add.at(sxx, inv, X * X)
    # questions from the monophone GMMs: each phone's (weighted) state means, concatenated
    w = np.exp(al.gmm.log_weights)
    pdf_mean = np.einsum("pm,pmd->pd", w, al.gmm.means)
    S = int(al.num_states.max())
    pm = np.stack([np.concatenate([pdf_mean[al.pdf_offset[p] + min(s, al.num_states[p] - 1)] for s in range(S)])
                   for p in range(N)])
    questions = phone_questions(pm)
    ctx_pdf = build_context_tree(ctx[first], n, sx, sxx, N, al.num_states, questions, c.tri_leaves,
                                 c.tri_min_count, c.var_floor * X.var(0))
    al.set_tree(ctx_pdf)
    log(f"triphones: {len(uniq)} seen context states, {len(questions)} questions, {al.num_pdfs} tied states "
        f"({time.time() - t0:.1f} s)")
    return _train_stage(al, "triphone", keys, tokens, words, F, ok, paths, c.tri_iters, c.tri_realign_iters,
                        [], c.tri_total_gauss, rng, log, nj, callback, it_offset)


def _train_lda_mllt(al: Aligner, keys: list[str], tokens, words, base: list[np.ndarray],
                    rng: np.random.Generator, log, nj: int, callback, it_offset: int) -> list[np.ndarray]:
    """The LDA+MLLT stage (Kaldi's ``train_lda_mllt.sh``) from the current model's alignment
    (and its pdfs: monophone or tied triphone states): sets ``al.transform`` and re-trains
    ``al.gmm`` (:func:`_train_stage`); returns the training features in the new space."""
    c = al.config
    t0 = time.time()
    ok, pg, paths, _ = _realign(al, keys, tokens, words, base, nj)
    spliced = [splice(np.asarray(f[:, :c.n_mfcc], np.float32), c.lda_context) for f in base]
    labels = np.concatenate([g.pdf[p] for g, p in zip(pg, paths)])
    S = np.concatenate([spliced[i] for i in ok])
    dim = min(c.lda_dim, S.shape[1])
    al.transform = estimate_lda(S, labels, dim, al.num_pdfs)
    F = [(x @ al.transform.T).astype(np.float32) for x in spliced]
    log(f"LDA: {S.shape[1]} -> {dim} dimensions, {len(np.unique(labels))} classes ({time.time() - t0:.1f} s)")
    total = c.tri_total_gauss if al.ctx_pdf is not None else c.total_gauss
    return _train_stage(al, "LDA+MLLT", keys, tokens, words, F, ok, paths, c.lda_iters, c.lda_realign_iters,
                        c.mllt_iters, total, rng, log, nj, callback, it_offset)


def train_aligner(data_dir: str | os.PathLike, exp_dir: str | os.PathLike,
                  config: AlignerConfig | None = None, nj: int = 1,
                  callback: Callable[[int, Aligner], None] | None = None) -> tuple[Aligner, AlignResult]:
    """Train a monophone HMM-GMM aligner on a data dir, save it in ``exp_dir`` and align the data.

    Writes ``exp_dir/{final.mdl, phones.txt, config.yaml, log/train.log}`` (not the alignments:
    see :meth:`AlignResult.write`).

    Args:
        data_dir: Kaldi data dir with ``wav.scp`` (+ ``segments``), ``text`` (phone tokens),
            ``utt2spk`` and optionally ``phone_info`` (word boundaries for optional silence).
        exp_dir: output directory.
        config: training/alignment settings (default :class:`AlignerConfig`).
        nj: parallel processes for features and alignment.
        callback: called as ``callback(iteration, aligner)`` after every training pass (for
            monitoring, e.g. boundary accuracy against reference labels).

    Returns:
        ``(aligner, result)``: the trained aligner and the alignment of ``data_dir`` by its final model.

    Raises:
        FileNotFoundError / DataError: missing or malformed inputs (named file and line).
        DataError: no utterance usable for training.
    """
    c = config or AlignerConfig()
    exp_dir = Path(exp_dir)
    log = _TrainLog(exp_dir / "log" / "train.log")
    t_start = time.time()
    try:
        d, tokens, words = _read_inputs(data_dir)
        if not c.optional_silence:
            words = None
        feats, durs, failed = compute_features(d, d.utts, c, nj)
        log(f"features: {len(feats)} utterances, {sum(len(f) for f in feats.values())} frames "
            f"({time.time() - t_start:.1f} s)")
        inventory = sorted({t for u in feats for t in tokens[u]})
        if c.optional_silence:
            inventory = sorted(set(inventory) | {SIL})
        if not inventory:
            raise DataError(f"{data_dir}/text: no tokens to train on")
        al = Aligner(c, inventory)
        rng = np.random.default_rng(c.seed)
        lt = al._scaled_trans()
        keys, graphs, eq_graphs = [], [], []
        skipped: dict[str, str] = dict(failed)
        for u in sorted(feats):
            toks = tokens[u]
            if not toks:
                skipped[u] = "empty text"
                continue
            g = al.make_graph(toks, None if words is None else words.get(u), _lt=lt)
            if len(feats[u]) < g.min_frames():
                skipped[u] = f"too few frames: {len(feats[u])} frames for {len(toks)} tokens"
                continue
            eg = al.make_graph(toks, equal_path=True, _lt=lt)
            if len(feats[u]) < eg.num_states and al.sil_id is not None:  # too short to also hold silence
                eg = al.make_graph(toks, equal_path=True, silence=False, _lt=lt)
            keys.append(u)
            graphs.append(g)
            eq_graphs.append(eg if len(feats[u]) >= eg.num_states else None)
        if skipped:
            log(f"not used for training: {len(skipped)} utterance(s), e.g. "
                + ", ".join(f"{u} ({r})" for u, r in list(skipped.items())[:MAX_LISTED]))
        if not keys:
            raise DataError(f"{data_dir}: no utterance can be used to train the aligner "
                            f"({len(skipped)} skipped)")
        F = [feats[u] for u in keys]
        X = np.concatenate(F).astype(np.float64)
        gmean, gvar = X.mean(0), X.var(0)
        var_floor = c.var_floor * gvar
        al.gmm = DiagGmmSet.single(al.num_pdfs, gmean, gvar)
        # ---- flat start: equal alignment
        eq_paths, eq_g, eq_f = [], [], []
        for g, f in zip(eq_graphs, F):
            if g is None:
                continue
            eq_paths.append((np.arange(len(f)) * g.num_states) // len(f))
            eq_g.append(g)
            eq_f.append(f)
        frames, counts = _accumulate(al, eq_g, eq_f, eq_paths)
        occ = al.gmm.em_update(frames, var_floor, c.min_count)
        _update_trans(al, counts)
        num_gauss = al.num_pdfs
        inc = max(0, (c.total_gauss - num_gauss)) / max(1, c.max_iter_inc)
        log(f"iteration 0 (equal alignment): {al.num_pdfs} pdfs, {len(keys)} utterances")
        paths = None
        realign = set(c.realign_iters)
        for it in range(1, c.num_iters + 1):
            t0 = time.time()
            if it <= c.baum_welch_iters:
                lt = al._scaled_trans()
                graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
                scale = c.train_acoustic_scale
                if c.train_acoustic_scale_final is not None and c.baum_welch_iters > 1:
                    frac = (it - 1) / (c.baum_welch_iters - 1)
                    scale = c.train_acoustic_scale * (c.train_acoustic_scale_final / c.train_acoustic_scale) ** frac
                fb = al.forward_backward(graphs, F, nj=nj, scale=scale)
                frames, counts = _accumulate_posteriors(al, graphs, F, fb)
                msg = "Baum-Welch"
            elif it in realign or paths is None:
                lt = al._scaled_trans()
                graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
                res = al.viterbi(graphs, F, nj=nj)
                ok = [i for i, (s, _) in enumerate(res) if np.isfinite(s)]
                paths = [res[i][1] for i in ok]
                pg, pf = [graphs[i] for i in ok], [F[i] for i in ok]
                avg = float(np.sum([res[i][0] * len(F[i]) for i in ok]) / max(1, sum(len(F[i]) for i in ok)))
                msg = f"realigned, log-likelihood per frame {avg:.3f}"
            else:
                msg = "no realignment"
            if it > c.baum_welch_iters:
                frames, counts = _accumulate(al, pg, pf, paths)
            occ = al.gmm.em_update(frames, var_floor, c.min_count)
            _update_trans(al, counts)
            if it <= c.max_iter_inc:
                num_gauss = min(c.total_gauss, num_gauss + inc)
                al.gmm.split(split_targets(occ, int(round(num_gauss)), c.power, c.min_gauss_count), c.perturb, rng)
            log(f"iteration {it}: {msg}; {int(al.gmm.num_components().sum())} Gaussians "
                f"({time.time() - t0:.1f} s)")
            if callback is not None:
                callback(it, al)
        it_offset = c.num_iters
        if c.tri_leaves > 0:
            F = _train_triphones(al, keys, tokens, words, F, rng, log, nj, callback, it_offset)
            it_offset += c.tri_iters
        if c.lda_dim > 0:
            F = _train_lda_mllt(al, keys, tokens, words, [feats[u] for u in keys], rng, log, nj, callback,
                                it_offset)
            it_offset += c.lda_iters
        if c.sat_iters > 0:
            F = _train_sat(al, keys, tokens, words, F, [d.utt2spk.get(u, u) for u in keys], rng, log, nj,
                           callback, it_offset)
            it_offset += c.sat_iters
        for r in range(1, c.refine_iters + 1):
            t0 = time.time()
            lt = al._scaled_trans()
            graphs = [al.make_graph(tokens[u], None if words is None else words.get(u), _lt=lt) for u in keys]
            res = al.viterbi(graphs, F, nj=nj)
            ok = [i for i, (sc, _) in enumerate(res) if np.isfinite(sc)]
            targets = [graphs[i].pdf[res[i][1]] for i in ok]
            al.mlp = FrameClassifier.train([F[i] for i in ok], targets, al.num_pdfs, c, seed=c.seed + r)
            log(f"refinement {r}: frame classifier trained on {sum(len(t) for t in targets)} frames, "
                f"frame accuracy {al.mlp.train_accuracy:.3f} ({time.time() - t0:.1f} s)")
            if callback is not None:
                callback(c.num_iters + r, al)
        al.save(exp_dir)
        log(f"saved {exp_dir / MODEL_FILE}; training took {time.time() - t_start:.1f} s")
        result = al.align_features(feats, tokens, words, durs, nj, utt2spk=d.utt2spk)
        result.unaligned.update(failed)
        result.unaligned = dict(sorted(result.unaligned.items()))
        log(f"aligned {len(result.alignments)} utterance(s), {len(result.unaligned)} not aligned")
        return al, result
    finally:
        log.close()


def load_aligner_config(path: str | os.PathLike | None = None, overrides: list[str] = ()) -> AlignerConfig:
    """:class:`AlignerConfig` from defaults, an optional YAML file and ``key=value`` overrides."""
    return load_config(AlignerConfig, path, overrides)
