"""Continual speaker adaptation of a speaker-conditioned TTS acoustic model (Hemati & Borth 2021, Algorithm 1).

  speechkit-train-continual [--config CONF.yaml] --exp-dir EXP [--print-config] [--KEY VALUE ...]

  e.g. speechkit-train-continual --exp-dir exp/continual/er_order1 --strategy er --buffer-size 5 --order 1 --seed 1 \\
         --init-dir exp/pretrain/salad --train-dir data/continual/train --valid-dir data/continual/valid \\
         --speaker-embeddings data/continual/emb/spk_embeddings.scp --trainer.max_epochs 30

Adapts the model of --init-dir (speechkit-train salad | musa_rnn | tacotron2 trained with
data.speaker_embeddings) to the continual speakers of --train-dir, one per episode, in the order
of row --order K of their Williams design (rows 1..n, n speakers: distinct permutations, no two
beginning with the same speaker, balanced for the speaker that comes before; odd n: rows n+1..2n
reverse them; a K beyond the design is an error) or, with --order 0 (the default), a permutation
drawn from --seed (--seed also seeds the replay selection and shuffling), with --strategy
jt | jt_cumulative | sa | ewc | er | er_kd | er_br (joint training as the paper defines it,
cumulative joint fine-tuning (this toolkit's own variant), sequential adaptation, EWC with
--ewc-lambda, experience replay with --buffer-size N_B, ER with knowledge distillation (ER-KD: the
model's own outputs as buffer targets), ER with buffer replication (ER-BR: buffer items replicated
--replicate K times); all but jt_cumulative are Hemati & Borth's, sections 3.1-3.2.4). Each
episode trains a fresh optimiser from the previous episode's best weights, with early stopping on
the new speaker's validation utterances of --valid-dir; jt instead trains every episode from
theta_init on all the continual speakers seen so far, early-stopped on all their validation utterances (the paper's
joint training, one model per episode boundary); jt_cumulative trains on all seen speakers from the
previous episode's weights, early-stopped on the new speaker (what jt meant in runs whose plan.json
has no "version": they resume as jt_cumulative). Train/valid dirs hold labels.scp, feats.scp,
utt2spk (+ feats.yaml) of all continual speakers.

Writes EXP/plan.json (the order and, in extra.order_design, how it was made),
EXP/episode_<tt>_<spk>/ (a speechkit-train experiment dir: use it as --model-dir of
speechkit-tts-synthesize, with --speaker SPK for any speaker in its `speakers` file; plus
episode.json = what was trained), EXP/episodes.jsonl (one JSON line per episode).
Re-running the command resumes: finished episodes are skipped, an interrupted one continues from
its latest checkpoint. A resumed run with another speaker order, strategy or setting is an error
naming both: plan.json records every training setting (the trainer, model and data options, e.g.
--trainer.lr, --trainer.max_epochs, --num-streams, --window), all but those that only change how it
runs (--trainer.num_threads, --trainer.device, --trainer.num_workers, --trainer.log_interval,
--trainer.save_interval_steps, --trainer.keep_last).

EXP may not be, nor lie inside, what the command reads (--train-dir, --valid-dir, --pretrain-dir,
--speaker-embeddings, --config, --init-dir; it may lie inside --init-dir's exp dir, not its checkpoints).

Every key (flat keys such as --strategy, --buffer-size, and --trainer.<key>) is a config
override, '-' and '_' alike, values parsed as YAML; see them all with --print-config. A
strategy's own option given on the command line for another strategy is an error naming it
(--buffer-size: er | er_kd | er_br; --replicate: er_br; --ewc-lambda, --ewc-mode: ewc); a --config
file may hold them for every strategy (one file for all runs). Out-of-range values (a negative
--buffer-size, --order or --seed, --replicate < 1, --ewc-lambda < 0 or not finite) are errors naming the
key; so are er* without --buffer-size >= 1 and ewc without --ewc-lambda > 0.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from speechkit.utils.cli import ConfigError, make_parser, run_main, setup_logging
from speechkit.utils.cli import split_overrides as cli_split_overrides
from speechkit.utils.config import format_config, load_config
from speechkit.utils.fileio import ensure_writable_dir
from speechkit.utils.outputs import check_output_dir

# train.continual_strategies and continual.driver (torch) are imported where used: --help and argument errors answer
# without torch.

PROG = "speechkit-train-continual"
_OWN = {"--config", "--exp-dir", "--print-config", "--verbose", "--help", "--log-file"}
#: The config keys the library's errors name, spelled as this command line sets them (run_main's flags=).
KEY_FLAGS = {k: "--" + k.replace("_", "-") for k in ("strategy", "buffer_size", "replicate", "ewc_lambda", "ewc_mode")}


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(own_args, "key=value" overrides)``: :func:`speechkit.utils.cli.split_overrides`."""
    return cli_split_overrides(argv, _OWN, {"--print-config", "--verbose", "--help"})


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(__doc__, prog=PROG)
    p.allow_abbrev = False
    p.add_argument("--config", default=None, metavar="YAML", help="YAML config (any subset of the keys)")
    p.add_argument("--exp-dir", "--exp_dir", dest="exp_dir", default=None, metavar="DIR",
                   help="output dir (required unless --print-config)")
    p.add_argument("--print-config", "--print_config", dest="print_config", action="store_true",
                   help="print the resolved config as commented YAML and exit")
    p.add_argument("--log-file", "--log_file", dest="log_file", default=None, help="also append the log here")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    p.epilog = ("config overrides: --strategy jt|jt_cumulative|sa|ewc|er|er_kd|er_br --order K --seed N "
                "--buffer-size N_B "
                "--replicate K "
                "--ewc-lambda L --init-dir EXP --train-dir D --valid-dir D --speaker-embeddings SCP "
                "--speakers [a,b] --pretrain-dir D --trainer.<key> VALUE (see --print-config)")
    return p


def _run(args: argparse.Namespace, overrides: list[str]) -> int:
    from speechkit.train.continual_strategies import check_strategy_options
    from speechkit.continual.driver import ContinualConfig, run_continual

    cfg = load_config(ContinualConfig, args.config, overrides)
    check_strategy_options(cfg.strategy, [o.split("=", 1)[0] for o in overrides])
    if args.print_config:
        sys.stdout.write(f"# {PROG}: resolved config\n")
        sys.stdout.write(format_config(cfg))
        return 0
    if not args.exp_dir:
        raise ConfigError("--exp-dir is required (where the episodes go)")
    # as speechkit-train: the exp dir is written file by file, never replaced, so it may hold inputs, but it may
    # not be one nor lie inside one; it may lie inside --init-dir's exp dir (ESPnet's layout), not its checkpoints
    init = Path(cfg.init_dir) if cfg.init_dir else None
    check_output_dir(args.exp_dir, inputs={"--train-dir": cfg.train_dir, "--valid-dir": cfg.valid_dir,
                                           "--speaker-embeddings": cfg.speaker_embeddings,
                                           "--pretrain-dir": cfg.pretrain_dir, "--config": args.config,
                                           "--init-dir's checkpoints": init / "checkpoints" if init else None},
                     experiment_dirs={"--init-dir": cfg.init_dir}, option="--exp-dir", contains_ok=True)
    ensure_writable_dir(args.exp_dir)
    setup_logging(args.log_file, verbose=args.verbose,
                  inputs={"--config": args.config},
                  input_dirs={"--train-dir": cfg.train_dir, "--valid-dir": cfg.valid_dir,
                              "--pretrain-dir": cfg.pretrain_dir, "--speaker-embeddings": cfg.speaker_embeddings})
    records = run_continual(cfg, args.exp_dir)
    for r in records:
        print(f"episode {r['episode']} {r['speaker']}: {r['utterances']['total']} utterances "
              f"({r['utterances']['buffer']} from the buffer), {r['epochs']} epochs, "
              f"best valid loss {r['best_valid_loss']:.4g}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    parser = build_parser()

    def body() -> int:
        own, overrides = split_overrides(argv)
        args = parser.parse_args(own)
        return _run(args, overrides)

    return run_main(PROG, body, parser=parser, flags=KEY_FLAGS)


if __name__ == "__main__":
    sys.exit(main())
