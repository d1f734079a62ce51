"""egs/tcstar_salad/run.sh, every stage, on a tiny mini corpus (one espeak-ng voice), small models.

Everything the recipe writes goes to a temporary directory (--db_root, --datadir, --dumpdir,
--expdir); the recipe folder itself is only read. A second call with only --stage (no corpus option
repeated) must continue the setup of the first, and a contradicting option must be refused.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kaldiio
import pytest

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.utils.fileio import read_table

pytestmark = pytest.mark.integration

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "tcstar_salad"
MODELS = "musa_rnn_small salad_small"


def run_recipe(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["./run.sh", "--datadir", str(tmp / "data"), "--dumpdir", str(tmp / "dump"), "--expdir", str(tmp / "exp"),
           "--results_dir", str(tmp / "results"), "--nj", "2", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=RECIPE, env=env, capture_output=True, text=True, timeout=900)
    if check:
        assert proc.returncode == 0, f"run.sh failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def recipe(require_espeak, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tcstar")
    before = sorted(p.name for p in RECIPE.iterdir())
    run_recipe(tmp, "--corpus", "mini", "--db_root", str(tmp / "db"), "--mini_sentences", "40", "--stop_stage", "4")
    proc = run_recipe(tmp, "--stage", "5", "--models", MODELS, "--max_epochs", "2", "--num_wavs", "1",
                      "--latency_max_seconds", "2", "--latency_repeats", "1")
    assert sorted(p.name for p in RECIPE.iterdir()) == before, "the recipe wrote into egs/tcstar_salad"
    return tmp, proc


def test_setup_is_remembered_and_contradictions_refused(recipe):
    tmp, _ = recipe
    setup = dict(line.split("=", 1) for line in (tmp / "data" / ".setup").read_text().splitlines())
    assert setup["corpus"] == "mini" and setup["db_root"] == str(tmp / "db")
    proc = run_recipe(tmp, "--stage", "3", "--corpus", "ljspeech", check=False)
    assert proc.returncode != 0 and "contradicts" in proc.stderr and "corpus=mini" in proc.stderr


def test_alignments_cover_the_phones_and_labels_match_the_frames(recipe):
    tmp, _ = recipe
    dump = tmp / "dump" / "sp01"
    for part in ("train", "dev", "test"):
        text = read_table(dump / part / "text")
        ali = read_phone_alignments(dump / part / "phone_alignments")
        assert set(ali) == set(text)
        n_frames = {u: int(n) for u, n in read_table(dump / part / "utt2num_frames").items()}
        dim = int((dump / part / "label_dim").read_text())
        labels = dict(kaldiio.load_scp(str(dump / part / "labels.scp")))
        assert set(labels) == set(text)
        for utt, segs in ali.items():
            assert [p for _, _, p in segs if p != "sil"] == text[utt].split()
            assert segs[0][0] == 0.0
            assert all(abs(a[1] - b[0]) < 1e-6 for a, b in zip(segs, segs[1:]))
            assert labels[utt].shape == (n_frames[utt], dim)


def test_models_synthesize_and_are_scored(recipe):
    tmp, _ = recipe
    line = re.compile(r"^MCD \d+\.\d\d dB \(with c0 \d+\.\d\d\)  F0 RMSE \d+\.\d\d Hz  V/UV \d+\.\d %$")
    for model in MODELS.split():
        e = tmp / "exp" / "sp01" / model
        assert (e / "checkpoints" / "best.pt").is_file()
        synth = dict(kaldiio.load_scp(str(e / "synth" / "test" / "feats.scp")))
        ref = dict(kaldiio.load_scp(str(tmp / "dump" / "sp01" / "test" / "feats.scp")))
        assert set(synth) == set(ref) and all(synth[u].shape == ref[u].shape for u in ref)
        assert len(list((e / "synth" / "test" / "wav").glob("*.wav"))) == 1
        assert line.match((e / "scores" / "test.txt").read_text().splitlines()[-1])
        scores = json.loads((e / "scores" / "test.json").read_text())
        assert scores["mcd_db"] > 0


def test_results_and_latency(recipe):
    tmp, _ = recipe
    run = tmp / "results" / "mini"
    # every invocation on record (two in the fixture), collected next to the score files
    runs = [json.loads(line) for line in (run / "runs.jsonl").read_text().splitlines()]
    assert [r["cmdline"].split()[:2] for r in runs] == [["./run.sh", "--datadir"]] * 2
    assert "--stage 5" in runs[1]["cmdline"] and "conf/world.yaml" in runs[0]["configs"]
    for model in MODELS.split():
        ours = json.loads((run / "sp01" / model / "test.json").read_text())
        authors = json.loads((run / "sp01" / model / "test_authors.json").read_text())
        assert ours["convention"] == "speechkit" and authors["convention"] == "authors"
        assert "utterances" in ours and "utterances" not in authors
        assert json.loads((run / "sp01" / model / "training.json").read_text())["epochs"] == 2
    assert json.loads((run / "sp01" / "speaker.json").read_text())["n_test"] >= 1
    assert (run / "latency.png").stat().st_size > 1000 and (run / "f0_histogram_sp01.png").stat().st_size > 1000
    # RESULTS.md next to the results dir, rendered from it alone: the same page without exp/
    page = (tmp / "RESULTS.md").read_text()
    for needle in ("## Run `mini`", "### Environment", "### Commands", "salad_small", "authors: MCD dB",
                   "SALAD small minus MUSA-RNN small", "### CPU latency"):
        assert needle in page, needle
    script = RECIPE / "local" / "make_results.py"
    again = tmp / "again.md"
    subprocess.run([sys.executable, str(script), "--results-dir", str(tmp / "results"), "--results-md", str(again)],
                   cwd=tmp, check=True, capture_output=True)
    assert again.read_text() == page


def test_rerun_of_a_finished_stage_keeps_the_models(recipe):
    tmp, _ = recipe
    ckpt = tmp / "exp" / "sp01" / "salad_small" / "checkpoints" / "best.pt"
    before = ckpt.stat().st_mtime_ns
    run_recipe(tmp, "--stage", "5", "--stop_stage", "5", "--models", "salad_small", "--max_epochs", "2")
    assert ckpt.stat().st_mtime_ns == before
