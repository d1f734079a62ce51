"""Extract discrete units with a trained VQ-VAE, in the ZeroSpeech 2019 submission layout.

  speechkit-extract-units --model-dir exp/vqvae [--checkpoint NAME] DATA_DIR OUT_DIR
                          [--unit-format codebook|onehot] [--aux [--phases N|all]] [--nj N]

DATA_DIR holds features of the kind the model was trained on (feats.scp; cmvn.scp when the model
was trained with CMVN: per-speaker stats of DATA_DIR itself for data.cmvn=speaker, the training
set's global stats for data.cmvn=global). Every utterance is encoded as in training: over
overlapping windows of the training crop (the model's data.crop_frames; --window N for another
length, --hop for the step, half a window by default), each code frame taken from the window it is
most central in (on unseen TIMIT speakers this moved 8.5 % of the codes and lowered the no-context
ABX from 28.34 to 28.16 %, egs/zerospeech2019/README.md); --window 0 encodes each utterance whole
(so does a model trained without crops). OUT_DIR gets:

  <utt>.txt    one line per code frame: with --unit-format codebook (default) the codebook vector
               e_k of the frame's code k (De numbers, as ZeroSpeech 2019 VQ submissions wrote
               them), with --unit-format onehot the one-hot code (K numbers, 0 or 1); with --aux
               the continuous encoder output z (De numbers) instead -- ZeroSpeech 2019 'test' and
               'auxiliary_embedding' files, readable by speechkit-score-abx / -score-bitrate.
               Both unit formats have one distinct line per code, so the same bitrate; their ABX
               differs (cosine distances between codebook vectors are graded, between one-hot
               rows they are all equal).
  codes        Kaldi text table '<utt> <code> <code> ...' (the inverter's input). It has no .txt
               suffix, so the scoring tools, which read every *.txt file, do not take it for an
               utterance.
  frame_shift  seconds per code frame: model.stride x the features' frame shift (0.04 for stride
               4 on 10 ms frames); code i covers input frames [i*stride, (i+1)*stride); with
               --phases N, stride / N x the features' frame shift
  units.yaml   what produced them (model, checkpoint, K, De, stride, kind, phases, utterances)

With --aux --phases N the continuous z is written every stride / N input frames instead of once per
code frame: the encoder runs on N copies of the input shifted by stride / N frames each and the
outputs are interleaved (shift-and-stitch, speechkit.models.vqvae.encode_phases; --phases all = z
every input frame). Every row is an encoder output, nothing is interpolated; the codes file then
holds the code of every such row. On unseen TIMIT speakers z every 10 ms instead of 40 ms lowered
the no-context ABX of the recipe's default model from 24.79 to 23.09 % (egs/zerospeech2019/README.md).
Codes stay at the model's stride (--phases > 1 needs --aux): their bitrate would grow N-fold.

OUT_DIR is written as a whole: the files go to a temporary directory that replaces OUT_DIR only
when every utterance is done, so a failed or killed run leaves an earlier OUT_DIR untouched; the
earlier OUT_DIR is kept as OUT_DIR/.backup/N. OUT_DIR may not be, contain or lie inside DATA_DIR,
the model's training data dir or a file the tool reads, nor be or contain --model-dir (it may lie
inside it: exp/vqvae/units/test); an existing file as OUT_DIR is an error. Both are checked before
any work, as are the options (--nj, --batch-frames, --window, --hop).

Errors naming the utterance: NaN/Inf in its features, fewer frames than the total stride.

Example:
  speechkit-extract-units --model-dir exp/zs_tr/vqvae dump/mfcc/test exp/zs_tr/units/test --nj 2
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from speechkit.tasks.units import UNIT_FORMATS, UnitExtractor, check_extraction_options, extract_units
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
                   help="how a code frame is written: codebook (its codebook vector, De numbers; the ZeroSpeech "
                        "2019 submission form) or onehot (K numbers, 0 or 1) (default: %(default)s)")
    p.add_argument("--aux", action="store_true",
                   help="write the continuous encoder output z per frame instead of the code")
    p.add_argument("--phases", default="1", metavar="N|all",
                   help="with --aux: write z every stride/N input frames by encoding N input shifts and "
                        "interleaving them (shift-and-stitch; N divides the stride, 'all' = the stride: z every "
                        "input frame). Default 1: z at the code rate")
    p.add_argument("--nj", type=int, default=1, help="parallel worker processes (default: 1)")
    p.add_argument("--window", type=int, default=None, metavar="N",
                   help="encode over overlapping windows of N input frames (a multiple of the stride), each code "
                        "frame taken from the window it is most central in; 0 = each utterance whole. Default: "
                        "the model's training crop (data.crop_frames, rounded down to the stride; whole "
                        "utterances for a model trained without crops), so that extraction sees what training saw")
    p.add_argument("--hop", type=int, default=None, metavar="N",
                   help="with --window: input frames between window starts, 1 <= N <= window, a multiple of "
                        "the stride (default: half the window)")
    p.add_argument("--batch-frames", type=int, default=20000, metavar="N",
                   help="input frames per encoder batch (default: 20000)")
    p.add_argument("--log-file", default=None, help="also append the log here")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def _run(args) -> int:
    setup_logging(args.log_file, args.verbose, input_dirs={"DATA_DIR": args.data_dir})
    check_extraction_options(window=args.window, hop=args.hop, phases=args.phases, nj=args.nj,
                             batch_frames=args.batch_frames, cli=True)
    data_dir, out_dir = Path(args.data_dir), Path(args.out_dir)
    extractor = UnitExtractor.from_pretrained(
        args.model_dir, args.checkpoint, option="--model-dir", window=args.window, hop=args.hop,
        phases=args.phases, aux=args.aux, unit_format=args.unit_format, cli=True)
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
    args = build_parser().parse_args(argv)
    return run_main(PROG, lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
