#!/usr/bin/env python3
"""Print the speechkit-train override that keeps a warm-up inside the planned training steps.

  python local/plan_warmup.py RESOLVED_CONFIG NUM_ITEMS [--share 0.1] [--what NAME]

RESOLVED_CONFIG: the output of `speechkit-train TASK --config C [overrides] --print-config`.
NUM_ITEMS: training utterances. The planned updates are trainer.max_steps, else
trainer.max_epochs x ceil(NUM_ITEMS / (batch_size x accum_grad)) (with batch_frames > 0, at least
max_epochs: one batch per epoch). A decaying schedule (warmup_linear, warmup_cosine) needs more
updates than trainer.warmup_steps; when it would not get them (a small target voice set: 12
utterances give 40 updates against a 50-update warm-up), the warm-up becomes --share of the
planned updates, a log line on stderr says so, and stdout gets '--trainer.warmup_steps N'.
Otherwise stdout is empty.
"""
import argparse
import math
import sys

import yaml


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("num_items", type=int)
    p.add_argument("--share", type=float, default=0.1, help="warm-up share of the planned updates (default 0.1)")
    p.add_argument("--what", default="training", help="name for the log line")
    a = p.parse_args()
    with open(a.config, encoding="utf-8") as f:
        t = (yaml.safe_load(f) or {}).get("trainer", {})
    if t.get("scheduler") not in ("warmup_linear", "warmup_cosine"):
        return 0
    warmup = int(t.get("warmup_steps", 0))
    if t.get("max_steps", 0) > 0:
        planned = int(t["max_steps"])
    elif t.get("batch_frames", 0) > 0:
        planned = int(t["max_epochs"])  # a lower bound: at least one batch per epoch
    else:
        per_epoch = math.ceil(a.num_items / (int(t["batch_size"]) * int(t.get("accum_grad", 1))))
        planned = int(t["max_epochs"]) * max(1, per_epoch)
    if planned > warmup:
        return 0
    new = max(0, min(planned - 1, int(a.share * planned)))
    print(f"{a.what}: about {planned} planned updates ({a.num_items} utterances), not more than "
          f"trainer.warmup_steps={warmup}: warm-up capped to {new} updates ({100 * a.share:g} % of them)",
          file=sys.stderr)
    print(f"--trainer.warmup_steps {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
