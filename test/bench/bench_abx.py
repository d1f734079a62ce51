"""Benchmark: across-speaker ABX on TIMIT-sample MFCCs, batched torch DTW vs a per-triplet Python reference.

Both run in this one process on one core (torch.set_num_threads(1)). Features: 13 MFCCs
(kaldi-native-fbank, 25 ms / 10 ms, no dither) of the 80 utterances of ../shared/data/timit_sample;
items: one per phone from the .phn alignments (h#, pau, epi excluded), context = neighbour phones.

The reference (test/unit/scoring/abx_reference.py) computes two DTWs from scratch per triplet in
pure Python loops, as a ZeroSpeech-faithful but unoptimised implementation would; where it runs on
every triplet both scores are printed and must agree to 1e-6 (exit 1 otherwise).

The ZeroSpeech by-context task on this 8-speaker sample has under a thousand triplets, so the
fixed cost of a call dominates there; the "stops" task (/p t k/ tokens, no context constraint,
~150k triplets) and the "nocontext" task (all phones, ~60M triplets, reference extrapolated from
its first --ref-max-triplets) show how both scale on the same features.

Usage:
  python test/bench/bench_abx.py [--tasks zs2019,stops,nocontext] [--distance cosine|kl|hamming]
                                 [--mode across|within] [--ref-max-triplets N] [--skip-ref]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]


def load_reference():
    spec = importlib.util.spec_from_file_location("abx_reference", REPO / "test/unit/scoring/abx_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timit_mfcc_and_alignments(db: Path):
    import kaldi_native_fbank as knf
    import soundfile as sf

    from speechkit.scoring.abx_items import PhoneSegment

    feats, alignments = {}, {}
    for spk_dir in sorted(p for p in db.iterdir() if p.is_dir() and "-" in p.name):
        spk = spk_dir.name.split("-", 1)[1]
        for wav in sorted(spk_dir.glob("*.wav")):
            utt = f"{spk}_{wav.stem}"
            audio, sr = sf.read(wav, dtype="float32")
            opts = knf.MfccOptions()
            opts.frame_opts.dither = 0.0
            opts.frame_opts.samp_freq = sr
            opts.num_ceps = 13
            mfcc = knf.OnlineMfcc(opts)
            mfcc.accept_waveform(sr, (audio * 32768.0).tolist())
            mfcc.input_finished()
            feats[utt] = np.array([mfcc.get_frame(i) for i in range(mfcc.num_frames_ready)], dtype=np.float64)
            segs = []
            for lineno, line in enumerate(wav.with_suffix(".phn").read_text().splitlines(), 1):
                b, e, ph = line.split()
                s, t = int(b) / 16000, int(e) / 16000
                segs.append(PhoneSegment(utt, s, t, ph, repr(s), repr(t), lineno))
            alignments[utt] = segs
    return feats, alignments


def run_task(name, feats, items, mode, distance, ref, ref_max_triplets, repeats):
    from speechkit.scoring.abx import abx_error

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = abx_error(feats, items, mode=mode, distance=distance)
        times.append(time.perf_counter() - t0)
    t_fast = min(times)
    print(f"[{name}] {len(items)} items, {res.n_triplets} triplets, {res.n_cells} cells, "
          f"{res.n_dtw_pairs} DTW pairs, {res.n_items_dropped} items dropped")
    print(f"[{name}] speechkit batched torch DTW: {res.summary()}  in {t_fast:.3f} s (best of {repeats})")
    if ref is None:
        return
    ritems = [dict(file=i.file, onset=i.onset, offset=i.offset, phone=i.phone, context=i.context, speaker=i.speaker)
              for i in items]
    t0 = time.perf_counter()
    err, n = ref.ref_abx(feats, ritems, mode=mode, distance=distance, max_triplets=ref_max_triplets)
    t_ref = time.perf_counter() - t0
    if n < res.n_triplets:
        est = t_ref * res.n_triplets / n
        print(f"[{name}] per-triplet Python reference: {n} triplets in {t_ref:.1f} s -> {est:.0f} s extrapolated "
              f"to all {res.n_triplets} (score on a subset: not compared)")
        print(f"[{name}] speed-up: ~{est / t_fast:.0f}x (extrapolated)")
        return
    print(f"[{name}] per-triplet Python reference:  ABX error ({mode} speakers): {err:.2f} %  in {t_ref:.2f} s")
    print(f"[{name}] |difference| = {abs(err - res.error):.1e} points, triplets {n} vs {res.n_triplets}; "
          f"speed-up: {t_ref / t_fast:.0f}x")
    if n != res.n_triplets or abs(err - res.error) > 1e-6:
        print(f"[{name}] MISMATCH between speechkit and the reference", file=sys.stderr)
        sys.exit(1)


TASKS = ("zs2019", "stops", "nocontext")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=str(REPO.parent / "shared/data/timit_sample"))
    ap.add_argument("--distance", default="cosine", choices=["cosine", "kl", "hamming"])
    ap.add_argument("--mode", default="across", choices=["across", "within"])
    ap.add_argument("--tasks", default="zs2019,stops",
                    help=f"comma-separated, from {','.join(TASKS)}: zs2019 = ZeroSpeech by-context items (all "
                         "phones); stops = /p t k/ with no context constraint (a bigger task on the same data); "
                         "nocontext = all phones, no context constraint (reference extrapolated)")
    ap.add_argument("--ref-max-triplets", type=int, default=20000,
                    help="reference triplets timed for the nocontext task (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="speechkit runs per task, best time kept")
    ap.add_argument("--skip-ref", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from speechkit.scoring.abx import abx_error
    from speechkit.scoring.abx_items import Item, make_abx_items

    t0 = time.perf_counter()
    feats, alignments = timit_mfcc_and_alignments(Path(args.db))
    rows = make_abx_items(alignments, None, exclude_phones=("h#", "pau", "epi"))
    items = [Item(r[0], float(r[1]), float(r[2]), r[3], (r[4], r[5]), r[6], k + 2) for k, r in enumerate(rows)]
    if args.distance == "kl":  # posteriorgram-like input: softmax over the MFCCs
        feats = {u: np.exp(m - m.max(1, keepdims=True)) / np.exp(m - m.max(1, keepdims=True)).sum(1, keepdims=True)
                 for u, m in feats.items()}
    elif args.distance == "hamming":  # one-hot codes: argmax of the MFCCs
        feats = {u: np.eye(m.shape[1])[m.argmax(1)] for u, m in feats.items()}
    print(f"data: {len(feats)} utterances, {sum(len(m) for m in feats.values())} frames, {len(items)} phone items "
          f"({time.perf_counter() - t0:.1f} s to extract MFCCs)")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, distance {args.distance}, mode {args.mode}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    abx_error(feats, items, mode=args.mode, distance=args.distance)  # warm-up (lazy imports, allocator)
    ref = None if args.skip_ref else load_reference()
    for task in args.tasks.split(","):
        if task == "zs2019":
            run_task(task, feats, items, args.mode, args.distance, ref, None, args.repeats)
        elif task == "stops":
            sub = [Item(i.file, i.onset, i.offset, i.phone, (), i.speaker, i.line) for i in items
                   if i.phone in ("p", "t", "k")]
            run_task(task, feats, sub, args.mode, args.distance, ref, None, args.repeats)
        elif task == "nocontext":
            sub = [Item(i.file, i.onset, i.offset, i.phone, (), i.speaker, i.line) for i in items]
            run_task(task, feats, sub, args.mode, args.distance, ref, args.ref_max_triplets, 1)
        else:
            ap.error(f"unknown task {task!r}")


if __name__ == "__main__":
    main()
