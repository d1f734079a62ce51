#!/usr/bin/env python3
"""Collect the results of egs/tcstar_salad into EXP_DIR/RESULTS.md (+ RESULTS.json) and plots.

Per speaker, Table 2 of the SALAD paper: MCD (dB, without and with c0), F0 RMSE (Hz), V/UV accuracy
(%) on the test set with forced durations (silence frames left out; the with-silence figures are
in the JSON), parameter counts and the training budget of each model; Table 3: the CPU latency
fit (stage 7); an F0 histogram per speaker like the paper's Figure 2 (ground truth and every model
synthesized).

Usage: local/make_results.py [--models "m1 m2 ..."] [--corpus NAME] DATA_DIR EXP_DIR
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import kaldiio
import numpy as np
import yaml

from measure_latency import PAPER_LATENCY_S  # local/, next to this script
from speechkit.scoring.mcd import voiced_f0_hz
from speechkit.tasks.acoustic import PAPER_PARAMETERS
from speechkit.scoring.plots import plot_f0_histograms
from speechkit.train.report import training_summary
from speechkit.utils.fileio import atomic_write

# SALAD paper (Pascual et al. 2018): Table 2's parameter counts and Table 3's maximum CPU latency (s)
PAPER_PARAMS = PAPER_PARAMETERS
PAPER_LATENCY = PAPER_LATENCY_S
PARAMS_LINE = re.compile(r"task \w+: ([\d,]+) parameters")


def load_json(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fmt(x, nd: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{nd}f}"


def duration(secs: float | None) -> str:
    if secs is None:
        return "-"
    return f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.1f} min"


def num_parameters(exp: Path) -> int | None:
    """The parameter count the trainer logged at its (last) start."""
    n = None
    log = exp / "train.log"
    if log.is_file():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            m = PARAMS_LINE.search(line)
            if m:
                n = int(m.group(1).replace(",", ""))
    return n


def voiced_f0(scp: Path, conf: dict) -> np.ndarray:
    """F0 in Hz of every voiced frame of the utterances in ``scp`` (WORLD layout)."""
    out = [voiced_f0_hz(m, conf) for _, m in kaldiio.load_scp_sequential(str(scp))]
    return np.concatenate(out) if out else np.zeros(0)


def speaker_section(spk: str, models: list[str], data: Path, exp: Path, dump: Path, results: dict) -> list[str]:
    n_train = len((data / spk / "train" / "utt2spk").read_text().splitlines())
    dur = sum(float(v.split()[1]) for v in (data / spk / "train" / "utt2dur").read_text().splitlines())
    lines = [f"### Speaker `{spk}` ({n_train} training utterances, {dur / 60:.1f} min)", "",
             "| model | parameters (paper) | MCD dB | MCD dB with c0 | F0 RMSE Hz | V/UV % | MCD dB with silence "
             "| epochs (best) | updates | training time |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    results[spk] = {}
    for m in models:
        e = exp / spk / m
        sc = load_json(e / "scores" / "test.json")
        sc_sil = load_json(e / "scores" / "test_with_silence.json")
        tr = training_summary(e, "valid/mcd")
        n_params = num_parameters(e)
        results[spk][m] = {"scores": sc, "scores_with_silence": sc_sil, "training": tr, "parameters": n_params}
        if sc is None and not tr:
            continue
        paper = PAPER_PARAMS.get(m)
        params = "-" if n_params is None else f"{n_params / 1e6:.2f} M" + (f" ({paper / 1e6:.2f} M)" if paper else "")
        sc = sc or {}
        lines.append(
            f"| {m} | {params} | {fmt(sc.get('mcd_db'))} | {fmt(sc.get('mcd_with_c0_db'))} | "
            f"{fmt(sc.get('f0_rmse_hz'))} | {fmt(sc.get('vuv_accuracy'), 1)} | "
            f"{fmt((sc_sil or {}).get('mcd_db'))} | {tr.get('epochs', '-')} ({tr.get('best_epoch', '-')}) | "
            f"{tr.get('steps', '-')} | {duration(tr.get('train_seconds'))} |")
    lines.append("")
    # F0 histogram (Figure 2): ground truth and every synthesized model
    test = dump / spk / "test"
    if (test / "feats.scp").is_file():
        conf = yaml.safe_load((test / "feats.yaml").read_text()) if (test / "feats.yaml").is_file() else {}
        tracks = {"ground truth": voiced_f0(test / "feats.scp", conf)}
        for m in models:
            scp = exp / spk / m / "synth" / "test" / "feats.scp"
            if scp.is_file():
                tracks[m] = voiced_f0(scp, conf)
        unvoiced = [m for m, f0 in tracks.items() if f0.size == 0]
        tracks = {m: f0 for m, f0 in tracks.items() if f0.size}
        png = exp / f"f0_histogram_{spk}.png"
        if tracks:
            plot_f0_histograms(tracks, png, title=f"F0 of the test set, speaker {spk}")
            lines.append(f"F0 histogram: `{png.name}` ({', '.join(tracks)}).")
        if unvoiced:
            lines.append(f"No voiced frame at all (left out of the histogram): {', '.join(unvoiced)}.")
        lines.append("")
    return lines


def latency_section(exp: Path, results: dict) -> list[str]:
    lat = load_json(exp / "latency" / "latency.json")
    if not lat:
        return []
    results["latency"] = lat
    models = lat.get("models", {})
    lines = ["### CPU latency (Table 3)", "",
             f"One thread, untrained weights of each configuration, utterances of 1 to {lat.get('max_seconds', '?')} s "
             "generated at 200 frames/s; RANSAC linear fit; the latency the fit gives at the longest utterance.", "",
             "| model | fitted latency at the longest utterance (s) | paper (35 s) | slope (s per s of speech) |",
             "|---|---:|---:|---:|"]
    for m, r in models.items():
        paper = PAPER_LATENCY.get(m)
        lines.append(f"| {m} | {fmt(r.get('max_fitted_latency_s'), 3)} | {fmt(paper, 3) if paper else '-'} | "
                     f"{fmt(r.get('slope'), 4)} |")
    for size in ("small", "big"):
        r, s = models.get(f"musa_rnn_{size}"), models.get(f"salad_{size}")
        if r and s and s.get("max_fitted_latency_s"):
            ratio = r["max_fitted_latency_s"] / s["max_fitted_latency_s"]
            lines.append(f"\nRNN / SALAD ({size}): **{ratio:.1f}x** (paper {PAPER_LATENCY[f'musa_rnn_{size}'] / PAPER_LATENCY[f'salad_{size}']:.1f}x; "
                         f"target >= 10x: {'met' if ratio >= 10 else 'NOT met'})")
    lines += ["", "Plot: `latency/latency.png`.", ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir")
    ap.add_argument("exp_dir")
    ap.add_argument("--dump-dir", default=None, help="default: DATA_DIR's sibling 'dump'")
    ap.add_argument("--models", default="musa_rnn_small salad_small musa_rnn_big salad_big")
    ap.add_argument("--corpus", default="")
    args = ap.parse_args(argv)
    data, exp = Path(args.data_dir), Path(args.exp_dir)
    dump = Path(args.dump_dir) if args.dump_dir else data.parent / "dump"
    models = args.models.split()
    speakers = (data / "speakers").read_text().split()
    results: dict = {}
    lines = [f"# egs/tcstar_salad results{f' ({args.corpus})' if args.corpus else ''}", "",
             "Test sets with forced durations (the aligner's), WORLD features; MCD over non-silence frames "
             "(silence phones of the alignment left out), pooled over frames; F0 RMSE over frames voiced in "
             "both; V/UV accuracy over all non-silence frames.", ""]
    for spk in speakers:
        lines += speaker_section(spk, models, data, exp, dump, results)
    lines += latency_section(exp, results)
    text = "\n".join(lines) + "\n"
    with atomic_write(exp / "RESULTS.json") as f:
        json.dump(results, f, indent=2, default=float)
        f.write("\n")
    with atomic_write(exp / "RESULTS.md") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
