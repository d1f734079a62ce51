"""Every float option of every speechkit-* CLI refuses NaN and infinities at parse time (issue 38 case 13).

``type=float`` takes ``nan``/``inf``, which then pass every ``<`` / ``>`` range check downstream:
``score-abx --tolerance nan`` scored an item past the end of its file, ``embed-speakers --min-speech nan``
turned the minimum-speech filter off. The test walks the argparse parser of every console script of
setup.py (subcommands included), so a float option added later with ``type=float`` fails here.
"""
from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import pytest

from speechkit.utils.cli import nonnegative_float_or_inf

REPO = Path(__file__).resolve().parents[3]


def _cli_modules() -> dict[str, str]:
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CLIS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py: no CLIS table")


CLIS = _cli_modules()


class _Parsed(Exception):
    def __init__(self, parser):
        self.parser = parser


def _parser_of(module: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``main`` builds: its first parse call raises with the parser instead of parsing."""
    mod = importlib.import_module(f"speechkit.bin.{module}")

    def capture(self, *a, **k):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    try:
        mod.main([])
    except _Parsed as e:
        return e.parser
    raise AssertionError(f"speechkit.bin.{module}.main([]) never parsed its arguments")


def _options(parser: argparse.ArgumentParser, prefix: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{prefix}{name} ")
        elif callable(action.type):
            yield f"{prefix}{'/'.join(action.option_strings) or action.dest}", action.type


def _takes_a_float(convert) -> bool:
    try:
        return isinstance(convert("1.5"), float)
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False


def _refuses(convert, text: str) -> bool:
    try:
        convert(text)
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return True
    return False


def test_the_walk_sees_the_float_options(monkeypatch):
    """The walk finds the options it should (else the test below would pass by finding none)."""
    found = {f"{cli} {opt}" for cli, module in CLIS.items()
             for opt, convert in _options(_parser_of(module, monkeypatch)) if _takes_a_float(convert)}
    for expected in ("speechkit-score-abx --tolerance", "speechkit-embed-speakers --min-speech",
                     "speechkit-split-corpus --dev", "speechkit-compute-feats --batch-seconds"):
        assert expected in found, sorted(found)


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_float_options_refuse_non_finite(cli, monkeypatch):
    """NaN always; infinities unless the option's type is cli.nonnegative_float_or_inf, the one type for an
    option where inf means something of its own (asr-decode --switch-off-threshold inf: never switch off)."""
    bad = []
    for opt, convert in _options(_parser_of(CLIS[cli], monkeypatch)):
        if not _takes_a_float(convert):
            continue
        refused = ("nan", "NaN", "-inf") + (() if convert is nonnegative_float_or_inf else ("inf", "Infinity"))
        bad += [f"{cli} {opt} {text}" for text in refused if not _refuses(convert, text)]
    assert bad == [], f"taken (use speechkit.utils.cli.finite_float or a type built on it): {bad}"


def test_infinity_only_where_it_means_something(monkeypatch):
    allowed = [f"{cli} {opt}" for cli, module in CLIS.items() for opt, convert in _options(_parser_of(module, monkeypatch))
               if convert is nonnegative_float_or_inf]
    assert allowed == ["speechkit-asr-decode --switch-off-threshold"]
    assert nonnegative_float_or_inf("inf") == float("inf")


@pytest.mark.parametrize("module, argv, option", [
    ("score_abx", ["FEATS", "ITEMS", "--tolerance", "nan"], "--tolerance"),
    ("embed_speakers", ["DATA", "OUT", "--min-speech", "nan"], "--min-speech"),
    ("split_corpus", ["DATA", "OUT", "--dev", "inf", "--test", "0.1"], "--dev"),
    ("asr_decode", ["--model-dir", "EXP", "DATA", "OUT", "--blank-penalty", "nan"], "--blank-penalty"),
])
def test_the_probes_lines_exit_2_naming_the_option(tmp_path, capsys, module, argv, option):
    main = importlib.import_module(f"speechkit.bin.{module}").main
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / a) if a.isupper() else a for a in argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"error: argument {option}: must be a finite number, got '{argv[argv.index(option) + 1]}'"), err
    assert list(tmp_path.iterdir()) == []


def test_switch_off_threshold_nan(tmp_path, capsys):
    from speechkit.bin.asr_decode import main
    with pytest.raises(SystemExit) as e:
        main(["--model-dir", str(tmp_path / "e"), "--lid-free", "--switch-off-tau", "1", "--switch-off-threshold", "nan",
              str(tmp_path / "d"), str(tmp_path / "o")])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().endswith("argument --switch-off-threshold: must be >= 0 or inf, got 'nan'")
    assert list(tmp_path.iterdir()) == []
