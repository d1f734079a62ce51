"""Split a Kaldi data directory into N parts (Kaldi's utils/split_data.sh).

Writes DIR/splitN/{1..N} (by speaker, the default: each speaker in one part, parts balanced in
utterances) or DIR/splitNutt/{1..N} (--per-utt: parts differ by at most one utterance). Parts are
contiguous in sorted order, so the split is deterministic. An existing split is reused when it
was made from the same content of the source's tables and extra files (a SHA-256 of their names and
bytes, kept in DIR/splitN[utt]/.source; file times are not compared) and its N parts hold the
same files; otherwise it is rebuilt in a temporary directory and swapped in. Exits 1 if N exceeds
the number of speakers (utterances with --per-utt).

Example:
  speechkit-split-data-dir data/train 4        # -> data/train/split4/{1,2,3,4}
"""
from __future__ import annotations

import sys

from speechkit.data.split_data import split, split_dir_name
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-split-data-dir"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DIR", help="the data directory to split")
    parser.add_argument("num_splits", metavar="N", type=int, help="number of parts")
    parser.add_argument("--per-utt", action="store_true",
                        help="split by utterance (a speaker may span parts) instead of by speaker")
    args = parser.parse_args(argv)

    def body() -> None:
        setup_logging()
        parts = split(args.data_dir, args.num_splits, by_speaker=not args.per_utt)
        sizes = " ".join(str(len(p)) for p in parts)
        print(f"{PROG}: {args.data_dir}/{split_dir_name(args.num_splits, not args.per_utt)}: "
              f"utterances per part: {sizes}")

    return run_main(PROG, body, parser=parser, flags={"by_speaker=false": "--per-utt"})


if __name__ == "__main__":
    sys.exit(main())
