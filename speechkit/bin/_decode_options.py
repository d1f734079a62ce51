"""The decoding options of ``speechkit-asr-decode``: the flags that fill a DecodeOptions.

Not a command of its own: :mod:`speechkit.bin.asr_decode` builds its parser with
:func:`add_decode_options` and reads the options back with :func:`decode_options`; the flags are
named here, in ``bin/``, and nowhere in the library.
"""
from __future__ import annotations

import argparse
import dataclasses

from speechkit.inference.speech2text import DecodeOptions
from speechkit.utils.cli import finite_float, nonnegative_float_or_inf

__all__ = ["MODE_FLAGS", "add_decode_options", "decode_options"]

#: How the library's ``mode`` values are spelled here (``run_main``'s ``flags=``): the flag that sets each.
MODE_FLAGS = {"mode=lid_free": "--lid-free", "mode=oracle": "--oracle-lid"}


def add_decode_options(parser: argparse.ArgumentParser, *, parts: bool = True) -> None:
    """Add the options that fill :class:`~speechkit.inference.speech2text.DecodeOptions` (``--units-dir``
    ... ``--num-threads``, read back with :func:`decode_options`) to ``parser`` (an
    ``argparse.ArgumentParser``), as ``speechkit-asr-decode`` has them.

    Args:
        parts: also the options of :func:`~speechkit.inference.speech2text_dir.decode_data_dir`'s
            parts, in their places in the help: ``--nj``, ``--job`` | ``--merge-only``, ``--max-jobs``
            and ``--force``.
    """
    p = parser
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
    p.add_argument("--blank-penalty", type=finite_float, default=0.0, metavar="P",
                   help="subtract P from the blank logit of every joint network before the softmax "
                        "(icefall's decoding option against deletions; tune it on dev) (default: 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lid-free", action="store_true",
                   help="multisoftmax_lid: decode every language, pick by the LID head")
    g.add_argument("--oracle-lid", action="store_true",
                   help="decode with the utterance's known language from DATA_DIR/utt2lang (the default)")
    p.add_argument("--switch-off-tau", type=int, default=None, metavar="T",
                   help="--lid-free early switch-off: every decoder runs the first T encoder frames "
                        "(30 ms each with the paper's stacking; the paper's minimum wait time tau, "
                        "section 6.3, counted in frames)")
    p.add_argument("--switch-off-threshold", type=nonnegative_float_or_inf, default=None, metavar="S",
                   help="--lid-free early switch-off: stop decoder l when its cumulative LID log-posterior "
                        "(eq. 1) is more than S nats below the best running language's ('inf' = never; "
                        "the paper's s_th); with --switch-off-rule posterior: when its running average "
                        "LID posterior is below S")
    p.add_argument("--switch-off-rule", choices=("gap", "posterior"), default="gap",
                   help="early switch-off rule: gap (the paper's, section 6.3, eq. 1: cumulative "
                        "log-posterior gap in nats; the default) | posterior (the recipe's own variant, "
                        "not in the paper: running average posterior below S)")
    p.add_argument("--chunk-frames", type=int, default=0, metavar="N",
                   help="feature frames fed per streaming chunk; 0 = whole utterance (default: 0)")
    p.add_argument("--show-partial", action="store_true", help="log the partial hypotheses after every chunk")
    if parts:
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
    if parts:
        p.add_argument("--force", action="store_true", help="decode parts again even if they are current")


def decode_options(args: argparse.Namespace) -> DecodeOptions:
    """The :class:`~speechkit.inference.speech2text.DecodeOptions` of parsed arguments (of
    :func:`add_decode_options`' parser): ``--lid-free`` gives mode ``lid_free``, else ``oracle``; the
    other fields by their names."""
    names = [f.name for f in dataclasses.fields(DecodeOptions) if f.name != "mode"]  # the options' dest names
    return DecodeOptions(mode="lid_free" if args.lid_free else "oracle", **{k: getattr(args, k) for k in names})
