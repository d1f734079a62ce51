"""Helpers shared by the corpus preparers: text normalisation, audio probing with skip reports,
``wav.scp`` entries (native or resampled through ``sox``), and the ``phone_alignments`` /
``spk2gender`` side files of a data directory.

Conventions every preparer follows (see ``docs/adding_a_corpus.md``):

* utterance ids are ``<speaker>_<rest>`` (speaker ids contain no ``_``, so the speaker is also the
  prefix before the first ``_``), C-sorted;
* ``utt2dur`` in seconds from the audio header (no decoding);
* ``utt2lang`` with ISO 639-1 codes where the language is known;
* bad audio and malformed metadata rows are counted, reported and skipped, never a crash.
"""
from __future__ import annotations

import logging
import math
import os
import shlex
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import soundfile as sf

from speechkit.data.audio import probe_audio, resample_pipe
from speechkit.data.datadir import DataDir
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, atomic_write, read_lines, write_table

logger = logging.getLogger(__name__)

#: Name of the phone alignment file inside a data directory.
PHONE_ALIGNMENTS = "phone_alignments"
#: Kaldi's per-speaker gender table (``<speaker> m|f``).
SPK2GENDER = "spk2gender"
#: How many individual warnings a :class:`SkipLog` prints before only counting.
MAX_WARNINGS = 10

_APOSTROPHES = {"'", "\u2019", "\u02bc"}
_ZERO_WIDTH = "\u200b\u200c\u200d\ufeff"


# ---------------------------------------------------------------------------------------- text
def _is_latin(ch: str) -> bool:
    if ch.isascii():
        return ch.isalpha()
    return "LATIN" in unicodedata.name(ch, "")


def normalize_text(text: str, keep_punctuation: bool = False) -> str:
    """Normalise a transcript the way every preparer does.

    Steps: Unicode NFC; unless ``keep_punctuation``: every punctuation character (Unicode
    category ``P*``, e.g. ``. , ? ! - " ।``) becomes a space, except an apostrophe between two
    letters, which is deleted (``don't`` -> ``dont``, not ``don t``); Latin letters lowercased
    (other scripts untouched: Devanagari, Malayalam, Tamil, Gujarati have no case); zero-width
    (non-)joiners kept inside words, where Malayalam and Indic spelling need them, and dropped at
    word edges, where they mean nothing; whitespace runs collapsed to one space and stripped.
    With ``keep_punctuation`` only NFC and the whitespace collapsing are applied.

    Args:
        text: raw transcript.
        keep_punctuation: keep punctuation and letter case as written.

    Returns:
        The normalised transcript (possibly empty).
    """
    text = unicodedata.normalize("NFC", text)
    if keep_punctuation:
        return " ".join(text.split())
    out = []
    n = len(text)
    for i, ch in enumerate(text):
        if unicodedata.category(ch).startswith("P"):
            if (ch in _APOSTROPHES and 0 < i < n - 1 and text[i - 1].isalpha() and text[i + 1].isalpha()):
                continue
            out.append(" ")
        elif _is_latin(ch):
            out.append(ch.lower())
        else:
            out.append(ch)
    words = "".join(out).split()
    # A zero-width (non-)joiner only means something inside a word; drop it at word edges.
    words = [w.strip(_ZERO_WIDTH) for w in words]
    return " ".join(w for w in words if w)


def read_metadata_lines(path: str | os.PathLike) -> list[str]:
    """Lines of a UTF-8 metadata file without line terminators (``\\n`` or ``\\r\\n``, both occur) or BOM.

    Raises:
        FileNotFoundError: no such file.
        DataError: not valid UTF-8 (names the file and line).
    """
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in read_lines(path)]
    if lines and lines[0].startswith("\ufeff"):  # a UTF-8 byte-order mark is not part of the first field
        lines[0] = lines[0][1:]
    return lines


# ---------------------------------------------------------------------------------------- skips
@dataclass
class SkipLog:
    """Counts and reports skipped items (recordings or metadata rows) by reason.

    The first :data:`MAX_WARNINGS` skips are logged one by one as warnings; :meth:`summary` logs
    ``skipped K of N recordings: K1 missing, K2 empty, K3 undecodable``.
    """

    what: str = "recordings"
    corpus: str = ""
    counts: Counter = field(default_factory=Counter)
    warned: int = 0

    def skip(self, reason: str, message: str) -> None:
        """Record one skipped item; ``reason`` is the summary category, ``message`` names it."""
        self.counts[reason] += 1
        if self.warned < MAX_WARNINGS:
            logger.warning("%sskipping %s", f"{self.corpus}: " if self.corpus else "", message)
            self.warned += 1
        elif self.warned == MAX_WARNINGS:
            logger.warning("(further skipped %s are only counted)", self.what)
            self.warned += 1

    @property
    def total(self) -> int:
        """Number of items skipped so far."""
        return sum(self.counts.values())

    def summary(self, n: int, reasons: Iterable[str] = ()) -> str:
        """Log and return ``skipped K of N <what>: K1 reason1, ...`` (at warning level if K > 0).

        ``reasons`` are always listed (with 0 if none), in that order, before any other reason.
        """
        order = list(reasons) + [r for r in self.counts if r not in reasons]
        parts = ", ".join(f"{self.counts.get(r, 0)} {r}" for r in order)
        msg = f"skipped {self.total} of {n} {self.what}" + (f": {parts}" if parts else "")
        if self.corpus:
            msg = f"{self.corpus}: {msg}"
        (logger.warning if self.total else logger.info)(msg)
        return msg


AUDIO_REASONS = ("missing", "empty", "undecodable")


def probe_or_skip(path: str | os.PathLike, key: str, skips: SkipLog) -> tuple[int, int] | None:
    """``(num_samples, sample_rate)`` of an audio file, or ``None`` after recording why it was skipped.

    Categories: ``missing`` (no such file), ``empty`` (0 bytes, or a valid header with no samples),
    ``undecodable`` (anything libsndfile cannot read: truncated, not audio, unknown codec).
    """
    path = Path(path)
    if not path.is_file():
        skips.skip("missing", f"'{key}': {path}: no such file")
        return None
    if path.stat().st_size == 0:
        skips.skip("empty", f"'{key}': {path}: file is empty")
        return None
    try:
        n, sr = probe_audio(str(path), key=key, source=str(path))
    except DataError as e:
        detail = str(e).rsplit(f"{path}: ", 1)[-1]  # the message repeats the path; keep what follows it
        reason = "empty" if "no audio samples" in detail else "undecodable"
        skips.skip(reason, f"'{key}': {path}: {detail}")
        return None
    return n, sr


# ---------------------------------------------------------------------------------------- wav.scp
#: Extensions taken for formats sox reads without opening the file (WAV, FLAC, NIST SPHERE, AIFF, AU).
_SOX_EXTENSIONS = {".wav", ".flac", ".sph", ".nist", ".aif", ".aiff", ".au"}


def sox_reads(path: str | os.PathLike) -> bool:
    """False for the audio formats libsndfile reads and Debian's sox does not: MP3 (any MPEG layer)
    and Opus; True for every other file (by extension for WAV/FLAC/SPHERE/AIFF/AU, else from the
    header; a file libsndfile cannot open is left to sox)."""
    if os.path.splitext(os.fspath(path))[1].lower() in _SOX_EXTENSIONS:
        return True
    try:
        info = sf.info(os.fspath(path))
    except (sf.LibsndfileError, RuntimeError, OSError):
        return True
    return not (info.format == "MP3" or info.subtype.startswith("MPEG") or info.subtype == "OPUS")


def wav_entry(path: str | os.PathLike, native_sr: int, sample_rate: int | None = None) -> str:
    """The ``wav.scp`` value for an audio file: its absolute path, or a pipe that resamples it to ``sample_rate``.

    When ``sample_rate`` is given and differs from ``native_sr`` (Hz) the entry is Kaldi's
    extended filename ``sox -R FILE -t wav -r HZ -b 16 -c 1 - |`` (16-bit mono WAV on stdout).
    ``-R`` makes sox's dither repeatable (the same bytes on every run, so the same features and
    models); without it every run dithers with a fresh random seed.

    A file sox cannot read (:func:`sox_reads`: MP3, Opus) becomes
    ``speechkit-resample --rate HZ FILE |`` (:func:`speechkit.data.audio.resampled_wav_bytes`:
    libsndfile decodes, soxr resamples, 16-bit mono WAV) whenever ``sample_rate`` is given, at the
    native rate too, so that sox pipes a recipe adds later (speed perturbation) read WAV. Without
    ``sample_rate`` the entry is the file's path (speechkit reads it with libsndfile).
    """
    path = os.path.abspath(os.fspath(path))
    if sample_rate is None:
        return path
    if not sox_reads(path):
        return resample_pipe(path, sample_rate)
    if int(sample_rate) == int(native_sr):
        return path
    return f"sox -R {shlex.quote(path)} -t wav -r {int(sample_rate)} -b 16 -c 1 - |"


def add_probed(d: DataDir, utt: str, path: str | os.PathLike, text: str, speaker: str, skips: SkipLog,
               sample_rate: int | None, *, key: str | None = None) -> bool:
    """Add utterance ``utt`` of audio file ``path`` to ``d`` (``wav_scp`` by :func:`wav_entry` at
    ``sample_rate``, ``text``, ``utt2spk`` = ``speaker``, ``utt2dur`` in seconds) if :func:`probe_or_skip` can
    read it (``key``, default ``utt``, names it in the skip report); False, with ``d`` unchanged, if it cannot."""
    probed = probe_or_skip(path, utt if key is None else key, skips)
    if probed is None:
        return False
    n, sr = probed
    d.wav_scp[utt] = wav_entry(path, sr, sample_rate)
    d.text[utt] = text
    d.utt2spk[utt] = speaker
    d.utt2dur[utt] = n / sr
    return True


def check_sample_rate(sample_rate: int | None) -> None:
    """Raise ``ParameterError`` (a ``ValueError``) unless ``sample_rate`` is ``None`` or a positive integer (Hz)."""
    if sample_rate is not None and (int(sample_rate) != sample_rate or sample_rate <= 0):
        raise ParameterError("sample_rate", f"`sample_rate` must be a positive integer (Hz), got {sample_rate}")


def check_parts(parts: Iterable[str] | None, known: Iterable[str]) -> list[str]:
    """The corpus parts to prepare: ``parts`` as a list, or every name of ``known`` (in its order) when
    ``parts`` is None or empty.

    Raises:
        ParameterError: a part not in ``known``, naming ``parts``, the part and the known names.
    """
    known = list(known)
    wanted = list(parts or known)
    bad = [p for p in wanted if p not in known]
    if bad:
        raise ParameterError("parts", f"'{bad[0]}' is not one of {', '.join(known)}")
    return wanted


# ---------------------------------------------------------------------------------------- side files
def _alignment_lines(path: str | os.PathLike, rows: Iterable[tuple[str, float, float, str]]) -> dict[str, list[str]]:
    """``rows`` as :attr:`DataDir.phone_alignments` (utt -> ``"<start> <end> <phone>"`` lines, 4 decimals, by start),
    checked as :func:`write_phone_alignments` does (``path`` is named in the errors)."""
    rows = list(rows)
    for utt, start, end, phone in rows:
        if not phone or any(c.isspace() for c in phone):
            raise ValueError(f"{path}: utterance '{utt}': bad phone label {phone!r}")
        if end < start:
            raise ValueError(f"{path}: utterance '{utt}': phone '{phone}' ends ({end}) before it starts ({start})")
    rows.sort(key=lambda r: (r[0].encode("utf-8"), r[1], r[2]))
    out: dict[str, list[str]] = {}
    for utt, start, end, phone in rows:
        out.setdefault(utt, []).append(f"{start:.4f} {end:.4f} {phone}")
    return out


def write_phone_alignments(path: str | os.PathLike, rows: Iterable[tuple[str, float, float, str]]) -> int:
    """Write ``<utt> <start-s> <end-s> <phone>`` lines (4 decimals), sorted by utt (C order) then start.

    Returns the number of lines written. Raises ``ValueError`` for a phone label containing
    whitespace or an empty label, or an interval with ``end < start``.
    """
    table = _alignment_lines(path, rows)
    with atomic_write(path) as f:
        for utt in sorted(table, key=lambda u: u.encode("utf-8")):
            for rest in table[utt]:
                f.write(f"{utt} {rest}\n")
    return sum(len(v) for v in table.values())


def read_phone_alignments(path: str | os.PathLike, *, strict: bool = False, line_numbers: bool = False
                          ) -> dict[str, list[tuple]]:
    """Read a ``phone_alignments`` file into ``utt -> [(start_s, end_s, phone), ...]`` (file order).

    Args:
        path: the file (``<utt> <start-s> <end-s> <phone>`` per line).
        strict: also require finite times with ``0 <= start <= end`` and each utterance's segments
            in time order without overlap (1e-4 s tolerance: times have 4 decimals).
        line_numbers: give ``(start_s, end_s, phone, line_number)`` tuples, for error messages.

    Raises:
        DataError: a line without 4 fields or with non-numeric times; with ``strict``, a bad
            interval or a segment starting before the previous one ends (names file and line).
    """
    out: dict[str, list[tuple]] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if len(parts) != 4:
            raise DataError(f"{path}:{lineno}: expected '<utt> <start> <end> <phone>', got {line!r}")
        try:
            start, end = float(parts[1]), float(parts[2])
        except ValueError:
            raise DataError(f"{path}:{lineno}: times are not numbers: {line!r}") from None
        segs = out.setdefault(parts[0], [])
        if strict:
            if not (math.isfinite(start) and math.isfinite(end)) or end < start or start < 0:
                raise DataError(f"{path}:{lineno}: bad interval {start} .. {end}")
            if segs and start < segs[-1][1] - 1e-4:
                raise DataError(f"{path}:{lineno}: segment of '{parts[0]}' starts at {start} before the previous "
                                f"one ends ({segs[-1][1]}); segments must be in time order without overlap")
        segs.append((start, end, parts[3], lineno) if line_numbers else (start, end, parts[3]))
    return out


def write_side_file(out_dir: Path, name: str, table: dict[str, str] | None) -> None:
    """Write a sorted Kaldi table ``out_dir/name``, or remove a stale one when ``table`` is None."""
    path = Path(out_dir) / name
    if table is None:
        if path.exists():
            path.unlink()
        return
    write_table(path, table)


def finish(d: DataDir, out_dir: str | os.PathLike, *, spk2gender: dict[str, str] | None = None,
           phone_alignments: list[tuple[str, float, float, str]] | None = None,
           corpus: str = "corpus") -> DataDir:
    """Write ``d`` (every table C-sorted, atomically) plus the optional side files, and log counts.

    Side files given as ``None`` are removed if a stale copy exists in ``out_dir``. Phone
    alignments of utterances not in ``d`` are dropped. ``spk2gender`` is written only when it
    covers every speaker (as Kaldi's ``validate_data_dir.sh`` requires). Everything is written in
    one :meth:`DataDir.write` (:func:`speechkit.data.datadir.update_data_dir`), so re-running a
    preparation into its own earlier output changes, backs up and warns about nothing.

    Raises:
        DataError: ``d`` is empty (everything was skipped), so no empty data dir is written.
        ValueError: a bad phone alignment row (:func:`write_phone_alignments`'s checks).
    """
    out_dir = Path(out_dir)
    if len(d) == 0:
        raise DataError(f"{corpus}: no usable utterances, nothing written to {out_dir}")
    if spk2gender is not None:
        speakers = set(d.utt2spk.values())
        spk2gender = {s: g for s, g in spk2gender.items() if s in speakers}
        if len(spk2gender) < len(speakers):
            # Kaldi's validate_data_dir.sh requires spk2gender to list exactly the speakers.
            logger.info("%s: gender known for %d of %d speakers; spk2gender not written", corpus,
                        len(spk2gender), len(speakers))
            spk2gender = None
    d.spk2gender = spk2gender
    d.phone_alignments = None if phone_alignments is None else _alignment_lines(
        out_dir / PHONE_ALIGNMENTS, [r for r in phone_alignments if r[0] in d.utt2spk])
    # One write: side files written after the tables were first removed as "stale" by it (backed up and
    # warned about on every identical re-run), then written again.
    d.write(out_dir)
    hours = sum(d.utt2dur.values()) / 3600 if d.utt2dur else 0.0
    logger.info("%s: wrote %s: %d utterances, %d speakers, %.2f h", corpus, out_dir, len(d),
                len(set(d.utt2spk.values())), hours)
    return d


__all__ = [
    "PHONE_ALIGNMENTS", "SPK2GENDER", "SkipLog", "add_probed", "read_metadata_lines", "AUDIO_REASONS", "normalize_text", "probe_or_skip",
    "wav_entry", "sox_reads", "check_sample_rate", "check_parts", "write_phone_alignments", "read_phone_alignments",
    "write_side_file", "finish",
]
