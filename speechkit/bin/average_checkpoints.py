"""Average the model weights of several checkpoints of one training run (ESPnet's
average_checkpoints.py, icefall's --avg N).

  speechkit-average-checkpoints --last 5 exp/real/rnnt_char_wb/multisoftmax
      -> exp/.../checkpoints/avg5.pt, the mean of the 5 newest ckpt-*.pt
  speechkit-average-checkpoints --out avg.pt exp/x/checkpoints/ckpt-e0010-s00005310.pt ...

The inputs are ordered by update step, whatever the order given; floating-point tensors are
averaged, integer ones (and the epoch, step and config) come from the newest checkpoint. Refused,
naming both files: checkpoints of different runs (another task, a saved config that differs in a
key a resumed run cannot change, different training data where the checkpoints record it), the
same file twice, two copies of one checkpoint, and two checkpoints of the same step (best.pt
with the epoch checkpoint it was copied from).

The output has the form of best.pt, so any decoder takes it (speechkit-asr-decode --checkpoint
avg5.pt, or any tool taking a checkpoint file), and it lists the files averaged under
'averaged_from' (oldest first). The epochs
must be kept: set trainer.keep_last to at least N when training (0 keeps all). The output is
written atomically; an existing one is replaced only by a successful run. Refused before any work:
an --out that is a symlink to an existing file, or that is (or resolves to) latest.pt, best.pt or
a ckpt-*.pt in a directory holding a training run's checkpoints (the run could no longer resume),
a table of a data dir (feats.scp, text, ...), or any existing file but an earlier average (a
config.yaml, a log).
"""
from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

from speechkit.train.checkpoint import (
    BEST, LATEST, average_checkpoints, list_checkpoints, parse_checkpoint_name, save_checkpoint,
)
from speechkit.utils.cli import ConfigError, make_parser, run_main, setup_logging
from speechkit.utils.outputs import check_output_files

# torch is imported where used: --help and argument errors answer without it.

PROG = "speechkit-average-checkpoints"
log = logging.getLogger(PROG)


def _holds_run(d: Path) -> bool:
    """``d`` holds a training run's checkpoints (the trainer's ``latest.pt``, ``best.pt`` or ``ckpt-*.pt``)."""
    return (d / LATEST).is_symlink() or (d / LATEST).exists() or (d / BEST).exists() or bool(list_checkpoints(d))


def _an_earlier_average(path: Path) -> bool:
    """``path`` is a checkpoint this tool wrote (a torch zip whose ``kind`` is ``averaged``)."""
    import torch

    if not zipfile.is_zipfile(path):
        return False
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - torch raises many types for files it cannot read
        return False
    return isinstance(state, dict) and state.get("kind") == "averaged"


def _check_out(out: Path, inputs: list[Path]) -> None:
    """Refuse, before any work, an ``--out`` that would replace a file the trainer owns or any file this
    tool did not write.

    Refused: a symlink to an existing file (``latest.pt`` is one; replacing it breaks the pointer a
    resumed run follows), and a path whose name, or the name of the file it resolves to, is
    ``latest.pt``, ``best.pt`` or a ``ckpt-e*-s*.pt`` in a directory that holds a training run's
    checkpoints (an averaged file there is not a training checkpoint: the run could not resume); an
    input, or a table of a data dir (:func:`speechkit.utils.outputs.check_output_files`); an existing
    file that is not an earlier average (``EXP/config.yaml`` was replaced by a torch zip).
    """
    named = Path(os.path.realpath(out.parent)) / out.name  # the link itself, its directory resolved
    for p in (named, Path(os.path.realpath(out))):
        if (p.name in (LATEST, BEST) or parse_checkpoint_name(p.name) is not None) and _holds_run(p.parent):
            shown = "" if p.name == out.name else f" (it resolves to {p})"
            raise ConfigError(f"--out {out}: is the training run's own {p.name}{shown} in {p.parent}, a "
                              f"trainer's file (an average written there breaks resuming or loading the run): "
                              f"choose another output file (e.g. avgN.pt)")
    if out.is_symlink() and out.exists():
        raise ConfigError(f"--out {out}: is a symlink to the existing file {os.path.realpath(out)}; replacing "
                          f"it would replace a checkpoint (or the pointer a resumed run follows): choose "
                          f"another output file (e.g. avgN.pt)")
    check_output_files({"--out": out}, inputs=[(f"the input {p}", p) for p in inputs])
    if out.exists() and not _an_earlier_average(out):
        raise ConfigError(f"--out {out}: exists and is not an earlier average of checkpoints (only those are "
                          f"replaced): choose another output file (e.g. avgN.pt)")


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="checkpoint files of one run (2 or more, any order: sorted by step), or with --last N one "
                             "experiment directory (or its checkpoints/ directory)")
    parser.add_argument("--last", type=int, default=None, metavar="N",
                        help="average the N newest full checkpoints (ckpt-e*-s*.pt) of the directory")
    parser.add_argument("--out", default=None, metavar="PATH",
                        help="output file (default with --last: <checkpoints>/avg<N>.pt)")
    args = parser.parse_args(argv)

    def body() -> None:
        setup_logging()
        if args.last is not None:
            if len(args.inputs) != 1:
                raise ConfigError(f"--last N takes one experiment directory, got {len(args.inputs)} inputs")
            root = Path(args.inputs[0])
            ckpt_dir = root / "checkpoints" if (root / "checkpoints").is_dir() else root
            if not ckpt_dir.is_dir():
                raise FileNotFoundError(f"{root}: no such experiment or checkpoints directory")
            if args.last < 2:
                raise ConfigError(f"--last: need N >= 2, got {args.last}")
            found = list_checkpoints(ckpt_dir)
            if len(found) < args.last:
                raise ConfigError(f"{ckpt_dir}: --last {args.last} but only {len(found)} full checkpoint(s) "
                                  f"kept ({', '.join(p.name for p in found) or 'none'}); train with "
                                  f"--trainer.keep_last {args.last} (or 0 = all)")
            paths = found[-args.last:]
            out = Path(args.out) if args.out else ckpt_dir / f"avg{args.last}.pt"
        else:
            if args.out is None:
                raise ConfigError("--out PATH is required when checkpoint files are listed")
            paths = [Path(p) for p in args.inputs]
            out = Path(args.out)
        if out.resolve() in {p.resolve() for p in paths}:
            raise ConfigError(f"--out {out}: is one of the inputs")
        _check_out(out, paths)
        state = average_checkpoints(paths)
        save_checkpoint(out, state)
        log.info("averaged %d checkpoints (%s) -> %s (epoch %s, step %s)", len(paths),
                 ", ".join(p.name for p in paths), out, state["epoch"], state["step"])

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    raise SystemExit(main())
