#!/usr/bin/env python3
"""A reference for the VQ-VAE codes: k-means units of the VQ-VAE's own input features.

  local/kmeans_units.py [--k 64] [--stride 4] [--max-frames 200000] [--seed 0] TRAIN_DIR TEST_DIR OUT_DIR

Frames of TRAIN_DIR (per-speaker CMVN, as the VQ-VAE reads them) are averaged over non-overlapping
windows of --stride frames (the VQ-VAE's code rate), up to --max-frames of them drawn at random
are clustered by k-means (Lloyd's algorithm from k random frames, 50 iterations), and every window
of TEST_DIR gets its nearest centroid. OUT_DIR is a unit directory as speechkit-extract-units writes
it (<utt>.txt one-hot lines, codes, frame_shift, units.yaml), to score with speechkit-score-abx /
speechkit-score-bitrate: the ABX of discrete units that know nothing but the input's geometry.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import yaml

from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import write_table


def pool(x, stride: int):
    """Mean over windows of ``stride`` frames (the last window padded with the last frame): (T, D) -> (ceil(T/s), D)."""
    import torch

    n = -(-len(x) // stride)
    pad = torch.cat([x, x[-1:].expand(n * stride - len(x), -1)])
    return pad.view(n, stride, -1).mean(1)


def main(argv=None) -> int:
    p = make_parser(__doc__, prog="kmeans_units.py")
    p.add_argument("train_dir")
    p.add_argument("test_dir")
    p.add_argument("out_dir")
    p.add_argument("--k", type=int, default=64)
    p.add_argument("--stride", type=int, default=4)
    p.add_argument("--max-frames", type=int, default=200000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    def body() -> int:
        import torch

        from speechkit.features.codes import onehot_rows
        from speechkit.features.io import load_features

        setup_logging()
        torch.manual_seed(args.seed)
        _, train = load_features(args.train_dir, "speaker")
        x = torch.cat([pool(f, args.stride) for f in train])
        if len(x) > args.max_frames:
            x = x[torch.randperm(len(x))[: args.max_frames]]
        centroids = x[torch.randperm(len(x))[: args.k]].clone()
        for _ in range(50):
            assign = torch.cdist(x, centroids).argmin(1)
            sums = torch.zeros_like(centroids).index_add_(0, assign, x)
            counts = torch.bincount(assign, minlength=args.k)
            used = counts > 0
            centroids[used] = sums[used] / counts[used, None]
        utts, test = load_features(args.test_dir, "speaker")
        out = Path(args.out_dir)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        rows = onehot_rows(args.k)
        codes = {}
        for utt, f in zip(utts, test):
            c = torch.cdist(pool(f, args.stride), centroids).argmin(1).tolist()
            codes[utt] = c
            (tmp / f"{utt}.txt").write_text("".join(rows[k] + "\n" for k in c))
        write_table(tmp / "codes", {u: " ".join(map(str, c)) for u, c in codes.items()})
        (tmp / "frame_shift").write_text(f"{0.01 * args.stride:g}\n")
        used = len({k for c in codes.values() for k in c})
        info = {"system": f"k-means of the CMVN-normalised input, K={args.k}, {10 * args.stride} ms windows",
                "kind": "onehot", "codebook_size": args.k, "stride": args.stride, "train_dir": args.train_dir,
                "data_dir": args.test_dir, "num_utts": len(codes), "codes_used": used,
                "frame_shift": 0.01 * args.stride}
        (tmp / "units.yaml").write_text(yaml.safe_dump(info, sort_keys=False))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        print(f"kmeans_units.py: {len(codes)} utterances, {used} of {args.k} units used -> {out}")
        return 0

    return run_main("kmeans_units.py", body, parser=p)


if __name__ == "__main__":
    sys.exit(main())
