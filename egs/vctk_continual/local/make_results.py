#!/usr/bin/env python3
"""The results of egs/vctk_continual: collect the score files of a setup, render RESULTS.md from them.

  local/make_results.py --collect results/NAME --datadir data --expdir exp [--tts-model musa_rnn]
                        [--corpus mini] [--buffer-size 5] [--verifier exp/embed/verifier.txt]
  local/make_results.py --render RESULTS.md --results results

--collect (run.sh stage 8) copies, for every scored run of EXPDIR/<tts-model>/continual/<run>/order<o>/,
the small machine-readable files the tables are made from into results/NAME/ (replacing what was there):

    runs.jsonl                       the run.sh invocations of this setup (EXPDIR/runs.jsonl: command
                                     lines, environment, config hashes)
    NOTES.md                         (kept as it was: written by hand)
    setup.json                       corpus, base TTS, speakers, the verifier's classes and held-out
                                     accuracy, theta_init's best validation epoch
    <run>/order<o>/scores.json       speechkit-score-continual: order, accuracy matrix a_{l,i}, RA_l
                                     (eq. 1), FG_l (eq. 2), the verifier's accuracy per episode
    <run>/order<o>/last_episode.json the last episode's evaluation (classes, every synthesized
                                     utterance's verified speaker: Figure 4, the collapse share)
    <run>/order<o>/train.json        per episode: initial weights, training and validation speakers,
                                     utterances, epochs, updates, wall-clock training seconds
    <run>/order<o>/plan.json         the run's plan (exp plan.json without its training settings): strategy,
                                     the speaker order used, how it was made (order_design: row K of the
                                     Williams design, or drawn from the seed), seed, N_B, K, lambda
    ewc_grid.json                    EWC's lambda chosen on dev (local/ewc_grid.py, run.sh --ewc_lambda_grid),
                                     when EXPDIR/<tts-model>/continual/ewc_grid.json exists

--render reads only RESULTS/*/ (so RESULTS.md can be regenerated from a clean clone) and writes
RESULTS.md: per setup, the provenance header (speechkit.results), the strategy comparison (final RA/FG,
mean +/- standard deviation over speaker orders), RA/FG after every episode, ER buffer sizes (the
paper's Table 3), paired comparisons over the orders with 95 % t-intervals (each with the number n of
orders it rests on) and a verdict, the EWC lambda grid on dev, and figures in RESULTS/NAME/figures/
(Figure 3 curves, ER buffer sizes, last-episode confusion matrices); the tables, and the verdicts'
rule, are local/continual_tables.py's. Results collected before plan.json was copied (no order design
recorded) render with their orders as drawn from the seed, which every run did then.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import soundfile as sf

from continual_tables import Setup, render_setup
from speechkit.results import check_page, run_dirs, run_folder, summarize, write_json, write_page
from speechkit.utils.cli import run_main
from speechkit.utils.jsonio import read_json

RENDER_CMD = "python local/make_results.py --render RESULTS.md --results results"
#: how --collect marks the run folders it writes (speechkit.utils.results_io), and the file only it writes there
COLLECT_OWNER = "egs/vctk_continual/local/make_results.py --collect"
RUN_SIGNATURE = ("setup.json",)


# ------------------------------------------------------------------------------------------ collect
def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.is_file() else []


def theta_init_summary(pre: Path) -> dict:
    """theta_init's best validation epoch (all its valid/* metrics) and training budget."""
    info = summarize(pre, detail=True)
    out = {k: info.get(k) for k in ("epochs", "steps", "best_epoch", "train_seconds")}
    if "best_valid" in info:
        out["best_valid"] = info["best_valid"]
    if (pre / "speakers").is_file():
        out["speakers"] = len(_lines(pre / "speakers"))
    return out


def collect(out: Path, datadir: Path, expdir: Path, tts_model: str, corpus: str, buffer_size: int,
            verifier: Path | None) -> int:
    mexp = expdir / tts_model
    cont = mexp / "continual"
    found = []
    for d in sorted(cont.glob("*/order*/eval/scores.json")) if cont.is_dir() else []:
        run, order = d.parents[2].name, d.parents[1].name[len("order"):]
        found.append((run, order, d.parents[1]))
    if not found:
        print(f"{cont}: no scored continual run (stage 7)", file=sys.stderr)
        return 1
    reads = {"--expdir": expdir, "--datadir": datadir, "--verifier": verifier}
    with run_folder(out, owner=COLLECT_OWNER, signature=RUN_SIGNATURE, reads=reads, runs=expdir / "runs.jsonl",
                    option="--collect") as tmp:
        setup = {"corpus": corpus, "tts_model": tts_model, "buffer_size": buffer_size,
                 "continual_speakers": _lines(datadir / "continual_speakers"),
                 "pretrain_speakers": len(_lines(datadir / "pretrain_speakers")),
                 "verifier_extra_speakers": _lines(datadir / "verifier_extra_speakers"),
                 "verifier": (verifier.read_text(encoding="utf-8").splitlines()
                              if verifier is not None and verifier.is_file() else []),
                 "theta_init": theta_init_summary(mexp / "pretrain")}
        write_json(tmp / "setup.json", setup)
        for run, order, src in found:
            dst = tmp / run / f"order{order}"
            scores = read_json(src / "eval" / "scores.json")
            write_json(dst / "scores.json", scores)
            last = src / "eval" / f"episode_{len(scores['order']):02d}.json"
            if last.is_file():
                ep = read_json(last)
                write_json(dst / "last_episode.json", {k: ep[k] for k in ep if k != "inputs"})
            train = []
            for t, spk in enumerate(scores["order"], 1):
                ep_dir = src / f"episode_{t:02d}_{spk}"
                if not (ep_dir / "episode.json").is_file():
                    continue
                rec = read_json(ep_dir / "episode.json")
                train.append({"episode": t, "speaker": spk, "initial_weights": rec.get("initial_weights"),
                              "training_speakers": rec.get("training_speakers"),
                              "valid_speakers": rec.get("valid_speakers", [spk]),
                              "utterances": rec.get("utterances"), "epochs": rec.get("epochs"),
                              "steps": rec.get("steps"), "best_epoch": rec.get("best_epoch"),
                              "train_seconds": round(float(summarize(ep_dir).get("train_seconds", 0.0)), 1)})
            write_json(dst / "train.json", train)
            if (src / "plan.json").is_file():
                write_json(dst / "plan.json", plan_summary(read_json(src / "plan.json")))
        if (cont / "ewc_grid.json").is_file():
            write_json(tmp / "ewc_grid.json", read_json(cont / "ewc_grid.json"))
        copy_audio(tmp, datadir, cont, found, "gl" if tts_model == "tacotron2" else "world")
    print(f"collected {len(found)} scored run(s) x order(s) of {cont} into {out}/", file=sys.stderr)
    return 0


def plan_summary(plan: dict) -> dict:
    """What results/<name>/<run>/order<o>/plan.json keeps of an exp plan.json: strategy, the speaker order used
    and how it was made (``order_design``; a plan written before it was recorded: ``{"design": "seed", "seed":
    seed}``, the only way orders were made then), seed, N_B, K, lambda."""
    extra = plan.get("extra") or {}
    design = extra.get("order_design") or {"design": "seed", "seed": plan.get("seed")}
    return {"strategy": plan.get("strategy"), "order": plan.get("order"), "order_design": design,
            "seed": plan.get("seed"), "buffer_size": plan.get("buffer_size"), "replicate": plan.get("replicate"),
            "ewc_lambda": plan.get("ewc_lambda")}


def copy_audio(out: Path, datadir: Path, cont: Path, found: list, vocoder: str) -> None:
    """To listen to (FLAC, a few tens of kB each): the first test sentence of the first continual
    speaker of the first order, vocoded ground truth and after the last episode of SA and JT."""
    orders = sorted({o for _, o, _ in found}, key=int)
    if not orders:
        return
    o = orders[0]
    for run in ("sa", "jt"):
        ev = cont / run / f"order{o}" / "eval"
        if not (ev / "scores.json").is_file():
            continue
        order = read_json(ev / "scores.json")["order"]
        T, spk = len(order), order[0]
        wavs = sorted((ev / "wav" / f"episode_{T:02d}").glob(f"{spk}__*.wav"))
        if not wavs:
            continue
        (out / "audio").mkdir(exist_ok=True)
        x, sr = sf.read(wavs[0])
        sf.write(out / "audio" / f"{run}_order{o}_episode{T}_{spk}.flac", x, sr, format="FLAC")
        utt = wavs[0].stem.split("__", 1)[1]
        gt = datadir / f"test_{vocoder}" / "wav" / f"{utt}.wav"
        if gt.is_file() and not (out / "audio" / f"groundtruth_{vocoder}_{spk}.flac").is_file():
            x, sr = sf.read(gt)
            sf.write(out / "audio" / f"groundtruth_{vocoder}_{spk}.flac", x, sr, format="FLAC")


# ------------------------------------------------------------------------------------------ render
def render(page: Path, results: Path) -> int:
    check_page(page, option="--render", roots={"--results": results})
    setups = run_dirs(results, "setup.json", first=("mini",))
    if not setups:
        print(f"{results}: no collected setup (run.sh stage 8, or local/make_results.py --collect)", file=sys.stderr)
        return 1
    L = ["# egs/vctk_continual: results", "",
         f"Generated from the tracked score files under `{results.name}/` by `{RENDER_CMD}` "
         "(run.sh stage 8 collects them from `exp/` first). Continual speaker adaptation after Hemati & Borth, "
         "Interspeech 2021; RA (eq. 1) and FG (eq. 2) from the speaker verifier on synthesized test sentences. "
         "Timings: wall clock on the machine of the header, which may have been shared with other jobs.", ""]
    for d in setups:
        L += render_setup(Setup(d), f"{results.name}/{d.name}/figures")
    write_page(page, L)
    print(f"wrote {page} ({', '.join(d.name for d in setups)})", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--collect", metavar="RESULTS/NAME", help="copy the score files of --expdir here")
    g.add_argument("--render", metavar="RESULTS.md", help="write the page from --results")
    ap.add_argument("--results", default="results", help="--render: the collected setups (default: results)")
    ap.add_argument("--datadir", default="data")
    ap.add_argument("--expdir", default="exp")
    ap.add_argument("--tts-model", default="musa_rnn")
    ap.add_argument("--corpus", default="")
    ap.add_argument("--buffer-size", type=int, default=5, help="N_B of the strategy comparison's ER runs")
    ap.add_argument("--verifier", default="", help="the verifier's held-out accuracy (stage 5's verifier.txt)")
    a = ap.parse_args(argv)
    if a.collect:
        return collect(Path(a.collect), Path(a.datadir), Path(a.expdir), a.tts_model, a.corpus, a.buffer_size,
                       Path(a.verifier) if a.verifier else None)
    return render(Path(a.render), Path(a.results))


if __name__ == "__main__":
    sys.exit(run_main("make_results.py", main))  # an error is one line and exit 1
