"""Shared plumbing for the ``speechkit-*`` command-line tools.

Every CLI module in :mod:`speechkit.bin` defines ``main(argv=None) -> int`` and wraps its body with
:func:`run_main`, so that bad input ends in one clear line on stderr and a non-zero exit instead
of a traceback::

    def main(argv=None) -> int:
        parser = make_parser(__doc__)
        parser.add_argument(...)
        args = parser.parse_args(argv)
        return run_main("speechkit-foo", lambda: _run(args))
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from typing import Callable

from speechkit.utils.fileio import DataError, WriteError, ensure_writable_dir
from speechkit.utils.outputs import Named, check_output_files


class ConfigError(ValueError):
    """A configuration problem (unknown key, wrong type, bad value); the message names the key."""


def make_parser(doc: str | None, prog: str | None = None) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` whose description is the module docstring and whose help shows defaults."""
    return argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _int_at_least(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"must be >= {lowest}, got {value}")
    return value


def positive_int(text: str) -> int:
    """``type=`` for argparse: an integer >= 1.

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 1; argparse then exits 2 with
        ``prog: error: argument --OPT: must be >= 1, got 0`` (the option named).
    """
    return _int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """``type=`` for argparse: an integer >= 0.

    Raises:
        argparse.ArgumentTypeError: not an integer, or < 0 (``argument --OPT: must be >= 0, got -1``).
    """
    return _int_at_least(text, 0)


def finite_float(text: str) -> float:
    """``type=`` for argparse: a finite float, the type of every float option of every ``speechkit-*`` CLI
    (``type=float`` takes ``nan`` and ``inf``, which then pass every ``<``/``>`` range check: ``--tolerance nan``
    scored items past the end of their file, ``--min-speech nan`` turned the filter off).

    Raises:
        argparse.ArgumentTypeError: not a number, or NaN/inf; argparse then exits 2 with
        ``prog: error: argument --OPT: must be a finite number, got 'nan'`` (the option named).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """``type=`` for argparse: a finite float >= 0.

    Raises:
        argparse.ArgumentTypeError: not a number, NaN/inf, or < 0 (``argument --OPT: must be >= 0, got -1.0``).
    """
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """``type=`` for argparse: a finite float > 0.

    Raises:
        argparse.ArgumentTypeError: not a number, NaN/inf, or <= 0 (``argument --OPT: must be > 0, got 0.0``).
    """
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def nonnegative_float_or_inf(text: str) -> float:
    """``type=`` for argparse: a float >= 0, or ``inf`` where infinity has a meaning of its own (asr-decode's
    ``--switch-off-threshold inf``: never switch off); NaN and ``-inf`` are refused.

    Raises:
        argparse.ArgumentTypeError: not a number, NaN, or < 0 (``argument --OPT: must be >= 0 or inf, got 'nan'``).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:  # NaN fails every comparison
        raise argparse.ArgumentTypeError(f"must be >= 0 or inf, got {text!r}")
    return value


def split_overrides(argv: list[str], own_options: set[str] | frozenset[str], flags: set[str] | frozenset[str] = frozenset()
                    ) -> tuple[list[str], list[str]]:
    """Separate a CLI's own arguments from ``--dotted.key VALUE`` / ``--dotted.key=VALUE`` config overrides.

    Args:
        argv: the command line after the program name.
        own_options: the CLI's own options, spelled with dashes (``--exp-dir``; ``--exp_dir`` on the
            command line matches too). Each takes the next token as its value unless it is in
            ``flags`` or written ``--opt=value``.
        flags: those of ``own_options`` that take no value (``--help``, ``--verbose``, ...).

    Returns:
        ``(own_args, overrides)``: the tokens for the CLI's own parser, and the overrides as
        ``"dotted.key=VALUE"`` (``-`` in keys turned into ``_``). A token after ``--key`` is always
        its value, even if it starts with ``-``.

    Raises:
        ConfigError: an override without a value (names it).
    """
    own: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--") and len(tok) > 2:
            name, eq, value = tok[2:].partition("=")
            option = "--" + name.replace("_", "-")
            if option in own_options:
                own.append(tok)
                if not eq and option not in flags and i + 1 < len(argv):
                    own.append(argv[i + 1])
                    i += 1
            else:
                if not eq:
                    if i + 1 >= len(argv):
                        raise ConfigError(f"command line: override --{name} needs a value "
                                          f"(--{name} VALUE or --{name}=VALUE)")
                    value = argv[i + 1]
                    i += 1
                overrides.append(f"{name.replace('-', '_')}={value}")
        else:
            own.append(tok)
        i += 1
    return own, overrides


#: The forms ``--checkpoint`` takes (:func:`speechkit.train.checkpoint.resolve_checkpoint`), the same
#: help in every CLI that loads a model.
CHECKPOINT_CHOICES = ("best | latest | avgN (<checkpoints>/avgN.pt of speechkit-average-checkpoints --last N) | "
                      "a file name in <checkpoints> (e.g. ckpt-e0010-s00000500.pt) | a path to a checkpoint file")


def add_model_args(parser, *, option: str = "--model-dir", help: str, default: str | None = None,
                   metavar: str = "EXP") -> None:
    """Add the model options of a CLI that loads a trained model: ``option`` (required, also spelled
    with underscores) and ``--checkpoint`` (the forms of
    :func:`speechkit.train.checkpoint.resolve_checkpoint`, which the CLI calls with both values).

    Args:
        parser: an ``argparse.ArgumentParser``.
        option: the model option's name (``--model-dir``; ``--inverter-dir`` for the inverter).
        help: what the model is (``"experiment dir of speechkit-train rnnt"``); the help adds that a
            checkpoint file is accepted too.
        default: ``--checkpoint``'s default (``None``: best, else the latest).
        metavar: the model option's metavar.
    """
    names = [option] + ([option.replace("-", "_").replace("__", "--", 1)] if "-" in option[2:] else [])
    parser.add_argument(*names, dest=option[2:].replace("-", "_"), required=True, metavar=metavar,
                        help=f"{help} (or a checkpoint file)")
    shown = "best, else the latest" if default is None else default
    parser.add_argument("--checkpoint", default=default, metavar="NAME",
                        help=f"checkpoint of {metavar}: {CHECKPOINT_CHOICES} (default: {shown})")


def _named_pairs(items: Named | None) -> list:
    if items is None:
        return []
    return list(items.items()) if hasattr(items, "items") else list(items)


def setup_logging(log_file: str | os.PathLike | None = None, verbose: bool = False, *,
                  inputs: Named | None = None, input_dirs: Named | None = None, outputs: Named | None = None) -> None:
    """Log ``time level name: message`` to stderr and, if given, append to ``log_file``.

    ``log_file`` is an output like any other (:func:`speechkit.utils.outputs.check_output_files`, checked
    before it is opened): never one of ``inputs`` or ``outputs``, a file the tables of ``input_dirs`` read,
    nor a table of an input dir or of any data dir (``--log-file data/train/text`` appended log lines to
    the transcripts).

    Args:
        log_file: the ``--log-file`` (``None``: stderr only).
        verbose: DEBUG level (else INFO).
        inputs, input_dirs: what the tool reads, as :func:`~speechkit.utils.outputs.check_output_files`
            takes them.
        outputs: the tool's other output files (``{"--json": ...}``): the log may be none of them.

    Raises:
        OutputOverlapError: ``log_file`` would append to what the tool reads or writes (names both).
        WriteError: ``log_file`` cannot be opened for appending (``cannot write PATH: reason``).
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        check_output_files([*_named_pairs(outputs), ("--log-file", log_file)], inputs=inputs, input_dirs=input_dirs)
        ensure_writable_dir(os.path.dirname(os.path.abspath(log_file)))
        try:
            handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
        except OSError as e:
            raise WriteError(e.errno or 0, e.strerror or str(e), str(log_file)) from None
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def os_error_message(e: OSError) -> str:
    """One line for an ``OSError``: ``PATH: reason`` (``cannot write PATH: reason`` for a WriteError).

    Errors raised with a message of their own (``FileNotFoundError("x: no features ...")``) keep it.
    """
    if isinstance(e, WriteError) or e.strerror is None:
        return str(e)
    if e.filename is not None:
        two = f" -> {e.filename2}" if getattr(e, "filename2", None) else ""
        return f"{e.filename}{two}: {e.strerror}"
    return e.strerror


def run_main(prog: str, body: Callable[[], int | None]) -> int:
    """Run ``body``; turn expected failures into ``prog: error: message`` and exit status 1.

    Handled: :class:`DataError`, :class:`ConfigError`, ``ValueError`` (all carry a message
    naming the file/line/key); any ``OSError`` (a file that cannot be read or written, a
    directory that is a file: ``prog: error: cannot write PATH: Permission denied`` for a
    :class:`~speechkit.utils.fileio.WriteError`, else ``prog: error: PATH: reason``).
    ``KeyboardInterrupt`` exits 130. Anything else is a bug and keeps its traceback.
    """
    try:
        rc = body()
        return 0 if rc is None else int(rc)
    except (DataError, ConfigError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{prog}: error: {os_error_message(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
