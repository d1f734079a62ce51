"""egs/zerospeech2019/local/make_results.py --collect / --render on a hand-made experiment tree: the tracked
results of one run are the small score files copied out of exp/ (per-phone-pair breakdowns left behind, paths
made relative), and RESULTS.md is rendered from results/ alone, with the provenance header of runs.jsonl."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from speechkit.utils.provenance import record_run

SCRIPT = Path(__file__).resolve().parents[2] / "egs/zerospeech2019/local/make_results.py"


@pytest.fixture(scope="module")
def make_results():
    spec = importlib.util.spec_from_file_location("zs_make_results", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # as `python local/make_results.py`: it imports its tables from local/
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


def _abx(error: float, root: Path, system: str, low: float | None = None, high: float | None = None) -> dict:
    j = {"error": error, "mode": "across", "distance": "cosine", "normalize": True, "frame_shift": 0.04,
         "n_items": 30, "n_triplets": 1234, "by_phone_pair": [{"phone_1": "a", "phone_2": "b", "error": error}] * 50,
         "feature_dir": str(root / "exp" / system / "units" / "test"),
         "item_file": str(root / "data" / "test" / "abx.item")}
    if low is not None:
        j["bootstrap"] = {"low": low, "high": high, "level": 0.95, "n_resamples": 1000, "n_valid": 990}
    return j


def _scored(root: Path, system: str, scores: str, errors: tuple, bitrate: float) -> None:
    d = root / "exp" / system / scores
    d.mkdir(parents=True)
    for name, e in zip(("abx_across", "abx_within", "abx_nocontext_across", "abx_nocontext_within"), errors):
        iv = (e - 3.0, e + 4.0) if name == "abx_nocontext_across" else (None, None)
        (d / f"{name}.json").write_text(json.dumps(_abx(e, root, system, *iv)))
    (d / "bitrate.json").write_text(json.dumps({"bitrate": bitrate, "feature_dir": str(d)}))
    (d / "abx_across.log").write_text("a log, not copied\n")


def _tree(root: Path) -> None:
    """exp/ with a VQ-VAE experiment 'vq' (codes and z), two baselines and an unrelated experiment."""
    (root / "data" / "test").mkdir(parents=True)
    (root / "data" / "test" / "utt2spk").write_text("s1_u1 s1\ns2_u1 s2\ns3_u1 s3\n")
    (root / "data" / "test" / "abx.item").write_text("#file onset offset #phone prev next speaker\n"
                                                     "s1_u1 0.0 0.1 a x x s1\ns2_u1 0.0 0.1 b x x s2\n")
    dump = root / "dump" / "mfcc" / "train"
    dump.mkdir(parents=True)
    (dump / "feats.yaml").write_text("type: mfcc\n")
    _scored(root, "vq", "scores", (30.0, 20.0, 27.5, 22.0), 167.2)
    _scored(root, "vq", "scores_aux", (26.0, 18.0, 23.1, 19.2), 1200.0)
    _scored(root, "baseline_mfcc", "scores", (30.4, 22.7, 28.3, 23.5), 1453.3)
    _scored(root, "baseline_mfcc_cmvn", "scores", (27.9, 15.2, 23.7, 19.6), 1453.3)
    _scored(root, "other", "scores", (50.0, 50.0, 50.0, 50.0), 10.0)
    vq = root / "exp" / "vq"
    (vq / "vqvae").mkdir()
    (vq / "vqvae" / "config.yaml").write_text(json.dumps({
        "model": {"encoder_type": "transformer", "codebook_size": 128, "stride": 4, "jitter_prob": 0.075},
        "data": {"train_dir": str(dump)}, "trainer": {"seed": 0}}))
    epoch = {"kind": "epoch", "valid/recon": 18.0, "valid/commitment": 4.0, "valid/loss": 22.0}
    (vq / "vqvae" / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in (
        {"kind": "train", "step": 10, "loss": 30.0}, {**epoch, "epoch": 1, "step": 100, "best": True},
        {"kind": "train", "step": 150, "loss": 29.0},
        {**epoch, "epoch": 2, "step": 200, "valid/recon": 17.5, "valid/commitment": 5.0, "best": False})))
    (vq / "vqvae" / "wallclock").write_text("900 2026-11-26 10:00:00\n")
    (vq / "vqvae" / "checkpoints").mkdir()
    (vq / "vqvae" / "checkpoints" / "best.pt").write_bytes(b"a model, not copied")
    for units, shift in (("test", 0.04), ("test_aux", 0.01)):
        (vq / "units" / units).mkdir(parents=True)
        (vq / "units" / units / "units.yaml").write_text(f"frame_shift: {shift}\ncodes_used: 120\n")
        (vq / "units" / units / "s1_u1.txt").write_text("0 1\n")
    (vq / "comparisons.json").write_text(json.dumps([
        {"system": "vq", "reference": "baseline_mfcc", "system_error": 27.5, "reference_error": 28.3,
         "difference": -0.8, "low": -2.75, "high": 2.15, "verdict": "within noise"}]))
    record_run(vq / "runs.jsonl", "./run.sh --corpus local", cwd=root)


def test_collect_then_render_from_results_alone(tmp_path, make_results, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    run = tmp_path / "results" / "local"
    assert make_results.main(["--collect", str(run), "--expdir", "exp", "--datadir", "data", "--corpus", "local",
                              "--tag", "vq", "--reference", "baseline_mfcc", "--reference", "baseline_mfcc_cmvn"]) == 0
    files = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    assert "other/scores/abx_across.json" not in files and "vq/vqvae/checkpoints/best.pt" not in files
    assert "vq/units/test/s1_u1.txt" not in files and "vq/scores/abx_across.log" not in files
    assert {"runs.jsonl", "test_set.json", "vq/scores_aux/bitrate.json", "baseline_mfcc_cmvn/scores/abx_within.json",
            "vq/vqvae/metrics.jsonl", "vq/vqvae/feats.yaml", "vq/units/test_aux/units.yaml",
            "vq/comparisons.json"} <= set(files)
    j = json.loads((run / "vq" / "scores" / "abx_nocontext_across.json").read_text())
    assert "by_phone_pair" not in j and j["error"] == 27.5 and j["bootstrap"]["low"] == 24.5
    assert j["feature_dir"] == "exp/vq/units/test"  # relative to the recipe folder, not this machine's path
    assert [json.loads(ln)["kind"] for ln in (run / "vq" / "vqvae" / "metrics.jsonl").read_text().splitlines()] \
        == ["epoch", "epoch"]
    info = json.loads((run / "test_set.json").read_text())
    assert (info["utterances"], info["speakers"], info["abx_items"], info["tag"]) == (3, 3, 2, "vq")
    assert sum(p.stat().st_size for p in run.rglob("*") if p.is_file()) < 20_000

    # the page needs nothing but results/
    shutil.rmtree(tmp_path / "exp")
    shutil.rmtree(tmp_path / "data")
    shutil.rmtree(tmp_path / "dump")
    assert make_results.main(["--render", "RESULTS.md"]) == 0
    page = (tmp_path / "RESULTS.md").read_text()
    assert "## local" in page and "### Environment" in page and "./run.sh --corpus local" in page
    assert "| vq (z) |" in page and "| 27.50 [24.5, 31.5] |" in page and "| 23.10 [20.1, 27.1] |" in page
    assert "| vq | baseline_mfcc | 27.50 | 28.30 | -0.80 [-2.75, +2.15] | within noise |" in page
    assert "| vq VQ-VAE | 2 | 200 | 1 | 18.00 / 4.00 | 17.50 / 5.00 | 15.0 min |" in page
    assert "jitter p=0.075" in page and "MFCC+Δ+ΔΔ" in page
    # rendering again gives the same page (no timestamp: a clean clone regenerates it byte for byte)
    assert make_results.main(["--render", "RESULTS.md"]) == 0
    assert (tmp_path / "RESULTS.md").read_text() == page


def test_collect_replaces_the_run_whole_keeps_notes_and_refuses_an_unscored_experiment(
        tmp_path, make_results, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    run = tmp_path / "results" / "mini"
    (run / "stale").mkdir(parents=True)
    (run / "stale" / "bitrate.json").write_text("{}")
    (run / "test_set.json").write_text("{}")  # a run folder collected before collects marked theirs
    (run / "NOTES.md").write_text("written by hand\n")
    args = ["--collect", str(run), "--expdir", "exp", "--datadir", "data", "--tag", "vq"]
    assert make_results.main(args) == 0
    assert not (run / "stale").exists() and not (run / ".backup").exists()
    assert (run / "NOTES.md").read_text() == "written by hand\n"
    assert make_results.main([*args[:-1], "nothing"]) == 1
    assert "exp/nothing: no scores/abx_across.json" in capsys.readouterr().err
    assert (run / "vq" / "scores" / "bitrate.json").is_file()  # the previous collection stays


def test_render_and_modes_errors(tmp_path, make_results, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert make_results.main(["--render", "R.md", "--results", "nothing"]) == 1
    assert "nothing: no <run>/test_set.json" in capsys.readouterr().err and not (tmp_path / "R.md").exists()
    with pytest.raises(SystemExit):
        make_results.main(["--render", "--collect", "x", "--expdir", "e", "--datadir", "d", "--tag", "t"])
    with pytest.raises(SystemExit):
        make_results.main(["--collect", "x", "--expdir", "e", "--datadir", "d"])  # no --tag
