#!/usr/bin/env python3
"""Does SALAD fit a fixed batch more slowly than the RNN? Both trained on one batch, again and again.

  python local/fixed_batch_fit.py --out results/msc/analysis --speaker storyreader [--dump-dir dump]
      [--steps 300] [--seed 0] [--salad-args "trainer.warmup_steps=240 trainer.lr=0.35"]

The first stateful training batch of the speaker (window 0 of the data.num_streams streams, 32 x 120
frames) is fed to freshly initialised SALAD small and MUSA-RNN small for --steps updates, each with
its recipe schedule (conf/train_{salad,musa_rnn}_small.yaml; SALAD with the recipe's CPU Noam
schedule, --salad-args), the RNN from zero state every time (no carried state: the batch does not
continue). The training MSE on that batch (normalised targets) is recorded after every update. A
model that needs more updates to fit the same batch learns more slowly per update, which at a fixed
budget of updates leaves it further from its optimum; it says nothing about where each converges.

Writes OUT/fixed_batch_fit.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from analysis_common import write_outputs
from speechkit.tasks import get_task
from speechkit.train.schedulers import StepSchedule
from speechkit.train.trainer import build_optimizer
from speechkit.utils.config import load_config

RECIPE = Path(__file__).resolve().parents[1]
CHECKPOINTS = (10, 25, 50, 100, 200, 300, 500, 1000)


def fit(task_name: str, conf: Path, overrides: list[str], steps: int, seed: int) -> dict:
    task = get_task(task_name)
    cfg = load_config(task.Config, conf, overrides)
    torch.manual_seed(seed)
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    batch = task.collate([train[i] for i in train.batches()[0]])
    x, y = batch["labels"], batch["feats"]
    tc = cfg.trainer
    opt = build_optimizer(model, tc)
    sched = StepSchedule(opt, tc.scheduler, tc.warmup_steps, tc.model_dim, max(steps, tc.warmup_steps + 1),
                         tc.min_lr)
    model.train()
    losses = []
    c0 = time.process_time()
    for _ in range(steps):
        pred = model(x, offset=0) if task_name == "salad" else model(x, None)[0]
        loss = torch.nn.functional.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        if tc.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return {"losses": losses, "batch_shape": list(x.shape), "cpu_s": time.process_time() - c0,
            "overrides": overrides}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="results/<run>/analysis")
    ap.add_argument("--speaker", required=True)
    ap.add_argument("--dump-dir", default="dump")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--salad-args", default="trainer.warmup_steps=240 trainer.lr=0.35",
                    help="config overrides of SALAD (default: the recipe's CPU Noam schedule)")
    args = ap.parse_args(argv)
    if args.steps < 10:
        ap.error("--steps must be >= 10")
    torch.set_num_threads(1)
    train_dir = Path(args.dump_dir) / args.speaker / "train"
    common = [f"data.train_dir={train_dir}", "data.valid_dir="]
    runs = {"musa_rnn_small": fit("musa_rnn", RECIPE / "conf" / "train_musa_rnn_small.yaml", common, args.steps,
                                  args.seed),
            "salad_small": fit("salad", RECIPE / "conf" / "train_salad_small.yaml",
                               common + args.salad_args.split(), args.steps, args.seed)}
    at = [s for s in CHECKPOINTS if s <= args.steps]
    rnn_final = runs["musa_rnn_small"]["losses"][-1]
    rows = []
    for m, r in runs.items():
        loss = np.array(r["losses"])
        reach = np.nonzero(loss <= rnn_final)[0]
        r["first_step_at_rnn_final_loss"] = int(reach[0]) + 1 if reach.size else None
        r["loss_at"] = {str(s): float(loss[s - 1]) for s in at}
        rows.append(f"| {m} | " + " | ".join(f"{loss[s - 1]:.4f}" for s in at)
                    + f" | {r['first_step_at_rnn_final_loss'] or f'> {args.steps}'} | {r['cpu_s']:.0f} s |")
        print(rows[-1])
    md = "\n".join([
        "#### Fitting one fixed batch", "",
        f"Speaker `{args.speaker}`, the first stateful batch "
        f"({' x '.join(map(str, runs['salad_small']['batch_shape'][:2]))} "
        f"frames), {args.steps} updates from a fresh initialisation (seed {args.seed}); training MSE on that batch "
        f"(normalised targets) after update n; SALAD with `{args.salad_args}`. One seed.", "",
        "| model | " + " | ".join(f"n = {s}" for s in at) + " | first update at the RNN's final loss | CPU |",
        "|---|" + "---:|" * (len(at) + 2), *rows])
    write_outputs(args.out, "fixed_batch_fit", {"speaker": args.speaker, "steps": args.steps, "seed": args.seed,
                                                "salad_args": args.salad_args, "models": runs}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
