#!/usr/bin/env python3
"""Is SALAD's gap to the RNN a train/inference mismatch? Windowed against whole-utterance inference.

  python local/windowed_inference.py --out results/msc/analysis [--exp-dir exp] [--dump-dir dump]
      [--speakers "s1 s2"] [--models "salad_small salad_big"]

Stateful training (sec. 3.3) shows SALAD windows of data.window frames (120) whose positions carry
on from the previous window (offset k * W); synthesis runs each utterance whole from position 0.
This script synthesizes each speaker's test set both ways with the trained SALAD models (windowed:
window k of the utterance at offset k * W, the windows concatenated) and scores both against the
natural features (speechkit convention, silence left out, and over every frame). Equal MCDs mean
the way synthesis runs the model is not what costs SALAD its distortion.

Writes OUT/windowed_inference.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from analysis_common import load_test_set, write_outputs
from speechkit.features.world import read_world_layout
from speechkit.scoring.mcd import score_world
from speechkit.tasks.acoustic import predict_features
from speechkit.tasks import load_model


def windowed(model, labels: np.ndarray, window: int, vuv_index: int) -> np.ndarray:
    """One utterance in windows of ``window`` frames, window k at position offset k * window."""
    x = torch.from_numpy(np.ascontiguousarray(labels))[None]
    with torch.no_grad():
        parts = [model(x[:, k:k + window], offset=k) for k in range(0, x.shape[1], window)]
        y = model.normalizer.denormalize(torch.cat(parts, dim=1))[0].numpy()
    y[:, vuv_index] = (y[:, vuv_index] > 0.5).astype(y.dtype)
    return y


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="results/<run>/analysis")
    ap.add_argument("--exp-dir", default="exp")
    ap.add_argument("--dump-dir", default="dump")
    ap.add_argument("--data-dir", default="data", help="for DATA_DIR/speakers when --speakers is not given")
    ap.add_argument("--speakers", default=None)
    ap.add_argument("--models", default="salad_small salad_big")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    exp, dump = Path(args.exp_dir), Path(args.dump_dir)
    speakers = args.speakers.split() if args.speakers else (Path(args.data_dir) / "speakers").read_text().split()
    rows, record = [], {"rows": []}
    for spk in speakers:
        test = dump / spk / "test"
        labels, ref, ali = load_test_set(test)
        lay, _ = read_world_layout(test)
        for m in args.models.split():
            if not (exp / spk / m / "checkpoints").is_dir():
                continue
            model, cfg = load_model(exp / spk / m)
            w = cfg.data.window
            whole = {u: predict_features(model, labels[u], vuv_index=lay.vuv) for u in labels}
            win = {u: windowed(model, labels[u], w, lay.vuv) for u in labels}
            r = {"speaker": spk, "model": m, "window": w, "n_utts": len(labels)}
            for name, hyp in (("whole", whole), ("windowed", win)):
                masked = score_world(ref, hyp, lay, alignments=ali)
                plain = score_world(ref, hyp, lay)
                r[f"mcd_db_{name}"] = masked.mcd_db
                r[f"mcd_db_{name}_with_silence"] = plain.mcd_db
                r[f"f0_rmse_hz_{name}"] = masked.f0_rmse_hz
            record["rows"].append(r)
            rows.append(f"| `{spk}` | {m} | {w} | {r['mcd_db_whole']:.2f} | {r['mcd_db_windowed']:.2f} | "
                        f"{r['mcd_db_whole_with_silence']:.2f} | {r['mcd_db_windowed_with_silence']:.2f} |")
            print(rows[-1])
    md = "\n".join(["#### SALAD inference: whole utterances vs training-style windows", "",
                    "Test sets, MCD in dB (speechkit convention). Windowed: window k of W frames at position offset "
                    "k W, as stateful training shows them; whole: from position 0, as synthesis runs.", "",
                    "| speaker | model | W | whole | windowed | whole, with silence | windowed, with silence |",
                    "|---|---|---:|---:|---:|---:|---:|", *rows])
    write_outputs(args.out, "windowed_inference", record, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
