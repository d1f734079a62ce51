"""TIMIT Acoustic-Phonetic Continuous Speech Corpus (LDC93S1), and the NLTK TIMIT sample.

Two layouts are recognised (file names in either case):

* the NLTK sample: ``<corpus>/dr1-fvmh0/sa1.{wav,txt,wrd,phn}`` (dialect region and speaker in one
  folder name; RIFF WAV, 16 kHz), with ``spkrinfo.txt`` at the top;
* the LDC original: ``<corpus>/TRAIN/DR1/FVMH0/SA1.{WAV,TXT,WRD,PHN}`` (``TEST/`` alike; the WAV
  files are NIST SPHERE, which libsndfile and sox read directly), ``DOC/SPKRINFO.TXT``.

Outputs (Kaldi data dir): utterance ``<speaker>_<sentence>`` (``fvmh0_sa1``), speaker ``fvmh0``
(lowercase, as Kaldi's timit recipe), ``text`` from the ``.txt`` prompt (normalised, see
:func:`~speechkit.data.corpora._common.normalize_text`), ``utt2lang`` ``en``, ``spk2gender`` (from
``spkrinfo.txt`` when present, else the first letter of the speaker folder, ``f``/``m``) and
``phone_alignments`` from the ``.phn`` files: TIMIT gives boundaries in samples at 16 kHz, written as
seconds (sample / 16000) with the 61-phone TIMIT labels unchanged (``h#``, ``pau``, ``epi`` are
silence/pause labels; folding to 48 or 39 phones is left to the consumer).
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_sample_rate, read_metadata_lines, finish, normalize_text, probe_or_skip, wav_entry,
)
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)

#: TIMIT's label files give boundaries as sample indices at this rate (Hz).
TIMIT_PHN_RATE = 16000
URL = "https://catalog.ldc.upenn.edu/LDC93S1"
_SAMPLE_FOLDER = re.compile(r"^dr(\d)-([fm][a-z]{3}\d)$", re.IGNORECASE)
_SPEAKER = re.compile(r"^([fm])[a-z]{3}\d$", re.IGNORECASE)


def download_timit(target_dir: str | os.PathLike) -> None:
    """TIMIT is licensed by the LDC and cannot be downloaded automatically.

    Obtain it from https://catalog.ldc.upenn.edu/LDC93S1 and unpack it so that ``TRAIN/`` and
    ``TEST/`` are under ``target_dir``. (The NLTK sample is in ``nltk_data/corpora/timit``.)

    Raises:
        NotImplementedError: always, with the above instructions.
    """
    raise NotImplementedError(f"TIMIT is an LDC corpus ({URL}); obtain it there and unpack it into {target_dir}")


def _find(folder: Path, stem: str, ext: str) -> Path | None:
    for cand in (f"{stem}.{ext}", f"{stem}.{ext.upper()}", f"{stem.upper()}.{ext.upper()}", f"{stem.lower()}.{ext}"):
        p = folder / cand
        if p.is_file():
            return p
    return None


def read_spkrinfo(path: Path) -> dict[str, tuple[str, str]]:
    """Read TIMIT ``spkrinfo.txt``: ``{speaker-initials (lowercase, e.g. 'vmh0'): (sex 'm'|'f', use 'TRN'|'TST')}``.

    Lines starting with ``;`` are comments; a malformed line is skipped with a warning (file:line).

    Raises:
        DataError: the file is not UTF-8 (file and line named).
    """
    info: dict[str, tuple[str, str]] = {}
    for lineno, line in enumerate(read_metadata_lines(path), 1):
        if not line.strip() or line.lstrip().startswith(";"):
            continue
        parts = line.split()
        if len(parts) < 4 or parts[1].upper() not in ("M", "F"):
            logger.warning("%s:%d: skipping malformed line (expected 'ID Sex DR Use ...'): %r", path, lineno, line)
            continue
        info[parts[0].lower()] = (parts[1].lower(), parts[3].upper())
    return info


def read_phn(path: Path, utt: str) -> list[tuple[str, float, float, str]]:
    """Read a TIMIT ``.phn``/``.wrd`` file (``<start-sample> <end-sample> <label>``) into seconds.

    Returns ``[(utt, start_s, end_s, label), ...]``; raises :class:`DataError` (file:line) for
    non-UTF-8 text, a malformed line, a non-integer boundary or ``end < start``.
    """
    return _parse_phn(read_metadata_lines(path), path, utt)


def _parse_phn(lines: list[str], path: Path, utt: str) -> list[tuple[str, float, float, str]]:
    rows = []
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3:
            raise DataError(f"{path}:{lineno}: expected '<start> <end> <label>', got {line!r}")
        try:
            b, e = int(parts[0]), int(parts[1])
        except ValueError:
            raise DataError(f"{path}:{lineno}: boundaries are not integers: {line!r}") from None
        if e < b:
            raise DataError(f"{path}:{lineno}: end {e} before start {b}")
        rows.append((utt, b / TIMIT_PHN_RATE, e / TIMIT_PHN_RATE, parts[2]))
    return rows


def _parse_prompt(lines: list[str], path: Path) -> str:
    lines = [ln for ln in lines if ln.strip()]
    if len(lines) != 1:
        raise DataError(f"{path}: expected one line '<start> <end> <text>', got {len(lines)}")
    parts = lines[0].split(maxsplit=2)
    if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        raise DataError(f"{path}:1: expected '<start> <end> <text>', got {lines[0]!r}")
    return parts[2]


def _speaker_dirs(corpus_dir: Path):
    """Yield ``(speaker_dir, speaker_id, part)`` for either layout; part is 'train'/'test'/None."""
    for child in sorted(corpus_dir.iterdir()):
        if not child.is_dir():
            continue
        m = _SAMPLE_FOLDER.match(child.name)
        if m:
            yield child, m.group(2).lower(), None
        elif child.name.lower() in ("train", "test"):
            for dr in sorted(child.iterdir()):
                if dr.is_dir() and re.fullmatch(r"dr\d", dr.name, re.IGNORECASE):
                    for spk in sorted(dr.iterdir()):
                        if spk.is_dir() and _SPEAKER.match(spk.name):
                            yield spk, spk.name.lower(), child.name.lower()


def prepare_timit(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                  keep_punctuation: bool = False, part: str = "all", include_sa: bool = True) -> DataDir:
    """Prepare TIMIT (or the NLTK sample) as a Kaldi data directory at ``out_dir``.

    Args:
        corpus_dir: the corpus root (either layout, see the module docstring).
        out_dir: data directory to write (``wav.scp text utt2spk spk2utt utt2lang utt2dur
            spk2gender phone_alignments``).
        sample_rate: if given and not 16000, ``wav.scp`` entries are ``sox ... -r HZ ... |`` pipes.
        keep_punctuation: keep the prompt's punctuation and case.
        part: ``all``, ``train`` or ``test``: the official TIMIT split (folder ``TRAIN``/``TEST``;
            for the sample layout, the ``Use`` column of ``spkrinfo.txt``, TRN/TST).
        include_sa: keep the two dialect sentences ``sa1``/``sa2`` read by every speaker (Kaldi's
            timit recipe drops them for phone recognition; default keeps them).

    Returns:
        The written :class:`DataDir`.

    Raises:
        FileNotFoundError: ``corpus_dir`` missing or holds no TIMIT speaker folders.
        DataError: a non-UTF-8 ``.txt``/``.phn`` (file and line named), or no usable utterance.
            Missing/empty/undecodable audio and malformed ``.txt``/``.phn`` files are reported
            and skipped (summary: ``skipped K of N recordings: ...``).
    """
    check_sample_rate(sample_rate)
    if part not in ("all", "train", "test"):
        raise ValueError(f"part must be all, train or test, got {part!r}")
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise FileNotFoundError(f"{corpus_dir}: no such directory")
    spkrinfo: dict[str, tuple[str, str]] = {}
    for cand in ("spkrinfo.txt", "SPKRINFO.TXT", "DOC/SPKRINFO.TXT", "doc/spkrinfo.txt"):
        if (corpus_dir / cand).is_file():
            spkrinfo = read_spkrinfo(corpus_dir / cand)
            break
    speakers = list(_speaker_dirs(corpus_dir))
    if not speakers:
        raise FileNotFoundError(f"{corpus_dir}: no TIMIT speaker folders (dr1-fvmh0/ or TRAIN/DR1/FVMH0/)")

    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    spk2gender: dict[str, str] = {}
    alignments: list = []
    skips = SkipLog("recordings", corpus="timit")
    total = 0
    for spk_dir, spk, spk_part in speakers:
        info = spkrinfo.get(spk[1:])
        use_part = spk_part or ({"TRN": "train", "TST": "test"}.get(info[1]) if info else None)
        if part != "all":
            if use_part is None:
                raise DataError(f"{spk_dir}: cannot tell whether speaker '{spk}' is train or test "
                                "(no TRAIN/TEST folder, not in spkrinfo.txt); use part='all'")
            if use_part != part:
                continue
        stems = sorted({p.stem.lower() for p in spk_dir.iterdir() if p.suffix.lower() == ".txt"})
        for stem in stems:
            if not include_sa and stem.startswith("sa"):
                continue
            utt = f"{spk}_{stem}"
            total += 1
            wav = _find(spk_dir, stem, "wav")
            if wav is None:
                skips.skip("missing", f"'{utt}': {spk_dir}/{stem}.wav: no such file")
                continue
            probed = probe_or_skip(wav, utt, skips)
            if probed is None:
                continue
            n, sr = probed
            txt = _find(spk_dir, stem, "txt")
            phn = _find(spk_dir, stem, "phn")
            txt_lines = read_metadata_lines(txt)  # non-UTF-8 is an error, not a skip
            phn_lines = read_metadata_lines(phn) if phn is not None else None
            try:
                prompt = _parse_prompt(txt_lines, txt)
                phones = _parse_phn(phn_lines, phn, utt) if phn is not None else []
            except DataError as e:
                skips.skip("malformed", f"'{utt}': {e}")
                continue
            if phn is None:
                logger.warning("'%s': no .phn file in %s, no phone alignment", utt, spk_dir)
            d.text[utt] = normalize_text(prompt, keep_punctuation)
            d.wav_scp[utt] = wav_entry(wav, sr, sample_rate)
            d.utt2spk[utt] = spk
            d.utt2lang[utt] = "en"
            d.utt2dur[utt] = n / sr
            alignments.extend(phones)
        spk2gender[spk] = info[0] if info else spk[0].lower()
    if total == 0:
        raise DataError(f"{corpus_dir}: no utterances" + (f" of part '{part}'" if part != "all" else "")
                        + (" (sa sentences excluded)" if not include_sa else ""))
    skips.summary(total, AUDIO_REASONS + ("malformed",))
    return finish(d, out_dir, spk2gender=spk2gender, phone_alignments=alignments, corpus="timit")
