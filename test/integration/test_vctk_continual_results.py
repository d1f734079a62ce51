"""egs/vctk_continual/local/make_results.py --collect / --render on a hand-made experiment tree (seconds):
the tracked results of a setup are the small score files copied out of exp/ (stale runs dropped,
NOTES.md kept), and RESULTS.md is rendered from results/ alone, with the provenance header of
runs.jsonl, the paired comparisons with their t-intervals and verdicts checked by hand."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from speechkit.results import t_interval
from speechkit.utils.provenance import record_run

SCRIPT = Path(__file__).resolve().parents[2] / "egs/vctk_continual/local/make_results.py"
SPK = ["s3", "s4"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"vctk_{name}", SCRIPT.parent / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # as `python local/make_results.py`: it imports its tables from local/
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


@pytest.fixture(scope="module")
def mr():
    return _load("make_results")


@pytest.fixture(scope="module")
def tables():
    return _load("continual_tables")


def _run(exp: Path, run: str, seed: int, final_ra: float, order: list[str]) -> None:
    """A scored 2-episode run: a_{1,1} = 1; a_{2,.} chosen so that RA_2 = final_ra."""
    d = exp / "musa_rnn" / "continual" / run / f"order{seed}"
    (d / "eval").mkdir(parents=True)
    a2 = [final_ra, final_ra]
    scores = {"order": order, "accuracy_matrix": [[1.0, None], a2], "retained_accuracy": [1.0, final_ra],
              "forgetting": [None, 1.0 - final_ra], "verifier_accuracy": [1.0, 0.9], "final_ra": final_ra,
              "final_fg": 1.0 - final_ra, "complete": True}
    (d / "eval" / "scores.json").write_text(json.dumps(scores))
    # the earlier speaker's 2 syntheses: one verified as the last speaker
    utts = [{"utt": f"{order[0]}-1", "speaker": order[0], "predicted": order[1]},
            {"utt": f"{order[0]}-2", "speaker": order[0], "predicted": order[0]},
            {"utt": f"{order[1]}-1", "speaker": order[1], "predicted": order[1]}]
    (d / "eval" / "episode_02.json").write_text(json.dumps({"episode": 2, "classes": ["p1", *SPK],
                                                             "utterances": utts, "inputs": {"x": "digest"}}))
    for t, s in enumerate(order, 1):
        (d / f"episode_{t:02d}_{s}").mkdir()
        (d / f"episode_{t:02d}_{s}" / "episode.json").write_text(json.dumps(
            {"initial_weights": "theta_init", "training_speakers": order[:t], "valid_speakers": order[:t],
             "utterances": {"new": 4, "own": 4 * t, "buffer": 0, "total": 4 * t}, "epochs": 2, "steps": 3 * t,
             "best_epoch": 2}))
    strategy = run.split("_b")[0] if run.startswith("er") else run
    (d / "plan.json").write_text(json.dumps(
        {"strategy": strategy, "order": order, "seed": seed, "buffer_size": 0, "replicate": 1,
         "ewc_lambda": 100.0 if run == "ewc" else 0.0, "training": {"trainer.lr": 0.001},
         "extra": {"order_design": {"design": "williams", "row": seed, "rows": 2, "speakers": sorted(order)}},
         "version": 3}))


FINAL = {"jt": (0.8, 0.9), "sa": (0.2, 0.3), "ewc": (0.2, 0.3), "er_b5": (0.5, 0.6), "er_b1": (0.3, 0.5),
         "er_br_b1_k10": (0.4, 0.45)}


@pytest.fixture
def tree(tmp_path):
    data, exp = tmp_path / "data", tmp_path / "exp"
    data.mkdir()
    (data / "continual_speakers").write_text("s3\ns4\n")
    (data / "pretrain_speakers").write_text("p1\np2\n")
    (data / "verifier_extra_speakers").write_text("p1\n")
    (exp / "embed").mkdir(parents=True)
    (exp / "embed" / "verifier.txt").write_text("verifier: 3 speakers; held-out accuracy 97.0 % on 9 utterances\n")
    for run, (r1, r2) in FINAL.items():
        _run(exp, run, 1, r1, SPK)
        _run(exp, run, 2, r2, SPK[::-1])
    record_run(exp / "runs.jsonl", "./run.sh --orders '1 2'", [], cwd=tmp_path)
    return tmp_path


def _collect(mr, root: Path, name: str = "mini", exp: str = "exp") -> None:
    argv = ["make_results.py", "--collect", str(root / "results" / name), "--datadir", str(root / "data"),
            "--expdir", str(root / exp), "--corpus", "mini", "--verifier", str(root / exp / "embed" / "verifier.txt")]
    old, sys.argv = sys.argv, argv
    try:
        assert mr.main() == 0
    finally:
        sys.argv = old


def _render(mr, root: Path) -> str:
    old, sys.argv = sys.argv, ["make_results.py", "--render", str(root / "RESULTS.md"), "--results",
                               str(root / "results")]
    try:
        assert mr.main() == 0
    finally:
        sys.argv = old
    return (root / "RESULTS.md").read_text()


def test_verdicts_and_intervals_by_hand(tables):
    assert tables.verdict([]) == "not measured"
    assert tables.verdict([0.2]) == "holds (one order)"
    assert tables.verdict([0.15]) == "within noise (one order)" and tables.verdict([-0.1]) == "within noise (one order)"
    assert tables.verdict([-0.3]) == "does not hold (one order)"
    assert tables.verdict([0.6, 0.6]) == "holds (2 orders)"           # no spread: the interval is the point
    assert tables.verdict([0.0, 0.0, 0.0]) == "does not hold (3 orders)"  # no difference in any order
    assert tables.verdict([-0.2, -0.21]) == "does not hold (2 orders)"
    # mean 0.025, sd 0.15 / sqrt(2), t(1) = 12.706: half-width 12.706 * 0.15 / 2 = 0.95295
    c = t_interval([0.1, -0.05])
    (lo, hi), m = c.interval, c.delta
    assert m == pytest.approx(0.025) and lo == pytest.approx(0.025 - 0.95295, abs=1e-6)
    assert hi == pytest.approx(0.025 + 0.95295, abs=1e-6)
    assert tables.verdict([0.1, -0.05]) == "within noise (2 orders)"
    # three orders: t(2) = 4.303
    lo, hi = t_interval([0.2, 0.35, 0.25]).interval
    assert lo == pytest.approx(0.26667 - 4.303 * 0.076376 / 3 ** 0.5, abs=1e-4)
    assert tables.verdict([0.2, 0.35, 0.25]) == "holds (3 orders)"


def test_collect_then_render_from_results_alone(mr, tables, tree):
    _collect(mr, tree)
    res = tree / "results" / "mini"
    assert sorted(p.name for p in res.iterdir()) == sorted([*FINAL, "runs.jsonl", "setup.json", ".speechkit-output"])
    ep = json.loads((res / "jt" / "order1" / "last_episode.json").read_text())
    assert "inputs" not in ep and len(ep["utterances"]) == 3
    train = json.loads((res / "jt" / "order2" / "train.json").read_text())
    assert [(e["episode"], e["speaker"], e["initial_weights"], e["steps"]) for e in train] == \
        [(1, "s4", "theta_init", 3), (2, "s3", "theta_init", 6)]
    setup = json.loads((res / "setup.json").read_text())
    assert setup["continual_speakers"] == SPK and setup["verifier_extra_speakers"] == ["p1"]
    assert setup["verifier"] == ["verifier: 3 speakers; held-out accuracy 97.0 % on 9 utterances"]

    shutil.rmtree(tree / "exp")  # the page needs results/ only
    page = _render(mr, tree)
    assert "./run.sh --orders '1 2'" in page and "### Environment" in page
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in page.splitlines() if ln.startswith("| ")}
    assert "| 2 | 85.0 ± 7.1 | 15.0 ± 7.1 | 80.0 / 90.0 | 50.0 ± 0.0 |" in rows[tables.label("jt")]
    # every interval says on how many orders it rests (issue 36)
    assert "| JT − SA | +60.0 / +60.0 | +60.0 [+60.0, +60.0] (n = 2) | holds (2 orders) |" in page
    assert "| EWC − SA | +0.0 / +0.0 | +0.0 [+0.0, +0.0] (n = 2) | does not hold (2 orders) |" in page
    assert ("| ER-BR (N_B = 1, K = 10) − ER (N_B = 1) | +10.0 / -5.0 | +2.5 [-92.8, +97.8] (n = 2) | "
            "within noise (2 orders) |") in page
    assert "[50.0, 50.0] (95 % t-interval over n = 2 orders) of its last-episode syntheses" in page
    # the orders of a run: the exp plan.json's (row K of the Williams design), copied into the results
    plan = json.loads((res / "sa" / "order2" / "plan.json").read_text())
    assert plan["order"] == SPK[::-1] and plan["order_design"]["design"] == "williams"
    assert plan["order_design"]["row"] == 2 and "training" not in plan
    assert "  - order 1: s3 s4 (row 1 of the Williams design over the 2 C-sorted speakers)" in page
    assert "  - order 2: s4 s3 (row 2 of the Williams design over the 2 C-sorted speakers)" in page
    assert "no two orders begin with the same speaker" in page and "distinct rows of a Williams design" in page
    assert "a larger buffer retains more (N_B = 5 vs 1)" in page and "ER-KD above ER" not in page
    assert "JT above the best continual-learning run (ER (N_B = 5))" in page
    for png in ("ra_fg_curves", "er_buffer_sizes", "sa_order1_confusion_matrix", "jt_order1_confusion_matrix"):
        assert (res / "figures" / f"{png}.png").stat().st_size > 1000, png


def test_orders_taken_in_other_sequences_are_not_paired(mr, tree):
    """Order 2 of EWC re-run in another sequence than SA's order 2 (a design row beside a seed's order): its
    difference to SA is no pair, so EWC - SA rests on order 1 alone and says so; the page lists both sequences."""
    d = tree / "exp" / "musa_rnn" / "continual" / "ewc" / "order2"
    shutil.rmtree(d)
    _run(tree / "exp", "ewc", 2, 0.3, SPK)  # s3 s4 where SA's order 2 is s4 s3
    _collect(mr, tree)
    page = _render(mr, tree)
    assert "| EWC − SA | +0.0 | +0.0 (n = 1) | within noise (one order) |" in page
    assert "  - order 2 (runs: EWC): s3 s4 (row 2 of the Williams design" in page
    assert "  - order 2 (runs: JT, SA," in page


def test_collect_replaces_the_setup_and_keeps_the_others(mr, tree):
    _collect(mr, tree)
    _collect(mr, tree, name="msc")
    (tree / "results" / "mini" / "NOTES.md").write_text("by hand\n")
    shutil.rmtree(tree / "exp" / "musa_rnn" / "continual" / "ewc")
    _collect(mr, tree)  # a run gone from exp/ is gone from results/mini, results/msc untouched
    assert not (tree / "results" / "mini" / "ewc").exists() and (tree / "results" / "msc" / "ewc").is_dir()
    assert (tree / "results" / "mini" / "NOTES.md").read_text() == "by hand\n"
    page = _render(mr, tree)
    assert page.index("## `mini`") < page.index("## `msc`")
