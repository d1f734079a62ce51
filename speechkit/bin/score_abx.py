"""ZeroSpeech ABX error of frame-level features on an ABX item file.

Features: FEATURE_DIR holds feats.scp (Kaldi ark/scp), one <utt>.txt per utterance (one frame
per line, numbers separated by spaces) or one <utt>.npy per utterance ((frames, dim) array); feats.scp
wins when present. Frame i lies at time (i + 0.5) * frame_shift; an item's frames are those whose
time lies in [onset, offset].

--timestamps auto (default): a first column that is each frame's time (ZeroSpeech 2017's 'time f1 f2
...' lines: strictly increasing at a constant step in every file) is left out, with a warning, and its
step (seconds if below 1, else ms; it must match --frame-shift or FEATURE_DIR/frame_shift when given)
is the frame shift; --timestamps yes requires it, no scores every column as a feature. See
speechkit.scoring.feature_dir.

ITEM_FILE: '#file onset offset #phone prev-phone next-phone speaker' header, times in seconds
(speechkit-make-abx-items writes one from phone alignments).

Triplets (A, B, X): A and X one phone, B another, all three one context; --across (default):
A and B from one speaker, X from another; --within: all three from one speaker. Distance: DTW
over the frame distance, normalised by the path length (as ABXpy).

--convention says which ZeroSpeech edition's numbers the score compares with:
  zr2019 (default): ABXpy, as ZeroSpeech 2017 (track 1), 2019 and 2020 scored: d(A, X), scores
    averaged over contexts, then (A/B speaker, X speaker) pairs, then ordered phone pairs.
  zr2021: Libri-Light's ABX, as ZeroSpeech 2021 and later (abx-LS) score, computed as
    fastabx.zerospeech_abx does without subsampling: d(X, A), cells averaged over contexts and
    X speakers together, then A/B speakers, then phone pairs; frame times compared exactly. The
    official 2021 protocol subsamples cells (10 tokens, 5 X speakers); every triplet is scored here.
See speechkit.scoring.abx for the details.

Items with no frame centre inside (phones shorter than a frame shift) take the frame(s) overlapping
them (--empty-items overlap, the default), so that systems at different frame rates are scored on the
same items and triplets; --empty-items drop drops them (ABXpy keeps them with an infinite distance).
The report prints the triplet count and how many items needed the rule.

--bootstrap N adds a 95 % percentile interval by resampling SPEAKERS with replacement (N resamples,
--bootstrap-seed S): each speaker drawn m times counts m times as distinct speakers, never an across
pair with itself; see speechkit.scoring.abx.bootstrap_interval. Across speakers, a resample that
draws one speaker only has no pair and is left out: the interval line says how many of the N were
used. Fewer than 40 usable resamples is an error naming --bootstrap (a 95 % percentile interval
needs one replicate beyond each bound: 2 / (1 - 0.95) = 40); with two speakers about half are
left out, and every usable one is the original pair, which the line says (the interval cannot vary).

--paired-with REF_DIR (with --bootstrap N) also scores REF_DIR on the same items and prints the
difference FEATURE_DIR - REF_DIR with a paired 95 % interval: both systems on each speaker resample,
so that the speaker sampling they share cancels (speechkit.scoring.abx.paired_bootstrap_difference).
An interval that excludes 0 is a gain or loss beyond speaker-sampling noise. No verdict is drawn
from fewer than 40 usable resamples, nor when every usable resample is the same speakers (an error).

--device: cpu, cuda or cuda:N; one that does not exist or cannot run here is an error naming it.
--num-threads N: CPU threads (default: torch's, i.e. OMP_NUM_THREADS or the cores).

The last line of stdout is the figure, e.g. 'ABX error (across speakers): 21.34 %'.

Examples:
  speechkit-score-abx exp/vqvae/units/test data/test/abx.item --distance cosine --json exp/vqvae/abx.json
  speechkit-score-abx exp/a/units/test data/test/abx.item --bootstrap 1000 --paired-with exp/b/units/test
"""
from __future__ import annotations

import json
import sys

from speechkit.features.io import feature_dir_inputs
from speechkit.scoring.abx import CONVENTIONS, DEFAULT_TOLERANCE, DISTANCES, EMPTY_ITEM_RULES
from speechkit.scoring.abx_report import score_abx_dir
from speechkit.scoring.feature_dir import TIMESTAMPS
from speechkit.utils.cli import finite_float, make_parser, run_main, setup_logging
from speechkit.utils.fileio import atomic_write
from speechkit.utils.outputs import check_output_files

PROG = "speechkit-score-abx"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("feature_dir", metavar="FEATURE_DIR", help="feats.scp, <utt>.txt or <utt>.npy files")
    parser.add_argument("item_file", metavar="ITEM_FILE", help="ABX item file (ZeroSpeech/ABXpy format)")
    parser.add_argument("--distance", choices=DISTANCES, default="cosine",
                        help="frame distance: cosine (arccos(cos)/pi; continuous features), kl "
                             "(symmetrised KL; posteriorgrams), hamming (fraction of differing "
                             "coordinates; one-hot or discrete codes) (default: %(default)s)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--across", dest="mode", action="store_const", const="across",
                      help="A, B from one speaker, X from another (default)")
    mode.add_argument("--within", dest="mode", action="store_const", const="within",
                      help="A, B, X from one speaker")
    parser.set_defaults(mode="across")
    parser.add_argument("--frame-shift", type=finite_float, default=None, metavar="S",
                        help="seconds between frames (default: FEATURE_DIR/frame_shift if present, else the step of "
                             "a timestamp column, else 0.01)")
    parser.add_argument("--timestamps", choices=TIMESTAMPS, default="auto",
                        help="is the first number of each frame its time (ZeroSpeech 2017 layout)? auto: when it "
                             "increases at a constant step in every file (left out, with a warning); yes; no: "
                             "every column is a feature (default: %(default)s)")
    parser.add_argument("--no-normalize", dest="normalize", action="store_false",
                        help="use the total DTW path cost instead of dividing it by the path length "
                             "(the ZeroSpeech 2020 evaluation of the 2019 track does this for KL)")
    parser.add_argument("--tolerance", type=finite_float, default=DEFAULT_TOLERANCE, metavar="S",
                        help="seconds an item may end past the last frame of its file before it is an "
                             "error (feature extraction drops the last partial window) (default: %(default)s)")
    parser.add_argument("--empty-items", choices=EMPTY_ITEM_RULES, default="overlap",
                        help="an item with no frame centre inside: overlap (take the frame(s) overlapping it) or "
                             "drop (default: %(default)s)")
    parser.add_argument("--bootstrap", type=int, default=0, metavar="N",
                        help="add a 95 %% interval from N bootstrap resamples of the speakers (0 = none; "
                             "1000 is usual) (default: %(default)s)")
    parser.add_argument("--bootstrap-seed", type=int, default=0, metavar="S",
                        help="seed of the speaker resampling (default: %(default)s)")
    parser.add_argument("--paired-with", metavar="REF_DIR", default=None,
                        help="also score the features of REF_DIR on the same items and report FEATURE_DIR's error "
                             "minus REF_DIR's with a paired bootstrap interval (needs --bootstrap N)")
    parser.add_argument("--device", default="cpu",
                        help="torch device for the DTW (cpu, cuda, cuda:1 ...) (default: %(default)s)")
    parser.add_argument("--convention", choices=CONVENTIONS, default="zr2019",
                        help="zr2019: ABXpy's averaging (ZeroSpeech 2017/2019/2020); zr2021: Libri-Light's, as "
                             "fastabx (ZeroSpeech 2021 and later) (default: %(default)s)")
    parser.add_argument("--num-threads", type=int, default=None, metavar="N",
                        help="CPU threads (default: torch's thread count)")
    parser.add_argument("--json", metavar="OUT", default=None,
                        help="also write the result (score, triplet/cell counts, per phone pair) as JSON")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)

    def body() -> int:
        check_output_files({"--json": args.json, "--log-file": args.log_file}, inputs=[("ITEM_FILE", args.item_file)]
                           + feature_dir_inputs(args.feature_dir)
                           + (feature_dir_inputs(args.paired_with) if args.paired_with else []),
                           input_dirs={"FEATURE_DIR": args.feature_dir, "--paired-with": args.paired_with})
        setup_logging(args.log_file, args.verbose)
        rep = score_abx_dir(args.feature_dir, args.item_file, mode=args.mode, distance=args.distance,
                            frame_shift=args.frame_shift, normalize=args.normalize, tolerance=args.tolerance,
                            empty_items=args.empty_items, bootstrap=args.bootstrap,
                            bootstrap_seed=args.bootstrap_seed, paired_with=args.paired_with, device=args.device,
                            convention=args.convention, num_threads=args.num_threads, progress=sys.stderr.isatty(),
                            timestamps=args.timestamps)
        if args.json:
            with atomic_write(args.json) as f:
                json.dump(rep.to_dict(), f, indent=2)
                f.write("\n")
        print("\n".join(rep.lines()))
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
