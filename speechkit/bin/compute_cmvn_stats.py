"""Compute CMVN statistics of a data directory's features (Kaldi's steps/compute_cmvn_stats.sh).

  speechkit-compute-cmvn-stats [--per-speaker] DATA_DIR [CMVN_DIR]

Reads DATA_DIR/feats.scp and writes Kaldi-format stats -- a 2 x (dim+1) float64 matrix per key,
row 0 = per-dimension sums and the frame count, row 1 = sums of squares:

  global (default)  one matrix in DATA_DIR/cmvn_global.ark (not in cmvn.scp, whose keys are the
                    speakers; an older cmvn.scp holding only a `global` entry is moved to
                    DATA_DIR/.backup/N/). CMVN_DIR is not used.
  --per-speaker     one matrix per speaker of utt2spk in CMVN_DIR/cmvn_<data>_<path hash>.<stats hash>.ark
                    (named by its content: a recompute never overwrites an ark an older cmvn.scp reads; default
                    CMVN_DIR: DATA_DIR/data), and DATA_DIR/cmvn.scp pointing at it, keyed by speaker.

Every file is written atomically. CMVN_DIR may lie inside DATA_DIR (the default does) but may
not be DATA_DIR or contain it; a data dir without utterances is an error. Load normalised
features with speechkit.features.io.FeatureReader(DATA_DIR, cmvn="global"|"speaker"), which
applies the stats as Kaldi's apply-cmvn does.

Example:
  speechkit-compute-cmvn-stats data/train                     # global stats
  speechkit-compute-cmvn-stats --per-speaker data/train mfcc  # per speaker, ark in mfcc/
"""
from __future__ import annotations

import sys

from speechkit.features.cmvn_stats import compute_cmvn_stats
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-compute-cmvn-stats"


def main(argv=None) -> int:
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp and utt2spk")
    p.add_argument("cmvn_dir", metavar="CMVN_DIR", nargs="?",
                   help="where --per-speaker's cmvn_<data>.ark goes (default: DATA_DIR/data; not DATA_DIR "
                        "itself nor a dir containing it)")
    p.add_argument("--per-speaker", action="store_true",
                   help="stats per speaker of utt2spk in DATA_DIR/cmvn.scp (default: global stats in "
                        "DATA_DIR/cmvn_global.ark)")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    args = p.parse_args(argv)
    setup_logging(verbose=args.verbose)

    def body() -> int:
        scp = compute_cmvn_stats(args.data_dir, args.cmvn_dir, per_speaker=args.per_speaker)
        print(f"{PROG}: wrote {scp}")
        return 0

    return run_main(PROG, body, parser=p)


if __name__ == "__main__":
    sys.exit(main())
