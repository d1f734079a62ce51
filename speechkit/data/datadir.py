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
``cmvn.scp``        ``<speaker or 'global'> <ark-path:offset>``   :attr:`DataDir.cmvn_scp`
==================  ============================================  =========================

Without ``segments``, recording ids are utterance ids. All files are sorted in C-locale
(byte) order and speaker ids are prefixes of utterance ids, as Kaldi's
``utils/validate_data_dir.sh`` requires.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from speechkit.utils.fileio import DataError, read_table, write_table


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
}


def c_sorted(keys) -> list[str]:
    """Sort strings as ``LC_ALL=C sort`` does (by UTF-8 bytes)."""
    return sorted(keys, key=lambda k: k.encode("utf-8"))


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
            table = read_table(f)
            if attr == "segments":
                table = {k: _parse_segment(f, i, k, v) for i, (k, v) in enumerate(table.items(), 1)}
            elif attr == "utt2dur":
                table = {k: _parse_number(f, i, k, v, float) for i, (k, v) in enumerate(table.items(), 1)}
            elif attr == "utt2num_frames":
                table = {k: _parse_number(f, i, k, v, int) for i, (k, v) in enumerate(table.items(), 1)}
            setattr(d, attr, table)
        return d

    def write(self, path: str | os.PathLike | None = None) -> Path:
        """Write every present table (sorted, atomically) plus the derived ``spk2utt``.

        Tables set to ``None`` are removed from ``path`` if a stale copy exists there.
        Returns the directory written.
        """
        path = Path(path if path is not None else self.path)
        path.mkdir(parents=True, exist_ok=True)
        for fname, attr in TABLES.items():
            table = getattr(self, attr)
            if table is None:
                if (path / fname).exists():
                    (path / fname).unlink()
                continue
            if attr == "segments":
                table = {k: f"{s.recording} {s.start:.3f} {s.end:.3f}" for k, s in table.items()}
            elif attr == "utt2dur":
                table = {k: f"{v:.3f}" for k, v in table.items()}
            write_table(path / fname, table)
        write_table(path / "spk2utt", {s: " ".join(u) for s, u in self.spk2utt.items()})
        self.path = path
        return path


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
