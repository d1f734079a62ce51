"""Objective TTS scores of predicted WORLD features against natural ones: MCD, F0 RMSE, V/UV accuracy.

REF and HYP are feature dirs holding feats.scp (plus feats.yaml and frame_shift, as written by
speechkit-compute-feats and speechkit-tts-synthesize) or feats.scp files directly; the dir of an
scp file is searched for feats.yaml / frame_shift. Matrices have the WORLD layout
[mcep (mcep_dim, c0 first) | lf0 (natural log) | vuv | bap], mcep_dim and num_bap read from
feats.yaml (default 40 and 1: conf/world.yaml at 16 kHz); REF's and HYP's layouts must agree.
The two are frame-aligned (forced durations): frame counts must be equal for every utterance.
Every utterance of REF is scored and must exist in HYP; HYP's extra utterances are ignored.

  MCD (dB)      (10 sqrt(2) / ln 10) * mean over frames of ||mcep_ref - mcep_hyp||, without c0
                (mcep[1:], the usual figure) and with c0
  F0 RMSE (Hz)  over the frames voiced (vuv > 0.5) in both, F0 = exp(lf0)
  V/UV (%)      voicing agreement over all frames; beside it (report line 'V/UV: ...' and the
                JSON's vuv_* keys) the unvoiced class's recall and precision, the voiced recall,
                the balanced accuracy (mean of the two recalls) and the majority baseline (the
                accuracy of the better constant decision on the same frames), since outside
                silence most frames are voiced

All figures are pooled over all scored frames of all utterances; the JSON also has the mean of
per-utterance MCDs. With --mask-silence, frames whose time t * frame_shift lies inside a silence
phone of the alignments are left out (not zeroed as in musa_tts, which counts them as perfect).

--convention authors scores as the SALAD authors' evaluation code (santi-pdp/musa_tts,
eval_aco_epoch) does, for numbers to set beside the paper's:
  MCD (dB)      over all mcep_dim columns, c0 included
  F0 RMSE (Hz)  over every frame of the exp(lf0) contours (the reference's is interpolated)
  silence       with --mask-silence, silent frames are zeroed: kept in every denominator as
                perfect frames (distance 0, F0 error 0, voicing agreeing: unvoiced in both)
The default, --convention speechkit, is the list above.

The last line of stdout is the result, e.g.
  MCD 5.43 dB (with c0 6.10)  F0 RMSE 14.56 Hz  V/UV 94.5 %
or, with --convention authors,
  MCD 6.10 dB  F0 RMSE 20.31 Hz  V/UV 95.2 %  (authors' convention: c0 included, F0 over all frames, silence zeroed)
--per-utt writes '<utt> <frames> <mcd_db> <mcd_with_c0_db> <f0_rmse_hz|nan> <vuv_%>' lines (mcd_db,
f0_rmse_hz and vuv_% under --convention).

Example:
  speechkit-score-mcd data/M1/test_phones exp/salad_big/synth/test \\
      --mask-silence exp/align/test/phone_alignments --json exp/salad_big/scores.json
"""
from __future__ import annotations

import json
import sys

from speechkit.features.io import feature_dir_inputs
from speechkit.scoring.mcd import CONVENTIONS, report_lines, score_world_dirs, write_per_utt
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import atomic_write
from speechkit.utils.outputs import check_output_files

PROG = "speechkit-score-mcd"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("ref", metavar="REF", help="natural WORLD features: dir with feats.scp, or an scp file")
    parser.add_argument("hyp", metavar="HYP", help="predicted WORLD features: dir with feats.scp, or an scp file")
    parser.add_argument("--mask-silence", metavar="ALIGNMENTS", default=None,
                        help="phone_alignments file ('<utt> <start-s> <end-s> <phone>'): leave out the frames "
                             "inside silence phones")
    parser.add_argument("--silence-phones", metavar="P,...", default="sil",
                        help="comma-separated silence labels of ALIGNMENTS (default: %(default)s)")
    parser.add_argument("--convention", choices=CONVENTIONS, default="speechkit",
                        help="speechkit: c0 left out, F0 over frames voiced in both, silence left out; "
                             "authors: as musa_tts (c0 included, F0 over every frame, silence zeroed) "
                             "(default: %(default)s)")
    parser.add_argument("--json", metavar="OUT", default=None,
                        help="write every figure, the counts and per-utterance scores as JSON")
    parser.add_argument("--per-utt", metavar="OUT", default=None, help="write a per-utterance score table")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        check_output_files({"--json": args.json, "--per-utt": args.per_utt, "--log-file": args.log_file},
                           inputs=feature_dir_inputs(args.ref) + feature_dir_inputs(args.hyp)
                           + [("--mask-silence", args.mask_silence)],
                           input_dirs={"REF_DIR": args.ref, "HYP_DIR": args.hyp})
        setup_logging(args.log_file)
        res, layout, layout_src = score_world_dirs(args.ref, args.hyp, mask_silence=args.mask_silence,
                                                   silence_phones=args.silence_phones, convention=args.convention)
        if args.json:
            out = {"ref": str(args.ref), "hyp": str(args.hyp), "layout_source": layout_src,
                   "mask_silence": args.mask_silence, **res.to_dict()}
            with atomic_write(args.json) as f:
                json.dump(out, f, indent=2, ensure_ascii=False, allow_nan=False)
                f.write("\n")
        if args.per_utt:
            write_per_utt(args.per_utt, res)
        print("\n".join(report_lines(res, layout, masked=bool(args.mask_silence))))
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
