"""The one way in and the setup that sticks (issue 39, items 1 and 2), without running any stage's work:
every recipe's --corpus takes its own names or any registered corpus (an unknown one is an error listing
the registry), and indic_multilingual's data/.setup now records --speed_perturb, --train_config and
--test_sets, so a later --stage uses them and a contradicting one is an error naming both values.

Each recipe runs in a temporary folder of links to its files; indic's data preparer and speechkit-train are
stubs (test_indic_recipe_setup.stub_recipe and run)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from speechkit.data.corpora import CORPORA
from test_indic_recipe_setup import run, stub_recipe

pytestmark = pytest.mark.integration

EGS = Path(__file__).resolve().parents[2] / "egs"
RECIPES = ("zerospeech2019", "tcstar_salad", "vctk_continual", "indic_multilingual")

# two languages, two utterances per set
STUB_PREP = """#!/usr/bin/env bash
set -euo pipefail
db=$1 data=$2
for x in train dev test; do
  mkdir -p "$data/$x"
  printf 's1-%s-u1 hi\\ns2-%s-u2 mr\\n' $x $x > "$data/$x/utt2lang"
  awk '{print $1, "a b"}' "$data/$x/utt2lang" > "$data/$x/text"
  awk '{split($1, p, "-"); print $1, p[1]}' "$data/$x/utt2lang" > "$data/$x/utt2spk"
done
"""


def make_work(tmp_path: Path, name: str) -> Path:
    work = stub_recipe(EGS / name, tmp_path / name, STUB_PREP)
    (tmp_path / "db").mkdir(exist_ok=True)
    return work


def setup_of(work: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (work / "data" / ".setup").read_text().splitlines())


@pytest.mark.parametrize("name", RECIPES)
def test_an_unknown_corpus_is_an_error_listing_the_registry(tmp_path, name):
    work = make_work(tmp_path, name)
    proc = run(work, "--corpus", "nope", "--db_root", str(tmp_path / "db"), "--stop_stage", "0")
    assert proc.returncode == 1, proc.stdout
    msg = proc.stderr.strip().splitlines()[-1]
    assert "unknown --corpus 'nope'" in msg and " ".join(CORPORA) in msg, msg
    assert not (work / "data" / ".setup").exists()


@pytest.mark.parametrize("name", RECIPES)
def test_a_registered_corpus_needs_a_db_root(tmp_path, name):
    work = make_work(tmp_path, name)
    proc = run(work, "--corpus", "commonvoice", "--stop_stage", "0")
    assert proc.returncode == 1
    assert "--corpus commonvoice needs --db_root" in proc.stderr or "--setup commonvoice needs --db_root" in proc.stderr


def stage0(work: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = run(work, "--setup", "mucs", "--db_root", "../db", "--local_prep", "./fake_prep.sh", "--stop_stage", "0",
               *extra)
    assert proc.returncode == 0, proc.stderr
    lang = work / "data/mucs/lang_char_wb"
    lang.mkdir(parents=True, exist_ok=True)
    (lang / "languages.txt").write_text("hi 0\nmr 1\n")
    return proc


def test_indic_remembers_speed_perturb_and_train_config(tmp_path):
    """The README's --stop_stage 2 then --stage 3: stage 3 used to switch to train_sp and conf/train_real.yaml."""
    work = make_work(tmp_path, "indic_multilingual")
    stage0(work, "--speed_perturb", "false", "--train_config", "conf/train_mini.yaml", "--test_sets", "test dev")
    setup = setup_of(work)
    assert setup["speed_perturb"] == "false" and setup["train_config"] == "conf/train_mini.yaml"
    assert setup["test_sets"] == "test dev" and setup["corpus"] == ""
    proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "multisoftmax")
    assert proc.returncode == 0, proc.stderr
    args = (work / "exp/mucs/rnnt_char_wb/multisoftmax/args").read_text()
    assert "--config conf/train_mini.yaml" in args and "--data.train_dir data/mucs/train " in args
    for opt, value, saved in (("--speed_perturb", "true", "speed_perturb=false"),
                              ("--train_config", "conf/train_real.yaml", "train_config=conf/train_mini.yaml")):
        proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "multisoftmax", opt, value)
        assert proc.returncode == 1
        msg = proc.stderr.strip().splitlines()[-1]
        assert f"{opt} {value} contradicts data/.setup ({saved}" in msg, msg


def test_the_resolved_defaults_are_recorded(tmp_path):
    """Without the options, what stage 0 resolved for this setup (the real-data defaults) is what stage 3 uses."""
    work = make_work(tmp_path, "indic_multilingual")
    stage0(work)
    setup = setup_of(work)
    assert setup["speed_perturb"] == "true" and setup["train_config"] == "conf/train_real.yaml"
    assert setup["test_sets"] == "test"


def test_an_older_setup_file_without_the_new_keys_still_continues(tmp_path):
    """A data/.setup written before a key was recorded: the option keeps its value (given or default), said on
    stdout, instead of stopping a run prepared by an older run.sh."""
    work = make_work(tmp_path, "indic_multilingual")
    stage0(work)
    setup = work / "data" / ".setup"
    old = [line for line in setup.read_text().splitlines()
           if line.split("=")[0] not in ("corpus", "corpus_opts", "speed_perturb", "train_config", "test_sets")]
    setup.write_text("\n".join(old) + "\n")
    proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "multisoftmax", "--speed_perturb", "false")
    assert proc.returncode == 0, proc.stderr
    assert "data/.setup has no 'speed_perturb=' line (an older stage 0 did not record it): speed_perturb='false'" \
        in proc.stdout
    assert "--data.train_dir data/mucs/train " in (work / "exp/mucs/rnnt_char_wb/multisoftmax/args").read_text()


def test_indic_corpus_and_local_prep_are_two_ways_in(tmp_path):
    work = make_work(tmp_path, "indic_multilingual")
    proc = run(work, "--corpus", "commonvoice", "--db_root", "../db", "--local_prep", "./fake_prep.sh")
    assert proc.returncode == 1 and "two ways in: give one" in proc.stderr
    proc = run(work, "--corpus", "mini", "--setup", "real")
    assert proc.returncode == 1 and "--corpus mini is the setup 'mini', not --setup real" in proc.stderr


def test_indic_announces_the_training_log_it_writes(tmp_path):
    """Issue 39 item 8: stage 3 said '(log: exp/.../train.log)' while the log is exp/.../log/train.log."""
    work = make_work(tmp_path, "indic_multilingual")
    stage0(work)
    proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "multisoftmax")
    assert proc.returncode == 0, proc.stderr
    announced = [line.split("(log: ")[1].rstrip(")") for line in proc.stdout.splitlines() if "(log: " in line]
    assert announced == ["exp/mucs/rnnt_char_wb/multisoftmax/log/train.log"]
    assert (work / announced[0]).is_file()


def test_vctk_names_every_missing_feature_file(tmp_path):
    """Issue 39 item 8: a missing-feature error named only the first of several missing files."""
    work = make_work(tmp_path, "vctk_continual")
    data = work / "data"
    data.mkdir()
    (data / ".setup").write_text(f"corpus=mini\ndb_root={tmp_path / 'db'}\n")
    (data / "pretrain_speakers").write_text("sp01\n")
    (data / "continual_speakers").write_text("sp02\n")
    proc = run(work, "--stage", "4", "--stop_stage", "4", "--tts_model", "tacotron2")
    assert proc.returncode == 1
    msg = proc.stderr.strip().splitlines()[-1]
    assert "missing: data/train_mel/feats.scp data/dev_mel/feats.scp data/test_mel/feats.scp: run stage 1" in msg, msg
