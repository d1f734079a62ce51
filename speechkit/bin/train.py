"""Train a model: speechkit-train TASK [--config CONF.yaml] --exp-dir EXP [--resume true|false] [--KEY VALUE ...]

Builds TASK's model and data from its typed config (defaults, then the YAML --config, then the
command-line overrides, in that order) and trains it into EXP:

  EXP/config.yaml       resolved config          EXP/train.log     log (appended)
  EXP/metrics.jsonl     per-interval/epoch stats EXP/loss.png      loss and learning-rate curves
  EXP/checkpoints/      ckpt-e<epoch>-s<step>.pt, latest.pt (-> newest), best.pt (best validation)

Re-running the same command resumes from the latest checkpoint (bitwise the same result as an
uninterrupted run on CPU) or, when the run already finished, says so and exits 0. A config that
differs from the saved run outside the trainer section is an error; trainer settings such as
trainer.max_epochs may be raised to continue. --resume false starts over (the earlier run is
moved to EXP/prev-<time>/).

Overrides are dotted config keys, '-' and '_' alike, values parsed as YAML:
  --trainer.max_epochs 20   --trainer.lr=1e-3   --model.hidden-dim 64   --trainer.betas [0.9,0.98]

See every key with its documentation and default: speechkit-train TASK --print-config
"""
from __future__ import annotations

import argparse
import logging
import sys

from speechkit.utils.cli import ConfigError, make_parser, run_main, setup_logging

PROG = "speechkit-train"
# Our own options (everything else starting with -- is a config override).
_OWN_OPTIONS = {"--config", "--exp-dir", "--resume", "--print-config", "--verbose", "--help"}

log = logging.getLogger("speechkit.bin.train")


def _str2bool(text: str) -> bool:
    v = text.strip().lower()
    if v in ("true", "yes", "1", "on"):
        return True
    if v in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """Separate ``--dotted.key VALUE`` / ``--dotted.key=VALUE`` overrides from the CLI's own arguments.

    Returns ``(own_args, overrides)`` with overrides as ``"dotted.key=VALUE"`` (``-`` in keys
    turned into ``_``). A token after ``--key`` is always its value, even if it starts with ``-``.

    Raises:
        ConfigError: an override without a value.
    """
    own, overrides = [], []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--") and len(tok) > 2:
            name, eq, value = tok[2:].partition("=")
            if "--" + name.replace("_", "-") in _OWN_OPTIONS:
                own.append(tok)
                i += 1
                continue
            key = name.replace("-", "_")
            if not eq:
                if i + 1 >= len(argv):
                    raise ConfigError(f"command line: override --{name} needs a value (--{name} VALUE or --{name}=VALUE)")
                value = argv[i + 1]
                i += 1
            overrides.append(f"{key}={value}")
        else:
            own.append(tok)
        i += 1
    return own, overrides


def build_parser() -> argparse.ArgumentParser:
    from speechkit.tasks import task_names

    parser = make_parser(__doc__, prog=PROG)
    parser.allow_abbrev = False
    parser.add_argument("task", metavar="TASK", help=f"task to train; one of: {', '.join(task_names())}")
    parser.add_argument("--config", default=None, metavar="YAML",
                        help="YAML config (any subset of the keys; the rest keep their defaults)")
    parser.add_argument("--exp-dir", "--exp_dir", dest="exp_dir", default=None, metavar="DIR",
                        help="experiment directory (required unless --print-config)")
    parser.add_argument("--resume", type=_str2bool, default=True, metavar="BOOL",
                        help="resume from EXP/checkpoints/latest.pt if present (default: true); false starts over")
    parser.add_argument("--print-config", "--print_config", dest="print_config", action="store_true",
                        help="print the resolved config as commented YAML and exit")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    parser.epilog = (f"tasks: {', '.join(task_names())}\n"
                     "config overrides: --<section>.<key> VALUE (see --print-config for all keys)")
    return parser


def _run(args: argparse.Namespace, overrides: list[str]) -> int:
    from speechkit.tasks import get_task
    from speechkit.train.trainer import Trainer
    from speechkit.utils.config import format_config, load_config

    task = get_task(args.task)
    cfg = load_config(task.Config, args.config, overrides)
    if args.print_config:
        sys.stdout.write(f"# speechkit-train {task.name}: resolved config\n")
        sys.stdout.write(format_config(cfg))
        return 0
    if not args.exp_dir:
        raise ConfigError("--exp-dir is required (where config, logs and checkpoints go)")
    setup_logging(None, verbose=args.verbose)
    best = Trainer(task, cfg, args.exp_dir, resume=args.resume).fit()
    log.info("best checkpoint: %s", best)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        own, overrides = split_overrides(argv)
    except ConfigError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    args = parser.parse_args(own)
    return run_main(PROG, lambda: _run(args, overrides))


if __name__ == "__main__":
    sys.exit(main())
