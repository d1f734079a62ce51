"""Benchmark: VQ-VAE and codebook-inverter training steps (forward + backward + Adam) on this machine.

Run: ``python test/bench/bench_vqvae.py [--preset default|small] [--batch 8] [--frames 400] [--steps 5]``.
Prints parameters, seconds per step and frames per second for the Transformer and conv VQ-VAE (stride 4)
and for the inverter; never collected by pytest.
"""
import argparse
import time

import torch

from speechkit.models.inverter import CodebookInverter, InverterConfig, inverter_loss
from speechkit.models.vqvae import VQVAE, VQVAEConfig


def timed_steps(step, n: int) -> float:
    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=["default", "small"], default="default")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--frames", type=int, default=400, help="frames per utterance (10 ms each)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    B, T = args.batch, args.frames
    lengths = torch.randint(T // 2, T + 1, (B,), device=dev)
    lengths[0] = T
    frames = int(lengths.sum())
    print(f"device {dev}, batch {B} x <= {T} frames ({frames} frames), preset {args.preset}")

    for enc in ("transformer", "conv"):
        make = VQVAEConfig.small if args.preset == "small" else VQVAEConfig
        cfg = make(encoder_type=enc, num_speakers=10, smoothing_weight=0.01, jitter_prob=0.1)
        model = VQVAE(cfg).to(dev).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        feats = torch.randn(B, T, cfg.input_dim, device=dev)
        spk = torch.randint(0, 10, (B,), device=dev)

        def step():
            out = model(feats, lengths, spk)
            opt.zero_grad()
            out.losses["total"].backward()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()

        sec = timed_steps(step, args.steps)
        n_par = sum(p.numel() for p in model.parameters())
        print(f"vqvae/{enc:<11} {n_par / 1e6:6.2f} M params  {sec:7.3f} s/step  {frames / sec:9.0f} frames/s")

    make = InverterConfig.small if args.preset == "small" else InverterConfig
    cfg = make()
    inv = CodebookInverter(cfg).to(dev).train()
    opt = torch.optim.Adam(inv.parameters(), lr=1e-4)
    code_len = (lengths + cfg.upsample_ratio - 1) // cfg.upsample_ratio
    codes = torch.randint(0, cfg.codebook_size, (B, int(code_len.max())), device=dev)
    target = torch.rand(B, T, cfg.output_dim, device=dev)

    def inv_step():
        spec, out_len = inv(codes, code_len, target_lengths=lengths)
        loss = inverter_loss(spec, target[:, : spec.size(1)], out_len)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()

    sec = timed_steps(inv_step, args.steps)
    n_par = sum(p.numel() for p in inv.parameters())
    print(f"inverter          {n_par / 1e6:6.2f} M params  {sec:7.3f} s/step  {frames / sec:9.0f} frames/s")


if __name__ == "__main__":
    main()
