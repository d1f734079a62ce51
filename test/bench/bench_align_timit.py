"""Forced-alignment accuracy of speechkit-align on the TIMIT sample against the hand labels.

Prepares ``../shared/data/timit_sample`` (8 speakers x 10 utterances, 16 kHz) with the timit
preparer, makes a copy of the data dir whose ``text`` is each utterance's 61-phone TIMIT sequence
(from the ``.phn`` files; boundaries withheld), trains the aligner on the 80 utterances and aligns
them (as ``mfa train`` does), then compares every internal boundary (between two consecutive
phones) with the hand label. Prints the share of boundaries within 10, 20 and 40 ms, the mean
absolute error and the wall time; the target is >= 80 % within 20 ms.

Usage (one core):
  OMP_NUM_THREADS=1 python test/bench/bench_align_timit.py [--corpus DIR] [--work DIR] [--nj N]
      [KEY=VALUE ...]      (aligner config overrides, e.g. frame_shift=0.01 skip=true)
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.data.corpora.timit import prepare_timit
from speechkit.data.datadir import DataDir
from speechkit.align import load_aligner_config, train_aligner

DEFAULT_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "timit_sample"


def boundary_errors(ref: dict, hyp: dict) -> np.ndarray:
    """Absolute errors (s) of the internal boundaries of every utterance in both ``ref`` and ``hyp``.

    The phone sequences must agree (hyp's non-``sil`` labels are the reference phones).
    """
    errs = []
    for utt, r in ref.items():
        if utt not in hyp:
            continue
        h = [s for s in hyp[utt] if s[2] != "sil"] if any(s[2] == "sil" for s in hyp[utt]) else hyp[utt]
        if [p for _, _, p in h] != [p for _, _, p in r]:
            raise ValueError(f"{utt}: aligned phone sequence differs from the reference")
        rb = np.array([s[1] for s in r[:-1]])
        hb = np.array([s[1] for s in h[:-1]])
        errs.append(np.abs(rb - hb))
    return np.concatenate(errs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--work", default=None, help="work dir (default: a temporary one)")
    ap.add_argument("--nj", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the figures here")
    ap.add_argument("overrides", nargs="*", help="aligner config key=value")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    tmp = tempfile.TemporaryDirectory() if args.work is None else None
    work = Path(args.work or tmp.name)
    src = work / "timit"
    prepare_timit(args.corpus, src)
    ref = read_phone_alignments(src / "phone_alignments")
    d = DataDir.load(src)
    d.text = {u: " ".join(p for _, _, p in ref[u]) for u in d.utts}
    d.write(work / "timit_phones")
    config = load_aligner_config(None, ["optional_silence=false", *args.overrides])
    t0 = time.time()
    _, result = train_aligner(work / "timit_phones", work / "exp", config, nj=args.nj)
    wall = time.time() - t0
    result.write(work / "exp")
    err = boundary_errors(ref, result.alignments)
    figures = {
        "utterances": len(result.alignments), "boundaries": int(err.size),
        "within_10ms": float(np.mean(err <= 0.010)), "within_20ms": float(np.mean(err <= 0.020)),
        "within_40ms": float(np.mean(err <= 0.040)), "mean_abs_ms": float(err.mean() * 1000),
        "median_abs_ms": float(np.median(err) * 1000), "wall_s": wall,
        "overrides": args.overrides,
    }
    print(f"TIMIT sample: {figures['utterances']} utterances, {figures['boundaries']} internal boundaries")
    print(f"within 10 ms: {100 * figures['within_10ms']:.1f} %   within 20 ms: {100 * figures['within_20ms']:.1f} %   "
          f"within 40 ms: {100 * figures['within_40ms']:.1f} %")
    print(f"mean absolute error: {figures['mean_abs_ms']:.1f} ms (median {figures['median_abs_ms']:.1f} ms)")
    print(f"train + align wall time: {wall:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
