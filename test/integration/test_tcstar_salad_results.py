"""egs/tcstar_salad/local/make_results.py --collect / render on a hand-made experiment tree: the tracked results
of a run are the small score files copied out of exp/ (per-utterance scores only in the default convention's
file), later collects merge, and RESULTS.md is rendered from results/ alone with the provenance header, both
scoring conventions and a paired bootstrap interval that matches the pooled difference."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from speechkit.features.world import WorldLayout
from speechkit.scoring.mcd import score_world
from speechkit.utils.provenance import record_run

LOCAL = Path(__file__).resolve().parents[2] / "egs" / "tcstar_salad" / "local"
LAY = WorldLayout()  # 40 mcep + lf0 + vuv + 1 bap = 43
MODELS = ("musa_rnn_small", "salad_small")


@pytest.fixture(scope="module")
def mr():
    sys.path.insert(0, str(LOCAL))  # make_results imports measure_latency from local/
    try:
        spec = importlib.util.spec_from_file_location("tcstar_make_results", LOCAL / "make_results.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(LOCAL))
    return mod


def _feats(rng, t, noise=0.0, base=None):
    if base is not None:
        x = base.copy()
        x[:, :40] += rng.normal(scale=noise, size=(t, 40))
        return x.astype(np.float32)
    mcep = rng.normal(size=(t, 40))
    lf0 = np.log(rng.uniform(100, 200, t))
    vuv = (rng.uniform(size=t) > 0.3).astype(float)
    return np.column_stack([mcep, lf0, vuv, rng.normal(size=t)]).astype(np.float32)


def _write_scp(d: Path, mats: dict) -> None:
    d.mkdir(parents=True, exist_ok=True)
    with kaldiio.WriteHelper(f"ark,scp:{d / 'feats.ark'},{d / 'feats.scp'}") as w:
        for u in sorted(mats):
            w(u, mats[u])
    (d / "feats.yaml").write_text("type: world\nsample_rate: 16000\n")


def _speaker(root: Path, spk: str, rng, noise: dict) -> dict:
    """data/, dump/ and exp/ of one speaker with the two small models scored; returns the scores."""
    for part, n in (("train", 4), ("dev", 2), ("test", 3)):
        d = root / "data" / spk / part
        d.mkdir(parents=True)
        (d / "utt2spk").write_text("".join(f"{spk}_{part}{i} {spk}\n" for i in range(n)))
    (root / "data" / spk / "train" / "utt2dur").write_text("".join(f"{spk}_train{i} 30.0\n" for i in range(4)))
    (root / "dump" / spk / "train").mkdir(parents=True)
    (root / "dump" / spk / "train" / "label_dim").write_text("247\n")
    ref = {f"{spk}_test{i}": _feats(rng, t) for i, t in enumerate((40, 25, 60))}
    _write_scp(root / "dump" / spk / "test", ref)
    out = {}
    for m in MODELS:
        hyp = {u: _feats(rng, len(x), noise[m], x) for u, x in ref.items()}
        e = root / "exp" / spk / m
        _write_scp(e / "synth" / "test", hyp)
        (e / "scores").mkdir(parents=True)
        for name, conv in (("test", "speechkit"), ("test_authors", "authors"), ("test_with_silence", "speechkit")):
            res = score_world(ref, hyp, LAY, convention=conv)
            (e / "scores" / f"{name}.json").write_text(json.dumps(res.to_dict()))
            out[(m, name)] = res
        (e / "metrics.jsonl").write_text("".join(json.dumps({"kind": "epoch", "epoch": k, "step": 8 * k,
                                                             "best": k == 2}) + "\n" for k in (1, 2, 3)))
        (e / "train.log").write_text(
            "2026-01-01 10:00:00,000 INFO speechkit.train.trainer: task salad: 1,042,091 parameters, "
            "32 training items\n"
            "2026-01-01 10:03:00,000 INFO speechkit.train.trainer: epoch 3 done\n")
    return out


@pytest.fixture
def tree(tmp_path):
    rng = np.random.default_rng(0)
    scores = {spk: _speaker(tmp_path, spk, rng, {"musa_rnn_small": 0.1, "salad_small": 0.3}) for spk in ("a", "b")}
    (tmp_path / "data" / "speakers").write_text("a\nb\n")
    record_run(tmp_path / "exp" / "runs_mini.jsonl", "./run.sh --max_epochs 3", cwd=tmp_path)
    lat = {"max_seconds": 35.0, "repeats": 1, "environment": {"clock": "cpu", "load_average_start": [1.0, 0.5, 0.2],
                                                              "load_average_end": [1.1, 0.6, 0.2], "cores_visible": 2},
           "models": {m: {"parameters": 10 ** 6, "input_dim": 247, "measured_max_s": 1.0, "max_fitted_latency_s": 1.5,
                          "slope": 0.04, "intercept": 0.1, "timings_wall_cpu": [[1, 2, 3]] * 50} for m in MODELS},
           "speedup_rnn_over_salad": {"small": 1.0}}
    (tmp_path / "exp" / "latency").mkdir()
    (tmp_path / "exp" / "latency" / "latency.json").write_text(json.dumps(lat))
    return tmp_path, scores


def collect(mr, root: Path, **kw):
    return mr.collect("mini", kw.get("models", list(MODELS)), kw.get("speakers"), root / "data", root / "dump",
                      root / "exp", root / "results")


def test_collect_then_render_from_results_alone(mr, tree):
    root, scores = tree
    run = collect(mr, root)
    assert [r["cmdline"] for r in map(json.loads, (run / "runs.jsonl").read_text().splitlines())] == \
        ["./run.sh --max_epochs 3"]
    assert json.loads((run / "a" / "speaker.json").read_text()) == {"n_train": 4, "n_dev": 2, "n_test": 3,
                                                                    "train_minutes": 2.0, "label_dim": 247}
    ours = json.loads((run / "a" / "salad_small" / "test.json").read_text())
    authors = json.loads((run / "a" / "salad_small" / "test_authors.json").read_text())
    assert len(ours["utterances"]) == 3 and "utterances" not in authors
    assert authors["mcd_db"] == pytest.approx(scores["a"][("salad_small", "test_authors")].mcd_db)
    tr = json.loads((run / "a" / "musa_rnn_small" / "training.json").read_text())
    assert (tr["epochs"], tr["best_epoch"], tr["steps"], tr["parameters"]) == (3, 2, 24, 1_042_091)
    assert set(json.loads((run / "a" / "f0.json").read_text())) == {"ground truth", *MODELS}
    assert (run / "f0_histogram_a.png").stat().st_size > 1000
    assert "timings_wall_cpu" not in json.loads((run / "latency.json").read_text())["models"]["salad_small"]
    shutil.rmtree(root / "exp")   # rendering needs results/ only
    page = mr.render(root / "results", root / "RESULTS.md")
    assert page == (root / "RESULTS.md").read_text()
    for needle in ("## Run `mini`", "### Environment", "./run.sh --max_epochs 3", "### Speaker `a` (4 / 2 / 3",
                   "authors: MCD dB", "### CPU latency", "[1.0, 0.5, 0.2]", "| salad_big | 9,667,115 |"):
        assert needle in page, needle
    s, r = scores["a"][("salad_small", "test")], scores["a"][("musa_rnn_small", "test")]
    a = scores["a"][("salad_small", "test_authors")]
    row = next(line for line in page.splitlines() if line.startswith("| salad_small |"))
    assert (f"| {s.mcd_db:.2f} | {s.f0_rmse_hz:.2f} | {s.vuv_accuracy:.1f} | {a.mcd_db:.2f} | "
            f"{a.f0_rmse_hz:.2f} |") in row
    assert f"SALAD small minus MUSA-RNN small, MCD (speechkit convention): **{s.mcd_db - r.mcd_db:+.2f} dB**" in page
    v, av = s.vuv_figures(), a.vuv_figures()   # the V/UV table: both conventions, beside the majority baseline
    for conv, f, acc in (("speechkit", v, s.vuv_accuracy), ("authors", av, a.vuv_accuracy)):
        assert (f"| salad_small | {conv} | {acc:.1f} | {f['vuv_majority_baseline']:.1f} ({f['vuv_majority_class']}) | "
                f"{f['vuv_unvoiced_recall']:.1f} | {f['vuv_unvoiced_precision']:.1f} | "
                f"{f['vuv_balanced_accuracy']:.1f} |") in page


def test_paired_bootstrap_brackets_the_pooled_difference(local_module, tree):
    paired_bootstrap = local_module("tcstar_tables").paired_bootstrap
    root, scores = tree
    a = json.loads((root / "exp" / "b" / "musa_rnn_small" / "scores" / "test.json").read_text())
    b = json.loads((root / "exp" / "b" / "salad_small" / "scores" / "test.json").read_text())
    diff, lo, hi = paired_bootstrap(a, b)
    assert diff == pytest.approx(b["mcd_db"] - a["mcd_db"], rel=1e-9)
    assert lo <= diff <= hi and diff > 0
    b["utterances"] = b["utterances"][:2]          # not the same utterances: no interval, and why
    with pytest.raises(ValueError, match=r"different utterances: 1 only in A"):
        paired_bootstrap(a, b)


def test_a_later_collect_merges(mr, tree):
    root, _ = tree
    collect(mr, root, models=["musa_rnn_small"], speakers=["a"])
    run = collect(mr, root, models=["salad_small"], speakers=["b"])
    assert (run / "a" / "musa_rnn_small" / "test.json").is_file() and (run / "b" / "salad_small").is_dir()
    assert not (run / "a" / "salad_small").exists()
    # a latency measured for another setup's label dimension is not collected
    lat = json.loads((root / "exp" / "latency" / "latency.json").read_text())
    for r in lat["models"].values():
        r["input_dim"] = 322
    (root / "exp" / "latency" / "latency.json").write_text(json.dumps(lat))
    (run / "latency.json").unlink()
    collect(mr, root, models=["musa_rnn_small"], speakers=["a"])
    assert not (run / "latency.json").exists()


@pytest.fixture(scope="module")
def local_module():
    """Import a script of egs/tcstar_salad/local (they import each other from there)."""
    sys.path.insert(0, str(LOCAL))
    mods = {}

    def load(name):
        if name not in mods:
            spec = importlib.util.spec_from_file_location(f"tcstar_{name}", LOCAL / f"{name}.py")
            mods[name] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mods[name])
        return mods[name]

    yield load
    sys.path.remove(str(LOCAL))


def test_f0_errors_by_hand(local_module, tmp_path):
    """Ten voiced frames, the first in silence: 7 frames 10 Hz off, one an octave off, one with a high reference."""
    f0_errors = local_module("f0_errors")
    ref_f0 = np.array([100.0] * 9 + [400.0])
    hyp_f0 = np.array([300.0] + [110.0] * 7 + [220.0, 400.0])
    ref = np.column_stack([np.zeros((10, 40)), np.log(ref_f0), np.ones(10), np.zeros(10)]).astype(np.float32)
    hyp = np.column_stack([np.zeros((10, 40)), np.log(hyp_f0), np.ones(10), np.zeros(10)]).astype(np.float32)
    test = tmp_path / "dump" / "x" / "test"
    _write_scp(test, {"x_1": ref})
    (test / "labels.scp").write_text("")
    (test / "phone_alignments").write_text("x_1 0.0 0.005 sil\nx_1 0.005 0.05 a\n")
    _write_scp(tmp_path / "exp" / "x" / "salad_small" / "synth" / "test", {"x_1": hyp})
    out = tmp_path / "analysis"
    assert f0_errors.main(["--out", str(out), "--exp-dir", str(tmp_path / "exp"), "--dump-dir",
                           str(tmp_path / "dump"), "--speakers", "x", "--models", "salad_small"]) == 0
    row = json.loads((out / "f0_errors.json").read_text())["rows"][0]
    assert row["n_voiced_both"] == 9                                   # frame 0 is silence
    assert row["octave_share"] == pytest.approx(1 / 9) and row["high_ref_share"] == pytest.approx(1 / 9)
    assert row["f0_rmse_hz"] == pytest.approx(np.sqrt((7 * 10 ** 2 + 120 ** 2 + 0) / 9), rel=1e-5)
    assert row["trimmed_f0_rmse_hz"] == pytest.approx(10.0, rel=1e-5)
    assert "| `x` | salad_small | 9 | 11.1 % | 11.1 % | 40.96 | 10.00 |" in (out / "f0_errors.md").read_text()


def test_windowed_inference_is_whole_inference_when_one_window_holds_the_utterance(local_module):
    import torch

    from speechkit.models.salad import Salad, SaladConfig
    from speechkit.tasks.acoustic import predict_features

    windowed = local_module("windowed_inference").windowed
    torch.manual_seed(0)
    model = Salad(SaladConfig(input_dim=6, embed_dim=16, num_blocks=1, num_heads=2, ff_dim=32)).eval()
    model.normalizer.set_stats(torch.zeros(43), torch.ones(43))
    labels = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    whole = predict_features(model, labels, vuv_index=41)
    np.testing.assert_allclose(windowed(model, labels, 64, 41), whole, rtol=1e-5, atol=1e-6)
    parts = windowed(model, labels, 20, 41)
    with torch.no_grad():   # window k at offset 20 k, each attending only inside itself
        second = model.normalizer.denormalize(model(torch.from_numpy(labels[None, 20:40]), offset=20))[0].numpy()
    np.testing.assert_allclose(parts[20:40, :41], second[:, :41], rtol=1e-5, atol=1e-6)
    assert not np.allclose(parts[:, :40], whole[:, :40])


def test_dev_tuning_choice_rule_by_hand(local_module):
    """The lowest best dev MCD wins; within 0.05 dB a tie, won by the setting with fewer updates."""
    choose = local_module("dev_tuning").choose
    runs = {"salad_small/s32": {"best_mcd": 8.63, "updates": 320},
            "salad_small/s4": {"best_mcd": 7.402, "updates": 2520},
            "salad_small/s2": {"best_mcd": 7.397, "updates": 5000},
            "musa_rnn_small/s32": {"best_mcd": 6.68, "updates": 320},
            "musa_rnn_small/s4": {"best_mcd": 4.94, "updates": 2520}}
    assert choose(runs) == {"salad_small": "salad_small/s4", "musa_rnn_small": "musa_rnn_small/s4"}
    runs["salad_small/s2"]["best_mcd"] = 7.30  # beyond the tie: the better one wins despite more updates
    assert choose(runs)["salad_small"] == "salad_small/s2"
    assert choose(runs, tie_db=0.2)["salad_small"] == "salad_small/s4"
    # a tie between rates (same updates): the lower MCD wins
    runs["salad_small/s4_p1.4e-3"] = {"best_mcd": 7.26, "updates": 2520}
    assert choose(runs)["salad_small"] == "salad_small/s4_p1.4e-3"
    assert choose(runs, tie_db=0.2)["salad_small"] == "salad_small/s4_p1.4e-3"


def test_dev_tuning_chooses_on_the_mean_over_speakers(local_module):
    """Several speakers: each setting's best dev MCDs averaged, then the same rule."""
    dt = local_module("dev_tuning")
    runs = {"a": {"m/s4": {"best_mcd": 9.0, "updates": 100}, "m/s4_lr": {"best_mcd": 8.0, "updates": 100}},
            "b": {"m/s4": {"best_mcd": 5.0, "updates": 50}, "m/s4_lr": {"best_mcd": 6.4, "updates": 50}}}
    mean = dt.mean_over_speakers(runs)
    assert mean == {"m/s4": {"best_mcd": 7.0, "updates": 150}, "m/s4_lr": {"best_mcd": 7.2, "updates": 150}}
    assert dt.choose(mean) == {"m": "m/s4"}   # better on one speaker is not enough
    assert dt.peak_lr(dt.GRIDS["msc"]["salad_small/s4_p2.3e-2"]) == pytest.approx(2.26e-2, rel=0.01)
    assert dt.peak_lr(dt.GRIDS["mini"]["salad_small/s4_p2.3e-2"]) == pytest.approx(2.26e-2, rel=0.01)


def test_dev_tuning_reads_a_finished_run_only_with_its_settings(local_module, tmp_path):
    """A finished run is read as a setting's only when its config.yaml holds the setting's values."""
    check_saved = local_module("dev_tuning").check_saved
    with pytest.raises(RuntimeError, match="config.yaml: not found"):
        check_saved(tmp_path, ["--trainer.lr", "0.256"])
    (tmp_path / "config.yaml").write_text("trainer:\n  lr: 0.064\n  warmup_steps: 256\nmodel:\n"
                                          "  scale_embedding: true\ndata:\n  num_streams: 4\n")
    check_saved(tmp_path, ["--trainer.lr", "6.4e-2", "--trainer.warmup_steps", "256", "--model.scale_embedding",
                           "true", "--data.num_streams", "4"])
    with pytest.raises(RuntimeError, match="trainer.lr is 0.064, this setting has '0.256'"):
        check_saved(tmp_path, ["--data.num_streams", "4", "--trainer.lr", "0.256"])
    with pytest.raises(RuntimeError, match="model.ff_dropout is None"):
        check_saved(tmp_path, ["--model.ff_dropout", "0.1"])


def test_learning_curve_verdict_by_hand(local_module):
    """The running best's fall over the last N epochs decides: < flat_db flattened, else still falling."""
    judge = local_module("learning_curves").judge
    flat = judge([10.0, 9.0, 8.5, 8.46, 8.47, 8.44], last=3, flat_db=0.1)   # best before the last 3: 8.5
    assert flat["verdict"] == "flattened" and flat["best_epoch"] == 6 and abs(flat["fall_last"] - 0.06) < 1e-9
    falling = judge([10.0, 9.0, 8.5, 8.3, 8.2, 8.1], last=3, flat_db=0.1)   # 8.5 -> 8.1
    assert falling["verdict"] == "still falling" and abs(falling["fall_last"] - 0.4) < 1e-9
    # a worse last epoch does not hide the fall of the best
    assert judge([10.0, 9.0, 8.0, 9.5], last=2, flat_db=0.1)["verdict"] == "still falling"
    assert judge([10.0, 9.0], last=3, flat_db=0.1)["verdict"] == "too short"
