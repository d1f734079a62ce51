"""Frame-level linguistic label vectors (SALAD section 3.2) from phones, phone_info and alignments.

DATA_DIR holds `text` (phone tokens from speechkit-g2p), `phone_info`, `utt2num_frames` and
`frame_shift` of its WORLD features (5 ms); ALIGNMENTS is a phone_alignments file
('<utt> <start-s> <end-s> <phone>', `sil` segments inserted by the aligner). With --fit the label
front end (phone inventory, z-norm statistics, longest phone) is fitted on DATA_DIR and saved to
--frontend-dir (phones.txt, frontend.yaml); without it, it is loaded from there. Writes

  OUT_DIR/labels.scp, OUT_DIR/labels.ark   float32 (T, D) per utterance, T = utt2num_frames
  OUT_DIR/label_dim                        D

Models trained on the labels depend on the front end, so --fit never silently replaces one:
frontend.yaml records a content fingerprint of what it was fitted on (DATA_DIR's utt2spk, text,
phone_info and utt2num_frames, the ALIGNMENTS file, the frame shift). --fit into a --frontend-dir
fitted on the same content reuses it ("up to date", nothing rewritten: a recipe stage can be
re-run); one fitted on other data (or written by an older version, without a fingerprint) is an
error saying what changed, unless --overwrite: then it is re-fitted and the previous front end is
kept as DIR/.backup/N.

OUT_DIR is written as a whole (a temporary directory swapped in when every utterance is done; a
failed run leaves the previous OUT_DIR as it was; the previous labels are not kept, they are
re-derivable). OUT_DIR may not be, contain or lie inside DATA_DIR, ALIGNMENTS or --frontend-dir,
nor --frontend-dir (with --fit) overlap DATA_DIR or ALIGNMENTS; both are checked before any work.

The alignment may cover up to --tolerance frames more or fewer than utt2num_frames (the last
segment is stretched or cut); a larger difference, a phone outside the inventory, or aligned
phones that differ from `text` are errors. An utterance without alignment or frame count is left
out, counted and reported. See speechkit/text/labels.py for the features.

Example:
  speechkit-make-labels --fit --frontend-dir exp/frontend data/sp01/train exp/align/phone_alignments exp/labels/train
  speechkit-make-labels --frontend-dir exp/frontend data/sp01/test exp/align_test/phone_alignments exp/labels/test
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from speechkit.inference.frame_labels import DEFAULT_FRAME_SHIFT, make_labels
from speechkit.utils.cli import finite_float, make_parser, run_main, setup_logging

PROG = "speechkit-make-labels"
logger = logging.getLogger(PROG)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="phone data dir (text, phone_info, utt2num_frames)")
    parser.add_argument("alignments", metavar="ALIGNMENTS", help="phone_alignments file")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="where labels.scp/ark and label_dim go (replaced as a whole; not DATA_DIR)")
    parser.add_argument("--frontend-dir", required=True, metavar="DIR", help="label front end (written with --fit)")
    parser.add_argument("--fit", action="store_true",
                        help="fit the front end on DATA_DIR and save it to DIR; reuses DIR when it was fitted on "
                             "the same content, refuses one fitted on other data (see --overwrite)")
    parser.add_argument("--overwrite", action="store_true",
                        help="with --fit: re-fit a front end fitted on other data (the old one is kept in "
                             "DIR/.backup/N); models trained with the old one no longer match it")
    parser.add_argument("--frame-shift", type=finite_float, default=None, metavar="S",
                        help=f"seconds per frame (default: DATA_DIR/frame_shift, else {DEFAULT_FRAME_SHIFT})")
    parser.add_argument("--tolerance", type=int, default=2, metavar="N",
                        help="most frames by which the alignment may differ from utt2num_frames (default: 2)")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file, inputs={"ALIGNMENTS": args.alignments},
                      input_dirs={"DATA_DIR": args.data_dir, "--frontend-dir": args.frontend_dir},
                      output_dirs={"OUT_DIR": args.out_dir})
        if args.tolerance < 0:
            raise ValueError(f"--tolerance must be >= 0, got {args.tolerance}")
        res = make_labels(args.data_dir, args.alignments, args.out_dir, args.frontend_dir, fit=args.fit,
                          frame_shift=args.frame_shift, tolerance=args.tolerance, overwrite=args.overwrite, log=logger)
        print(f"{PROG}: {res['utterances']} utterances, {res['frames']} frames, label dim {res['dim']} -> "
              f"{Path(args.out_dir) / 'labels.scp'}" + (f"; {res['skipped']} left out" if res["skipped"] else ""))
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
