"""egs/zerospeech2019/run.sh, every stage, on a tiny mini corpus with the tiny configs.

Everything the recipe writes goes to a temporary directory (--db_root, --datadir, --dumpdir,
--expdir); the recipe folder itself is only read.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from speechkit.utils.fileio import read_table

pytestmark = pytest.mark.integration

RECIPE = Path(__file__).resolve().parents[2] / "egs" / "zerospeech2019"
TAG = "tiny"


def run_recipe(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = ["./run.sh", "--corpus", "mini", "--db_root", str(tmp / "db"), "--datadir", str(tmp / "data"),
           "--dumpdir", str(tmp / "dump"), "--expdir", str(tmp / "exp"), "--mini_speakers", "4",
           "--mini_sentences", "16",
           "--train_config", "conf/train_vqvae_tiny.yaml", "--inverter_config", "conf/train_inverter_tiny.yaml",
           "--tag", TAG, "--num_threads", "1", "--nj", "2", "--num_resynth", "3", "--kmeans_k", "8",
           "--results_dir", str(tmp / "results"), *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=RECIPE, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"run.sh failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def recipe(require_espeak, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zs2019")
    before = sorted(p.name for p in RECIPE.iterdir())
    proc = run_recipe(tmp, "--aux_units", "true")
    assert sorted(p.name for p in RECIPE.iterdir()) == before, "the recipe wrote into egs/zerospeech2019"
    return tmp, proc


def test_sets_and_item_files(recipe):
    tmp, _ = recipe
    data = tmp / "data"
    spk = {x: set(read_table(data / x / "utt2spk").values()) for x in ("train", "dev", "voice", "test")}
    assert spk["test"] == {"sp03", "sp04"} and spk["voice"] == {"sp02"} and spk["train"] == {"sp01", "sp02"}
    assert not set(read_table(data / "dev" / "utt2spk")) & set(read_table(data / "train" / "utt2spk"))
    header = (data / "test" / "abx.item").read_text().splitlines()[0]
    assert header == "#file onset offset #phone prev-phone next-phone speaker"


def test_units_are_codebook_vectors_of_the_test_set(recipe):
    """The default unit format: each code frame written as its codebook vector (K = 32, De = 16)."""
    import torch

    tmp, _ = recipe
    units = tmp / "exp" / TAG / "units" / "test"
    n_frames = {u: int(n) for u, n in read_table(tmp / "dump" / "mfcc" / "test" / "utt2num_frames").items()}
    codes = read_table(units / "codes")
    assert sorted(codes) == sorted(n_frames)
    ckpt = tmp / "exp" / TAG / "vqvae" / "checkpoints" / "best.pt"
    codebook = torch.load(ckpt, map_location="cpu", weights_only=True)["model"]["quantizer.codebook"].numpy()
    for utt, n in n_frames.items():
        m = np.loadtxt(units / f"{utt}.txt", ndmin=2)
        assert m.shape == (math.ceil(n / 4), 16)
        np.testing.assert_allclose(m, codebook[[int(c) for c in codes[utt].split()]], rtol=1e-6, atol=1e-7)
    assert (units / "frame_shift").read_text().strip() == "0.04"
    # training and extraction ran through $train_cmd, each with its log under exp/
    for log in ("vqvae/log/train.log", "units/log/extract_test.log", "inverter/log/train.log"):
        assert "# Ended (code 0)" in (tmp / "exp" / TAG / log).read_text()
    assert len((tmp / "exp" / TAG / "inverter" / "vqvae_checkpoint.sha256").read_text().strip()) == 64


def test_results_report_abx_and_bitrate(recipe):
    tmp, _ = recipe
    text = (tmp / "exp" / "RESULTS.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 11 and cells[1] in (TAG, "baseline_mfcc", "baseline_mfcc_cmvn", "kmeans_mfcc_k8_s4"):
            rows[cells[1]] = cells
    assert set(rows) == {TAG, "baseline_mfcc", "baseline_mfcc_cmvn", "kmeans_mfcc_k8_s4"}
    n_test_speakers = len(read_table(tmp / "data" / "test" / "spk2utt"))
    for tag, cells in rows.items():
        abx = [float(x.split(" [")[0]) for x in cells[5:9]]
        assert all(0.0 <= a <= 100.0 for a in abx)
        # the no-context across figure carries its bootstrap interval (local/score.sh --bootstrap); with two
        # test speakers every across replicate is the original sample, and the report says n/a, not [x, x]
        if n_test_speakers < 3:
            assert re.fullmatch(r"[\d.]+ \[n/a\]", cells[7]), (tag, cells[7])
        else:
            low, high = (float(x) for x in re.fullmatch(r"[\d.]+ \[([\d.]+), ([\d.]+)\]", cells[7]).groups())
            assert 0.0 <= low < high <= 100.0, tag
        assert float(cells[9]) > 0
    assert 0 < float(rows[TAG][9]) <= 25 * math.log2(32) + 1e-6  # codes: at most 25 frames/s x log2 K
    assert (tmp / "exp" / "abx_bitrate.png").stat().st_size > 5000
    links = re.findall(r"\]\(([^)]+\.wav)\)", text)
    assert len(links) == 3 and all((tmp / "exp" / link).is_file() for link in links)


def test_tracked_results_and_page(recipe):
    """Stage 6 copies this run's score files into --results_dir/<name>/ (mini with a non-default tag:
    mini_<tag>) with runs.jsonl, and renders RESULTS.md beside --results_dir from it; two test speakers:
    no paired comparison (no interval to draw), said on the page."""
    tmp, _ = recipe
    run = tmp / "results" / f"mini_{TAG}"
    runs = [json.loads(line) for line in (run / "runs.jsonl").read_text().splitlines()]
    assert runs and runs[0]["cmdline"].startswith("./run.sh --corpus mini") and "--aux_units true" in runs[0]["cmdline"]
    assert "conf/train_vqvae_tiny.yaml" in runs[0]["configs"] and runs[0]["git_commit"]
    for system in (TAG, "baseline_mfcc", "baseline_mfcc_cmvn", "kmeans_mfcc_k8_s4"):
        j = json.loads((run / system / "scores" / "abx_nocontext_across.json").read_text())
        assert "by_phone_pair" not in j and j["bootstrap"]["n_valid"] >= 40
    assert (run / TAG / "scores_aux" / "bitrate.json").is_file() and not (run / TAG / "comparisons.json").exists()
    assert sum(p.stat().st_size for p in run.rglob("*") if p.is_file()) < 100_000
    page = (tmp / "RESULTS.md").read_text()
    assert f"## mini_{TAG}" in page and "### Commands" in page and "None: 2 test speakers" in page
    lab = (tmp / "exp" / "RESULTS.md").read_text()  # the same numbers as the report over exp/
    row = next(line for line in lab.splitlines() if f"| {TAG} |" in line)
    assert row in page


def test_paired_comparisons_with_three_test_speakers(recipe):
    """With three or more test speakers stage 6 compares the codes with MFCC and the continuous z with the
    CMVN'd input on the same speaker resamples (local/compare_abx.py); the tracked results and the page carry
    both rows. The mini test set has two speakers: half of sp04 is relabelled as a third one."""
    tmp, _ = recipe
    data3, exp3 = tmp / "data3", tmp / "exp3"
    shutil.copytree(tmp / "data", data3, symlinks=True)
    moved = sorted(u for u, s in read_table(data3 / "test" / "utt2spk").items() if s == "sp04")[::2]
    for table in ("abx.item", "abx_nocontext.item"):  # what the ABX tasks read: the item's speaker column
        lines = (data3 / "test" / table).read_text().splitlines()
        lines = [re.sub(r" sp04$", " spx", ln) if ln.split()[0] in moved else ln for ln in lines]
        (data3 / "test" / table).write_text("\n".join(lines) + "\n")
    utt2spk = {u: ("spx" if u in moved else s) for u, s in read_table(data3 / "test" / "utt2spk").items()}
    (data3 / "test" / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s in sorted(utt2spk.items())))
    spk2utt: dict = {}
    for u, s in sorted(utt2spk.items()):
        spk2utt.setdefault(s, []).append(u)
    (data3 / "test" / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in sorted(spk2utt.items())))
    shutil.copytree(tmp / "exp" / TAG / "units", exp3 / TAG / "units", symlinks=True)
    run_recipe(tmp, "--stage", "6", "--datadir", str(data3), "--expdir", str(exp3), "--kmeans_k", "0",
               "--aux_units", "true", "--abx_bootstrap", "200", "--results_dir", str(tmp / "r3" / "results"))
    rows = json.loads((exp3 / TAG / "comparisons.json").read_text())
    assert [(r["system"], r["reference"]) for r in rows] == [(TAG, "baseline_mfcc"),
                                                             (f"{TAG} (z)", "baseline_mfcc_cmvn")]
    for r in rows:
        assert r["low"] <= r["difference"] <= r["high"] and r["difference"] == pytest.approx(
            r["system_error"] - r["reference_error"])
    run = tmp / "r3" / "results" / f"mini_{TAG}"
    assert json.loads((run / TAG / "comparisons.json").read_text()) == rows
    page = (tmp / "r3" / "RESULTS.md").read_text()
    assert f"| {TAG} (z) | baseline_mfcc_cmvn | {rows[1]['system_error']:.2f} |" in page


def test_aux_units_every_input_frame(recipe):
    """--aux_units true: the continuous z of the test set every 10 ms (--aux_phases all, shift-and-stitch),
    one row per input frame, scored in RESULTS.md as its own row."""
    tmp, _ = recipe
    aux = tmp / "exp" / TAG / "units" / "test_aux"
    assert (aux / "frame_shift").read_text().strip() == "0.01"
    n_frames = {u: int(n) for u, n in read_table(tmp / "dump" / "mfcc" / "test" / "utt2num_frames").items()}
    for utt, n in n_frames.items():
        assert np.loadtxt(aux / f"{utt}.txt", ndmin=2).shape == (n, 16)
    text = (tmp / "exp" / "RESULTS.md").read_text()
    assert re.search(rf"\| [^|]*: continuous z \(auxiliary embedding\) every 10 ms \| {TAG} \(z\) \|", text)


def test_resynthesized_wavs(recipe):
    tmp, _ = recipe
    wavs = read_table(tmp / "exp" / TAG / "resynth" / "test" / "wav.scp")
    assert len(wavs) == 3
    for utt, path in wavs.items():
        y, sr = sf.read(path, dtype="float32")
        assert sr == 16000
        assert len(y) > 0.3 * 16000
        assert float(np.sqrt(np.mean(y ** 2))) > 1e-3
        assert Path(path).with_suffix(".png").is_file()


def test_rerun_reuses_the_trained_model(recipe):
    tmp, _ = recipe
    ckpts = tmp / "exp" / TAG / "vqvae" / "checkpoints"
    stamp = {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()}
    codes = (tmp / "exp" / TAG / "units" / "test" / "codes").read_bytes()
    proc = run_recipe(tmp, "--stage", "2", "--stop_stage", "3")
    assert "training already finished" in proc.stdout + proc.stderr
    assert {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()} == stamp
    assert (tmp / "exp" / TAG / "units" / "test" / "codes").read_bytes() == codes


def test_setup_is_remembered_and_contradictions_refused(recipe):
    """Stage 0 writes data/.setup; a later stage needs no corpus option and refuses a contradicting one."""
    tmp, _ = recipe
    setup = dict(line.split("=", 1) for line in (tmp / "data" / ".setup").read_text().splitlines())
    assert setup["corpus"] == "mini" and setup["mini_speakers"] == "4" and setup["speed_perturb"] == "false"
    assert setup["db_root"] == str((tmp / "db").resolve())
    base = ["./run.sh", "--datadir", str(tmp / "data"), "--dumpdir", str(tmp / "dump"), "--expdir", str(tmp / "exp"),
            "--tag", TAG, "--train_config", "conf/train_vqvae_tiny.yaml", "--stage", "3", "--stop_stage", "3"]
    ok = subprocess.run(base, cwd=RECIPE, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    bad = subprocess.run(base + ["--mini_speakers", "6"], cwd=RECIPE, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "contradicts" in bad.stderr and "mini_speakers=4" in bad.stderr


def test_stale_inverter_is_retrained_and_speed_perturbation(recipe):
    tmp, _ = recipe
    inv = tmp / "exp" / TAG / "inverter"
    (inv / "vqvae_checkpoint.sha256").write_text("0" * 64 + "\n")  # as if the VQ-VAE had been retrained
    cmd_fail = subprocess.run(["./run.sh", "--datadir", str(tmp / "data"), "--dumpdir", str(tmp / "dump"),
                               "--expdir", str(tmp / "exp"), "--tag", TAG, "--stage", "5", "--stop_stage", "5",
                               "--inverter_config", "conf/train_inverter_tiny.yaml",
                               "--train_config", "conf/train_vqvae_tiny.yaml"],
                              cwd=RECIPE, capture_output=True, text=True, timeout=300)
    assert cmd_fail.returncode != 0 and "re-run stage 4" in cmd_fail.stderr
    proc = run_recipe(tmp, "--stage", "4", "--stop_stage", "4")
    assert "retraining it" in proc.stdout and (tmp / "exp" / TAG / "inverter.stale").is_dir()
    assert (inv / "vqvae_checkpoint.sha256").read_text().strip() != "0" * 64
    run_recipe(tmp, "--stage", "0", "--stop_stage", "0", "--speed_perturb", "true")
    sp = read_table(tmp / "data" / "train_sp" / "utt2spk")
    assert len(sp) == 3 * len(read_table(tmp / "data" / "train" / "utt2spk"))
    assert any(u.startswith("sp0.9-") for u in sp) and any(u.startswith("sp1.1-") for u in sp)


def test_plan_warmup_caps_a_warmup_longer_than_training(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("trainer:\n  max_epochs: 40\n  max_steps: 0\n  batch_size: 16\n  batch_frames: 0\n"
                   "  accum_grad: 1\n  scheduler: warmup_cosine\n  warmup_steps: 50\n")
    run = [sys.executable, "local/plan_warmup.py", str(cfg)]
    small = subprocess.run(run + ["12"], cwd=RECIPE, capture_output=True, text=True)  # 12 utterances: 40 updates
    assert small.returncode == 0 and small.stdout.split() == ["--trainer.warmup_steps", "4"]
    assert "warm-up capped to 4" in small.stderr
    big = subprocess.run(run + ["100"], cwd=RECIPE, capture_output=True, text=True)  # 280 updates
    assert big.returncode == 0 and big.stdout == ""


def test_official_layout_preparer(tmp_path):
    """local/prepare_zerospeech2019.py on a fake 2019 'english' folder (three sets, item file, lists)."""
    db = tmp_path / "english"
    rng = np.random.default_rng(0)
    names = {"train/unit": ["S015_0001", "S015_0002", "S020_0001"] + [f"S021_{i:04d}" for i in range(50)],
             "train/voice": ["V001_0001", "V002_0001"], "test": ["S002_0001", "S003_0001"]}
    for sub, utts in names.items():
        (db / sub).mkdir(parents=True)
        for u in utts:
            sf.write(db / sub / f"{u}.wav", rng.normal(0, 0.1, 8000).astype(np.float32), 16000)
    sf.write(db / "train" / "voice" / "V001_0002.wav", rng.normal(0, 0.1, 4000).astype(np.float32), 8000)
    (db / "train" / "unit" / "broken.wav").write_bytes(b"not audio")
    (db / "by-context-across-speakers.item").write_text(
        "#file onset offset #phone prev-phone next-phone speaker\nS002_0001 0.1 0.2 a b c S002\n")
    (db / "bitrate_filelist.txt").write_text("S002_0001.txt 0.5\nS003_0001.txt 0.5\n")
    (db / "synthesis.txt").write_text("S002_0001 V001\n")
    data = tmp_path / "data"
    proc = subprocess.run([sys.executable, "local/prepare_zerospeech2019.py", str(db), str(data)], cwd=RECIPE,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "skipping 'broken'" in proc.stderr
    dev = read_table(data / "dev" / "utt2spk")
    train = read_table(data / "train" / "utt2spk")
    assert len(dev) == 1 and not set(dev) & set(train)
    assert {"V001_0001", "V001_0002", "V002_0001"} <= set(train)  # the voice set is training data too
    assert read_table(data / "voice" / "utt2spk") == {"V001_0001": "V001", "V001_0002": "V001", "V002_0001": "V002"}
    assert read_table(data / "voice" / "wav.scp")["V001_0002"].startswith("sox ")  # 8 kHz -> 16 kHz pipe
    assert {u: float(d) for u, d in read_table(data / "test" / "utt2dur").items()} == {"S002_0001": 0.5, "S003_0001": 0.5}
    assert (data / "test" / "abx.item").read_text().startswith("#file onset")
    assert (data / "test" / "bitrate_filelist.txt").is_file()
    assert (data / "test" / "synthesis_list").read_text() == "S002_0001 V001\n"


def test_official_layout_one_inverter_per_voice(recipe, tmp_path):
    """--corpus zerospeech2019 through run.sh stages 0-5 on a fake official tree with two target voices:
    one inverter per voice, each trained on its voice only; synthesis.txt's voice column picks the
    inverter; the submission folder names each wav <voice>_<id> (required_filelist.txt's names)."""
    tmp, _ = recipe
    mini = {}
    for x in ("train", "voice", "test"):
        mini.update(read_table(tmp / "data" / x / "wav.scp"))
    by_spk = {}
    for utt in sorted(mini):
        by_spk.setdefault(utt.split("_")[0], []).append(utt)
    db = tmp_path / "english"
    layout = {"train/unit": [("S001", u) for u in by_spk["sp01"]],
              "train/voice": [("V001" if i % 2 else "V002", u) for i, u in enumerate(by_spk["sp02"])],
              "test": [("S003", u) for u in by_spk["sp03"]] + [("S004", u) for u in by_spk["sp04"]]}
    for sub, pairs in layout.items():
        (db / sub).mkdir(parents=True)
        for i, (spk, utt) in enumerate(pairs):
            src = mini[utt]
            assert Path(src).is_file(), f"mini wav.scp entry is not a file: {src}"
            (db / sub / f"{spk}_{i:04d}.wav").symlink_to(src)
    (db / "synthesis.txt").write_text("S003_0000 V001\nS004_0017 V002\nS003_0001 V002\n")
    out = tmp_path / "out"
    cmd = ["./run.sh", "--corpus", "zerospeech2019", "--db_root", str(db), "--datadir", str(out / "data"),
           "--dumpdir", str(out / "dump"), "--expdir", str(out / "exp"), "--train_config", "conf/train_vqvae_tiny.yaml",
           "--inverter_config", "conf/train_inverter_tiny.yaml", "--tag", TAG, "--num_threads", "1", "--nj", "2",
           "--stop_stage", "5"]
    proc = subprocess.run(cmd, cwd=RECIPE, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    exp = out / "exp" / TAG
    assert not (exp / "inverter").exists()
    voice_utts = read_table(out / "data" / "voice" / "utt2spk")
    for v in ("V001", "V002"):
        trained = set(read_table(exp / f"inverter_{v}" / "codes"))
        assert trained and all(voice_utts[u] == v for u in trained)
        assert len((exp / f"inverter_{v}" / "vqvae_checkpoint.sha256").read_text().strip()) == 64
    assert set(read_table(exp / "resynth" / "test_V001" / "wav.scp")) == {"S003_0000"}
    assert set(read_table(exp / "resynth" / "test_V002" / "wav.scp")) == {"S004_0017", "S003_0001"}
    sub = exp / "submission" / "test"
    assert sorted(p.name for p in sub.glob("*.wav")) == ["V001_0000.wav", "V002_0001.wav", "V002_0017.wav"]
    assert len(list(sub.glob("*.txt"))) == len(layout["test"])
    # a voice the data does not have is an error naming it
    (out / "data" / "test" / "synthesis_list").write_text("S003_0000 V009\n")
    bad = subprocess.run(cmd[:-2] + ["--stage", "5", "--stop_stage", "5"], cwd=RECIPE, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode != 0 and "V009" in bad.stderr
