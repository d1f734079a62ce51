"""Benchmark: ABX, speechkit vs fastabx, side by side on the same items and features, every triplet.

Tasks (``--tasks``):
  timit-any-across, timit-any-within   all phones of ../shared/data/timit_sample, no context (the large task)
  timit-ctx-across, timit-ctx-within   the ZeroSpeech by-context task (previous and next phone)
  synth-ctx-across, synth-any-across   a synthetic corpus of 39-d frames, 40 phones, --synth-speakers x
  (and their -within twins)
                                       --synth-utts utterances of --synth-seconds (by context; default 20 x 10 x
                                       5 s, as in issue 22) or --synth-any-seconds (no context; 2 s: ~100 M triplets)
TIMIT features: 13 MFCCs (kaldi-native-fbank, 25 ms / 10 ms, no dither) + deltas + delta-deltas (39-d); items
from the .phn alignments (h#, pau, epi excluded), context = the neighbouring phones.

Conditions (``--conditions``), each a fresh process per scorer and run:
  idle2   2 threads, the process pinned to CPUs 0-1 (os.sched_setaffinity)
  busy2   the same, with a busy-loop process pinned to CPU 0 for the whole run (a shared node's neighbour)
  all     every core of the machine (os.cpu_count() threads, no pinning)
  cuda    device cuda (skipped without a GPU); all threads
Before a task's timed rows, speechkit scores it once untimed on all cores (and on CUDA when that condition is
asked for), so that every timed row finds numba's and Triton's compiled kernels in their disk caches, as a
user's second run on a machine does (the first compiles them: seconds); --no-warm-up times the first run.
speechkit runs with ``--convention zr2021`` (fastabx's averaging) and its own Python; fastabx 0.9.0 with
``zerospeech_abx(..., max_size_group=None, max_x_across=None)`` in the peers venv (./tools/install_peers.sh,
tools/venv-peers; --peers-python), float32 as shipped. Both read the same .npy features (float64) and item file;
a scorer's time runs from after its imports to its score (reading the features included), see abx_peer_run.py.
"CPU s" is each process's CPU time over its timed span (all its threads): the work done, which a loaded machine
changes far less than the wall-clock time. The score columns must agree to 1e-6 (as fractions; fastabx's float32 arithmetic moves it by ~1e-8); with
``--check-float64`` fastabx is also run once per task with its float32 casts patched to float64, which must give
speechkit's score to 1e-9. Wall-clock times on a loaded machine mean little: run on an idle one (the load average
is printed before each run) and say which machine.

Usage:
  python test/bench/bench_abx.py                                   # every task, idle2,busy2,all(,cuda)
  python test/bench/bench_abx.py --tasks timit-ctx-across --conditions idle2 --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("abx_peer_run.py")
TASKS = ("timit-any-across", "timit-any-within", "timit-ctx-across", "timit-ctx-within", "synth-any-across",
         "synth-any-within", "synth-ctx-across", "synth-ctx-within")
CONDITIONS = ("idle2", "busy2", "all", "cuda")


def add_deltas(x: np.ndarray, window: int = 2) -> np.ndarray:
    """Kaldi's add-deltas (regression over +-window frames, edges repeated): [x, d, dd]."""
    def delta(y):
        pad = np.concatenate([np.repeat(y[:1], window, 0), y, np.repeat(y[-1:], window, 0)])
        num = sum(k * (pad[window + k:len(pad) - window + k] - pad[window - k:len(pad) - window - k])
                  for k in range(1, window + 1))
        return num / (2 * sum(k * k for k in range(1, window + 1)))
    d = delta(x)
    return np.concatenate([x, d, delta(d)], axis=1)


def timit_data(db: Path):
    """{utt: (T, 39) float64}, item rows (file, onset, offset, phone, prev, next, speaker)."""
    import kaldi_native_fbank as knf
    import soundfile as sf

    from speechkit.scoring.abx_items import PhoneSegment, make_abx_items

    feats, alignments = {}, {}
    for spk_dir in sorted(p for p in db.iterdir() if p.is_dir() and "-" in p.name):
        spk = spk_dir.name.split("-", 1)[1]
        for wav in sorted(spk_dir.glob("*.wav")):
            utt = f"{spk}_{wav.stem}"
            audio, sr = sf.read(wav, dtype="float32")
            opts = knf.MfccOptions()
            opts.frame_opts.dither = 0.0
            opts.frame_opts.samp_freq = sr
            opts.num_ceps = 13
            mfcc = knf.OnlineMfcc(opts)
            mfcc.accept_waveform(sr, (audio * 32768.0).tolist())
            mfcc.input_finished()
            m = np.array([mfcc.get_frame(i) for i in range(mfcc.num_frames_ready)], dtype=np.float64)
            feats[utt] = add_deltas(m)
            segs = []
            for n, line in enumerate(wav.with_suffix(".phn").read_text().splitlines(), 1):
                b, e, ph = line.split()
                on, off = int(b) / 16000, int(e) / 16000
                segs.append(PhoneSegment(utt, on, off, ph, repr(on), repr(off), n))
            alignments[utt] = segs
    rows = make_abx_items(alignments, None, exclude_phones=("h#", "pau", "epi"))
    return feats, [tuple(r) for r in rows]


def synth_data(n_spk: int, n_utt: int, seconds: float, n_phones: int = 40, dim: int = 39, seed: int = 0):
    """Random 39-d frames: a mean per phone (N(0, 1)), an offset per speaker (N(0, 1)), noise (N(0, 9)); phones of
    3-15 frames (10 ms): ABX errors of about 10 % across speakers without context."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_phones, dim))
    feats, rows = {}, []
    for s in range(n_spk):
        offset = rng.normal(scale=1.0, size=dim)
        for u in range(n_utt):
            utt = f"s{s:02d}_u{u:02d}"
            n = int(seconds * 100)
            phones, durs = [], []
            while sum(durs) < n:
                phones.append(int(rng.integers(n_phones)))
                durs.append(int(rng.integers(3, 16)))
            frames = np.concatenate([means[p] + offset + rng.normal(scale=3.0, size=(d, dim))
                                     for p, d in zip(phones, durs)])
            feats[utt] = frames[:n]
            t = 0
            for k, (p, d) in enumerate(zip(phones, durs)):
                if t + d > n:
                    break
                prev = f"p{phones[k - 1]}" if k else "SIL"
                nxt = f"p{phones[k + 1]}" if k + 1 < len(phones) and t + d + durs[k + 1] <= n else "SIL"
                rows.append((utt, f"{t / 100:.2f}", f"{(t + d) / 100:.2f}", f"p{p}", prev, nxt, f"s{s:02d}"))
                t += d
    return feats, rows


def write_data(out: Path, feats, rows) -> None:
    from speechkit.scoring.abx_items import write_item_file

    (out / "feats").mkdir(parents=True, exist_ok=True)
    for utt, m in feats.items():
        np.save(out / "feats" / f"{utt}.npy", np.ascontiguousarray(m, dtype=np.float64))
    write_item_file(out / "items.item", rows)
    (out / "meta.json").write_text(json.dumps({"frequency": "100"}))


def prepare(args, corpus: str, context: str) -> Path:
    seconds = args.synth_any_seconds if context == "any" else args.synth_seconds
    out = Path(args.workdir) / (corpus if corpus == "timit" else
                                f"synth_{args.synth_speakers}x{args.synth_utts}x{seconds:g}")
    if not (out / "meta.json").exists():
        t0 = time.perf_counter()
        feats, rows = (timit_data(Path(args.db)) if corpus == "timit"
                       else synth_data(args.synth_speakers, args.synth_utts, seconds))
        write_data(out, feats, rows)
        print(f"[data] {out}: {len(feats)} files, {len(rows)} items ({time.perf_counter() - t0:.1f} s)", flush=True)
    return out


def die_with_parent(cpus: set[int] | None = None) -> None:
    """preexec_fn of every child: pinned to ``cpus`` (if given), and killed when this process dies (Linux:
    PR_SET_PDEATHSIG), so that a benchmark killed mid-row (a ``timeout``) leaves neither a scorer nor a busy loop
    behind to slow every later run on the machine (one did: the H200 run's later idle2 rows were busy2 rows)."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: run_one's finally kills the busy loop
        pass


def busy_loop(cpu: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=lambda: die_with_parent({cpu}))


def run_one(python: str, impl: str, data: Path, mode: str, context: str, condition: str, args,
            precision: str = "float32") -> dict:
    n_cpu = os.cpu_count() or 1
    threads = 2 if condition in ("idle2", "busy2") else n_cpu
    cmd = [python, str(RUNNER), "--impl", impl, "--data", str(data), "--mode", mode, "--context", context,
           "--threads", str(threads), "--device", "cuda" if condition == "cuda" else "cpu"]
    cmd += ["--convention", "zr2021"] if impl == "speechkit" else ["--precision", precision]
    pin = condition in ("idle2", "busy2") and n_cpu >= 2
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TQDM_DISABLE="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    busy = busy_loop(0) if condition == "busy2" else None
    try:
        load = os.getloadavg()[0]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout,
                             preexec_fn=lambda: die_with_parent({0, 1} if pin else None))
    except subprocess.TimeoutExpired:
        return {"failed": f"timeout after {args.timeout} s"}
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"failed": (out.stderr.strip().splitlines() or ["failed"])[-1][:160]}
    res = json.loads(lines[-1])
    res["load"] = load
    return res


def best_of(python, impl, data, mode, context, condition, args, precision="float32") -> dict:
    runs = [run_one(python, impl, data, mode, context, condition, args, precision) for _ in range(args.repeats)]
    ok = [r for r in runs if "failed" not in r]
    if not ok:
        return runs[-1]
    best = min(ok, key=lambda r: r["seconds"])
    best["median"] = statistics.median(r["seconds"] for r in ok)
    return best


def cuda_available(python: str) -> bool:
    out = subprocess.run([python, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                         text=True)
    return out.stdout.strip() == "True"


def describe_machine(peers: str | None) -> None:
    import torch

    cpu = platform.processor() or "?"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; speechkit: Python {platform.python_version()}, torch "
          f"{torch.__version__}" + (f", CUDA {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
    sys.path.insert(0, str(REPO))
    from speechkit.scoring.abx import kernels_c

    print("speechkit's CPU kernels: " + ("C (libspeechkit_abx.so)" if kernels_c.available()
                                         else f"numba's ({kernels_c.why_not()})"))
    if peers:
        out = subprocess.run([peers, "-c", "import importlib.metadata as m, platform, torch; print(platform."
                              "python_version(), torch.__version__, m.version('fastabx'))"], capture_output=True,
                             text=True)
        print(f"peers venv ({peers}): Python / torch / fastabx = {out.stdout.strip() or out.stderr.strip()[-200:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, from {','.join(TASKS)}")
    ap.add_argument("--conditions", default="idle2,busy2,all,cuda", help=f"comma-separated, from {','.join(CONDITIONS)}")
    ap.add_argument("--repeats", type=int, default=1, help="runs per scorer and condition, best kept (default 1)")
    ap.add_argument("--db", default=str(REPO.parent / "shared/data/timit_sample"))
    ap.add_argument("--workdir", default="/tmp/speechkit-bench-abx", help="features and items are written here once")
    ap.add_argument("--synth-speakers", type=int, default=20)
    ap.add_argument("--synth-utts", type=int, default=10)
    ap.add_argument("--synth-seconds", type=float, default=5.0, help="seconds per utterance, synth-ctx")
    ap.add_argument("--synth-any-seconds", type=float, default=2.0,
                    help="seconds per utterance, synth-any (2 s: about 100 M triplets across)")
    ap.add_argument("--peers-python", default=str(REPO / "tools/venv-peers/bin/python"))
    ap.add_argument("--skip-fastabx", action="store_true")
    ap.add_argument("--check-float64", action="store_true",
                    help="also run fastabx once per task with its float32 casts patched to float64 (idle2)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                    help="skip the untimed speechkit run per task and device (all cores; cuda) that fills numba's and "
                         "Triton's disk caches before the timed rows")
    ap.add_argument("--prepare-only", action="store_true",
                    help="write the tasks' features and items under --workdir and stop (test/bench/gpu_carry.sh: "
                         "the TIMIT task's data made here, where kaldi-native-fbank and ../shared are, for a GPU "
                         "machine that has neither)")
    args = ap.parse_args(argv)
    tasks = args.tasks.split(",")
    conditions = args.conditions.split(",")
    for t in tasks:
        if t not in TASKS:
            ap.error(f"unknown task {t!r}")
    for c in conditions:
        if c not in CONDITIONS:
            ap.error(f"unknown condition {c!r}")
    if args.prepare_only:
        for task in dict.fromkeys(t.rsplit("-", 1)[0] for t in tasks):
            print(prepare(args, *task.split("-")))
        return 0
    peers = None if args.skip_fastabx else args.peers_python
    if peers and not Path(peers).exists() and shutil.which(peers):  # a command name (python3): its path
        peers = shutil.which(peers)
    if peers and not Path(peers).exists():
        print(f"fastabx: {peers} not found (./tools/install_peers.sh builds it); speechkit only")
        peers = None
    describe_machine(peers)
    if "cuda" in conditions and not cuda_available(sys.executable):
        print("cuda: no CUDA device here, condition skipped")
        conditions.remove("cuda")
    rows = []
    for task in tasks:
        corpus, context, mode = task.split("-")
        data = prepare(args, corpus, context)
        ctx = "any" if context == "any" else "within"
        exact = None
        if args.warm_up:  # a user's second run: numba's and Triton's kernels in their disk caches, not compiled
            for cond in ["all"] + (["cuda"] if "cuda" in conditions else []):
                r = run_one(sys.executable, "speechkit", data, mode, ctx, cond, args)
                print(f"[{task} warm-up {cond}] speechkit {json.dumps(r)}", flush=True)
        if peers and args.check_float64:
            exact = run_one(peers, "fastabx", data, mode, ctx, "idle2", args, precision="float64")
        for cond in conditions:
            ours = best_of(sys.executable, "speechkit", data, mode, ctx, cond, args)
            theirs = best_of(peers, "fastabx", data, mode, ctx, cond, args) if peers else {"failed": "not run"}
            rows.append((task, cond, ours, theirs, exact))
            print(f"[{task} {cond}] speechkit {json.dumps(ours)}\n[{task} {cond}] fastabx {json.dumps(theirs)}",
                  flush=True)
    print()
    head = (f"| {'task':<17} | {'condition':<9} | {'triplets':>11} | {'speechkit %':>11} | {'fastabx %':>11} "
            f"| {'abs diff':>11} | {'speechkit s':>11} | {'fastabx s':>9} | {'fastabx/ours':>12} "
            f"| {'CPU s ours / fastabx':>20} | load |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    bad = False
    for task, cond, ours, theirs, exact in rows:
        def fmt(r, key, spec):
            return format(r[key], spec) if "failed" not in r and r.get(key) is not None else "-"
        diff = ratio = "-"
        if "failed" not in ours and "failed" not in theirs:
            d = abs(ours["error"] - theirs["error"]) / 100
            diff = f"{d:.1e}"
            bad |= d > 1e-6
            ratio = f"{theirs['seconds'] / ours['seconds']:.2f}x"
        print(f"| {task:<17} | {cond:<9} | {fmt(ours, 'n_triplets', ','):>11} | {fmt(ours, 'error', '.6f'):>11} | "
              f"{fmt(theirs, 'error', '.6f'):>11} | {diff:>11} | {fmt(ours, 'seconds', '.2f'):>11} | "
              f"{fmt(theirs, 'seconds', '.2f'):>9} | {ratio:>12} | "
              f"{fmt(ours, 'cpu_seconds', '.2f') + ' / ' + fmt(theirs, 'cpu_seconds', '.2f'):>20} | "
              f"{fmt(ours, 'load', '.1f'):>4} |")
    for task, cond, ours, theirs, exact in rows:
        for who, r in (("speechkit", ours), ("fastabx", theirs)):
            if "failed" in r and r["failed"] != "not run":
                print(f"{task} {cond} {who}: {r['failed']}")
    seen = set()
    for task, cond, ours, theirs, exact in rows:
        if exact is not None and task not in seen and "failed" not in ours:
            seen.add(task)
            if "failed" in exact:
                print(f"{task}: fastabx float64: {exact['failed']}")
                continue
            d = abs(ours["error"] - exact["error"]) / 100
            bad |= d > 1e-9
            print(f"{task}: fastabx with float64 arithmetic {exact['error']:.12f} % vs speechkit {ours['error']:.12f} %"
                  f" (|diff| {d:.1e} as a fraction)")
    if bad:
        print("MISMATCH: speechkit zr2021 and fastabx disagree beyond the tolerance", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
