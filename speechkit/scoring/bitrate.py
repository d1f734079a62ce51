"""Bitrate of a discrete (or any) frame-level encoding, as the ZeroSpeech 2019 evaluation computes it.

    B = (N / D) * H,    H = - sum_s p_s log2 p_s

(Dunbar et al., "The Zero Resource Speech Challenge 2019: TTS without T", Interspeech 2019,
Sec. 3.2; zerospeech2020 ``evaluation/bitrate.py``). ``N`` is the number of frames (lines) over all
files, ``D`` their total duration in seconds, and every distinct frame vector (compared as a tuple
of numbers, so ``1`` and ``1.0`` are one symbol) is a symbol with probability ``p_s`` = its count / N.
N and the symbol counts are pooled over all files.

Which files: the challenge pools the files named in its ``bitrate_filelist.txt``, a list shipped with
the test set (``speechkit-score-bitrate --file-list`` reads it); without such a list every file given is
pooled (egs/zerospeech2019 scores every test utterance of its ``mini`` and ``local`` corpora, which have
no list).

Duration: ZeroSpeech takes ``D`` from the audio (its file list carries each file's duration).
With only feature files at hand, ``D`` comes from a ``durations`` table (``utt seconds``, e.g. a
data directory's ``utt2dur``) or from a ZeroSpeech-style file list's second column when given,
else it is ``N * frame_shift``, in which case ``B = H / frame_shift``.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from speechkit.utils.fileio import DataError, read_lines

logger = logging.getLogger(__name__)


@dataclass
class BitrateResult:
    """Result of :func:`bitrate`."""

    bitrate: float  # bits/s
    entropy: float  # bits per frame
    n_frames: int
    duration: float  # seconds
    n_symbols: int
    n_files: int
    duration_source: str  # "durations", "file-list" or "frames"

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """The figure line, e.g. ``bitrate: 167.02 bits/s``."""
        return f"bitrate: {self.bitrate:.2f} bits/s"


def symbol_counts(matrices: Sequence[np.ndarray]) -> np.ndarray:
    """Counts of each distinct frame vector over all ``(frames, dim)`` matrices (pooled).

    ``-0.0`` and ``0.0`` count as one symbol (as Python's float tuples compare).

    Raises:
        DataError: matrices of different dimensions.
    """
    dims = {m.shape[1] for m in matrices}
    if len(dims) > 1:
        raise DataError(f"feature files have different dimensions: {sorted(dims)}")
    allf = np.concatenate([np.asarray(m, dtype=np.float64) for m in matrices]) + 0.0  # -0.0 -> 0.0
    _, counts = np.unique(allf, axis=0, return_counts=True)
    return counts


def entropy_bits(counts: np.ndarray) -> float:
    """Shannon entropy in bits of the empirical distribution ``counts / counts.sum()``."""
    counts = np.asarray(counts, dtype=np.float64)
    counts = counts[counts > 0]
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def bitrate(
    features: Mapping[str, np.ndarray],
    durations: Mapping[str, float] | None = None,
    frame_shift: float = 0.01,
    duration_source: str | None = None,
) -> BitrateResult:
    """ZeroSpeech 2019 bitrate of ``features`` (all files pooled).

    Args:
        features: ``{utt: (frames, dim) array}``; NaN/Inf are rejected.
        durations: seconds per utterance; when ``None`` each file lasts ``frames * frame_shift``.
        frame_shift: seconds per frame (only used without ``durations``).
        duration_source: label stored in the result (default: "durations" or "frames").

    Returns:
        :class:`BitrateResult` with ``bitrate`` in bits/s.

    Raises:
        DataError: an utterance missing from ``durations``, a non-positive total duration,
            NaN/Inf, or ragged dimensions.
        ValueError: no features.
    """
    if not features:
        raise ValueError("no feature files to compute a bitrate on")
    mats = []
    dur = 0.0
    n = 0
    for utt, mat in features.items():
        mat = np.asarray(mat, dtype=np.float64)
        if mat.ndim != 2:
            raise DataError(f"features of '{utt}': expected (frames, dim), got shape {mat.shape}")
        if not np.isfinite(mat).all():
            raise DataError(f"features of '{utt}': NaN or Inf")
        if durations is not None:
            if utt not in durations:
                raise DataError(f"durations: no duration for '{utt}'")
            dur += float(durations[utt])
        else:
            dur += len(mat) * frame_shift
        n += len(mat)
        mats.append(mat)
    if not dur > 0:
        raise DataError(f"total duration is {dur} s; cannot compute a bitrate")
    counts = symbol_counts(mats)
    h = entropy_bits(counts)
    return BitrateResult(
        bitrate=n * h / dur,
        entropy=h,
        n_frames=n,
        duration=dur,
        n_symbols=len(counts),
        n_files=len(mats),
        duration_source=duration_source or ("durations" if durations is not None else "frames"),
    )


def read_durations(path: str | os.PathLike) -> dict[str, float]:
    """Read ``<utt> <seconds>`` lines (``utt2dur``).

    Raises:
        DataError: wrong field count, duplicate key, or a non-positive/non-numeric duration;
            names file and line.
    """
    path = Path(path)
    out: dict[str, float] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) != 2:
            raise DataError(f"{path}:{lineno}: expected '<utt> <seconds>', got {line.strip()!r}")
        try:
            v = float(toks[1])
        except ValueError:
            v = float("nan")
        if not (v > 0 and math.isfinite(v)):
            raise DataError(f"{path}:{lineno}: bad duration {toks[1]!r} for '{toks[0]}'")
        if toks[0] in out:
            raise DataError(f"{path}:{lineno}: duplicate utterance '{toks[0]}'")
        out[toks[0]] = v
    return out


def read_file_list(path: str | os.PathLike) -> tuple[list[str], dict[str, float] | None]:
    """Read a file list: ``<utt>[.txt]`` per line, optionally followed by the file's duration in
    seconds (ZeroSpeech's ``bitrate_filelist.txt`` format).

    Returns:
        ``(utts, durations)``; ``durations`` is ``None`` unless every line carries one.

    Raises:
        DataError: more than two fields, a bad duration, a duplicate, or a mix of lines with and
            without durations; names file and line.
    """
    path = Path(path)
    utts: list[str] = []
    durs: dict[str, float] = {}
    seen: set[str] = set()
    with_dur = None
    for lineno, line in enumerate(read_lines(path), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) > 2:
            raise DataError(f"{path}:{lineno}: expected '<utt>[.txt] [seconds]', got {line.strip()!r}")
        utt = toks[0][:-4] if toks[0].endswith(".txt") else toks[0]
        has = len(toks) == 2
        if with_dur is None:
            with_dur = has
        elif has != with_dur:
            raise DataError(f"{path}:{lineno}: some lines give a duration and some do not")
        if utt in seen:
            raise DataError(f"{path}:{lineno}: duplicate entry '{utt}'")
        seen.add(utt)
        utts.append(utt)
        if has:
            try:
                v = float(toks[1])
            except ValueError:
                v = float("nan")
            if not (v > 0 and math.isfinite(v)):
                raise DataError(f"{path}:{lineno}: bad duration {toks[1]!r}")
            durs[utt] = v
    if not utts:
        raise DataError(f"{path}: empty file list")
    return utts, (durs if with_dur else None)
