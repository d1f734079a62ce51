#!/usr/bin/env python3
"""Each small model's training settings, chosen on dev MCD (issue 36).

  python local/dev_tuning.py --out results/mini/analysis --speaker sp01 [--dump-dir dump]
      [--exp-dir exp/sp01/dev_tuning] [--max-epochs 40] [--jobs 2] [--settings "musa_rnn_small/s32 ..."]
  python local/dev_tuning.py --out results/msc/analysis --grid msc --speaker "SPK1 SPK2 ..."

Trains every setting of GRID below with ``speechkit-train`` on ``dump/<spk>/train`` for --max-epochs
epochs (run.sh's ``mini`` budget: the same epochs, so the same frames seen and about the same CPU time),
--jobs at a time with one thread each, into ``EXP/<model>_<setting>/``, and reads each run's validation
curve (``metrics.jsonl``: MCD on ``dump/<spk>/dev``, speechkit convention; no test utterance is used).
The setting of each model with the lowest best dev MCD is the one run.sh's ``mini`` default should
use; settings within TIE_DB (0.05 dB) of it are a tie, won by the one with fewer updates (larger
batches: nearer the paper's), then by the lower MCD. A run already finished in EXP is read, not
retrained, once its config.yaml shows it was trained with the setting's values (else an error);
``speechkit-train`` resumes an unfinished one.

The grid, in two steps. 1: the paper's batch (32 streams of 120 frames, sec. 3.3: 8 updates per epoch
on ``mini``) against fewer streams (more, smaller updates over the same frames), each model at its
first rate (MUSA-RNN: the paper's Adam 1e-3; SALAD: Noam with warm-up w a tenth of its updates).
2: at the 4 streams step 1 chose, the rate: MUSA-RNN's constant Adam rate, SALAD's Noam scale (its
peak rate scale * H^-0.5 * w^-0.5 in the table; the paper's scale 1 at w = 4000 peaks at 1.4e-3).
One seed (trainer.seed 0).

``--grid msc`` compares the rates of the tracked real-speech runs (GRID_MSC, 20 epochs) on several
speakers at once, each in ``exp/<spk>/dev_tuning/``, and chooses each model's setting on the mean over
the speakers of their best dev MCDs.

Writes OUT/<name>.{json,md} (--name, default dev_tuning; another name for a run at another budget).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from analysis_common import read_valid_curve, write_outputs

RECIPE = Path(__file__).resolve().parents[1]
TIE_DB = 0.05  # best dev MCDs closer than this are a tie, won by the setting with fewer updates
# SALAD's mini options besides the schedule (README, deviations: embedding scale, dropout)
SALAD_MINI = ["--model.scale_embedding", "true", "--model.ff_dropout", "0.1", "--model.position_dropout", "0.1"]


def salad(streams: int, w: int, scale: float) -> list[str]:
    """SALAD's overrides: ``streams`` streams, Noam warm-up ``w`` updates, scale factor ``scale``.

    Noam's rate is scale * H^-0.5 * min(s^-0.5, s w^-1.5) (paper sec. 3.3), highest at s = w
    (:func:`peak_lr`); the paper's own (scale 1, w = 4000, H = 128) peaks at 1.4e-3.
    """
    return ["--data.num_streams", str(streams), "--trainer.warmup_steps", str(w), "--trainer.lr", str(scale),
            *SALAD_MINI]


GRID = {
    # step 1, the batches (each model at its first rate)
    "musa_rnn_small/s32": ["--data.num_streams", "32"],
    "musa_rnn_small/s4": ["--data.num_streams", "4"],
    "salad_small/s32": salad(32, 32, 0.128),
    "salad_small/s8": salad(8, 128, 0.128),
    "salad_small/s4": salad(4, 256, 0.064),
    "salad_small/s2": salad(2, 512, 0.045),
    # step 2, the rate at 4 streams: MUSA-RNN's constant Adam rate (paper 1e-3), SALAD's Noam peak
    "musa_rnn_small/s4_lr2e-3": ["--data.num_streams", "4", "--trainer.lr", "2e-3"],
    "musa_rnn_small/s4_lr4e-3": ["--data.num_streams", "4", "--trainer.lr", "4e-3"],
    "musa_rnn_small/s4_lr8e-3": ["--data.num_streams", "4", "--trainer.lr", "8e-3"],
    **{f"salad_small/s4_p{p}": salad(4, 256, scale)
       for p, scale in (("7e-4", 0.128), ("1.4e-3", 0.256), ("2.8e-3", 0.512), ("5.7e-3", 1.024), ("1.1e-2", 2.048),
                         ("2.3e-2", 4.096), ("4.5e-2", 8.192))},
}

# msc (run.sh's tracked real-speech runs, 20 epochs, 4 streams, w 800: about a tenth of the updates):
# each model at the paper's rate or the earlier runs' SALAD peak, and at the peak mini's dev chose
GRID_MSC = {
    "musa_rnn_small/s4": ["--data.num_streams", "4"],
    "musa_rnn_small/s4_lr4e-3": ["--data.num_streams", "4", "--trainer.lr", "4e-3"],
    "salad_small/s4_p3.5e-4": salad(4, 800, 0.112),
    "salad_small/s4_p2.3e-2": salad(4, 800, 7.24),
}
GRIDS = {"mini": GRID, "msc": GRID_MSC}


def speechkit_train() -> str:
    """``speechkit-train`` beside this interpreter (the toolkit's venv, path.sh not sourced), else on PATH."""
    here = Path(sys.executable).parent / "speechkit-train"
    found = str(here) if here.is_file() else shutil.which("speechkit-train")
    if not found:
        raise RuntimeError("speechkit-train: not found beside this Python nor on PATH (source path.sh first)")
    return found


def train(setting: str, exp: Path, dump: Path, max_epochs: int, grid: dict[str, list[str]] | None = None) -> Path:
    """One ``speechkit-train`` run of ``setting`` of ``grid`` (default GRID); returns its exp dir.

    Raises:
        RuntimeError: the training failed, or a finished run in its dir has other settings.
    """
    grid = GRID if grid is None else grid
    model, _ = setting.split("/")
    task = model.removesuffix("_small")
    out = exp / setting.replace("/", "_")
    if (out / "checkpoints" / "best.pt").is_file() and (out / "metrics.jsonl").is_file() \
            and curve(out)["epochs"] >= max_epochs:
        check_saved(out, ["--trainer.max_epochs", str(max_epochs), "--trainer.seed", "0", *grid[setting]])
        return out  # finished before with these settings: read, not retrained
    out.mkdir(parents=True, exist_ok=True)
    cmd = [speechkit_train(), task, "--config", str(RECIPE / "conf" / f"train_{model}.yaml"), "--exp-dir", str(out),
           "--data.train_dir", str(dump / "train"), "--data.valid_dir", str(dump / "dev"),
           "--trainer.num_threads", "1", "--trainer.max_epochs", str(max_epochs), "--trainer.seed", "0",
           *grid[setting]]
    with open(out / "dev_tuning.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise RuntimeError(f"{setting}: speechkit-train failed ({rc}); see {out / 'dev_tuning.log'}")
    return out


def check_saved(exp_dir: Path, overrides: list[str]) -> None:
    """Check that the run in ``exp_dir`` was trained with ``overrides`` (``--a.b value`` pairs).

    Raises:
        RuntimeError: ``exp_dir/config.yaml`` is missing or a value differs (naming the key); a
            finished run with other settings is never read as this setting's.
    """
    path = exp_dir / "config.yaml"
    if not path.is_file():
        raise RuntimeError(f"{path}: not found; cannot tell which settings trained {exp_dir}")
    saved = yaml.safe_load(path.read_text()) or {}
    for key, want in zip(overrides[::2], overrides[1::2]):
        section, name = key.removeprefix("--").split(".", 1)
        have = (saved.get(section) or {}).get(name)
        same = str(have).lower() == want.lower()
        if not same:
            try:
                same = float(have) == float(want)
            except (TypeError, ValueError):
                pass
        if not same:
            raise RuntimeError(f"{path}: {key.removeprefix('--')} is {have!r}, this setting has {want!r}; "
                               f"move {exp_dir} aside or give --exp-dir")


def curve(exp_dir: Path) -> dict:
    """The validation MCD per epoch, its best and last values and the update count of a run."""
    c = read_valid_curve(exp_dir)
    mcd = c["valid_mcd"]
    best = min(range(len(mcd)), key=mcd.__getitem__)
    return {**c, "best_mcd": mcd[best], "best_epoch": best + 1, "last_mcd": mcd[-1], "epochs": len(mcd)}


def peak_lr(args: list[str], embed_dim: int = 128) -> float | None:
    """Noam's peak rate scale * H^-0.5 * w^-0.5 (None: not a Noam setting)."""
    if "--trainer.warmup_steps" not in args:
        return None
    w = float(args[args.index("--trainer.warmup_steps") + 1])
    return float(args[args.index("--trainer.lr") + 1]) * embed_dim ** -0.5 * w ** -0.5


def choose(runs: dict[str, dict], tie_db: float = TIE_DB) -> dict[str, str]:
    """Each model's setting: the lowest ``best_mcd``; within ``tie_db`` dB of it, the fewest ``updates``,
    then the lowest ``best_mcd``.

    Args:
        runs: ``"<model>/<setting>" -> {"best_mcd": dB, "updates": int, ...}``.

    Returns:
        ``model -> "<model>/<setting>"``, the models in their first-seen order.
    """
    chosen = {}
    for m in dict.fromkeys(s.split("/")[0] for s in runs):
        mine = {s: r for s, r in runs.items() if s.split("/")[0] == m}
        low = min(r["best_mcd"] for r in mine.values())
        tied = (s for s, r in mine.items() if r["best_mcd"] <= low + tie_db)
        chosen[m] = min(tied, key=lambda s: (mine[s]["updates"], mine[s]["best_mcd"]))
    return chosen


def rate_text(args: list[str], peak: float | None) -> str:
    """The table's rate column: Noam's peak, or the constant Adam rate (the config's 1e-3 unless set)."""
    if peak:
        return f"{peak:.1e}"
    return f"{args[args.index('--trainer.lr') + 1] if '--trainer.lr' in args else '1e-3'} (constant)"


def mean_over_speakers(runs: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """``{speaker: {setting: run}}`` -> ``{setting: {"best_mcd": mean over speakers, "updates": sum}}``."""
    settings = next(iter(runs.values()))
    return {s: {"best_mcd": sum(r[s]["best_mcd"] for r in runs.values()) / len(runs),
                "updates": sum(r[s]["updates"] for r in runs.values())} for s in settings}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="results/<run>/analysis")
    ap.add_argument("--speaker", required=True, help="a speaker, or several (space-separated): chosen on their mean")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="mini", help="the settings to compare (default: mini)")
    ap.add_argument("--dump-dir", default="dump")
    ap.add_argument("--exp-dir", default=None, help="default: exp/<speaker>/dev_tuning (one speaker only)")
    ap.add_argument("--max-epochs", type=int, default=None, help="default: 40 (mini), 20 (msc)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--settings", default=None, help="settings of the grid to run (default: all)")
    ap.add_argument("--name", default="dev_tuning", help="output file name (OUT/<name>.{json,md})")
    args = ap.parse_args(argv)
    grid = GRIDS[args.grid]
    max_epochs = args.max_epochs or {"mini": 40, "msc": 20}[args.grid]
    speakers = args.speaker.split()
    settings = (args.settings or " ".join(grid)).split()
    unknown = [s for s in settings if s not in grid]
    if unknown:
        ap.error(f"--settings: unknown {', '.join(unknown)} (known: {', '.join(grid)})")
    if args.exp_dir and len(speakers) > 1:
        ap.error("--exp-dir: one speaker only (several use exp/<speaker>/dev_tuning each)")
    for spk in speakers:
        for part in ("train", "dev"):
            scp = Path(args.dump_dir) / spk / part / "labels.scp"
            if not scp.is_file():
                ap.error(f"{scp}: not found (run ./run.sh --stop_stage 4 first)")
    jobs = [(spk, s) for spk in speakers for s in settings]

    def one(job):
        spk, s = job
        exp = Path(args.exp_dir or f"exp/{spk}/dev_tuning")
        return train(s, exp, Path(args.dump_dir) / spk, max_epochs, grid)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        dirs = dict(zip(jobs, pool.map(one, jobs)))
    runs = {spk: {s: {"args": grid[s], "peak_lr": peak_lr(grid[s]), **curve(dirs[spk, s])} for s in settings}
            for spk in speakers}
    chosen = choose(runs[speakers[0]] if len(speakers) == 1 else mean_over_speakers(runs))
    models = {s.split("/")[0] for s in settings}
    alone = {m for m in models if sum(s.split("/")[0] == m for s in settings) == 1}  # nothing to choose between
    rows = []
    for s in settings:
        a, first = grid[s], runs[speakers[0]][s]
        mark = " **chosen**" if chosen[s.split("/")[0]] == s and s.split("/")[0] not in alone else ""
        w = a[a.index("--trainer.warmup_steps") + 1] if "--trainer.warmup_steps" in a else "-"
        lr = rate_text(a, first["peak_lr"])
        if len(speakers) == 1:
            rows.append(f"| {s}{mark} | {a[1]} | {first['updates']} | {w} | {lr} | {first['best_mcd']:.2f} | "
                        f"{first['best_epoch']} | {first['last_mcd']:.2f} |")
        else:
            cells = " | ".join(f"{runs[spk][s]['best_mcd']:.2f} ({runs[spk][s]['best_epoch']})" for spk in speakers)
            mean = sum(runs[spk][s]["best_mcd"] for spk in speakers) / len(speakers)
            rows.append(f"| {s}{mark} | {a[1]} | {w} | {lr} | {cells} | {mean:.2f} |")
        print(rows[-1])
    rule = (f"Chosen: the lowest best dev MCD{' (mean over the speakers)' if len(speakers) > 1 else ''}; within "
            f"{TIE_DB} dB a tie, won by fewer updates, then by the lower MCD.")
    if args.grid == "mini":
        title = ("#### Training settings chosen on dev (`mini`)" if args.name == "dev_tuning"
                 else f"#### Dev MCD at {max_epochs} epochs (`{args.name}`)")
        text = (f"Speaker `{args.speaker}`, {max_epochs} epochs each, validation MCD on `dev` (speechkit "
                "convention) after every epoch; one seed. Streams: data.num_streams (the paper's 32 x 120-frame "
                "batches, sec. 3.3, or fewer, smaller ones over the same frames), then the rate at 4 streams. "
                "MUSA-RNN: Adam at a constant rate (paper 1e-3). SALAD: Noam with warm-up w (a tenth of the updates "
                "of a 40-epoch run) and the peak rate given (the paper's: 1.4e-3), the embedding scaled by sqrt(H), "
                f"dropout 0.1. {rule}")
    else:
        title = "#### Rates chosen on dev (`msc`)"
        text = (f"Speakers {', '.join(f'`{spk[:8]}`' for spk in speakers)}, {max_epochs} epochs each at 4 streams, "
                "best validation MCD on each speaker's `dev` (speechkit convention; epoch in brackets); one seed. "
                "Each model at the paper's rate (MUSA-RNN: Adam 1e-3) and at the peak rate `mini`'s dev chose for "
                "it, or (SALAD) the peak 3.5e-4 of the earlier runs; SALAD: Noam with w about a tenth of the "
                f"updates, the embedding scaled by sqrt(H), dropout 0.1. {rule}")
    if len(speakers) == 1:
        head = ["| model / setting | streams | updates | w | peak lr | best dev MCD dB | at epoch | last dev MCD dB |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
    else:
        head = ["| model / setting | streams | w | peak lr | " + " | ".join(f"`{spk[:8]}` dB" for spk in speakers)
                + " | mean dB |", "|---|---:|---:|---:|" + "---:|" * (len(speakers) + 1)]
    md = "\n".join([title, "", text, "", *head, *rows])
    data = {"speakers": speakers, "grid": args.grid, "max_epochs": max_epochs, "chosen": chosen,
            "runs": runs if len(speakers) > 1 else runs[speakers[0]]}
    if len(speakers) == 1:
        data["speaker"] = speakers[0]
    write_outputs(args.out, args.name, data, md)
    return 0

if __name__ == "__main__":
    sys.exit(main())
