"""ZeroSpeech 2019 bitrate of a frame-level encoding: B = (N / D) * H.

N is the number of frames (lines) over the files, D their total duration in seconds and
H = -sum_s p_s log2 p_s the entropy of the frame vectors, each distinct vector a symbol; N and
the symbol counts are pooled over all files.

FEATURE_DIR holds feats.scp, one <utt>.txt per utterance (one frame per line) or one <utt>.npy per
utterance. The files are those of --file-list (ZeroSpeech's bitrate_filelist.txt format: '<utt>[.txt]
[seconds]' per line), else every file in FEATURE_DIR. The duration D comes from --durations (a
'<utt> <seconds>' table, e.g. a data dir's utt2dur) when given, else from the file list's second
column when it has one, else it is N * frame_shift (then B = H / frame_shift). A first column that is
each frame's time (ZeroSpeech 2017 layout) is left out as score-abx does (--timestamps auto|yes|no).

The last line of stdout is the figure, e.g. 'bitrate: 167.02 bits/s'.

Example:
  speechkit-score-bitrate exp/vqvae/units/test --durations data/test/utt2dur --json exp/vqvae/bitrate.json
"""
from __future__ import annotations

import json
import logging
import sys

from speechkit.features.io import feature_dir_inputs
from speechkit.scoring.bitrate import bitrate, read_durations, read_file_list
from speechkit.scoring.feature_dir import MAX_NAMED, TIMESTAMPS, FeatureDir
from speechkit.utils.cli import make_parser, positive_float, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write
from speechkit.utils.outputs import check_output_files

PROG = "speechkit-score-bitrate"
logger = logging.getLogger(PROG)


def _and_more(missing: list[str], total: int, what: str) -> str:
    """'' for one missing file, else '; N of the M files WHAT: a, b, c, ...' (the first MAX_NAMED)."""
    if len(missing) < 2:
        return ""
    return (f"; {len(missing)} of the {total} files {what}: " + ", ".join(missing[:MAX_NAMED])
            + (", ..." if len(missing) > MAX_NAMED else ""))


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("feature_dir", metavar="FEATURE_DIR", help="feats.scp, <utt>.txt or <utt>.npy files")
    parser.add_argument("--file-list", metavar="F", default=None,
                        help="score only these utterances ('<utt>[.txt] [seconds]' per line); "
                             "every one must exist in FEATURE_DIR")
    parser.add_argument("--durations", metavar="F", default=None,
                        help="'<utt> <seconds>' table (e.g. utt2dur) giving D")
    parser.add_argument("--frame-shift", type=positive_float, default=None, metavar="S",
                        help="seconds per frame, used for D without durations "
                             "(default: FEATURE_DIR/frame_shift if present, else the step of a timestamp "
                             "column, else 0.01)")
    parser.add_argument("--timestamps", choices=TIMESTAMPS, default="auto",
                        help="is the first number of each frame its time (ZeroSpeech 2017 layout)? auto: when it "
                             "increases at a constant step in every file (left out, with a warning); yes; no: "
                             "every column is a symbol's part (default: %(default)s)")
    parser.add_argument("--json", metavar="OUT", default=None, help="also write the result as JSON")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        check_output_files({"--json": args.json, "--log-file": args.log_file}, inputs=feature_dir_inputs(args.feature_dir)
                           + [("--file-list", args.file_list), ("--durations", args.durations)],
                           input_dirs={"FEATURE_DIR": args.feature_dir})
        setup_logging(args.log_file)
        fdir = FeatureDir(args.feature_dir, timestamps=args.timestamps, frame_shift=args.frame_shift)
        fdir.resolved_frame_shift()  # a bad FEATURE_DIR/frame_shift: an error before any reading
        durations, source = None, None
        if args.file_list:
            utts, list_durs = read_file_list(args.file_list)
            missing = fdir.missing(utts)
            if missing:
                raise DataError(f"{args.file_list}: '{missing[0]}' is not in {fdir.source(missing[0])}"
                                + _and_more(missing, len(utts), "are not in FEATURE_DIR"))
            if list_durs is not None:
                durations, source = list_durs, "file-list"
        else:
            utts = fdir.utts
        if args.durations:
            durations, source = read_durations(args.durations), "durations"
        features = fdir.load_all(utts)
        frame_shift = fdir.resolved_frame_shift()
        if durations is not None:
            missing = [u for u in utts if u not in durations]
            if missing:
                where = args.durations or args.file_list
                raise DataError(f"{where}: no duration for '{missing[0]}'" + _and_more(missing, len(utts), "have none"))
        res = bitrate(features, durations, frame_shift, duration_source=source)
        if args.json:
            out = res.to_dict()
            out.update(feature_dir=str(args.feature_dir), frame_shift=frame_shift)
            with atomic_write(args.json) as f:
                json.dump(out, f, indent=2)
                f.write("\n")
        print(f"files: {res.n_files}, frames: {res.n_frames}, duration: {res.duration:.2f} s ({res.duration_source})")
        print(f"symbols: {res.n_symbols}, entropy: {res.entropy:.4f} bits/frame")
        print(res.summary())
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
