"""Copy synthesis of a feature dir (WORLD, or Griffin-Lim from log-mel): a data dir of the vocoded waveforms.

  speechkit-vocode [--nj N] [--spectrograms N] [--griffin-lim-iters N] FEATS_DIR OUT_DIR

Every utterance of FEATS_DIR/feats.scp goes to OUT_DIR/wav/<utt>.wav (16-bit PCM at the config's
sample rate, scaled down only if it would clip), by the vocoder FEATS_DIR/feats.yaml calls for:
  - WORLD features (type world, or a config with mcep_dim; speechkit-compute-feats with a WORLD
    config, or speechkit-tts-synthesize: (T, 43) [mcep 40 | lf0 | vuv | bap]): WORLD synthesis
    (pyworld; speechkit.features.world);
  - log-mel features (type logmel; conf/logmel.yaml, the targets of the tacotron2 task):
    mel-filterbank inversion + Griffin-Lim (speechkit.decode.griffin_lim.mel_to_waveform, the
    vocoder of the tacotron2 syntheses; --griffin-lim-iters iterations, seed 0), giving
    hop_length * (T - 1) samples.
OUT_DIR is then a Kaldi data dir of those waveforms -- wav.scp, and utt2spk / spk2utt / text /
utt2lang copied from FEATS_DIR where present -- ready for speechkit-embed-speakers.

Used by egs/vctk_continual for the speaker verifier of Hemati & Borth (2021), section 2.3: the
ground-truth utterances pass through the same vocoder as the synthesized ones (WORLD for salad,
Griffin-Lim for tacotron2), so that the verifier does not learn the vocoder's traces as a
speaker cue.

--spectrograms N also writes wav/<utt>.png for the first N utterances (C order; none for a wav
shorter than the 25 ms analysis window, with a warning naming it). An utterance that cannot be
synthesized is an error naming it.

OUT_DIR is written as a whole: every file (the --nj jobs' wavs included) goes to a temporary
directory that replaces OUT_DIR only when all are done, so a failed or killed run leaves the
previous OUT_DIR complete and untouched, and a re-run leaves no wav of an earlier one behind. The
previous OUT_DIR is deleted, not backed up, when an earlier speechkit-vocode run wrote it (its
.speechkit-output marker): copy synthesis is derived data that a re-run of the same inputs gives again
(the vctk recipe re-runs it at every stage 5), and backups of it would pile up. Any other existing
directory is kept in OUT_DIR/.backup/N, never deleted. OUT_DIR may not be, contain or lie inside FEATS_DIR
or the feature arks it reads; an existing file as OUT_DIR is an error. Both, and the options, are
checked before any work.

Example:
  speechkit-vocode --nj 2 data/train data/train_world
"""
from __future__ import annotations

import logging

from speechkit.decode.vocode import vocode_feature_dir
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-vocode"
log = logging.getLogger(PROG)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("feats_dir", metavar="FEATS_DIR", help="dir with feats.scp and feats.yaml (WORLD or logmel)")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="data dir to write (wav.scp + wav/); replaced as a whole (derived data: no backup)")
    parser.add_argument("--nj", type=int, default=1, help="worker processes (default: 1)")
    parser.add_argument("--spectrograms", type=int, default=0, metavar="N",
                        help="spectrogram PNGs of the first N utterances, N >= 0 (default: 0)")
    parser.add_argument("--griffin-lim-iters", "--griffin_lim_iters", dest="griffin_lim_iters", type=int, default=60,
                        metavar="N", help="Griffin-Lim iterations for log-mel features (default: 60)")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file, input_dirs={"FEATS_DIR": args.feats_dir}, output_dirs={"OUT_DIR": args.out_dir})
        vocode_feature_dir(args.feats_dir, args.out_dir, nj=args.nj, spectrograms=args.spectrograms,
                           griffin_lim_iters=args.griffin_lim_iters, logger=log)
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    raise SystemExit(main())
