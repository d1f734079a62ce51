"""LJ Speech (https://keithito.com/LJ-Speech-Dataset/): one female reader of English, 22.05 kHz.

Layout: ``<corpus>/metadata.csv`` (``id|raw text|normalized text``, no header) and
``<corpus>/wavs/<id>.wav``. Speaker ``lj``; utterance ``lj_<id>``; text from the normalized
column (numbers spelled out); ``utt2lang`` ``en``; ``spk2gender`` ``lj f``.
"""
from __future__ import annotations

import os
import tarfile
import urllib.request
from pathlib import Path

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_sample_rate, finish, normalize_text, probe_or_skip, read_metadata_lines, wav_entry,
)
from speechkit.data.datadir import DataDir

URL = "https://data.keithito.com/data/speech/LJSpeech-1.1.tar.bz2"
SPEAKER = "lj"


def download_ljspeech(target_dir: str | os.PathLike) -> Path:
    """Download and unpack LJ Speech 1.1 (2.6 GB) into ``target_dir``; returns the corpus root."""
    target = Path(target_dir)
    root = target / "LJSpeech-1.1"
    if (root / "metadata.csv").is_file():
        return root
    target.mkdir(parents=True, exist_ok=True)
    archive, _ = urllib.request.urlretrieve(URL, target / "LJSpeech-1.1.tar.bz2")
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return root


def prepare_ljspeech(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                     keep_punctuation: bool = False, text_column: str = "normalized") -> DataDir:
    """Prepare LJ Speech as one Kaldi data directory.

    Args:
        corpus_dir: the folder holding ``metadata.csv`` and ``wavs/``.
        out_dir: data directory to write.
        sample_rate: resample through a sox pipe when it differs from 22050 Hz.
        keep_punctuation: keep the transcript's punctuation and case.
        text_column: ``normalized`` (numbers spelled out) or ``raw``.

    Raises:
        FileNotFoundError: no ``metadata.csv``.
        DataError: non-UTF-8 metadata (file:line), or no usable utterance.
    """
    check_sample_rate(sample_rate)
    corpus = Path(corpus_dir)
    lines = read_metadata_lines(corpus / "metadata.csv")
    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("recordings", corpus="ljspeech")
    for lineno, line in enumerate(lines, 1):
        fields = line.split("|")
        if len(fields) != 3 or not fields[0]:
            skips.skip("malformed", f"{corpus / 'metadata.csv'}:{lineno}: expected 'id|raw|normalized'")
            continue
        utt = f"{SPEAKER}_{fields[0]}"
        text = normalize_text(fields[2] if text_column == "normalized" else fields[1], keep_punctuation)
        probed = probe_or_skip(corpus / "wavs" / f"{fields[0]}.wav", utt, skips)
        if probed is None or not text:
            continue
        n, sr = probed
        d.wav_scp[utt] = wav_entry(corpus / "wavs" / f"{fields[0]}.wav", sr, sample_rate)
        d.text[utt] = text
        d.utt2spk[utt] = SPEAKER
        d.utt2lang[utt] = "en"
        d.utt2dur[utt] = n / sr
    skips.summary(len(lines), AUDIO_REASONS + ("malformed",))
    return finish(d, out_dir, spk2gender={SPEAKER: "f"}, corpus="ljspeech")
