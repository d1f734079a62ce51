#!/usr/bin/env python3
"""Per-speaker train/dev/test utterance lists for continual speaker adaptation (egs/vctk_continual).

  local/split_speakers.py [--num-test 5] [--num-dev 3] [--seed 1] DATA OUT_DIR

Each speaker of DATA (utt2spk) gives --num-test utterances to test (the paper synthesizes 5
utterances per speaker after each episode, sec. 2.3), --num-dev to dev (each episode's early
stopping) and the rest to train, drawn reproducibly from --seed. A speaker with fewer than num_test + num_dev + 2 utterances goes
wholly to train (it can only serve pre-training; the recipe never makes it a continual speaker),
and is counted in the log. Writes OUT_DIR/{train,dev,test}.list (utterance ids, C order).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data")
    p.add_argument("out_dir")
    p.add_argument("--num-test", type=int, default=5)
    p.add_argument("--num-dev", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    spk2utts: dict[str, list[str]] = {}
    path = Path(a.data) / "utt2spk"
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        f = line.split()
        if len(f) != 2:
            print(f"{path}:{n}: expected '<utt> <speaker>', got {line!r}", file=sys.stderr)
            return 1
        spk2utts.setdefault(f[1], []).append(f[0])
    parts: dict[str, list[str]] = {"train": [], "dev": [], "test": []}
    train_only = []
    for spk in sorted(spk2utts, key=lambda s: s.encode()):
        utts = sorted(spk2utts[spk], key=lambda s: s.encode())
        if len(utts) < a.num_test + a.num_dev + 2:
            parts["train"] += utts
            train_only.append(spk)
            continue
        random.Random(f"{a.seed}-{spk}").shuffle(utts)
        parts["test"] += utts[:a.num_test]
        parts["dev"] += utts[a.num_test:a.num_test + a.num_dev]
        parts["train"] += utts[a.num_test + a.num_dev:]
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, utts in parts.items():
        (out / f"{name}.list").write_text("".join(u + "\n" for u in sorted(utts, key=lambda s: s.encode())),
                                          encoding="utf-8")
    print(f"{len(spk2utts)} speakers: train/dev/test {len(parts['train'])}/{len(parts['dev'])}/{len(parts['test'])} "
          f"utterances; {len(train_only)} speakers with fewer than {a.num_test + a.num_dev + 2} utterances "
          f"only in train", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
