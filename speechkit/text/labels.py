"""Frame-level linguistic label vectors for acoustic models, in the spirit of SALAD section 3.2.

Pascual, Bonafonte, Serrà, "Self-Attention Linguistic-Acoustic Decoder" (IberSPEECH 2018), section
3.2: each phoneme is described by a 362-dim label vector in the format of the authors' earlier work
(their ref. [20]), "sparse identifiers in the form of one-hot vectors, binary values, and real
values. These include the identity of phonemes within a window of context, part of speech tags,
distance from syllables to end of sentence, etc.", real values z-normalised on the training data;
the vector is repeated for as many frames as the ground-truth duration, with two dimensions
appended: "(1) absolute duration normalized between 0 and 1, given the training data, and (2)
relative position of current phoneme inside the absolute duration, also normalized between 0 and 1"
(364 inputs in all). Our G2P (:mod:`speechkit.text.g2p`) gives phones, stress, syllables and words
(no part-of-speech tags), so the vector is smaller, and its blocks are this module's own choice:

======================  =====================================================================
block                   features (``names`` in ``frontend.yaml``)
======================  =====================================================================
identity   5 x (N+1)    one-hot of the phone at offsets -2..+2 over the aligned segments
                        (``sil`` included), N = |inventory| (``phones.txt``, ``sil`` first)
                        plus the boundary symbol ``<bnd>`` for positions outside the utterance
binary     22           ``is_sil``, ``is_vowel``, ``stress=0/1/2`` (of the phone's syllable),
                        consonant class ``stop fricative nasal liquid glide`` (by sonority,
                        :func:`speechkit.text.g2p.sonority`), ``is_long`` (``ː``),
                        ``is_diphthong`` (two vowel letters), ``prev_syl_stressed``,
                        ``next_syl_stressed``, ``pause_before``, ``pause_after`` (the previous /
                        next segment is ``sil``), ``syl_initial``, ``syl_final``,
                        ``word_initial``, ``word_final``, ``sil_utt_initial``, ``sil_utt_final``
real       18           1-based positions forward / backward and counts, HTS style:
                        phone in syllable (3), syllable in word (3), phone in word (3), word in
                        utterance (2), syllable in utterance (2), phone in utterance (2), and
                        ``words_in_utt syls_in_utt phones_in_utt``; z-normalised with the
                        training mean / standard deviation of the segments they apply to
frame      2            ``dur_norm`` = segment duration / the longest non-``sil`` training
                        segment, clipped to [0, 1]; ``rel_pos`` = (t * frame_shift - start) /
                        duration in [0, 1]
======================  =====================================================================

Every feature about the phone's syllable or word is 0 for ``sil`` (its real values are set to
the training mean, 0 after normalisation); utterance counts and the pause flags apply to
``sil`` too. Dimension D = 5 (N + 1) + 22 + 18 + 2. Measured: English ``mini`` data (150 en-us
utterances, 39 espeak phones + ``sil``: N = 40) gives D = 205 + 40 + 2 = **247** (245 + 2) against
the paper's 362 + 2 = 364; the Malayalam crowd speaker ``2dEDqqeI`` (train, 54 phones + ``sil``)
gives D = 280 + 42 = 322.

Frames
    Frame t lies at time t * frame_shift seconds (WORLD's convention, 5 ms) and belongs to the
    segment containing it (start <= t * shift < end). The alignment covers
    ceil(end / shift) frames; the acoustic features have T = ``utt2num_frames``. If they differ
    by at most ``tolerance`` (2) frames the last segment is extended or cut; otherwise it is a
    :class:`DataError` naming the utterance and both counts.

On disk (``FRONTEND_DIR``): ``phones.txt`` (``<phone> <id>`` per line) and ``frontend.yaml``
(context, boundary symbol, longest duration, frame shift, z-norm statistics, the resolved
feature names and kinds, and ``dim``). ``frontend.yaml`` is written last, so a directory with
it is complete.
"""
from __future__ import annotations

import logging
import math
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import yaml

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.text.g2p import SONORITY_CLASSES, VOWEL_LETTERS, is_vowel, sonority
from speechkit.utils.fileio import DataError, atomic_write, read_lines

logger = logging.getLogger(__name__)

__all__ = [
    "BINARY_FEATURES", "BOUNDARY", "CONTEXT", "FRAME_FEATURES", "LabelFrontend", "LabelInput", "REAL_FEATURES", "SIL",
    "frame_segments", "make_label_input", "read_alignments",
]

SIL = "sil"
BOUNDARY = "<bnd>"
CONTEXT = (-2, -1, 0, 1, 2)
FORMAT_VERSION = 1
BINARY_FEATURES = (
    "is_sil", "is_vowel", "stress=0", "stress=1", "stress=2",
    *(f"class={c}" for c in SONORITY_CLASSES[:5]), "is_long", "is_diphthong",
    "prev_syl_stressed", "next_syl_stressed", "pause_before", "pause_after",
    "syl_initial", "syl_final", "word_initial", "word_final", "sil_utt_initial", "sil_utt_final",
)
REAL_FEATURES = (
    "phone_in_syl_fwd", "phone_in_syl_bwd", "phones_in_syl",
    "syl_in_word_fwd", "syl_in_word_bwd", "syls_in_word",
    "phone_in_word_fwd", "phone_in_word_bwd", "phones_in_word",
    "word_in_utt_fwd", "word_in_utt_bwd",
    "syl_in_utt_fwd", "syl_in_utt_bwd",
    "phone_in_utt_fwd", "phone_in_utt_bwd",
    "words_in_utt", "syls_in_utt", "phones_in_utt",
)
#: Real features that also apply to ``sil`` segments (utterance-level counts).
UTTERANCE_REAL = frozenset({"words_in_utt", "syls_in_utt", "phones_in_utt"})
FRAME_FEATURES = ("dur_norm", "rel_pos")
_B = {n: i for i, n in enumerate(BINARY_FEATURES)}
_R = {n: i for i, n in enumerate(REAL_FEATURES)}
# A frame at t * shift is put in the later segment when it falls within this of a boundary
# (alignment times have 4 decimals; t * shift has float rounding).
_EPS = 1e-7


# ---------------------------------------------------------------------------------------- inputs
def read_alignments(path: str | os.PathLike) -> dict[str, list[tuple[float, float, str, int]]]:
    """Read ``phone_alignments`` into ``utt -> [(start_s, end_s, phone, line_number), ...]``
    (:func:`speechkit.data.corpora._common.read_phone_alignments`, strict).

    Raises:
        DataError: a line without 4 fields, non-numeric times, ``end < start``, or a segment
            starting before the previous one of its utterance ends (names file and line).
    """
    return read_phone_alignments(path, strict=True, line_numbers=True)


@dataclass
class LabelInput:
    """One utterance's aligned segments with their raw (unnormalised) linguistic features.

    Attributes:
        utt: utterance id.
        phones: (S,) segment labels, ``sil`` included.
        starts, ends: (S,) float64 segment times in seconds.
        binary: (S, len(BINARY_FEATURES)) float32 0/1 features.
        real: (S, len(REAL_FEATURES)) float64 features, NaN where they do not apply (``sil``).
        source: where the segments came from (the alignments file), for error messages.
        lines: (S,) line numbers of the segments in ``source``, or ``None``.
    """

    utt: str
    phones: list[str]
    starts: np.ndarray
    ends: np.ndarray
    binary: np.ndarray
    real: np.ndarray
    source: str | None = None
    lines: list[int] | None = None

    def where(self, i: int) -> str:
        """``file:line`` of segment ``i`` (or the utterance id when unknown)."""
        if self.source is not None and self.lines is not None:
            return f"{self.source}:{self.lines[i]}"
        return f"utterance '{self.utt}'"


def _dense_rank(values: Sequence[int]) -> list[int]:
    order = {v: i for i, v in enumerate(sorted(set(values)))}
    return [order[v] for v in values]


def make_label_input(utt: str, tokens: Sequence[str], info: Sequence[tuple[int, int, int]],
                     segments: Sequence[tuple], *, source: str | None = None,
                     text_source: str | None = None) -> LabelInput:
    """Combine an utterance's phone tokens, ``phone_info`` and aligned segments.

    Args:
        utt: utterance id.
        tokens: the phone tokens of ``text`` (no ``sil``).
        info: ``(stress, syllable, word)`` per token (``phone_info``).
        segments: ``(start_s, end_s, phone[, line_number])`` in time order, ``sil`` segments
            anywhere; dropping them must give exactly ``tokens``.
        source: the alignments file (named in errors, with the line numbers if given).
        text_source: the ``text`` file (named in errors).

    Returns:
        A :class:`LabelInput`.

    Raises:
        DataError: ``len(info) != len(tokens)``, no segment, or the alignment's non-``sil``
            phones differ from ``tokens`` (names the utterance and the first difference).
    """
    if len(info) != len(tokens):
        raise DataError(f"utterance '{utt}': phone_info has {len(info)} items but text has {len(tokens)} phones")
    if not segments:
        raise DataError(f"{source or 'alignments'}: utterance '{utt}' has no segment")
    labels = [s[2] for s in segments]
    lines = [int(s[3]) for s in segments] if all(len(s) > 3 for s in segments) else None
    aligned = [(i, p) for i, p in enumerate(labels) if p != SIL]
    if [p for _, p in aligned] != list(tokens):
        k = next((k for k, (a, t) in enumerate(zip(aligned, tokens)) if a[1] != t), min(len(aligned), len(tokens)))
        got = f"'{aligned[k][1]}'" + (f" (line {lines[aligned[k][0]]})" if lines else "") if k < len(aligned) else "the end"
        want = f"'{tokens[k]}'" if k < len(tokens) else "the end"
        raise DataError(f"{source or 'alignments'}: utterance '{utt}': the aligned phones (without {SIL}) differ from "
                        f"{text_source or 'text'} at phone {k + 1}: {got} where text has {want} "
                        f"({len(aligned)} aligned phones, {len(tokens)} in text)")
    n = len(tokens)
    stress = [s for s, _, _ in info]
    syl = _dense_rank([y for _, y, _ in info])
    word = _dense_rank([w for _, _, w in info])
    n_syl, n_word = (syl[-1] + 1, word[-1] + 1) if n else (0, 0)

    def spans(groups: list[int]) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for j, g in enumerate(groups):
            a, _ = out.get(g, (j, j))
            out[g] = (a, j)
        return out

    syl_span, word_span = spans(syl), spans(word)
    syl_stress = [0] * n_syl
    for j in range(n):
        syl_stress[syl[j]] = max(syl_stress[syl[j]], stress[j])
    word_syls = spans([word[syl_span[y][0]] for y in range(n_syl)])  # word -> (first, last) syllable
    S = len(segments)
    binary = np.zeros((S, len(BINARY_FEATURES)), np.float32)
    real = np.full((S, len(REAL_FEATURES)), np.nan)
    real[:, _R["words_in_utt"]] = n_word
    real[:, _R["syls_in_utt"]] = n_syl
    real[:, _R["phones_in_utt"]] = n
    for i, p in enumerate(labels):
        b = binary[i]
        b[_B["pause_before"]] = float(i > 0 and labels[i - 1] == SIL)
        b[_B["pause_after"]] = float(i + 1 < S and labels[i + 1] == SIL)
        if p == SIL:
            b[_B["is_sil"]] = 1
            b[_B["sil_utt_initial"]] = float(i == 0)
            b[_B["sil_utt_final"]] = float(i == S - 1)
    for j, (i, p) in enumerate(aligned):
        b, r = binary[i], real[i]
        y, w = syl[j], word[j]
        vowel = is_vowel(p)
        b[_B["is_vowel"]] = float(vowel)
        b[_B[f"stress={stress[j]}"]] = 1
        if not vowel:
            b[_B[f"class={SONORITY_CLASSES[sonority(p) - 1]}"]] = 1
        b[_B["is_long"]] = float("ː" in p)
        b[_B["is_diphthong"]] = float(sum(ch in VOWEL_LETTERS for ch in unicodedata.normalize("NFD", p)) >= 2)
        b[_B["prev_syl_stressed"]] = float(y > 0 and syl_stress[y - 1] > 0)
        b[_B["next_syl_stressed"]] = float(y + 1 < n_syl and syl_stress[y + 1] > 0)
        (sa, sb), (wa, wb), (ya, yb) = syl_span[y], word_span[w], word_syls[w]
        b[_B["syl_initial"]], b[_B["syl_final"]] = float(j == sa), float(j == sb)
        b[_B["word_initial"]], b[_B["word_final"]] = float(j == wa), float(j == wb)
        for name, v in (("phone_in_syl_fwd", j - sa + 1), ("phone_in_syl_bwd", sb - j + 1), ("phones_in_syl", sb - sa + 1),
                        ("syl_in_word_fwd", y - ya + 1), ("syl_in_word_bwd", yb - y + 1), ("syls_in_word", yb - ya + 1),
                        ("phone_in_word_fwd", j - wa + 1), ("phone_in_word_bwd", wb - j + 1),
                        ("phones_in_word", wb - wa + 1),
                        ("word_in_utt_fwd", w + 1), ("word_in_utt_bwd", n_word - w),
                        ("syl_in_utt_fwd", y + 1), ("syl_in_utt_bwd", n_syl - y),
                        ("phone_in_utt_fwd", j + 1), ("phone_in_utt_bwd", n - j)):
            r[_R[name]] = v
    return LabelInput(utt=utt, phones=labels, starts=np.array([float(s[0]) for s in segments]),
                      ends=np.array([float(s[1]) for s in segments]), binary=binary, real=real,
                      source=source, lines=lines)


# ---------------------------------------------------------------------------------------- frames
def frame_segments(starts: np.ndarray, ends: np.ndarray, num_frames: int, frame_shift: float, *,
                   tolerance: int = 2, utt: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Map frames to segments: frame t (at t * frame_shift s) -> the segment containing it.

    Args:
        starts, ends: (S,) segment times in seconds, in time order.
        num_frames: T, the acoustic feature frame count.
        frame_shift: seconds per frame.
        tolerance: most frames by which the alignment's own count ceil(end / shift) may differ
            from T; within it the last segment is extended (or cut).
        utt: utterance id for the error message.

    Returns:
        ``(index, rel_pos)``: (T,) int64 segment of each frame and (T,) float32 relative
        position (t * shift - start) / (end - start) clipped to [0, 1] (0 for an empty segment).

    Raises:
        DataError: the counts differ by more than ``tolerance`` (names the utterance and both).
    """
    end = float(ends[-1])
    n_align = max(0, math.ceil(end / frame_shift - 1e-6))
    if abs(n_align - num_frames) > tolerance:
        raise DataError(f"utterance '{utt}': the alignment covers {n_align} frames ({end:.4f} s at {frame_shift} s) "
                        f"but the acoustic features have {num_frames} (utt2num_frames); a label sequence must match "
                        f"the features within {tolerance} frames")
    t = np.arange(num_frames) * frame_shift + _EPS
    idx = np.minimum(np.searchsorted(ends, t, side="right"), len(ends) - 1)
    dur = ends[idx] - starts[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(dur > 0, (t - _EPS - starts[idx]) / np.where(dur > 0, dur, 1.0), 0.0)
    return idx.astype(np.int64), np.clip(rel, 0.0, 1.0).astype(np.float32)


# ---------------------------------------------------------------------------------------- front end
class LabelFrontend:
    """A fitted label front end: phone inventory, z-norm statistics and the duration scale.

    Args:
        phones: the inventory (``sil`` included), in id order.
        mean, std: (len(REAL_FEATURES),) z-normalisation statistics of the real features.
        max_duration: longest non-``sil`` training segment, seconds (``dur_norm``'s scale).
        frame_shift: the frame shift it was fitted with (informational), seconds.
        fitted_on: what it was fitted on, as the fitting tool records it (speechkit-make-labels:
            a content fingerprint of the data and options, and counts for messages); saved in
            ``frontend.yaml`` and compared before a re-fit. ``None`` for a front end saved without
            one (older versions).
    """

    def __init__(self, phones: Sequence[str], mean: Sequence[float], std: Sequence[float], max_duration: float,
                 frame_shift: float | None = None, fitted_on: dict | None = None):
        self.phones = list(phones)
        if len(set(self.phones)) != len(self.phones) or SIL not in self.phones or BOUNDARY in self.phones:
            raise ValueError(f"bad inventory: needs unique phones, '{SIL}' included and '{BOUNDARY}' not")
        self.phone_to_id = {p: i for i, p in enumerate(self.phones)}
        self.mean = np.asarray(mean, np.float64)
        self.std = np.asarray(std, np.float64)
        if self.mean.shape != (len(REAL_FEATURES),) or self.std.shape != (len(REAL_FEATURES),) or (self.std <= 0).any():
            raise ValueError(f"mean/std must have {len(REAL_FEATURES)} values, std > 0")
        if not max_duration > 0:
            raise ValueError(f"max_duration must be positive, got {max_duration}")
        self.max_duration = float(max_duration)
        self.frame_shift = frame_shift
        self.fitted_on = fitted_on

    # ------------------------------------------------------------------ dimensions
    @property
    def num_symbols(self) -> int:
        """N + 1: the inventory plus the boundary symbol (one identity one-hot block)."""
        return len(self.phones) + 1

    @property
    def feature_names(self) -> list[str]:
        """The D feature names in vector order (``ph[-2]=a`` ... ``rel_pos``)."""
        ident = [f"ph[{o:+d}]={p}" if o else f"ph[0]={p}" for o in CONTEXT for p in (*self.phones, BOUNDARY)]
        return [*ident, *BINARY_FEATURES, *REAL_FEATURES, *FRAME_FEATURES]

    @property
    def feature_kinds(self) -> list[str]:
        """``identity``/``binary``/``real``/``frame`` for each of the D features."""
        return (["identity"] * (len(CONTEXT) * self.num_symbols) + ["binary"] * len(BINARY_FEATURES)
                + ["real"] * len(REAL_FEATURES) + ["frame"] * len(FRAME_FEATURES))

    @property
    def dim(self) -> int:
        """D = 5 (N + 1) + 22 + 18 + 2."""
        return len(CONTEXT) * self.num_symbols + len(BINARY_FEATURES) + len(REAL_FEATURES) + len(FRAME_FEATURES)

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(cls, inputs: Iterable[LabelInput], frame_shift: float | None = None) -> "LabelFrontend":
        """Fit on training utterances: inventory, mean/std of each real feature over the segments
        it applies to (std 1 where constant), longest non-``sil`` segment.

        Raises:
            DataError: no utterance, or no non-``sil`` segment with a positive duration.
        """
        phones: set[str] = set()
        reals, durs = [], []
        for x in inputs:
            phones.update(x.phones)
            reals.append(x.real)
            durs.extend((x.ends - x.starts)[[p != SIL for p in x.phones]])
        if not reals:
            raise DataError("label front end: no utterance to fit on")
        if not durs or max(durs) <= 0:
            raise DataError("label front end: no phone segment with a positive duration to fit on")
        real = np.concatenate(reals)
        mean, std = np.zeros(len(REAL_FEATURES)), np.ones(len(REAL_FEATURES))
        for k in range(len(REAL_FEATURES)):
            v = real[:, k][~np.isnan(real[:, k])]
            if len(v):
                mean[k] = v.mean()
                std[k] = v.std() if v.std() > 1e-8 else 1.0
        inventory = [SIL] + sorted(phones - {SIL})
        return cls(inventory, mean, std, float(max(durs)), frame_shift)

    # ------------------------------------------------------------------ applying
    def phone_labels(self, x: LabelInput) -> np.ndarray:
        """Segment-level vectors without the two frame features.

        Returns:
            (S, D - 2) float32: identity one-hots, binary features, z-normalised real features.

        Raises:
            DataError: a phone outside the inventory (names the alignments file and line).
        """
        ids = []
        for i, p in enumerate(x.phones):
            if p not in self.phone_to_id:
                raise DataError(f"{x.where(i)}: phone '{p}' of utterance '{x.utt}' is not in the label front end's "
                                f"inventory of {len(self.phones)} phones (fitted on other data?)")
            ids.append(self.phone_to_id[p])
        S, V = len(ids), self.num_symbols
        padded = np.full(S + len(CONTEXT) - 1, V - 1, np.int64)  # boundary symbol outside
        lo = -CONTEXT[0]
        padded[lo:lo + S] = ids
        ident = np.zeros((S, len(CONTEXT), V), np.float32)
        for k, o in enumerate(CONTEXT):
            ident[np.arange(S), k, padded[lo + o:lo + o + S]] = 1
        real = np.nan_to_num((x.real - self.mean) / self.std, nan=0.0)
        return np.concatenate([ident.reshape(S, -1), x.binary, real.astype(np.float32)], axis=1)

    def frame_labels(self, x: LabelInput, num_frames: int, frame_shift: float, tolerance: int = 2) -> np.ndarray:
        """Frame-level label matrix of one utterance.

        Args:
            x: the utterance (:func:`make_label_input`).
            num_frames: T of its acoustic features (``utt2num_frames``).
            frame_shift: seconds per frame (0.005 for WORLD).
            tolerance: see :func:`frame_segments`.

        Returns:
            (T, D) float32: each frame's segment vector, then ``dur_norm`` and ``rel_pos``.

        Raises:
            DataError: unknown phone (file:line) or frame-count mismatch (utterance, both counts).
        """
        seg = self.phone_labels(x)
        idx, rel = frame_segments(x.starts, x.ends, num_frames, frame_shift, tolerance=tolerance, utt=x.utt)
        dur = np.minimum((x.ends - x.starts) / self.max_duration, 1.0).astype(np.float32)
        return np.concatenate([seg[idx], dur[idx, None], rel[:, None]], axis=1)

    # ------------------------------------------------------------------ storage
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``phones.txt`` then ``frontend.yaml`` (atomically) into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_write(directory / "phones.txt") as f:
            f.writelines(f"{p} {i}\n" for i, p in enumerate(self.phones))
        doc = {
            "format_version": FORMAT_VERSION,
            "context": list(CONTEXT),
            "boundary_symbol": BOUNDARY,
            "num_phones": len(self.phones),
            "max_duration": self.max_duration,
            "frame_shift": self.frame_shift,
            "real_stats": {n: {"mean": float(m), "std": float(s)} for n, m, s in zip(REAL_FEATURES, self.mean, self.std)},
            "dim": self.dim,
            "features": [f"{k} {n}" for k, n in zip(self.feature_kinds, self.feature_names)],
        }
        if self.fitted_on is not None:
            doc["fitted_on"] = self.fitted_on
        with atomic_write(directory / "frontend.yaml") as f:
            yaml.safe_dump(doc, f, allow_unicode=True, sort_keys=False, width=200)
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "LabelFrontend":
        """Read a front end written by :meth:`save`.

        Raises:
            FileNotFoundError: ``frontend.yaml`` or ``phones.txt`` missing.
            DataError: malformed or inconsistent files (names the file and line or key).
        """
        directory = Path(directory)
        cfg, ph = directory / "frontend.yaml", directory / "phones.txt"
        for f in (cfg, ph):
            if not f.is_file():
                raise FileNotFoundError(f"{f}: missing (fit the front end first: speechkit-make-labels --fit)")
        phones = []
        for lineno, line in enumerate(read_lines(ph), 1):
            parts = line.split()
            if len(parts) != 2 or parts[1] != str(lineno - 1):
                raise DataError(f"{ph}:{lineno}: expected '<phone> {lineno - 1}', got {line!r}")
            phones.append(parts[0])
        try:
            doc = yaml.safe_load(cfg.read_text(encoding="utf-8"))
            if doc.get("format_version") != FORMAT_VERSION:
                raise DataError(f"{cfg}: format_version {doc.get('format_version')!r}, expected {FORMAT_VERSION}")
            if list(doc["context"]) != list(CONTEXT) or doc["boundary_symbol"] != BOUNDARY:
                raise DataError(f"{cfg}: context/boundary_symbol differ from this version's {list(CONTEXT)}/{BOUNDARY}")
            stats = doc["real_stats"]
            if list(stats) != list(REAL_FEATURES):
                raise DataError(f"{cfg}: real_stats keys differ from this version's real features")
            fitted_on = doc.get("fitted_on")
            if fitted_on is not None and not isinstance(fitted_on, dict):
                raise DataError(f"{cfg}: fitted_on: expected a mapping, got {type(fitted_on).__name__}")
            fe = cls(phones, [stats[n]["mean"] for n in REAL_FEATURES], [stats[n]["std"] for n in REAL_FEATURES],
                     float(doc["max_duration"]), doc.get("frame_shift"), fitted_on)
        except (KeyError, TypeError, AttributeError, yaml.YAMLError) as e:
            raise DataError(f"{cfg}: malformed front-end file ({type(e).__name__}: {e})") from None
        except ValueError as e:
            if isinstance(e, DataError):
                raise
            raise DataError(f"{cfg}: {e}") from None
        if doc.get("num_phones") != len(phones) or doc.get("dim") != fe.dim:
            raise DataError(f"{cfg}: num_phones/dim ({doc.get('num_phones')}/{doc.get('dim')}) disagree with {ph} "
                            f"({len(phones)} phones, dim {fe.dim})")
        return fe
