"""Train a model: speechkit-train [--nproc N | --ngpu N] TASK [--config CONF.yaml] --exp-dir EXP [--resume true|false] [--KEY VALUE ...]

Builds TASK's model and data from its typed config (defaults, then the YAML --config, then the
command-line overrides, in that order) and trains it into EXP:

  EXP/config.yaml       resolved config          EXP/train.log     log (appended)
  EXP/metrics.jsonl     per-interval/epoch stats EXP/loss.png      loss and learning-rate curves
  EXP/checkpoints/      ckpt-e<epoch>-s<step>.pt, latest.pt (-> newest), best.pt (best validation)

Re-running the same command resumes from the latest checkpoint (bitwise the same result as an
uninterrupted run on CPU) or, when the run already finished, says so and exits 0. A config that
differs from the saved run outside the trainer section is an error; trainer settings such as
trainer.max_epochs may be raised to continue; a finished run given other training settings (e.g.
trainer.lr) is an error, since nothing would be trained with them. --resume false starts over (the earlier run is
moved to EXP/prev-<time>/). Checked before any work: EXP may not be, or lie inside, a data dir
or file the config's data section names (data.train_dir, data.valid_dir, data.codes, ...), nor be
the experiment dir of data.vqvae_dir. EXP may contain them (it is written file by file, never
replaced: --exp-dir tr --data.train-dir tr/train is accepted) and may lie inside data.vqvae_dir.

Overrides are dotted config keys, '-' and '_' alike, values parsed as YAML:
  --trainer.max_epochs 20   --trainer.lr=1e-3   --model.hidden-dim 64   --trainer.betas [0.9,0.98]

See every key with its documentation and default: speechkit-train TASK --print-config

Several processes (DistributedDataParallel; see speechkit.train.distributed): --ngpu N trains on N
GPUs of this machine (device cuda), --nproc N in N CPU processes (gloo); both start
`torchrun --standalone --nproc_per_node N` with this command line. trainer.batch_size (or
batch_frames) stays the global batch, split across the processes; only rank 0 writes EXP.
For several machines run torchrun yourself (e.g. from a Slurm job on each node):
  torchrun --nnodes 2 --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint HOST:29400 \\
      -m speechkit.bin.train TASK --config CONF.yaml --exp-dir EXP
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from speechkit.tasks import get_task, task_names
from speechkit.utils.cli import ConfigError, make_parser, run_main, setup_logging
from speechkit.utils.cli import split_overrides as cli_split_overrides
from speechkit.utils.config import format_config, load_config, str2bool
from speechkit.utils.fileio import ensure_writable_dir
from speechkit.utils.outputs import check_output_dir

# train.distributed, train.task and train.trainer (torch) are imported where used: --help and argument errors answer
# without torch.

PROG = "speechkit-train"
# Our own options (everything else starting with -- is a config override).
_OWN_OPTIONS = {"--config", "--exp-dir", "--resume", "--print-config", "--verbose", "--help", "--nproc", "--ngpu"}

log = logging.getLogger("speechkit.bin.train")


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(own_args, "dotted.key=VALUE" overrides)``: :func:`speechkit.utils.cli.split_overrides`."""
    return cli_split_overrides(argv, _OWN_OPTIONS, {"--print-config", "--verbose", "--help"})


def build_parser() -> argparse.ArgumentParser:
    parser = make_parser(__doc__, prog=PROG)
    parser.allow_abbrev = False
    parser.add_argument("task", metavar="TASK", help=f"task to train; one of: {', '.join(task_names())}")
    parser.add_argument("--config", default=None, metavar="YAML",
                        help="YAML config (any subset of the keys; the rest keep their defaults)")
    parser.add_argument("--exp-dir", "--exp_dir", dest="exp_dir", default=None, metavar="DIR",
                        help="experiment directory (required unless --print-config)")
    parser.add_argument("--resume", type=str2bool, default=True, metavar="BOOL",
                        help="resume from EXP/checkpoints/latest.pt if present (default: true); false starts over")
    parser.add_argument("--print-config", "--print_config", dest="print_config", action="store_true",
                        help="print the resolved config as commented YAML and exit")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    parser.add_argument("--nproc", type=int, default=1, metavar="N",
                        help="train in N processes on this machine through torchrun (CPU: gloo); default 1")
    parser.add_argument("--ngpu", type=int, default=None, metavar="N",
                        help="0: train on CPU (sets trainer.device=cpu); N >= 1: N processes on N GPUs "
                             "(trainer.device=cuda). Default: as trainer.device says, --nproc processes")
    parser.epilog = (f"tasks: {', '.join(task_names())}\n"
                     "config overrides: --<section>.<key> VALUE (see --print-config for all keys)")
    return parser


def _run(args: argparse.Namespace, overrides: list[str], argv: list[str]) -> int:
    from speechkit.train.distributed import launch_torchrun, launched_by_torchrun, num_processes, strip_launch_options
    from speechkit.train.task import data_paths
    from speechkit.train.trainer import Trainer

    nproc = num_processes(args.nproc, args.ngpu)
    if args.ngpu is not None:
        overrides = overrides + [f"trainer.device={'cuda' if args.ngpu > 0 else 'cpu'}"]
    task = get_task(args.task)
    cfg = load_config(task.Config, args.config, overrides)
    if args.print_config:
        sys.stdout.write(f"# speechkit-train {task.name}: resolved config\n")
        sys.stdout.write(format_config(cfg))
        return 0
    if not args.exp_dir:
        raise ConfigError("--exp-dir is required (where config, logs and checkpoints go)")
    inputs, experiments = data_paths(cfg)
    # the exp dir is written file by file, never replaced: it may hold inputs (the inverter's codes)
    check_output_dir(args.exp_dir, inputs=inputs, experiment_dirs=experiments, option="--exp-dir", contains_ok=True)
    ensure_writable_dir(args.exp_dir)  # a file, or an unwritable folder: one line, before any work
    rank = int(os.environ.get("RANK", "0") or 0)
    setup_logging(None, verbose=args.verbose)
    if rank > 0 and not args.verbose:  # one log: rank 0's (the others only warn)
        logging.getLogger().setLevel(logging.WARNING)
    if nproc > 1 and not launched_by_torchrun():
        worker_argv = strip_launch_options(argv)
        if args.ngpu is not None:
            worker_argv += ["--trainer.device", "cuda" if args.ngpu > 0 else "cpu"]
        return launch_torchrun(nproc, worker_argv, logger=log)
    best = Trainer(task, cfg, args.exp_dir, resume=args.resume).fit()
    if rank == 0:
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
    return run_main(PROG, lambda: _run(args, overrides, argv), parser=parser)


if __name__ == "__main__":
    sys.exit(main())
