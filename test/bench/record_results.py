#!/usr/bin/env python
"""Run the CPU benchmarks whose figures the README quotes and keep their output under test/bench/results/.

Every benchmark figure in the top-level README's "Benchmarks" table (the ABX rows aside: those are
docs/gpu_checks.md's, from ``bench_abx.py`` / ``gpu_check.sh``) is read from one of these files, and this one
command regenerates them all::

    python test/bench/record_results.py                 # all, about 12 minutes here (8 of them the verifier)
    python test/bench/record_results.py --only mfcc,rnnt_loss

Each benchmark runs as a subprocess of this Python with its documented arguments (``BENCHES`` below); its
standard output is written to ``results/<name>.txt`` below a header naming the command, the date, the commit
(``+dirty`` when the tree has uncommitted changes), the CPU, the core count and the Python / torch versions.
The aligner is run for seeds 0, 1 and 2 and its file ends with their mean. A file is replaced only when its
benchmark succeeds (written beside it, then renamed): a failed or interrupted run keeps the previous figures,
and the command exits non-zero naming what failed. Run it on an otherwise idle machine: the timings compare
implementations in one run, but a busy core shifts all of them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RESULTS = HERE / "results"

# name -> (script, arguments, environment additions); the README's "Benchmarks" table quotes these files
BENCHES: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "mfcc": ("bench_mfcc.py", [], {}),
    "rnnt_loss": ("bench_rnnt_loss.py", ["--threads", "1"], {}),
    "rnnt_decode": ("bench_rnnt_decode.py", ["--preset", "small"], {"OMP_NUM_THREADS": "1"}),
    "griffin_lim": ("bench_griffin_lim.py", [], {"OMP_NUM_THREADS": "1"}),
    "vqvae": ("bench_vqvae.py", ["--device", "cpu"], {"OMP_NUM_THREADS": "1"}),
    "datadir": ("bench_datadir.py", [], {}),
    "align_timit": ("bench_align_timit.py", [], {"OMP_NUM_THREADS": "1"}),  # run per seed, see _run_align
    "speaker_verifier": ("bench_speaker_verifier.py", [], {"OMP_NUM_THREADS": "1"}),
}
ALIGN_SEEDS = (0, 1, 2)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    return rev + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def _header(cmds: list[str]) -> str:
    import torch  # the versions of the Python that runs the benchmarks
    lines = [f"# command: {c}" for c in cmds]
    lines += [f"# date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"# commit: {_commit()}",
              f"# machine: {_cpu_name()}, {len(os.sched_getaffinity(0))} CPUs available to the process",
              f"# python {platform.python_version()}, torch {torch.__version__}",
              "# regenerate: python test/bench/record_results.py (test/bench/record_results.py's docstring)"]
    return "\n".join(lines) + "\n\n"


def _run(script: str, args: list[str], env_add: dict[str, str]) -> tuple[str, str]:
    """One benchmark: (the command as shown, its standard output). Raises RuntimeError on a non-zero exit."""
    cmd = [sys.executable, str(HERE / script), *args]
    shown = " ".join(f"{k}={v}" for k, v in env_add.items()) + (" " if env_add else "") + \
        f"python test/bench/{script}" + "".join(f" {a}" for a in args)
    env = {**os.environ, **env_add}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{shown}: exit status {proc.returncode}")
    return shown, proc.stdout


def _run_align(env_add: dict[str, str]) -> tuple[list[str], str]:
    """bench_align_timit.py for each of ALIGN_SEEDS, then the mean of their figures."""
    cmds, out, figs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in ALIGN_SEEDS:
            js = Path(tmp) / f"seed{seed}.json"
            shown, text = _run("bench_align_timit.py", ["--json", str(js), f"seed={seed}"], env_add)
            cmds.append(shown.replace(str(js), f"seed{seed}.json"))
            out.append(f"## seed {seed}\n{text}")
            figs.append(json.loads(js.read_text()))
    keys = ("within_10ms", "within_20ms", "within_40ms", "mean_abs_ms", "wall_s")
    mean = {k: sum(f[k] for f in figs) / len(figs) for k in keys}
    out.append(f"## mean of seeds {', '.join(map(str, ALIGN_SEEDS))}\n"
               f"within 10 ms: {100 * mean['within_10ms']:.1f} %   within 20 ms: {100 * mean['within_20ms']:.1f} %   "
               f"within 40 ms: {100 * mean['within_40ms']:.1f} %\n"
               f"mean absolute error: {mean['mean_abs_ms']:.1f} ms\n"
               f"train + align wall time: {mean['wall_s']:.1f} s\n")
    return cmds, "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(BENCHES)}")
    ap.add_argument("--out", default=str(RESULTS), help="folder of the result files (default: test/bench/results)")
    args = ap.parse_args(argv)
    names = list(BENCHES) if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {', '.join(unknown)} (known: {', '.join(BENCHES)})")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        script, bench_args, env_add = BENCHES[name]
        t0 = time.time()
        print(f"== {name}", flush=True)
        try:
            if name == "align_timit":
                cmds, text = _run_align(env_add)
            else:
                shown, text = _run(script, bench_args, env_add)
                cmds = [shown]
        except RuntimeError as e:
            print(f"   FAILED: {e}; {out_dir / (name + '.txt')} left as it was", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        dest = out_dir / f"{name}.txt"
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_text(_header(cmds) + text)
        os.replace(tmp, dest)
        print(f"   {dest} ({time.time() - t0:.0f} s)", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
