"""Synthesize WORLD features (and waveforms) from label vectors with a trained acoustic model.

  speechkit-tts-synthesize --model-dir EXP [--checkpoint best|latest|avgN|NAME|PATH] [--num-wavs N] [--nj N]
                           [--speaker-embeddings SCP] [--speaker SPK] DATA_DIR OUT_DIR

Runs every utterance of DATA_DIR/labels.scp (float32 (T, D) label vectors, speechkit-make-labels)
through the acoustic model trained in EXP (speechkit-train salad | musa_rnn): the whole utterance
at once, the MUSA-RNN from zero state and SALAD from position 0 (Pascual et al. 2018). The
prediction is denormalised with the model's min-max statistics and the V/UV column is thresholded
to 0/1 at 0.5. OUT_DIR gets:

  feats.scp, feats.ark   predicted WORLD features (T, 43) [mcep 40 | lf0 | vuv | bap], one frame per label frame
  utt2num_frames         frames per utterance
  frame_shift            seconds per frame (frame_period of feats.yaml / 1000)
  feats.yaml             the WORLD config of the training data (EXP/feats.yaml, else data.train_dir/feats.yaml)
  wav/<utt>.wav          with --num-wavs N: the first N utterances (C order) through world_synthesize
                         (16-bit PCM, scaled down only if it would clip), wav/wav.scp listing them
  wav/<utt>.png          the spectrogram of each wav (none for a wav shorter than its 25 ms analysis
                         window: a warning names those utterances)

A speaker-conditioned model (trained with data.speaker_embeddings; Hemati & Borth 2021, sec. 2.1)
gets each label frame's speaker vector appended, from --speaker-embeddings (default: the scp the
model was trained with): with --speaker SPK every utterance in SPK's voice, else each utterance
in its own speaker's voice (DATA_DIR/utt2spk). A speaker the model was never trained on
(not in EXP/speakers) or without a vector in the scp is an error naming it; nothing is written.

OUT_DIR is a feature dir for speechkit-score-mcd REF OUT_DIR. It is written as a whole: every file
(the --nj vocoding jobs' wavs included) goes to a temporary directory that replaces OUT_DIR only when
all are done, so a failed or killed run leaves the previous OUT_DIR complete and untouched, and a
re-run leaves no file of an earlier one behind; the previous OUT_DIR is kept as OUT_DIR/.backup/N.
OUT_DIR may not be, contain or lie inside DATA_DIR, the label arks, the checkpoint or the speaker
vectors, nor be or contain EXP (EXP/synth/test is fine); an existing file as OUT_DIR is an error.
Options and OUT_DIR are checked before any work. An utterance whose labels have the wrong dimension
or hold NaN/Inf is an error naming it.

Example:
  speechkit-tts-synthesize --model-dir exp/S/salad_small --num-wavs 3 data/S/test_labels exp/S/salad_small/synth_test
"""
from __future__ import annotations

import logging
import sys

from speechkit.decode.vocode import world_vocode as vocode
from speechkit.inference.text2speech import synthesize_label_dir
from speechkit.utils.cli import add_model_args, make_parser, run_main, setup_logging

PROG = "speechkit-tts-synthesize"
log = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="dir with labels.scp")
    p.add_argument("out_dir", metavar="OUT_DIR", help="output feature dir")
    add_model_args(p, help="experiment dir of speechkit-train salad | musa_rnn", default="best")
    p.add_argument("--num-wavs", "--num_wavs", dest="num_wavs", type=int, default=0, metavar="N",
                   help="also vocode the first N utterances to OUT_DIR/wav/<utt>.wav (default: 0)")
    p.add_argument("--speaker-embeddings", "--speaker_embeddings", dest="speaker_embeddings", default=None,
                   metavar="SCP", help="speaker -> vector scp for a speaker-conditioned model "
                                       "(default: data.speaker_embeddings of its training config)")
    p.add_argument("--speaker", default=None, metavar="SPK",
                   help="synthesize every utterance in this trained speaker's voice (default: each "
                        "utterance's own speaker from DATA_DIR/utt2spk)")
    p.add_argument("--nj", type=int, default=1, metavar="N", help="parallel processes for vocoding (default: 1)")
    p.add_argument("--log-file", default=None, help="also append the log here")
    return p


def _run(args) -> int:
    setup_logging(args.log_file, inputs={"--speaker-embeddings": args.speaker_embeddings, "--model-dir": args.model_dir},
                  input_dirs={"DATA_DIR": args.data_dir}, output_dirs={"OUT_DIR": args.out_dir})
    # the vocoder is looked up here, at call time: a test replaces this module's vocode
    synthesize_label_dir(args.model_dir, args.data_dir, args.out_dir, checkpoint=args.checkpoint,
                         speaker_embeddings=args.speaker_embeddings, speaker=args.speaker, num_wavs=args.num_wavs,
                         nj=args.nj, vocoder=vocode, log=log)
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_main(PROG, lambda: _run(args), parser=parser)


if __name__ == "__main__":
    sys.exit(main())
