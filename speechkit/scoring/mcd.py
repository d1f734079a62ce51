"""Objective scores of WORLD acoustic features: mel-cepstral distortion, F0 RMSE, V/UV accuracy.

The standard objective measures of statistical parametric TTS (e.g. Pascual et al., "Self-Attention
Linguistic-Acoustic Decoder", IberSPEECH 2018, Table 2; Zen et al. 2013), computed between a reference
(natural speech analysed by WORLD) and a prediction of the same length (durations are forced, so
frame ``t`` of one is frame ``t`` of the other; no DTW). Features have the WORLD layout of
:func:`speechkit.features.world.world_streams`::

    [ mcep (mcep_dim, c0 first) | lf0 (natural log, interpolated) | vuv (0/1) | bap (num_bap) ]

Measures, for frames ``t`` and mel-cepstra ``c_t`` (without c0 unless stated):

* MCD in dB = ``(10 sqrt(2) / ln 10) * mean_t ||c_ref,t - c_hyp,t||_2`` (Kubichek 1993; the
  constant is :data:`MCD_CONSTANT` = 6.1418...). Reported on ``mcep[1:]`` (the usual figure, c0 is
  the frame energy) and on the whole ``mcep`` (with c0).
* F0 RMSE in Hz = ``sqrt(mean (F0_ref - F0_hyp)^2)`` over frames voiced in both
  (``vuv > 0.5``), ``F0 = exp(lf0)``.
* V/UV accuracy in % = share of frames whose voicing decisions (``vuv > 0.5``) agree.
* V/UV beside it, because outside silence most frames are voiced and an accuracy near the share
  of voiced frames says nothing (:meth:`WorldScores.vuv_figures`): the **unvoiced class's recall**
  (reference-unvoiced frames the prediction calls unvoiced) and **precision** (predicted-unvoiced
  frames that are unvoiced in the reference), the **voiced recall**, the **balanced accuracy**
  (mean of the two recalls; 50 % for a constant decision, except under the authors' convention,
  whose zeroed silent frames are unvoiced hits of any decision) and the **majority baseline**: the
  accuracy of the better constant decision ("voiced" or "unvoiced") on the same frames, scored
  under the same convention. All in %; a ratio with an empty denominator is NaN (JSON null), e.g.
  the unvoiced precision of a model that never predicts "unvoiced".

Pooling: every measure is pooled over all scored frames of all utterances (one long utterance),
so long utterances weigh more; the mean of per-utterance MCDs is reported next to it.

Silence masking (``alignments``): frames whose time ``t * frame_shift`` falls inside a silence
phone of the utterance's ``phone_alignments`` are **left out** of every measure. The authors'
code (santi-pdp/musa_tts) instead multiplies the features by a 0/1 mask, which scores the silent
frames of both sides as identical (distance 0, same voicing), i.e. counts them as perfect and
lowers the MCD by the share of silence; the figures here are therefore not directly comparable
to those of a zeroing implementation.

What the SALAD paper states (sec. 4): "the MCD measured in decibels", "the root mean squared error
(RMSE) of the F0 prediction in Hertz" and the accuracy of the voiced/unvoiced flag, "where classes
are balanced by nature", following "the same formulations as in our previous works"; it does not
state whether c0 or silent frames are scored, nor over which frames the F0 RMSE runs. Outside
silence the classes are far from balanced (most frames are voiced), so a V/UV accuracy near the
share of voiced frames is what a constant "voiced" decision scores.

Conventions (``convention``, :data:`CONVENTIONS`): the measures above are ``"speechkit"`` (the
default). ``"authors"`` computes the figures as the SALAD authors' evaluation does (musa_tts's
``eval_aco_epoch``), so that numbers can be set beside the paper's:

* MCD over **all** ``mcep_dim`` columns (c0 included);
* F0 RMSE over **every** scored frame of the ``exp(lf0)`` contours as stored (the interpolated
  contour of the reference, the predicted one of the hypothesis), whatever the voicing;
* with silence masking, silent frames are **zeroed**, not left out: they stay in every
  denominator with distance 0, F0 error 0 and agreeing voicing;
* V/UV accuracy as above (the decisions ``vuv > 0.5``), silent frames counted as agreeing: zeroed
  features have ``vuv = 0``, so each silent frame is an unvoiced frame of both sides and counts as
  one in the unvoiced recall and precision, and a constant decision (the majority baseline) gets
  it right too.

Both conventions pool over frames; ``mcd_with_c0_db`` is c0 included with silence left out in both.

Library use (e.g. validation in a training task)::

    from speechkit.scoring.mcd import mcd_db, score_world
    mcd = mcd_db(ref_feats[:, :40], pred_feats[:, :40])           # dB, c0 excluded
    res = score_world({"u1": ref_feats}, {"u1": pred_feats})     # WorldScores
    res.mcd_db, res.f0_rmse_hz, res.vuv_accuracy, res.to_dict()
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.features.io import ScpReader
from speechkit.features.world import WorldLayout, read_world_layout
from speechkit.scoring.feature_dir import FeatureDir, resolve_frame_shift
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, atomic_write

logger = logging.getLogger(__name__)

__all__ = [
    "MCD_CONSTANT", "DEFAULT_FRAME_SHIFT", "CONVENTIONS", "CONVENTION_DEFINITIONS", "UttScore", "WorldScores",
    "check_convention", "frame_mcd_db", "mcd_db", "voiced_f0_hz", "silence_keep_mask", "score_utterance", "score_world",
    "open_features", "frame_shift_of", "score_world_dirs", "write_per_utt", "report_lines", "vuv_line",
]

#: ``10 sqrt(2) / ln 10`` = 6.141851463713754: converts a Euclidean cepstral distance to dB.
MCD_CONSTANT = 10.0 * math.sqrt(2.0) / math.log(10.0)

#: Frame shift (s) of the WORLD features when a directory has no ``frame_shift`` file.
DEFAULT_FRAME_SHIFT = 0.005

#: Scoring conventions (see the module doc): speechkit's (the default) and the SALAD authors'.
CONVENTIONS = ("speechkit", "authors")

#: One line per convention: what its MCD, F0 RMSE and silence handling are (written into score JSONs).
CONVENTION_DEFINITIONS = {
    "speechkit": "MCD over mcep[1:] (c0 left out); F0 RMSE over frames voiced in both; "
                 "silence frames left out",
    "authors": "MCD over all mcep columns (c0 included); F0 RMSE over every frame of the exp(lf0) contours "
               "(interpolated reference); silence frames zeroed (kept in the denominators as perfect), "
               "as santi-pdp/musa_tts eval_aco_epoch",
}


def check_convention(convention: str) -> str:
    """``convention`` if it is one of :data:`CONVENTIONS`.

    Raises:
        ValueError: another value (names the known ones).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown scoring convention {convention!r} (known: {', '.join(CONVENTIONS)})")
    return convention


# ----------------------------------------------------------------------------- frame-level measures


def frame_mcd_db(ref_mcep: np.ndarray, hyp_mcep: np.ndarray, include_c0: bool = False) -> np.ndarray:
    """Per-frame mel-cepstral distortion in dB: ``MCD_CONSTANT * ||ref_t - hyp_t||_2``.

    Args:
        ref_mcep, hyp_mcep: ``(T, D)`` mel-cepstra, c0 in column 0 (numpy arrays; detached CPU torch
            tensors are converted).
        include_c0: also count column 0 (the energy term); default False, the usual MCD.

    Returns:
        ``(T,)`` float64 distances in dB. NaN/Inf in the inputs propagate.

    Raises:
        ValueError: the shapes differ or are not 2-D.
    """
    ref = np.asarray(ref_mcep, dtype=np.float64)
    hyp = np.asarray(hyp_mcep, dtype=np.float64)
    if ref.ndim != 2 or ref.shape != hyp.shape:
        raise ValueError(f"mel-cepstra must be two (frames, dim) arrays of one shape, got {ref.shape} and {hyp.shape}")
    lo = 0 if include_c0 else 1
    diff = ref[:, lo:] - hyp[:, lo:]
    return MCD_CONSTANT * np.sqrt(np.einsum("td,td->t", diff, diff))


def mcd_db(ref_mcep: np.ndarray, hyp_mcep: np.ndarray, include_c0: bool = False) -> float:
    """Mel-cepstral distortion in dB, averaged over the frames of one ``(T, D)`` pair.

    ``(10 sqrt(2) / ln 10) * (1/T) sum_t sqrt(sum_d (ref[t, d] - hyp[t, d])^2)``, ``d`` from 1
    (c0 excluded) unless ``include_c0``. Frames must already correspond (no DTW).

    Raises:
        ValueError: the shapes differ, are not 2-D, or ``T == 0``.
    """
    d = frame_mcd_db(ref_mcep, hyp_mcep, include_c0)
    if d.size == 0:
        raise ValueError("mcd_db: no frames")
    return float(d.mean())


def voiced_f0_hz(feats: np.ndarray, conf: "WorldLayout | Mapping | object | None" = None) -> np.ndarray:
    """F0 in Hz (``exp(lf0)``) of the voiced frames (``vuv > 0.5``) of one ``(T, dim)`` WORLD matrix.

    For F0 histograms (:func:`speechkit.scoring.plots.plot_f0_histograms`). Returns ``(V,)`` float64.
    """
    lay = WorldLayout.from_conf(conf)
    x = np.asarray(feats, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != lay.dim:
        raise ValueError(f"expected a (frames, {lay.dim}) WORLD matrix ({lay.describe()}), got shape {x.shape}")
    return np.exp(x[x[:, lay.vuv] > 0.5, lay.lf0])


def silence_keep_mask(segments: Sequence[tuple[float, float, str]], num_frames: int, frame_shift: float,
                      silence_phones: Iterable[str] = ("sil",), utt: str = "<utt>",
                      tolerance: float = 0.05) -> np.ndarray:
    """Frames to keep: False where ``t * frame_shift`` lies inside a silence phone.

    A segment covers ``[start, end)``; a frame at or after the last segment's end (the last
    frame of an utterance can sit exactly on it) belongs to the last segment.

    Args:
        segments: ``[(start_s, end_s, phone), ...]`` of one utterance in time order
            (:func:`speechkit.data.corpora._common.read_phone_alignments`).
        num_frames: ``T``.
        frame_shift: seconds per frame.
        silence_phones: phone labels that count as silence.
        utt: the utterance id, for messages.
        tolerance: seconds by which the alignment's end may differ from the features' extent
            (``(T - 1) * frame_shift`` .. ``T * frame_shift``).

    Returns:
        ``(T,)`` bool, True = scored.

    Raises:
        DataError: no segment, segments out of time order, or an alignment whose end is more
            than ``tolerance`` away from the features' duration (names the utterance).
    """
    if not segments:
        raise DataError(f"{utt}: empty phone alignment")
    starts = np.array([s for s, _, _ in segments], dtype=np.float64)
    if np.any(np.diff(starts) < 0):
        raise DataError(f"{utt}: phone alignment segments are not in time order")
    end = float(segments[-1][1])
    if end < (num_frames - 1) * frame_shift - tolerance or end > num_frames * frame_shift + tolerance:
        raise DataError(f"{utt}: phone alignment ends at {end:.3f} s but the {num_frames} feature frames "
                        f"span {(num_frames - 1) * frame_shift:.3f}-{num_frames * frame_shift:.3f} s "
                        f"(frame shift {frame_shift:g} s): alignment of another recording?")
    sil = set(silence_phones)
    is_sil = np.array([p in sil for _, _, p in segments])
    times = np.arange(num_frames) * frame_shift
    seg = np.clip(np.searchsorted(starts, times + 1e-9, side="right") - 1, 0, len(segments) - 1)
    return ~is_sil[seg]


# ----------------------------------------------------------------------------- utterance / corpus scores


@dataclass
class UttScore:
    """Sufficient statistics of one utterance (sums, so that corpora pool exactly).

    Attributes:
        utt: id. n_frames: frames scored (after masking). n_masked: frames left out as silence.
        mcd_sum / mcd_c0_sum: sums of per-frame MCD in dB without / with c0.
        f0_sq_sum: sum of squared F0 errors (Hz^2) over the ``n_voiced_both`` frames voiced in both.
        f0_all_sq_sum: sum of squared F0 errors (Hz^2) of the ``exp(lf0)`` contours over every
            scored frame, whatever the voicing (the ``"authors"`` convention).
        n_vuv_correct: frames whose voicing decisions agree.
        n_ref_unvoiced / n_hyp_unvoiced: scored frames unvoiced (``vuv <= 0.5``) in the reference /
            in the prediction; n_unvoiced_both: unvoiced in both
            (``n_vuv_correct = n_voiced_both + n_unvoiced_both``).
        convention: which figures the properties give (:data:`CONVENTIONS`; see the module doc):
            ``"authors"`` counts the ``n_masked`` silent frames as zeroed (distance 0, agreeing).
    """

    utt: str
    n_frames: int
    n_masked: int = 0
    mcd_sum: float = 0.0
    mcd_c0_sum: float = 0.0
    f0_sq_sum: float = 0.0
    n_voiced_both: int = 0
    n_vuv_correct: int = 0
    f0_all_sq_sum: float = 0.0
    convention: str = "speechkit"
    n_ref_unvoiced: int = 0
    n_hyp_unvoiced: int = 0
    n_unvoiced_both: int = 0

    @property
    def _authors(self) -> bool:
        return self.convention == "authors"

    @property
    def mcd_db(self) -> float:
        """MCD in dB: speechkit: c0 left out, over the scored frames; authors: c0 included, over
        the scored and the zeroed silent frames."""
        if self._authors:
            n = self.n_frames + self.n_masked
            return self.mcd_c0_sum / n if n else math.nan
        return self.mcd_sum / self.n_frames if self.n_frames else math.nan

    @property
    def mcd_with_c0_db(self) -> float:
        return self.mcd_c0_sum / self.n_frames if self.n_frames else math.nan

    @property
    def f0_rmse_hz(self) -> float:
        """F0 RMSE in Hz: speechkit: over frames voiced in both; authors: over every frame."""
        if self._authors:
            n = self.n_frames + self.n_masked
            return math.sqrt(self.f0_all_sq_sum / n) if n else math.nan
        return math.sqrt(self.f0_sq_sum / self.n_voiced_both) if self.n_voiced_both else math.nan

    @property
    def vuv_accuracy(self) -> float:
        """Percent of agreeing voicing decisions (authors: zeroed silent frames agree)."""
        if self._authors:
            n = self.n_frames + self.n_masked
            return 100.0 * (self.n_vuv_correct + self.n_masked) / n if n else math.nan
        return 100.0 * self.n_vuv_correct / self.n_frames if self.n_frames else math.nan

    def to_dict(self) -> dict:
        return {"utt": self.utt, "n_frames": self.n_frames, "n_masked": self.n_masked,
                "mcd_db": _num(self.mcd_db), "mcd_with_c0_db": _num(self.mcd_with_c0_db),
                "f0_rmse_hz": _num(self.f0_rmse_hz), "n_voiced_both": self.n_voiced_both,
                "vuv_accuracy": _num(self.vuv_accuracy)}


def _num(x: float) -> float | None:
    """JSON has no NaN: write null."""
    return None if x is None or not math.isfinite(x) else float(x)


def score_utterance(ref: np.ndarray, hyp: np.ndarray, conf: "WorldLayout | Mapping | object | None" = None,
                    keep: np.ndarray | None = None, utt: str = "<utt>",
                    names: tuple[str, str] = ("REF", "HYP"), convention: str = "speechkit") -> UttScore:
    """Statistics of one frame-aligned pair of WORLD matrices.

    Args:
        ref, hyp: ``(T, dim)`` WORLD features, ``dim = mcep_dim + 2 + num_bap``.
        conf: the layout (see :meth:`WorldLayout.from_conf`); None = 40 mcep at 16 kHz.
        keep: optional ``(T,)`` bool, False = frame left out (see :func:`silence_keep_mask`).
        utt, names: for messages.
        convention: which figures the result's properties give (:data:`CONVENTIONS`); the
            statistics of both are collected either way.

    Raises:
        DataError: wrong dimension, different frame counts, or NaN/Inf (names the utterance).
        ValueError: an unknown ``convention``.
    """
    check_convention(convention)
    lay = WorldLayout.from_conf(conf)
    r = np.asarray(ref, dtype=np.float64)
    h = np.asarray(hyp, dtype=np.float64)
    for x, name in ((r, names[0]), (h, names[1])):
        if x.ndim != 2 or x.shape[1] != lay.dim:
            raise DataError(f"{name}[{utt}]: shape {x.shape}, expected (frames, {lay.dim}) for the WORLD "
                            f"layout {lay.describe()}")
    if r.shape[0] != h.shape[0]:
        raise DataError(f"{utt}: {r.shape[0]} frames in {names[0]} but {h.shape[0]} in {names[1]} "
                        "(durations are forced, so they must match)")
    for x, name in ((r, names[0]), (h, names[1])):
        bad = ~np.isfinite(x)
        if bad.any():
            raise DataError(f"{name}[{utt}]: NaN or Inf in frame {int(np.argwhere(bad)[0, 0])}")
    n_masked = 0
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (r.shape[0],):
            raise ValueError(f"{utt}: keep mask has shape {keep.shape}, expected ({r.shape[0]},)")
        n_masked = int((~keep).sum())
        r, h = r[keep], h[keep]
    d = frame_mcd_db(r[:, lay.mcep], h[:, lay.mcep])
    d0 = frame_mcd_db(r[:, lay.mcep], h[:, lay.mcep], include_c0=True)
    vr, vh = r[:, lay.vuv] > 0.5, h[:, lay.vuv] > 0.5
    both = vr & vh
    f0_all_err = np.exp(r[:, lay.lf0]) - np.exp(h[:, lay.lf0])
    f0_err = f0_all_err[both]
    return UttScore(utt=utt, n_frames=int(r.shape[0]), n_masked=n_masked, mcd_sum=float(d.sum()),
                    mcd_c0_sum=float(d0.sum()), f0_sq_sum=float(f0_err @ f0_err),
                    n_voiced_both=int(both.sum()), n_vuv_correct=int((vr == vh).sum()),
                    f0_all_sq_sum=float(f0_all_err @ f0_all_err), convention=convention,
                    n_ref_unvoiced=int((~vr).sum()), n_hyp_unvoiced=int((~vh).sum()),
                    n_unvoiced_both=int((~vr & ~vh).sum()))


@dataclass
class WorldScores:
    """Scores of a set of utterances, pooled over all their scored frames.

    Attributes:
        layout: the feature layout.
        utts: per-utterance statistics, in scoring order.
        convention: ``"speechkit"`` or ``"authors"`` (:data:`CONVENTIONS`): which figures
            ``mcd_db``, ``f0_rmse_hz``, ``vuv_accuracy`` and ``mcd_db_utt_mean`` give (module doc).
        mcd_db / mcd_with_c0_db: pooled MCD (dB) under the convention (speechkit: c0 left out;
            authors: c0 included, silent frames zeroed) / with c0 and silence left out (both
            conventions); mcd_db_utt_mean / mcd_with_c0_db_utt_mean: the mean of per-utterance MCDs.
        f0_rmse_hz: speechkit: pooled over frames voiced in both (nan when there is none);
            authors: over every frame, silent ones zeroed.
        vuv_accuracy: percent of frames with agreeing voicing (authors: zeroed silent ones agree).
        n_frames / n_masked / n_voiced_both: totals (n_frames: frames scored, silence left out).
        utts_no_voiced_both: utterances with no frame voiced in both (no F0 contribution).
        ignored_hyp: HYP utterances absent from REF (not scored).
    """

    layout: WorldLayout
    utts: list[UttScore]
    ignored_hyp: list[str] = field(default_factory=list)
    frame_shift: float | None = None
    silence_phones: list[str] | None = None
    convention: str = "speechkit"

    def _sum(self, attr: str) -> float:
        return sum(getattr(u, attr) for u in self.utts)

    @property
    def _authors(self) -> bool:
        return self.convention == "authors"

    @property
    def n_frames(self) -> int:
        return int(self._sum("n_frames"))

    @property
    def n_masked(self) -> int:
        return int(self._sum("n_masked"))

    @property
    def n_voiced_both(self) -> int:
        return int(self._sum("n_voiced_both"))

    @property
    def mcd_db(self) -> float:
        if self._authors:
            n = self.n_frames + self.n_masked
            return self._sum("mcd_c0_sum") / n if n else math.nan
        return self._sum("mcd_sum") / self.n_frames if self.n_frames else math.nan

    @property
    def mcd_with_c0_db(self) -> float:
        return self._sum("mcd_c0_sum") / self.n_frames if self.n_frames else math.nan

    @property
    def mcd_db_utt_mean(self) -> float:
        v = [u.mcd_db for u in self.utts if u.n_frames or (self._authors and u.n_masked)]
        return float(np.mean(v)) if v else math.nan

    @property
    def mcd_with_c0_db_utt_mean(self) -> float:
        v = [u.mcd_with_c0_db for u in self.utts if u.n_frames]
        return float(np.mean(v)) if v else math.nan

    @property
    def f0_rmse_hz(self) -> float:
        if self._authors:
            n = self.n_frames + self.n_masked
            return math.sqrt(self._sum("f0_all_sq_sum") / n) if n else math.nan
        n = self.n_voiced_both
        return math.sqrt(self._sum("f0_sq_sum") / n) if n else math.nan

    @property
    def vuv_accuracy(self) -> float:
        if self._authors:
            n = self.n_frames + self.n_masked
            return 100.0 * (self._sum("n_vuv_correct") + self.n_masked) / n if n else math.nan
        return 100.0 * self._sum("n_vuv_correct") / self.n_frames if self.n_frames else math.nan

    @property
    def utts_no_voiced_both(self) -> list[str]:
        return [u.utt for u in self.utts if u.n_voiced_both == 0]

    def vuv_counts(self) -> dict[str, int]:
        """The voicing confusion counts under the convention, unvoiced as the class of interest.

        Returns:
            ``{"n": frames, "ref_unvoiced", "ref_voiced", "hyp_unvoiced", "unvoiced_both",
            "voiced_both"}``. Speechkit: the scored frames (silence left out). Authors: the
            ``n_masked`` zeroed silent frames are added as frames unvoiced in both (their
            ``vuv`` is 0 on both sides), as :attr:`vuv_accuracy` counts them as agreeing.
        """
        extra = self.n_masked if self._authors else 0
        n = self.n_frames + extra
        ref_u = int(self._sum("n_ref_unvoiced")) + extra
        return {"n": n, "ref_unvoiced": ref_u, "ref_voiced": n - ref_u,
                "hyp_unvoiced": int(self._sum("n_hyp_unvoiced")) + extra,
                "unvoiced_both": int(self._sum("n_unvoiced_both")) + extra, "voiced_both": self.n_voiced_both}

    def vuv_figures(self) -> dict[str, float | str]:
        """V/UV figures that can tell a model from a constant decision (module doc), in %.

        With ``c = vuv_counts()``, unvoiced as the positive class:

        * ``vuv_unvoiced_recall`` = ``100 unvoiced_both / ref_unvoiced``;
        * ``vuv_unvoiced_precision`` = ``100 unvoiced_both / hyp_unvoiced``;
        * ``vuv_voiced_recall`` = ``100 voiced_both / ref_voiced``;
        * ``vuv_balanced_accuracy`` = the mean of the two recalls (50 for a constant decision in the
          speechkit convention; the authors' zeroed silent frames are unvoiced hits whatever is predicted);
        * ``vuv_majority_baseline`` = ``100 max(ref_voiced, ref_unvoiced) / n``, the accuracy of
          the constant decision ``vuv_majority_class`` ("voiced" on a tie) on the same frames under
          the same convention (authors: the zeroed silent frames agree with it too).

        A ratio with an empty denominator is NaN.
        """
        c = self.vuv_counts()

        def pct(a: int, b: int) -> float:
            return 100.0 * a / b if b else math.nan

        rec_u, rec_v = pct(c["unvoiced_both"], c["ref_unvoiced"]), pct(c["voiced_both"], c["ref_voiced"])
        voiced_major = c["ref_voiced"] >= c["ref_unvoiced"]
        return {"vuv_unvoiced_recall": rec_u, "vuv_unvoiced_precision": pct(c["unvoiced_both"], c["hyp_unvoiced"]),
                "vuv_voiced_recall": rec_v,
                "vuv_balanced_accuracy": (rec_u + rec_v) / 2.0,
                "vuv_majority_baseline": pct(max(c["ref_voiced"], c["ref_unvoiced"]), c["n"]),
                "vuv_majority_class": "voiced" if voiced_major else "unvoiced"}

    def summary(self) -> str:
        """``MCD 5.43 dB (with c0 6.10)  F0 RMSE 14.56 Hz  V/UV 94.5 %``; under the authors'
        convention ``MCD 6.10 dB  F0 RMSE 20.31 Hz  V/UV 95.2 %  (authors' convention: ...)``."""
        if self._authors:
            return (f"MCD {self.mcd_db:.2f} dB  F0 RMSE {self.f0_rmse_hz:.2f} Hz  V/UV {self.vuv_accuracy:.1f} %  "
                    "(authors' convention: c0 included, F0 over all frames, silence zeroed)")
        return (f"MCD {self.mcd_db:.2f} dB (with c0 {self.mcd_with_c0_db:.2f})  "
                f"F0 RMSE {self.f0_rmse_hz:.2f} Hz  V/UV {self.vuv_accuracy:.1f} %")

    def to_dict(self, per_utt: bool = True) -> dict:
        """Every figure (NaN written as null), the counts and, if ``per_utt``, each utterance's."""
        out = {
            "convention": self.convention, "convention_definition": CONVENTION_DEFINITIONS[self.convention],
            "mcd_db": _num(self.mcd_db), "mcd_with_c0_db": _num(self.mcd_with_c0_db),
            "mcd_db_utt_mean": _num(self.mcd_db_utt_mean),
            "mcd_with_c0_db_utt_mean": _num(self.mcd_with_c0_db_utt_mean),
            "f0_rmse_hz": _num(self.f0_rmse_hz), "vuv_accuracy": _num(self.vuv_accuracy),
            **{k: (v if isinstance(v, str) else _num(v)) for k, v in self.vuv_figures().items()},
            "vuv_counts": self.vuv_counts(),
            "pooling": "all scored frames of all utterances (utt_mean: mean of per-utterance MCDs)",
            "mcd_constant": MCD_CONSTANT,
            "n_utts": len(self.utts), "n_frames": self.n_frames, "n_masked": self.n_masked,
            "n_voiced_both": self.n_voiced_both,
            "n_utts_no_voiced_both": len(self.utts_no_voiced_both),
            "utts_no_voiced_both": self.utts_no_voiced_both,
            "n_hyp_ignored": len(self.ignored_hyp),
            "mcep_dim": self.layout.mcep_dim, "num_bap": self.layout.num_bap,
            "frame_shift": self.frame_shift, "silence_phones": self.silence_phones,
        }
        if per_utt:
            out["utterances"] = [u.to_dict() for u in self.utts]
        return out


def _first(ids: Sequence[str], n: int = 5) -> str:
    return ", ".join(ids[:n]) + (", ..." if len(ids) > n else "")


def score_world(ref: Mapping[str, np.ndarray], hyp: Mapping[str, np.ndarray],
                conf: "WorldLayout | Mapping | object | None" = None, *,
                alignments: Mapping[str, Sequence[tuple[float, float, str]]] | None = None,
                frame_shift: float = DEFAULT_FRAME_SHIFT, silence_phones: Iterable[str] = ("sil",),
                names: tuple[str, str] = ("REF", "HYP"), convention: str = "speechkit") -> WorldScores:
    """Score every utterance of ``ref`` against ``hyp`` (MCD, F0 RMSE, V/UV; see the module doc).

    Args:
        ref, hyp: ``utt -> (T, dim)`` WORLD matrices; any mapping, including lazy ones that read a
            matrix on access (each matrix is read once, one utterance at a time).
        conf: the layout shared by both (:meth:`WorldLayout.from_conf`); None = 40 mcep, 16 kHz.
        alignments: ``utt -> [(start_s, end_s, phone), ...]``; when given, frames inside
            ``silence_phones`` are left out (see :func:`silence_keep_mask`).
        frame_shift: seconds per frame, for the alignments.
        names: how ``ref`` / ``hyp`` are named in messages (e.g. their paths).
        convention: ``"speechkit"`` (default: c0 left out, F0 over frames voiced in both, silence
            left out) or ``"authors"`` (musa_tts: c0 included, F0 over every frame, silence
            zeroed); see the module doc.

    Returns:
        :class:`WorldScores`.

    Raises:
        DataError: ``ref`` is empty; utterances of ``ref`` missing in ``hyp`` (or in
            ``alignments``), naming the first and the count; no frame left to score; and the
            errors of :func:`score_utterance` / :func:`silence_keep_mask`.
        ValueError: an unknown ``convention``.
    """
    check_convention(convention)
    lay = WorldLayout.from_conf(conf)
    sil = list(dict.fromkeys(silence_phones))
    utts = list(ref.keys())
    if not utts:
        raise DataError(f"{names[0]}: no utterances to score")
    missing = [u for u in utts if u not in hyp]
    if missing:
        raise DataError(f"{names[1]}: no prediction for '{missing[0]}' ({len(missing)} of the {len(utts)} "
                        f"utterances of {names[0]} missing); a subset is never scored silently")
    ref_set = set(utts)
    extra = [u for u in hyp.keys() if u not in ref_set]
    if extra:
        logger.warning("%d utterances of %s are not in %s and are ignored: %s",
                       len(extra), names[1], names[0], _first(extra))
    if alignments is not None:
        no_ali = [u for u in utts if u not in alignments]
        if no_ali:
            raise DataError(f"alignments: no phone alignment for '{no_ali[0]}' ({len(no_ali)} of the "
                            f"{len(utts)} utterances of {names[0]} missing)")
    scores = []
    for utt in utts:
        r, h = ref[utt], hyp[utt]
        keep = None
        if alignments is not None:
            keep = silence_keep_mask(alignments[utt], int(np.shape(r)[0]), frame_shift, sil, utt=utt)
        scores.append(score_utterance(r, h, lay, keep=keep, utt=utt, names=names, convention=convention))
    res = WorldScores(layout=lay, utts=scores, ignored_hyp=extra,
                      frame_shift=frame_shift if alignments is not None else None,
                      silence_phones=sil if alignments is not None else None, convention=convention)
    if res.n_frames == 0:
        raise DataError(f"{names[0]}: no frame left to score ({res.n_masked} frames, all inside "
                        f"silence phones {sil})")
    if alignments is not None and res.n_masked == 0:
        logger.warning("no frame fell inside the silence phones %s: check --silence-phones", sil)
    novoiced = res.utts_no_voiced_both
    if res.n_voiced_both == 0 and convention == "speechkit":
        logger.warning("no frame is voiced in both %s and %s: F0 RMSE is nan", names[0], names[1])
    elif novoiced and convention == "speechkit":
        logger.warning("%d utterances have no frame voiced in both and add nothing to F0 RMSE: %s",
                       len(novoiced), _first(novoiced))
    return res


# ----------------------------------------------------------------------------- feature dirs (speechkit-score-mcd)

class _Lazy(dict):
    """``utt -> matrix`` read on access (keys known up front), so one utterance is in memory at a time."""

    def __init__(self, reader):
        super().__init__((u, None) for u in reader.utts)
        self._reader = reader

    def __getitem__(self, utt):
        if utt not in self:
            raise KeyError(utt)
        return self._reader.load(utt)


def open_features(path: str | os.PathLike) -> tuple[object, Path]:
    """A reader for a feature dir (with feats.scp) or an scp file, and the dir holding its metadata.

    The reader (:class:`~speechkit.scoring.feature_dir.FeatureDir` for a dir,
    :class:`~speechkit.features.io.ScpReader` for an scp file) has ``utts`` (C-sorted ids),
    ``load(utt)`` (a float64 ``(frames, dim)`` matrix) and ``source(utt)``.

    Raises:
        DataError: a dir without ``feats.scp``; an scp file that cannot be parsed (names the line).
        FileNotFoundError: ``path`` is neither a dir nor a file.
    """
    p = Path(path)
    if p.is_dir():
        if not (p / "feats.scp").is_file():
            raise DataError(f"{p}: no feats.scp (expected a WORLD feature dir or an scp file)")
        return FeatureDir(p), p
    if p.is_file():
        return ScpReader(p, what="features"), p.parent
    raise FileNotFoundError(f"no such feature dir or scp file: {p}")


def frame_shift_of(meta_dir: str | os.PathLike) -> float | None:
    """``meta_dir/frame_shift`` in seconds if that file is present, else None.

    Raises:
        DataError: the file does not hold one positive number.
    """
    meta_dir = Path(meta_dir)
    return resolve_frame_shift(meta_dir) if (meta_dir / "frame_shift").is_file() else None


def score_world_dirs(ref: str | os.PathLike, hyp: str | os.PathLike, *, mask_silence: str | os.PathLike | None = None,
                     silence_phones: str = "sil", convention: str = "speechkit"
                     ) -> tuple[WorldScores, WorldLayout, str]:
    """:func:`score_world` of two feature dirs (or scp files), as ``speechkit-score-mcd REF HYP`` scores them.

    The layouts come from each side's ``feats.yaml`` (:func:`speechkit.features.world.read_world_layout`)
    and must agree. With ``mask_silence`` (a ``phone_alignments`` file), ``silence_phones``
    (comma-separated labels) are left out at the frame shift of REF's / HYP's ``frame_shift`` file
    (else :data:`DEFAULT_FRAME_SHIFT`); the matrices are read one utterance at a time.

    Returns:
        ``(scores, layout, layout_source)``: the :class:`WorldScores`, REF's layout and the
        ``feats.yaml`` it came from.

    Raises:
        DataError: the layouts differ, or the two ``frame_shift`` files do (both named); the errors
            of :func:`open_features` and :func:`score_world`.
        ValueError: ``silence_phones`` names no phone (with ``mask_silence``); an unknown ``convention``.
    """
    ref_reader, ref_meta = open_features(ref)
    hyp_reader, hyp_meta = open_features(hyp)
    ref_lay, ref_src = read_world_layout(ref_meta)
    hyp_lay, hyp_src = read_world_layout(hyp_meta)
    if ref_lay != hyp_lay:
        raise DataError(f"feature layouts differ: REF {ref_lay.describe()} from {ref_src}, "
                        f"HYP {hyp_lay.describe()} from {hyp_src}")
    alignments, frame_shift, sil = None, DEFAULT_FRAME_SHIFT, None
    if mask_silence:
        sil = [p for p in silence_phones.split(",") if p]
        if not sil:
            raise ParameterError("silence_phones", "no phone given")
        alignments = read_phone_alignments(mask_silence)
        fs_ref, fs_hyp = frame_shift_of(ref_meta), frame_shift_of(hyp_meta)
        if fs_ref is not None and fs_hyp is not None and not math.isclose(fs_ref, fs_hyp, rel_tol=1e-6):
            raise DataError(f"frame shifts differ: {fs_ref:g} s in {ref_meta / 'frame_shift'}, "
                            f"{fs_hyp:g} s in {hyp_meta / 'frame_shift'}")
        frame_shift = fs_ref if fs_ref is not None else fs_hyp if fs_hyp is not None else DEFAULT_FRAME_SHIFT
    res = score_world(_Lazy(ref_reader), _Lazy(hyp_reader), ref_lay, alignments=alignments, frame_shift=frame_shift,
                      silence_phones=sil or ("sil",), names=(str(ref), str(hyp)), convention=convention)
    return res, ref_lay, ref_src


def write_per_utt(path: str | os.PathLike, res: WorldScores) -> None:
    """Write ``'<utt> <frames> <mcd_db> <mcd_with_c0_db> <f0_rmse_hz|nan> <vuv_%>'`` lines (atomically)."""
    with atomic_write(path) as f:
        for u in res.utts:
            f.write(f"{u.utt} {u.n_frames} {u.mcd_db:.4f} {u.mcd_with_c0_db:.4f} "
                    f"{u.f0_rmse_hz:.4f} {u.vuv_accuracy:.2f}\n")


def report_lines(res: WorldScores, layout: WorldLayout, *, masked: bool = False) -> list[str]:
    """The report of ``speechkit-score-mcd``: counts, the mean of per-utterance MCDs, what F0 RMSE is
    over and, last, :meth:`WorldScores.summary` (``masked``: silence phones were masked)."""
    authors = res.convention == "authors"
    silence = (f", {res.n_masked} frames in silence phones {'zeroed' if authors else 'left out'}"
               if masked else "")
    lines = [f"utterances: {len(res.utts)}, frames scored: {res.n_frames}{silence} ({layout.describe()})"]
    if authors:
        lines += [f"mean of per-utterance MCD: {res.mcd_db_utt_mean:.2f} dB (c0 included); "
                  "figures below pooled over all frames",
                  f"F0 RMSE over all {res.n_frames + res.n_masked} frames"]
    else:
        lines += [f"mean of per-utterance MCD: {res.mcd_db_utt_mean:.2f} dB (with c0 "
                  f"{res.mcd_with_c0_db_utt_mean:.2f}); figures below pooled over all frames",
                  f"F0 RMSE over {res.n_voiced_both} frames voiced in both "
                  f"({len(res.utts_no_voiced_both)} utterances with none)"]
    return lines + [vuv_line(res), res.summary()]


def vuv_line(res: WorldScores) -> str:
    """``V/UV: unvoiced recall 41.2 % (350 / 850 frames), precision 63.0 %, balanced accuracy 68.1 %;
    majority baseline 81.3 % (constant "voiced")`` (:meth:`WorldScores.vuv_figures`; ``nan`` where a
    denominator is empty)."""
    c, v = res.vuv_counts(), res.vuv_figures()
    return (f"V/UV: unvoiced recall {v['vuv_unvoiced_recall']:.1f} % ({c['unvoiced_both']} / {c['ref_unvoiced']} "
            f"frames), precision {v['vuv_unvoiced_precision']:.1f} % ({c['hyp_unvoiced']} predicted unvoiced), "
            f"balanced accuracy {v['vuv_balanced_accuracy']:.1f} %; majority baseline "
            f"{v['vuv_majority_baseline']:.1f} % (constant \"{v['vuv_majority_class']}\")")
