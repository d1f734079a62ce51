#!/usr/bin/env python
"""Benchmark: real-time factor of streaming RNN-T decoding on one core (by default).

Builds a randomly initialised ``multisoftmax_lid`` model from a preset (``small`` or ``paper``)
for three languages and decodes random 80-dim "log-mel" input (stacked 8 x 3 -> 640).  A random
joint emits ``max_symbols_per_frame`` (greedy, 3) or one (beam) symbol at nearly every frame,
~100 or ~33 units/s, far more than speech (~10-20 units/s): each emission costs a prediction
network step, so these RTFs are an upper bound for a trained model.  ``--blank-bias`` is added to
every joint network's blank logit (a random joint then flips to emitting almost nothing: the
lower bound).  The tokens/s column shows what each run emitted.  RTF = decode seconds / audio
seconds.

Usage::

    python test/bench/bench_rnnt_decode.py --preset small
    python test/bench/bench_rnnt_decode.py --preset paper --seconds 5
"""
from __future__ import annotations

import argparse
import sys

import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.models.rnnt import RNNT, RNNTConfig, parameter_counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=["small", "paper"], help="model size preset")
    p.add_argument("--seconds", type=float, default=10.0, help="audio length (s) per run")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 = one core)")
    p.add_argument("--blank-bias", type=float, default=0.0, help="added to the joint's blank logit")
    p.add_argument("--repeats", type=int, default=2, help="runs per setting (best RTF reported)")
    p.add_argument("--chunk-frames", type=int, default=48, help="raw frames per streaming chunk (0 = whole)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab = {"hi": 70, "mr": 70, "ta": 60}
    model = RNNT(RNNTConfig.preset(args.preset, vocab, "multisoftmax_lid")).eval()
    with torch.no_grad():
        for jn in model.joint_nets.values():
            jn.out.bias[0] += args.blank_bias
    n = int(args.seconds * 100)
    feats = torch.randn(n, 80, generator=torch.Generator().manual_seed(1))
    print(f"preset={args.preset} ({parameter_counts(model)['total'] / 1e6:.1f} M parameters), "
          f"{args.seconds:.0f} s audio, {args.threads} thread(s), chunks of {args.chunk_frames} frames")
    print(f"{'mode':<16}{'method':<8}{'beam':>5}{'RTF':>8}{'tokens/s':>10}{'T_avg':>7}")
    runs = [("oracle", "greedy", 1, None, None), ("oracle", "beam", 4, None, None),
            ("lid_free", "greedy", 1, None, None), ("lid_free", "beam", 4, None, None),
            ("lid_free", "greedy", 1, 10, 5.0)]
    for mode, method, beam, tau, s_th in runs:
        cfg = DecodeConfig(mode=mode, method=method, beam=beam, tau=tau, s_th=s_th, chunk_frames=args.chunk_frames)
        recognize(model, feats[:200], cfg, lang="hi")  # warm-up
        # best of --repeats: the machine may be shared, the minimum is the least disturbed run
        r = min((recognize(model, feats, cfg, lang="hi") for _ in range(args.repeats)), key=lambda x: x.rtf)
        name = mode + ("+switch" if tau is not None else "")
        print(f"{name:<16}{method:<8}{beam:>5}{r.rtf:>8.3f}{len(r.tokens) / r.audio_seconds:>10.1f}"
              f"{r.active_decoders_per_frame:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
