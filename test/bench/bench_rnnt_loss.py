#!/usr/bin/env python
"""Benchmark: RNN-T loss forward + backward, speechkit vs torchaudio (and a per-node loop), CPU or CUDA.

Implementations (``--impls``):
  speechkit      speechkit.nn.rnnt_loss.rnnt_loss(impl="speechkit"): pure PyTorch, anti-diagonals
  auto           rnnt_loss(impl="auto"): torchaudio's op where it runs and fits its int32 indexing, else speechkit
                 (the row says which ran)
  torchaudio     torchaudio.functional.rnnt_loss called directly
  per_node_loop  speechkit.nn.rnnt_loss.rnnt_loss_reference (CPU only; tiny shapes)

Each (shape, implementation) runs in a fresh subprocess: a CUDA error such as torchaudio's illegal memory access
on inputs past 2**31 elements poisons its process, and the memory figure must be its own. Memory beyond the
input: CUDA, ``torch.cuda.max_memory_allocated`` minus the input logits; CPU, the growth of the peak resident set
(``ru_maxrss``) from after the inputs are built. Times: one forward + backward, ``reduction="sum"``, random float32
logits, after ``--warmup`` runs, the median (and best) of ``--repeats``; CUDA synchronised around each.
Losses and gradients of the implementations are compared against speechkit's on the same inputs (relative loss
difference; gradient difference in norm relative to speechkit's and its largest element).

All implementations run under one Python (``--python``; default: this one if torchaudio loads in it, else the
peers venv tools/venv-peers, which has torch 2.11 + torchaudio 2.11: ./tools/install_peers.sh), so the torch
underneath is the same for all rows.

Usage::

    python test/bench/bench_rnnt_loss.py                                   # B,T,U,V = 8,200,50,256 on CPU
    python test/bench/bench_rnnt_loss.py --device cuda --shapes 8,200,50,256 32,400,80,512 16,1000,150,1024
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMPLS = ("speechkit", "auto", "torchaudio", "per_node_loop")


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _loss_fn(impl: str):
    if impl == "torchaudio":
        from torchaudio.functional import rnnt_loss as fn

        return lambda *a, **k: fn(*a, **k)
    from speechkit.nn import rnnt_loss as R

    if impl == "per_node_loop":
        return R.rnnt_loss_reference
    return lambda *a, **k: R.rnnt_loss(*a, impl=impl, **k)


def worker(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    B, T, U, V = args.shape
    try:
        loss_fn = _loss_fn(args.worker)
        g = torch.Generator().manual_seed(0)
        logits = torch.randn(B, T, U + 1, V, generator=g).to(dev).requires_grad_()
        targets = torch.randint(1, V, (B, U), generator=g, dtype=torch.int32).to(dev)
        logit_lengths = torch.full((B,), T, dtype=torch.int32, device=dev)
        target_lengths = torch.full((B,), U, dtype=torch.int32, device=dev)
        chosen = args.worker
        if args.worker == "auto":
            from speechkit.nn.rnnt_loss import choose_impl

            chosen = "auto -> " + choose_impl("auto", logits)[0]
        input_mib = logits.numel() * logits.element_size() / 2**20
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
        else:
            base = _maxrss_mib()
        times, loss, grad = [], None, None
        for i in range(args.warmup + args.repeats):
            logits.grad = None
            sync()
            t0 = time.perf_counter()
            loss = loss_fn(logits, targets, logit_lengths, target_lengths, blank=0, reduction="sum")
            loss.backward()
            sync()
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
        peak = ((torch.cuda.max_memory_allocated(dev) - base) / 2**20 if cuda else _maxrss_mib() - base)
        peak_beyond = peak - (input_mib if cuda else 0.0)  # CUDA: the gradient buffer counts; CPU: RSS growth
        out = {"impl": args.worker, "ran": chosen, "seconds": min(times), "median": statistics.median(times),
               "runs": len(times), "extra_mib": peak_beyond, "input_mib": input_mib, "loss": float(loss)}
        if args.save_grad:
            grad = logits.grad.detach().float().cpu()
            torch.save({"loss": float(loss), "grad": grad}, args.save_grad)
        print(json.dumps(out))
    except Exception as e:  # noqa: BLE001 - report instead of failing the whole table
        print(json.dumps({"impl": args.worker, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}))


def pick_python(requested: str | None) -> str:
    if requested:
        return requested
    probe = "import torchaudio.functional, torch; torchaudio.functional.rnnt_loss"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0:
        return sys.executable
    peers = REPO / "tools/venv-peers/bin/python"
    return str(peers) if peers.exists() else sys.executable


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", nargs="+", default=["8,200,50,256"], help="B,T,U,V (U labels, V incl. blank)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (CPU)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs (median and best reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    p.add_argument("--impls", default="speechkit,auto,torchaudio", help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--python", default=None, help="the Python every implementation runs under (see above)")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--worker", choices=IMPLS, help=argparse.SUPPRESS)
    p.add_argument("--shape", type=lambda s: tuple(int(x) for x in s.split(",")), help=argparse.SUPPRESS)
    p.add_argument("--save-grad", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    import tempfile

    import torch

    python = pick_python(args.python)
    info = subprocess.run([python, "-c", "import torch, sys; print(sys.version.split()[0], torch.__version__, "
                           "torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"],
                          capture_output=True, text=True).stdout.strip()
    print(f"RNN-T loss forward+backward, reduction=sum, float32, {args.device}"
          f"{'' if args.device != 'cpu' else f', {args.threads} threads'}; Python / torch / GPU: {info} ({python})")
    impls = args.impls.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            B, T, U, V = (int(x) for x in shape.split(","))
            grads = {}
            for impl in impls:
                gpath = os.path.join(tmp, f"{impl}.pt")
                small = B * T * (U + 1) * V <= 2**24  # keep the gradients for the comparison (up to 64 MiB)
                cmd = [python, __file__, "--worker", impl, f"--shape={B},{T},{U},{V}", f"--device={args.device}",
                       f"--threads={args.threads}", f"--repeats={args.repeats}", f"--warmup={args.warmup}"]
                if small:
                    cmd.append(f"--save-grad={gpath}")
                env = dict(os.environ, PYTHONPATH=str(REPO))
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
                    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                    r = json.loads(lines[-1]) if lines else {
                        "impl": impl, "error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1][:200]}
                except subprocess.TimeoutExpired:
                    r = {"impl": impl, "error": f"timeout after {args.timeout} s"}
                if "error" not in r and small and os.path.exists(gpath):
                    grads[impl] = torch.load(gpath, weights_only=True)
                rows.append(((B, T, U, V), r, grads))
            ref = grads.get("speechkit")
            for (_, r, _) in rows[-len(impls):]:
                if ref is not None and r["impl"] in grads and r["impl"] != "speechkit":
                    o = grads[r["impl"]]
                    d = o["grad"] - ref["grad"]
                    r["loss_rel"] = abs(o["loss"] - ref["loss"]) / abs(ref["loss"])
                    r["grad_rel"] = float(d.norm() / ref["grad"].norm())
                    r["grad_max"] = float(d.abs().max())
    print(f"| {'B, T, U, V':<18} | {'implementation':<22} | {'median ms':>9} | {'best ms':>8} | "
          f"{'MiB beyond input':>16} | {'loss':>12} | {'vs speechkit: loss rel, grad rel / max':>40} |")
    print("|" + "|".join(["-" * 20, "-" * 24, "-" * 11, "-" * 10, "-" * 18, "-" * 14, "-" * 42]) + "|")
    for shape, r, _ in rows:
        s = ", ".join(map(str, shape))
        if "error" in r:
            print(f"| {s:<18} | {r['impl']:<22} | {'failed: ' + r['error']} |")
            continue
        cmp = (f"{r['loss_rel']:.1e}, {r['grad_rel']:.1e} / {r['grad_max']:.1e}" if "loss_rel" in r else "-")
        print(f"| {s:<18} | {r['ran']:<22} | {1e3 * r['median']:>9.2f} | {1e3 * r['seconds']:>8.2f} | "
              f"{r['extra_mib']:>16.1f} | {r['loss']:>12.3f} | {cmp:>40} |")
    print("(MiB beyond input: CUDA, peak allocated minus the input logits, the gradient buffer included; CPU, growth "
          "of the peak resident set after the inputs were built)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
