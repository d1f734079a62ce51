"""Resynthesize speech from discrete units: codebook inverter -> linear magnitude -> Griffin-Lim -> wav.

  speechkit-resynthesize --inverter-dir exp/inverter [--checkpoint NAME] --codes codes --out-dir DIR [--speaker S]
                         [--reference-dir DATA_DIR] [--utt-list F | --max-utts N] [--n-iter 60]

For each utterance of --codes (a '<utt> <code> <code> ...' table, speechkit-extract-units
OUT_DIR/codes) the trained inverter (speechkit-train inverter) predicts a linear magnitude
spectrogram (Tjandra et al. 2020, sec. 4) and fast Griffin-Lim (speechkit.decode.griffin_lim)
recovers a phase; the STFT parameters and sample rate are those of the spectrogram front end the
inverter was trained on (INVERTER_DIR/frontend.yaml, else the feats.yaml of its data.feats_dir, else
--stft-config). DIR gets:

  <utt>.wav    16-bit PCM at the front end's sample rate (16 kHz for conf/spectrogram.yaml),
               scaled down only if it would clip
  <utt>.png    log-magnitude spectrogram of the resynthesis, above that of the input utterance
               when --reference-dir has its (linear) spectrogram (skip with --no-png)
  wav.scp      '<utt> <path of the wav>' for every utterance written (Kaldi table)

With --reference-dir the output has exactly the reference's number of frames (and so its
duration); otherwise T' x upsample_ratio frames. --speaker picks the target voice of an inverter
trained on several voices (a name from INVERTER_DIR/speakers); a one-voice inverter needs none.

DIR is written as a whole: the files go to a temporary directory that replaces DIR only when every
utterance is done, so a failed or killed run leaves the previous DIR complete and untouched, and a
re-run leaves no wav of an earlier one behind; the previous DIR is kept as DIR/.backup/N. DIR may
not be, contain or lie inside --codes, --reference-dir (or its spectrogram arks), --utt-list or
--stft-config, nor be or contain --inverter-dir (inside it is fine); an existing file as DIR is an
error. Both are checked before any work.

Example:
  speechkit-resynthesize --inverter-dir exp/zs/inverter --codes exp/zs/units/test/codes \\
      --out-dir exp/zs/resynth/test --reference-dir dump/spectrogram/test --max-utts 10
"""
from __future__ import annotations

import logging
import sys

from speechkit.inference.units2speech import resynthesize
from speechkit.utils.cli import add_model_args, make_parser, nonnegative_float, run_main, setup_logging

PROG = "speechkit-resynthesize"
log = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    add_model_args(p, option="--inverter-dir", help="inverter experiment dir", metavar="DIR")
    p.add_argument("--codes", required=True, metavar="FILE", help="'<utt> <code> ...' table")
    p.add_argument("--out-dir", "--out_dir", dest="out_dir", required=True, metavar="DIR",
                   help="output directory (replaced as a whole; the previous one kept as DIR/.backup/N)")
    p.add_argument("--speaker", default=None, metavar="S", help="target voice (a name in INVERTER_DIR/speakers)")
    p.add_argument("--reference-dir", "--reference_dir", dest="reference_dir", default=None, metavar="DATA_DIR",
                   help="data dir with the linear spectrograms of the same utterances (for the plots and the length)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--utt-list", "--utt_list", dest="utt_list", default=None, metavar="F",
                   help="resynthesize only these utterances (first field of each line)")
    g.add_argument("--max-utts", "--max_utts", dest="max_utts", type=int, default=0, metavar="N",
                   help="resynthesize only the first N utterances in C order (0 = all)")
    p.add_argument("--n-iter", "--n_iter", dest="n_iter", type=int, default=60, help="Griffin-Lim iterations (default: 60)")
    p.add_argument("--momentum", type=nonnegative_float, default=0.99,
                   help="fast Griffin-Lim momentum, a finite number >= 0 (0 = plain Griffin-Lim; above 1 it can be "
                        "unstable; default: 0.99)")
    p.add_argument("--seed", type=int, default=0, help="seed of Griffin-Lim's random initial phases (default: 0)")
    p.add_argument("--stft-config", "--stft_config", dest="stft_config", default=None, metavar="YAML",
                   help="spectrogram front-end config, if the inverter dir does not record one")
    p.add_argument("--no-png", "--no_png", dest="png", action="store_false", help="do not plot spectrograms")
    p.add_argument("--log-file", default=None, help="also append the log here")
    return p


def _run(args) -> int:
    setup_logging(args.log_file, inputs={"--codes": args.codes, "--utt-list": args.utt_list,
                                         "--stft-config": args.stft_config, "--inverter-dir": args.inverter_dir},
                  input_dirs={"--reference-dir": args.reference_dir}, output_dirs={"--out-dir": args.out_dir})
    resynthesize(args.inverter_dir, args.codes, args.out_dir, checkpoint=args.checkpoint, speaker=args.speaker,
                 reference_dir=args.reference_dir, utt_list=args.utt_list, max_utts=args.max_utts,
                 n_iter=args.n_iter, momentum=args.momentum, seed=args.seed, stft_config=args.stft_config,
                 png=args.png, log=log)
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_main(PROG, lambda: _run(args), parser=parser, flags={"model_dir": "--inverter-dir"})


if __name__ == "__main__":
    sys.exit(main())
