"""ZeroSpeech 2019 (the English or the Surprise language of the official release) as Kaldi data dirs.

The corpus folder is the language folder of the 2019 release (``english/`` or ``surprise/`` from
english.tgz / surprise.zip, or ``2019/<lang>/`` of the ZeroSpeech 2020 dataset)::

    DB/train/unit/<S>_<id>.wav     unit discovery set (speaker <S>, e.g. S015)
    DB/train/voice/<V>_<id>.wav    target voice(s) (V001, V002 in English; V001 in Surprise)
    DB/test/<S>_<id>.wav           test set (unseen speakers)
    DB/synthesis.txt               optional: '<test file or id> <voice>' per line, the utterances to
                                   resynthesize (a voice name selects the voice)
    ABX item file                  optional: ``abx_item``, else the first DB/*.item (the by-context
                                   task: '#file onset offset #phone prev-phone next-phone speaker')
    bitrate file list              optional: ``bitrate_filelist``, else DB/bitrate_filelist.txt
                                   ('<id>.txt <seconds>' per line; zerospeech2020/share/2019/<lang>/)

Written: OUT/train (unit + voice audio, minus OUT/dev: every 50th unit utterance, at least one),
OUT/dev, OUT/voice, OUT/test (+ abx.item, bitrate_filelist.txt, synthesis_list when available), each
with ``wav.scp utt2spk spk2utt utt2dur``. Utterance ids are the file names without '.wav'; the
speaker is the part before the first '_'. Unreadable audio is reported and skipped; audio at
another rate than 16 kHz is resampled through a sox pipe.

:func:`prepare_zerospeech2019` writes those four (``egs/zerospeech2019/local/prepare_zerospeech2019.py``
is its command line; ``egs/zerospeech2019``'s ``--corpus zerospeech2019``); :func:`prepare_zerospeech2019_corpus`,
registered as ``zerospeech2019`` in :data:`speechkit.data.corpora.CORPORA`, writes the chosen parts as
one data directory (no ``text``: the corpus has no transcripts).
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from speechkit.data.corpora._common import (
    AUDIO_REASONS, SkipLog, check_parts, check_sample_rate, finish, probe_or_skip, wav_entry,
)
from speechkit.data.datadir import DataDir, subset
from speechkit.utils.fileio import DataError, atomic_write, read_lines

logger = logging.getLogger(__name__)

#: The rate of the wav.scp entries (Hz); audio at another rate becomes a sox pipe.
SAMPLE_RATE = 16000
#: Every DEV_EVERY-th unit-discovery utterance is held out as dev.
DEV_EVERY = 50


def scan(folder: Path, what: str, sample_rate: int | None = SAMPLE_RATE) -> DataDir:
    """One data dir from every ``*.wav`` in ``folder`` (speaker = id before the first '_').

    Files without a ``<speaker>_`` prefix and missing/empty/undecodable audio are reported and skipped.

    Raises:
        FileNotFoundError: ``folder`` is not a directory.
        DataError: no usable ``.wav`` file.
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (expected the ZeroSpeech 2019 layout: "
                                "train/unit/, train/voice/, test/)")
    d = DataDir(wav_scp={}, utt2spk={}, utt2dur={})
    skips = SkipLog(corpus=f"zerospeech2019 {what}")
    files = sorted(folder.glob("*.wav"))
    for f in files:
        utt = f.stem
        if "_" not in utt:
            skips.skip("unnamed", f"'{utt}': {f}: no '<speaker>_' prefix in the file name")
            continue
        probed = probe_or_skip(f, utt, skips)
        if probed is None:
            continue
        n, sr = probed
        d.wav_scp[utt] = wav_entry(f, sr, sample_rate)
        d.utt2spk[utt] = utt.split("_", 1)[0]
        d.utt2dur[utt] = n / sr
    skips.summary(len(files), AUDIO_REASONS)
    if not d.utt2spk:
        raise DataError(f"{folder}: no usable .wav files")
    return d


def read_synthesis_list(path: Path, test: DataDir) -> list[str]:
    """``synthesis.txt``'s lines as ``<utt>`` or ``<utt> <voice>`` (a ``.wav`` file name becomes its id).

    Raises:
        DataError: a line names no utterance of ``test`` (names the file and line).
    """
    ids = []
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        utt = Path(parts[0]).name.removesuffix(".wav")
        if utt not in test.utt2spk:
            raise DataError(f"{path}:{lineno}: '{utt}' is not a test utterance")
        ids.append(f"{utt} {parts[1]}" if len(parts) > 1 else utt)
    return ids


def prepare_zerospeech2019(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                           abx_item: str | os.PathLike | None = None,
                           bitrate_filelist: str | os.PathLike | None = None,
                           synthesis: str | os.PathLike | None = None,
                           sample_rate: int | None = SAMPLE_RATE) -> dict[str, DataDir]:
    """Write ``out_dir/{train,dev,voice,test}`` (see the module's docstring) and the test set's side files.

    Args:
        corpus_dir: the language folder (``english/``, ``surprise/``).
        out_dir: where the four data directories go.
        abx_item: the test set's ABX item file, copied to ``test/abx.item`` (default: the first
            ``corpus_dir/*.item``; none: a warning, stage 6 cannot score ABX).
        bitrate_filelist: copied to ``test/bitrate_filelist.txt`` (default:
            ``corpus_dir/bitrate_filelist.txt`` if present).
        synthesis: the list read into ``test/synthesis_list`` (default: ``corpus_dir/synthesis.txt`` if present).
        sample_rate: ``wav.scp`` rate in Hz (other rates become ``sox`` pipes); None: native.

    Returns:
        ``{"train": ..., "dev": ..., "voice": ..., "test": ...}``, the written :class:`DataDir` s.

    Raises:
        FileNotFoundError: a folder of the layout is missing.
        DataError: a folder without a usable ``.wav``; an utterance id in both ``train/unit`` and
            ``train/voice``; a synthesis line naming no test utterance.
    """
    db, data = Path(corpus_dir), Path(out_dir)
    unit = scan(db / "train" / "unit", "train/unit", sample_rate)
    voice = scan(db / "train" / "voice", "train/voice", sample_rate)
    test = scan(db / "test", "test", sample_rate)
    dev_utts = unit.utts[DEV_EVERY - 1::DEV_EVERY]
    if not dev_utts and len(unit) > 1:  # a unit set under 50 utterances: still one for validation
        dev_utts = unit.utts[-1:]
    dev = subset(unit, dev_utts)
    train = subset(unit, [u for u in unit.utts if u not in set(dev_utts)])
    overlap = set(train.utt2spk) & set(voice.utt2spk)
    if overlap:
        raise DataError(f"{db}: utterance ids in both train/unit and train/voice, e.g. '{sorted(overlap)[0]}'")
    for table in ("wav_scp", "utt2spk", "utt2dur"):
        getattr(train, table).update(getattr(voice, table))
    dirs = {"train": train, "dev": dev, "voice": voice, "test": test}
    for name, d in dirs.items():
        d.write(data / name)
        logger.info("%s/%s: %d utterances, %d speakers, %.2f h", data, name, len(d), len(d.spk2utt),
                    sum(d.utt2dur.values()) / 3600)

    item = Path(abx_item) if abx_item else next(iter(sorted(db.glob("*.item"))), None)
    if item is not None:
        shutil.copyfile(item, data / "test" / "abx.item")
        logger.info("ABX items: %s", item)
    else:
        logger.warning("%s: no ABX item file (--abx-item); stage 6 cannot score ABX", db)
    bl = Path(bitrate_filelist) if bitrate_filelist else db / "bitrate_filelist.txt"
    if bl.is_file():
        shutil.copyfile(bl, data / "test" / "bitrate_filelist.txt")
    syn = Path(synthesis) if synthesis else db / "synthesis.txt"
    if syn.is_file():
        ids = read_synthesis_list(syn, test)
        with atomic_write(data / "test" / "synthesis_list") as f:
            f.write("".join(f"{x}\n" for x in ids))
    return dirs


URL = "https://download.zerospeech.com"
#: The audio folders of the layout, by part name.
PARTS = {"unit": ("train", "unit"), "voice": ("train", "voice"), "test": ("test",)}


def download_zerospeech2019(target_dir: str | os.PathLike) -> None:
    """Not automated: the ZeroSpeech 2019 data is downloaded by hand after accepting its licence.

    Get ``english.tgz`` (or ``surprise.zip``, or the 2020 dataset's ``2019/``) from the challenge
    (https://zerospeech.com, downloads at https://download.zerospeech.com) and unpack it so that
    ``target_dir/english/train/unit/`` exists.

    Raises:
        NotImplementedError: always, with these instructions.
    """
    raise NotImplementedError(f"download the ZeroSpeech 2019 data from {URL} and unpack it into {target_dir}")


def prepare_zerospeech2019_corpus(corpus_dir: str | os.PathLike, out_dir: str | os.PathLike, *,
                                  sample_rate: int | None = None, keep_punctuation: bool = False,
                                  parts: list[str] | None = None) -> DataDir:
    """The audio of the ``parts`` of a ZeroSpeech 2019 language folder as one data directory.

    The registry's form (``speechkit-prepare-corpus zerospeech2019``): ``wav.scp utt2spk spk2utt
    utt2dur`` of ``train/unit`` (part ``unit``), ``train/voice`` (``voice``) and ``test`` (``test``),
    ids and skips as :func:`scan`. No ``text``: the corpus has no transcripts (``keep_punctuation``
    is accepted for the registry's call and does nothing). ``egs/zerospeech2019``'s own
    ``--corpus zerospeech2019`` keeps the official sets apart (:func:`prepare_zerospeech2019`).

    Args:
        corpus_dir: the language folder (``english/``, ``surprise/``).
        out_dir: data directory to write.
        sample_rate: ``wav.scp`` rate in Hz (other rates become pipes); None: native.
        keep_punctuation: unused (no transcripts).
        parts: of ``unit voice test`` (default: all three).

    Raises:
        FileNotFoundError: a folder of a part is missing.
        DataError: a part without a usable ``.wav``; an utterance id in two parts.
        ValueError: an unknown part; a bad ``sample_rate``.
    """
    check_sample_rate(sample_rate)
    db = Path(corpus_dir)
    wanted = check_parts(parts, PARTS)
    d = DataDir(wav_scp={}, utt2spk={}, utt2dur={})
    origin: dict[str, str] = {}
    for part in wanted:
        one = scan(db.joinpath(*PARTS[part]), "/".join(PARTS[part]), sample_rate)
        for utt in one.utts:
            if utt in origin:
                raise DataError(f"{db}: utterance '{utt}' is in {origin[utt]} and in {'/'.join(PARTS[part])}")
            origin[utt] = "/".join(PARTS[part])
            for table in ("wav_scp", "utt2spk", "utt2dur"):
                getattr(d, table)[utt] = getattr(one, table)[utt]
    return finish(d, out_dir, corpus="zerospeech2019")


__all__ = ["SAMPLE_RATE", "PARTS", "scan", "read_synthesis_list", "prepare_zerospeech2019",
           "prepare_zerospeech2019_corpus", "download_zerospeech2019"]
