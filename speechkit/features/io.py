"""Reading and writing feature matrices as Kaldi ark/scp (through kaldiio).

* :func:`ark_scp_writer` -- write an ark + scp pair atomically: both go to ``*.tmp`` names and
  are renamed into place only when every matrix is written, and the scp then names the final ark.
* :class:`ScpReader` -- random access to the matrices (or vectors) of one Kaldi scp table
  (``feats.scp``, ``labels.scp``, an scp file given directly): the one place an scp of matrices is
  opened, with the one guard (an entry that is absent, unreadable, of the wrong shape or not finite
  is a :class:`~speechkit.utils.fileio.DataError` naming the file and the key).
* :class:`FeatureReader` -- a data dir's features (its ``feats.scp`` through :class:`ScpReader`)
  by utterance, with CMVN applied on load as Kaldi's ``apply-cmvn`` does (global stats from
  ``cmvn_global.ark``, per-speaker stats from ``cmvn.scp``), and the dir's layout (``frame_shift``,
  ``feats.yaml``, ``utt2num_frames``, the dimension).
* :func:`load_global_cmvn_stats` -- a data dir's (or a file's) global CMVN stats.
* :func:`load_features` -- every matrix of a data dir (or the utterances asked for), normalised, each
  checked (:func:`check_matrix`: finite, long enough), as float32 tensors: what a model is trained on
  and applied to.
"""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Iterable, Iterator, Literal

import kaldiio
import numpy as np
import yaml
from tqdm import tqdm

from speechkit.data.datadir import GLOBAL_CMVN
from speechkit.features.cmvn import apply_cmvn
from speechkit.utils.fileio import DataError, atomic_write, naming_write_errors, read_lines, read_table
from speechkit.utils.outputs import scp_entry_file  # re-exported: the one parser of an scp value (recognize, tests)

# torch is imported where used: only the loaders of training and inference data need it.

logger = logging.getLogger(__name__)

__all__ = ["ark_scp_writer", "scp_files", "ScpReader", "FeatureReader", "load_cmvn_stats", "load_global_cmvn_stats",
           "GLOBAL_CMVN", "load_features", "check_matrix"]


@contextlib.contextmanager
def ark_scp_writer(ark: str | os.PathLike, scp: str | os.PathLike, compression_method: int | None = None, *,
                   scp_ark: str | os.PathLike | None = None):
    """Context manager yielding ``write(key, matrix)``; the ark/scp appear only on success.

    The scp lines name ``ark`` as given (make it absolute for a location-independent scp), or
    ``scp_ark`` if given.
    On an exception (or a kill) the final files are untouched and the temporaries are removed
    (after a kill, left as ``*.tmp`` and overwritten by the next run).

    Args:
        ark, scp: destination paths.
        compression_method: Kaldi compression method (1 = automatic), ``None`` for plain float.
        scp_ark: the ark path the scp lines name instead of ``ark``: where the ark will be once
            the directory it is written in is moved into place
            (:func:`speechkit.utils.outputs.replace_dir`).
    """
    ark, scp = Path(ark), Path(scp)
    named = Path(scp_ark) if scp_ark is not None else ark
    tmp_ark, tmp_scp = Path(f"{ark}.tmp"), Path(f"{scp}.tmp")
    ark.parent.mkdir(parents=True, exist_ok=True)
    scp.parent.mkdir(parents=True, exist_ok=True)
    try:
        with naming_write_errors(ark), \
                kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}", compression_method=compression_method) as w:
            yield w
        lines = []
        for line in read_lines(tmp_scp):
            key, loc = line.split(" ", 1)
            path, offset = loc.rsplit(":", 1)
            if path != str(tmp_ark):  # pragma: no cover - kaldiio writes what it is given
                raise RuntimeError(f"unexpected ark path in {tmp_scp}: {path}")
            lines.append(f"{key} {named}:{offset}\n")
        os.replace(tmp_ark, ark)
        with atomic_write(scp) as f:
            f.writelines(lines)
        tmp_scp.unlink()
    except BaseException:
        for p in (tmp_ark, tmp_scp):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        raise


def scp_files(scp: str | os.PathLike) -> list[Path]:
    """The distinct files the entries of a Kaldi scp read, in first-use order.

    ``KEY PATH:OFFSET`` and ``KEY PATH:OFFSET[slice]`` give ``PATH``, ``KEY PATH`` gives ``PATH``;
    commands (``KEY cmd ... |``) are left out. Used to keep outputs off the files a tool reads
    (:func:`speechkit.utils.outputs.check_output_dir`).

    Raises:
        FileNotFoundError: no ``scp``; DataError: a malformed line (names it).
    """
    out: dict[Path, None] = {}
    for value in read_table(scp).values():
        if not value.rstrip().endswith("|"):
            out.setdefault(Path(scp_entry_file(value)), None)
    return list(out)


def feature_dir_inputs(feature_dir: str | os.PathLike) -> list[tuple[str, Path]]:
    """``(label, file)`` of every file a feature dir's ``feats.scp`` reads (none for a dir without one, e.g.
    of ``<utt>.txt`` files): what a tool's outputs may not replace (:func:`speechkit.utils.outputs.check_output_files`)."""
    scp = Path(feature_dir) / "feats.scp"
    return [(f"a feature file of {scp}", f) for f in scp_files(scp)] if scp.is_file() else []


class ScpReader:
    """The matrices (or vectors) of one Kaldi scp table, read on access, with the one guard.

    The table is parsed by :func:`speechkit.utils.fileio.read_table` (a leading byte-order mark is
    dropped with a warning; an empty line, a key without a value or a duplicate key is an error
    naming the file and line) and each entry is read by ``kaldiio.load_mat`` from its value
    (``ark:offset``, ``ark:offset[slice]``, a plain matrix file or a command ending in ``|``), as
    ``kaldiio.load_scp``'s lazy loader does per key. Every reader of an scp of matrices from this
    layer up goes through it: :class:`FeatureReader` (a data dir), :func:`load_cmvn_stats`, the
    scoring readers (:class:`speechkit.scoring.feature_dir.FeatureDir`, ``speechkit-score-mcd``),
    vocoding, synthesis, the acoustic tasks and the continual evaluation (below it, ``speechkit.data``
    reads speaker vectors and checks CMVN stats with ``kaldiio.load_mat`` itself).

    Args:
        scp: the scp file.
        what: what an entry holds, for the message about an absent key (``"features"`` gives
            ``feats.scp: no features for 'u1'``).
        missing: what to tell when ``scp`` does not exist (e.g. ``"no features (run
            speechkit-compute-feats)"``); default ``"no such file"``.

    Attributes:
        path: the scp file (as given).
        table: ``key -> value`` in file order (:func:`~speechkit.utils.fileio.read_table`).
        utts: the keys, C-sorted (``keys()``, iteration and ``len`` follow them).

    ``read(key)`` gives the stored array as kaldiio returns it; ``matrix(key, ...)`` a checked
    ``(frames, dim)`` matrix; ``load(key)`` the float64 non-empty matrix the scorers take
    (``utts`` / ``load`` / ``source`` are the interface they share with
    :class:`speechkit.scoring.feature_dir.FeatureDir`).

    Raises:
        FileNotFoundError: no ``scp`` (``"{scp}: {missing}"``).
        DataError: a malformed line (names the file and line), or invalid UTF-8.
    """

    def __init__(self, scp: str | os.PathLike, *, what: str = "entry", missing: str = "no such file"):
        self.path = Path(scp)
        self.what = what
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: {missing}")
        self.table: dict[str, str] = read_table(self.path)
        self.utts: list[str] = sorted(self.table, key=lambda k: k.encode("utf-8"))

    def keys(self) -> list[str]:
        """The keys in C-sorted order."""
        return list(self.utts)

    def __len__(self) -> int:
        return len(self.utts)

    def __iter__(self) -> Iterator[str]:
        return iter(self.utts)

    def __contains__(self, key: object) -> bool:
        return key in self.table

    def source(self, key: str) -> str:
        """``SCP[key]``: where ``key`` is read from, for messages."""
        return f"{self.path}[{key}]"

    def read(self, key: str) -> np.ndarray:
        """The stored array of ``key``, as kaldiio reads it (float32 or float64, 1-D or 2-D; read-only
        when not compressed: copy it to write into it).

        Raises:
            DataError: ``key`` is not in the table (``SCP: no <what> for 'key'``), or its entry cannot
                be read (missing ark, bad offset, truncated file: ``SCP: 'key': cannot read VALUE: ...``).
        """
        if key not in self.table:
            raise DataError(f"{self.path}: no {self.what} for '{key}'")
        loc = self.table[key]
        try:
            return np.asarray(kaldiio.load_mat(loc))
        except Exception as e:  # kaldiio raises several types for a missing ark, a bad offset, a truncated file
            raise DataError(f"{self.path}: '{key}': cannot read {loc}: {e}") from None

    def matrix(self, key: str, dtype: np.dtype | type | None = None, *, copy: bool = False,
               vector_as_column: bool = False, non_empty: bool = False, dim: int | None = None, dim_of: str = "",
               finite: bool = False) -> np.ndarray:
        """The ``(frames, dim)`` matrix of ``key``, checked in this order.

        Args:
            dtype: convert to it (None: as stored; float32 -> float64 is exact).
            copy: always a fresh, writable array (else the stored one where ``dtype`` needs no conversion).
            vector_as_column: a 1-D entry is one column ``(frames, 1)`` (else an error).
            non_empty: zero frames is an error.
            dim: the number of columns required, named in the message as ``dim_of`` (e.g. a config key).
            finite: NaN or Inf is an error (names the first frame holding one).

        Raises:
            DataError: as :meth:`read`; ``SCP: 'key': expected a [non-empty ](frames, dim) matrix, got
                shape S``; ``SCP: 'key': C columns, expected D (dim_of)``; ``SCP: 'key': NaN or Inf in
                frame N``.
        """
        m = np.array(self.read(key), dtype=dtype) if copy else np.asarray(self.read(key), dtype=dtype)
        if vector_as_column and m.ndim == 1:
            m = m[:, None]
        if m.ndim != 2 or (non_empty and m.shape[0] == 0):
            shape = "a non-empty (frames, dim) matrix" if non_empty else "a (frames, dim) matrix"
            raise DataError(f"{self.path}: '{key}': expected {shape}, got shape {m.shape}")
        if dim is not None and m.shape[1] != dim:
            named = f" ({dim_of})" if dim_of else ""
            raise DataError(f"{self.path}: '{key}': {m.shape[1]} columns, expected {dim}{named}")
        if finite:
            bad = ~np.isfinite(m)
            if bad.any():
                raise DataError(f"{self.path}: '{key}': NaN or Inf in frame {int(np.argwhere(bad)[0, 0])}")
        return m

    def load(self, key: str) -> np.ndarray:
        """The float64 ``(frames, dim)`` matrix of ``key``, at least one frame (a 1-D entry is an error;
        NaN/Inf are left to the caller, which names them per utterance)."""
        return self.matrix(key, np.float64, non_empty=True)

    def __repr__(self) -> str:
        return f"ScpReader({str(self.path)!r}, entries={len(self)})"


def load_cmvn_stats(cmvn_scp: str | os.PathLike) -> dict[str, np.ndarray]:
    """``cmvn.scp`` -> {speaker or 'global': (2, D+1) float64 stats}, in file order.

    Raises:
        FileNotFoundError: no cmvn.scp.
        DataError: a malformed line (names the line); an entry that cannot be read or is not a
            2 x (D+1) matrix (names the key).
    """
    stats = ScpReader(cmvn_scp, what="stats", missing="no CMVN stats (run speechkit-compute-cmvn-stats)")
    out = {}
    for key in stats.table:
        m = np.asarray(stats.read(key), dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != 2 or m.shape[1] < 2:
            raise DataError(f"{stats.path}: '{key}': CMVN stats must be a 2 x (dim+1) matrix, got shape {m.shape}")
        out[key] = m
    return out


def _check_stats(m: np.ndarray, where: str) -> np.ndarray:
    if m.ndim != 2 or m.shape[0] != 2 or m.shape[1] < 2:
        raise DataError(f"{where}: CMVN stats must be a 2 x (dim+1) matrix, got shape {m.shape}")
    return m


def load_global_cmvn_stats(path: str | os.PathLike) -> np.ndarray:
    """Global Kaldi CMVN stats ``(2, D+1)`` float64.

    ``path`` may be a data dir (its ``cmvn_global.ark``; else its ``cmvn.scp``, below), a single
    Kaldi matrix file (``cmvn_global.ark``, ESPnet's ``cmvn.ark``), or a ``cmvn.scp`` (its legacy
    ``global`` entry, else the sum of its per-speaker stats: CMVN stats are additive).

    Raises:
        FileNotFoundError: no such file, or a data dir with neither file.
        DataError: unreadable or malformed stats (names the file and key).
    """
    path = Path(path)
    if path.is_dir():
        if (path / GLOBAL_CMVN).is_file():
            path = path / GLOBAL_CMVN
        elif (path / "cmvn.scp").is_file():
            path = path / "cmvn.scp"
        else:
            raise FileNotFoundError(f"{path}: no CMVN stats, neither {GLOBAL_CMVN} nor cmvn.scp "
                                    "(run speechkit-compute-cmvn-stats)")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no CMVN stats (run speechkit-compute-cmvn-stats)")
    with open(path, "rb") as f:
        head = f.read(2)
    if head == b"\0B":  # a binary Kaldi matrix (not an archive, whose entries start with a key)
        try:
            m = np.asarray(kaldiio.load_mat(str(path)), dtype=np.float64)
        except Exception as e:  # kaldiio raises several types for bad files
            raise DataError(f"{path}: cannot read CMVN stats: {e}") from None
        return _check_stats(m, str(path))
    stats = load_cmvn_stats(path)
    if not stats:
        raise DataError(f"{path}: no CMVN stats")
    return stats["global"] if "global" in stats else sum(stats.values())


class FeatureReader:
    """Features of a data dir, by utterance, with CMVN applied on load.

    Args:
        data_dir: a data dir with ``feats.scp`` (and ``utt2num_frames``, ``frame_shift``,
            ``feats.yaml`` as :mod:`speechkit-compute-feats <speechkit.bin.compute_feats>` writes).
        cmvn: ``"none"``; ``"global"`` (``cmvn_global.ark``; without it, the sum of the
            per-speaker stats of ``cmvn.scp`` -- CMVN stats are additive -- or a legacy
            ``global`` entry there); ``"speaker"`` (each utterance's speaker's stats via
            ``utt2spk``).
        norm_vars: also normalise variances (Kaldi ``apply-cmvn --norm-vars``); means always.

    ``reader[utt]`` -> float32 ``(frames, dim)``; ``keys()`` C-sorted utterance ids;
    ``num_frames(utt)``; ``dim``; ``frame_shift`` (seconds, or None); ``conf`` (``feats.yaml``).

    ``scp``: the :class:`ScpReader` of ``feats.scp`` (the stored matrices at their own precision).

    Raises:
        FileNotFoundError: no ``feats.scp`` (or no CMVN stats file when cmvn is not ``"none"``).
        DataError: a malformed ``feats.scp`` line (names the line); (on access) an utterance without
            features, an unreadable ark, an entry that is not a matrix, a speaker without stats, stats
            whose dimension differs from the features; names the file and the utterance.
    """

    def __init__(self, data_dir: str | os.PathLike, cmvn: Literal["none", "global", "speaker"] = "none",
                 norm_vars: bool = True):
        self.data_dir = Path(data_dir)
        self.cmvn = cmvn
        self.norm_vars = norm_vars
        if cmvn not in ("none", "global", "speaker"):
            raise ValueError(f"cmvn must be 'none', 'global' or 'speaker', got {cmvn!r}")
        self.scp = ScpReader(self.data_dir / "feats.scp", what="features",
                             missing="no features (run speechkit-compute-feats or utils/make_feats.sh)")
        self._scp_path = self.scp.path
        self._keys = self.scp.utts
        n2f = self.data_dir / "utt2num_frames"
        self._num_frames = {k: int(v) for k, v in read_table(n2f).items()} if n2f.is_file() else {}
        fs = self.data_dir / "frame_shift"
        self.frame_shift: float | None = float(fs.read_text().split()[0]) if fs.is_file() else None
        fy = self.data_dir / "feats.yaml"
        self.conf: dict | None = yaml.safe_load(fy.read_text(encoding="utf-8")) if fy.is_file() else None
        self._dim: int | None = None
        self._stats: dict[str, np.ndarray] = {}
        self._utt2spk: dict[str, str] = {}
        if cmvn == "global":
            self._stats = {"global": load_global_cmvn_stats(self.data_dir)}
        elif cmvn == "speaker":
            if not (self.data_dir / "cmvn.scp").is_file() and (self.data_dir / GLOBAL_CMVN).is_file():
                raise DataError(f"{self.data_dir}: holds global stats only ({GLOBAL_CMVN}); cmvn='speaker' needs "
                                f"per-speaker stats (speechkit-compute-cmvn-stats --per-speaker)")
            stats = load_cmvn_stats(self.data_dir / "cmvn.scp")
            if set(stats) == {"global"}:
                raise DataError(f"{self.data_dir}/cmvn.scp: holds global stats only; cmvn='speaker' needs "
                                f"per-speaker stats (speechkit-compute-cmvn-stats --per-speaker)")
            self._stats = stats
            self._utt2spk = read_table(self.data_dir / "utt2spk")

    # ------------------------------------------------------------------ mapping API
    def keys(self) -> list[str]:
        """Utterance ids in C-sorted order."""
        return list(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, utt: object) -> bool:
        return utt in self.scp

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        for k in self._keys:
            yield k, self[k]

    def raw(self, utt: str) -> np.ndarray:
        """The stored matrix of ``utt`` (no CMVN), float32 ``(frames, dim)`` (:meth:`ScpReader.matrix`'s errors)."""
        return self.scp.matrix(utt).astype(np.float32, copy=False)

    def __getitem__(self, utt: str) -> np.ndarray:
        feats = self.raw(utt)
        if self.cmvn == "none":
            return feats
        if self.cmvn == "global":
            key = "global"
        else:
            if utt not in self._utt2spk:
                raise DataError(f"{self.data_dir}/utt2spk: no speaker for utterance '{utt}'")
            key = self._utt2spk[utt]
            if key not in self._stats:
                raise DataError(f"{self.data_dir}/cmvn.scp: no stats for speaker '{key}' (utterance '{utt}')")
        try:
            return apply_cmvn(feats, self._stats[key], norm_vars=self.norm_vars)
        except ValueError as e:
            raise DataError(f"{self.data_dir}/cmvn.scp: '{key}' (utterance '{utt}'): {e}") from None

    def num_frames(self, utt: str) -> int:
        """Frames of ``utt`` (from ``utt2num_frames`` when present, else by loading it)."""
        if utt in self._num_frames:
            return self._num_frames[utt]
        return int(self.raw(utt).shape[0])

    @property
    def dim(self) -> int:
        """Feature dimension (of the first utterance)."""
        if self._dim is None:
            if not self._keys:
                raise DataError(f"{self._scp_path}: empty")
            self._dim = int(self.raw(self._keys[0]).shape[1])
        return self._dim

    def __repr__(self) -> str:
        return f"FeatureReader({str(self.data_dir)!r}, cmvn={self.cmvn!r}, utts={len(self)})"


def load_features(data_dir: str | os.PathLike, cmvn: str = "none", norm_vars: bool = True,
                  utts: Iterable[str] | None = None, min_frames: int = 1, min_frames_key: str = "",
                  progress: bool = True) -> tuple[list[str], list]:
    """Load (and CMVN-normalise) the feature matrices of a data dir, checking each one.

    Args:
        data_dir: data dir with ``feats.scp`` (and ``cmvn.scp`` unless ``cmvn`` is ``"none"``).
        cmvn: ``none`` | ``global`` | ``speaker`` (see :class:`FeatureReader`).
        norm_vars: normalise variances too.
        utts: utterances to load (default: those of ``utt2spk`` if present, else of ``feats.scp``).
        min_frames: fewest frames an utterance may have.
        min_frames_key: config key behind ``min_frames``, named in the error (e.g. ``model.stride``).
        progress: show a tqdm bar (stderr).

    Returns:
        ``(utts, feats)``: C-sorted utterance ids and float32 ``torch.Tensor`` s ``(T, D)``.

    Raises:
        FileNotFoundError: no feats.scp (or cmvn.scp when needed).
        DataError: an utterance without features, NaN/Inf, fewer than ``min_frames`` frames,
            differing dimensions; the message names the data dir and utterance.
    """
    import torch

    data_dir = Path(data_dir)
    reader = FeatureReader(data_dir, cmvn=cmvn, norm_vars=norm_vars)
    if utts is None:
        utts = read_table(data_dir / "utt2spk").keys() if (data_dir / "utt2spk").is_file() else reader.keys()
    utts = sorted(utts, key=lambda u: u.encode("utf-8"))
    missing = [u for u in utts if u not in reader]
    if missing:
        raise DataError(f"{data_dir}/feats.scp: no features for {len(missing)} utterance(s), e.g. '{missing[0]}' "
                        f"(run utils/fix_data_dir.sh {data_dir} or recompute the features)")
    feats: list = []
    dim = None
    for utt in tqdm(utts, desc=f"loading {data_dir}", unit="utt", disable=None if progress else True, leave=False):
        m = reader[utt]
        check_matrix(m, utt, f"{data_dir}/feats.scp", min_frames, min_frames_key)
        if dim is None:
            dim = m.shape[1]
        elif m.shape[1] != dim:
            raise DataError(f"{data_dir}/feats.scp: utterance '{utt}' has {m.shape[1]}-dimensional features, "
                            f"'{utts[0]}' has {dim}")
        feats.append(torch.from_numpy(np.array(m, dtype=np.float32)))  # a writable copy
    return utts, feats


def check_matrix(m: np.ndarray, utt: str, source: str, min_frames: int = 1, min_frames_key: str = "") -> None:
    """Reject a feature matrix with NaN/Inf or fewer than ``min_frames`` frames.

    Raises:
        DataError: naming ``source`` and ``utt`` (and the frame, or ``min_frames_key``).
    """
    bad = ~np.isfinite(m)
    if bad.any():
        frame = int(np.argwhere(bad)[0, 0])
        raise DataError(f"{source}: utterance '{utt}': NaN or Inf in frame {frame}")
    if m.shape[0] < min_frames:
        what = f" ({min_frames_key})" if min_frames_key else ""
        raise DataError(f"{source}: utterance '{utt}' has {m.shape[0]} frames, shorter than the total stride "
                        f"{min_frames}{what}")
