"""Shared plumbing for the ``speechkit-*`` command-line tools.

Every CLI module in :mod:`speechkit.bin` defines ``main(argv=None) -> int`` and wraps its body with
:func:`run_main`, so that bad input ends in one clear line on stderr and a non-zero exit instead
of a traceback::

    def main(argv=None) -> int:
        parser = make_parser(__doc__)
        parser.add_argument(...)
        args = parser.parse_args(argv)
        return run_main("speechkit-foo", lambda: _run(args), parser=parser)

The library names its parameters, never flags (:mod:`speechkit.utils.errors`); ``run_main`` spells
the parameters an error names as the parser's flags (``nj`` -> ``--nj``).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import logging
import math
import os
import sys
from typing import Callable, Mapping

# ConfigError and ParameterError are defined in speechkit.utils.errors and imported from here too
from speechkit.utils.errors import ConfigError, ParameterError, parameter_template, spell_parameters  # noqa: F401
from speechkit.utils.fileio import DataError, WriteError, ensure_writable_dir
from speechkit.utils.outputs import Named, check_output_files


#: The line ``--help`` ends with when a parser has a multi-word option.
SPELLING_NOTE = "Every multi-word option may also be written with '_' for '-' (--foo_bar is --foo-bar)."


def _respellings(option: str) -> tuple[str, str]:
    """``--foo_bar`` / ``--foo-bar``: the two spellings of a long option (the ``--`` kept)."""
    body = option[2:]
    return "--" + body.replace("_", "-"), "--" + body.replace("-", "_")


def _shown_option_strings(option_strings: list[str]) -> list[str]:
    """The option strings ``--help`` shows: a spelling alias (``--exp_dir`` next to ``--exp-dir``) left out."""
    shown: list[str] = []
    seen: set[str] = set()
    for s in option_strings:
        key = _respellings(s)[0] if s.startswith("--") else s
        if key not in seen:
            seen.add(key)
            shown.append(s)
    return shown


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``RawDescriptionHelpFormatter`` that shows one spelling of each option (the first declared)."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = _shown_option_strings(list(action.option_strings))
        if len(shown) != len(action.option_strings):
            action = copy.copy(action)
            action.option_strings = shown
        return super()._format_action_invocation(action)


class SpeechkitParser(argparse.ArgumentParser):
    """The ``ArgumentParser`` of every ``speechkit-*`` CLI (:func:`make_parser`): each long option is
    accepted as ``--foo-bar`` and as ``--foo_bar``, whichever way it was declared, as the recipes'
    ``utils/parse_options.sh`` does; ``--help`` shows the declared spelling only.

    A token ``--x_y`` (or ``--x_y=VALUE``) that is not itself an option of the parser is read as its
    other spelling ``--x-y`` when that is one (or, with ``allow_abbrev``, a prefix of one); tokens after
    a bare ``--`` are left alone. Sub-parsers (``add_subparsers``) are of this class too. Without
    this, ``--frame_shift 0.02`` on a parser declaring ``--frame-shift`` was an unknown option and
    argparse took its value for a positional ("unrecognized arguments").
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def respell(self, args: list[str]) -> list[str]:
        """``args`` with each long option written in a spelling this parser declares (see the class)."""
        known = self._option_string_actions
        out: list[str] = []
        for i, tok in enumerate(args):
            if tok == "--":
                out.extend(args[i:])
                break
            if tok.startswith("--") and len(tok) > 2:
                name, eq, value = tok.partition("=")
                if name not in known:
                    alt = self._respelled(name)
                    if alt is not None:
                        tok = alt + eq + value
            out.append(tok)
        return out

    def _respelled(self, name: str) -> str | None:
        candidates = [c for c in _respellings(name) if c != name]
        for c in candidates:
            if c in self._option_string_actions:
                return c
        if self.allow_abbrev:
            longs = [o for o in self._option_string_actions if o.startswith("--")]
            if not any(o.startswith(name) for o in longs):
                for c in candidates:
                    if any(o.startswith(c) for o in longs):
                        return c
        return None

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self.respell(args), namespace)

    def format_help(self) -> str:
        text = super().format_help()
        if any(o.startswith("--") and ("-" in o[2:] or "_" in o[2:]) for o in self._option_string_actions):
            text = text.rstrip("\n") + "\n\n" + SPELLING_NOTE + "\n"
        return text


def make_parser(doc: str | None, prog: str | None = None) -> SpeechkitParser:
    """The parser of a ``speechkit-*`` CLI: a :class:`SpeechkitParser` (``--foo-bar`` == ``--foo_bar``)
    whose description is ``doc`` (the module docstring, shown as written)."""
    return SpeechkitParser(prog=prog, description=doc)


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


class _LogFileHandler(logging.FileHandler):
    """The ``--log-file`` handler: a record that cannot be written (a full disk, an I/O error) is said once on
    stderr, naming the file, and the file is left alone from then on (the log goes on on stderr), instead of
    logging's traceback for every record."""

    failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        if self.failed:
            return
        self.failed = True
        err = sys.exc_info()[1]
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        with contextlib.suppress(Exception):
            self.close()
        print(f"WARNING: cannot write --log-file {self.baseFilename}: {reason}; the log goes on on stderr only",
              file=sys.stderr)


def setup_logging(log_file: str | os.PathLike | None = None, verbose: bool = False, *,
                  inputs: Named | None = None, input_dirs: Named | None = None, outputs: Named | None = None,
                  output_dirs: Named | None = None, output_data_dirs: Named | None = None) -> None:
    """Log ``time level name: message`` to stderr and, if given, append to ``log_file``.

    ``log_file`` is an output like any other (:func:`speechkit.utils.outputs.check_output_files`, checked
    before it is opened): never one of ``inputs`` or ``outputs``, a file the tables of ``input_dirs`` read,
    nor a table of an input dir or of any data dir (``--log-file data/train/text`` appended log lines to
    the transcripts), nor inside an output dir written whole nor a table of an output data dir. A log
    file that cannot be written later (a full disk) is said once on stderr, naming it, and left: the log
    goes on on stderr (a traceback per record before).

    Args:
        log_file: the ``--log-file`` (``None``: stderr only).
        verbose: DEBUG level (else INFO).
        inputs, input_dirs: what the tool reads, as :func:`~speechkit.utils.outputs.check_output_files`
            takes them.
        outputs: the tool's other output files (``{"--json": ...}``): the log may be none of them.
        output_dirs: the output dirs the tool writes whole (``{"OUT_DIR": ...}``): the log may not lie inside.
        output_data_dirs: the data dirs the tool writes tables into: the log may not be one of those tables.

    Raises:
        OutputOverlapError: ``log_file`` would append to what the tool reads or writes (names both).
        WriteError: ``log_file`` cannot be opened for appending (``cannot write PATH: reason``).
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        check_output_files([*_named_pairs(outputs), ("--log-file", log_file)], inputs=inputs, input_dirs=input_dirs,
                           output_dirs=output_dirs, output_data_dirs=output_data_dirs)
        ensure_writable_dir(os.path.dirname(os.path.abspath(log_file)))
        try:
            handlers.append(_LogFileHandler(log_file, encoding="utf-8"))
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


def parameter_flags(parser: argparse.ArgumentParser, flags: Mapping[str, str] | None = None) -> dict[str, str]:
    """How a CLI spells the library's parameters: ``{dest: option}`` from ``parser``'s actions.

    An option's parameter is its ``dest`` (``--num-wavs`` -> ``num_wavs``; ``--utt-list`` with
    ``dest="utt_list_file"`` -> ``utt_list_file``), spelled by its first long option string as declared
    (``--num-wavs``; the ``--num_wavs`` respelling is an alias); a positional's (a sub-command's) is its
    metavar (``OUT_DIR``), else its dest. The options of sub-parsers (``add_subparsers``) count too, after the
    parser's own. ``flags`` (``{"model_dir": "--inverter-dir", "mode=lid_free": "--lid-free"}``) adds or
    overrides names where a library parameter is not an option's dest.
    """
    out: dict[str, str] = {}
    subs: list[argparse.ArgumentParser] = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            subs.extend(a.choices.values())
        if isinstance(a, argparse._HelpAction) or a.dest in (None, argparse.SUPPRESS):
            continue
        elif a.option_strings:
            longs = [s for s in a.option_strings if s.startswith("--")]
            out.setdefault(a.dest, (longs or a.option_strings)[0])
        else:
            out.setdefault(a.dest, a.metavar if isinstance(a.metavar, str) else a.dest)
    for sub in subs:
        for dest, flag in parameter_flags(sub).items():
            out.setdefault(dest, flag)
    out.update(flags or {})
    return out


def error_message(e: BaseException, flags: Mapping[str, str] | None = None) -> str:
    """The line a CLI prints for ``e``: its message, the parameters it names
    (:func:`~speechkit.utils.errors.parameter_template`) spelled by ``flags`` (:func:`parameter_flags`;
    a parameter without a flag stays bare), an ``OSError`` as :func:`os_error_message` says it."""
    template = parameter_template(e)
    if template is not None:
        return spell_parameters(template, (flags or {}).get)
    return os_error_message(e) if isinstance(e, OSError) else str(e)


def run_main(prog: str, body: Callable[[], int | None], *, parser: argparse.ArgumentParser | None = None,
             flags: Mapping[str, str] | None = None) -> int:
    """Run ``body``; turn expected failures into ``prog: error: message`` and exit status 1.

    Handled: :class:`DataError`, :class:`ConfigError`, ``ValueError`` (all carry a message
    naming the file/line/key); any ``OSError`` (a file that cannot be read or written, a
    directory that is a file: ``prog: error: cannot write PATH: Permission denied`` for a
    :class:`~speechkit.utils.fileio.WriteError`, else ``prog: error: PATH: reason``).
    ``KeyboardInterrupt`` exits 130. Anything else is a bug and keeps its traceback.

    An error naming library parameters (:class:`~speechkit.utils.errors.ParameterError`, or marked
    by :func:`~speechkit.utils.errors.naming_parameters`) has them spelled as this CLI's flags:
    ``parser``'s options by their dests (:func:`parameter_flags`), plus ``flags`` for a parameter
    that is no option's dest: the library's ``num_wavs must be >= 0, got -1`` is
    ``prog: error: --num-wavs must be >= 0, got -1``.
    """
    names = parameter_flags(parser, flags) if parser is not None else dict(flags or {})
    try:
        rc = body()
        return 0 if rc is None else int(rc)
    except (DataError, ConfigError, ValueError, OSError) as e:
        print(f"{prog}: error: {error_message(e, names)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
