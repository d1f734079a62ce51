#!/usr/bin/env python3
"""MUCS 2021 (Multilingual and Code-Switching ASR Challenge, sub-task 1) as Kaldi data dirs.

Usage: local/prepare_mucs.py [--languages hi,mr] [--dev F] [--seed S] [--sample-rate HZ]
                             [--speaker-from-id] <mucs-root> <out-root>

Reads <mucs-root>/<Language>/<split>/transcription.txt ('<uttid> <text>') and
<mucs-root>/<Language>/<split>/audio/<uttid>.wav (8 kHz), split = train, test (and dev if present);
writes <out-root>/<lang>/{train,dev,test} with wav.scp text utt2spk spk2utt utt2lang utt2dur.
The rules (ids, speakers, the dev draw, text normalisation, skips) are those of
speechkit.data.corpora.mucs.prepare_mucs, which this script calls.
"""
from __future__ import annotations

import sys
from pathlib import Path

from speechkit.data.corpora.mucs import SPLITS, prepare_mucs
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "prepare_mucs.py"


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("root", type=Path, metavar="MUCS_ROOT")
    parser.add_argument("out", type=Path, metavar="OUT_ROOT")
    parser.add_argument("--languages", default="", help="comma-separated ISO codes (default: every language folder)")
    parser.add_argument("--dev", type=float, default=0.1, help="fraction of train drawn as dev when there is no dev/")
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev draw")
    parser.add_argument("--sample-rate", type=int, default=16000, help="wav.scp sample rate (Hz); sox resamples")
    parser.add_argument("--speaker-from-id", action="store_true",
                        help="speaker = the MUCS id's part before its first '_' (default: one per utterance)")
    args = parser.parse_args(argv)
    setup_logging(None)

    def body() -> int:
        langs = [x for x in args.languages.split(",") if x] or None
        counts = prepare_mucs(args.root, args.out, languages=langs, dev=args.dev, seed=args.seed,
                              sample_rate=args.sample_rate, speaker_from_id=args.speaker_from_id)
        for lang, c in counts.items():
            print(f"{lang}: " + ", ".join(f"{s} {c[s]}" for s in SPLITS))
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
