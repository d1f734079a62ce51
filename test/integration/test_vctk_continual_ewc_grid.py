"""Issue 36 item 1: egs/vctk_continual/local/ewc_grid.py chooses EWC's lambda on the dev scores of the grid runs
(ewc_l<lambda>/order<K>/eval_dev/scores.json, never the test eval/) by a hand-worked case, with its tie rule and
its refusals; make_results.py --collect copies the grid file into results/<name>/ and --render shows it, the EWC
run's lambda and whether the grid chose it (seconds, on hand-made files)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from speechkit.utils.fileio import DataError
from speechkit.utils.provenance import record_run

LOCAL = Path(__file__).resolve().parents[2] / "egs/vctk_continual/local"
ORDERS = {"1": ["s1", "s2", "s4", "s3"], "2": ["s2", "s3", "s1", "s4"], "3": ["s3", "s4", "s2", "s1"]}
# final dev RA per order (4 speakers x 3 dev sentences: steps of 1/12) and final dev FG, by lambda
GRID = {"1e2": ([3, 3, 3], 0.9), "1e4": ([3, 4, 2], 0.8), "1e6": ([6, 5, 4], 0.5), "1e8": ([5, 6, 4], 0.5),
        "1e10": ([0, 1, 0], 1.0)}
# by hand: means 3/12, 3/12, 5/12, 5/12, 1/36. 1e6 and 1e8 tie on RA and on FG: the smaller lambda, 1e6.
CHOSEN = 1e6


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"vctk_{name}", LOCAL / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(LOCAL))  # as `python local/NAME.py`: make_results imports its tables from local/
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(LOCAL))
    return mod


@pytest.fixture(scope="module")
def eg():
    return _load("ewc_grid")


@pytest.fixture(scope="module")
def mr():
    return _load("make_results")


def _scores(order, final_ra, final_fg, complete=True):
    return {"order": order, "final_ra": final_ra, "final_fg": final_fg, "complete": complete, "num_utts": 3,
            "skipped": 0, "retained_accuracy": [1.0] * (len(order) - 1) + [final_ra],
            "forgetting": [None] + [final_fg] * (len(order) - 1), "verifier_accuracy": [1.0] * len(order),
            "accuracy_matrix": [[1.0] * len(order)] * len(order)}


def _plan(order, k, lam, strategy="ewc"):
    return {"strategy": strategy, "order": order, "seed": int(k), "buffer_size": 0, "replicate": 1,
            "ewc_lambda": lam, "extra": {"order_design": {"design": "williams", "row": int(k), "rows": 4,
                                                          "speakers": sorted(order)}}, "version": 3}


def _grid_tree(cont: Path) -> None:
    for text, (ras, fg) in GRID.items():
        for (k, order), ra in zip(ORDERS.items(), ras):
            d = cont / f"ewc_l{text}" / f"order{k}"
            (d / "eval_dev").mkdir(parents=True)
            (d / "plan.json").write_text(json.dumps(_plan(order, k, float(text))))
            (d / "eval_dev" / "scores.json").write_text(json.dumps(_scores(order, ra / 12, fg)))
            # a test evaluation that would choose 1e10: it must not be read
            (d / "eval").mkdir()
            (d / "eval" / "scores.json").write_text(json.dumps(_scores(order, 1.0 if text == "1e10" else 0.0, 0.0)))


def _main(eg, cont: Path, lambdas: str = " ".join(GRID), orders: str = "1 2 3") -> int:
    return eg.main(["--continual-dir", str(cont), "--lambdas", lambdas, "--orders", orders,
                    "--out", str(cont / "ewc_grid.json")])


def test_the_choice_by_hand(eg, tmp_path, capsys):
    cont = tmp_path / "exp" / "musa_rnn" / "continual"
    _grid_tree(cont)
    assert _main(eg, cont) == 0
    g = json.loads((cont / "ewc_grid.json").read_text())
    assert g["chosen"]["lambda"] == CHOSEN and g["chosen"]["run"] == "ewc_l1e6"
    assert g["chosen"]["mean_final_ra"] == pytest.approx(5 / 12) and g["split"] == "dev"
    assert g["lambdas"] == [100.0, 1e4, 1e6, 1e8, 1e10] and g["orders"] == ["1", "2", "3"]
    by = {e["run"]: e for e in g["grid"]}
    assert by["ewc_l1e4"]["mean_final_ra"] == pytest.approx(3 / 12) and by["ewc_l1e4"]["mean_final_fg"] == pytest.approx(0.8)
    assert by["ewc_l1e10"]["mean_final_ra"] == pytest.approx(1 / 36)  # the test eval/ (100 %) was not read
    assert by["ewc_l1e8"]["orders"]["2"] == {"final_ra": 0.5, "final_fg": 0.5, "speakers": ORDERS["2"],
                                             "num_utts": 3, "skipped": 0}
    assert "dev RA" in g["criterion"] and "smaller lambda" in g["tie_rule"]
    out = capsys.readouterr().out
    assert "lambda 1e+06: mean final dev RA 41.7 %, FG 50.0 % over 3 orders  <- chosen" in out


def test_tie_rule(eg):
    def e(lam, ra, fg):
        return {"lambda": lam, "mean_final_ra": ra, "mean_final_fg": fg}

    # equal RA (to 1e-9): the lower FG wins, whatever its lambda
    assert eg.choose([e(1e2, 0.25, 0.9), e(1e4, 0.25 + 1e-12, 0.8)])["lambda"] == 1e4
    # equal RA and FG: the smaller lambda; a higher RA beats any FG
    assert eg.choose([e(1e8, 0.5, 0.4), e(1e6, 0.5, 0.4), e(1e4, 0.49, 0.0)])["lambda"] == 1e6
    assert eg.choose([e(1e2, 0.3, None), e(1e4, 0.3, 0.5)])["lambda"] == 1e4  # no FG counts as the highest
    with pytest.raises(ValueError, match="empty grid"):
        eg.choose([])


def test_refusals_name_what_is_wrong(eg, tmp_path):
    cont = tmp_path / "continual"
    _grid_tree(cont)
    with pytest.raises(ValueError, match="'100' is the value of '1e2' again"):
        _main(eg, cont, "1e2 100")
    with pytest.raises(ValueError, match="'0' must be a finite number > 0"):
        _main(eg, cont, "0 1e2")
    with pytest.raises(FileNotFoundError, match=r"ewc_l1e3/order1/plan.json: no such file"):
        _main(eg, cont, "1e2 1e3")
    with pytest.raises(FileNotFoundError, match=r"ewc_l1e2/order4/plan.json"):
        _main(eg, cont, orders="1 4")
    s = cont / "ewc_l1e4" / "order2" / "eval_dev" / "scores.json"
    s.write_text(json.dumps(_scores(ORDERS["2"], 0.5, 0.5, complete=False)))
    with pytest.raises(DataError, match="does not cover every episode"):
        _main(eg, cont)
    s.write_text(json.dumps(_scores(ORDERS["1"], 0.5, 0.5)))
    (cont / "ewc_l1e4" / "order2" / "plan.json").write_text(json.dumps(_plan(ORDERS["1"], 2, 1e4)))
    with pytest.raises(DataError, match="order 2 is s1 s2 s4 s3 here but s2 s3 s1 s4 in another lambda's run"):
        _main(eg, cont)
    (cont / "ewc_l1e4" / "order2" / "plan.json").write_text(json.dumps(_plan(ORDERS["1"], 2, 1e5)))
    with pytest.raises(DataError, match="not EWC at lambda 10000"):
        _main(eg, cont)
    assert not (cont / "ewc_grid.json").exists()


def _test_run(cont: Path, run: str, k: str, lam: float, ra: float) -> None:
    """A test-scored run of order k (scores.json in eval/, its episodes, plan.json)."""
    d = cont / run / f"order{k}"
    order = ORDERS[k]
    (d / "eval").mkdir(parents=True)
    (d / "eval" / "scores.json").write_text(json.dumps(_scores(order, ra, 1 - ra)))
    (d / "plan.json").write_text(json.dumps(_plan(order, k, lam, "ewc" if run.startswith("ewc") else run)))
    for t, s in enumerate(order, 1):
        (d / f"episode_{t:02d}_{s}").mkdir()
        (d / f"episode_{t:02d}_{s}" / "episode.json").write_text(json.dumps({"epochs": 1, "steps": 2}))


def _page(mr, root: Path) -> str:
    old = sys.argv
    try:
        sys.argv = ["make_results.py", "--collect", str(root / "results" / "mini"), "--datadir", str(root / "data"),
                    "--expdir", str(root / "exp"), "--corpus", "mini"]
        assert mr.main() == 0
        sys.argv = ["make_results.py", "--render", str(root / "RESULTS.md"), "--results", str(root / "results")]
        assert mr.main() == 0
    finally:
        sys.argv = old
    return (root / "RESULTS.md").read_text()


def test_collected_and_rendered(eg, mr, tmp_path):
    cont = tmp_path / "exp" / "musa_rnn" / "continual"
    _grid_tree(cont)
    assert _main(eg, cont) == 0
    for decoy in cont.glob("ewc_l*/order*/eval"):  # as run.sh leaves the grid runs: scored on dev only
        shutil.rmtree(decoy)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "continual_speakers").write_text("s1\ns2\ns3\ns4\n")
    record_run(tmp_path / "exp" / "runs.jsonl", "./run.sh --stage 7 --ewc_lambda_grid '1e2 1e4'", [], cwd=tmp_path)
    for k in ORDERS:
        _test_run(cont, "sa", k, 0.0, 0.25)
        _test_run(cont, "ewc", k, 100.0, 0.25)  # the config's lambda, not the grid's choice
    page = _page(mr, tmp_path)
    res = tmp_path / "results" / "mini"
    assert json.loads((res / "ewc_grid.json").read_text())["chosen"]["lambda"] == CHOSEN
    assert not (res / "ewc_l1e6").exists()  # the grid runs have no test evaluation: not among the runs
    assert "### EWC's λ chosen on dev" in page and "Chosen: **λ = 1e+06**" in page
    assert "| final dev RA per order (1 / 2 / 3) | mean final dev RA (n = 3) |" in page
    assert "| 1e+06 | 50.0 / 41.7 / 33.3 | 41.7 | 50.0 | **chosen** |" in page
    assert "| 100 | 25.0 / 25.0 / 25.0 | 25.0 | 90.0 |  |" in page
    assert "EWC (λ = 100, not the dev grid's choice 1e+06)" in page
    assert "EWC at λ = 100, not the dev grid's choice 1e+06 (section 'EWC's λ chosen on dev')" in page
    # the EWC run at the chosen lambda
    for k in ORDERS:
        (cont / "ewc" / f"order{k}" / "plan.json").write_text(json.dumps(_plan(ORDERS[k], k, CHOSEN)))
    page = _page(mr, tmp_path)
    assert "| EWC (λ = 1e+06, chosen on dev) | 3 |" in page
    assert "the EWC run of the tables trains at λ = 1e+06, chosen on dev." in page
    assert "  - order 2: s2 s3 s1 s4 (row 2 of the Williams design over the 4 C-sorted speakers)" in page
