"""The shell helpers behind the recipes' option checks: parse_options.sh's $cmdline_options and its
refusal of internal variables, stage_setup.sh's setup_restore (an option given explicitly is compared
whatever its value), recipe_common.sh's check_stages and option_given (issue 23, items 13 and 14), and its log, check_db_root
and guess_corpus, the pieces the recipes' run.sh shared (issue 20, item 6)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

UTILS = Path(__file__).resolve().parents[3] / "utils"

PREAMBLE = f"""set -euo pipefail
stage=0
stop_stage=100
corpus=mini
db_root=
mini_sentences=150
setup_keys="corpus db_root mini_sentences"
help_message="Usage: demo"
. {UTILS}/parse_options.sh
. {UTILS}/recipe_common.sh
. {UTILS}/stage_setup.sh
"""


def bash(script: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """bash -c PREAMBLE+script with args as the options ($0 is 'demo')."""
    return subprocess.run(["bash", "-c", PREAMBLE + script, "demo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=30)


# ------------------------------------------------------------------------- parse_options.sh
def test_cmdline_options_lists_the_options_given_whatever_their_value(tmp_path):
    r = bash('echo "[$cmdline_options]"', "--mini-sentences", "150", "--stage=0", "--corpus", "mini", "--stage", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[mini_sentences stage corpus]"  # the defaults given explicitly count; once each
    assert bash('echo "[$cmdline_options]"').stdout.strip() == "[]"
    conf = tmp_path / "my.conf"
    conf.write_text("# a config file\ndb_root=/x\n  mini_sentences=30  # indented\n")
    r = bash('echo "[$cmdline_options] $db_root $mini_sentences"', "--config", str(conf), "--stage", "1")
    assert r.stdout.strip() == "[db_root mini_sentences stage] /x 30"


@pytest.mark.parametrize("name", ["setup_keys", "help_message", "cmdline_options", "default_corpus", "train_cmd",
                                  "cmd_backend", "PATH", "HOME", "_x"])
def test_internal_variables_and_the_environment_are_not_options(name):
    """--setup_keys '' used to switch off the contradiction check of stage_setup.sh."""
    script = (f"setup_keys=corpus; help_message=Usage; default_corpus=mini; train_cmd=run.pl; cmd_backend=local; "
              f"_x=1; PATH=$PATH; HOME=$HOME\n. {UTILS}/parse_options.sh\necho ran")
    for value in ("", "x"):
        r = subprocess.run(["bash", "-c", script, "demo", f"--{name}", value], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 1 and r.stdout == "", r.stdout
        assert r.stderr.startswith(f"demo: unknown option --{name}"), r.stderr


def test_help_still_works_and_options_still_do():
    r = bash('echo "$stage $corpus"', "--help")
    assert r.returncode == 0 and r.stdout == "Usage: demo\n"
    assert bash('echo "$stage $corpus"', "--stage", "3", "--corpus", "x").stdout == "3 x\n"


# ----------------------------------------------------------------------------- stage_setup.sh
def write_setup(tmp_path: Path) -> Path:
    (tmp_path / "db").mkdir()
    setup = tmp_path / ".setup"
    setup.write_text(f"corpus=mini\ndb_root={tmp_path / 'db'}\nmini_sentences=30\n")
    return setup


@pytest.mark.parametrize("args,option", [(["--mini_sentences", "150"], "--mini_sentences 150"),
                                         (["--corpus", "mini", "--mini_sentences", "150"], "--mini_sentences 150"),
                                         (["--db_root", ""], "--db_root  contradicts"),
                                         (["--corpus", "msc"], "--corpus msc")])
def test_an_option_given_explicitly_is_compared_with_the_setup_whatever_its_value(tmp_path, args, option):
    """--mini_sentences 150 (the default) after a setup with 30 was taken for 'not given' and replaced by 30."""
    setup = write_setup(tmp_path)
    r = bash(f'setup_restore {setup} $setup_keys; echo "$mini_sentences"', *args)
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert option in r.stderr and f"contradicts {setup}" in r.stderr, r.stderr


def test_options_not_given_or_equal_to_the_setup_take_the_saved_values(tmp_path):
    setup = write_setup(tmp_path)
    script = f'setup_restore {setup} $setup_keys; echo "$corpus $db_root $mini_sentences"'
    expected = f"mini {tmp_path / 'db'} 30\n"
    for args in ([], ["--mini_sentences", "30", "--corpus", "mini"], ["--db_root", "db"], ["--db_root", "./db/"]):
        r = bash(script, *args, cwd=tmp_path)  # a relative --db_root naming the saved folder is the same
        assert r.returncode == 0 and r.stdout == expected, (args, r.stderr)


# ---------------------------------------------------------------------------- recipe_common.sh
@pytest.mark.parametrize("args,message", [
    (["--stage", "abc"], "demo: --stage abc: not a stage number (this recipe's stages are 0..6)"),
    (["--stage", "-1"], "demo: --stage -1: not a stage number (this recipe's stages are 0..6)"),
    (["--stage", ""], "demo: --stage : not a stage number"),
    (["--stop_stage", "2x"], "demo: --stop_stage 2x: not a stage number"),
    (["--stage", "7"], "demo: --stage 7: no such stage (this recipe's stages are 0..6)"),
    (["--stop_stage", "7"],
     "demo: --stop_stage 7: no such stage (this recipe's stages are 0..6; 100 or more: to the end)"),
    (["--stop_stage", "99"], "demo: --stop_stage 99: no such stage"),
    (["--stage", "4", "--stop_stage", "3"], "demo: --stop_stage 3 is before --stage 4: no stage would run"),
])
def test_check_stages_refuses_bad_stage_numbers_naming_the_option(args, message):
    r = bash("check_stages 6; echo ran", *args)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), r.stderr  # no 'integer expression expected'


@pytest.mark.parametrize("args,expected", [([], "0 100"), (["--stage", "6"], "6 100"),
                                           (["--stage", "08", "--stop_stage", "09"], None),
                                           (["--stage", "2", "--stop_stage", "2"], "2 2"),
                                           (["--stage", "03", "--stop_stage", "010000"], "3 10000"),
                                           (["--stop_stage", "0"], "0 0")])
def test_check_stages_accepts_the_range_and_to_the_end(args, expected):
    r = bash('check_stages 6; echo "$stage $stop_stage"', *args)
    if expected is None:   # 08 is 8 (not an octal error): beyond the last stage
        assert r.returncode == 1 and "--stage 8: no such stage" in r.stderr, r.stderr
    else:
        assert r.returncode == 0 and r.stdout == f"{expected}\n", r.stderr


def test_option_given():
    r = bash('for o in corpus stage db_root; do option_given $o && echo "$o yes" || echo "$o no"; done',
             "--corpus", "mini", "--db_root", "")
    assert r.stdout.split("\n")[:3] == ["corpus yes", "stage no", "db_root yes"]


def test_log_names_the_stage():
    r = bash('log 3 "training" "the models"')
    assert r.returncode == 0 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[stage 3\] training the models\n", r.stdout)


HINT = "(--corpus mini --db_root DIR synthesizes the mini corpus into a new DIR)"


@pytest.mark.parametrize("args,message", [
    ([], None), (["--db_root", "{tmp}"], None),                       # none given, or a directory
    (["--corpus", "mini", "--db_root", "{new}"], None),                # a new folder for mini
    (["--db_root", "{new}"], f"demo: --db_root {{new}}: no such directory {HINT}"),   # mini by default
    (["--corpus", "", "--db_root", "{new}"], f"demo: --db_root {{new}}: no such directory {HINT}"),
    (["--corpus", "msc", "--db_root", "{new}"], "demo: --db_root {new}: no such directory"),
])
def test_check_db_root(tmp_path, args, message):
    fill = {"tmp": str(tmp_path), "new": str(tmp_path / "typo")}
    r = bash("check_db_root; echo ran", *[a.format(**fill) for a in args])
    if message is None:
        assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
    else:
        assert r.returncode == 1 and r.stdout == "" and r.stderr == message.format(**fill) + "\n"
    assert not (tmp_path / "typo").exists()


def test_guess_corpus(tmp_path):
    guess = 'corpus=; guess_corpus vctk "a VCTK root (wav48*/)" wav48_silence_trimmed/ wav48/; echo "$corpus"'
    def run(db_root, *given):
        return bash(guess.replace("corpus=;", f"corpus={given[0] if given else ''};"), "--db_root", str(db_root))
    assert bash(guess).stdout == "mini\n"                                 # no --db_root
    db = tmp_path / "db"
    db.mkdir()
    r = run(db)
    assert r.returncode == 1 and r.stderr == (
        f"demo: --db_root {db}: neither the shared data folder (msc_malayalam/), a VCTK root (wav48*/) nor a mini "
        "corpus; give --corpus (--corpus mini synthesizes the mini corpus there)\n")
    (db / "wav48").write_text("")                                       # a file where a folder is meant
    assert run(db).returncode == 1
    (db / "wav48").unlink()
    (db / "wav48").mkdir()
    assert run(db).stdout == "vctk\n"
    (db / "speech.tsv").write_text("")
    assert run(db).stdout == "msc\n"                                     # the shared data folder first
    (db / ".complete").write_text("")
    assert run(db).stdout == "mini\n"                                    # mini synthesized there before
    assert run(db, "ljspeech").stdout == "ljspeech\n"                    # --corpus given: kept
    r = bash('corpus=; guess_corpus ljspeech "an LJSpeech root (metadata.csv)" metadata.csv; echo "$corpus"',
             "--db_root", str(tmp_path))
    assert r.returncode == 1 and "an LJSpeech root (metadata.csv)" in r.stderr
    (tmp_path / "metadata.csv").write_text("")
    assert bash('corpus=; guess_corpus ljspeech "x" metadata.csv; echo "$corpus"',
                "--db_root", str(tmp_path)).stdout == "ljspeech\n"
