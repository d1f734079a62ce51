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

Not in :data:`speechkit.data.corpora.CORPORA`: the registry's preparers write one data directory,
this one four. ``egs/zerospeech2019/local/prepare_zerospeech2019.py`` is its command line.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from speechkit.data.corpora._common import AUDIO_REASONS, SkipLog, probe_or_skip, wav_entry
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
        raise FileNotFoundError(f"{folder}: no such folder (expected the ZeroSpeech 2019 layout, see --help)")
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


__all__ = ["SAMPLE_RATE", "scan", "read_synthesis_list", "prepare_zerospeech2019"]
