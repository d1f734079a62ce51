"""Extract the discrete units (or the continuous encoder output z) of a trained VQ-VAE, in the ZeroSpeech
2019 submission layout.

DATA_DIR holds features of the kind the model was trained on (feats.scp; cmvn.scp when it was trained
with CMVN). Each utterance is encoded as in training, over overlapping windows of the training crop,
each code frame taken from the window it is most central in (--window, --hop; --window 0: whole).

OUT_DIR (written whole: it replaces an earlier one, kept as OUT_DIR/.backup/N, once complete):
  <utt>.txt    one line per frame: its code's codebook vector (--unit-format codebook), its one-hot
               code (onehot), or with --aux the continuous z; for speechkit-score-abx / -score-bitrate
  codes        '<utt> <code> <code> ...' (the inverter's input)
  frame_shift  seconds per line of <utt>.txt: the model's stride x the features' frame shift
  units.yaml   model, checkpoint, K, De, stride, kind, phases, utterances

--aux --phases N: z every stride/N input frames (N shifted copies of the input, interleaved; nothing
interpolated); codes stay at the model's stride. OUT_DIR may not overlap what the tool reads (it may
lie inside --model-dir). Details: speechkit.inference.speech2units; the measurements behind windows and phases:
egs/zerospeech2019/README.md.

Example:
  speechkit-extract-units --model-dir exp/zs_tr/vqvae dump/mfcc/test exp/zs_tr/units/test --nj 2
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from speechkit.inference.speech2units import UNIT_FORMATS, UnitExtractor, check_extraction_options, extract_units
from speechkit.utils.cli import add_model_args, make_parser, run_main, setup_logging
from speechkit.utils.outputs import check_output_dir, replace_dir

PROG = "speechkit-extract-units"
log = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp (and cmvn.scp)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="where the <utt>.txt files, codes, frame_shift go")
    add_model_args(p, help="VQ-VAE experiment dir", metavar="DIR")
    p.add_argument("--unit-format", "--unit_format", dest="unit_format", choices=UNIT_FORMATS, default="codebook",
                   help="a code frame as its codebook vector (De numbers) or one-hot (K numbers) "
                        "(default: %(default)s)")
    p.add_argument("--aux", action="store_true",
                   help="write the continuous encoder output z per frame instead of the code")
    p.add_argument("--phases", default="1", metavar="N|all",
                   help="with --aux: z every stride/N input frames (N divides the stride; all: every "
                        "input frame) (default: 1, the code rate)")
    p.add_argument("--nj", type=int, default=1, help="parallel worker processes (default: 1)")
    p.add_argument("--window", type=int, default=None, metavar="N",
                   help="windows of N input frames, a multiple of the stride; 0: whole utterances "
                        "(default: the model's training crop)")
    p.add_argument("--hop", type=int, default=None, metavar="N",
                   help="input frames between window starts, a multiple of the stride (default: half "
                        "the window)")
    p.add_argument("--batch-frames", type=int, default=20000, metavar="N",
                   help="input frames per encoder batch (default: 20000)")
    p.add_argument("--log-file", default=None, help="also append the log here")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def _run(args) -> int:
    setup_logging(args.log_file, args.verbose, input_dirs={"DATA_DIR": args.data_dir},
                  output_dirs={"OUT_DIR": args.out_dir})
    check_extraction_options(window=args.window, hop=args.hop, phases=args.phases, nj=args.nj,
                             batch_frames=args.batch_frames)
    data_dir, out_dir = Path(args.data_dir), Path(args.out_dir)
    extractor = UnitExtractor.from_pretrained(
        args.model_dir, args.checkpoint, window=args.window, hop=args.hop,
        phases=args.phases, aux=args.aux, unit_format=args.unit_format)
    check_output_dir(out_dir, inputs=[("DATA_DIR", data_dir), *extractor.read_paths(data_dir)], option="OUT_DIR",
                     experiment_dirs={"--model-dir": args.model_dir} if Path(args.model_dir).is_dir() else None)
    t0 = time.time()
    with replace_dir(out_dir) as tmp:
        info = extract_units(extractor, data_dir, tmp, nj=args.nj, batch_frames=args.batch_frames)
    log.info("wrote %s: %d utterances, %d %s frames (%g s each), %d of %d codes used, in %.1f s", out_dir,
             info["num_utts"], info["num_frames"], "z" if args.aux else args.unit_format, info["frame_shift"],
             info["codes_used"], info["codebook_size"], time.time() - t0)
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_main(PROG, lambda: _run(args), parser=parser)


if __name__ == "__main__":
    sys.exit(main())
