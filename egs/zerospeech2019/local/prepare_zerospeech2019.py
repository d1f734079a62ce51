#!/usr/bin/env python3
"""Data dirs from the official ZeroSpeech 2019 data (the English or the Surprise language).

  local/prepare_zerospeech2019.py [--abx-item F] [--bitrate-filelist F] [--synthesis F] DB DATA

DB is the language folder of the 2019 release (english/ or surprise/ from english.tgz /
surprise.zip, or 2019/<lang>/ of the ZeroSpeech 2020 dataset):

  DB/train/unit/<S>_<id>.wav     unit discovery set (speaker <S>, e.g. S015)
  DB/train/voice/<V>_<id>.wav    target voice(s) (V001, V002 in English; V001 in Surprise)
  DB/test/<S>_<id>.wav           test set (unseen speakers)
  DB/synthesis.txt               optional: '<test file or id> <voice>' per line, the utterances to
                                 resynthesize (stage 5 uses its ids; a voice name selects the voice)
  ABX item file                  optional: --abx-item, else the first DB/*.item (the by-context
                                 task: '#file onset offset #phone prev-phone next-phone speaker')
  bitrate file list              optional: --bitrate-filelist, else DB/bitrate_filelist.txt
                                 ('<id>.txt <seconds>' per line; zerospeech2020/share/2019/<lang>/)

Writes DATA/train (unit + voice audio, minus DATA/dev: every 50th unit utterance, at least one), DATA/dev,
DATA/voice, DATA/test (+ abx.item, bitrate_filelist.txt, synthesis_list when available). Utterance
ids are the file names without '.wav'; the speaker is the part before the first '_'. Unreadable
audio is reported and skipped; audio at another rate than 16 kHz is resampled through a sox pipe.
"""
from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

from speechkit.data.corpora._common import AUDIO_REASONS, SkipLog, probe_or_skip, wav_entry
from speechkit.data.datadir import DataDir, subset
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, read_lines

PROG = "prepare_zerospeech2019.py"
SAMPLE_RATE = 16000
log = logging.getLogger(PROG)


def scan(folder: Path, what: str) -> DataDir:
    """One data dir from every ``*.wav`` in ``folder`` (speaker = id before the first '_')."""
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
        d.wav_scp[utt] = wav_entry(f, sr, SAMPLE_RATE)
        d.utt2spk[utt] = utt.split("_", 1)[0]
        d.utt2dur[utt] = n / sr
    skips.summary(len(files), AUDIO_REASONS)
    if not d.utt2spk:
        raise DataError(f"{folder}: no usable .wav files")
    return d


def main(argv=None) -> int:
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("db", metavar="DB", help="the english/ or surprise/ folder")
    p.add_argument("data", metavar="DATA", help="where train/ dev/ voice/ test/ go")
    p.add_argument("--abx-item", default=None, help="ABX item file of the test set (default: first DB/*.item)")
    p.add_argument("--bitrate-filelist", default=None, help="default: DB/bitrate_filelist.txt if present")
    p.add_argument("--synthesis", default=None, help="default: DB/synthesis.txt if present")
    args = p.parse_args(argv)

    def body() -> int:
        setup_logging()
        db, data = Path(args.db), Path(args.data)
        unit = scan(db / "train" / "unit", "train/unit")
        voice = scan(db / "train" / "voice", "train/voice")
        test = scan(db / "test", "test")
        dev_utts = unit.utts[49::50]
        if not dev_utts and len(unit) > 1:  # a unit set under 50 utterances: still one for validation
            dev_utts = unit.utts[-1:]
        dev = subset(unit, dev_utts)
        train = subset(unit, [u for u in unit.utts if u not in set(dev_utts)])
        overlap = set(train.utt2spk) & set(voice.utt2spk)
        if overlap:
            raise DataError(f"{db}: utterance ids in both train/unit and train/voice, e.g. '{sorted(overlap)[0]}'")
        for table in ("wav_scp", "utt2spk", "utt2dur"):
            getattr(train, table).update(getattr(voice, table))
        for name, d in (("train", train), ("dev", dev), ("voice", voice), ("test", test)):
            d.write(data / name)
            log.info("%s/%s: %d utterances, %d speakers, %.2f h", data, name, len(d), len(d.spk2utt),
                     sum(d.utt2dur.values()) / 3600)

        item = Path(args.abx_item) if args.abx_item else next(iter(sorted(db.glob("*.item"))), None)
        if item is not None:
            shutil.copyfile(item, data / "test" / "abx.item")
            log.info("ABX items: %s", item)
        else:
            log.warning("%s: no ABX item file (--abx-item); stage 6 cannot score ABX", db)
        bl = Path(args.bitrate_filelist) if args.bitrate_filelist else db / "bitrate_filelist.txt"
        if bl.is_file():
            shutil.copyfile(bl, data / "test" / "bitrate_filelist.txt")
        syn = Path(args.synthesis) if args.synthesis else db / "synthesis.txt"
        if syn.is_file():
            ids = []
            for lineno, line in enumerate(read_lines(syn), 1):
                parts = line.split()
                if not parts:
                    continue
                utt = Path(parts[0]).name.removesuffix(".wav")
                if utt not in test.utt2spk:
                    raise DataError(f"{syn}:{lineno}: '{utt}' is not a test utterance")
                ids.append(f"{utt} {parts[1]}" if len(parts) > 1 else utt)
            with atomic_write(data / "test" / "synthesis_list") as f:
                f.write("".join(f"{x}\n" for x in ids))
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
