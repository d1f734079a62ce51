"""Hindi News-On-AIR sentences (AI4Bharat IndicWav2Vec workshop data): 16 kHz FLAC, fairseq manifests.

Layout (fairseq wav2vec manifest)::

    <corpus>/manifest/train.tsv   line 1: the audio root; then '<relative path>\\t<num_samples>'
    <corpus>/manifest/train.wrd   the transcript of tsv line i+1 on line i (words)
    <corpus>/audio/train/<bulletin>/sent_<n>.flac

The root on line 1 is used as is when it is an existing absolute directory, else relative to
``corpus_dir`` (the shipped manifest says ``audio/train``); ``audio_root=`` overrides it.

**No speaker labels exist.** The bulletin folder (``Regional-Bhopal-Hindi-0705-2018102573612``, one
news bulletin, usually one newsreader) is used as the speaker, which is the best proxy available
but not a true speaker id: one reader may appear in several bulletins, so "speaker-disjoint" splits
of this corpus are only bulletin-disjoint. Utterance ids are ``<bulletin>_<file stem>``;
``utt2lang`` is ``hi``. The manifest's sample count is checked against the audio header (a mismatch
is logged; the header wins). Transcripts are Devanagari with occasional Latin-script English words
(lowercased by the normaliser).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path, PurePosixPath

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_sample_rate, finish, normalize_text, probe_or_skip, read_metadata_lines, wav_entry,
)
from speechkit.data.datadir import DataDir
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)

URL = "https://github.com/AI4Bharat/IndicWav2Vec (workshop-2022/asr_data/noa_training_1hr)"


def download_hindi_noa(target_dir: str | os.PathLike) -> None:
    """Not automated: the data sits inside the IndicWav2Vec repository (``workshop-2022/asr_data``).

    Clone https://github.com/AI4Bharat/IndicWav2Vec, and copy ``noa_training_1hr`` so that
    ``target_dir/manifest/train.tsv`` and the audio it names exist.

    Raises:
        NotImplementedError: always, with these instructions.
    """
    raise NotImplementedError(f"get the data from {URL} and unpack it into {target_dir}")


def prepare_hindi_noa(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *, sample_rate: int | None = None,
                      keep_punctuation: bool = False, split: str = "train", audio_root: str | None = None) -> DataDir:
    """Prepare one manifest of the Hindi NOA data as a Kaldi data directory.

    Args:
        corpus_dir: folder holding ``manifest/``.
        out_dir: data directory to write (``wav.scp text utt2spk spk2utt utt2lang utt2dur``).
        sample_rate: if given and not the native 16000 Hz, ``wav.scp`` entries become ``sox`` pipes.
        keep_punctuation: keep punctuation and case.
        split: manifest name, ``manifest/<split>.tsv`` with ``manifest/<split>.wrd``.
        audio_root: overrides the audio root on the manifest's first line.

    Returns:
        The written :class:`DataDir`.

    Raises:
        FileNotFoundError: manifest, transcript or audio root missing.
        DataError: non-UTF-8 files, ``.tsv`` and ``.wrd`` with different line counts (they are
            line-aligned, so nothing can be trusted), or no usable utterance. Malformed rows and
            bad audio are reported and skipped.
    """
    check_sample_rate(sample_rate)
    corpus_dir = Path(corpus_dir)
    tsv, wrd = corpus_dir / "manifest" / f"{split}.tsv", corpus_dir / "manifest" / f"{split}.wrd"
    for f in (tsv, wrd):
        if not f.is_file():
            raise FileNotFoundError(f"{f}: no such file")
    rows, words = read_metadata_lines(tsv), read_metadata_lines(wrd)
    if not rows:
        raise DataError(f"{tsv}: empty manifest (line 1 must be the audio root)")
    if len(rows) - 1 != len(words):
        raise DataError(f"{tsv} has {len(rows) - 1} entries after the root line but {wrd} has {len(words)} lines; "
                        "they must be line-aligned")
    root_line = rows[0].strip()
    if audio_root is not None:
        root = Path(audio_root)
    elif os.path.isabs(root_line) and Path(root_line).is_dir():
        root = Path(root_line)
    else:
        root = corpus_dir / root_line.lstrip("/")
    if not root.is_dir():
        raise naming_parameters(FileNotFoundError(f"{tsv}:1: audio root {root} is not a directory (pass "
                                                  "`audio_root`)"))

    d = DataDir(wav_scp={}, text={}, utt2spk={}, utt2lang={}, utt2dur={})
    skips = SkipLog("recordings", corpus="hindi_noa")
    mismatched = 0
    for lineno, (row, transcript) in enumerate(zip(rows[1:], words), 2):
        fields = row.split("\t")
        rel = PurePosixPath(fields[0]) if fields and fields[0] else None
        if len(fields) != 2 or rel is None or not fields[1].strip().isdigit() or len(rel.parts) < 2:
            skips.skip("malformed", f"{tsv}:{lineno}: expected '<bulletin>/<file>\\t<num_samples>', got {row!r}")
            continue
        bulletin = rel.parts[-2].replace("_", "-")
        utt = f"{bulletin}_{rel.stem}"
        if any(c.isspace() for c in utt):
            skips.skip("malformed", f"{tsv}:{lineno}: path {fields[0]!r} contains whitespace")
            continue
        if utt in d.utt2spk:
            skips.skip("malformed", f"{tsv}:{lineno}: utterance '{utt}' listed twice")
            continue
        text = normalize_text(transcript, keep_punctuation)
        if not text:
            skips.skip("malformed", f"{wrd}:{lineno - 1}: empty transcript")
            continue
        path = root / rel
        probed = probe_or_skip(path, utt, skips)
        if probed is None:
            continue
        n, sr = probed
        if n != int(fields[1]):
            mismatched += 1
            logger.debug("%s:%d: manifest says %s samples, header %d", tsv, lineno, fields[1], n)
        d.wav_scp[utt] = wav_entry(path, sr, sample_rate)
        d.text[utt] = text
        d.utt2spk[utt] = bulletin
        d.utt2lang[utt] = "hi"
        d.utt2dur[utt] = n / sr
    if mismatched:
        logger.warning("hindi_noa: %d files have a sample count other than the manifest's (header used)", mismatched)
    skips.summary(len(rows) - 1, AUDIO_REASONS + ("malformed",))
    logger.info("hindi_noa: no speaker labels; speaker = bulletin folder (%d bulletins)", len(set(d.utt2spk.values())))
    return finish(d, out_dir, corpus="hindi_noa")
