#!/usr/bin/env python
"""Benchmark: RNN-T loss forward + backward, vectorised (speechkit) vs a per-node loop reference.

Each implementation runs in a fresh subprocess so that its peak memory is its own: the figure is
the growth of the process's peak resident set (``resource.getrusage(RUSAGE_SELF).ru_maxrss``)
from just after the inputs are built to the end of the runs, i.e. what the loss costs beyond its
``(B, T, U+1, V)`` input.  Times are wall-clock seconds for one forward + backward: the best of
``--repeats`` runs (the least disturbed on a shared machine) after one warm-up run, and their
median.  A forward-only peak is measured first (one forward, before any backward).

Usage::

    python test/bench/bench_rnnt_loss.py                  # B=8 T=200 U=50 V=256, 2 threads
    python test/bench/bench_rnnt_loss.py --B 4 --T 100 --impls vectorised
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

IMPLS = {
    "vectorised": "speechkit.nn.rnnt_loss:rnnt_loss",
    "per_node_loop": "speechkit.nn.rnnt_loss:rnnt_loss_reference",
    "torchaudio": "torchaudio.functional:rnnt_loss",
}


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def worker(args) -> None:
    import importlib

    import torch

    torch.set_num_threads(args.threads)
    mod, fn = IMPLS[args.worker].split(":")
    try:
        loss_fn = getattr(importlib.import_module(mod), fn)
    except Exception as e:  # noqa: BLE001 - report "not available" instead of failing the bench
        print(json.dumps({"impl": args.worker, "error": f"{type(e).__name__}: {e}"}))
        return
    g = torch.Generator().manual_seed(0)
    B, T, U, V = args.B, args.T, args.U, args.V
    logits = torch.randn(B, T, U + 1, V, generator=g).requires_grad_()
    targets = torch.randint(1, V, (B, U), generator=g, dtype=torch.int32)
    logit_lengths = torch.full((B,), T, dtype=torch.int32)
    target_lengths = torch.full((B,), U, dtype=torch.int32)
    input_mib = logits.numel() * logits.element_size() / 2**20
    base = _maxrss_mib()
    loss_fn(logits, targets, logit_lengths, target_lengths, blank=0, reduction="sum")  # graph freed at once
    fwd_peak = _maxrss_mib() - base
    times, loss_value = [], None
    n_warm = 1
    for i in range(n_warm + args.repeats):
        logits.grad = None
        t0 = time.perf_counter()
        loss = loss_fn(logits, targets, logit_lengths, target_lengths, blank=0, reduction="sum")
        loss.backward()
        dt = time.perf_counter() - t0
        if i >= n_warm:
            times.append(dt)
        loss_value = float(loss)
    print(json.dumps({
        "impl": args.worker, "seconds": min(times), "median": statistics.median(times), "runs": len(times),
        "fwd_peak_extra_mib": fwd_peak, "peak_extra_mib": _maxrss_mib() - base, "input_mib": input_mib, "loss": loss_value,
    }))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--B", type=int, default=8, help="batch size")
    p.add_argument("--T", type=int, default=200, help="encoder frames")
    p.add_argument("--U", type=int, default=50, help="labels per utterance")
    p.add_argument("--V", type=int, default=256, help="output vocabulary (incl. blank)")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    p.add_argument("--repeats", type=int, default=5, help="timed runs")
    p.add_argument("--impls", default="vectorised,per_node_loop,torchaudio",
                   help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--worker", choices=list(IMPLS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    print(f"RNN-T loss forward+backward: B={args.B} T={args.T} U={args.U} V={args.V}, "
          f"{args.threads} threads, reduction=sum, float32")
    rows = []
    for impl in args.impls.split(","):
        cmd = [sys.executable, __file__, "--worker", impl] + [
            f"--{k}={getattr(args, k)}" for k in ("B", "T", "U", "V", "threads")
        ] + [f"--repeats={args.repeats}"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if out.returncode != 0 or not lines:
            rows.append({"impl": impl, "error": (out.stderr.strip().splitlines() or ["failed"])[-1]})
        else:
            rows.append(json.loads(lines[-1]))
    print(f"{'implementation':<16}{'best s':>8}{'median s':>10}{'fwd MiB':>9}{'fwd+bwd MiB':>13}{'loss':>13}")
    for r in rows:
        if "error" in r:
            print(f"{r['impl']:<16}  not available: {r['error'][:100]}")
        else:
            print(f"{r['impl']:<16}{r['seconds']:>8.3f}{r['median']:>10.3f}{r['fwd_peak_extra_mib']:>9.1f}"
                  f"{r['peak_extra_mib']:>13.1f}{r['loss']:>13.3f}")
    ok = [r for r in rows if "error" not in r]
    if ok:
        print(f"(MiB: growth of peak RSS beyond the {ok[0]['input_mib']:.1f} MiB input logits; "
              "fwd+bwd includes the gradient w.r.t. the logits, the same size as them)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
