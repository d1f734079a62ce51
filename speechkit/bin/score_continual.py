"""Score a continual speaker-adaptation run with the speaker verifier: accuracy matrix, RA, FG.

  speechkit-score-continual --test-dir DIR --gt-train EMB_DIR --gt-test EMB_DIR [--eval-dir EXP/eval]
                            [--num-utts 5] [--extra-speakers FILE] [--wavs-per-speaker 1] [--no-plots] EXP

Hemati & Borth (2021), sections 2.3 and 4. For every finished episode l of EXP (a
speechkit-train-continual exp dir): retrains the linear speaker verifier on the vocoded
ground-truth embeddings (--gt-train: a speechkit-embed-speakers out dir of `speechkit-vocode`d
training audio) of the speakers seen so far (+ the --extra-speakers, one per line: the
pre-training speakers), checks it on held-out vocoded ground truth (--gt-test), synthesizes
--num-utts test sentences of --test-dir (labels.scp, utt2spk: forced durations) per seen continual
speaker with episode l's model, embeds them with the GE2E encoder and classifies them:
a_{l,i} = share of speaker i's syntheses verified as i. Then RA_l (eq. 1) and FG_l (eq. 2).

Writes --eval-dir (default EXP/eval; see speechkit.continual.evaluation): episode_<tt>.json (+ .npz, wav/),
scores.json, confusion_matrix.png, embeddings_2d.png, accuracy_matrix.png; prints one line per
episode and the final RA/FG. Episodes evaluated before are not evaluated again (resumable) when
none of their inputs changed: an episode whose model, test labels, --gt-train / --gt-test
embeddings, encoder or options (--num-utts, --wavs-per-speaker, --extra-speakers) differ in
content from those it was evaluated with is evaluated again (logged with what changed).
Synthesized utterances too short for the encoder are skipped and counted.

Other sentences go to another --eval-dir: `--test-dir dump/continual/dev --eval-dir EXP/eval_dev`
scores every episode on the dev utterances of the speakers seen so far (how egs/vctk_continual
chooses EWC's lambda) and leaves EXP/eval, the test evaluation, as it is. --eval-dir may lie inside
EXP but may not be EXP, an episode dir or lie inside one, nor be, contain or lie inside what the
command reads (--test-dir, --gt-train, --gt-test, --extra-speakers).

Example:
  speechkit-score-continual --test-dir dump/continual/test --gt-train exp/embed/train_world \\
      --gt-test exp/embed/test_world --extra-speakers data/pretrain_speakers exp/continual/sa/order1
"""
from __future__ import annotations

from pathlib import Path

from speechkit.continual.evaluation import EvalConfig, evaluate_continual
from speechkit.utils.cli import make_parser, nonnegative_int, positive_int, run_main, setup_logging
from speechkit.utils.fileio import DataError
from speechkit.utils.outputs import check_output_dir

PROG = "speechkit-score-continual"


def main(argv=None) -> int:
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("exp_dir", metavar="EXP", help="speechkit-train-continual exp dir")
    p.add_argument("--test-dir", "--test_dir", dest="test_dir", required=True,
                   help="labels.scp + utt2spk of the continual speakers' test utterances")
    p.add_argument("--gt-train", "--gt_train", dest="gt_train", required=True,
                   help="embed dir (embeddings.scp, utt2spk) of vocoded ground truth: verifier training")
    p.add_argument("--gt-test", "--gt_test", dest="gt_test", required=True,
                   help="embed dir of held-out vocoded ground truth: verifier accuracy, Figure 4")
    p.add_argument("--num-utts", "--num_utts", dest="num_utts", type=positive_int, default=5,
                   help="synthesized test sentences per seen speaker and episode (default: 5)")
    p.add_argument("--extra-speakers", "--extra_speakers", dest="extra_speakers", default=None, metavar="FILE",
                   help="speakers (one per line) always among the verifier's classes: the pre-training ones")
    p.add_argument("--wavs-per-speaker", "--wavs_per_speaker", dest="wavs_per_speaker", type=nonnegative_int,
                   default=1, help="synthesized wavs kept per seen speaker and episode (default: 1)")
    p.add_argument("--eval-dir", "--eval_dir", dest="eval_dir", default=None, metavar="DIR",
                   help="where the results go (default: EXP/eval; e.g. EXP/eval_dev for --test-dir's dev utterances)")
    p.add_argument("--no-plots", dest="plots", action="store_false", help="no PNGs")
    p.add_argument("--log-file", default=None, help="also append the log here")
    args = p.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file, inputs={"--extra-speakers": args.extra_speakers},
                      input_dirs={"TEST_DIR": args.test_dir, "GT_TRAIN": args.gt_train, "GT_TEST": args.gt_test})
        extra: list[str] = []
        if args.extra_speakers:
            path = Path(args.extra_speakers)
            if not path.is_file():
                raise FileNotFoundError(f"--extra-speakers {path}: no such file")
            extra = [ln.split()[0] for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            if not extra:
                raise DataError(f"--extra-speakers {path}: empty")
        cfg = EvalConfig(num_utts=args.num_utts, extra_speakers=extra, wavs_per_speaker=args.wavs_per_speaker,
                         plots=args.plots)
        exp = Path(args.exp_dir)
        eval_dir = Path(args.eval_dir) if args.eval_dir else exp / "eval"
        # the results may lie inside EXP (EXP/eval), never in an episode's model dir nor in what is read
        reads = [("--test-dir", args.test_dir), ("--gt-train", args.gt_train), ("--gt-test", args.gt_test),
                 ("--extra-speakers", args.extra_speakers)]
        reads += [("EXP's episode dir", d) for d in sorted(exp.glob("episode_*")) if d.is_dir()]
        check_output_dir(eval_dir, inputs=reads, experiment_dirs={"EXP": exp}, option="--eval-dir")
        s = evaluate_continual(args.exp_dir, args.test_dir, args.gt_train, args.gt_test, cfg, eval_dir=eval_dir)
        for t, (spk, ra, fg, va) in enumerate(zip(s["order"], s["retained_accuracy"], s["forgetting"],
                                                  s["verifier_accuracy"]), 1):
            fg_s = "  -  " if fg is None else f"{100 * fg:5.1f}"
            print(f"episode {t} {spk}: RA {100 * ra:5.1f} %  FG {fg_s} %  (verifier {100 * va:.1f} %)")
        state = "" if s["complete"] else " (run not finished)"
        final_fg = "-" if s["final_fg"] is None else f"{100 * s['final_fg']:.1f}"
        where = "" if eval_dir == exp / "eval" else f" (on {args.test_dir}, in {eval_dir})"
        print(f"{args.exp_dir}: final RA {100 * s['final_ra']:.1f} %, FG {final_fg} %{state}{where}")
        return 0

    return run_main(PROG, body, parser=p)


if __name__ == "__main__":
    raise SystemExit(main())
