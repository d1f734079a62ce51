"""Write a subset of a Kaldi data directory (Kaldi's utils/subset_data_dir.sh).

Exactly one selection:
  --first N        the first N utterances (sorted order)
  --last N         the last N utterances
  --utt-list F     the utterances listed in F (first field of each line)
  --spk-list F     every utterance of the speakers listed in F
  N                N utterances drawn at random (reproducible with --seed, default 777)

wav.scp, segments, cmvn.scp, spk2gender and phone_alignments are pruned to what the subset uses;
frame_shift, feats.yaml and cmvn_global.ark are copied. DEST may not be, contain or lie inside SRC
or the list file; an existing DEST gets the new tables (stale tables removed, other files kept).
Both this form and Kaldi's are accepted:
  speechkit-subset-data-dir --first 100 data/train data/train_100
  speechkit-subset-data-dir --first data/train 100 data/train_100
  speechkit-subset-data-dir data/train 500 data/train_500      (random, Kaldi order)
  speechkit-subset-data-dir 500 data/train data/train_500      (random)
  speechkit-subset-data-dir --utt-list dev.list data/train data/dev
"""
from __future__ import annotations

import sys

from speechkit.data.subset_data_dir import subset_data_dir
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-subset-data-dir"


def _int(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("args", nargs="+", metavar="[N] SRC [N] DEST",
                        help="source and destination data dirs, with N (random mode, or the count "
                             "of --first/--last in Kaldi's order SRC N DEST)")
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--first", nargs="?", const="", metavar="N", help="take the first N utterances")
    g.add_argument("--last", nargs="?", const="", metavar="N", help="take the last N utterances")
    g.add_argument("--utt-list", metavar="F", help="take the utterances listed in file F")
    g.add_argument("--spk-list", metavar="F", help="take every utterance of the speakers listed in file F")
    parser.add_argument("--seed", type=int, default=777, help="random seed for the N mode (default: 777)")
    args = parser.parse_args(argv)

    pos = list(args.args)
    count = None
    mode = "first" if args.first is not None else "last" if args.last is not None else None
    if mode is not None:
        value = getattr(args, mode)
        if _int(value) is not None:          # --first N SRC DEST
            count = _int(value)
        elif value:                          # --first SRC N DEST: argparse took SRC as the value
            pos.insert(0, value)
    if len(pos) == 3:
        if _int(pos[1]) is not None:         # SRC N DEST (Kaldi)
            n, src, dest = _int(pos[1]), pos[0], pos[2]
        elif _int(pos[0]) is not None:       # N SRC DEST
            n, src, dest = _int(pos[0]), pos[1], pos[2]
        else:
            parser.error(f"expected SRC N DEST or N SRC DEST, got {' '.join(pos)}")
        if count is not None:
            parser.error("N given twice")
        count = n
    elif len(pos) == 2:
        src, dest = pos
    else:
        parser.error("expected SRC DEST (plus N)")
    if mode is not None and count is None:
        parser.error(f"--{mode} needs N")
    if mode is None and args.utt_list is None and args.spk_list is None and count is None:
        parser.error("choose --first N, --last N, --utt-list F, --spk-list F or N")
    if (args.utt_list or args.spk_list) and count is not None:
        parser.error("N cannot be combined with --utt-list/--spk-list")

    def body() -> None:
        setup_logging()
        out = subset_data_dir(
            src, dest,
            first=count if mode == "first" else None,
            last=count if mode == "last" else None,
            num=count if mode is None and count is not None else None,
            utt_list=args.utt_list, spk_list=args.spk_list, seed=args.seed)
        print(f"{PROG}: wrote {len(out)} utterances to {dest}")

    return run_main(PROG, body, parser=parser, flags={"num": "N"})


if __name__ == "__main__":
    sys.exit(main())
