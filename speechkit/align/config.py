"""Settings of the forced aligner (:class:`AlignerConfig`, defaults after Kaldi's ``train_mono.sh``)
and the names of the files it writes into an experiment dir."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal, Optional

from speechkit.utils.config import FieldError, load_config

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


def load_aligner_config(path: str | os.PathLike | None = None, overrides: list[str] = ()) -> AlignerConfig:
    """:class:`AlignerConfig` from defaults, an optional YAML file and ``key=value`` overrides."""
    return load_config(AlignerConfig, path, overrides)
