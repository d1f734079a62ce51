"""Benchmark: torch Griffin-Lim vs librosa.griffinlim (time and spectral convergence).

Run: ``python test/bench/bench_griffin_lim.py [--seconds 3] [--batch 8] [--n-iter 60] [--threads 1]``.
STFT setup of conf/spectrogram.yaml (16 kHz, n_fft 512, hop 160, win 400, hann). Prints one line per
configuration; never collected by pytest.
"""
import argparse
import time

import librosa
import numpy as np
import torch

from speechkit.decode.griffin_lim import griffin_lim, spectral_convergence, stft

N_FFT, HOP, WIN = 512, 160, 400


def test_signal(seconds: float, seed: int, sr: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    rng = np.random.default_rng(seed)
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.7 * t + seed)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    y = sum(np.sin(k * phase) / k for k in range(1, 20)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return (0.3 * y + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--n-iter", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ys = [test_signal(args.seconds, s) for s in range(args.batch)]
    mags = [np.abs(librosa.stft(y, n_fft=N_FFT, hop_length=HOP, win_length=WIN)) for y in ys]
    kw = dict(n_fft=N_FFT, hop_length=HOP, win_length=WIN)

    def sc(mag: np.ndarray, y) -> float:
        y = torch.as_tensor(y)
        return spectral_convergence(torch.from_numpy(mag), stft(y, N_FFT, HOP, WIN).abs()).item()

    librosa.griffinlim(mags[0], n_iter=1, **kw)  # warm-up
    t0 = time.perf_counter()
    ref = [librosa.griffinlim(m, n_iter=args.n_iter, random_state=0, **kw) for m in mags]
    t_librosa = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = [griffin_lim(torch.from_numpy(m), n_iter=args.n_iter, seed=0, **kw) for m in mags]
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    batched = griffin_lim(torch.from_numpy(np.stack(mags)), n_iter=args.n_iter, seed=0, **kw)
    t_batch = time.perf_counter() - t0
    audio = args.batch * args.seconds
    print(f"{args.batch} x {args.seconds:g} s, {args.n_iter} iterations, {args.threads} thread(s)")
    print(f"librosa.griffinlim      {t_librosa:7.3f} s  ({audio / t_librosa:6.1f} s audio/s)  "
          f"mean SC {np.mean([sc(m, y) for m, y in zip(mags, ref)]):.4f}")
    print(f"torch, one at a time    {t_loop:7.3f} s  ({audio / t_loop:6.1f} s audio/s)  "
          f"mean SC {np.mean([sc(m, y) for m, y in zip(mags, ours)]):.4f}")
    print(f"torch, batched          {t_batch:7.3f} s  ({audio / t_batch:6.1f} s audio/s)  "
          f"mean SC {np.mean([sc(m, y) for m, y in zip(mags, batched)]):.4f}")


if __name__ == "__main__":
    main()
