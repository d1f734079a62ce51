"""The option handling of the four recipes' run.sh, without running any stage: a --db_root that does not
exist, --stage / --stop_stage out of range or not a number, an explicit option that contradicts
data/.setup whatever its value, internal variables given as options (issue 23, items 12-14).

Each recipe runs in a temporary folder of links to its files (nothing is written into egs/), with
local/prepare_mini.sh replaced by a stub that prints its arguments and fails: a run that gets as far
as the data preparation shows which corpus folder it would synthesize, in a few milliseconds."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EGS = Path(__file__).resolve().parents[2] / "egs"

# the last stage of each recipe, its mini_sentences default and the keys of its data/.setup
RECIPES = {
    "zerospeech2019": {"last": 6, "mini_sentences": "40",
                       "setup": {"corpus": "mini", "db_root": "{db}", "mini_speakers": "8", "mini_sentences": "30",
                                 "speed_perturb": "false"}},
    "tcstar_salad": {"last": 8, "mini_sentences": "150",
                     "setup": {"corpus": "mini", "db_root": "{db}", "num_crowd": "2", "mini_sentences": "30",
                               "lang": "en", "seed": "1"}},
    "vctk_continual": {"last": 8, "mini_sentences": "60",
                       "setup": {"corpus": "mini", "db_root": "{db}", "ljspeech_root": "", "num_continual": "4",
                                 "continual_speakers": "", "mini_speakers": "8", "mini_sentences": "30", "seed": "1",
                                 "num_test": "5", "num_dev": "3", "world_config": "conf/world.yaml",
                                 "align_args": ""}},
    "indic_multilingual": {"last": 6, "mini_sentences": "150", "mini_db": "db/mini_6x150_en_hi_ta_gu",
                           "setup": {"setup": "mini", "db_root": "", "local_prep": "", "mini_num_speakers": "6",
                                     "mini_sentences": "30", "mini_languages": "en,hi,ta,gu", "mini_test_utts": "30",
                                     "mini_dev_utts": "15"}},
}

STUB_PREPARE_MINI = """#!/usr/bin/env bash
echo "STUB prepare_mini.sh $*" >&2
exit 3
"""


def make_work(tmp_path: Path, name: str) -> Path:
    """tmp_path/recipe: links to the files of egs/<name>, local/prepare_mini.sh a stub."""
    src = EGS / name
    work = tmp_path / "recipe"
    (work / "local").mkdir(parents=True)
    for f in ("run.sh", "path.sh", "cmd.sh", "utils", "conf"):
        (work / f).symlink_to(src / f)
    for f in (src / "local").iterdir():
        (work / "local" / f.name).symlink_to(f)
    (work / "local/prepare_mini.sh").unlink()
    (work / "local/prepare_mini.sh").write_text(STUB_PREPARE_MINI)
    (work / "local/prepare_mini.sh").chmod(0o755)
    return work


@pytest.fixture(params=sorted(RECIPES))
def recipe(request, tmp_path):
    """(name, work dir) of each recipe (make_work)."""
    return request.param, make_work(tmp_path, request.param)


def run(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    return subprocess.run(["./run.sh", *args], cwd=work, env=env, capture_output=True, text=True, timeout=60)


def tree(root: Path) -> list[str]:
    """Every path under root (links not followed), relative: what a run created."""
    out = []
    for d, dirs, files in os.walk(root):  # links are listed, not followed
        out += [os.path.relpath(os.path.join(d, f), root) for f in dirs + files]
    return sorted(out)


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one line: no "integer expression expected" noise before it
    return lines[0]


def write_setup(name: str, work: Path) -> Path:
    """data/.setup as stage 0 writes it (one key=value a line), with mini_sentences=30."""
    db = work / "db" / "mini"
    db.mkdir(parents=True)
    setup = work / "data" / ".setup"
    setup.parent.mkdir()
    setup.write_text("".join(f"{k}={v.format(db=db)}\n" for k, v in RECIPES[name]["setup"].items()))
    return setup


# ------------------------------------------------------------------------------------ item 13: stages
@pytest.mark.parametrize("args,option", [
    (["--stage", "abc"], "--stage abc"),
    (["--stage", "-1"], "--stage -1"),
    (["--stage", "1.5"], "--stage 1.5"),
    (["--stop_stage", "x"], "--stop_stage x"),
    (["--stage", "{beyond}"], "--stage {beyond}"),
    (["--stop_stage", "{beyond}"], "--stop_stage {beyond}"),
    (["--stage", "3", "--stop_stage", "2"], "--stop_stage 2"),
])
def test_bad_stage_numbers_are_an_error_before_anything_is_created(recipe, args, option):
    name, work = recipe
    beyond = str(RECIPES[name]["last"] + 1)
    before = tree(work)
    msg = error_line(run(work, *(a.format(beyond=beyond) for a in args)))
    assert option.format(beyond=beyond) in msg, msg
    assert f"0..{RECIPES[name]['last']}" in msg or "--stage 3" in msg, msg
    assert tree(work) == before


def test_bad_stage_is_refused_before_the_setup_check(recipe):
    """--stage abc used to skip the data/.setup contradiction check (the -gt 0 test failed) and run stage 0."""
    name, work = recipe
    write_setup(name, work)
    before = tree(work)
    msg = error_line(run(work, "--stage", "abc", "--mini_sentences", "45"))
    assert "--stage abc" in msg and "contradicts" not in msg, msg
    assert tree(work) == before


def test_stop_stage_to_the_end_and_the_last_stage_are_accepted(recipe):
    """The default (100: to the end), a larger one and the last stage itself pass the stage check."""
    name, work = recipe
    write_setup(name, work)
    last = str(RECIPES[name]["last"])
    for args in ([], ["--stop_stage", "100"], ["--stop_stage", "10000"], ["--stop_stage", last]):
        proc = run(work, "--stage", last, *args)
        assert "--stage" not in proc.stderr and "--stop_stage" not in proc.stderr, (args, proc.stderr)


# ---------------------------------------------------------------------------------- item 12: --db_root
def test_a_db_root_that_does_not_exist_is_an_error(recipe, tmp_path):
    name, work = recipe
    before = tree(tmp_path)
    typo = tmp_path / "typo" / "LJSpeech-1.1"
    msg = error_line(run(work, "--db_root", str(typo)))
    assert f"--db_root {typo}: no such directory" in msg, msg
    assert "STUB" not in msg
    assert tree(tmp_path) == before  # neither the folder nor data/, db/, exp/


@pytest.mark.parametrize("name", ["tcstar_salad", "vctk_continual"])
def test_an_empty_db_root_without_corpus_is_an_error(tmp_path, name):
    """Auto-detection picks mini only without --db_root: an empty folder is not a corpus (a failed mount
    of /data/LJSpeech-1.1 must not run on the synthetic corpus)."""
    work = make_work(tmp_path, name)
    empty = tmp_path / "LJSpeech-1.1"
    empty.mkdir()
    before = tree(tmp_path)
    msg = error_line(run(work, "--db_root", str(empty)))
    assert f"--db_root {empty}" in msg and "--corpus mini" in msg, msg
    assert tree(tmp_path) == before


@pytest.mark.parametrize("name", ["zerospeech2019", "tcstar_salad", "vctk_continual"])
def test_explicit_corpus_mini_synthesizes_into_a_new_db_root(tmp_path, name):
    """--corpus mini --db_root NEW names where mini is synthesized: the folder is created, stage 0 runs."""
    work = make_work(tmp_path, name)
    new = tmp_path / "db" / "mymini"
    proc = run(work, "--corpus", "mini", "--db_root", str(new), "--stop_stage", "0")
    assert proc.returncode == 3 and "STUB prepare_mini.sh" in proc.stderr and str(new) in proc.stderr, proc.stderr
    assert new.is_dir()


def test_no_options_synthesize_mini_into_db_mini(recipe):
    """./run.sh alone: the embedded corpus, synthesized into db/mini of the recipe folder (indic: a folder
    per corpus parameters, db/mini_<voices>x<sentences>_<languages>)."""
    name, work = recipe
    proc = run(work)
    assert proc.returncode == 3, proc.stderr
    stub = [line for line in proc.stderr.splitlines() if line.startswith("STUB")]
    db = RECIPES[name].get("mini_db", "db/mini")
    assert len(stub) == 1 and (f" {db} " in stub[0] or f"{work}/{db} " in stub[0]), proc.stderr


# ----------------------------------------------------------------------- item 14: explicit options
def test_an_explicit_option_equal_to_the_default_that_contradicts_the_setup_is_an_error(recipe):
    """--mini_sentences <default> after a stage 0 with 30: an error naming the option and the saved value
    (it used to be taken for 'not given' and silently replaced by 30)."""
    name, work = recipe
    setup = write_setup(name, work)
    default = RECIPES[name]["mini_sentences"]
    msg = error_line(run(work, "--stage", "1", "--mini_sentences", default))
    assert f"--mini_sentences {default} contradicts" in msg and "mini_sentences=30" in msg and str(
        setup.relative_to(work)) in msg, msg
    # the saved value itself, or no option, is no contradiction
    for args in (["--mini_sentences", "30"], []):
        proc = run(work, "--stage", "1", "--stop_stage", "1", *args)
        assert "contradicts" not in proc.stderr, (args, proc.stderr)


@pytest.mark.parametrize("internal", ["setup_keys", "help_message", "cmdline_options", "PATH", "train_cmd"])
def test_internal_variables_are_not_options(recipe, internal):
    """--setup_keys '' used to switch the contradiction check off; PATH, the job commands, ... are no options."""
    name, work = recipe
    write_setup(name, work)
    msg = error_line(run(work, "--stage", "1", f"--{internal}", "", "--mini_sentences", "45"))
    assert f"unknown option --{internal}" in msg, msg


def test_help_still_works(recipe):
    name, work = recipe
    proc = run(work, "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("Usage: ./run.sh") and proc.stderr == "", proc.stderr
