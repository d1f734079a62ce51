"""Combine Kaldi data directories into one (Kaldi's utils/combine_data.sh).

The union of the sources: an utterance id in two sources is an error (naming both). Optional
files (text, utt2lang, utt2dur, feats.scp, utt2num_frames, cmvn.scp, spk2gender,
phone_alignments) are kept only if every source has them (a warning says which are not); sources without segments get whole-recording segments when others have them.
DEST may not be, contain or lie inside a SRC; an existing DEST gets the new tables (stale tables
removed, other files kept).

Example:
  speechkit-combine-data-dirs data/train_all data/train_a data/train_b
"""
from __future__ import annotations

import sys

from speechkit.data.combine_data import combine_data_dirs
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-combine-data-dirs"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("dest", metavar="DEST", help="the combined data directory to write")
    parser.add_argument("srcs", metavar="SRC", nargs="+", help="source data directories")
    args = parser.parse_args(argv)

    def body() -> None:
        setup_logging()
        out = combine_data_dirs(args.dest, args.srcs)
        print(f"{PROG}: wrote {len(out)} utterances from {len(args.srcs)} dirs to {args.dest}")

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
