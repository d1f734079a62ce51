"""Free Spoken Digit Dataset (FSDD): English digits 0-9, 8 kHz WAV trimmed to the word.

Layout: ``<corpus>/recordings/{digit}_{speaker}_{index}.wav``. The transcript is the digit as an
English word (``7`` -> ``seven``). Utterance ids are ``<speaker>_<digit>_<index>`` (index
zero-padded to 2 digits, so ids sort in a readable order), speaker = the name in the file name;
``utt2lang`` is ``en``. Files whose names do not follow the pattern are reported and skipped as
malformed. License CC BY-SA 4.0.
"""
from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

from speechkit.data.corpora._common import AUDIO_REASONS, SkipLog, check_sample_rate, finish, probe_or_skip, wav_entry
from speechkit.data.datadir import DataDir

logger = logging.getLogger(__name__)

URL = "https://github.com/Jakobovski/free-spoken-digit-dataset"
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_NAME = re.compile(r"^([0-9])_([a-z][a-z0-9-]*)_([0-9]+)$", re.IGNORECASE)


def download_fsdd(target_dir: str | os.PathLike) -> Path:
    """Clone FSDD (needs ``git`` and internet) into ``target_dir``; returns the corpus root.

    Source: https://github.com/Jakobovski/free-spoken-digit-dataset (``recordings/`` holds the WAVs).
    Does nothing if ``target_dir/recordings`` already exists.
    """
    target = Path(target_dir)
    if (target / "recordings").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--depth", "1", URL, str(target)], check=True)
    return target


def prepare_fsdd(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                 keep_punctuation: bool = False) -> DataDir:
    """Prepare FSDD as one Kaldi data directory (all speakers, all recordings).

    Args:
        corpus_dir: folder holding ``recordings/``.
        out_dir: data directory to write (``wav.scp text utt2spk spk2utt utt2lang utt2dur``).
        sample_rate: if given and not the native 8000 Hz, ``wav.scp`` entries become ``sox`` pipes.
        keep_punctuation: accepted for a uniform interface; digit words have no punctuation.

    Returns:
        The written :class:`DataDir`.

    Raises:
        FileNotFoundError: no ``recordings/`` folder.
        DataError: no usable recording. Bad audio and badly named files are reported and skipped.
    """
    check_sample_rate(sample_rate)
    rec_dir = Path(corpus_dir) / "recordings"
    if not rec_dir.is_dir():
        raise FileNotFoundError(f"{rec_dir}: no such directory (expected FSDD's recordings/ folder)")
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("recordings", corpus="fsdd")
    files = sorted(p for p in rec_dir.iterdir() if p.suffix.lower() == ".wav")
    for path in files:
        m = _NAME.match(path.stem)
        if not m:
            skips.skip("malformed", f"{path}: name is not '<digit>_<speaker>_<index>.wav'")
            continue
        digit, spk, index = int(m.group(1)), m.group(2).lower(), int(m.group(3))
        utt = f"{spk}_{digit}_{index:02d}"
        if utt in d.utt2spk:
            skips.skip("malformed", f"{path}: duplicate of utterance '{utt}'")
            continue
        probed = probe_or_skip(path, utt, skips)
        if probed is None:
            continue
        n, sr = probed
        d.wav_scp[utt] = wav_entry(path, sr, sample_rate)
        d.text[utt] = DIGIT_WORDS[digit]
        d.utt2spk[utt] = spk
        d.utt2lang[utt] = "en"
        d.utt2dur[utt] = n / sr
    skips.summary(len(files), AUDIO_REASONS + ("malformed",))
    return finish(d, out_dir, corpus="fsdd")
