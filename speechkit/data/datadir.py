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

Every tool that keeps a subset of the utterances (:func:`fix_data_dir`, :func:`subset`,
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from speechkit.utils.fileio import (
    DataError, atomic_write, ensure_writable_dir, read_lines, read_table, write_table,
)
from speechkit.utils.outputs import check_output_dir

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


# ====================================================================== validation
#: Files copied as they are by subset/split/combine/copy (Kaldi carries ``frame_shift`` too).
EXTRA_FILES = ("frame_shift", "feats.yaml", GLOBAL_CMVN)
#: Kaldi's other optional files that its validate_data_dir.sh checks (keyed by utterance / recording).
KALDI_OPTIONAL = ("utt2uniq", "reco2dur")
#: Words Kaldi's validate_data_dir.sh refuses in ``text`` (they are reserved in the lexicon / LM).
RESERVED_WORDS = ("<s>", "</s>", "#0")
#: Per-file cap on reported problems (a 100k-line unsorted file gives one line, not 100k).
MAX_PROBLEMS_PER_FILE = 20
_PER_UTT = ("text", "utt2lang", "utt2dur", "feats.scp", "utt2num_frames")


class _Report:
    """Collects ``<file>:<line>: <message>`` lines, at most MAX_PROBLEMS_PER_FILE per file."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count: dict[str, int] = {}

    def add(self, label: str, lineno: int | None, msg: str) -> None:
        n = self.count[label] = self.count.get(label, 0) + 1
        if n <= MAX_PROBLEMS_PER_FILE:
            self.lines.append(f"{label}:{lineno}: {msg}" if lineno else f"{label}: {msg}")

    def result(self) -> list[str]:
        more = [f"{label}: ... and {n - MAX_PROBLEMS_PER_FILE} more problems in this file"
                for label, n in self.count.items() if n > MAX_PROBLEMS_PER_FILE]
        return self.lines + more


def _scan(label: str, data: bytes, report: _Report, allow_empty_value: bool = False
          ) -> dict[str, tuple[int, str]]:
    """Parse raw table bytes, reporting every format problem; returns id -> (line, value).

    Checks: trailing newline, empty lines, carriage returns, UTF-8, leading whitespace, ids
    unique and in C-locale order, a value after the id. Duplicates keep their first line.
    """
    out: dict[str, tuple[int, str]] = {}
    if not data:
        return out
    no_final_newline = not data.endswith(b"\n")
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:  # slow path: find the bad lines
        lines = []
        for lineno, raw in enumerate(data.split(b"\n"), 1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                report.add(label, lineno, f"not valid UTF-8 ({e.reason} at byte {e.start} of the line)")
                lines.append(raw.decode("utf-8", "replace"))
    if not no_final_newline:
        lines.pop()
    # (code-point order of str == byte order of their UTF-8 encoding == LC_ALL=C order)
    prev: str | None = None
    unsorted = 0
    for lineno, line in enumerate(lines, 1):
        if "\r" in line:
            report.add(label, lineno, "carriage return in line (DOS line endings?)")
            line = line.replace("\r", "")
        parts = line.split(maxsplit=1)
        if not parts:
            report.add(label, lineno, "empty line")
            continue
        if line[0].isspace():
            report.add(label, lineno, "line starts with whitespace")
        key = parts[0]
        value = parts[1].rstrip() if len(parts) > 1 else ""
        if not value and not allow_empty_value:
            report.add(label, lineno, f"id '{key}' has no value")
        if key in out:
            report.add(label, lineno, f"duplicate id '{key}' (first on line {out[key][0]})")
            continue
        if prev is not None and key < prev:
            unsorted += 1
            if unsorted == 1:
                report.add(label, lineno, f"not sorted in C-locale order: '{key}' after '{prev}' "
                           "(sort with LC_ALL=C, or run fix_data_dir.sh)")
        if prev is None or key > prev:
            prev = key
        out[key] = (lineno, value)
    if no_final_newline:
        report.add(label, len(lines), "no newline at end of file")
    return out


def _compare_ids(report: _Report, a_label: str, a: dict, b_label: str, b: dict, what: str = "utterance") -> None:
    """Report ids of ``a`` missing from ``b`` (at their ``a`` line) and vice versa."""
    for k, (ln, _) in a.items():
        if k not in b:
            report.add(a_label, ln, f"{what} '{k}' has no entry in {Path(b_label).name}")
    for k, (ln, _) in b.items():
        if k not in a:
            report.add(b_label, ln, f"{what} '{k}' is not in {Path(a_label).name}")


def validate(d_or_path: "DataDir | str | os.PathLike", no_feats: bool = False, no_text: bool = False,
             no_wav: bool = False, no_spk_sort: bool = False, check_audio: bool = False,
             expected_sr: int | None = None) -> list[str]:
    """Check a data directory the way Kaldi's ``utils/validate_data_dir.sh`` does.

    Works on the raw files (so it can report line numbers, sort order, duplicates, missing final
    newlines, non-UTF-8 bytes) and keeps going after a bad file. An in-memory :class:`DataDir` is
    checked as it would be written (its tables, rendered).

    Checks: every file sorted (C locale), unique ids, ends with a newline, no empty lines, valid
    UTF-8; ``utt2spk`` present and non-empty; ``spk2utt`` present and consistent with ``utt2spk``;
    speaker ids are prefixes of utterance ids and ``utt2spk`` sorts the same by speaker as by
    utterance (skipped with ``no_spk_sort``, Kaldi's ``--no-spk-sort``); ``text`` ids == ``utt2spk``
    ids (unless ``no_text``); ``wav.scp`` present (unless ``no_wav``) with exactly the recordings
    used; ``segments`` lines with 4 fields, ``end > start >= 0`` and recordings in ``wav.scp``;
    ``utt2lang``/``utt2dur`` covering the utterances (durations positive); ``feats.scp`` present
    and ``utt2num_frames`` covering the same utterances with positive integer counts (unless
    ``no_feats``), each entry pointing at an ark that exists and, for arks written by
    ``speechkit-compute-feats``, holds that utterance at that offset for this data dir and is
    not stale (:func:`speechkit.features.extract.check_feats_scp`); ``cmvn.scp`` keyed by exactly
    the speakers (a ``global`` key is an error: global stats go in ``cmvn_global.ark``);
    ``spk2gender`` keyed by exactly the speakers, values ``m``/``f``; ``utt2uniq`` covering the
    utterances, ``reco2dur`` the recordings (positive); ``phone_alignments`` sorted, 4 fields,
    ``end >= start``, of utterances in ``utt2spk``; no ``<s>``, ``</s>``, ``#0`` word in ``text``.

    With ``check_audio`` (not in Kaldi) every ``wav.scp`` entry is also opened (commands are run)
    with :func:`speechkit.data.audio.probe_audio`: missing, empty, truncated or non-audio files,
    a sample rate other than ``expected_sr``, and segments ending past the audio are reported.

    Returns:
        One ``"<file>:<line>: <message>"`` (or ``"<file>: <message>"``) string per problem,
        empty if the directory is valid. At most :data:`MAX_PROBLEMS_PER_FILE` per file, plus a
        count of the rest.
    """
    report = _Report()
    files: dict[str, bytes | None] = {}
    if isinstance(d_or_path, DataDir):
        base = str(d_or_path.path) if d_or_path.path is not None else "<DataDir>"
        for fname, table in d_or_path.tables().items():
            files[fname] = "".join(f"{k} {v}\n" if v != "" else f"{k}\n"
                                   for k, v in ((k, table[k]) for k in c_sorted(table))).encode("utf-8")
        if d_or_path.phone_alignments is not None:
            files[PHONE_ALIGNMENTS] = _render_utt_lines(d_or_path.phone_alignments).encode("utf-8")
    else:
        base = str(d_or_path)
        p = Path(d_or_path)
        if not p.is_dir():
            return [f"{base}: no such data directory"]
        for fname in (*TABLES, "spk2utt", PHONE_ALIGNMENTS, *KALDI_OPTIONAL):
            f = p / fname
            if f.is_file():
                try:
                    files[fname] = f.read_bytes()
                except OSError as e:
                    report.add(f"{base}/{fname}", None, f"cannot read ({e.strerror})")
            elif f.exists():
                report.add(f"{base}/{fname}", None, "is not a regular file")

    def lab(fname: str) -> str:
        return f"{base}/{fname}"

    tabs: dict[str, dict[str, tuple[int, str]]] = {}
    ali_ids: dict[str, int] | None = None
    for fname, data in files.items():
        if data is not None:
            if fname == PHONE_ALIGNMENTS:
                ali_ids = _scan_alignments(lab(fname), data, report)
            else:
                tabs[fname] = _scan(lab(fname), data, report, allow_empty_value=(fname == "text"))
            if not data:
                report.add(lab(fname), None, "file is empty")

    # -------------------------------------------------- utt2spk / spk2utt
    u2s = tabs.get("utt2spk")
    if u2s is None:
        report.add(lab("utt2spk"), None, "missing (every data directory needs one)")
        return report.result()
    spk2utt: dict[str, list[str]] = {}
    for utt, (ln, spk) in u2s.items():
        if len(spk.split()) != 1:
            report.add(lab("utt2spk"), ln, f"speaker of '{utt}' must be one id, got {spk!r}")
            continue
        spk2utt.setdefault(spk, []).append(utt)
        if not no_spk_sort and not utt.startswith(spk):
            report.add(lab("utt2spk"), ln, f"speaker id '{spk}' is not a prefix of utterance id '{utt}' "
                       "(Kaldi needs speaker-id prefixes so that files sort the same by speaker and "
                       "by utterance; --no-spk-sort skips this check)")
    if not no_spk_sort:
        by_utt = c_sorted(k for k, (_, v) in u2s.items() if len(v.split()) == 1)
        by_spk = sorted(by_utt, key=lambda u: (u2s[u][1], u))
        for a, b in zip(by_utt, by_spk):
            if a != b:
                report.add(lab("utt2spk"), u2s[a][0], f"not in the same order when sorted by speaker as by "
                           f"utterance (first difference: '{a}' vs '{b}'); make speaker ids prefixes of "
                           "utterance ids")
                break
    s2u = tabs.get("spk2utt")
    if s2u is None:
        report.add(lab("spk2utt"), None, "missing (run utils/utt2spk_to_spk2utt.pl or fix_data_dir.sh)")
    else:
        for spk, (ln, value) in s2u.items():
            got = value.split()
            want = c_sorted(spk2utt.get(spk, []))
            if spk not in spk2utt:
                report.add(lab("spk2utt"), ln, f"speaker '{spk}' is not in utt2spk")
            elif got != want:
                missing = [u for u in want if u not in got][:3]
                extra = [u for u in got if u not in want][:3]
                detail = ("missing " + ", ".join(missing) if missing else "") + \
                         ("; " if missing and extra else "") + ("extra " + ", ".join(extra) if extra else "")
                report.add(lab("spk2utt"), ln, f"utterances of speaker '{spk}' disagree with utt2spk "
                           f"({detail or 'order differs'})")
        for spk, utts in spk2utt.items():
            if spk not in s2u:
                report.add(lab("utt2spk"), u2s[utts[0]][0], f"speaker '{spk}' has no entry in spk2utt")

    # -------------------------------------------------- text
    if not no_text:
        if "text" not in tabs:
            report.add(lab("text"), None, "missing (use --no-text if the data has no transcripts)")
        else:
            _compare_ids(report, lab("utt2spk"), u2s, lab("text"), tabs["text"])
            for utt, (ln, value) in tabs["text"].items():
                bad = [w for w in RESERVED_WORDS if w in value.split()]
                if bad:
                    report.add(lab("text"), ln, f"transcript of '{utt}' contains the reserved word '{bad[0]}' "
                               f"(Kaldi refuses {', '.join(RESERVED_WORDS)} in text)")

    # -------------------------------------------------- wav.scp / segments
    if not no_wav:
        wav = tabs.get("wav.scp")
        seg = tabs.get("segments")
        if wav is None:
            report.add(lab("wav.scp"), None, "missing (use --no-wav if the data has no audio)")
        if seg is not None:
            _compare_ids(report, lab("utt2spk"), u2s, lab("segments"), seg)
            used: dict[str, int] = {}
            for utt, (ln, value) in seg.items():
                parts = value.split()
                if len(parts) != 3:
                    report.add(lab("segments"), ln, f"'{utt}': needs 4 fields "
                               f"(<utt> <recording> <start> <end>), got {len(parts) + 1}")
                    continue
                rec = parts[0]
                used.setdefault(rec, ln)
                try:
                    start, end = float(parts[1]), float(parts[2])
                except ValueError:
                    report.add(lab("segments"), ln, f"'{utt}': start/end are not numbers: {value!r}")
                else:
                    if start < 0:
                        report.add(lab("segments"), ln, f"'{utt}': start {parts[1]} is negative")
                    if end <= start:
                        report.add(lab("segments"), ln, f"'{utt}': end {parts[2]} is not after start {parts[1]}")
                if wav is not None and rec not in wav:
                    report.add(lab("segments"), ln, f"'{utt}': recording '{rec}' is not in wav.scp")
            if wav is not None:
                for rec, (ln, _) in wav.items():
                    if rec not in used:
                        report.add(lab("wav.scp"), ln, f"recording '{rec}' is not used by any segment")
        elif wav is not None:
            _compare_ids(report, lab("utt2spk"), u2s, lab("wav.scp"), wav)

    # -------------------------------------------------- utt2lang / utt2dur
    if "utt2lang" in tabs:
        _compare_ids(report, lab("utt2spk"), u2s, lab("utt2lang"), tabs["utt2lang"])
        for utt, (ln, v) in tabs["utt2lang"].items():
            if len(v.split()) > 1:
                report.add(lab("utt2lang"), ln, f"language of '{utt}' must be one id, got {v!r}")
    if "utt2dur" in tabs:
        _compare_ids(report, lab("utt2spk"), u2s, lab("utt2dur"), tabs["utt2dur"])
        for utt, (ln, v) in tabs["utt2dur"].items():
            try:
                ok = float(v) > 0
            except ValueError:
                ok = False
            if not ok and v:
                report.add(lab("utt2dur"), ln, f"duration of '{utt}' must be a positive number of seconds, got {v!r}")

    # -------------------------------------------------- features
    if not no_feats:
        feats = tabs.get("feats.scp")
        if feats is None:
            report.add(lab("feats.scp"), None, "missing (use --no-feats before features are computed)")
        else:
            _compare_ids(report, lab("utt2spk"), u2s, lab("feats.scp"), feats)
        if "utt2num_frames" in tabs:
            nf = tabs["utt2num_frames"]
            if feats is not None:
                _compare_ids(report, lab("feats.scp"), feats, lab("utt2num_frames"), nf)
            else:
                _compare_ids(report, lab("utt2spk"), u2s, lab("utt2num_frames"), nf)
            for utt, (ln, v) in nf.items():
                if not (v.isdigit() and int(v) > 0) and v:
                    report.add(lab("utt2num_frames"), ln, f"frame count of '{utt}' must be a positive integer, got {v!r}")
        if feats is not None and not isinstance(d_or_path, DataDir):
            from speechkit.features.extract import check_feats_scp

            for ln, msg in check_feats_scp(Path(d_or_path), feats, tabs.get("utt2num_frames")):
                report.add(lab("feats.scp"), ln, msg)
    spk_tab = {s: u2s[u[0]] for s, u in spk2utt.items()}
    if "cmvn.scp" in tabs:
        cmvn = tabs["cmvn.scp"]
        if "global" in cmvn and "global" not in spk2utt:
            report.add(lab("cmvn.scp"), cmvn["global"][0], "key 'global' is not a speaker: Kaldi requires the keys "
                       f"of cmvn.scp to be exactly the speakers; global stats go in {GLOBAL_CMVN} "
                       "(re-run speechkit-compute-cmvn-stats, or speechkit-fix-data-dir to move them)")
            cmvn = {k: v for k, v in cmvn.items() if k != "global"}
        if cmvn:
            _compare_ids(report, lab("utt2spk"), spk_tab, lab("cmvn.scp"), cmvn, what="speaker")
    if "spk2gender" in tabs:
        _compare_ids(report, lab("utt2spk"), spk_tab, lab("spk2gender"), tabs["spk2gender"], what="speaker")
        for spk, (ln, v) in tabs["spk2gender"].items():
            if v not in ("m", "f"):
                report.add(lab("spk2gender"), ln, f"gender of '{spk}' must be m or f, got {v!r}")
    if "utt2uniq" in tabs:
        _compare_ids(report, lab("utt2spk"), u2s, lab("utt2uniq"), tabs["utt2uniq"])
    if "reco2dur" in tabs and "wav.scp" in tabs:
        _compare_ids(report, lab("wav.scp"), tabs["wav.scp"], lab("reco2dur"), tabs["reco2dur"], what="recording")
        for rec, (ln, v) in tabs["reco2dur"].items():
            try:
                ok = float(v) > 0
            except ValueError:
                ok = False
            if not ok:
                report.add(lab("reco2dur"), ln, f"duration of '{rec}' must be a positive number of seconds, got {v!r}")
    if ali_ids is not None:
        for utt, ln in ali_ids.items():
            if utt not in u2s:
                report.add(lab(PHONE_ALIGNMENTS), ln, f"utterance '{utt}' is not in utt2spk")
    if check_audio and not no_wav and "wav.scp" in tabs:
        _check_audio(report, lab, tabs, expected_sr)
    return report.result()


def _scan_alignments(label: str, data: bytes, report: _Report) -> dict[str, int]:
    """Check ``phone_alignments`` (``<utt> <start> <end> <phone>``, grouped by utterance in C order);
    returns utt -> first line."""
    first: dict[str, int] = {}
    prev = None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        report.add(label, data[: e.start].count(b"\n") + 1, "not valid UTF-8")
        return first
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if len(parts) != 4:
            report.add(label, lineno, f"expected '<utt> <start> <end> <phone>', got {line!r}")
            continue
        utt = parts[0]
        if prev is not None and utt != prev and (utt < prev or utt in first):
            report.add(label, lineno, f"not grouped by utterance in C-locale order: '{utt}' after '{prev}'")
        first.setdefault(utt, lineno)
        prev = utt
        try:
            start, end = float(parts[1]), float(parts[2])
        except ValueError:
            report.add(label, lineno, f"'{utt}': times are not numbers: {line!r}")
            continue
        if start < 0 or end < start:
            report.add(label, lineno, f"'{utt}': bad interval {parts[1]}-{parts[2]} s")
    return first


def _check_audio(report: _Report, lab, tabs: dict, expected_sr: int | None) -> None:
    """Open every wav.scp entry; check sample rates and that segments lie inside the audio."""
    from speechkit.data.audio import MAX_OVERSHOOT, probe_audio

    wav_label = lab("wav.scp")
    durations: dict[str, float] = {}
    for rec, (ln, spec) in tabs["wav.scp"].items():
        try:
            n, sr = probe_audio(spec, key=rec, source=wav_label)
        except DataError as e:
            report.add(wav_label, ln, str(e).removeprefix(f"{wav_label}: "))
            continue
        if expected_sr is not None and sr != expected_sr:
            report.add(wav_label, ln, f"'{rec}': has {sr} Hz, config expects {expected_sr} Hz")
        durations[rec] = n / sr
    for utt, (ln, value) in tabs.get("segments", {}).items():
        parts = value.split()
        if len(parts) == 3 and parts[0] in durations:
            try:
                end = float(parts[2])
            except ValueError:
                continue
            if end > durations[parts[0]] + MAX_OVERSHOOT:
                report.add(lab("segments"), ln, f"'{utt}': ends at {end:.3f} s, beyond the end of recording "
                           f"'{parts[0]}' ({durations[parts[0]]:.3f} s)")


# ====================================================================== fix
def _lenient_tables(path: Path) -> tuple[dict[str, dict[str, str]], dict[str, int], set[str]]:
    """Read every table of ``path`` tolerating format problems (logged); non-UTF-8 is an error.

    Returns the tables, their line counts, and every utterance id seen in a per-utterance table
    (``utt2spk``, the utterances of ``spk2utt``, ``text``, ``segments``, ...), malformed lines included.
    """
    tables: dict[str, dict[str, str]] = {}
    counts: dict[str, int] = {}
    ids: set[str] = set()
    for fname in (*TABLES, "spk2utt"):
        f = path / fname
        if not f.is_file():
            continue
        report = _Report()
        scanned = _scan(str(f), f.read_bytes(), report, allow_empty_value=True)
        for line in report.result():
            if "not valid UTF-8" in line:
                raise DataError(f"{line} (fix the encoding by hand; nothing was modified)")
            logger.info("fixing %s", line)
        if fname in ("utt2spk", "segments", *_PER_UTT):
            ids |= set(scanned)
        elif fname == "spk2utt":
            ids |= {u for _, v in scanned.values() for u in v.split()}
        table = {}
        for key, (ln, value) in scanned.items():
            bad = _bad_value(fname, value)
            if bad:
                logger.warning("%s:%d: dropping '%s': %s", f, ln, key, bad)
                continue
            table[key] = value
        tables[fname] = table
        counts[fname] = len(scanned)
    return tables, counts, ids


def _bad_value(fname: str, value: str) -> str | None:
    """Why a line of ``fname`` cannot be kept by fix_data_dir (None if it can)."""
    if fname == "text":
        return None
    if not value:
        return "no value"
    if fname in ("utt2spk", "utt2lang") and len(value.split()) != 1:
        return f"expected one id, got {value!r}"
    if fname == "segments":
        parts = value.split()
        if len(parts) != 3:
            return f"needs 4 fields, got {len(parts) + 1}"
        try:
            start, end = float(parts[1]), float(parts[2])
        except ValueError:
            return f"start/end are not numbers: {value!r}"
        if start < 0 or end <= start:
            return f"bad times (start {parts[1]}, end {parts[2]})"
    if fname == "utt2dur":
        try:
            if float(value) <= 0:
                return f"non-positive duration {value!r}"
        except ValueError:
            return f"duration is not a number: {value!r}"
    if fname == "utt2num_frames" and not (value.isdigit() and int(value) > 0):
        return f"frame count is not a positive integer: {value!r}"
    return None


def _render(table: dict[str, str]) -> bytes:
    return "".join(f"{k} {table[k]}\n" if table[k] != "" else f"{k}\n" for k in c_sorted(table)).encode("utf-8")


def fix_data_dir(path: str | os.PathLike) -> tuple[int, int]:
    """Repair a data directory in place, as Kaldi's ``utils/fix_data_dir.sh`` does.

    Sorts every table (C locale), drops duplicate ids (keeping the first), empty and malformed
    lines, keeps only the utterances present in every per-utterance file (``utt2spk``, ``text``,
    ``segments``, ``utt2lang``, ``utt2dur``, ``feats.scp``, ``utt2num_frames``; and ``wav.scp``
    without segments) whose recording is in ``wav.scp``; prunes ``wav.scp`` to the recordings,
    ``cmvn.scp`` and ``spk2gender`` to the speakers and ``phone_alignments`` to the utterances still
    used; regenerates ``spk2utt`` (``utt2spk`` is rebuilt from ``spk2utt`` if only that exists). A
    per-speaker ``cmvn.scp`` also drops the utterances of speakers it lacks; a ``cmvn.scp`` holding
    only a ``global`` entry (older speechkit) is turned into ``cmvn_global.ark``. The files replaced
    are first copied to a new numbered backup ``path/.backup/N/`` (an earlier backup is never
    overwritten). A directory that needs no change is left untouched. The utterances dropped are
    counted and the first few named in a warning.

    Returns:
        ``(kept, total)``: utterances kept, and the number of distinct utterance ids found in any
        per-utterance file of the original directory (``utt2spk``, ``spk2utt``, ``text``, ...).

    Raises:
        FileNotFoundError: no such directory, or neither ``utt2spk`` nor ``spk2utt``.
        DataError: a file is not valid UTF-8, or no utterance would remain (nothing is modified).
        WriteError: the directory or its backup cannot be written.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such data directory")
    tables, counts, all_ids = _lenient_tables(path)
    if "utt2spk" not in tables:
        if "spk2utt" not in tables:
            raise FileNotFoundError(f"{path}/utt2spk: missing (and no spk2utt to rebuild it from)")
        tables["utt2spk"] = {u: s for s, us in tables["spk2utt"].items() for u in us.split()}
        counts["utt2spk"] = len(tables["utt2spk"])
        logger.info("%s: rebuilt utt2spk from spk2utt", path)
    segments = tables.get("segments")
    wav = tables.get("wav.scp")
    if segments is None and wav is not None:
        all_ids |= set(wav)
    alignments = _read_utt_lines_lenient(path / PHONE_ALIGNMENTS) if (path / PHONE_ALIGNMENTS).is_file() else None
    if alignments is not None:
        all_ids |= set(alignments)
    total = len(all_ids)
    per_utt = ["utt2spk", *(f for f in _PER_UTT if f in tables)]
    if segments is not None:
        per_utt.append("segments")
    elif wav is not None:
        per_utt.append("wav.scp")
    keep = set(tables["utt2spk"])
    why: dict[str, str] = {u: "not in utt2spk" for u in all_ids - keep}
    for fname in per_utt[1:]:
        missing = keep - set(tables[fname])
        for u in missing:
            why[u] = f"not in {fname}"
        keep -= missing
    if segments is not None and wav is not None:
        no_rec = {u for u in keep if segments[u].split()[0] not in wav}
        for u in no_rec:
            why[u] = "recording not in wav.scp"
        keep -= no_rec
    cmvn = tables.get("cmvn.scp")
    global_cmvn = None
    if cmvn is not None and set(cmvn) == {"global"}:
        global_cmvn = cmvn["global"]
        del tables["cmvn.scp"]
    elif cmvn is not None:
        no_cmvn = {u for u in keep if tables["utt2spk"][u] not in cmvn}
        for u in no_cmvn:
            why[u] = "speaker not in cmvn.scp"
        keep -= no_cmvn
    if not keep:
        sizes = ", ".join(f"{f}: {len(tables[f])}" for f in per_utt)
        raise DataError(f"{path}: no utterance is in every file ({sizes}); nothing was modified")
    dropped = all_ids - keep
    if dropped:
        reasons: dict[str, list[str]] = {}
        for u in dropped:
            reasons.setdefault(why.get(u, "malformed line"), []).append(u)
        logger.warning("%s: dropping %d of %d utterances: %s", path, len(dropped), total,
                       "; ".join(f"{len(us)} {r} ({show_ids(us)})" for r, us in sorted(reasons.items())))

    new: dict[str, dict[str, str]] = {}
    for fname in per_utt:
        new[fname] = {k: v for k, v in tables[fname].items() if k in keep}
    if segments is not None and wav is not None:
        used = {new["segments"][u].split()[0] for u in keep}
        new["wav.scp"] = {k: v for k, v in wav.items() if k in used}
    spks = {new["utt2spk"][u] for u in keep}
    for fname in PER_SPEAKER:
        if fname in tables:
            new[fname] = {k: v for k, v in tables[fname].items() if k in spks}
    spk2utt: dict[str, list[str]] = {}
    for u in c_sorted(keep):
        spk2utt.setdefault(new["utt2spk"][u], []).append(u)
    new["spk2utt"] = {s: " ".join(us) for s, us in spk2utt.items()}

    rendered = {fname: _render(t) for fname, t in new.items()}
    if alignments is not None:
        rendered[PHONE_ALIGNMENTS] = _render_utt_lines({u: v for u, v in alignments.items() if u in keep}).encode()
    changed = [f for f, b in rendered.items() if not (path / f).is_file() or (path / f).read_bytes() != b]
    if global_cmvn is not None:
        changed.append("cmvn.scp")
    if changed:
        backup = backup_files(path, (*TABLES, "spk2utt", PHONE_ALIGNMENTS))
        if global_cmvn is not None:
            _move_global_cmvn(path, global_cmvn)
        for fname in changed:
            if fname in rendered:
                with atomic_write(path / fname, "wb") as out:
                    out.write(rendered[fname])
        logger.info("%s: rewrote %s (originals in %s)", path, " ".join(changed), backup)
    return len(keep), total


def _move_global_cmvn(path: Path, loc: str) -> None:
    """Write the stats at ``loc`` (a ``cmvn.scp`` value) to ``path/cmvn_global.ark``; remove ``cmvn.scp``."""
    import kaldiio

    try:
        stats = kaldiio.load_mat(loc)
    except Exception as e:  # kaldiio raises several types for bad/missing arks
        raise DataError(f"{path}/cmvn.scp: 'global': cannot read stats at {loc}: {e}") from None
    with atomic_write(path / GLOBAL_CMVN, "wb") as f:
        kaldiio.save_mat(f, stats)
    (path / "cmvn.scp").unlink()
    logger.warning("%s/cmvn.scp: held global stats only; moved them to %s (Kaldi requires cmvn.scp keys to be "
                   "the speakers)", path, path / GLOBAL_CMVN)


def _read_utt_lines_lenient(f: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lineno, line in enumerate(read_lines(f), 1):
        parts = line.split(maxsplit=1)
        if len(parts) < 2:
            logger.warning("%s:%d: dropping malformed line %r", f, lineno, line)
            continue
        out.setdefault(parts[0], []).append(parts[1].rstrip())
    return out


# ====================================================================== subset / split / combine / copy
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
