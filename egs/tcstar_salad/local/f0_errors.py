#!/usr/bin/env python3
"""Where the F0 RMSE comes from: octave errors, high reference F0 (Harvest jumps), trimmed RMSE.

  python local/f0_errors.py --out results/msc/analysis [--exp-dir exp] [--dump-dir dump]
      [--speakers "s1 s2"] [--models "musa_rnn_small salad_small ..."] [--high-hz 350]

Over each speaker's test frames voiced in both (silence phones left out, as speechkit-score-mcd's
default convention), per model: the share of frames more than half an octave off
(|log2(F0_hyp / F0_ref)| > 0.5), the share whose reference F0 lies above --high-hz (octave jumps of
Harvest with the wide 71-800 Hz search range used for every speaker: no speaker's ordinary range
reaches it), the F0 RMSE over all of them (= the table's) and the RMSE without either kind of frame
(trimmed), and the standard deviation of the voiced F0 of the reference and of the model (how much
the model flattens the contour).

Writes OUT/f0_errors.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kaldiio
import numpy as np

from analysis_common import load_test_set, write_outputs
from speechkit.features.world import read_world_layout
from speechkit.scoring.mcd import silence_keep_mask


def _f(x, nd: int = 1, pct: bool = False) -> str:
    return "-" if x is None else (f"{100 * x:.{nd}f} %" if pct else f"{x:.{nd}f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="results/<run>/analysis")
    ap.add_argument("--exp-dir", default="exp")
    ap.add_argument("--dump-dir", default="dump")
    ap.add_argument("--data-dir", default="data", help="for DATA_DIR/speakers when --speakers is not given")
    ap.add_argument("--speakers", default=None)
    ap.add_argument("--models", default="musa_rnn_small salad_small musa_rnn_big salad_big")
    ap.add_argument("--high-hz", type=float, default=350.0)
    args = ap.parse_args(argv)
    exp, dump = Path(args.exp_dir), Path(args.dump_dir)
    speakers = args.speakers.split() if args.speakers else (Path(args.data_dir) / "speakers").read_text().split()
    rows, record = [], {"high_hz": args.high_hz, "rows": []}
    for spk in speakers:
        test = dump / spk / "test"
        _, ref, ali = load_test_set(test)
        lay, _ = read_world_layout(test)
        fs = float((test / "frame_shift").read_text()) if (test / "frame_shift").is_file() else 0.005
        keep = {u: silence_keep_mask(ali[u], len(ref[u]), fs) for u in ref}
        for m in args.models.split():
            scp = exp / spk / m / "synth" / "test" / "feats.scp"
            if not scp.is_file():
                continue
            hyp = {u: np.asarray(x, np.float64) for u, x in kaldiio.load_scp_sequential(str(scp))}
            fr, fh, vr_all, vh_all = [], [], [], []
            for u, r in ref.items():
                r, h = r[keep[u]].astype(np.float64), hyp[u][keep[u]]   # silence left out
                vr, vh = r[:, lay.vuv] > 0.5, h[:, lay.vuv] > 0.5
                both = vr & vh
                fr.append(np.exp(r[both, lay.lf0]))
                fh.append(np.exp(h[both, lay.lf0]))
                vr_all.append(np.exp(r[vr, lay.lf0]))
                vh_all.append(np.exp(h[vh, lay.lf0]))
            fr, fh = np.concatenate(fr), np.concatenate(fh)
            vr_all, vh_all = np.concatenate(vr_all), np.concatenate(vh_all)
            r = {"speaker": spk, "model": m, "n_voiced_both": int(fr.size)}
            if fr.size:
                octave = np.abs(np.log2(fh / fr)) > 0.5
                high = fr > args.high_hz
                ok = ~octave & ~high
                r.update(octave_share=float(octave.mean()), high_ref_share=float(high.mean()),
                         f0_rmse_hz=float(np.sqrt(np.mean((fh - fr) ** 2))),
                         trimmed_f0_rmse_hz=float(np.sqrt(np.mean((fh[ok] - fr[ok]) ** 2))) if ok.any() else None,
                         trimmed_share=float(1 - ok.mean()))
            r.update(ref_sd_hz=float(vr_all.std()) if vr_all.size else None,
                     model_sd_hz=float(vh_all.std()) if vh_all.size else None)
            record["rows"].append(r)
            rows.append(f"| `{spk}` | {m} | {r['n_voiced_both']} | {_f(r.get('octave_share'), pct=True)} | "
                        f"{_f(r.get('high_ref_share'), pct=True)} | {_f(r.get('f0_rmse_hz'), 2)} | "
                        f"{_f(r.get('trimmed_f0_rmse_hz'), 2)} | {_f(r['ref_sd_hz'], 0)} | {_f(r['model_sd_hz'], 0)} |")
            print(rows[-1])
    md = "\n".join(["#### F0 errors: octave errors, high reference F0, trimmed RMSE", "",
                    "Test frames voiced in both, silence left out. Octave: |log2(F0 model / F0 ref)| > 0.5; high: "
                    f"reference F0 > {args.high_hz:g} Hz; trimmed: the RMSE without either kind of frame; sd: "
                    "standard deviation of the voiced F0 (all voiced frames of each side).", "",
                    "| speaker | model | frames | octave | high ref | F0 RMSE Hz | trimmed F0 RMSE Hz | ref sd Hz "
                    "| model sd Hz |", "|---|---|---:|---:|---:|---:|---:|---:|---:|", *rows])
    write_outputs(args.out, "f0_errors", record, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
