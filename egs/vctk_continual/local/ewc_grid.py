#!/usr/bin/env python3
"""EWC's lambda chosen on the dev utterances (issue 36, item 1): read the grid, pick, write the grid file.

  local/ewc_grid.py --continual-dir exp/musa_rnn/continual --lambdas "1e2 1e4 1e6 1e8 1e10" --orders "1 2 3" \\
                    --out exp/musa_rnn/continual/ewc_grid.json

run.sh stage 7 with --ewc_lambda_grid trains the runs ewc_l<lambda>/order<K> for every lambda and order and scores
every episode with the speaker verifier on the DEV utterances of the speakers seen so far
(speechkit-score-continual --test-dir dump/continual/dev --eval-dir <run>/order<K>/eval_dev); then this reads
those <run>/order<K>/eval_dev/scores.json (never eval/, the test evaluation) and each run's plan.json, and writes
--out (stage 8 copies it into results/<name>/ewc_grid.json, RESULTS.md renders it). The dev scores are the
verifier's decisions on syntheses of the dev sentences (the held-out sentences of each episode's early stopping,
never trained on); the only test data the dev scoring reads is the ground truth of the verifier's own held-out
accuracy (--gt-test, as in every evaluation), which plays no part in the choice.

    {"criterion": ..., "tie_rule": ..., "split": "dev", "orders": ["1", "2", "3"], "lambdas": [...],
     "grid": [{"lambda": 100.0, "run": "ewc_l1e2", "mean_final_ra": 0.25, "mean_final_fg": 0.9,
               "orders": {"1": {"final_ra": ..., "final_fg": ..., "speakers": [...], "num_utts": 3,
                                "skipped": 0}, ...}}, ...],
     "chosen": {"lambda": 1e8, "run": "ewc_l1e8", "mean_final_ra": ..., "mean_final_fg": ...}}

The choice (:func:`choose`): the lambda of the highest mean over the orders of the final dev RA (eq. 1 after the
last episode); ties (means within 1e-9) go to the lower mean final dev FG (eq. 2), then to the smaller lambda
(the weaker penalty, the nearer to SA). A lambda or order without a finished dev evaluation of every episode, a
run whose plan.json is not EWC at that lambda, or orders that differ between lambdas are errors naming them: no
choice is made from part of the grid.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from speechkit.utils.cli import run_main
from speechkit.utils.fileio import DataError, atomic_write
from speechkit.utils.jsonio import read_json
from speechkit.utils.outputs import check_output_files

CRITERION = ("the highest mean over the speaker orders of the final dev RA (eq. 1 after the last episode: the "
             "verifier on syntheses of the dev sentences of every continual speaker; no test sentence is "
             "synthesized or scored for the choice)")
TIE_RULE = "means within 1e-9: the lower mean final dev FG (eq. 2), then the smaller lambda"
TIE = 1e-9
EVAL_DIR = "eval_dev"


def parse_lambdas(text: str) -> list[tuple[str, float]]:
    """``"1e2 1e4"`` -> ``[("1e2", 100.0), ("1e4", 10000.0)]`` (the text names the run ``ewc_l<text>``).

    Raises:
        ValueError: empty, not a number, not finite and > 0, or the same value twice (named).
    """
    out: list[tuple[str, float]] = []
    for tok in text.split():
        try:
            v = float(tok)
        except ValueError:
            raise ValueError(f"--lambdas: '{tok}' is not a number") from None
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"--lambdas: '{tok}' must be a finite number > 0")
        same = [t for t, x in out if x == v]
        if same:
            raise ValueError(f"--lambdas: '{tok}' is the value of '{same[0]}' again")
        out.append((tok, v))
    if not out:
        raise ValueError("--lambdas: no value")
    return out


def read_grid(cont: Path, lambdas: list[tuple[str, float]], orders: list[str]) -> tuple[list[dict], list[Path]]:
    """Every (lambda, order)'s final dev RA / FG, and the files read.

    Args:
        cont: ``exp/<tts_model>/continual``.
        lambdas: :func:`parse_lambdas`'s pairs.
        orders: the order numbers K (``order<K>`` dirs).

    Returns:
        ``(grid, files)``: one entry per lambda as in the module docstring (without ``chosen``), the files read.

    Raises:
        FileNotFoundError: a run or order not trained or not scored on dev (names the file and the command).
        DataError: an unfinished dev evaluation, a plan that is not EWC at that lambda, or an order whose
            speakers differ between lambdas (named).
    """
    grid, files, speakers_of = [], [], {}
    for text, lam in lambdas:
        run = f"ewc_l{text}"
        per = {}
        for k in orders:
            d = cont / run / f"order{k}"
            plan_path, scores_path = d / "plan.json", d / EVAL_DIR / "scores.json"
            for p in (plan_path, scores_path):
                if not p.is_file():
                    raise FileNotFoundError(f"{p}: no such file (run.sh --stage 7 --ewc_lambda_grid trains and scores "
                                            f"on dev every lambda and order)")
            files += [plan_path, scores_path]
            plan, s = read_json(plan_path, expect=dict), read_json(scores_path, expect=dict)
            if plan.get("strategy") != "ewc" or plan.get("ewc_lambda") != lam:
                raise DataError(f"{plan_path}: strategy {plan.get('strategy')!r}, ewc_lambda {plan.get('ewc_lambda')!r}"
                                f": not EWC at lambda {lam:g}")
            if not s.get("complete") or s.get("final_ra") is None or s.get("order") != plan.get("order"):
                raise DataError(f"{scores_path}: the dev evaluation does not cover every episode of "
                                f"{' '.join(plan.get('order', []))}: run stage 7 again")
            known = speakers_of.setdefault(k, s["order"])
            if known != s["order"]:
                raise DataError(f"{scores_path}: order {k} is {' '.join(s['order'])} here but {' '.join(known)} in "
                                f"another lambda's run: the grid's runs must share their orders")
            per[k] = {"final_ra": float(s["final_ra"]),
                      "final_fg": None if s.get("final_fg") is None else float(s["final_fg"]),
                      "speakers": list(s["order"]), "num_utts": s.get("num_utts"), "skipped": s.get("skipped", 0)}
        fgs = [v["final_fg"] for v in per.values() if v["final_fg"] is not None]
        grid.append({"lambda": lam, "run": run, "orders": per,
                     "mean_final_ra": sum(v["final_ra"] for v in per.values()) / len(per),
                     "mean_final_fg": sum(fgs) / len(fgs) if fgs else None})
    return grid, files


def choose(grid: list[dict]) -> dict:
    """The grid entry of the chosen lambda: the highest ``mean_final_ra``; ties (within 1e-9) the lower
    ``mean_final_fg`` (None counts as the highest), then the smaller ``lambda``.

    Raises:
        ValueError: an empty grid.
    """
    if not grid:
        raise ValueError("an empty grid: nothing to choose from")
    best = max(g["mean_final_ra"] for g in grid)
    tied = [g for g in grid if g["mean_final_ra"] >= best - TIE]
    fg = min((g["mean_final_fg"] for g in tied if g["mean_final_fg"] is not None), default=None)
    if fg is not None:
        tied = [g for g in tied if g["mean_final_fg"] is not None and g["mean_final_fg"] <= fg + TIE]
    return min(tied, key=lambda g: g["lambda"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--continual-dir", required=True, help="exp/<tts_model>/continual: the runs ewc_l<lambda>/")
    ap.add_argument("--lambdas", required=True, help='the grid, e.g. "1e2 1e4 1e6 1e8 1e10"')
    ap.add_argument("--orders", required=True, help='the order numbers K of the order<K> dirs, e.g. "1 2 3"')
    ap.add_argument("--out", required=True, help="the grid file to write (JSON)")
    a = ap.parse_args(argv)
    orders = a.orders.split()
    if not orders:
        raise ValueError("--orders: no order")
    grid, files = read_grid(Path(a.continual_dir), parse_lambdas(a.lambdas), orders)
    check_output_files({"--out": a.out}, inputs=[(str(p), p) for p in files])
    best = choose(grid)
    out = {"criterion": CRITERION, "tie_rule": TIE_RULE, "split": "dev", "eval_dir": EVAL_DIR, "orders": orders,
           "lambdas": [g["lambda"] for g in grid], "grid": grid,
           "chosen": {k: best[k] for k in ("lambda", "run", "mean_final_ra", "mean_final_fg")}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(a.out) as f:
        json.dump(out, f, indent=1, allow_nan=False)
        f.write("\n")
    for g in grid:
        fg = "-" if g["mean_final_fg"] is None else f"{100 * g['mean_final_fg']:.1f}"
        mark = "  <- chosen" if g is best else ""
        print(f"lambda {g['lambda']:g}: mean final dev RA {100 * g['mean_final_ra']:.1f} %, FG {fg} % over "
              f"{len(orders)} orders{mark}")
    print(f"chosen on dev: lambda {best['lambda']:g} ({best['run']}); wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main("ewc_grid.py", main))  # an error is one line and exit 1
