"""CSTR VCTK Corpus: 109-110 speakers of English with various accents, about 400 sentences each, 48 kHz.

Two releases' layouts are recognised (chosen automatically, 0.92 first when both are present):

* 0.92 (``VCTK-Corpus-0.92``, 2019): ``wav48_silence_trimmed/<spk>/<spk>_<nnn>_<mic>.flac`` with two
  microphones, ``mic1`` (omni-directional DPA 4035) and ``mic2`` (small-diaphragm condenser
  Sennheiser MKH 800); leading and trailing silence already trimmed;
* 0.80 (``VCTK-Corpus``, 2012): ``wav48/<spk>/<spk>_<nnn>.wav`` (one microphone).

Both have ``txt/<spk>/<spk>_<nnn>.txt`` (one sentence) and ``speaker-info.txt``
(``ID AGE GENDER ACCENTS REGION [COMMENTS]``; the ID is ``p225`` in 0.92 and ``225`` in 0.80).

Outputs (Kaldi data dir): speaker = the folder name (``p225``; VCTK ids have no ``_``), utterance
= the file stem without the microphone suffix (``p225_001``, always prefixed by the speaker),
``text`` normalised (see :func:`~speechkit.data.corpora._common.normalize_text`), ``utt2lang``
``en``, ``utt2dur`` from the audio header, ``spk2gender`` from ``speaker-info.txt`` when it lists
every kept speaker. An utterance whose transcript is missing (p315's in 0.92) or empty, or whose
audio is missing, empty or undecodable, is reported and skipped.
"""
from __future__ import annotations

import logging
import os
import re
import urllib.request
import zipfile
from pathlib import Path
from typing import Sequence

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_sample_rate, finish, normalize_text, probe_or_skip, read_metadata_lines, wav_entry,
)
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)

URL = "https://datashare.ed.ac.uk/bitstream/handle/10283/3443/VCTK-Corpus-0.92.zip"
MICS = ("mic1", "mic2")
#: Audio folder -> (layout name, file-name pattern given the microphone).
LAYOUTS = {"wav48_silence_trimmed": "0.92", "wav48": "0.80"}
TRANSCRIPT_REASONS = ("no_transcript", "empty_transcript")


def download_vctk(target_dir: str | os.PathLike) -> Path:
    """Download and unpack VCTK 0.92 (about 11 GB, CC BY 4.0) from the Edinburgh DataShare.

    Source: https://doi.org/10.7488/ds/2645 (``VCTK-Corpus-0.92.zip``). Unpacks into
    ``target_dir/VCTK-Corpus-0.92`` and returns that folder; does nothing if it already holds
    ``speaker-info.txt`` and ``wav48_silence_trimmed/``. Needs internet; tests never call it.
    """
    root = Path(target_dir) / "VCTK-Corpus-0.92"
    if (root / "speaker-info.txt").is_file() and (root / "wav48_silence_trimmed").is_dir():
        return root
    root.mkdir(parents=True, exist_ok=True)
    archive = Path(target_dir) / "VCTK-Corpus-0.92.zip"
    if not archive.is_file():
        tmp = archive.with_suffix(".zip.part")
        urllib.request.urlretrieve(URL, tmp)
        tmp.rename(archive)
    with zipfile.ZipFile(archive) as z:
        z.extractall(root)
    return root


def read_speaker_info(path: str | os.PathLike) -> dict[str, str]:
    """``speaker-info.txt`` -> ``{speaker: 'f'|'m'}`` (ids as folder names: ``225`` becomes ``p225``).

    The header line (``ID ...``) is skipped; a line without an ID and an F/M gender column is
    skipped with a warning naming file and line.

    Raises:
        DataError: not UTF-8 (file and line named).
    """
    out: dict[str, str] = {}
    for lineno, line in enumerate(read_metadata_lines(path), 1):
        parts = line.split()
        if not parts or parts[0].upper() == "ID":
            continue
        if len(parts) < 3 or parts[2].upper() not in ("F", "M"):
            logger.warning("%s:%d: skipping malformed line (expected 'ID AGE GENDER ...'): %r", path, lineno, line)
            continue
        spk = f"p{parts[0]}" if parts[0].isdigit() else parts[0]
        out[spk] = parts[2].lower()
    return out


def _audio_dir(corpus: Path) -> tuple[Path, str]:
    for name, layout in LAYOUTS.items():
        if (corpus / name).is_dir():
            return corpus / name, layout
    raise FileNotFoundError(f"{corpus}: not a VCTK corpus (no wav48_silence_trimmed/ (0.92) or wav48/ (0.80) folder)")


def prepare_vctk(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                 keep_punctuation: bool = False, mic: str = "mic1", speakers: Sequence[str] | None = None) -> DataDir:
    """Prepare VCTK (0.92 or 0.80 layout, see the module docstring) as a Kaldi data directory.

    Args:
        corpus_dir: the folder holding ``txt/``, ``speaker-info.txt`` and ``wav48_silence_trimmed/``
            or ``wav48/``.
        out_dir: data directory to write.
        sample_rate: resample through a ``sox`` pipe when it differs from the files' rate (48 kHz);
            16000 or 22050 are usual for TTS.
        keep_punctuation: keep the transcripts' punctuation and case.
        mic: 0.92 only: ``mic1`` or ``mic2`` recordings (ignored for 0.80, which has one).
        speakers: keep only these speakers (e.g. ``["p225", "p226"]``); ``None`` keeps all.

    Returns:
        The written :class:`DataDir`.

    Raises:
        FileNotFoundError: ``corpus_dir`` is not a VCTK tree.
        ValueError: unknown ``mic``, or a requested speaker not in the corpus (named).
        DataError: a non-UTF-8 transcript or ``speaker-info.txt`` (file and line), or no usable
            utterance. Bad audio and missing/empty transcripts are reported and skipped
            (``skipped K of N recordings: K1 missing, K2 empty, K3 undecodable, K4 no_transcript, ...``).
    """
    check_sample_rate(sample_rate)
    if mic not in MICS:
        raise ValueError(f"mic must be one of {', '.join(MICS)}, got {mic!r}")
    corpus = Path(corpus_dir)
    if not corpus.is_dir():
        raise FileNotFoundError(f"{corpus}: no such directory")
    audio_dir, layout = _audio_dir(corpus)
    txt_dir = corpus / "txt"
    suffix, ext = (f"_{mic}", ".flac") if layout == "0.92" else ("", ".wav")
    logger.info("vctk: %s layout (%s%s)", layout, audio_dir.name, f", {mic}" if layout == "0.92" else "")
    info = corpus / "speaker-info.txt"
    spk2gender = read_speaker_info(info) if info.is_file() else {}
    if not spk2gender:
        logger.info("vctk: no speaker-info.txt in %s; no spk2gender", corpus)

    found = sorted({p.name for d in (audio_dir, txt_dir) if d.is_dir() for p in d.iterdir() if p.is_dir()})
    if speakers is not None:
        unknown = [s for s in speakers if s not in found]
        if unknown:
            raise ValueError(f"{corpus}: speaker '{unknown[0]}' not in the corpus ({len(found)} speakers found)")
        found = [s for s in found if s in set(speakers)]
    audio_re = re.compile(rf"^(.+){re.escape(suffix)}{re.escape(ext)}$")

    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("recordings", corpus="vctk")
    total = 0
    for spk in found:
        if "_" in spk:
            raise DataError(f"{audio_dir / spk}: speaker folder names must not contain '_' (got '{spk}')")
        audio = {}
        if (audio_dir / spk).is_dir():
            for p in (audio_dir / spk).iterdir():
                m = audio_re.match(p.name)
                if m:
                    audio[m.group(1)] = p
        texts = {p.stem: p for p in (txt_dir / spk).glob("*.txt")} if (txt_dir / spk).is_dir() else {}
        for stem in sorted(set(audio) | set(texts)):
            utt = stem if stem.startswith(f"{spk}_") else f"{spk}_{stem}"
            total += 1
            if stem not in audio:
                skips.skip("missing", f"'{utt}': {audio_dir / spk / (stem + suffix + ext)}: no such file")
                continue
            if stem not in texts:
                skips.skip("no_transcript", f"'{utt}': {txt_dir / spk / (stem + '.txt')}: no transcript")
                continue
            probed = probe_or_skip(audio[stem], utt, skips)
            if probed is None:
                continue
            text = normalize_text(" ".join(read_metadata_lines(texts[stem])), keep_punctuation)
            if not text:
                skips.skip("empty_transcript", f"'{utt}': {texts[stem]}: empty transcript")
                continue
            n, sr = probed
            d.wav_scp[utt] = wav_entry(audio[stem], sr, sample_rate)
            d.text[utt] = text
            d.utt2spk[utt] = spk
            d.utt2lang[utt] = "en"
            d.utt2dur[utt] = n / sr
    if total == 0:
        raise DataError(f"{corpus}: no VCTK recordings found under {audio_dir} / {txt_dir}")
    skips.summary(total, AUDIO_REASONS + TRANSCRIPT_REASONS)
    return finish(d, out_dir, spk2gender=spk2gender or None, corpus="vctk")
