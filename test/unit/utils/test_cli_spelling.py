"""Every speechkit-* CLI takes each multi-word option as --foo-bar and as --foo_bar (issue 39, item 7).

The CLIs are those of setup.py's console_scripts; each parser is caught as its ``main(["--help"])``
builds it (``make_parser`` recorded), sub-parsers included, and every long option with a '-' or '_'
in its name is parsed in each declared spelling (the old accepted ones) and in the other one.
"""
from __future__ import annotations

import argparse
import ast
import copy
import importlib
from pathlib import Path

import numpy as np
import pytest

from speechkit.utils import cli

REPO = Path(__file__).resolve().parents[3]


def _console_scripts() -> dict[str, str]:
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CLIS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no CLIS dict")


CLIS = _console_scripts()


def _parsers_of(module, monkeypatch, capsys) -> list[argparse.ArgumentParser]:
    """The parser(s) ``module.main(["--help"])`` builds, and their sub-parsers."""
    made: list[argparse.ArgumentParser] = []

    def recording(*a, **k):
        p = cli.make_parser(*a, **k)
        made.append(p)
        return p

    monkeypatch.setattr(module, "make_parser", recording)
    with pytest.raises(SystemExit) as e:
        module.main(["--help"])
    assert e.value.code == 0
    capsys.readouterr()
    out = []
    todo = list(made)
    while todo:
        p = todo.pop()
        out.append(p)
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                todo.extend(a.choices.values())
    return out


def _values(action: argparse.Action) -> list[str]:
    n = action.nargs
    if n == 0:
        return []
    if isinstance(n, int):
        return ["V"] * n
    return ["V"]  # None, '?', '*', '+'


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    argv: list[str] = []
    for a in parser._actions:
        if a.option_strings or isinstance(a, argparse._SubParsersAction):
            continue
        n = a.nargs
        argv += [] if n in ("?", "*", argparse.REMAINDER) else ["P"] * (n if isinstance(n, int) else 1)
    return argv


def _untyped(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A copy that takes any string for any option (no type, no choices, nothing required)."""
    p = copy.deepcopy(parser)
    for a in p._actions:
        a.type = None
        a.choices = None if not isinstance(a, argparse._SubParsersAction) else a.choices
        a.required = False
    return p


def _multiword(parser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if any(s.startswith("--") and ("-" in s[2:] or "_" in s[2:]) for s in a.option_strings)
            and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


def test_setup_py_lists_the_clis():
    assert len(CLIS) >= 30 and CLIS["speechkit-score-abx"] == "score_abx"


@pytest.mark.parametrize("prog", sorted(CLIS))
def test_every_multiword_option_takes_both_spellings(prog, monkeypatch, capsys):
    module = importlib.import_module(f"speechkit.bin.{CLIS[prog]}")
    parsers = _parsers_of(module, monkeypatch, capsys)
    assert all(isinstance(p, cli.SpeechkitParser) for p in parsers), prog
    for parser in parsers:
        p = _untyped(parser)
        pos = _positionals(p)
        for action in _multiword(p):
            declared = [s for s in action.option_strings if s.startswith("--")]
            spellings = dict.fromkeys(x for s in declared for x in cli._respellings(s))
            vals = _values(action)
            for s in declared:  # every declared spelling (the old ones) and its other spelling
                want = p.parse_args(pos + [s, *vals])
                assert want != p.parse_args(pos) or getattr(want, action.dest) == action.default
                for alt in cli._respellings(s):
                    for argv in ([alt, *vals], [f"{alt}=V"] if vals == ["V"] else None):
                        if argv is not None:
                            got = p.parse_args(pos + argv)
                            assert got == want, f"{prog} {' '.join(argv)}: {got} != {want}"
            split = getattr(module, "split_overrides", None)
            if split is not None:  # train/align/train-continual: the option is their own, not a config override
                for s in spellings:
                    own, overrides = split([s, *_values(action)])
                    assert overrides == [] and own[0] == s, f"{prog}: {s} taken for a config override"
    CHECKED[prog] = {s for parser in parsers for a in _multiword(parser) for s in a.option_strings}


#: prog -> the multi-word options checked above (filled as the parametrized test runs).
CHECKED: dict[str, set[str]] = {}


def test_the_issue_s_options_were_among_those_checked():
    """The options issue 39 names, on the CLIs that have them (runs after the walk above)."""
    named = {"speechkit-prepare-corpus": "--sample-rate", "speechkit-score-abx": "--frame-shift",
             "speechkit-score-wer": "--trn-dir", "speechkit-make-abx-items": "--min-duration",
             "speechkit-compute-feats": "--max-jobs", "speechkit-train": "--exp-dir"}
    if len(CHECKED) < len(CLIS):
        pytest.skip("run with the walk over every CLI")
    for prog, opt in named.items():
        assert opt in CHECKED[prog], (prog, opt)


def test_the_issue_s_command_line(tmp_path, capsys):
    """``--frame_shift S`` was 'unrecognized arguments' (the value then taken for a positional)."""
    from speechkit.bin import score_bitrate

    d = tmp_path / "units"
    d.mkdir()
    np.savetxt(d / "a.txt", [[1, 2], [3, 4], [1, 2], [5, 6]])
    outs = []
    for argv in (["--frame-shift", "0.02"], ["--frame_shift", "0.02"], ["--frame_shift=0.02"]):
        assert score_bitrate.main([str(d), *argv]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] and "duration: 0.08 s" in outs[0]


def test_help_shows_one_spelling_and_says_both_work(monkeypatch, capsys):
    from speechkit.bin import train

    text = train.build_parser().format_help()
    assert "--exp-dir DIR" in text and "--exp_dir" not in text and "--print_config" not in text
    assert text.rstrip().endswith(cli.SPELLING_NOTE)


def test_respelling_leaves_values_unknown_options_and_the_rest_alone():
    p = cli.make_parser(None, prog="x")
    p.add_argument("--frame-shift")
    p.add_argument("--old_style")
    p.add_argument("rest", nargs="*")
    assert p.respell(["--frame_shift", "a_b", "--old-style=c-d", "--", "--frame_shift"]) == \
        ["--frame-shift", "a_b", "--old_style=c-d", "--", "--frame_shift"]
    assert p.parse_args(["--old-style", "1", "--frame_sh", "2"]) == \
        argparse.Namespace(frame_shift="2", old_style="1", rest=[])
    with pytest.raises(SystemExit):
        p.parse_args(["--frame_shiftx", "1"])  # still unknown, named as written
