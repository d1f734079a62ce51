"""Read the frame-level feature directories that ZeroSpeech-style scoring takes as input.

A feature directory holds either

* ``feats.scp`` (Kaldi ark/scp, read with :mod:`kaldiio`): one matrix per utterance, or
* one text file per utterance, ``<utt>.txt``, one frame per line, numbers separated by spaces
  (the ZeroSpeech 2019 submission format).

When both are present ``feats.scp`` wins. Frame ``i`` (0-based) of an utterance is taken to lie
at time ``(i + 0.5) * frame_shift`` seconds. The frame shift is ``--frame-shift`` when given,
else the number in ``DIR/frame_shift`` (the file Kaldi-style feature extraction writes next to
``feats.scp``), else 0.01 s.

Every loader rejects NaN/Inf, ragged or non-numeric lines, and empty files with a
:class:`~speechkit.utils.fileio.DataError` naming the file and line (or the scp key).
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Iterable

import numpy as np

from speechkit.utils.fileio import DataError, read_lines

logger = logging.getLogger(__name__)

DEFAULT_FRAME_SHIFT = 0.01


def resolve_frame_shift(feature_dir: str | os.PathLike, frame_shift: float | None = None) -> float:
    """The frame shift in seconds: ``frame_shift`` if given, else ``DIR/frame_shift``, else 0.01.

    Raises:
        DataError: ``DIR/frame_shift`` exists but does not hold one positive number.
        ValueError: an explicit ``frame_shift`` that is not positive.
    """
    if frame_shift is not None:
        if not frame_shift > 0:
            raise ValueError(f"--frame-shift must be positive, got {frame_shift}")
        return float(frame_shift)
    f = Path(feature_dir) / "frame_shift"
    if f.is_file():
        lines = [ln.strip() for ln in read_lines(f) if ln.strip()]
        try:
            value = float(lines[0]) if len(lines) == 1 else float("nan")
        except ValueError:
            value = float("nan")
        if not value > 0 or not np.isfinite(value):
            raise DataError(f"{f}:1: expected one positive number (seconds), got {lines!r}")
        return value
    return DEFAULT_FRAME_SHIFT


class FeatureDir:
    """Lazy access to the per-utterance matrices of a feature directory.

    Args:
        path: the directory (``feats.scp`` inside it, or ``<utt>.txt`` files).

    Attributes:
        path: the directory.
        kind: ``"scp"`` or ``"txt"``.
        utts: the utterance ids found, C-sorted.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        DataError: the directory holds neither ``feats.scp`` nor any ``*.txt`` file.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"feature directory not found: {self.path}")
        scp = self.path / "feats.scp"
        self._scp: dict | None = None
        if scp.is_file():
            import kaldiio

            self.kind = "scp"
            try:
                self._scp = kaldiio.load_scp(str(scp))
            except Exception as e:  # kaldiio raises bare ValueError/IndexError on bad lines
                raise DataError(f"{scp}: cannot parse ({e})") from None
            keys = list(self._scp.keys())
        else:
            self.kind = "txt"
            keys = [p.name[: -len(".txt")] for p in self.path.iterdir() if p.name.endswith(".txt") and p.is_file()]
            if not keys:
                raise DataError(f"{self.path}: no feats.scp and no <utt>.txt feature files")
        self.utts = sorted(keys, key=lambda k: k.encode("utf-8"))
        self._known = set(self.utts)

    def __contains__(self, utt: str) -> bool:
        return utt in self._known

    def source(self, utt: str) -> str:
        """Where ``utt`` is read from (``file.txt`` or ``feats.scp[utt]``), for messages."""
        return str(self.path / f"{utt}.txt") if self.kind == "txt" else f"{self.path / 'feats.scp'}[{utt}]"

    def load(self, utt: str) -> np.ndarray:
        """The ``(frames, dim)`` float64 matrix of ``utt``.

        Raises:
            DataError: ``utt`` is absent, the file is empty, ragged, non-numeric, or holds NaN/Inf
                (the message names the file and line, or the scp key).
        """
        if utt not in self._known:
            where = self.path / "feats.scp" if self.kind == "scp" else self.path / f"{utt}.txt"
            raise DataError(f"{where}: no features for '{utt}'")
        if self.kind == "scp":
            try:
                mat = np.asarray(self._scp[utt], dtype=np.float64)
            except Exception as e:
                raise DataError(f"{self.source(utt)}: cannot read matrix ({e})") from None
            if mat.ndim == 1:
                mat = mat[:, None]
            if mat.ndim != 2 or mat.shape[0] == 0:
                raise DataError(f"{self.source(utt)}: expected a non-empty (frames, dim) matrix, got shape {mat.shape}")
            bad = ~np.isfinite(mat)
            if bad.any():
                row = int(np.argwhere(bad)[0, 0])
                raise DataError(f"{self.source(utt)}: NaN or Inf in frame {row}")
            return mat
        return read_text_features(self.path / f"{utt}.txt")

    def load_all(self, utts: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """``{utt: matrix}`` for ``utts`` (default: every utterance); all must share one dimension.

        Raises:
            DataError: as :meth:`load`, or a dimension differing from the first file's.
        """
        out: dict[str, np.ndarray] = {}
        dim = None
        first = None
        for utt in self.utts if utts is None else utts:
            mat = self.load(utt)
            if dim is None:
                dim, first = mat.shape[1], utt
            elif mat.shape[1] != dim:
                raise DataError(
                    f"{self.source(utt)}: frames have {mat.shape[1]} dimensions, "
                    f"but {self.source(first)} has {dim}"
                )
            out[utt] = mat
        return out


def load_item_features(feature_dir: str | os.PathLike, items: Iterable, item_file: str | os.PathLike) -> dict:
    """The matrices of every file the ABX items name, from ``feature_dir`` (first-appearance order).

    Args:
        feature_dir: a feature directory (:class:`FeatureDir`).
        items: ABX items (:class:`speechkit.scoring.abx_items.Item`: ``file`` and ``line`` are read).
        item_file: where the items came from, for error messages.

    Returns:
        ``{file: (n_frames, dim) float array}``.

    Raises:
        DataError: an item names a file that is not in ``feature_dir`` (``ITEM_FILE:LINE``), or the
            matrices disagree in dimension; see :meth:`FeatureDir.load_all`.
        FileNotFoundError: ``feature_dir`` is not a directory.
    """
    fdir = FeatureDir(feature_dir)
    needed: list[str] = []
    seen: set[str] = set()
    for it in items:
        if it.file not in seen:
            if it.file not in fdir:
                raise DataError(f"{item_file}:{it.line}: item names '{it.file}', which is not in "
                                f"{fdir.source(it.file)}")
            seen.add(it.file)
            needed.append(it.file)
    logger.info("%d files named by %s; loading features from %s (%s)", len(needed), item_file, feature_dir, fdir.kind)
    return fdir.load_all(needed)


def read_text_features(path: str | os.PathLike) -> np.ndarray:
    """Read one ZeroSpeech text feature file: one frame per line, numbers separated by whitespace.

    Blank lines are skipped (as the ZeroSpeech 2019 reader does).

    Returns:
        ``(frames, dim)`` float64 array.

    Raises:
        FileNotFoundError: the file does not exist.
        DataError: empty file, a non-numeric token, a line whose length differs from the first
            frame's, or NaN/Inf; the message names the file and 1-based line.
    """
    path = Path(path)
    try:  # fast path (C parser); the slow path below only runs to locate an error
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": reported below
            mat = np.loadtxt(path, dtype=np.float64, ndmin=2, comments=None)
    except (ValueError, UnicodeDecodeError):
        mat = None
    if mat is not None and mat.size and np.isfinite(mat).all():
        return mat
    if not path.exists():
        raise FileNotFoundError(f"feature file not found: {path}")
    rows: list[list[float]] = []
    dim = None
    for lineno, line in enumerate(read_lines(path), 1):
        toks = line.split()
        if not toks:
            continue
        if dim is None:
            dim = len(toks)
        elif len(toks) != dim:
            raise DataError(f"{path}:{lineno}: {len(toks)} numbers, expected {dim} as on the first frame")
        try:
            vals = [float(t) for t in toks]
        except ValueError:
            raise DataError(f"{path}:{lineno}: not a number in {line.strip()[:60]!r}") from None
        rows.append(vals)
    if not rows:
        raise DataError(f"{path}: no frames (empty feature file)")
    mat = np.asarray(rows, dtype=np.float64)
    bad = ~np.isfinite(mat)
    if bad.any():
        row = int(np.argwhere(bad)[0, 0])
        # map the frame index back to its line (blank lines are skipped)
        lineno = _line_of_frame(path, row)
        raise DataError(f"{path}:{lineno}: NaN or Inf in frame {row}")
    return mat


def _line_of_frame(path: Path, frame: int) -> int:
    seen = -1
    for lineno, line in enumerate(read_lines(path), 1):
        if line.split():
            seen += 1
            if seen == frame:
                return lineno
    return 0
