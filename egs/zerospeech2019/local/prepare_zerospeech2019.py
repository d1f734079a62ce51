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
(speechkit.data.corpora.zerospeech2019.prepare_zerospeech2019 does the work.)
"""
from __future__ import annotations

import sys

from speechkit.data.corpora.zerospeech2019 import prepare_zerospeech2019
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "prepare_zerospeech2019.py"


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
        prepare_zerospeech2019(args.db, args.data, abx_item=args.abx_item, bitrate_filelist=args.bitrate_filelist,
                               synthesis=args.synthesis)
        return 0

    return run_main(PROG, body, parser=p)


if __name__ == "__main__":
    sys.exit(main())
