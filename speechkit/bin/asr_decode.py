"""Decode a data directory with a trained streaming RNN-T (speechkit-train rnnt).

  speechkit-asr-decode --model-dir EXP DATA_DIR OUT_DIR [--search greedy|beam] [--beam N] [--length-norm]
                       [--lid-free | --oracle-lid] [--switch-off-tau T --switch-off-threshold S]
                       [--blank-penalty P] [--chunk-frames N] [--nj N [--job J | --merge-only]]

DATA_DIR needs feats.scp (the same frontend as the training data); utt2lang is needed for
--oracle-lid (the default) unless the model is 'vanilla'. Features are normalised with the
training set's global CMVN stats and stacked as in training (both from the model's saved config),
then decoded chunk by chunk (--chunk-frames feature frames at a time, 0 = the whole utterance
in one chunk; the result is the same for any chunking, only the timing differs).

Modes (Joshi et al., Interspeech 2021, section 4.2):
  --oracle-lid  decode with the known language's softmax (utt2lang); the default. Utterances of a
                language the model does not have are skipped and counted (e.g. a monolingual model
                on a multilingual test set). A vanilla model ignores the language; its 'chosen'
                language is the one whose units make up most of the hypothesis (the script).
  --lid-free    multisoftmax_lid models: one decoder per language on the shared encoder, the
                language with the highest average LID posterior wins. With --switch-off-tau T and
                --switch-off-threshold S, the paper's early switch-off (section 6.3, eq. 1):
                decoder l stops once t > T encoder frames (30 ms each) and
                sum_t' log P_t'(l) < max_l' sum_t' log P_t'(l') - S (nats; the max over the
                decoders still running). --switch-off-rule posterior is the recipe's own variant,
                not in the paper: it stops decoder l once t > T and (1/t) sum_t' P_t'(l) < S, the
                best running decoder never stopping.

OUT_DIR receives (each written atomically once every part is done):
  text               hypotheses, Kaldi text (an empty hypothesis is the id alone)
  utt2lang           the chosen language per utterance
  lid_posteriors     models with an LID head: '<utt> [ P(l0) P(l1) ... ]' (Kaldi text vectors,
                     utterance-averaged frame posteriors, languages in decode_stats.json order)
  results.jsonl      per utterance: every decoder's hypothesis and score, decoder frames, switch-off
                     frame, LID posteriors, RTF
  decode_stats.json  options, counts (decoded, skipped by reason), T_avg (average active decoders
                     per encoder frame, 1..L), RTF = decode seconds / audio seconds (--num-threads
                     threads per job, 1 = one core), the checkpoint used
  log/decode.J.log   per-job logs (RTF of each job); parts/ the per-job results
A part whose inputs (utterances, features, checkpoint, options) are unchanged is not decoded
again (--force to redo), so re-running is cheap and an interrupted run continues.

Errors (exit 1, nothing merged): a feature matrix with a NaN or infinite value (names the
utterance, its feats.scp entry and the frame; decoded, it would be an empty hypothesis); OUT_DIR
that is, contains or lies inside DATA_DIR, the checkpoint or EXP/checkpoints, or is or contains
EXP (EXP/decode_test is fine), or holds a data dir's files or a text/utt2lang no decode wrote;
--device cuda without a CUDA device. The JSON files hold no NaN/Infinity (an infinite
--switch-off-threshold is written "inf").

Examples:
  speechkit-asr-decode --model-dir exp/rnnt_multisoftmax data/test exp/rnnt_multisoftmax/decode_test
  speechkit-asr-decode --model-dir exp/rnnt_multisoftmax_lid --lid-free --switch-off-tau 30 \\
      --switch-off-threshold 20 --nj 2 data/test exp/rnnt_multisoftmax_lid/decode_test_lidfree_t30_s20
"""
from __future__ import annotations

import logging
import sys

from speechkit.bin._decode_options import MODE_FLAGS, add_decode_options, decode_options
from speechkit.inference.parts import LOG_FORMAT
from speechkit.inference.speech2text_dir import decode_data_dir
from speechkit.utils.cli import ConfigError, add_model_args, make_parser, run_main, setup_logging

PROG = "speechkit-asr-decode"
logger = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp (and utt2lang for --oracle-lid)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="where text, utt2lang, decode_stats.json, ... go")
    add_model_args(p, help="experiment dir of speechkit-train rnnt")
    add_decode_options(p)  # --units-dir ... --num-threads, with --nj, --job | --merge-only, --max-jobs, --force
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def _body(args) -> int:
    if args.nj < 1:
        raise ConfigError(f"--nj must be >= 1, got {args.nj}")
    if args.job is not None and not 1 <= args.job <= args.nj:
        raise ConfigError(f"--job must be in 1..{args.nj}, got {args.job}")
    merged = decode_data_dir(args.model_dir, args.checkpoint, args.data_dir, args.out_dir, decode_options(args),
                             nj=args.nj, job=args.job, merge_only=args.merge_only, force=args.force,
                             max_jobs=args.max_jobs, logger=logger)
    if merged is not None:
        print(f"{PROG}: {merged[1]}")
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.job is not None:  # a job's log is its stdout (run.pl / slurm.pl capture it)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout, force=True,
                            format=LOG_FORMAT)
    else:
        setup_logging(verbose=args.verbose)
    return run_main(PROG, lambda: _body(args), parser=parser, flags=MODE_FLAGS)


if __name__ == "__main__":
    sys.exit(main())
