"""Split a data directory into reproducible train/dev/test parts: OUT/train, OUT/dev, OUT/test.

The dev and test parts are drawn at random from --seed (same seed and data -> same split).
By default utterances are split (round(F * N) each); with --by-speaker whole speakers are
assigned, so the parts are speaker-disjoint and hold about the requested fractions of the
utterances. phone_alignments and spk2gender are subset along with the utterances and
speakers. An empty part is an error (nothing is written then). No part may be, contain or lie
inside DATA (OUT itself may hold it: data/all -> data/{train,dev,test}); an existing part gets the
new tables (stale ones removed). Re-running the same split keeps the features and CMVN stats
computed in the parts since; whatever is replaced or removed is first copied to OUT/<part>/.backup/N
(logged).

Example:
  speechkit-split-corpus data/mini data/mini_split --dev 0.1 --test 0.1 --by-speaker --seed 0
"""
from __future__ import annotations

import sys

from speechkit.data.splits import write_split
from speechkit.utils.cli import finite_float, make_parser, run_main, setup_logging

PROG = "speechkit-split-corpus"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA", help="the data directory to split")
    parser.add_argument("out_dir", metavar="OUT", help="where to write train/, dev/ and test/")
    parser.add_argument("--dev", type=finite_float, required=True, metavar="F", help="fraction of utterances for dev, in (0, 1)")
    parser.add_argument("--test", type=finite_float, required=True, metavar="F", help="fraction of utterances for test, in (0, 1)")
    parser.add_argument("--by-speaker", action="store_true", help="speaker-disjoint parts (whole speakers per part)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--log-file", default=None, help="also append the log to this file")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file, input_dirs={"DATA": args.data_dir},
                      output_data_dirs=[("OUT's part", f"{args.out_dir}/{n}") for n in ("train", "dev", "test")])
        parts = write_split(args.data_dir, args.out_dir, args.dev, args.test, by_speaker=args.by_speaker,
                            seed=args.seed)
        summary = ", ".join(f"{name} {len(d)} utts / {len(d.spk2utt)} spks" for name, d in parts.items())
        print(f"{PROG}: wrote {args.out_dir}: {summary}")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
