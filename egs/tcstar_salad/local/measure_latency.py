#!/usr/bin/env python3
"""CPU inference latency of the four acoustic models against utterance length (Table 3, Figure 3).

  python local/measure_latency.py --out-dir DIR [--config-dir conf] [--input-dim 364]
      [--max-seconds 35] [--num-lengths 8] [--repeats 2] [--exp-dir NAME=EXP ...]
      [--models salad_small,musa_rnn_small,salad_big,musa_rnn_big] [--rnn-mode sequence|stepwise]
      [--clock cpu|wall]

Pascual, Bonafonte & Serrà (IberSPEECH 2018), sec. 4, Figure 3 and Table 3: the inference time on
CPU of each synthesized test file (up to 35 s) with "PyTorch implementations of LSTM and other
layers", a RANSAC line over the points and its maximum; the paper does not state the CPU, the
thread count or how the LSTM is called. Here: the time to generate the acoustic features of one
utterance on one CPU thread (torch.set_num_threads(1)), for generated utterance lengths from 1 s to
--max-seconds (5 ms frames: 200 frames per second; lengths 1, then --num-lengths - 1 evenly spaced
up to the maximum). Each model runs the whole utterance as in synthesis
(speechkit-tts-synthesize): SALAD over all frames at once, the MUSA-RNN's LSTMs over the whole
sequence from zero state (one ``nn.LSTM`` call, which still steps through the frames one after
another inside; ``--rnn-mode stepwise`` instead calls the model once per frame, carrying the state,
as a streaming synthesizer would). Latency does not depend on the weights' values, so untrained
models built from conf/train_<model>_<size>.yaml with --input-dim label dimensions are timed unless
``--exp-dir NAME=EXP`` names a trained one. Inputs are random label vectors.

A line is fitted to (length, latency) per model with scikit-learn's RANSACRegressor (the paper's
tool, robust to timing outliers) over every timing, and evaluated at the longest length: the
"maximum latency" of Table 3. Both clocks are recorded, wall time and the process's CPU time; with
one thread the CPU time is what the wall time would be on an otherwise idle core, so the fits use it
by default (--clock cpu), which keeps figures taken on a shared machine meaningful.

Outputs in DIR: latency.json (per model: max_fitted_latency_s, slope in s per s of speech,
intercept, measured_max_s = the median timing at the longest length, parameters, every timing;
plus the environment), latency.md (Table 3 next to the paper's), latency.png (Figure 3: latency vs
length, points and fitted lines). The environment records the load average (1, 5, 15 min) as the
timing starts and ends: on a shared machine the CPU-time figures still vary with it (caches, memory
bandwidth, frequency), so a figure is a measurement on that machine at that load, not a constant.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

log = logging.getLogger("measure_latency")

MODELS = ("salad_small", "musa_rnn_small", "salad_big", "musa_rnn_big")
#: Table 3 of the paper: maximum latency (s) of the RANSAC line, test files of up to 35 s, on CPU.
PAPER_LATENCY_S = {"musa_rnn_small": 63.74, "salad_small": 4.715, "musa_rnn_big": 64.84, "salad_big": 5.455}
FRAMES_PER_SECOND = 200  # 5 ms frames


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", "--out_dir", dest="out_dir", required=True, help="where the outputs go")
    p.add_argument("--config-dir", "--config_dir", dest="config_dir",
                   default=str(Path(__file__).resolve().parents[1] / "conf"),
                   help="dir with train_{salad,musa_rnn}_{small,big}.yaml (default: the recipe's conf/)")
    p.add_argument("--input-dim", "--input_dim", dest="input_dim", type=int, default=364,
                   help="label dimension of the untrained models (default: 364, the paper's 362 + 2)")
    p.add_argument("--max-seconds", "--max_seconds", dest="max_seconds", type=float, default=35.0,
                   help="longest generated utterance in seconds (default: 35)")
    p.add_argument("--num-lengths", "--num_lengths", dest="num_lengths", type=int, default=8,
                   help="utterance lengths timed: 1 s, then evenly spaced up to --max-seconds (default: 8)")
    p.add_argument("--repeats", type=int, default=2, help="timings per model and length (default: 2)")
    p.add_argument("--exp-dir", "--exp_dir", dest="exp_dirs", action="append", default=[], metavar="NAME=EXP",
                   help="time the trained model of EXP as NAME (one of the four); repeatable")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    p.add_argument("--rnn-mode", "--rnn_mode", dest="rnn_mode", choices=("sequence", "stepwise"), default="sequence",
                   help="MUSA-RNN inference: one LSTM call over the utterance (default) or one call per frame")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="time fitted and reported: process CPU time (default) or wall time")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and random labels (default: 0)")
    return p


def utterance_lengths(max_seconds: float, num: int) -> list[float]:
    """``[1, max/(num-1), 2 max/(num-1), ..., max]`` seconds (1 s first; duplicates removed).

    Raises:
        ValueError: ``max_seconds < 1`` or ``num < 2``.
    """
    if max_seconds < 1 or num < 2:
        raise ValueError(f"need --max-seconds >= 1 and --num-lengths >= 2, got {max_seconds} and {num}")
    rest = np.linspace(max_seconds / (num - 1), max_seconds, num - 1)
    return sorted({1.0, *[round(float(s), 3) for s in rest]})


def build_models(names: list[str], config_dir: Path, input_dim: int, exp_dirs: dict[str, str], seed: int) -> dict:
    """``{name: model}`` in eval mode: trained (``exp_dirs``) or freshly built from the recipe's YAMLs."""
    import torch

    from speechkit.tasks import get_task
    from speechkit.tasks import load_model
    from speechkit.utils.config import load_config

    models = {}
    for name in names:
        if name in exp_dirs:
            model, _ = load_model(exp_dirs[name])
        else:
            task_name = name.rsplit("_", 1)[0]
            conf = config_dir / f"train_{name}.yaml"
            if not conf.is_file():
                raise FileNotFoundError(f"{conf}: no config for {name} (--config-dir)")
            task = get_task(task_name)
            cfg = load_config(task.Config, conf, [f"model.input_dim={input_dim}"])
            torch.manual_seed(seed)
            model = task.build_model(cfg)
        models[name] = model.eval()
    return models


def run_once(model, labels, rnn_mode: str) -> tuple[float, float]:
    """``(wall, cpu)`` seconds to generate the features of ``labels (1, T, D)`` (inference mode, one utterance)."""
    import torch

    from speechkit.models.musa_rnn import MusaRnn

    with torch.inference_mode():
        t0, c0 = time.perf_counter(), time.process_time()
        if isinstance(model, MusaRnn) and rnn_mode == "stepwise":
            state = None
            for t in range(labels.shape[1]):
                _, state = model(labels[:, t:t + 1], state)
        else:
            model.infer(labels)
        return time.perf_counter() - t0, time.process_time() - c0


def ransac_fit(x: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[float, float, int]:
    """Robust line ``y = slope x + intercept`` (RANSACRegressor over LinearRegression); returns
    ``(slope, intercept, inliers)``."""
    from sklearn.linear_model import LinearRegression, RANSACRegressor

    reg = RANSACRegressor(LinearRegression(), random_state=seed)
    reg.fit(x.reshape(-1, 1), y)
    return float(reg.estimator_.coef_[0]), float(reg.estimator_.intercept_), int(reg.inlier_mask_.sum())


def plot(path: Path, results: dict, max_seconds: float) -> None:
    """Figure 3: latency vs utterance length, the measured points and the RANSAC lines (atomic PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from speechkit.utils.fileio import atomic_write

    colors = {"musa_rnn_small": "tab:blue", "salad_small": "tab:orange", "musa_rnn_big": "tab:green",
              "salad_big": "tab:red"}
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = np.linspace(0, max_seconds, 50)
    for name, r in results.items():
        t = np.array(r["timings"])
        c = colors.get(name)
        ax.scatter(t[:, 0], t[:, 1], s=12, color=c, alpha=0.6)
        ax.plot(xs, r["fit"]["slope"] * xs + r["fit"]["intercept"], color=c,
                label=f"{name} ({r['max_fitted_latency_s']:.2f} s at {max_seconds:g} s)")
    ax.set_xlabel("generated utterance length (s)")
    ax.set_ylabel("inference latency (s), 1 CPU thread")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:  # a unique temporary name: concurrent writers do not collide
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)


def markdown(results: dict, max_seconds: float, env: dict) -> str:
    """Table 3 (ours next to the paper's) as markdown."""
    from speechkit.models.salad import format_parameters

    lines = [f"Maximum latency at {max_seconds:g} s (RANSAC line), one CPU thread ({env['clock']} time; "
             f"{env['cpu']}, torch {env['torch']}, RNN mode {env['rnn_mode']}):", "",
             f"| model | parameters | measured at {max_seconds:g} s (s) | fitted at {max_seconds:g} s (s) | "
             f"paper Table 3 (s) |", "|---|---:|---:|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {format_parameters(r['parameters'])} | {r['measured_max_s']:.3f} | "
                     f"{r['max_fitted_latency_s']:.3f} | {PAPER_LATENCY_S[name]:g} |")
    for size in ("small", "big"):
        rnn, salad = results.get(f"musa_rnn_{size}"), results.get(f"salad_{size}")
        if rnn and salad:
            lines.append("")
            lines.append(f"{size}: RNN / SALAD = {rnn['max_fitted_latency_s'] / salad['max_fitted_latency_s']:.2f}x "
                         f"(paper {PAPER_LATENCY_S[f'musa_rnn_{size}'] / PAPER_LATENCY_S[f'salad_{size}']:.1f}x)")
    return "\n".join(lines) + "\n"


def measure(args: argparse.Namespace) -> dict:
    """Time, fit and write the outputs; returns the JSON record."""
    import torch

    from speechkit.models.salad import count_parameters
    from speechkit.utils.fileio import atomic_write

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    bad = [n for n in names if n not in MODELS]
    if bad or not names:
        raise ValueError(f"--models: unknown {bad or names}; choose from {', '.join(MODELS)}")
    exp_dirs = {}
    for item in args.exp_dirs:
        name, eq, path = item.partition("=")
        if not eq or name not in MODELS:
            raise ValueError(f"--exp-dir {item!r}: expected NAME=EXP with NAME one of {', '.join(MODELS)}")
        exp_dirs[name] = path
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    lengths = utterance_lengths(args.max_seconds, args.num_lengths)
    torch.set_num_threads(1)
    models = build_models(names, Path(args.config_dir), args.input_dim, exp_dirs, args.seed)
    dims = {n: m.cfg.input_dim for n, m in models.items()}
    gen = torch.Generator().manual_seed(args.seed)
    for name, m in models.items():  # warm-up (allocations, kernel selection)
        run_once(m, torch.randn(1, FRAMES_PER_SECOND, dims[name], generator=gen), args.rnn_mode)
    timings: dict[str, list[list[float]]] = {n: [] for n in names}  # [seconds, wall, cpu]
    load_start = [round(x, 2) for x in os.getloadavg()]  # the machine's load (1, 5, 15 min) as timing starts
    t_start = time.time()
    for rep in range(args.repeats):
        for sec in lengths:
            frames = int(round(sec * FRAMES_PER_SECOND))
            for name, m in models.items():
                labels = torch.randn(1, frames, dims[name], generator=gen)
                wall, cpu = run_once(m, labels, args.rnn_mode)
                timings[name].append([sec, wall, cpu])
                log.info("repeat %d, %5.1f s (%d frames): %-15s %.3f s (wall %.3f s)", rep + 1, sec, frames, name,
                         cpu, wall)
    results = {}
    for name in names:
        t = np.array(timings[name])[:, [0, 2 if args.clock == "cpu" else 1]]
        slope, intercept, inliers = ransac_fit(t[:, 0], t[:, 1], args.seed)
        longest = t[t[:, 0] == lengths[-1], 1]
        results[name] = {
            "parameters": count_parameters(models[name]), "input_dim": dims[name],
            "trained": name in exp_dirs, "timings": t.tolist(), "timings_wall_cpu": timings[name],
            "fit": {"slope": slope, "intercept": intercept, "inliers": inliers, "points": len(t)},
            "slope": slope, "intercept": intercept,
            "max_fitted_latency_s": slope * lengths[-1] + intercept, "measured_max_s": float(np.median(longest)),
            "paper_max_s": PAPER_LATENCY_S[name],
        }
    env = {"cpu": platform.processor() or platform.machine(), "cores_visible": os.cpu_count(), "threads": 1,
           "clock": args.clock,
           "torch": torch.__version__, "python": platform.python_version(), "rnn_mode": args.rnn_mode,
           "load_average_1min": os.getloadavg()[0], "load_average_start": load_start,
           "load_average_end": [round(x, 2) for x in os.getloadavg()], "wall_s": round(time.time() - t_start, 1)}
    record = {"max_seconds": lengths[-1], "lengths_s": lengths, "frames_per_second": FRAMES_PER_SECOND,
              "repeats": args.repeats, "environment": env, "models": results,
              "speedup_rnn_over_salad": {
                  s: results[f"musa_rnn_{s}"]["max_fitted_latency_s"] / results[f"salad_{s}"]["max_fitted_latency_s"]
                  for s in ("small", "big") if f"musa_rnn_{s}" in results and f"salad_{s}" in results}}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "latency.json") as f:
        json.dump(record, f, indent=1)
    md = markdown(results, lengths[-1], env)
    with atomic_write(out / "latency.md") as f:
        f.write(md)
    plot(out / "latency.png", results, lengths[-1])
    sys.stdout.write(md)
    log.info("wrote %s/latency.{json,md,png} (%.0f s of timing)", out, env["wall_s"])
    return record


def main(argv: list[str] | None = None) -> int:
    from speechkit.utils.cli import run_main, setup_logging

    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(None)
    return run_main("measure_latency.py", lambda: (measure(args), 0)[1], parser=parser)


if __name__ == "__main__":
    sys.exit(main())
