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
next to it: per run the provenance header (speechkit.utils.provenance), then per speaker the scores
in both conventions with a paired bootstrap interval of SALAD minus MUSA-RNN, the F0 statistics, the
latency, and the analyses that local/ scripts wrote into results/RUN/analysis/ (each with its command).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
from pathlib import Path

import numpy as np

from measure_latency import PAPER_LATENCY_S  # local/, next to this script
from speechkit.scoring.significance import NotComparable, paired_ratio_bootstrap
from speechkit.tasks.acoustic import PAPER_PARAMETERS
from speechkit.utils.fileio import atomic_write
from speechkit.utils.jsonio import read_json
from speechkit.utils.cli import run_main
from speechkit.utils.provenance import markdown_header, read_runs
from speechkit.utils.results_io import check_collect_dir, check_page, check_run_name, mark_collect_dir

RECIPE = Path(__file__).resolve().parents[1]
PARAMS_LINE = re.compile(r"task \w+: ([\d,]+) parameters")
MODEL_ORDER = ("musa_rnn_small", "salad_small", "musa_rnn_big", "salad_big")
RUN_ORDER = ("mini", "msc", "ljspeech")
BOOTSTRAP_RESAMPLES = 2000
#: how --collect marks the run folders it writes into (speechkit.utils.results_io), and files only it (or the
#: analyses of local/, which write into a collected run) write there
COLLECT_OWNER = "egs/tcstar_salad/local/make_results.py --collect"
RUN_SIGNATURE = ("*/speaker.json", "analysis/*.md")


# ----------------------------------------------------------------------------- small helpers


def load_json(p: Path) -> dict | None:
    """The JSON in ``p``, None when there is no such file; one that is not JSON is an error naming it and the line."""
    return read_json(p) if p.is_file() else None


def write_json(p: Path, obj) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(p) as f:
        json.dump(obj, f, indent=1, allow_nan=False, default=float)
        f.write("\n")


def fmt(x, nd: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


def duration(secs: float | None) -> str:
    if secs is None:
        return "-"
    return f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.1f} min"


def model_key(m: str) -> tuple:
    return (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m)


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
    import kaldiio

    from speechkit.scoring.mcd import voiced_f0_hz

    out = [voiced_f0_hz(m, conf) for _, m in kaldiio.load_scp_sequential(str(scp))]
    return np.concatenate(out) if out else np.zeros(0)


def f0_stats(f0: np.ndarray) -> dict:
    return {"n_voiced": int(f0.size), "mean_hz": float(f0.mean()) if f0.size else None,
            "sd_hz": float(f0.std()) if f0.size else None,
            "share_above_350_hz": float((f0 > 350).mean()) if f0.size else None}


def collect_speaker(spk: str, models: list[str], data: Path, dump: Path, exp: Path, out: Path) -> list[str]:
    """Copy one speaker's files into ``out/<spk>/``; returns the models collected."""
    import yaml

    from speechkit.scoring.plots import plot_f0_histograms
    from speechkit.train.report import training_summary

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
        sc = load_json(e / "scores" / "test.json")
        if sc is None:
            continue
        write_json(sdir / m / "test.json", sc)
        for extra in ("test_authors", "test_with_silence"):
            x = load_json(e / "scores" / f"{extra}.json")
            if x is not None:
                x.pop("utterances", None)
                write_json(sdir / m / f"{extra}.json", x)
        tr = training_summary(e, "valid/mcd")
        write_json(sdir / m / "training.json", {**tr, "parameters": num_parameters(e),
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
    """exp/ -> results/RUN/ (see the module doc); returns results/RUN."""
    out = results / run
    # speechkit.utils.results_io: only a run folder a collect made is merged into (checked before writing)
    check_collect_dir(out, owner=COLLECT_OWNER, signature=RUN_SIGNATURE, option="--collect",
                      reads={"--exp-dir": exp, "--data-dir": data, "--dump-dir": dump})
    out.mkdir(parents=True, exist_ok=True)
    mark_collect_dir(out, COLLECT_OWNER)
    runs = exp / f"runs_{run}.jsonl"
    if runs.is_file():
        shutil.copyfile(runs, out / "runs.jsonl")
    else:
        print(f"make_results: {runs}: no run records", file=sys.stderr)
    if speakers is None:
        speakers = (data / "speakers").read_text().split()
    for spk in speakers:
        got = collect_speaker(spk, models, data, dump, exp, out)
        print(f"make_results: {spk}: collected {', '.join(got) or 'no model'} into {out / spk}")
    # latency: only if stage 7 ran with this setup's label dimension (the setups share exp/latency)
    dims = {(load_json(out / s / "speaker.json") or {}).get("label_dim") for s in speakers}
    for name in ("latency", "latency_stepwise"):
        lat = load_json(exp / name / "latency.json")
        if not lat:
            continue
        lat_dims = {r.get("input_dim") for r in lat.get("models", {}).values()}
        if lat_dims & dims:
            for r in lat.get("models", {}).values():
                r.pop("timings_wall_cpu", None)
            write_json(out / f"{name}.json", lat)
            if name == "latency" and (exp / name / "latency.png").is_file():
                shutil.copyfile(exp / name / "latency.png", out / "latency.png")
        else:
            print(f"make_results: {exp / name}: measured with {sorted(lat_dims)} input dims, not this setup's "
                  f"{sorted(d for d in dims if d)}: not collected", file=sys.stderr)
    return out


# ----------------------------------------------------------------------------- render (results -> RESULTS.md)


def utt_sums(sc: dict, model: str = "A") -> dict[str, tuple[float, float]]:
    """``{utt: (MCD summed over its scored frames in dB, scored frames)}`` of a speechkit-convention test.json
    (an utterance with no scored frame, MCD null, counts 0).

    Raises:
        NotComparable: an utterance listed twice, a frame count that is not a number, or an MCD that is not a
            finite number (NaN: the page says so, it printed "+nan dB"); the utterance and ``model`` are named.
    """
    out: dict[str, tuple[float, float]] = {}
    for u in sc.get("utterances") or []:
        utt, n, mcd = u.get("utt"), u.get("n_frames"), u.get("mcd_db")
        if utt in out:
            raise NotComparable(f"utterance {utt!r} is listed twice in {model}'s test.json")
        if not isinstance(n, (int, float)) or isinstance(n, bool) or not math.isfinite(n):
            raise NotComparable(f"utterance {utt!r}: {model}'s n_frames {n!r} is not a frame count")
        if mcd is None and n == 0:
            mcd = 0.0  # nothing scored (all silence)
        if not isinstance(mcd, (int, float)) or isinstance(mcd, bool) or not math.isfinite(mcd):
            raise NotComparable(f"utterance {utt!r}: {model}'s MCD is {mcd!r} dB, not a finite number")
        out[utt] = (mcd * n, n)
    return out


def paired_bootstrap(a: dict, b: dict, seed: int = 0,
                     names: tuple[str, str] = ("A", "B")) -> tuple[float, float, float]:
    """Pooled MCD of ``b`` minus ``a`` (dB) and a 95 % percentile interval, resampling test utterances
    (speechkit.scoring.significance.paired_ratio_bootstrap, :data:`BOOTSTRAP_RESAMPLES` resamples).

    Both score files must hold the same utterances (per-utterance sums of the speechkit convention).

    Raises:
        NotComparable: why the two cannot be compared (different utterances or frame counts, fewer than 2
            utterances, a non-finite MCD: the utterance and the model, ``names``, are named).
    """
    r = paired_ratio_bootstrap(utt_sums(a, names[0]), utt_sums(b, names[1]), n_resamples=BOOTSTRAP_RESAMPLES,
                               seed=seed)
    return r.delta, r.interval[0], r.interval[1]


def speaker_lines(spk: str, sdir: Path) -> list[str]:
    info = load_json(sdir / "speaker.json") or {}
    models = sorted((p.name for p in sdir.iterdir() if (p / "test.json").is_file()), key=model_key)
    head = f"### Speaker `{spk}`"
    if info.get("n_train") is not None:
        head += (f" ({info['n_train']} / {info.get('n_dev')} / {info.get('n_test')} train / dev / test utterances, "
                 f"{info.get('train_minutes', 0):.1f} min of training speech, {info.get('label_dim')} label dims)")
    lines = [head, "",
             "| model | parameters (paper) | MCD dB | F0 RMSE Hz | V/UV % | authors: MCD dB | authors: F0 RMSE Hz "
             "| authors: V/UV % | MCD with c0 | MCD with silence | epochs (best) | updates | training time |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    scores = {}
    for m in models:
        sc = load_json(sdir / m / "test.json") or {}
        au = load_json(sdir / m / "test_authors.json") or {}
        ws = load_json(sdir / m / "test_with_silence.json") or {}
        tr = load_json(sdir / m / "training.json") or {}
        scores[m] = sc
        n, paper = tr.get("parameters"), tr.get("paper_parameters")
        params = "-" if n is None else f"{n / 1e6:.2f} M" + (f" ({paper / 1e6:.2f} M)" if paper else "")
        lines.append(
            f"| {m} | {params} | {fmt(sc.get('mcd_db'))} | {fmt(sc.get('f0_rmse_hz'))} | "
            f"{fmt(sc.get('vuv_accuracy'), 1)} | {fmt(au.get('mcd_db'))} | {fmt(au.get('f0_rmse_hz'))} | "
            f"{fmt(au.get('vuv_accuracy'), 1)} | {fmt(sc.get('mcd_with_c0_db'))} | {fmt(ws.get('mcd_db'))} | "
            f"{tr.get('epochs', '-')} ({tr.get('best_epoch', '-')}) | {tr.get('steps', '-')} | "
            f"{duration(tr.get('train_seconds'))} |")
    lines.append("")
    for size in ("small", "big"):
        r, s = scores.get(f"musa_rnn_{size}"), scores.get(f"salad_{size}")
        if r and s:
            try:
                bs = paired_bootstrap(r, s, names=(f"musa_rnn_{size}", f"salad_{size}"))
            except NotComparable as e:  # said, never dropped
                lines.append(f"SALAD {size} minus MUSA-RNN {size}, MCD (speechkit convention): not compared ({e}).")
                bs = None
            if bs:
                lines.append(f"SALAD {size} minus MUSA-RNN {size}, MCD (speechkit convention): **{bs[0]:+.2f} dB**, "
                             f"95 % interval {bs[1]:+.2f} to {bs[2]:+.2f} dB (paired bootstrap over the "
                             f"{len(r['utterances'])} test utterances, {BOOTSTRAP_RESAMPLES} resamples; one "
                             "training per model, so seed-to-seed spread is not in it).")
    lines += vuv_lines(sdir, models)
    f0 = load_json(sdir / "f0.json")
    if f0:
        lines += ["", "Voiced F0 of the test set (Figure 2): "
                  + "; ".join(f"{k} mean {fmt(v['mean_hz'], 0)} Hz, sd {fmt(v['sd_hz'], 0)} Hz"
                              if v["n_voiced"] else f"{k} no voiced frame" for k, v in f0.items())
                  + f". Histogram: [`f0_histogram_{spk}.png`](results/{sdir.parent.name}/f0_histogram_{spk}.png)."]
    lines.append("")
    return lines


def vuv_lines(sdir: Path, models: list[str]) -> list[str]:
    """The V/UV table of one speaker: accuracy beside the unvoiced class's recall and precision, the balanced
    accuracy and the majority baseline, in both conventions (speechkit.scoring.mcd.WorldScores.vuv_figures);
    score files written before those figures existed show '-'."""
    rows = []
    for m in models:
        for conv, name in (("speechkit", "test.json"), ("authors", "test_authors.json")):
            sc = load_json(sdir / m / name)
            if sc is None:
                continue
            c = sc.get("vuv_counts") or {}
            rows.append(f"| {m} | {conv} | {fmt(sc.get('vuv_accuracy'), 1)} | "
                        f"{fmt(sc.get('vuv_majority_baseline'), 1)} ({sc.get('vuv_majority_class', '-')}) | "
                        f"{fmt(sc.get('vuv_unvoiced_recall'), 1)} | {fmt(sc.get('vuv_unvoiced_precision'), 1)} | "
                        f"{fmt(sc.get('vuv_balanced_accuracy'), 1)} | {c.get('unvoiced_both', '-')} / "
                        f"{c.get('ref_unvoiced', '-')} / {c.get('hyp_unvoiced', '-')} / {c.get('n', '-')} |")
    if not rows:
        return []
    return ["", "V/UV against the majority class (the same scored frames): the baseline is the accuracy of the better "
            "constant decision; unvoiced recall / precision are the unvoiced class's (precision '-': no frame "
            "predicted unvoiced); balanced accuracy is the mean of the unvoiced and voiced recalls (50 % for a "
            "constant decision in the speechkit convention). Counts: unvoiced in both / in the reference / predicted / frames (authors: the zeroed "
            "silent frames count as unvoiced in both).", "",
            "| model | convention | V/UV % | majority baseline % (class) | unvoiced recall % | unvoiced precision % "
            "| balanced accuracy % | counts |",
            "|---|---|---:|---:|---:|---:|---:|---|", *rows]


def measured_at(r: dict, seconds: float) -> str:
    """The median timing at ``seconds`` and, with several repeats, their range: ``6.01 s (5.80-6.40)``."""
    t = sorted(v for x, v in r.get("timings", []) if x == seconds)
    if len(t) < 2:
        return f"{r['measured_max_s']:.2f} s"
    return f"{r['measured_max_s']:.2f} s ({t[0]:.2f}-{t[-1]:.2f})"


def latency_lines(run_dir: Path) -> list[str]:
    lat = load_json(run_dir / "latency.json")
    if not lat:
        return []
    env = lat.get("environment", {})
    models = lat.get("models", {})
    mx = lat.get("max_seconds")
    dims = sorted({r.get("input_dim") for r in models.values()})
    lines = ["### CPU latency (Table 3, Figure 3)", "",
             f"One thread, untrained weights ({', '.join(map(str, dims))} label dims), utterances of 1 to {mx:g} s "
             f"at 200 frames/s, {lat.get('repeats')} timing(s) per length, {env.get('clock', 'cpu')} time, RANSAC "
             f"line. Load average (1/5/15 min) of the machine: {env.get('load_average_start', '?')} as timing "
             f"started, {env.get('load_average_end', '?')} as it ended ({env.get('cores_visible')} cores).", "",
             f"| model | parameters | measured at {mx:g} s (range over repeats) | fitted at {mx:g} s | "
             "slope (s per s) | paper (Table 3) |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in sorted(models, key=model_key):
        r = models[m]
        lines.append(f"| {m} | {r['parameters'] / 1e6:.2f} M | {measured_at(r, mx)} | "
                     f"{r['max_fitted_latency_s']:.2f} s | {r['slope']:.4f} | "
                     f"{PAPER_LATENCY_S.get(m, float('nan')):g} s |")
    for size, ratio in (lat.get("speedup_rnn_over_salad") or {}).items():
        paper = PAPER_LATENCY_S[f"musa_rnn_{size}"] / PAPER_LATENCY_S[f"salad_{size}"]
        lines.append(f"\nRNN / SALAD at {mx:g} s ({size}, fitted): {ratio:.2f}x (paper {paper:.1f}x)")
    step = load_json(run_dir / "latency_stepwise.json")
    if step:
        smx = step.get("max_seconds")
        lines += ["", f"RNN stepped one frame per call (a streaming synthesizer), measured 1 to {smx:g} s and "
                  f"extrapolated along its RANSAC line to {mx:g} s (load average "
                  f"{step.get('environment', {}).get('load_average_start', '?')}):", "",
                  f"| model | measured at {smx:g} s | line at {mx:g} s | SALAD of the same size at {mx:g} s | "
                  "RNN / SALAD |", "|---|---:|---:|---:|---:|"]
        for m in sorted(step.get("models", {}), key=model_key):
            r = step["models"][m]
            at = r["slope"] * mx + r["intercept"]
            salad = models.get(m.replace("musa_rnn", "salad"))
            sal = salad["max_fitted_latency_s"] if salad else None
            lines.append(f"| {m} | {measured_at(r, smx)} | {at:.1f} s | {fmt(sal)} s | "
                         f"{fmt(at / sal if sal else None, 1)}x |")
    lines += ["", f"Plot: [`latency.png`](results/{run_dir.name}/latency.png).", ""]
    return lines


def analysis_lines(run_dir: Path) -> list[str]:
    lines = []
    for md in sorted((run_dir / "analysis").glob("*.md")):
        lines += [md.read_text(encoding="utf-8").rstrip(), ""]
    return (["### Analyses (scripts under local/, outputs in results/%s/analysis/)" % run_dir.name, ""] + lines
            if lines else [])


def parameter_lines(config_dir: Path = RECIPE / "conf", input_dim: int = 364) -> list[str]:
    """Table 2's parameter counts: the four models built from the recipe's configs with the paper's
    364 input dimensions (362 label features + 2 duration features); no trained model needed."""
    from speechkit.models.salad import count_parameters
    from speechkit.tasks import get_task
    from speechkit.utils.config import load_config

    lines = [f"## Parameter counts (Table 2), the recipe's configs with the paper's {input_dim} input dims", "",
             "| model | parameters | paper |", "|---|---:|---:|"]
    for m in MODEL_ORDER:
        conf = config_dir / f"train_{m}.yaml"
        if not conf.is_file():
            continue
        task = get_task(m.rsplit("_", 1)[0])
        model = task.build_model(load_config(task.Config, conf, [f"model.input_dim={input_dim}"]))
        lines.append(f"| {m} | {count_parameters(model):,} | {PAPER_PARAMETERS[m] / 1e6:.2f} M |")
    return lines + [""]


def run_order(name: str) -> tuple:
    return (RUN_ORDER.index(name) if name in RUN_ORDER else len(RUN_ORDER), name)


def render(results: Path, out_md: Path) -> str:
    """RESULTS.md from ``results/*/`` only."""
    runs = sorted((p for p in results.iterdir() if p.is_dir() and any(p.iterdir())),
                  key=lambda p: run_order(p.name)) if results.is_dir() else []
    lines = ["# egs/tcstar_salad: results", "",
             "Generated by `python local/make_results.py` from the files under `results/` (run.sh's stage 8 "
             "collects them from `exp/` first); do not edit by hand.", "",
             "Test sets with forced durations (the aligner's), WORLD features. Two scoring conventions "
             "(`speechkit-score-mcd --convention`):", "",
             "- **speechkit** (the first columns): MCD over mcep[1:] (c0 left out), F0 RMSE over frames voiced "
             "in both, V/UV accuracy; frames inside silence phones of the alignment left out;",
             "- **authors** (as the SALAD authors' evaluation code, santi-pdp/musa_tts `eval_aco_epoch`): MCD "
             "over all 40 mel-cepstral columns (c0 included), F0 RMSE over every frame of the exp(lf0) contours "
             "(the reference's interpolated through unvoiced frames); silent frames zeroed, i.e. kept in the "
             "denominators as perfect frames.", "",
             "Both pool over all frames of all test utterances. 'MCD with c0' is c0 included with silence left "
             "out; 'MCD with silence' is the speechkit MCD over every frame. Training time is wall-clock time on "
             "the machine of the run's environment line, with whatever else ran there (an upper bound on a "
             "shared machine).", ""]
    for run_dir in runs:
        lines += [f"## Run `{run_dir.name}`", ""]
        header = markdown_header(read_runs(run_dir / "runs.jsonl"))
        lines += [re.sub(r"^## ", "### ", header, flags=re.M).rstrip(), ""]
        for sdir in sorted(p for p in run_dir.iterdir() if (p / "speaker.json").is_file()):
            lines += speaker_lines(sdir.name, sdir)
        lines += latency_lines(run_dir)
        lines += analysis_lines(run_dir)
    lines += parameter_lines()
    text = "\n".join(lines).rstrip() + "\n"
    with atomic_write(out_md) as f:
        f.write(text)
    return text


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
