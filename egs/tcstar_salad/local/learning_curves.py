#!/usr/bin/env python3
"""Validation MCD per epoch of each trained model: has the curve flattened where training stopped?

  python local/learning_curves.py --out results/msc/analysis [--exp-dir exp] [--speakers "A B"]
      [--models "musa_rnn_small salad_small"] [--last 5] [--flat-db 0.1]

Reads ``EXP/<spk>/<model>/metrics.jsonl`` (``valid/mcd``: MCD on the speaker's dev set, speechkit
convention, after every epoch) of every speaker directory under EXP that has one of --models. The
paper stops training when the dev MCD has not improved for 20 epochs (sec. 3.3); where a run stopped
earlier (the CPU budget), a curve whose best dev MCD fell by less than --flat-db over its last --last
epochs is called **flattened**, otherwise **still falling**.

Writes OUT/learning_curves.{json,md} and OUT/learning_curves.png (one panel per speaker).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis_common import read_valid_curve, write_outputs


def judge(mcd: list[float], last: int, flat_db: float) -> dict:
    """Best epoch, and the fall of the running best over the last ``last`` epochs (dB, >= 0)."""
    best = min(range(len(mcd)), key=mcd.__getitem__)
    if len(mcd) <= last:
        return {"best_epoch": best + 1, "best_mcd": mcd[best], "fall_last": None, "verdict": "too short"}
    fall = min(mcd[: len(mcd) - last]) - min(mcd)
    return {"best_epoch": best + 1, "best_mcd": mcd[best], "fall_last": fall,
            "verdict": "flattened" if fall < flat_db else "still falling"}


def plot(curves: dict, path: Path) -> None:
    """One panel per speaker, a line per model (dev MCD against epoch)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spks = sorted({spk for spk, _ in curves})
    fig, axes = plt.subplots(1, len(spks), figsize=(4.2 * len(spks), 3.2), squeeze=False)
    for ax, spk in zip(axes[0], spks):
        for (s, model), c in curves.items():
            if s == spk:
                ax.plot(range(1, len(c["valid_mcd"]) + 1), c["valid_mcd"], marker=".", label=model)
        ax.set_title(spk[:8], fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("dev MCD (dB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="results/<run>/analysis")
    ap.add_argument("--exp-dir", default="exp")
    ap.add_argument("--speakers", default=None, help="default: every speaker dir of --exp-dir with a model")
    ap.add_argument("--models", default="musa_rnn_small salad_small")
    ap.add_argument("--last", type=int, default=5, help="epochs over which a flattened curve falls < --flat-db")
    ap.add_argument("--flat-db", type=float, default=0.1)
    args = ap.parse_args(argv)
    if args.last < 1:
        ap.error("--last must be >= 1")
    exp = Path(args.exp_dir)
    models = args.models.split()
    spks = args.speakers.split() if args.speakers else sorted(
        d.name for d in exp.iterdir() if d.is_dir() and any((d / m / "metrics.jsonl").is_file() for m in models))
    curves = {}
    for spk in spks:
        for m in models:
            if (exp / spk / m / "metrics.jsonl").is_file():
                c = read_valid_curve(exp / spk / m)
                curves[(spk, m)] = {**c, **judge(c["valid_mcd"], args.last, args.flat_db)}
    if not curves:
        ap.error(f"{exp}: no <speaker>/<model>/metrics.jsonl for --models {args.models}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(curves, out / "learning_curves.png")
    rows = []
    for (spk, m), c in curves.items():
        fall = "-" if c["fall_last"] is None else f"{c['fall_last']:.2f}"
        rows.append(f"| `{spk[:8]}` | {m} | {len(c['valid_mcd'])} | {c['updates']} | {c['best_mcd']:.2f} "
                    f"({c['best_epoch']}) | {c['valid_mcd'][-1]:.2f} | {fall} | {c['verdict']} |")
        print(rows[-1])
    md = "\n".join([
        "#### Learning curves: dev MCD per epoch", "",
        f"Validation MCD (speechkit convention, dev set) after every epoch ([plot](learning_curves.png)). "
        f"Fall: how much the best dev MCD dropped over the last {args.last} epochs; **flattened** when under "
        f"{args.flat_db} dB. The paper stops after 20 epochs without improvement (sec. 3.3).", "",
        "| speaker | model | epochs | updates | best dev MCD dB (epoch) | last dB | fall dB | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|", *rows])
    record = {"last": args.last, "flat_db": args.flat_db,
              "curves": [{"speaker": s, "model": m, **c} for (s, m), c in curves.items()]}
    write_outputs(out, "learning_curves", record, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
