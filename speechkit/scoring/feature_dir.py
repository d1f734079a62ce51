"""Read the frame-level feature directories that ZeroSpeech-style scoring takes as input.

A feature directory holds either

* ``feats.scp`` (Kaldi ark/scp, read with :class:`speechkit.features.io.ScpReader`): one matrix per
  utterance (a vector is one column), or
* one text file per utterance, ``<utt>.txt``, one frame per line, numbers separated by spaces
  (the ZeroSpeech 2019 submission format), or
* one NumPy file per utterance, ``<utt>.npy``, a ``(frames, dim)`` array (as fastabx and the
  ZeroSpeech 2021 tools read them).

When ``feats.scp`` is present it wins; ``.txt`` and ``.npy`` files together are an error. Frame ``i``
(0-based) of an utterance is taken to lie at time ``(i + 0.5) * frame_shift`` seconds. The frame shift
is ``--frame-shift`` when given, else the number in ``DIR/frame_shift`` (the file Kaldi-style feature
extraction writes next to ``feats.scp``), else the step of a timestamp column (below), else 0.01 s.

Timestamps (``timestamps``, the CLIs' ``--timestamps``). The ZeroSpeech 2017 submission format puts
each frame's time first on its line (``time f1 f2 ...``). Scored as a feature, that column moved an
ABX error from 30.37 to 39.82 % without a word. ``auto`` (default) looks at the first column of the
``.txt``/``.npy`` files read: when in every file of :data:`MIN_FRAMES_TO_DETECT` frames or more it is
strictly increasing at a constant step (each value within a tenth of a step of the line through the
first and last), and all files agree on the step, it is a time column: it is left out of the features,
with a warning. Files whose first column is not a timestamp column all count as features; a dir in
which some long files have one and some not is an error asking for ``--timestamps yes|no``. ``yes``:
the first column is time in every file (an error where it is not strictly increasing at the step);
``no``: every column is a feature. The step's unit is taken from the frame shift when one is given
(``--frame-shift`` or ``DIR/frame_shift``: the step must be it, in seconds or in milliseconds), else a
step below 1 is seconds and one of 1 or more milliseconds, and it becomes the frame shift (between 1 and
100 ms); ``auto`` refuses a column counting frames (``0 1 2 ...`` or ``1 2 3 ...``: a frame index, or
times in ms at a 1 ms shift?) unless the frame shift is given. The times themselves are not used beyond that: frame ``i`` is still scored at
``(i + 0.5) * frame_shift``, and a file whose times start more than one frame shift away from
``0.5 * frame_shift`` is an error.

Every loader rejects NaN/Inf, ragged or non-numeric lines, and empty files with a
:class:`~speechkit.utils.fileio.DataError` naming the file and line (or the scp key).
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from speechkit.features.io import ScpReader
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, read_lines

logger = logging.getLogger(__name__)

DEFAULT_FRAME_SHIFT = 0.01

#: The values of ``timestamps`` (``--timestamps``): see the module docstring.
TIMESTAMPS = ("auto", "yes", "no")

#: ``auto`` decides from the files of at least this many frames (fewer could be increasing by chance).
MIN_FRAMES_TO_DETECT = 5

def _ts_error(message: str) -> DataError:
    """A DataError about the timestamp column whose message names ``timestamps`` / ``frame_shift`` as parameter
    references (:mod:`speechkit.utils.errors`: a CLI spells them as its flags)."""
    return naming_parameters(DataError(message))


#: How many missing files a message names before '...'.
MAX_NAMED = 5


def known_frame_shift(feature_dir: str | os.PathLike, frame_shift: float | None = None) -> float | None:
    """The frame shift in seconds when one is given: ``frame_shift``, else ``DIR/frame_shift``, else None.

    Raises:
        DataError: ``DIR/frame_shift`` exists but does not hold one positive number.
        ParameterError: an explicit ``frame_shift`` that is not positive.
    """
    if frame_shift is not None:
        if not frame_shift > 0:
            raise ParameterError("frame_shift", f"`frame_shift` must be positive, got {frame_shift}")
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
    return None


def resolve_frame_shift(feature_dir: str | os.PathLike, frame_shift: float | None = None) -> float:
    """The frame shift in seconds: ``frame_shift`` if given, else ``DIR/frame_shift``, else 0.01
    (a dir with a timestamp column: :meth:`FeatureDir.resolved_frame_shift`).

    Raises:
        DataError: ``DIR/frame_shift`` exists but does not hold one positive number.
        ParameterError: an explicit ``frame_shift`` that is not positive.
    """
    known = known_frame_shift(feature_dir, frame_shift)
    return DEFAULT_FRAME_SHIFT if known is None else known


def first_column_step(mat: np.ndarray) -> float | None:
    """The step of ``mat``'s first column if it is strictly increasing at a constant step, else None.

    Constant: every value lies within a tenth of the step of the line through the first and the last
    (timestamps printed with few digits, 0.013 0.023 0.033 ..., pass).

    Args:
        mat: ``(frames, dim)``; fewer than 2 frames has no step (None).
    """
    if mat.ndim != 2 or mat.shape[0] < 2 or mat.shape[1] < 1:
        return None
    col = mat[:, 0]
    if not (np.diff(col) > 0).all():
        return None
    step = (col[-1] - col[0]) / (len(col) - 1)
    line = col[0] + step * np.arange(len(col))
    return float(step) if np.abs(col - line).max() <= 0.1 * step else None


def _counts_frames(col: np.ndarray) -> bool:
    """``col`` is a frame counter: exactly ``0 1 2 ...`` or ``1 2 3 ...``."""
    return col[0] in (0.0, 1.0) and bool(np.array_equal(col, col[0] + np.arange(len(col))))


def _steps_agree(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 * max(a, b)


class FeatureDir:
    """Lazy access to the per-utterance matrices of a feature directory.

    Args:
        path: the directory (``feats.scp`` inside it, or ``<utt>.txt`` / ``<utt>.npy`` files).
        timestamps: ``auto``, ``yes`` or ``no``: whether the first column of each frame is its time
            (module docstring); decided at the first :meth:`load_all` (or :meth:`load`) over the
            matrices it reads.
        frame_shift: ``--frame-shift`` in seconds, if given (:meth:`resolved_frame_shift`).

    Attributes:
        path: the directory.
        kind: ``"scp"``, ``"txt"`` or ``"npy"``.
        utts: the utterance ids found, C-sorted.
        time_step: once decided, the timestamp column's step in seconds, or None (no such column).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        DataError: the directory holds neither ``feats.scp`` nor any ``*.txt`` / ``*.npy`` file, or
            both ``*.txt`` and ``*.npy`` files; a malformed ``feats.scp`` line (names the line).
        ParameterError: ``timestamps`` is not one of :data:`TIMESTAMPS`.
    """

    def __init__(self, path: str | os.PathLike, *, timestamps: str = "auto", frame_shift: float | None = None):
        self.path = Path(path)
        if timestamps not in TIMESTAMPS:
            raise ParameterError("timestamps",
                                 f"`timestamps` must be one of {', '.join(TIMESTAMPS)}, got {timestamps!r}")
        if not self.path.is_dir():
            raise FileNotFoundError(f"feature directory not found: {self.path}")
        self.timestamps = timestamps
        self._given_shift = frame_shift
        self._decided = False
        self.time_step: float | None = None
        self._time_scale = 1.0  # file units -> seconds
        scp = self.path / "feats.scp"
        self._scp: ScpReader | None = None
        if scp.is_file():
            self.kind = "scp"
            self._scp = ScpReader(scp, what="features")
            keys = self._scp.utts
        else:
            found = {sfx: [p.name[: -len(sfx)] for p in self.path.iterdir() if p.name.endswith(sfx) and p.is_file()]
                     for sfx in (".txt", ".npy")}
            if found[".txt"] and found[".npy"]:
                raise DataError(f"{self.path}: both <utt>.txt ({len(found['.txt'])}) and <utt>.npy "
                                f"({len(found['.npy'])}) feature files: keep one kind")
            self.kind = "npy" if found[".npy"] else "txt"
            keys = found[f".{self.kind}"]
            if not keys:
                raise DataError(f"{self.path}: no feats.scp and no <utt>.txt or <utt>.npy feature files")
        self.utts = sorted(keys, key=lambda k: k.encode("utf-8"))
        self._known = set(self.utts)

    def __contains__(self, utt: str) -> bool:
        return utt in self._known

    def source(self, utt: str) -> str:
        """Where ``utt`` is read from (``file.txt``, ``file.npy`` or ``feats.scp[utt]``), for messages."""
        return f"{self.path / 'feats.scp'}[{utt}]" if self.kind == "scp" else str(self.path / f"{utt}.{self.kind}")

    def missing(self, utts: Iterable[str]) -> list[str]:
        """Those of ``utts`` that the directory has no features for, in the order given."""
        return [u for u in utts if u not in self._known]

    def _read(self, utt: str) -> np.ndarray:
        if utt not in self._known:
            where = self.path / "feats.scp" if self.kind == "scp" else self.path / f"{utt}.{self.kind}"
            raise DataError(f"{where}: no features for '{utt}'")
        if self.kind == "txt":
            return read_text_features(self.path / f"{utt}.txt")
        if self.kind == "npy":
            return read_npy_features(self.path / f"{utt}.npy")
        mat = self._scp.matrix(utt, np.float64, vector_as_column=True, non_empty=True)
        bad = ~np.isfinite(mat)  # named as the .txt / .npy loaders name it: SOURCE: NaN or Inf in frame N
        if bad.any():
            row = int(np.argwhere(bad)[0, 0])
            raise DataError(f"{self.source(utt)}: NaN or Inf in frame {row}")
        return mat

    def load(self, utt: str) -> np.ndarray:
        """The ``(frames, dim)`` float64 matrix of ``utt`` (a timestamp column left out).

        Raises:
            DataError: ``utt`` is absent, the file is empty, ragged, non-numeric, or holds NaN/Inf
                (the message names the file and line, or the scp key); the timestamp errors of
                :meth:`load_all` (decided on this one file when nothing was loaded before).
        """
        mat = self._read(utt)
        if not self._decided:
            self._decide({utt: mat})
        return self._strip(utt, mat)

    def load_all(self, utts: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """``{utt: matrix}`` for ``utts`` (default: every utterance); all must share one dimension.

        Raises:
            DataError: as :meth:`load`; a dimension differing from the first file's; with
                ``timestamps``: ``auto`` and some files with a timestamp column while others have none,
                a step that matches neither the given frame shift in seconds nor in milliseconds, or
                (without one) a frame shift outside 1-100 ms, times starting more than a frame shift
                away from half a frame shift, ``yes`` and a file whose first column is not times at
                the step (each names the file(s)).
        """
        raw = {utt: self._read(utt) for utt in (self.utts if utts is None else utts)}
        if not self._decided:
            self._decide(raw)
        out: dict[str, np.ndarray] = {}
        dim = None
        first = None
        for utt, m in raw.items():
            mat = self._strip(utt, m)
            if dim is None:
                dim, first = mat.shape[1], utt
            elif mat.shape[1] != dim:
                raise DataError(
                    f"{self.source(utt)}: frames have {mat.shape[1]} dimensions, "
                    f"but {self.source(first)} has {dim}"
                )
            out[utt] = mat
        return out

    def resolved_frame_shift(self) -> float:
        """The frame shift in seconds: the given one, else ``DIR/frame_shift``, else the timestamp column's
        step (once decided), else 0.01.

        Raises:
            DataError, ValueError: as :func:`resolve_frame_shift`.
        """
        known = known_frame_shift(self.path, self._given_shift)
        if known is not None:
            return known
        return self.time_step if self.time_step is not None else DEFAULT_FRAME_SHIFT

    # ------------------------------------------------------------------ timestamps
    def _decide(self, mats: Mapping[str, np.ndarray]) -> None:
        self._decided = True
        if self.timestamps == "no" or (self.timestamps == "auto" and self.kind == "scp") or not mats:
            return
        steps = {u: first_column_step(m) for u, m in mats.items() if m.shape[1] >= 2}
        if self.timestamps == "auto":
            long = [u for u, m in mats.items() if m.shape[0] >= MIN_FRAMES_TO_DETECT]
            with_times = [u for u in long if steps.get(u) is not None]
            if not with_times:
                return
            without = [u for u in long if steps.get(u) is None]
            if without:
                raise _ts_error(
                    f"{self.path}: the first column looks like timestamps in {len(with_times)} of {len(long)} files "
                    f"(e.g. {self.source(with_times[0])}: strictly increasing by {steps[with_times[0]]:g}) but not in "
                    f"{len(without)} (e.g. {self.source(without[0])}): say `timestamps=yes` (the first column is "
                    "time) or no (every column is a feature)")
            ref = with_times[0]
        else:
            single = [u for u, m in mats.items() if m.shape[1] < 2]
            if single:
                raise _ts_error(f"{self.source(single[0])}: one column only, nothing left but the time "
                                "(`timestamps=yes`)")
            long = [u for u, m in mats.items() if m.shape[0] >= 2]
            if not long:
                raise _ts_error(f"{self.source(next(iter(mats)))}: one frame only: no step to take the frame shift "
                                "from (`timestamps=yes`)")
            ref = max(long, key=lambda u: mats[u].shape[0])
            if steps.get(ref) is None:
                raise _ts_error(f"{self.source(ref)}: the first column is not strictly increasing at a constant step: "
                                "not timestamps (`timestamps=yes`)")
        step = steps[ref]
        if self.timestamps == "auto" and known_frame_shift(self.path, self._given_shift) is None:
            counter = next((u for u in with_times if not _counts_frames(mats[u][:, 0])), None) is None
            if counter:  # 0 1 2 ... read as ms: a 1 ms frame shift, a bitrate 10 times too high, exit 0
                col = mats[ref][:, 0]
                raise _ts_error(
                    f"{self.source(ref)}: the first column counts frames ({col[0]:g} {col[1]:g} {col[2]:g} ..., as in "
                    f"every file): a frame index, or times in ms at a 1 ms frame shift? Say `timestamps=no` to score "
                    "it as a feature (or remove it), or give `frame_shift=0.001` if they are times")
        for u, m in mats.items():  # every file at the same step (files of one frame have none to compare)
            s = steps.get(u)
            if m.shape[0] >= 2 and (s is None or not _steps_agree(s, step)):
                got = "is not strictly increasing at a constant step" if s is None else f"steps by {s:g}"
                raise _ts_error(f"{self.source(u)}: the first column {got}, but in {self.source(ref)} it is timestamps "
                                f"at a step of {step:g}; say `timestamps=no` if it is a feature")
        self._time_scale, self.time_step = self._unit_of(step, ref)
        shift = self.resolved_frame_shift()
        for u, m in mats.items():
            t0 = float(m[0, 0]) * self._time_scale
            if abs(t0 - 0.5 * shift) > shift:
                raise _ts_error(f"{self.source(u)}: the timestamps start at {t0:g} s; frame i is scored at "
                                f"(i + 0.5) * {shift:g} s, so times that start more than one frame shift away from "
                                f"{0.5 * shift:g} s are not supported (strip the column, `timestamps=no` to score it)")
        unit = "s" if self._time_scale == 1.0 else "ms"
        t0 = float(mats[ref][0, 0]) * self._time_scale
        how = logger.warning if self.timestamps == "auto" else logger.info
        how("%s: the first column of every frame is its time (%s: %g %s, %g %s, ..., a step of %g %s = the frame "
            "shift %g s); it is left out of the features%s. Frame i is scored at (i + 0.5) * %g s (the timestamps "
            "start at %g s)", self.path, self.source(ref), mats[ref][0, 0], unit, mats[ref][1, 0], unit, step, unit,
            self.time_step, " (--timestamps no: score it as a feature)" if self.timestamps == "auto" else "",
            shift, t0)

    def _unit_of(self, step: float, ref: str) -> tuple[float, float]:
        """``(scale to seconds, step in seconds)`` of a timestamp column stepping by ``step`` (module docstring)."""
        known = known_frame_shift(self.path, self._given_shift)
        if known is not None:
            for scale in (1.0, 1e-3):
                if _steps_agree(step * scale, known):
                    return scale, step * scale
            raise _ts_error(f"{self.source(ref)}: the first column steps by {step:g}, but timestamps at the frame "
                            f"shift {known:g} s step by {known:g} (seconds) or {known * 1000:g} (milliseconds): say "
                            "`timestamps=no` if it is a feature, or give the right `frame_shift`")
        scale = 1.0 if step < 1 else 1e-3
        if not 0.001 <= step * scale <= 0.1:
            raise _ts_error(f"{self.source(ref)}: the first column steps by {step:g}, read as "
                            f"{step * scale:g} s, outside 1-100 ms: give `frame_shift` (or `timestamps=no`)")
        return scale, step * scale

    def _strip(self, utt: str, mat: np.ndarray) -> np.ndarray:
        if self.time_step is None:
            return mat
        s = first_column_step(mat)
        if mat.shape[1] < 2 or (mat.shape[0] >= 2 and (s is None or not _steps_agree(s * self._time_scale,
                                                                                         self.time_step))):
            raise _ts_error(f"{self.source(utt)}: the first column is not timestamps at a step of {self.time_step:g} s "
                            f"as in the files read before; say `timestamps=no` if it is a feature")
        return mat[:, 1:]


def load_item_features(feature_dir: str | os.PathLike, items: Iterable, item_file: str | os.PathLike, *,
                       timestamps: str = "auto", frame_shift: float | None = None) -> dict:
    """The matrices of every file the ABX items name, from ``feature_dir`` (first-appearance order).

    Args:
        feature_dir: a feature directory (:class:`FeatureDir`).
        items: ABX items (:class:`speechkit.scoring.abx_items.Item`: ``file`` and ``line`` are read).
        item_file: where the items came from, for error messages.
        timestamps, frame_shift: as :class:`FeatureDir` takes them (:func:`load_item_features_and_shift`
            also returns the frame shift they give).

    Returns:
        ``{file: (n_frames, dim) float array}``.

    Raises:
        DataError: items name files that are not in ``feature_dir`` (``ITEM_FILE:LINE`` of the first,
            then how many and the first :data:`MAX_NAMED` with their lines), or the matrices disagree in dimension;
            see :meth:`FeatureDir.load_all`.
        FileNotFoundError: ``feature_dir`` is not a directory.
    """
    return load_item_features_and_shift(feature_dir, items, item_file, timestamps=timestamps,
                                        frame_shift=frame_shift)[0]


def load_item_features_and_shift(feature_dir: str | os.PathLike, items: Iterable, item_file: str | os.PathLike, *,
                                 timestamps: str = "auto", frame_shift: float | None = None) -> tuple[dict, float]:
    """:func:`load_item_features` and the frame shift in seconds to score them at
    (:meth:`FeatureDir.resolved_frame_shift`: the given one, ``DIR/frame_shift``, a timestamp column's step,
    else 0.01).

    Raises:
        As :func:`load_item_features`.
    """
    fdir = FeatureDir(feature_dir, timestamps=timestamps, frame_shift=frame_shift)
    needed: list[str] = []
    first_line: dict[str, int] = {}
    for it in items:
        if it.file not in first_line:
            first_line[it.file] = it.line
            needed.append(it.file)
    missing = fdir.missing(needed)
    if missing:
        f = missing[0]
        msg = f"{item_file}:{first_line[f]}: item names '{f}', which is not in {fdir.source(f)}"
        if len(missing) > 1:
            msg += (f"; {len(missing)} of the {len(needed)} files the items name are missing: "
                    + ", ".join(f"'{m}' (line {first_line[m]})" for m in missing[:MAX_NAMED])
                    + (", ..." if len(missing) > MAX_NAMED else ""))
        raise DataError(msg)
    logger.info("%d files named by %s; loading features from %s (%s)", len(needed), item_file, feature_dir, fdir.kind)
    features = fdir.load_all(needed)
    return features, fdir.resolved_frame_shift()


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


def read_npy_features(path: str | os.PathLike) -> np.ndarray:
    """Read one ``<utt>.npy`` feature file: a ``(frames, dim)`` array (a 1-D array is one dimension).

    Returns:
        ``(frames, dim)`` float64 array.

    Raises:
        FileNotFoundError: the file does not exist.
        DataError: not a NumPy file (or a pickled object), not numeric, not 1-D or 2-D, no frames, or
            NaN/Inf (the message names the file, and the frame).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"feature file not found: {path}")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise DataError(f"{path}: not a NumPy array file ({e})") from None
    if not isinstance(arr, np.ndarray) or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise DataError(f"{path}: expected a numeric array, got {getattr(arr, 'dtype', type(arr).__name__)}")
    mat = np.asarray(arr, dtype=np.float64)
    if mat.ndim == 1:
        mat = mat[:, None]
    if mat.ndim != 2 or mat.shape[0] == 0 or mat.shape[1] == 0:
        raise DataError(f"{path}: expected a non-empty (frames, dim) array, got shape {arr.shape}")
    bad = ~np.isfinite(mat)
    if bad.any():
        raise DataError(f"{path}: NaN or Inf in frame {int(np.argwhere(bad)[0, 0])}")
    return mat


def _line_of_frame(path: Path, frame: int) -> int:
    seen = -1
    for lineno, line in enumerate(read_lines(path), 1):
        if line.split():
            seen += 1
            if seen == frame:
                return lineno
    return 0
