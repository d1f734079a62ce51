"""Kaldi-format data directories.

A data directory holds one table per file (see Kaldi's "Data preparation" page):

==================  ============================================  =========================
file                line                                          attribute
==================  ============================================  =========================
``wav.scp``         ``<recording-id> <path or 'command |'>``      :attr:`DataDir.wav_scp`
``segments``        ``<utt> <recording-id> <start-s> <end-s>``    :attr:`DataDir.segments`
``text``            ``<utt> <transcript>``                        :attr:`DataDir.text`
``utt2spk``         ``<utt> <speaker>``                           :attr:`DataDir.utt2spk`
``spk2utt``         ``<speaker> <utt> <utt> ...`` (derived)       :attr:`DataDir.spk2utt`
``utt2lang``        ``<utt> <language>``                          :attr:`DataDir.utt2lang`
``utt2dur``         ``<utt> <seconds>``                           :attr:`DataDir.utt2dur`
``feats.scp``       ``<utt> <ark-path:offset>``                   :attr:`DataDir.feats_scp`
``utt2num_frames``  ``<utt> <frames>``                            :attr:`DataDir.utt2num_frames`
``cmvn.scp``        ``<speaker> <ark-path:offset>``               :attr:`DataDir.cmvn_scp`
``spk2gender``      ``<speaker> <m or f>``                        :attr:`DataDir.spk2gender`
``phone_alignments`` ``<utt> <start-s> <end-s> <phone>``, several  :attr:`DataDir.phone_alignments`
                    lines per utterance (speechkit's)
==================  ============================================  =========================

Without ``segments``, recording ids are utterance ids. All files are sorted in C-locale
(byte) order and speaker ids are prefixes of utterance ids, as Kaldi's
``utils/validate_data_dir.sh`` requires.

Global CMVN statistics are not in ``cmvn.scp`` (whose keys Kaldi requires to be exactly the
speakers) but in ``cmvn_global.ark``, one Kaldi binary matrix (``kaldiio.load_mat``, Kaldi's
``apply-cmvn cmvn_global.ark``), as ESPnet keeps them out of ``cmvn.scp`` too.

The tools on data dirs are modules named after Kaldi's scripts: checking and repairing in
:mod:`speechkit.data.validate` and :mod:`speechkit.data.fix` (``validate_data_dir.sh`` /
``fix_data_dir.sh``), :mod:`speechkit.data.subset_data_dir`, :mod:`speechkit.data.split_data`,
:mod:`speechkit.data.copy_data_dir` and :mod:`speechkit.data.combine_data` (``subset_data_dir.sh``,
``split_data.sh``, ``copy_data_dir.sh``, ``combine_data.sh``). Reproducible train/dev/test splits
are :mod:`speechkit.data.splits`.

Every tool that keeps a subset of the utterances (:func:`~speechkit.data.fix.fix_data_dir`, :func:`subset`,
:func:`~speechkit.data.split_data.split`, :func:`~speechkit.data.copy_data_dir.copy_data_dir`,
:func:`~speechkit.data.combine_data.combine`) filters the per-utterance tables
(``text``, ``segments``, ``utt2lang``, ``utt2dur``, ``feats.scp``, ``utt2num_frames``,
``phone_alignments``) by utterance and the per-speaker ones (``cmvn.scp``, ``spk2gender``) by
speaker, through :meth:`DataDir.load` / :func:`subset` / :meth:`DataDir.write`; utterances
dropped are counted and named in a warning. Backups of files a tool replaces go to numbered
directories ``.backup/1``, ``.backup/2``, ... (:func:`backup_files`), never overwritten. A tool
writing into an existing data dir goes through :func:`update_data_dir`: features and CMVN stats
added there later are kept while the utterances and audio are the same, and every file replaced
or removed is backed up first (and named in the log).
"""
from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, NamedTuple

from speechkit.utils.fileio import (
    DataError, atomic_write, ensure_writable_dir, read_lines, read_table,
)

# speechkit.data.audio (numpy, soundfile) is imported where used: the data-dir tools start without numpy.

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

logger = logging.getLogger(__name__)


class Segment(NamedTuple):
    """One line of ``segments``: a span of a recording, in seconds."""

    recording: str
    start: float
    end: float


# file name -> attribute name, in the order they are written.
TABLES: dict[str, str] = {
    "wav.scp": "wav_scp",
    "segments": "segments",
    "text": "text",
    "utt2spk": "utt2spk",
    "utt2lang": "utt2lang",
    "utt2dur": "utt2dur",
    "feats.scp": "feats_scp",
    "utt2num_frames": "utt2num_frames",
    "cmvn.scp": "cmvn_scp",
    "spk2gender": "spk2gender",
}
#: Tables keyed by speaker (the others are keyed by utterance, or recording for ``wav.scp``).
PER_SPEAKER = ("cmvn.scp", "spk2gender")
#: speechkit's phone alignments: several ``<utt> <start-s> <end-s> <phone>`` lines per utterance.
PHONE_ALIGNMENTS = "phone_alignments"
#: Global CMVN stats: one Kaldi binary matrix (2 x dim+1, float64), outside ``cmvn.scp``.
GLOBAL_CMVN = "cmvn_global.ark"
#: Number of ids shown when a tool reports the utterances it dropped.
SHOW_IDS = 5


def show_ids(ids, n: int = SHOW_IDS) -> str:
    """``'a', 'b', 'c' ...`` : the first ``n`` of ``ids`` (C-sorted) for a log line."""
    ids = c_sorted(ids)
    return ", ".join(f"'{u}'" for u in ids[:n]) + (f" ... ({len(ids) - n} more)" if len(ids) > n else "")


def c_sorted(keys) -> list[str]:
    """Sort strings as ``LC_ALL=C sort`` does (by UTF-8 bytes).

    UTF-8 preserves code-point order, so this is Python's own string order.
    """
    return sorted(keys)


def fmt_seconds(v: float) -> str:
    """Format a time in seconds with 3 decimals, or up to 6 when 3 would lose precision.

    (``0.077125`` s, a TIMIT boundary at sample 1234 of 16 kHz audio, must survive a round trip.)
    """
    s = f"{v:.3f}"
    if abs(float(s) - v) > 1e-9:
        s = f"{v:.6f}".rstrip("0")
    return s


@dataclass
class DataDir:
    """An in-memory Kaldi data directory; every table is an id -> value dict (``None`` if absent).

    ``spk2utt`` is always derived from ``utt2spk`` and never stored separately.
    """

    wav_scp: dict[str, str] | None = None
    utt2spk: dict[str, str] = field(default_factory=dict)
    text: dict[str, str] | None = None
    segments: dict[str, Segment] | None = None
    utt2lang: dict[str, str] | None = None
    utt2dur: dict[str, float] | None = None
    feats_scp: dict[str, str] | None = None
    utt2num_frames: dict[str, int] | None = None
    cmvn_scp: dict[str, str] | None = None
    path: Path | None = None
    spk2gender: dict[str, str] | None = None
    #: utterance -> its ``phone_alignments`` lines without the id (``"<start> <end> <phone>"``), in file order.
    phone_alignments: dict[str, list[str]] | None = None

    # ------------------------------------------------------------------ views
    @property
    def utts(self) -> list[str]:
        """Utterance ids (the keys of ``utt2spk``) in C-locale order."""
        return c_sorted(self.utt2spk)

    @property
    def spk2utt(self) -> dict[str, list[str]]:
        """Speaker -> sorted utterance ids, derived from ``utt2spk``."""
        out: dict[str, list[str]] = {}
        for utt in self.utts:
            out.setdefault(self.utt2spk[utt], []).append(utt)
        return {spk: out[spk] for spk in c_sorted(out)}

    def recording_of(self, utt: str) -> str:
        """The ``wav.scp`` key holding ``utt`` (itself when there is no ``segments``)."""
        return self.segments[utt].recording if self.segments is not None else utt

    def __len__(self) -> int:
        return len(self.utt2spk)

    def unlisted(self) -> dict[str, list[str]]:
        """Ids of per-utterance files that are not in ``utt2spk`` (every tool ignores them): file -> ids.

        Checked: ``text``, ``segments``, ``utt2lang``, ``utt2dur``, ``feats.scp``,
        ``utt2num_frames``, ``phone_alignments``, and ``wav.scp`` when there is no ``segments``.
        Only files with such ids appear; ids are C-sorted.
        """
        out: dict[str, list[str]] = {}
        files = [(f, getattr(self, a)) for f, a in TABLES.items()
                 if f not in PER_SPEAKER and (f != "wav.scp" or self.segments is None)]
        files.append((PHONE_ALIGNMENTS, self.phone_alignments))
        for fname, table in files:
            if table is not None:
                extra = [k for k in table if k not in self.utt2spk]
                if extra:
                    out[fname] = c_sorted(extra)
        return out

    # ------------------------------------------------------------------ I/O
    @classmethod
    def load(cls, path: str | os.PathLike) -> "DataDir":
        """Read every table present in directory ``path``.

        Raises:
            FileNotFoundError: ``path`` is not a directory or has no ``utt2spk``.
            DataError: a malformed line (message names file and line).
        """
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such data directory")
        if not (path / "utt2spk").is_file():
            raise FileNotFoundError(f"{path}/utt2spk: missing (every data directory needs one)")
        d = cls(path=path)
        for fname, attr in TABLES.items():
            f = path / fname
            if not f.is_file():
                continue
            table = read_table(f, allow_empty_value=(fname == "text"))
            if attr == "segments":
                table = {k: _parse_segment(f, i, k, v) for i, (k, v) in enumerate(table.items(), 1)}
            elif attr == "utt2dur":
                table = {k: _parse_number(f, i, k, v, float) for i, (k, v) in enumerate(table.items(), 1)}
            elif attr == "utt2num_frames":
                table = {k: _parse_number(f, i, k, v, int) for i, (k, v) in enumerate(table.items(), 1)}
            setattr(d, attr, table)
        if (path / PHONE_ALIGNMENTS).is_file():
            d.phone_alignments = _read_utt_lines(path / PHONE_ALIGNMENTS)
        return d

    def tables(self) -> dict[str, dict[str, str]]:
        """Every present table as it is written to disk: file name -> {id: value string}.

        Includes the derived ``spk2utt``; absent (``None``) tables are left out.
        """
        out: dict[str, dict[str, str]] = {}
        for fname, attr in TABLES.items():
            table = getattr(self, attr)
            if table is None:
                continue
            if attr == "segments":
                table = {k: f"{s.recording} {fmt_seconds(s.start)} {fmt_seconds(s.end)}" for k, s in table.items()}
            elif attr == "utt2dur":
                table = {k: fmt_seconds(v) for k, v in table.items()}
            else:
                table = {k: str(v) for k, v in table.items()}
            out[fname] = table
        out["spk2utt"] = {s: " ".join(u) for s, u in self.spk2utt.items()}
        return out

    def write(self, path: str | os.PathLike | None = None, *, extras: "Mapping[str, bytes | None] | None" = None,
              why: str = "the source has none", backup: bool = True) -> Path:
        """Write every present table (sorted, atomically) plus the derived ``spk2utt`` into ``path``.

        An existing directory is updated by :func:`update_data_dir` (the one rule by which a tool
        rewrites a data dir): tables set to ``None`` (``phone_alignments`` included) are removed
        if there, files another tool added later (features, CMVN) are kept when the utterances and
        their audio are unchanged, and every file replaced or removed is first copied to a numbered
        ``path/.backup/N`` (unless ``backup=False``: the caller made one), said in the log.

        Args:
            path: the directory (default: :attr:`path`).
            extras: more files to write along, by name: their bytes, or ``None`` for one the new
                dir does not have (e.g. :func:`extras_of` a source dir: ``frame_shift``, ...).
            why: why a file the new dir lacks is removed (for the log).
            backup: back up what is replaced or removed (see above).

        Returns:
            The directory written.

        Raises:
            WriteError: ``path`` cannot be written.
        """
        path = ensure_writable_dir(path if path is not None else self.path)
        files: dict[str, bytes | None] = {name: None for name in (*TABLES, "spk2utt")}
        files.update({name: _render_table(table) for name, table in self.tables().items()})
        files[PHONE_ALIGNMENTS] = (None if self.phone_alignments is None
                                   else _render_utt_lines(self.phone_alignments).encode("utf-8"))
        files.update(extras or {})
        update_data_dir(path, files, why=why, backup=backup)
        self.path = path
        return path


def iter_audio(datadir: DataDir, expected_sr: int | None = None) -> Iterator[tuple[str, np.ndarray, int]]:
    """Yield ``(utt, samples, sr)`` for every utterance of ``datadir`` in (C-sorted) utterance order.

    With ``segments`` each recording is decoded only once, however its utterances are ordered;
    it is kept in memory until its last segment has been yielded.

    Raises:
        DataError: an utterance whose recording is not in ``wav.scp``, or any
            :func:`~speechkit.data.audio.read_audio` error (the message names ``wav.scp`` or
            ``segments`` and the key).
    """
    from speechkit.data.audio import _segment_bounds, _where, read_audio

    base = Path(datadir.path) if datadir.path is not None else None
    wav_src = str(base / "wav.scp") if base is not None else "wav.scp"
    seg_src = str(base / "segments") if base is not None else "segments"
    if datadir.wav_scp is None:
        raise DataError(f"{wav_src}: missing (needed to read audio)")
    utts = datadir.utts
    if datadir.segments is None:
        for utt in utts:
            if utt not in datadir.wav_scp:
                raise DataError(f"{wav_src}: no entry for utterance '{utt}'")
            x, sr = read_audio(datadir.wav_scp[utt], key=utt, expected_sr=expected_sr, source=wav_src)
            yield utt, x, sr
        return
    remaining: Counter[str] = Counter()
    for utt in utts:
        if utt not in datadir.segments:
            raise DataError(f"{seg_src}: no entry for utterance '{utt}'")
        rec = datadir.segments[utt].recording
        if rec not in datadir.wav_scp:
            raise DataError(f"{seg_src}: utterance '{utt}' refers to recording '{rec}', not in {wav_src}")
        remaining[rec] += 1
    cache: dict[str, tuple[np.ndarray, int]] = {}
    for utt in utts:
        seg = datadir.segments[utt]
        rec = seg.recording
        if rec not in cache:
            cache[rec] = read_audio(datadir.wav_scp[rec], key=rec, expected_sr=expected_sr, source=wav_src)
        x, sr = cache[rec]
        b, e = _segment_bounds(seg.start, seg.end, sr, len(x), _where(seg_src, utt))
        remaining[rec] -= 1
        if remaining[rec] == 0:
            del cache[rec]
        yield utt, x[b:e], sr


def _read_utt_lines(f: Path) -> dict[str, list[str]]:
    """A file of ``<utt> <rest>`` lines, several per utterance -> utt -> [rest, ...] (file order)."""
    out: dict[str, list[str]] = {}
    for lineno, line in enumerate(read_lines(f), 1):
        parts = line.split(maxsplit=1)
        if len(parts) < 2:
            raise DataError(f"{f}:{lineno}: expected '<utt> <fields...>', got {line!r}")
        out.setdefault(parts[0], []).append(parts[1].rstrip())
    return out


def _render_utt_lines(table: dict[str, list[str]]) -> str:
    """Inverse of :func:`_read_utt_lines`: utterances in C order, each one's lines in their order."""
    return "".join(f"{u} {rest}\n" for u in c_sorted(table) for rest in table[u])


def new_backup_dir(data_dir: str | os.PathLike) -> Path:
    """Create and return the next numbered backup directory ``DATA_DIR/.backup/N`` (1, 2, ...).

    Safe against concurrent callers (each gets its own number, by ``mkdir``).

    Raises:
        WriteError: ``DATA_DIR/.backup`` cannot be created.
    """
    root = ensure_writable_dir(Path(data_dir) / ".backup")
    n = 1 + max((int(p.name) for p in root.iterdir() if p.name.isdigit()), default=0)
    while True:
        try:
            (root / str(n)).mkdir()
            return root / str(n)
        except FileExistsError:
            n += 1


def backup_files(data_dir: str | os.PathLike, names, *, move: bool = False) -> Path | None:
    """Copy (or move, ``move=True``) the files ``names`` of ``data_dir`` present there to a new
    numbered backup directory (:func:`new_backup_dir`); an earlier backup is never overwritten.

    Returns:
        The backup directory, or ``None`` if none of the files exists (nothing is created then).
    """
    data_dir = Path(data_dir)
    present = [n for n in names if (data_dir / n).is_file()]
    if not present:
        return None
    dest = new_backup_dir(data_dir)
    for name in present:
        try:
            if move:
                os.replace(data_dir / name, dest / name)
            else:
                with atomic_write(dest / name, "wb") as out:
                    out.write((data_dir / name).read_bytes())
        except FileNotFoundError:  # a concurrent job moved it first
            continue
    if not any(dest.iterdir()):
        dest.rmdir()
        return None
    return dest


def _parse_segment(f: Path, lineno: int, key: str, value: str) -> Segment:
    parts = value.split()
    if len(parts) != 3:
        raise DataError(f"{f}:{lineno}: segments line for '{key}' needs 4 fields, got {len(parts) + 1}")
    try:
        start, end = float(parts[1]), float(parts[2])
    except ValueError:
        raise DataError(f"{f}:{lineno}: segments times for '{key}' are not numbers: {value!r}") from None
    return Segment(parts[0], start, end)


def _parse_number(f: Path, lineno: int, key: str, value: str, typ):
    try:
        return typ(value)
    except ValueError:
        raise DataError(f"{f}:{lineno}: value for '{key}' is not a{'n integer' if typ is int else ' number'}: {value!r}") from None


# ====================================================================== the rule every tool filters by
#: Files copied as they are by subset/split/combine/copy (Kaldi carries ``frame_shift`` too).
EXTRA_FILES = ("frame_shift", "feats.yaml", GLOBAL_CMVN)


def subset(d: DataDir, utts) -> DataDir:
    """A new in-memory :class:`DataDir` with only the utterances ``utts``.

    This is the one rule by which every tool filters a data dir: the per-utterance tables and
    ``phone_alignments`` keep the lines of ``utts``, ``wav.scp`` only the recordings used,
    ``cmvn.scp`` and ``spk2gender`` only the speakers used. Ids of ``utts`` not in ``d`` are
    ignored with a warning (as Kaldi's ``filter_scp.pl``).

    Raises:
        DataError: none of ``utts`` is in ``d``.
    """
    wanted = set(utts)
    keep = wanted & set(d.utt2spk)
    if len(keep) < len(wanted):
        logger.warning("%s: %d of the requested utterances are not in the data dir (ignored): %s",
                       d.path or "subset", len(wanted) - len(keep), show_ids(wanted - keep))
    if not keep:
        raise DataError(f"{d.path or 'data dir'}: none of the {len(wanted)} requested utterances is in utt2spk")
    out = DataDir()
    order = c_sorted(keep)
    for attr in ("utt2spk", "text", "segments", "utt2lang", "utt2dur", "feats_scp", "utt2num_frames"):
        table = getattr(d, attr)
        if table is not None:
            setattr(out, attr, {k: table[k] for k in order if k in table})
    if d.wav_scp is not None:
        recs = {d.recording_of(u) for u in keep if d.segments is None or u in d.segments}
        out.wav_scp = {k: v for k, v in d.wav_scp.items() if k in recs}
    spks = {d.utt2spk[u] for u in keep}
    if d.cmvn_scp is not None:
        out.cmvn_scp = {k: v for k, v in d.cmvn_scp.items() if k in spks or k == "global"}
    if d.spk2gender is not None:
        out.spk2gender = {k: v for k, v in d.spk2gender.items() if k in spks}
    if d.phone_alignments is not None:
        out.phone_alignments = {k: list(d.phone_alignments[k]) for k in order if k in d.phone_alignments}
    return out


def extras_of(src: str | os.PathLike | None, exclude=()) -> dict[str, bytes | None]:
    """``src``'s :data:`EXTRA_FILES` as :meth:`DataDir.write` takes them: name -> bytes, or ``None``
    for one ``src`` lacks (or every one, for ``src`` None), or one of ``exclude`` (never carried)."""
    out: dict[str, bytes | None] = {}
    for name in EXTRA_FILES:
        f = Path(src) / name if src is not None else None
        out[name] = f.read_bytes() if f is not None and name not in exclude and f.is_file() else None
    return out


def _copy_extras(src: Path | None, dest: Path, exclude=(), why: str = "the source has none") -> Path | None:
    """Copy ``src``'s :data:`EXTRA_FILES` to ``dest`` after its tables were written
    (:func:`update_data_dir`): one ``src`` lacks (or an in-memory source, ``src`` None) is removed,
    backed up, unless ``dest`` keeps its own features (a ``feats.scp`` the source does not replace:
    :meth:`DataDir.write` kept it, the utterances and audio being the same). Prefer
    ``DataDir.write(dest, extras=extras_of(src))``: one backup for both."""
    return update_data_dir(dest, extras_of(src, exclude), why=why)


#: Files later tools add to a data dir (``compute-feats``, ``compute-cmvn-stats``); they describe
#: the utterances of ``utt2spk`` and the audio of ``wav.scp``/``segments`` (:data:`FEATURE_SOURCES`).
LATER_FILES = ("feats.scp", "utt2num_frames", "cmvn.scp", *EXTRA_FILES)
#: The tables the files of :data:`LATER_FILES` are made from.
FEATURE_SOURCES = ("utt2spk", "wav.scp", "segments")


def _render_table(table: Mapping[str, object]) -> bytes:
    """A table as :func:`~speechkit.utils.fileio.write_table` writes it (C order; ``key`` alone for an empty value)."""
    return "".join(f"{k} {table[k]}\n" if str(table[k]) != "" else f"{k}\n" for k in c_sorted(table)).encode("utf-8")


def _read_or_none(f: Path) -> bytes | None:
    try:
        return f.read_bytes() if f.is_file() else None
    except FileNotFoundError:
        return None


def update_data_dir(dest: str | os.PathLike, files: Mapping[str, bytes | None], *, why: str = "the source has none",
                    backup: bool = True) -> Path | None:
    """Write a tool's files into the data dir ``dest``: the one rule by which copy, subset, combine,
    split-corpus, speed perturbation (and :meth:`DataDir.write`) update an existing data dir.

    ``files`` maps a file name to its new bytes, or to ``None`` for a file the new dir does not have.
    Data dirs are incremental (features and CMVN stats are added by later tools), so:

    - **Later work is kept** when it still describes the dir: if none of :data:`LATER_FILES` gets
      new content, the tables they are made from (:data:`FEATURE_SOURCES`: ``utt2spk``,
      ``wav.scp``, ``segments``) are unchanged and ``dest`` has a ``feats.scp``, then its
      ``feats.scp``, ``utt2num_frames``, ``cmvn.scp``, ``frame_shift``, ``feats.yaml`` and
      ``cmvn_global.ark`` are kept (re-running an identical split or copy removes nothing).
    - **Nothing is lost**: before any file of ``dest`` is replaced or removed, every data-dir file
      there (tables, ``spk2utt``, ``phone_alignments``, the extras and the names in ``files``) is
      copied to a new numbered ``dest/.backup/N`` (:func:`backup_files`; skipped with
      ``backup=False``, for a caller that made its own); the files removed are named in a warning
      with ``why`` and the backup, those replaced at info level.

    Files whose content is unchanged are not rewritten; other files of ``dest`` (logs, arks) are
    never touched.

    Returns:
        The backup directory, or ``None`` when nothing existing was replaced or removed.

    Raises:
        WriteError: ``dest`` or its backup cannot be written.
    """
    dest = ensure_writable_dir(dest)
    files = dict(files)
    current = {name: _read_or_none(dest / name) for name in files}
    later_present = [n for n in LATER_FILES if (dest / n).is_file()]
    if ("feats.scp" in later_present
            and all(files.get(n) is None or files[n] == _read_or_none(dest / n) for n in LATER_FILES)
            and all(n not in files or files[n] == current[n] for n in FEATURE_SOURCES)):
        kept = [n for n in later_present if n in files and files[n] is None]
        for n in kept:
            del files[n]
        if kept:
            logger.info("%s: kept %s (its utterances and audio are unchanged; computed by a later tool)", dest,
                        " ".join(kept))
    removed = [n for n, b in files.items() if b is None and current.get(n) is not None]
    replaced = [n for n, b in files.items() if b is not None and current.get(n) is not None and current[n] != b]
    saved = None
    if (removed or replaced) and backup:
        names = dict.fromkeys((*TABLES, "spk2utt", PHONE_ALIGNMENTS, *EXTRA_FILES, *files))
        saved = backup_files(dest, names)
    for name, data in files.items():
        if data is None:
            if current.get(name) is not None:
                with contextlib.suppress(FileNotFoundError):
                    (dest / name).unlink()
        elif data != current.get(name):
            with atomic_write(dest / name, "wb") as f:
                f.write(data)
    where = f"the previous files are in {saved}" if saved is not None else "no backup (made by the caller)"
    if removed:
        logger.warning("%s: removed %s (%s)%s; %s", dest, " ".join(removed), why,
                       f" and replaced {' '.join(replaced)}" if replaced else "", where)
    elif replaced:
        logger.info("%s: replaced %s; %s", dest, " ".join(replaced), where)
    return saved


def _as_datadir(d: "DataDir | str | os.PathLike") -> DataDir:
    return d if isinstance(d, DataDir) else DataDir.load(d)
