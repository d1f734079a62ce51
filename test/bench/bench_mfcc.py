"""Benchmark: seconds to extract 39-dim MFCC+deltas from one hour of 16 kHz audio on one core.

Side by side in one run, on the same audio (real speech from ../shared/data concatenated to
--seconds, utterance by utterance, as feature extraction runs; synthetic if the corpora are absent):

  librosa            librosa.feature.mfcc(n_mfcc=13, n_fft=400, hop_length=160) + feature.delta x2
  kaldi-native-fbank Kaldi MFCC (13 ceps) + Kaldi add-deltas (speechkit.features.delta.kaldi_delta)
  speechkit          the torch `mfcc` frontend (conf/mfcc.yaml; same numbers as librosa), per utterance

Audio decoding is not timed. The process is pinned to one core (sched_setaffinity) with one BLAS /
OpenMP / torch thread; librosa's numba JIT is cached (NUMBA_CACHE_DIR) and every method is warmed
up first. Each figure is the best of --repeats runs; both wall-clock and CPU (process) time are
printed -- on a shared machine the CPU time is the one to compare (the wall time includes waiting
for the core). ``compute_batch`` is the same per-utterance loop for this frontend. The speechkit
output is also compared with librosa's on every utterance (max |diff|).

  python test/bench/bench_mfcc.py [--seconds 3600] [--repeats 3] [--core N]
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.expanduser("~/.cache/speechkit/numba"))

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SPEECHKIT_SHARED_DATA", REPO.parent / "shared" / "data"))
SR = 16000


def load_audio(seconds: float) -> tuple[list[np.ndarray], str]:
    """Real 16 kHz utterances (hindi_noa, then TIMIT, then Malayalam) up to ``seconds``, repeated if short."""
    import soundfile as sf

    files = []
    for pattern in ("hindi_noa/audio/**/*.flac", "timit_sample/**/*.wav", "msc_malayalam/audio/**/*.ogg"):
        files += sorted(SHARED.glob(pattern))
    utts, total, used = [], 0, set()
    for f in files:
        if total >= seconds * SR:
            break
        try:
            x, sr = sf.read(f, dtype="float32")
        except Exception:
            continue
        if sr != SR or x.ndim != 1 or len(x) < SR // 2:
            continue
        utts.append(x)
        total += len(x)
        used.add(f.relative_to(SHARED).parts[0])
    if not utts:
        rng = np.random.default_rng(0)
        while total < seconds * SR:
            n = int(SR * rng.uniform(2, 10))
            t = np.arange(n) / SR
            x = (0.3 * np.sin(2 * np.pi * 150 * t * (1 + 0.3 * t)) + 0.05 * rng.standard_normal(n)).astype(np.float32)
            utts.append(x)
            total += n
        src = "synthetic"
    else:
        src = "+".join(sorted(used))
        base = list(utts)
        i = 0
        while total < seconds * SR:  # repeat if the corpora hold less than requested
            utts.append(base[i % len(base)])
            total += len(base[i % len(base)])
            i += 1
    # trim to exactly `seconds`
    excess = total - int(seconds * SR)
    if excess > 0:
        utts[-1] = utts[-1][: len(utts[-1]) - excess]
        if len(utts[-1]) < 400:
            utts.pop()
    return utts, src


def best_of(fn, repeats: int) -> tuple[float, float]:
    """Best wall-clock and best CPU (process) time over ``repeats`` runs, in seconds."""
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3600.0, help="audio to process (default: one hour)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per method; the best is reported")
    ap.add_argument("--core", type=int, default=None, help="CPU to pin to (default: the last allowed one)")
    args = ap.parse_args()

    cores = sorted(os.sched_getaffinity(0))
    core = cores[-1] if args.core is None else args.core
    os.sched_setaffinity(0, {core})

    import torch

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import kaldi_native_fbank as knf
        import librosa

    from speechkit.features.delta import kaldi_delta
    from speechkit.features.frontends import build_frontend, frontend_from_file

    utts, src = load_audio(args.seconds)
    hours = sum(len(x) for x in utts) / SR / 3600
    print(f"audio: {len(utts)} utterances, {hours * 3600:.0f} s ({src}); mean {hours * 3600 / len(utts):.1f} s/utt")
    print(f"pinned to CPU {core}; torch {torch.__version__}, librosa {librosa.__version__}, "
          f"kaldi-native-fbank {getattr(knf, '__version__', '?')}, python {platform.python_version()}")

    def librosa_mfcc(y, deltas=True):
        m = librosa.feature.mfcc(y=y, sr=SR, n_mfcc=13, n_fft=400, hop_length=160)
        if not deltas:
            return m
        return np.concatenate([m, librosa.feature.delta(m, width=9, order=1),
                               librosa.feature.delta(m, width=9, order=2)]).T

    opts = knf.MfccOptions()
    opts.frame_opts.dither = 0.0
    opts.frame_opts.samp_freq = SR

    def knf_mfcc(y, deltas=True):
        comp = knf.OnlineMfcc(opts)
        comp.accept_waveform(SR, (y * 32768.0).tolist())
        comp.input_finished()
        m = np.stack([comp.get_frame(i) for i in range(comp.num_frames_ready)])
        return kaldi_delta(torch.from_numpy(m), 2).numpy() if deltas else m

    fe = frontend_from_file(REPO / "conf" / "mfcc.yaml")
    fe13 = build_frontend({**fe.to_dict(), "delta_order": 0})

    methods = [
        ("librosa mfcc (13)", lambda: [librosa_mfcc(x, False) for x in utts]),
        ("librosa mfcc + deltas (39)", lambda: [librosa_mfcc(x) for x in utts]),
        ("kaldi-native-fbank mfcc (13)", lambda: [knf_mfcc(x, False) for x in utts]),
        ("kaldi-native-fbank mfcc + deltas (39)", lambda: [knf_mfcc(x) for x in utts]),
        ("speechkit mfcc (13), per utterance", lambda: [fe13(x) for x in utts]),
        ("speechkit mfcc + deltas (39), per utterance", lambda: [fe(x) for x in utts]),
    ]
    warm = utts[:5]
    for _, _fn in methods:  # warm-up: JIT, caches, allocators
        librosa_mfcc(warm[0]), knf_mfcc(warm[0]), fe(warm[0]), fe13(warm[0])
    results = []
    for name, fn in methods:
        wall, cpu = best_of(fn, args.repeats)
        results.append((name, wall / hours, cpu / hours))
        print(f"  {name:46s} {wall / hours:7.2f} s wall, {cpu / hours:7.2f} s CPU per hour", flush=True)

    # numerics: speechkit vs librosa on every utterance of at least 9 frames
    worst_abs, worst_tol = 0.0, 0.0
    for x in utts:
        if len(x) // 160 + 1 < 9:
            continue
        ref, got = librosa_mfcc(x), fe(x)
        err = np.abs(got - ref)
        worst_abs = max(worst_abs, float(err.max()))
        worst_tol = max(worst_tol, float((err / (2e-3 + 1e-4 * np.abs(ref))).max()))

    lib = {n: c for n, _, c in results}["librosa mfcc + deltas (39)"]
    print()
    print(f"| method (one core, {hours * 3600:.0f} s of audio) | wall s / hour | CPU s / hour | x real time (CPU) "
          f"| speed vs librosa 39 (CPU) |")
    print("|---|---:|---:|---:|---:|")
    for name, wall, cpu in results:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {3600 / cpu:.0f} | {lib / cpu:.2f}x |")
    print()
    print(f"speechkit vs librosa (39 dims, all utterances): max |diff| = {worst_abs:.2e}; "
          f"max |diff| / (2e-3 + 1e-4 |librosa|) = {worst_tol:.3f} (test tolerance: 1)")


if __name__ == "__main__":
    main()
