"""One ABX scoring in this process, by speechkit or by fastabx, timed; prints one JSON line. Used by bench_abx.py.

The data directory (written by bench_abx.py) holds ``items.item`` (ZeroSpeech columns), ``feats/<file>.npy``
(float64 frames) and ``meta.json`` (``{"frequency": "100"}``, frames per second as a string). Both scorers
read the same files; the time runs from after the imports (numba's and polars' included in neither) to the
score, so it includes reading the features, building the triplets and, for speechkit, loading the compiled
kernels (its C library, or numba's kernels from numba's cache where the library is not built). ``cpu_seconds`` is the process's CPU time over the same span (all threads): the work
done, which a loaded machine changes far less than the wall-clock time.

fastabx runs under its ZeroSpeech 2021 protocol without subsampling (``zerospeech_abx(..., max_size_group=None,
max_x_across=None)``), every triplet, as speechkit does. Run it with the peers venv's Python
(tools/venv-peers, ./tools/install_peers.sh); speechkit with the project's.

  python abx_peer_run.py --impl speechkit|fastabx --data DIR --mode across|within --context within|any \\
      --threads N [--device cpu|cuda] [--convention zr2019|zr2021] [--precision float32|float64]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["speechkit", "fastabx"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--mode", choices=["across", "within"], default="across")
    ap.add_argument("--context", choices=["within", "any"], default="within")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--convention", default="zr2021", choices=["zr2019", "zr2021"])
    ap.add_argument("--precision", choices=["float32", "float64"], default="float32",
                    help="fastabx: float32 = as shipped (float32 features; it fails on float64 ones); float64 = its "
                         "two float32 casts (GroupReducer.scores, Score's cell scores) patched to float64, features "
                         "float64: a check that only fastabx's rounding separates the two scores")
    args = ap.parse_args()
    data = Path(args.data)
    meta = json.loads((data / "meta.json").read_text())
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    if args.impl == "fastabx":
        from fastabx import zerospeech_abx

        dtype = torch.float32
        if args.precision == "float64":
            import types

            import fastabx.group as fa_group
            import fastabx.score as fa_score
            import polars as pl

            init = fa_group.GroupReducer.__init__

            def init64(self, *a, **k):
                init(self, *a, **k)
                self.scores = self.scores.double()

            fa_group.GroupReducer.__init__ = init64
            proxy = types.SimpleNamespace(**{k: getattr(pl, k) for k in dir(pl) if not k.startswith("__")})
            proxy.Float32 = pl.Float64
            fa_score.pl = proxy
            dtype = torch.float64
        t0, c0 = time.perf_counter(), time.process_time()
        err = zerospeech_abx(data / "items.item", data / "feats", max_size_group=None, max_x_across=None,
                             speaker=args.mode, context=args.context, distance="angular",
                             frequency=meta["frequency"], extension=".npy",
                             feature_maker=lambda p: torch.from_numpy(np.load(p)).to(dtype),
                             device=args.device, progress=False)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        out = dict(error=100.0 * err, n_triplets=None, precision=args.precision)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from speechkit.scoring.abx import abx_error
        from speechkit.scoring.abx_items import Item, read_item_file

        from speechkit.scoring.abx import kernels_c

        if not kernels_c.available():
            try:  # numba's import, outside the timing as fastabx's (torchdtw, polars) is; loading kernels stays in it
                import speechkit.scoring.abx.kernels_numba  # noqa: F401
            except ImportError:
                pass
        t0, c0 = time.perf_counter(), time.process_time()
        items = read_item_file(data / "items.item")
        if args.context == "any":
            items = [Item(i.file, i.onset, i.offset, i.phone, (), i.speaker, i.line) for i in items]
        t1 = time.perf_counter()
        feats = {f: np.load(data / "feats" / f"{f}.npy") for f in sorted({i.file for i in items})}
        t2 = time.perf_counter()
        res = abx_error(feats, items, mode=args.mode, distance="cosine", frame_shift=1.0 / float(meta["frequency"]),
                        device=args.device, convention=args.convention, num_threads=args.threads,
                        empty_items="drop")
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        # where the time went (seconds): a row slower on one machine than another says which part moved
        phases = dict(read_items=t1 - t0, read_features=t2 - t1, abx_error=secs - (t2 - t0))
        out = dict(error=res.error, n_triplets=res.n_triplets, n_dtw_pairs=res.n_dtw_pairs,
                   phases={k: round(v, 4) for k, v in phases.items()})
    out.update(impl=args.impl, seconds=secs, cpu_seconds=cpu, threads=args.threads, device=args.device, mode=args.mode,
               context=args.context, convention=args.convention if args.impl == "speechkit" else "zr2021",
               pid=os.getpid())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
