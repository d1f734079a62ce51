#!/usr/bin/env python3
"""Held-out accuracy of the speaker verifier on vocoded ground truth (Hemati & Borth 2021, sec. 2.3).

  local/verifier_accuracy.py TRAIN_EMBED_DIR TEST_EMBED_DIR

Fits speechkit's SpeakerVerifier on every speaker of TRAIN_EMBED_DIR (embeddings.scp + utt2spk of
WORLD-vocoded training audio) and prints its accuracy on TEST_EMBED_DIR, overall and per speaker.
"""
import sys

import numpy as np

from speechkit.continual.evaluation import GroundTruth
from speechkit.scoring.speaker_verification import SpeakerVerifier


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 1
    tr, te = GroundTruth(sys.argv[1]), GroundTruth(sys.argv[2])
    v = SpeakerVerifier().fit(tr.x, tr.speakers)
    per = v.accuracy_per_speaker(te.x, te.speakers)
    acc = v.accuracy(te.x, te.speakers)
    print(f"verifier: {len(set(tr.speakers))} speakers, {len(tr.utts)} vocoded training utterances; "
          f"held-out accuracy {100 * acc:.1f} % on {len(te.utts)} vocoded test utterances")
    worst = sorted(per.items(), key=lambda kv: kv[1])[:5]
    print("lowest per-speaker accuracies: " + ", ".join(f"{s} {100 * a:.0f} %" for s, a in worst))
    return 0 if np.isfinite(acc) else 1


if __name__ == "__main__":
    sys.exit(main())
