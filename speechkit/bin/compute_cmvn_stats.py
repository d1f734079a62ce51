"""Compute CMVN statistics of a data directory's features (Kaldi's steps/compute_cmvn_stats.sh).

  speechkit-compute-cmvn-stats [--per-speaker] DATA_DIR [CMVN_DIR]

Reads DATA_DIR/feats.scp and writes Kaldi-format stats -- a 2 x (dim+1) float64 matrix per key,
row 0 = per-dimension sums and the frame count, row 1 = sums of squares -- to
CMVN_DIR/cmvn_<data>.ark (default CMVN_DIR: DATA_DIR/data), and DATA_DIR/cmvn.scp pointing at
it, keyed by speaker (--per-speaker) or by the single key `global`. Both files are written
atomically. Load normalised features with
speechkit.features.io.FeatureReader(DATA_DIR, cmvn="global"|"speaker"), which applies the stats
as Kaldi's apply-cmvn does.

Example:
  speechkit-compute-cmvn-stats data/train                     # global stats
  speechkit-compute-cmvn-stats --per-speaker data/train mfcc  # per speaker, ark in mfcc/
"""
from __future__ import annotations

import sys

from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-compute-cmvn-stats"


def main(argv=None) -> int:
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp and utt2spk")
    p.add_argument("cmvn_dir", metavar="CMVN_DIR", nargs="?", help="where cmvn_<data>.ark goes (default: DATA_DIR/data)")
    p.add_argument("--per-speaker", action="store_true", help="one entry per speaker of utt2spk (default: one 'global' entry)")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    args = p.parse_args(argv)
    setup_logging(verbose=args.verbose)

    def body() -> int:
        from speechkit.features.cmvn_stats import compute_cmvn_stats

        scp = compute_cmvn_stats(args.data_dir, args.cmvn_dir, per_speaker=args.per_speaker)
        print(f"{PROG}: wrote {scp}")
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
