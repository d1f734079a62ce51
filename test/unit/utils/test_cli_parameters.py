"""Flags live in bin/ (issue 37 item 4): the library names its parameters, each CLI spells them as its flags."""
from __future__ import annotations

import argparse
import ast
import pickle
import re

import pytest

from speechkit.utils.cli import ConfigError, error_message, make_parser, parameter_flags, run_main
from speechkit.utils.errors import ParameterError, naming_parameters, parameter_template, spell_parameters
from speechkit.utils.fileio import DataError


def _parser() -> argparse.ArgumentParser:
    p = make_parser(None, prog="speechkit-x")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("data_dir")                                   # a positional without a metavar: its dest
    p.add_argument("--num-wavs", type=int, default=0)            # declared with '-': dest num_wavs
    p.add_argument("--utt-list", dest="utt_list_file")           # a dest that differs from the flag
    p.add_argument("--frame_shift", "--hop", type=float)         # first long option as declared
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def test_parameter_flags_maps_dests_to_the_declared_option():
    flags = parameter_flags(_parser())
    assert flags["num_wavs"] == "--num-wavs"
    assert flags["utt_list_file"] == "--utt-list" and "utt_list" not in flags
    assert flags["frame_shift"] == "--frame_shift"
    assert flags["verbose"] == "--verbose"
    assert flags["out_dir"] == "OUT_DIR" and flags["data_dir"] == "data_dir"
    assert "help" not in flags
    # flags= adds a parameter that is no dest, and overrides one
    more = parameter_flags(_parser(), {"model_dir": "--inverter-dir", "num_wavs": "--wavs"})
    assert more["model_dir"] == "--inverter-dir" and more["num_wavs"] == "--wavs"


def test_parameter_flags_reads_sub_parsers():
    p = make_parser(None, prog="speechkit-y")
    p.add_argument("--log-file")
    sub = p.add_subparsers(dest="corpus")
    a = sub.add_parser("a")
    a.add_argument("--languages")
    b = sub.add_parser("b")
    b.add_argument("--dev-fraction", dest="dev", type=float)
    assert parameter_flags(p) == {"log_file": "--log-file", "corpus": "corpus", "languages": "--languages",
                                  "dev": "--dev-fraction"}


def test_a_library_error_outside_a_cli_names_the_parameter():
    e = ParameterError("num_wavs", "`num_wavs` must be >= 0, got -1")
    assert str(e) == "num_wavs must be >= 0, got -1"
    assert isinstance(e, ConfigError) and isinstance(e, ValueError) and e.param == "num_wavs"
    assert str(ParameterError("num_wavs", "must be >= 0")) == "num_wavs: must be >= 0"   # no reference: a prefix
    assert str(ParameterError("unit", "`unit=bpe` needs `vocab_size`")) == "unit=bpe needs vocab_size"
    with pytest.raises(ValueError, match=r"^num_wavs must be >= 0, got -1$"):
        raise e


def test_run_main_spells_parameters_as_the_parser_flags(capsys):
    parser = _parser()

    def fail(error):
        def body():
            raise error
        return body

    cases = [
        (ParameterError("num_wavs", "`num_wavs` must be >= 0, got -1"), "--num-wavs must be >= 0, got -1"),
        (ParameterError("num_wavs", "must be >= 0"), "--num-wavs: must be >= 0"),
        # a dest that differs from its flag; a positional by its metavar
        (ParameterError("utt_list_file", "`utt_list_file` x: no such file; `out_dir` y"), "--utt-list x: no such file; OUT_DIR y"),
        # a parameter this CLI has no flag for stays bare; a value follows the flag
        (ParameterError("window", "`hop` 3: only with windows (`window=0` encodes whole utterances)"),
         "hop 3: only with windows (window=0 encodes whole utterances)"),
        (naming_parameters(DataError("d: one column only (`frame_shift=0.01`)")), "d: one column only (--frame_shift 0.01)"),
        (naming_parameters(FileNotFoundError("m: missing (give `verbose`; see `espeak-ng --voices`)")),
         "m: missing (give --verbose; see `espeak-ng --voices`)"),
        (ValueError("--num-wavs is untouched without references"), "--num-wavs is untouched without references"),
    ]
    for error, line in cases:
        assert run_main("speechkit-x", fail(error), parser=parser) == 1
        assert capsys.readouterr().err == f"speechkit-x: error: {line}\n"
    # flags=: a parameter, or a parameter with a value, that no option has as its dest
    e = ParameterError("switch_off_tau", "`switch_off_tau` needs `mode=lid_free`; `model_dir` x")
    assert run_main("speechkit-x", fail(e), parser=parser, flags={"mode=lid_free": "--lid-free",
                                                                   "model_dir": "--inverter-dir"}) == 1
    assert capsys.readouterr().err == "speechkit-x: error: switch_off_tau needs --lid-free; --inverter-dir x\n"
    # without a parser: the library's names
    assert run_main("speechkit-x", fail(ParameterError("nj", "`nj` must be >= 1, got 0"))) == 1
    assert capsys.readouterr().err == "speechkit-x: error: nj must be >= 1, got 0\n"


def test_marked_errors_keep_their_type_message_and_pickle():
    e = naming_parameters(FileNotFoundError("x/utt2lang: missing (or use `mode=lid_free`)"))
    assert isinstance(e, FileNotFoundError) and str(e) == "x/utt2lang: missing (or use mode=lid_free)"
    assert error_message(e, {"mode=lid_free": "--lid-free"}) == "x/utt2lang: missing (or use --lid-free)"
    for err in (e, ParameterError("nj", "`nj` must be >= 1, got 0")):  # errors of worker processes come back pickled
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert parameter_template(back) == parameter_template(err)
    assert parameter_template(ValueError("plain")) is None
    assert spell_parameters("`a` and `b=1` and `not a ref`", {"a": "--a"}.get) == "--a and b=1 and `not a ref`"


#: A flag in a library message is allowed only as part of another command's line that the message tells the
#: user to run (``speechkit-make-units --per-language``, ``espeak-ng --voices``, ``utils/copy_data_dir.sh ...``).
_COMMAND = re.compile(r"(speechkit-[a-z-]+|espeak-ng|utils/\w+\.sh)[^\n]*?--[a-z]")
_FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _error_strings(tree: ast.AST):
    """``(line, text)`` of the string constants inside every ``raise X(...)`` and ``...Error(...)`` call."""
    for node in ast.walk(tree):
        target = node.exc if isinstance(node, ast.Raise) else node if isinstance(node, ast.Call) and (
            getattr(node.func, "id", None) or getattr(node.func, "attr", "")).endswith(("Error", "Exception")) else None
        if target is not None:
            for c in ast.walk(target):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    yield c.lineno, c.value


def test_library_errors_name_no_flags(repo_root):
    """Flags live in bin/: an error raised outside speechkit/bin/ names parameters (issue 37 item 4), a flag
    only inside another command it tells the user to run. 103 such errors before, none after."""
    pkg = repo_root / "speechkit"
    found = []
    for path in sorted(pkg.rglob("*.py")):
        if path.relative_to(pkg).parts[0] == "bin":
            continue
        for line, text in _error_strings(ast.parse(path.read_text(encoding="utf-8"))):
            if _FLAG.search(text) and not _COMMAND.search(text):
                found.append(f"{path.relative_to(repo_root)}:{line}: {text.strip()[:80]}")
    assert not found, "errors naming a CLI flag outside bin/ (name the parameter: speechkit.utils.errors):\n" + \
        "\n".join(found)
