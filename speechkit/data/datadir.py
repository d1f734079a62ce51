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

Checking and repairing a data dir are in :mod:`speechkit.data.validate` and
:mod:`speechkit.data.fix` (Kaldi's ``validate_data_dir.sh`` / ``fix_data_dir.sh``).

Every tool that keeps a subset of the utterances (:func:`~speechkit.data.fix.fix_data_dir`, :func:`subset`,
:func:`split`, :func:`copy_data_dir`, :func:`combine`) filters the per-utterance tables
(``text``, ``segments``, ``utt2lang``, ``utt2dur``, ``feats.scp``, ``utt2num_frames``,
``phone_alignments``) by utterance and the per-speaker ones (``cmvn.scp``, ``spk2gender``) by
speaker, through :meth:`DataDir.load` / :func:`subset` / :meth:`DataDir.write`; utterances
dropped are counted and named in a warning. Backups of files a tool replaces go to numbered
directories ``.backup/1``, ``.backup/2``, ... (:func:`backup_files`), never overwritten.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, NamedTuple

from speechkit.utils.fileio import (
    DataError, atomic_write, ensure_writable_dir, read_lines, read_table, write_table,
)
from speechkit.utils.outputs import check_output_dir

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

    def write(self, path: str | os.PathLike | None = None) -> Path:
        """Write every present table (sorted, atomically) plus the derived ``spk2utt``.

        Tables set to ``None`` (``phone_alignments`` included) are removed from ``path`` if a
        stale copy exists there. Returns the directory written.

        Raises:
            WriteError: ``path`` cannot be written.
        """
        path = ensure_writable_dir(path if path is not None else self.path)
        tables = self.tables()
        for fname in (*TABLES, "spk2utt"):
            if fname not in tables:
                if (path / fname).exists():
                    (path / fname).unlink()
                continue
            write_table(path / fname, tables[fname])
        if self.phone_alignments is None:
            if (path / PHONE_ALIGNMENTS).exists():
                (path / PHONE_ALIGNMENTS).unlink()
        else:
            with atomic_write(path / PHONE_ALIGNMENTS) as f:
                f.write(_render_utt_lines(self.phone_alignments))
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
    from speechkit.data.audio import _segment_bounds, _where, read_audio   # soundfile, on first use

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


# ====================================================================== subset / split / combine / copy
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


def _copy_extras(src: Path | None, dest: Path) -> None:
    if src is None:
        return
    for name in EXTRA_FILES:
        if (src / name).is_file():
            with atomic_write(dest / name, "wb") as out:
                out.write((src / name).read_bytes())


def _as_datadir(d: "DataDir | str | os.PathLike") -> DataDir:
    return d if isinstance(d, DataDir) else DataDir.load(d)


def subset_data_dir(src: "DataDir | str | os.PathLike", dest: str | os.PathLike, *, first: int | None = None,
                    last: int | None = None, utt_list: str | os.PathLike | None = None,
                    spk_list: str | os.PathLike | None = None, num: int | None = None,
                    seed: int = 777) -> DataDir:
    """Write a subset of ``src`` to ``dest`` (Kaldi's ``utils/subset_data_dir.sh``); exactly one mode.

    Modes: ``first``/``last`` N utterances in sorted order; the utterances listed (first field
    per line) in ``utt_list``; all utterances of the speakers in ``spk_list``; ``num`` utterances
    drawn at random with ``seed`` (the same seed gives the same subset). ``phone_alignments`` and
    ``spk2gender`` are filtered along (:func:`subset`); ``frame_shift``, ``feats.yaml`` and
    ``cmvn_global.ark`` are copied. An existing ``dest`` gets the new tables (stale ones removed,
    :meth:`DataDir.write`); files other tools added there (features, logs) stay, as with Kaldi.

    Raises:
        ValueError: not exactly one mode, or N < 1.
        OutputOverlapError: ``dest`` is, contains or lies inside ``src`` or the list file.
        DataError: N larger than the number of utterances, or an empty result.
    """
    import random

    d = _as_datadir(src)
    modes = [m for m, v in (("first", first), ("last", last), ("utt_list", utt_list), ("spk_list", spk_list),
                            ("num", num)) if v is not None]
    if len(modes) != 1:
        raise ValueError(f"choose exactly one of --first, --last, --utt-list, --spk-list, N (got {modes or 'none'})")
    check_output_dir(dest, inputs=[("the source", d.path), ("--utt-list", utt_list), ("--spk-list", spk_list)],
                     option="destination")
    utts = d.utts
    n = first if first is not None else last if last is not None else num
    if n is not None:
        if n < 1:
            raise ValueError(f"number of utterances must be >= 1, got {n}")
        if n > len(utts):
            raise DataError(f"{d.path}: cannot take {n} utterances, there are only {len(utts)}")
    if first is not None:
        chosen = utts[:first]
    elif last is not None:
        chosen = utts[-last:]
    elif num is not None:
        chosen = random.Random(seed).sample(utts, num)
    elif utt_list is not None:
        chosen = [line.split()[0] for line in read_lines(utt_list) if line.strip()]
    else:
        spks = {line.split()[0] for line in read_lines(spk_list) if line.strip()}
        unknown = spks - set(d.utt2spk.values())
        if unknown:
            logger.warning("%s: %d speakers of %s are not in the data dir (ignored): %s", d.path, len(unknown),
                           spk_list, show_ids(unknown))
        chosen = [u for u in utts if d.utt2spk[u] in spks]
        if not chosen:
            raise DataError(f"{spk_list}: none of its {len(spks)} speakers is in {d.path}")
    out = subset(d, chosen)
    out.write(dest)
    _copy_extras(d.path, Path(dest))
    logger.info("%s: %d utterances of %s", dest, len(out), d.path)
    return out


def _split_groups(items: list[str], n: int, weights: dict[str, int] | None = None) -> list[list[str]]:
    """Split ``items`` into ``n`` contiguous non-empty groups with balanced total weight.

    Without weights: sizes differ by at most one (the first ``len % n`` groups get one more).
    With weights (utterances per speaker): start from even item boundaries, then move boundary
    items to the neighbour while that reduces the size difference, as Kaldi's ``split_scp.pl``
    does, never emptying a group.
    """
    if weights is None:
        q, r = divmod(len(items), n)
        out, i = [], 0
        for j in range(n):
            k = q + (1 if j < r else 0)
            out.append(items[i:i + k])
            i += k
        return out
    groups: list[list[str]] = [[] for _ in range(n)]
    for i, it in enumerate(items):
        groups[i * n // len(items)].append(it)
    size = [sum(weights[x] for x in g) for g in groups]
    changed = True
    while changed:
        changed = False
        for j in range(n):
            if j < n - 1 and len(groups[j]) > 1:
                c = weights[groups[j][-1]]
                if abs((size[j + 1] + c) - (size[j] - c)) < abs(size[j + 1] - size[j]):
                    groups[j + 1].insert(0, groups[j].pop())
                    size[j] -= c
                    size[j + 1] += c
                    changed = True
            if j > 0 and len(groups[j]) > 1:
                c = weights[groups[j][0]]
                if abs((size[j] - c) - (size[j - 1] + c)) < abs(size[j] - size[j - 1]):
                    groups[j - 1].append(groups[j].pop(0))
                    size[j] -= c
                    size[j - 1] += c
                    changed = True
    return groups


def split_dir_name(n: int, by_speaker: bool = True) -> str:
    """Kaldi's name for a split: ``split4`` (by speaker) or ``split4utt`` (by utterance)."""
    return f"split{n}" if by_speaker else f"split{n}utt"


def split(d: "DataDir | str | os.PathLike", n: int, by_speaker: bool = True) -> list[DataDir]:
    """Split into ``n`` parts ``DIR/split{n}[utt]/{1..n}``, as Kaldi's ``utils/split_data.sh``.

    Parts are contiguous in sorted order and deterministic. By speaker (default) every speaker is
    in one part and parts are balanced in utterances (Kaldi's ``split_scp.pl --utt2spk``); with
    ``by_speaker=False`` (``--per-utt``) parts differ by at most one utterance. An existing split
    dir is reused when it was made from the same content of the source tables (a SHA-256 of their
    bytes in ``split{n}[utt]/.source``; Kaldi compares times, which a source restored with ``cp -p``
    defeats); otherwise it is rebuilt in a temporary directory and swapped in. A :class:`DataDir` without a ``path`` is
    split in memory only.

    Raises:
        ValueError: ``n < 1``.
        DataError: ``n`` larger than the number of speakers (or utterances with ``by_speaker=False``).
    """
    import shutil
    import tempfile

    if n < 1:
        raise ValueError(f"number of splits must be >= 1, got {n}")
    if not isinstance(d, DataDir):   # reuse an up-to-date split without loading the source
        src = Path(d)
        top = src / split_dir_name(n, by_speaker)
        if src.is_dir() and _split_is_fresh(top, n, _split_sources(src)):
            logger.info("%s: up to date, reusing it", top)
            return [DataDir.load(top / str(j)) for j in range(1, n + 1)]
    d = _as_datadir(d)
    if by_speaker:
        spk2utt = d.spk2utt
        if n > len(spk2utt):
            raise DataError(f"{d.path}: cannot split {len(spk2utt)} speakers into {n} parts "
                            "(use --per-utt, or fewer jobs)")
        groups = _split_groups(list(spk2utt), n, {s: len(u) for s, u in spk2utt.items()})
        parts = [[u for s in g for u in spk2utt[s]] for g in groups]
    else:
        if n > len(d):
            raise DataError(f"{d.path}: cannot split {len(d)} utterances into {n} parts")
        parts = _split_groups(d.utts, n)
    if d.path is None:
        return [subset(d, p) for p in parts]

    src = Path(d.path)
    top = src / split_dir_name(n, by_speaker)
    if _split_is_fresh(top, n, _split_sources(src)):
        logger.info("%s: up to date, reusing it", top)
        return [DataDir.load(top / str(j)) for j in range(1, n + 1)]
    stamp = _split_stamp(_split_sources(src))  # of the tables as they are before the parts are cut
    tmp = Path(tempfile.mkdtemp(prefix=f".{top.name}.tmp-", dir=src))
    try:
        out = []
        for j, p in enumerate(parts, 1):
            sub = subset(d, p)
            sub.write(tmp / str(j))
            _copy_extras(src, tmp / str(j))
            out.append(sub)
        (tmp / SPLIT_STAMP).write_text(stamp + "\n", encoding="utf-8")
        old = None
        if top.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{top.name}.old-", dir=src))
            os.replace(top, old / "x")
        os.replace(tmp, top)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for j, sub in enumerate(out, 1):
        sub.path = top / str(j)
    return out


def _split_sources(src: Path) -> list[Path]:
    return [src / f for f in (*TABLES, "spk2utt", PHONE_ALIGNMENTS, *EXTRA_FILES) if (src / f).is_file()]


SPLIT_STAMP = ".source"


def _split_stamp(sources: list[Path]) -> str:
    """SHA-256 over the names and bytes of the source tables a split is made from."""
    h = hashlib.sha256()
    for f in sorted(sources, key=lambda p: p.name):
        data = f.read_bytes()
        h.update(f"{f.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _split_is_fresh(top: Path, n: int, sources: list[Path]) -> bool:
    """Whether ``top`` holds the ``n`` parts made from the current *content* of ``sources`` (its
    :data:`SPLIT_STAMP`; times are not trusted: a source restored with ``cp -p`` or moved back from
    ``.backup`` keeps older times than a split made from other content)."""
    stamp = top / SPLIT_STAMP
    if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != _split_stamp(sources):
        return False
    for j in range(1, n + 1):
        part = top / str(j)
        if not (part / "utt2spk").is_file():
            return False
        # a part holds exactly the tables (and extra files) the source has
        if {f.name for f in sources} != {f.name for f in part.iterdir()
                                         if f.name in (*TABLES, "spk2utt", PHONE_ALIGNMENTS, *EXTRA_FILES)}:
            return False
    return True


def combine(dirs) -> DataDir:
    """The union of several data dirs (Kaldi's ``utils/combine_data.sh``), in memory.

    Optional tables (``text``, ``utt2lang``, ``utt2dur``, ``feats.scp``, ``utt2num_frames``,
    ``cmvn.scp``) are kept only if every source has them (else dropped with a warning). When only
    some sources have ``segments``, the others get whole-recording segments (durations from
    ``utt2dur``, else read from the audio headers). A recording id in two sources must have the
    same ``wav.scp`` entry; conflicting ``cmvn.scp`` entries drop ``cmvn.scp`` (recompute it).

    Raises:
        ValueError: fewer than one source.
        DataError: an utterance id in two sources (naming both), or a recording id with two
            different ``wav.scp`` entries.
    """
    ds = [_as_datadir(x) for x in dirs]
    if not ds:
        raise ValueError("combine: no source data directories")
    names = [str(x.path) if x.path is not None else f"<source {i + 1}>" for i, x in enumerate(ds)]
    out = DataDir()
    owner: dict[str, int] = {}
    for i, x in enumerate(ds):
        for u in x.utt2spk:
            if u in owner:
                raise DataError(f"utterance '{u}' is in both {names[owner[u]]} and {names[i]}")
            owner[u] = i
        out.utt2spk.update(x.utt2spk)

    for attr in ("text", "utt2lang", "utt2dur", "feats_scp", "utt2num_frames", "phone_alignments"):
        have = [x for x in ds if getattr(x, attr) is not None]
        if len(have) == len(ds):
            setattr(out, attr, {k: v for x in ds for k, v in getattr(x, attr).items()})
        elif have:
            logger.warning("combine: only %d of %d sources have %s; not creating it",
                           len(have), len(ds), _file_of(attr))
    if all(x.spk2gender is not None for x in ds):
        out.spk2gender = {}
        for x in ds:
            for k, v in x.spk2gender.items():
                if out.spk2gender.setdefault(k, v) != v:
                    raise DataError(f"speaker '{k}' has different genders in the sources' spk2gender")
    elif any(x.spk2gender is not None for x in ds):
        logger.warning("combine: not every source has spk2gender; not creating it")

    if all(x.wav_scp is not None for x in ds):
        out.wav_scp = {}
        rec_owner: dict[str, int] = {}
        for i, x in enumerate(ds):
            for rec, v in x.wav_scp.items():
                if rec in out.wav_scp and out.wav_scp[rec] != v:
                    raise DataError(f"recording '{rec}' has different wav.scp entries in "
                                    f"{names[rec_owner[rec]]} and {names[i]}")
                out.wav_scp[rec] = v
                rec_owner.setdefault(rec, i)
        if any(x.segments is not None for x in ds):
            out.segments = {}
            for i, x in enumerate(ds):
                out.segments.update(x.segments if x.segments is not None else _whole_segments(x, names[i]))
    elif any(x.wav_scp is not None for x in ds):
        logger.warning("combine: not every source has wav.scp; not creating wav.scp/segments")

    if all(x.cmvn_scp is not None for x in ds):
        out.cmvn_scp = {}
        for x in ds:
            for k, v in x.cmvn_scp.items():
                if k in out.cmvn_scp and out.cmvn_scp[k] != v:
                    logger.warning("combine: conflicting cmvn.scp entries for '%s'; not creating cmvn.scp "
                                   "(recompute the stats for the combined data)", k)
                    out.cmvn_scp = None
                    break
                out.cmvn_scp[k] = v
            if out.cmvn_scp is None:
                break
    return out


def _file_of(attr: str) -> str:
    return PHONE_ALIGNMENTS if attr == "phone_alignments" else next(f for f, a in TABLES.items() if a == attr)


def _whole_segments(x: DataDir, name: str) -> dict[str, Segment]:
    from speechkit.data.audio import probe_audio

    seg = {}
    for u in x.utts:
        if x.utt2dur is not None and u in x.utt2dur:
            dur = x.utt2dur[u]
        else:
            n, sr = probe_audio(x.wav_scp[u], key=u, source=f"{name}/wav.scp")
            dur = n / sr
        seg[u] = Segment(u, 0.0, dur)
    return seg


def combine_data_dirs(dest: str | os.PathLike, srcs) -> DataDir:
    """Combine the data dirs ``srcs`` into ``dest`` (see :func:`combine`) and write it.

    ``frame_shift``/``feats.yaml`` are copied when every source has the same one.

    Raises:
        OutputOverlapError: ``dest`` is, contains or lies inside one of the sources.
        DataError: as :func:`combine`.
    """
    dest = Path(dest)
    srcs = [Path(s) for s in srcs]
    check_output_dir(dest, inputs=[("source", s) for s in srcs], option="destination")
    out = combine(srcs)
    out.write(dest)
    for name in EXTRA_FILES:
        contents = {(s / name).read_bytes() if (s / name).is_file() else None for s in srcs}
        if len(contents) == 1 and None not in contents:
            with atomic_write(dest / name, "wb") as f:
                f.write(contents.pop())
        elif contents != {None}:
            logger.warning("combine: the sources' %s files differ or are missing; not copying it", name)
    logger.info("%s: combined %d utterances from %d dirs", dest, len(out), len(srcs))
    return out


def copy_data_dir(src: str | os.PathLike, dest: str | os.PathLike, *, utt_prefix: str = "", spk_prefix: str = "",
                  utt_suffix: str = "", spk_suffix: str = "") -> DataDir:
    """Copy a data dir, optionally renaming utterances and speakers (Kaldi's ``utils/copy_data_dir.sh``).

    Utterance ids become ``utt_prefix + utt + utt_suffix`` in every per-utterance table (and in
    ``wav.scp`` when there is no ``segments``; recording ids are kept otherwise); speaker ids
    become ``spk_prefix + spk + spk_suffix`` in ``utt2spk``, ``cmvn.scp`` and ``spk2gender``.
    ``phone_alignments`` and ``frame_shift``/``feats.yaml``/``cmvn_global.ark`` are carried along.
    Use the same prefix for both to keep speaker ids prefixes of utterance ids.

    Raises:
        OutputOverlapError: ``dest`` is, contains or lies inside ``src``.
    """
    check_output_dir(dest, inputs={"the source": src}, option="destination")
    d = DataDir.load(src)
    if utt_prefix != spk_prefix:
        logger.warning("copy_data_dir: --utt-prefix %r differs from --spk-prefix %r; speaker ids may no "
                       "longer be prefixes of utterance ids", utt_prefix, spk_prefix)

    def mu(u: str) -> str:
        return f"{utt_prefix}{u}{utt_suffix}"

    def ms(s: str) -> str:
        return s if s == "global" else f"{spk_prefix}{s}{spk_suffix}"

    out = DataDir()
    out.utt2spk = {mu(u): ms(s) for u, s in d.utt2spk.items()}
    for attr in ("text", "segments", "utt2lang", "utt2dur", "feats_scp", "utt2num_frames", "phone_alignments"):
        table = getattr(d, attr)
        if table is not None:
            setattr(out, attr, {mu(k): v for k, v in table.items()})
    if d.spk2gender is not None:
        out.spk2gender = {ms(k): v for k, v in d.spk2gender.items()}
    if d.wav_scp is not None:
        out.wav_scp = dict(d.wav_scp) if d.segments is not None else {mu(k): v for k, v in d.wav_scp.items()}
    if d.cmvn_scp is not None:
        out.cmvn_scp = {ms(k): v for k, v in d.cmvn_scp.items()}
    out.write(dest)
    _copy_extras(d.path, Path(dest))
    return out
