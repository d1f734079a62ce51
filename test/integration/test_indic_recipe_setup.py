"""egs/indic_multilingual run.sh without training: the setup stage 0 records (data/.setup) and the
later stages read, a contradicting option, a missing languages.txt, --restart, the language-id
check of stage 0, and local/prepare_mucs.sh on a small fake MUCS tree. speechkit-train is a stub
that records its command line; the data preparer is a stub (except for the MUCS test)."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytestmark = pytest.mark.integration

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "indic_multilingual"

STUB_TRAIN = """#!/usr/bin/env bash
exp=; prev=
for a in "$@"; do [ "$prev" = --exp-dir ] && exp=$a; prev=$a; done
mkdir -p "$exp/checkpoints"
echo "$*" > "$exp/args"
touch "$exp/checkpoints/best.pt"
"""

# <db>/langs: the language of each of the 2 utterances per set
STUB_PREP = """#!/usr/bin/env bash
set -euo pipefail
db=$1 data=$2
for x in train dev test; do
  mkdir -p "$data/$x"
  : > "$data/$x/utt2lang"
  i=0
  for l in $(cat "$db/langs"); do i=$((i + 1)); echo "s$i-$x-u$i $l" >> "$data/$x/utt2lang"; done
  awk '{print $1, "a b"}' "$data/$x/utt2lang" > "$data/$x/text"
  awk '{split($1, p, "-"); print $1, p[1]}' "$data/$x/utt2lang" > "$data/$x/utt2spk"
done
"""


def stub_recipe(recipe: Path, work: Path, prep: str) -> Path:
    """``work`` (created): links to ``recipe``'s run.sh, path.sh, cmd.sh, utils, conf and local, plus
    ``fake_prep.sh`` holding ``prep``; and ``work.parent/stubs/speechkit-train`` (:data:`STUB_TRAIN`, which
    :func:`run` puts first on PATH). Several recipes may share one parent (and so one stubs folder)."""
    work.mkdir()
    for name in ("run.sh", "path.sh", "cmd.sh", "utils", "conf", "local"):
        (work / name).symlink_to(recipe / name)
    stubs = work.parent / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "speechkit-train").write_text(STUB_TRAIN)
    (stubs / "speechkit-train").chmod(0o755)
    (work / "fake_prep.sh").write_text(prep)
    (work / "fake_prep.sh").chmod(0o755)
    return work


@pytest.fixture
def work(tmp_path):
    w = stub_recipe(RECIPE, tmp_path / "recipe", STUB_PREP)
    db = tmp_path / "db"
    db.mkdir()
    (db / "langs").write_text("hi\nmr\n")
    return w


def run(work: Path, *args: str) -> subprocess.CompletedProcess:
    """``./run.sh ARGS`` in ``work`` with the stubs of :func:`stub_recipe` first on PATH (120 s at most)."""
    env = dict(os.environ, PATH=f"{work.parent / 'stubs'}:{Path(sys.executable).parent}:{os.environ['PATH']}",
               OMP_NUM_THREADS="1")
    return subprocess.run(["./run.sh", *args], cwd=work, env=env, capture_output=True, text=True, timeout=120)


def stage0(work, *extra):
    return run(work, "--setup", "mucs", "--db_root", "../db", "--local_prep", "./fake_prep.sh", "--stop_stage", "0",
               *extra)


def test_later_stages_read_the_setup_stage_0_prepared(work):
    proc = stage0(work)
    assert proc.returncode == 0, proc.stderr
    setup = dict(line.split("=", 1) for line in (work / "data/.setup").read_text().splitlines())
    db = str((work.parent / "db").resolve())
    assert setup["setup"] == "mucs" and setup["db_root"] == db and setup["local_prep"] == "./fake_prep.sh"
    assert "languages: hi mr" in proc.stdout  # the stage-0 language check
    # no --db_root (and --setup mucs without one) from stage 1 on: the saved setup, not 'mini'
    # (stage 3 with the stub trainer; --stage 1 --stop_stage 0, which ran nothing, is now an error)
    lang = work / "data/mucs/lang_char_wb"
    lang.mkdir(parents=True)
    (lang / "languages.txt").write_text("hi 0\nmr 1\n")
    for extra in ([], ["--setup", "mucs"], ["--db_root", "../db"]):
        proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "multisoftmax", *extra)
        assert proc.returncode == 0, proc.stderr
        assert "setup mucs: data data/mucs" in proc.stdout and "conf/train_real.yaml" in proc.stdout


@pytest.mark.parametrize("opt,value,saved", [("--db_root", "..", "db_root={db}"), ("--setup", "mini", "setup=mucs"),
                                             ("--local_prep", "local/prepare_real.sh", "local_prep=./fake_prep.sh")])
def test_an_option_contradicting_the_setup_is_an_error(work, opt, value, saved):
    assert stage0(work).returncode == 0
    proc = run(work, "--stage", "3", "--stop_stage", "3", opt, value)
    assert proc.returncode == 1
    db = str((work.parent / "db").resolve())
    msg = proc.stderr.strip().splitlines()[-1]
    assert opt in msg and saved.format(db=db) in msg and "data/.setup" in msg, msg


def test_no_setup_file_is_an_error_naming_it(work):
    proc = run(work, "--stage", "3")
    assert proc.returncode == 1 and "data/.setup: no such file: run stage 0 first" in proc.stderr


def test_missing_languages_txt_is_an_error_naming_it(work):
    assert stage0(work).returncode == 0
    proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "mono")
    assert proc.returncode == 1
    assert "data/mucs/lang_char_wb/languages.txt: no such file or empty: run stage 2 with --unit char_wb" in proc.stderr
    # nothing written by the refused call: exp/ holds only stage 0's run record
    assert [p.name for p in (work / "exp").rglob("*")] == ["mucs", "runs.jsonl"]
    assert len((work / "exp/mucs/runs.jsonl").read_text().splitlines()) == 1


def test_restart_moves_the_old_experiment_aside(work):
    assert stage0(work).returncode == 0
    lang = work / "data/mucs/lang_char_wb"
    lang.mkdir(parents=True)
    (lang / "languages.txt").write_text("hi 0\nmr 1\n")
    exp = work / "exp/mucs/rnnt_char_wb"
    proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "mono multisoftmax")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in exp.iterdir()) == ["mono_hi", "mono_mr", "multisoftmax"]
    assert "--resume true" in (exp / "multisoftmax/args").read_text()
    assert "--data.languages [hi]" in (exp / "mono_hi/args").read_text()
    (exp / "multisoftmax/decode_test").mkdir()
    (exp / "multisoftmax/decode_test/text").write_text("old\n")
    for n in (1, 2):
        proc = run(work, "--stage", "3", "--stop_stage", "3", "--variants", "multisoftmax", "--restart", "true")
        assert proc.returncode == 0, proc.stderr
        assert f"moved the previous {exp.relative_to(work)}/multisoftmax to" in proc.stdout
        assert (exp / f"multisoftmax.backup/{n}/checkpoints/best.pt").is_file()
        assert "--resume false" in (exp / "multisoftmax/args").read_text()
    assert (exp / "multisoftmax.backup/1/decode_test/text").read_text() == "old\n"
    assert not (exp / "multisoftmax/decode_test").exists()


@pytest.mark.parametrize("bad", ["en.us", "to"])
def test_stage_0_checks_language_ids_with_the_model_rule(work, bad):
    (work.parent / "db/langs").write_text(f"hi\n{bad}\n")
    proc = stage0(work)
    assert proc.returncode == 1
    assert f"data/mucs/train/utt2lang:2 (utterance s2-train-u2)" in proc.stderr and repr(bad) in proc.stderr
    assert not (work / "data/.setup").exists()


# ---------------------------------------------------------------------------------------------- MUCS
TEXTS = {"Hindi": ["नमस्ते दुनिया", "क़लम और किताब", "भारत देश", "पानी"],
         "Marathi": ["नमस्कार", "पाणी आहे", "घर", "शाळा, मुले!"]}


def fake_mucs(root: Path) -> None:
    """Per language: train with 3 utterances (+ one without audio, one without text), test with 1;
    8 kHz 16-bit WAVs of 0.5 s x (i + 1)."""
    for lang, texts in TEXTS.items():
        for split, ids in (("train", [0, 1, 2]), ("test", [3])):
            d = root / lang / split
            (d / "audio").mkdir(parents=True)
            lines = []
            for i in ids:
                uid = f"{i:04d}_{i:03d}"
                t = np.arange(4000 * (i + 1)) / 8000
                sf.write(d / "audio" / f"{uid}.wav", 0.3 * np.sin(2 * np.pi * 440 * t), 8000, subtype="PCM_16")
                lines.append(f"{uid} {unicodedata.normalize('NFD', texts[i])}")
            if split == "train":
                lines += ["0009_009 कोई ऑडियो नहीं", "0008_008"]  # no audio / no text: skipped
            (d / "transcription.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_prepare_mucs_on_a_fake_tree(tmp_path):
    for name in ("path.sh", "utils", "local"):
        (tmp_path / name).symlink_to(RECIPE / name)
    fake_mucs(tmp_path / "mucs")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", LC_ALL="C")
    proc = subprocess.run(["local/prepare_mucs.sh", "mucs", "data/mucs"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mucs hi/train: skipped 2 of 5 lines: 0 malformed, 1 no-text, 1 missing" in proc.stderr

    def table(part, name):
        return dict(line.split(" ", 1) for line in (tmp_path / "data/mucs" / part / name).read_text().splitlines())

    utts = {p: sorted(table(p, "utt2spk")) for p in ("train", "dev", "test")}
    assert utts["test"] == ["hi-0003-003", "mr-0003-003"]
    assert len(utts["train"]) == 4 and len(utts["dev"]) == 2 and not set(utts["train"]) & set(utts["dev"])
    assert set(utts["train"]) | set(utts["dev"]) == {f"{l}-000{i}-00{i}" for l in ("hi", "mr") for i in range(3)}
    for p in utts:
        assert table(p, "utt2lang") == {u: u[:2] for u in utts[p]}
        assert table(p, "utt2spk") == {u: u for u in utts[p]}  # one pseudo-speaker per utterance
    text = {**table("train", "text"), **table("dev", "text")}
    assert text["hi-0001-001"] == unicodedata.normalize("NFC", "क़लम और किताब")  # NFC (precomposed nukta)
    assert table("test", "text")["mr-0003-003"] == "शाळा मुले"  # punctuation removed
    assert table("test", "utt2dur") == {"hi-0003-003": "2.000", "mr-0003-003": "2.000"}
    cmd = table("test", "wav.scp")["hi-0003-003"]
    assert cmd.startswith("sox -R ") and cmd.endswith(" -t wav -r 16000 -b 16 -c 1 - |")
    audio = subprocess.run(cmd[:-1], shell=True, capture_output=True, check=True).stdout
    y, sr = sf.read(io.BytesIO(audio))
    assert sr == 16000 and len(y) == 32000  # 2 s at 16 kHz
