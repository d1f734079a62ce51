#!/usr/bin/env python3
"""Collect the results of egs/vctk_continual into EXP_DIR/RESULTS.md (+ RESULTS.json) and figures.

For each continual run (strategy and setting) and speaker order, EXP_DIR/continual/<run>/order<seed>/
eval/scores.json (speechkit-score-continual) gives the accuracy matrix a_{l,i}, retained accuracy
RA_l (eq. 1) and forgetting FG_l (eq. 2). This script reports, as Hemati & Borth (2024) do:
  - Table 3 / Figure 3: final RA and FG per strategy, mean +/- standard deviation over the speaker
    orders, and RA/FG after every episode (exp/figures/ra_fg_curves.png);
  - Table 4: ER with buffer sizes N_B, and ER-BR (N_B = 1, K) against ER (N_B = 1);
  - the paper's qualitative claims checked on the numbers (ER > SA and EWC; ER-BR > ER at N_B = 1;
    JT the upper bound; SA's confusions collapsing toward the last speaker);
  - the training budget (episodes, updates, wall-clock time) of every run;
  - Figure 4: confusion matrices and embedding maps of the last episode (copied to exp/figures/).

Usage: local/make_results.py --runs "jt sa ..." --orders "1 2 3" [--corpus NAME] [--buffer-size N]
                             [--er-buffer-sizes "1 2 5 10"] DATA_DIR EXP_DIR
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from speechkit.scoring.continual_plots import plot_ra_fg_curves
from speechkit.scoring.speaker_verification import aggregate_runs
from speechkit.train.report import training_summary
from speechkit.utils.fileio import atomic_write

LABELS = {"jt": "JT (joint training, upper bound)", "sa": "SA (sequential adaptation, lower bound)",
          "ewc": "EWC"}


def label(run: str) -> str:
    if run in LABELS:
        return LABELS[run]
    if run.startswith("ewc_l"):
        return f"EWC (λ = {float(run[5:]):g})"
    if run.startswith("er_kd_b"):
        return f"ER-KD (N_B = {run[7:]})"
    if run.startswith("er_br_b"):
        b, k = run[7:].split("_k")
        return f"ER-BR (N_B = {b}, K = {k})"
    if run.startswith("er_b"):
        return f"ER (N_B = {run[4:]})"
    return run


def pct(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{round(100 * x, 1) + 0.0:.1f}"


def mean_std(values: list[float]) -> str:
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return "-"
    if len(v) == 1:
        return f"{round(100 * v[0], 1) + 0.0:.1f}"
    return f"{round(100 * v.mean(), 1) + 0.0:.1f} ± {100 * v.std(ddof=1):.1f}"


def load_run(exp: Path, run: str, orders: list[str]) -> dict | None:
    out = {"orders": {}, "ra": [], "fg": [], "verifier": [], "episodes": 0, "steps": 0, "seconds": 0.0,
           "last_share": [], "complete": True}
    for o in orders:
        d = exp / "continual" / run / f"order{o}"
        p = d / "eval" / "scores.json"
        if not p.is_file():
            continue
        s = json.loads(p.read_text(encoding="utf-8"))
        out["orders"][o] = s
        out["complete"] &= bool(s.get("complete"))
        out["ra"].append([np.nan if x is None else x for x in s["retained_accuracy"]])
        out["fg"].append([np.nan if x is None else x for x in s["forgetting"]])
        out["verifier"] += [x for x in s["verifier_accuracy"]]
        for ep in sorted(d.glob("episode_*_*/")):
            info = training_summary(ep)
            out["episodes"] += 1
            out["steps"] += info.get("steps", 0)
            out["seconds"] += info.get("train_seconds", 0.0)
        # the share of the last episode's syntheses verified as the last speaker (SA's collapse)
        T = len(s["order"])
        last = json.loads((d / "eval" / f"episode_{T:02d}.json").read_text(encoding="utf-8"))
        earlier = [r for r in last["utterances"] if r["speaker"] != s["order"][-1]]
        if earlier:
            out["last_share"].append(np.mean([r["predicted"] == s["order"][-1] for r in earlier]))
    if not out["orders"]:
        return None
    lengths = {len(r) for r in out["ra"]}
    if len(lengths) > 1:  # an unfinished order: compare on the common episodes
        n = min(lengths)
        out["ra"] = [r[:n] for r in out["ra"]]
        out["fg"] = [r[:n] for r in out["fg"]]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir")
    ap.add_argument("exp_dir")
    ap.add_argument("--runs", required=True)
    ap.add_argument("--orders", default="1 2 3")
    ap.add_argument("--corpus", default="")
    ap.add_argument("--tts-model", default="salad")
    ap.add_argument("--verifier", default="", help="the verifier's held-out accuracy line (stage 5)")
    ap.add_argument("--buffer-size", type=int, default=5)
    ap.add_argument("--er-buffer-sizes", default="1 2 5 10")
    a = ap.parse_args()
    data, exp = Path(a.data_dir), Path(a.exp_dir)
    runs, orders = a.runs.split(), a.orders.split()
    results = {r: load_run(exp, r, orders) for r in runs}
    missing = [r for r, v in results.items() if v is None]
    results = {r: v for r, v in results.items() if v is not None}
    if not results:
        print(f"{exp}/continual: no scored run (stage 7)", file=sys.stderr)
        return 1
    fig_dir = exp / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)

    L = []
    cont = (data / "continual_speakers").read_text(encoding="utf-8").split()
    pre = (data / "pretrain_speakers").read_text(encoding="utf-8").split()
    extra = (data / "verifier_extra_speakers").read_text(encoding="utf-8").split() \
        if (data / "verifier_extra_speakers").is_file() else []
    L.append(f"# egs/vctk_continual results: {a.corpus or 'corpus ?'}, base TTS {a.tts_model}\n")
    L.append(f"Continual speakers ({len(cont)}, one per episode): {' '.join(cont)}; pre-training speakers: "
             f"{len(pre)}; the verifier's classes: the seen continual speakers + {len(extra)} pre-training "
             f"speakers ({' '.join(extra)}). Speaker orders (seeds): {' '.join(orders)}. RA, FG and accuracies "
             f"in %, mean ± standard deviation over the orders.\n")
    ver = Path(a.verifier)
    if a.verifier and ver.is_file():
        L.append(f"Speaker verifier on vocoded ground truth, all verifier speakers: "
                 f"{ver.read_text(encoding='utf-8').splitlines()[0].split('; ', 1)[-1]}.\n")
    if missing:
        L.append(f"Not scored yet: {', '.join(missing)}.\n")

    # ---- Table 3 / Figure 3
    L.append("## Strategies (Table 3, Figure 3)\n")
    L.append("| run | final RA | final FG | RA per order | verifier held-out acc. (mean over episodes) "
             "| last-episode syntheses of earlier speakers verified as the last speaker | episodes | updates | training time |")
    L.append("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r, v in results.items():
        finals_ra = [s["final_ra"] for s in v["orders"].values()]
        finals_fg = [s["final_fg"] for s in v["orders"].values()]
        per = " / ".join(pct(x) for x in finals_ra)
        note = "" if v["complete"] else " (unfinished)"
        L.append(f"| {label(r)}{note} | {mean_std(finals_ra)} | {mean_std(finals_fg)} | {per} | "
                 f"{mean_std([float(np.mean(v['verifier']))])} | {mean_std(v['last_share'])} | {v['episodes']} | "
                 f"{v['steps']} | {v['seconds'] / 60:.1f} min |")
    L.append("")
    T = min(len(v["ra"][0]) for v in results.values())
    L.append("RA after each episode (mean over orders):\n")
    L.append("| run | " + " | ".join(f"RA_{t}" for t in range(1, T + 1)) + " | "
             + " | ".join(f"FG_{t}" for t in range(2, T + 1)) + " |")
    L.append("|---|" + "---:|" * (2 * T - 1))
    curves = {}
    for r, v in results.items():
        ra = aggregate_runs([np.array(x[:T]) for x in v["ra"]])
        fg = aggregate_runs([np.array(x[:T]) for x in v["fg"]])
        L.append(f"| {label(r)} | " + " | ".join(pct(x) for x in ra["mean"]) + " | "
                 + " | ".join(pct(x) for x in fg["mean"][1:]) + " |")
        curves[label(r)] = {"ra": [x[:T] for x in v["ra"]], "fg": [x[:T] for x in v["fg"]]}
    L.append("")
    main_runs = {k: c for k, c in curves.items()
                 if not (k.startswith("ER (N_B") and f"N_B = {a.buffer_size})" not in k)}
    plot_ra_fg_curves(main_runs, fig_dir / "ra_fg_curves.png", title="Figure 3: RA and FG per episode")
    L.append("![RA and FG per episode](figures/ra_fg_curves.png)\n")

    # ---- Table 4: buffer sizes, ER-BR
    er_runs = [f"er_b{b}" for b in a.er_buffer_sizes.split() if f"er_b{b}" in results]
    br = [r for r in results if r.startswith("er_br_b")]
    if er_runs or br:
        L.append("## Experience replay: buffer size and replication (Table 4)\n")
        L.append("| run | final RA | final FG |")
        L.append("|---|---:|---:|")
        for r in er_runs + br:
            v = results[r]
            L.append(f"| {label(r)} | {mean_std([s['final_ra'] for s in v['orders'].values()])} | "
                     f"{mean_std([s['final_fg'] for s in v['orders'].values()])} |")
        L.append("")
        sweep = {label(r): curves[label(r)] for r in er_runs + br}
        plot_ra_fg_curves(sweep, fig_dir / "er_buffer_sizes.png", title="ER buffer sizes and ER-BR")
        L.append("![ER buffer sizes](figures/er_buffer_sizes.png)\n")

    # ---- the paper's claims
    def final(r):
        v = results.get(r)
        return None if v is None else float(np.mean([s["final_ra"] for s in v["orders"].values()]))

    er_main = f"er_b{a.buffer_size}"
    checks = []
    if all(final(r) is not None for r in (er_main, "sa", "ewc")):
        checks.append(("ER above SA and EWC in final RA", final(er_main) > max(final("sa"), final("ewc")),
                       f"ER {pct(final(er_main))}, SA {pct(final('sa'))}, EWC {pct(final('ewc'))}"))
    if br and final("er_b1") is not None:
        checks.append(("ER-BR above ER at N_B = 1", final(br[0]) > final("er_b1"),
                       f"ER-BR {pct(final(br[0]))}, ER {pct(final('er_b1'))}"))
    if final("jt") is not None:
        others = {r: final(r) for r in results if r != "jt"}
        best = max(others, key=others.get) if others else None
        checks.append(("JT the upper bound", best is None or final("jt") >= others[best],
                       f"JT {pct(final('jt'))}, best other {label(best) if best else '-'} "
                       f"{pct(others[best]) if best else '-'}"))
    if "sa" in results and results["sa"]["last_share"]:
        share = float(np.mean(results["sa"]["last_share"]))
        chance = 1.0 / (len(extra) + len(cont))
        checks.append(("SA's confusions collapse toward the last speaker", share > 2 * chance,
                       f"{pct(share)} % of SA's last-episode syntheses of earlier speakers verified as the "
                       f"last speaker (chance {pct(chance)} %)"))
    if checks:
        L.append("## The paper's claims, measured here\n")
        L.append("| claim | holds here | numbers (final RA %) |")
        L.append("|---|---|---|")
        for c, ok, nums in checks:
            L.append(f"| {c} | {'yes' if ok else '**no**'} | {nums} |")
        L.append("")

    # ---- Figure 4
    L.append("## Last episode, first order (Figure 4)\n")
    o = orders[0]
    for r in [x for x in ("sa", er_main, "jt", "ewc") if x in results]:
        src = exp / "continual" / r / f"order{o}" / "eval"
        for name in ("confusion_matrix", "embeddings_2d", "accuracy_matrix"):
            if (src / f"{name}.png").is_file():
                shutil.copyfile(src / f"{name}.png", fig_dir / f"{r}_order{o}_{name}.png")
        L.append(f"{label(r)}: ![confusion](figures/{r}_order{o}_confusion_matrix.png) "
                 f"![embeddings](figures/{r}_order{o}_embeddings_2d.png)\n")

    with atomic_write(exp / "RESULTS.md") as f:
        f.write("\n".join(L) + "\n")
    js = {r: {"final_ra": [s["final_ra"] for s in v["orders"].values()],
              "final_fg": [s["final_fg"] for s in v["orders"].values()],
              "ra": v["ra"], "fg": v["fg"], "episodes": v["episodes"], "steps": v["steps"],
              "train_seconds": v["seconds"], "last_speaker_share": v["last_share"]}
          for r, v in results.items()}
    with atomic_write(exp / "RESULTS.json") as f:
        json.dump(json.loads(json.dumps(js, default=float).replace("NaN", "null")), f, indent=1)
    print((exp / "RESULTS.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
