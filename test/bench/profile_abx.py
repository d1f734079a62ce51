"""Profile: where speechkit's ``abx_error`` spends its time, phase by phase, on bench_abx.py's synthetic task.

Wraps the stages of :func:`speechkit.scoring.abx.abx_error` (item selection, cell enumeration, needed pairs,
batch planning, frame distances, DTW, triplet counting, averaging) with timers (synchronizing CUDA around each)
and prints one line per repeat: total seconds and ``{phase: [seconds, calls]}``. The first repeat of a process
also pays one-time costs (numba kernel loading, Triton compilation, CUDA context). Not a test; run by hand:

  python test/bench/profile_abx.py --device cuda --repeats 3
  python test/bench/profile_abx.py --speakers 6 --device cpu --backend torch --torch-profile
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np  # noqa: F401 - bench_abx's data use it
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from bench_abx import synth_data  # noqa: E402

from speechkit.scoring.abx import abx_error  # noqa: E402
from speechkit.scoring.abx import (  # noqa: E402
    averaging,
    batches,
    cells,
    counting,
    dispatch,
    distances,
    frames,
    pairs,
    tiles,
)
from speechkit.scoring.abx_items import Item  # noqa: E402

# each stage function, in the module whose name the pipeline looks it up in at each call
PHASES = ((frames, "select_frames"), (cells, "enumerate_cells"), (pairs, "needed_pairs"), (dispatch, "load_kernels"),
          (tiles, "make_tiles"), (tiles, "tile_tasks"), (batches, "plan_groups"), (tiles, "pair_distances"),
          (batches, "torch_batches"), (counting, "count_triplets"), (averaging, "average"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--speakers", type=int, default=20)
    ap.add_argument("--utts", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--context", choices=["any", "within"], default="any")
    ap.add_argument("--mode", choices=["across", "within"], default="across")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--threads", type=int, default=None, help="default: torch.get_num_threads()")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--torch-profile", action="store_true", help="torch.profiler table of the last repeat")
    args = ap.parse_args(argv)
    cuda = torch.device(args.device).type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    feats, rows = synth_data(args.speakers, args.utts, args.seconds)
    items = [Item(r[0], float(r[1]), float(r[2]), r[3], () if args.context == "any" else (r[4], r[5]), r[6], k + 1)
             for k, r in enumerate(rows)]
    print(f"data: {len(feats)} files, {len(items)} items ({time.perf_counter() - t0:.2f} s)", flush=True)
    if cuda:
        t0 = time.perf_counter()
        torch.zeros(1, device=args.device)
        sync()
        print(f"cuda context: {time.perf_counter() - t0:.2f} s ({torch.cuda.get_device_name(0)})", flush=True)
    times: dict[str, float] = {}
    calls: dict[str, int] = {}

    def timed(name, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            sync()
            t = time.perf_counter()
            out = fn(*a, **k)
            sync()
            times[name] = times.get(name, 0.0) + time.perf_counter() - t
            calls[name] = calls.get(name, 0) + 1
            return out
        return wrapper

    for module, name in PHASES:
        setattr(module, name, timed(name, getattr(module, name)))
    device_dtw = dispatch.device_dtw
    dispatch.device_dtw = lambda backend, dev: timed("dtw_fn", device_dtw(backend, dev))
    for cls in set(distances.FRAME_DISTANCES.values()):
        cls.batch = timed("frame_dist", cls.batch)
        cls.block = timed("frame_tile", cls.block)
    threads = args.threads or torch.get_num_threads()
    for rep in range(args.repeats):
        times.clear()
        calls.clear()
        prof = None
        if args.torch_profile and rep == args.repeats - 1:
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
            prof = torch.profiler.profile(activities=acts)
            prof.__enter__()
        t0 = time.perf_counter()
        res = abx_error(feats, items, mode=args.mode, distance="cosine", frame_shift=0.01, device=args.device,
                          convention="zr2021", num_threads=threads, empty_items="drop", backend=args.backend)
        total = time.perf_counter() - t0
        if prof is not None:
            prof.__exit__(None, None, None)
        print(f"{args.device} {args.backend} threads={threads} repeat {rep}: {total:.2f} s, {res.n_triplets:,} triplets, "
              f"{res.n_dtw_pairs:,} DTW pairs, error {res.error:.9f} %",
              json.dumps({k: [round(v, 3), calls[k]] for k, v in times.items()}), flush=True)
        if prof is not None:
            key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
            print(prof.key_averages().table(sort_by=key, row_limit=20), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
