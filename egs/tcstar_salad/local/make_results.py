#!/usr/bin/env python3
"""The results of egs/tcstar_salad: collect the score files of exp/ into results/<run>/, render RESULTS.md.

  python local/make_results.py                    # render RESULTS.md from results/ alone (a clean clone can)
  python local/make_results.py --collect RUN \\
      [--models "m1 m2"] [--speakers "s1 s2"] [--data-dir data] [--dump-dir dump] [--exp-dir exp]
                                                  # stage 8: copy exp/ -> results/RUN/, then render

--collect RUN (run.sh's stage 8, RUN = the corpus: mini, msc, ljspeech) copies, for each speaker and
model that has them, the small machine-readable files the tables are made from:

  results/RUN/runs.jsonl                   every run.sh invocation of this corpus (exp/runs_RUN.jsonl)
  results/RUN/<spk>/speaker.json           utterances per set, training minutes, label dimension
  results/RUN/<spk>/<model>/test.json      speechkit-score-mcd (speechkit convention, per utterance)
  results/RUN/<spk>/<model>/test_authors.json, test_with_silence.json   the other scorings (totals only)
  results/RUN/<spk>/<model>/training.json  epochs, best epoch, updates, training time, parameters
  results/RUN/<spk>/f0.json, f0_histogram_<spk>.png   voiced-F0 statistics of the test set (Figure 2)
  results/RUN/latency.json, latency.png    stage 7 (Table 3, Figure 3), latency_stepwise.json if measured

It merges: speakers and models not named keep what an earlier collect wrote (the big models are
trained by a later command than the small ones). Rendering reads results/ only and writes RESULTS.md
next to it: per run the provenance header (speechkit.results), then per speaker the scores in both
conventions with a paired bootstrap interval of SALAD minus MUSA-RNN, the F0 statistics, the latency,
and the analyses that local/ scripts wrote into results/RUN/analysis/ (each with its command). The
tables are local/tcstar_tables.py's.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import kaldiio
import numpy as np
import yaml

from speechkit.results import (check_page, check_run_name, provenance, read_json_if, run_dirs, run_folder,
                               summarize, write_json, write_page)
from speechkit.scoring.mcd import voiced_f0_hz
from speechkit.scoring.plots import plot_f0_histograms
from speechkit.tasks.acoustic import PAPER_PARAMETERS
from speechkit.utils.cli import run_main
from tcstar_tables import (INTRO, MODEL_ORDER, RECIPE, analysis_lines, latency_lines, model_key, parameter_lines,
                           speaker_lines)

PARAMS_LINE = re.compile(r"task \w+: ([\d,]+) parameters")
RUN_ORDER = ("mini", "msc", "ljspeech")
#: how --collect marks the run folders it writes into (speechkit.utils.results_io), and files only it (or the
#: analyses of local/, which write into a collected run) write there
COLLECT_OWNER = "egs/tcstar_salad/local/make_results.py --collect"
RUN_SIGNATURE = ("*/speaker.json", "analysis/*.md")


# ----------------------------------------------------------------------------- collect (exp -> results)
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


def f0_stats(f0: np.ndarray) -> dict:
    return {"n_voiced": int(f0.size), "mean_hz": float(f0.mean()) if f0.size else None,
            "sd_hz": float(f0.std()) if f0.size else None,
            "share_above_350_hz": float((f0 > 350).mean()) if f0.size else None}


def collect_speaker(spk: str, models: list[str], data: Path, dump: Path, exp: Path, out: Path) -> list[str]:
    """Copy one speaker's files into ``out/<spk>/``; returns the models collected."""
    sdir = out / spk
    info = {}
    for part in ("train", "dev", "test"):
        u2s = data / spk / part / "utt2spk"
        info[f"n_{part}"] = len(u2s.read_text().splitlines()) if u2s.is_file() else None
    u2d = data / spk / "train" / "utt2dur"
    if u2d.is_file():
        info["train_minutes"] = sum(float(v.split()[1]) for v in u2d.read_text().splitlines()) / 60
    ld = dump / spk / "train" / "label_dim"
    info["label_dim"] = int(ld.read_text()) if ld.is_file() else None
    write_json(sdir / "speaker.json", info)
    done = []
    for m in models:
        e = exp / spk / m
        sc = read_json_if(e / "scores" / "test.json")
        if sc is None:
            continue
        write_json(sdir / m / "test.json", sc)
        for extra in ("test_authors", "test_with_silence"):
            x = read_json_if(e / "scores" / f"{extra}.json")
            if x is not None:
                x.pop("utterances", None)
                write_json(sdir / m / f"{extra}.json", x)
        write_json(sdir / m / "training.json", {**summarize(e, "valid/mcd"), "parameters": num_parameters(e),
                                                "paper_parameters": PAPER_PARAMETERS.get(m)})
        done.append(m)
    # F0 of the test set (Figure 2): ground truth and every model of this speaker with a synthesis
    test = dump / spk / "test"
    if (test / "feats.scp").is_file():
        conf = yaml.safe_load((test / "feats.yaml").read_text()) if (test / "feats.yaml").is_file() else {}
        tracks = {"ground truth": voiced_f0(test / "feats.scp", conf)}
        for m in sorted((p.name for p in (exp / spk).iterdir() if p.is_dir()), key=model_key):
            scp = exp / spk / m / "synth" / "test" / "feats.scp"
            if scp.is_file() and (sdir / m / "test.json").is_file():
                tracks[m] = voiced_f0(scp, conf)
        write_json(sdir / "f0.json", {name: f0_stats(f0) for name, f0 in tracks.items()})
        shown = {k: v for k, v in tracks.items() if v.size}
        plot_f0_histograms(shown, out / f"f0_histogram_{spk}.png", title=f"F0 of the test set, speaker {spk}")
    return done


def collect(run: str, models: list[str], speakers: list[str] | None, data: Path, dump: Path, exp: Path,
            results: Path) -> Path:
    """exp/ -> results/RUN/, merged into what earlier collects wrote (see the module doc); returns results/RUN."""
    reads = {"--exp-dir": exp, "--data-dir": data, "--dump-dir": dump}
    with run_folder(results / run, owner=COLLECT_OWNER, signature=RUN_SIGNATURE, reads=reads, option="--collect",
                    runs=exp / f"runs_{run}.jsonl", merge=True) as out:
        if speakers is None:
            speakers = (data / "speakers").read_text().split()
        for spk in speakers:
            got = collect_speaker(spk, models, data, dump, exp, out)
            print(f"make_results: {spk}: collected {', '.join(got) or 'no model'} into {out / spk}")
        # latency: only if stage 7 ran with this setup's label dimension (the setups share exp/latency)
        dims = {(read_json_if(out / s / "speaker.json") or {}).get("label_dim") for s in speakers}
        for name in ("latency", "latency_stepwise"):
            lat = read_json_if(exp / name / "latency.json")
            if not lat:
                continue
            lat_dims = {r.get("input_dim") for r in lat.get("models", {}).values()}
            if not lat_dims & dims:
                print(f"make_results: {exp / name}: measured with {sorted(lat_dims)} input dims, not this setup's "
                      f"{sorted(d for d in dims if d)}: not collected", file=sys.stderr)
                continue
            for r in lat.get("models", {}).values():
                r.pop("timings_wall_cpu", None)
            write_json(out / f"{name}.json", lat)
            if name == "latency" and (exp / name / "latency.png").is_file():
                shutil.copyfile(exp / name / "latency.png", out / "latency.png")
    return out


# ----------------------------------------------------------------------------- render (results -> RESULTS.md)
def render(results: Path, out_md: Path) -> str:
    """RESULTS.md from ``results/*/`` only."""
    lines = list(INTRO)
    for run_dir in run_dirs(results, lambda p: any(p.iterdir()), first=RUN_ORDER):
        lines += [f"## Run `{run_dir.name}`", "", provenance(run_dir).rstrip(), ""]
        for sdir in sorted(p for p in run_dir.iterdir() if (p / "speaker.json").is_file()):
            lines += speaker_lines(sdir.name, sdir)
        lines += latency_lines(run_dir)
        lines += analysis_lines(run_dir)
    lines += parameter_lines()
    return write_page(out_md, lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collect", metavar="RUN", default=None,
                    help="first copy exp/'s score files into RESULTS_DIR/RUN (RUN: the corpus, e.g. mini, msc)")
    ap.add_argument("--models", default=" ".join(MODEL_ORDER), help="models to collect (default: all four)")
    ap.add_argument("--speakers", default=None, help="speakers to collect (default: DATA_DIR/speakers)")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--dump-dir", default="dump")
    ap.add_argument("--exp-dir", default="exp")
    ap.add_argument("--results-dir", default=str(RECIPE / "results"),
                    help="the tracked results (default: the recipe's results/)")
    ap.add_argument("--results-md", default=None, help="default: RESULTS.md next to RESULTS_DIR")
    args = ap.parse_args(argv)
    results = Path(args.results_dir)
    out_md = Path(args.results_md) if args.results_md else results.resolve().parent / "RESULTS.md"
    check_page(out_md, option="--results-md", roots={"--results-dir": results},
               inputs={"--exp-dir": args.exp_dir, "--data-dir": args.data_dir, "--dump-dir": args.dump_dir}
               if args.collect else None)
    if args.collect:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", args.collect):
            ap.error(f"--collect {args.collect!r}: a run name is letters, digits, '_', '.', '-'")
        check_run_name(args.collect, "--collect")  # not '.' nor '..' (the results root, the recipe)
        collect(args.collect, args.models.split(), args.speakers.split() if args.speakers else None,
                Path(args.data_dir), Path(args.dump_dir), Path(args.exp_dir), results)
    render(results, out_md)
    print(f"make_results: wrote {out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main("make_results", main))  # an error is one line and exit 1
