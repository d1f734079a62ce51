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
                --switch-off-threshold S (section 6.3), decoder l stops once t > T encoder frames
                and sum_t' log P_t'(l) < max_l' sum_t' log P_t'(l') - S (nats); with
                --switch-off-rule posterior (the paper's Table 7 grid) once t > T and
                (1/t) sum_t' P_t'(l) < S, the best running decoder never stopping.

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
EXP (EXP/decode_test is fine); --device cuda without a CUDA device. The JSON files hold no
NaN/Infinity (an infinite --switch-off-threshold is written "inf").

Examples:
  speechkit-asr-decode --model-dir exp/rnnt_multisoftmax data/test exp/rnnt_multisoftmax/decode_test
  speechkit-asr-decode --model-dir exp/rnnt_multisoftmax_lid --lid-free --switch-off-tau 30 \\
      --switch-off-threshold 20 --nj 2 data/test exp/rnnt_multisoftmax_lid/decode_test_lidfree_t30_s20
"""
from __future__ import annotations

import dataclasses
import logging
import sys

from speechkit.tasks.recognize import DecodeOptions, decode_data_dir
from speechkit.utils.cli import ConfigError, add_model_args, make_parser, run_main, setup_logging

PROG = "speechkit-asr-decode"
logger = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp (and utt2lang for --oracle-lid)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="where text, utt2lang, decode_stats.json, ... go")
    add_model_args(p, help="experiment dir of speechkit-train rnnt")
    p.add_argument("--units-dir", default=None, help="units (speechkit-make-units --per-language) (default: the "
                   "model config's data.units_dir)")
    p.add_argument("--cmvn-stats", default=None, help="global CMVN stats: cmvn_global.ark, a cmvn.scp or a data "
                   "dir (default: the model config's data.cmvn_stats, else <data.train_dir>/cmvn_global.ark, "
                   "else <data.train_dir>/cmvn.scp)")
    p.add_argument("--search", choices=("greedy", "beam"), default="greedy",
                   help="greedy search, or modified beam search (one symbol per frame) (default: greedy)")
    p.add_argument("--beam", type=int, default=4, help="beam width for --search beam (default: 4)")
    p.add_argument("--length-norm", action="store_true",
                   help="--search beam: final hypothesis by log-probability / (1 + symbols) (icefall's "
                        "default) instead of log-probability (default: off)")
    p.add_argument("--max-symbols-per-frame", type=int, default=3,
                   help="greedy search: most symbols emitted per encoder frame (default: 3)")
    p.add_argument("--blank-penalty", type=float, default=0.0, metavar="P",
                   help="subtract P from the blank logit of every joint network before the softmax "
                        "(icefall's decoding option against deletions; tune it on dev) (default: 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lid-free", action="store_true",
                   help="multisoftmax_lid: decode every language, pick by the LID head")
    g.add_argument("--oracle-lid", action="store_true",
                   help="decode with the utterance's known language from DATA_DIR/utt2lang (the default)")
    p.add_argument("--switch-off-tau", type=int, default=None, metavar="T",
                   help="--lid-free early switch-off: no decoder stops before T encoder frames")
    p.add_argument("--switch-off-threshold", type=float, default=None, metavar="S",
                   help="--lid-free early switch-off: stop decoder l when its cumulative LID log-posterior "
                        "is more than S nats below the best language's ('inf' = never); with "
                        "--switch-off-rule posterior: when its running average LID posterior is below S")
    p.add_argument("--switch-off-rule", choices=("gap", "posterior"), default="gap",
                   help="early switch-off rule: gap (cumulative log-posterior gap in nats, the default) | "
                        "posterior (running average posterior below S, the paper's Table 7 grid)")
    p.add_argument("--chunk-frames", type=int, default=0, metavar="N",
                   help="feature frames fed per streaming chunk; 0 = whole utterance (default: 0)")
    p.add_argument("--show-partial", action="store_true", help="log the partial hypotheses after every chunk")
    p.add_argument("--nj", type=int, default=1, help="number of parts decoded in parallel processes (default: 1)")
    j = p.add_mutually_exclusive_group()
    j.add_argument("--job", type=int, metavar="J", help="decode part J (1..N) only (for run.pl / slurm.pl)")
    j.add_argument("--merge-only", action="store_true", help="only merge the N finished parts into OUT_DIR")
    p.add_argument("--max-jobs", type=int, default=None, metavar="M",
                   help="without --job: run at most M parts at once (default: --nj)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="where the model runs: cpu (default), cuda, or auto (cuda when there is one)")
    p.add_argument("--batch-size", type=int, default=1, metavar="B",
                   help="utterances per batched encoder forward (default: 1 = stream each utterance through "
                        "its chunks). The hypotheses are the same (the encoder is causal); on a GPU a batch "
                        "saves most of the encoder's time. Not with --show-partial")
    p.add_argument("--num-threads", type=int, default=1, metavar="T",
                   help="torch threads per job (default: 1, so the RTF is that of one core)")
    p.add_argument("--force", action="store_true", help="decode parts again even if they are current")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def _options(args) -> DecodeOptions:
    names = [f.name for f in dataclasses.fields(DecodeOptions) if f.name != "mode"]  # the options' dest names
    return DecodeOptions(mode="lid_free" if args.lid_free else "oracle", **{k: getattr(args, k) for k in names})


def _child_argv(args, job: int) -> list[str]:
    a = args
    argv = [sys.executable, "-m", "speechkit.bin.asr_decode", "--model-dir", str(a.model_dir), "--search", a.search,
            "--beam", str(a.beam), "--max-symbols-per-frame", str(a.max_symbols_per_frame), "--blank-penalty",
            str(a.blank_penalty), "--chunk-frames", str(a.chunk_frames), "--nj", str(a.nj), "--job", str(job),
            "--num-threads", str(a.num_threads), "--switch-off-rule", a.switch_off_rule]
    argv += ["--length-norm"] if a.length_norm else []
    for k in ("checkpoint", "units_dir", "cmvn_stats", "switch_off_tau", "switch_off_threshold"):
        argv += [f"--{k.replace('_', '-')}", str(getattr(a, k))] if getattr(a, k) is not None else []
    argv += [f"--{k.replace('_', '-')}" for k in ("lid_free", "oracle_lid", "force", "show_partial", "verbose")
             if getattr(a, k)]
    return argv + [str(a.data_dir), str(a.out_dir)]


def _body(args) -> int:
    if args.nj < 1:
        raise ConfigError(f"--nj must be >= 1, got {args.nj}")
    if args.job is not None and not 1 <= args.job <= args.nj:
        raise ConfigError(f"--job must be in 1..{args.nj}, got {args.job}")
    merged = decode_data_dir(args.model_dir, args.checkpoint, args.data_dir, args.out_dir, _options(args), nj=args.nj,
                             job=args.job, merge_only=args.merge_only, force=args.force, max_jobs=args.max_jobs,
                             job_argv=lambda job: _child_argv(args, job), option="--model-dir", logger=logger)
    if merged is not None:
        print(f"{PROG}: {merged[1]}")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.job is not None:  # a job's log is its stdout (run.pl / the pool capture it)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout, force=True,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        setup_logging(verbose=args.verbose)
    return run_main(PROG, lambda: _body(args))


if __name__ == "__main__":
    sys.exit(main())
