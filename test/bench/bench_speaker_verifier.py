"""Benchmark: GE2E embedding speed and the speaker verifier's accuracy on held-out real speech.

Hemati & Borth (2021), section 2.3: the verifier (a linear classifier on speaker embeddings) is
trained on ground-truth utterances passed through the vocoder and "always reaches an accuracy
above 99% after only 15 epochs" (the paper does not say on which utterances that accuracy is
measured). This script measures it on held-out utterances of the msc_malayalam crowd speakers
with at least 20 recordings (vote >= 0, an unvoted "default" row counting as 0, as the preparer does: 11
speakers in the shipped copy; 10 when only integer votes count, as ../shared/notes/tts-data.md does):

* per speaker a pool of at most --test + --max-train utterances is drawn (seeded); --splits times
  (default 10), --test utterances (default 5) per speaker are held out and the rest of the pool
  trains the verifier; the accuracy is reported as mean (min-max) over the splits;
* "raw": embeddings of the original audio (train and test);
* "world": train and test audio both passed through WORLD analysis-synthesis at 16 kHz
  (``WorldFrontend(conf).compute`` then ``world_synthesize``, conf/world.yaml unless --f0-method);
* "world->raw": verifier trained on WORLD audio, tested on the raw audio (for information);
* embedding time per second of audio on one core (preprocessing + model, audio already decoded).

Not collected by pytest. Usage:
  OMP_NUM_THREADS=1 python test/bench/bench_speaker_verifier.py [--db-root ../shared/data] [--max-train 40]
      [--splits 10] [--cache emb.npz]   (--cache: reuse/save the embeddings; about 15 min without it)
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db-root", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--min-recordings", type=int, default=20)
    p.add_argument("--test", type=int, default=5, help="held-out utterances per speaker")
    p.add_argument("--max-train", type=int, default=40, help="at most this many training utterances per speaker")
    p.add_argument("--f0-method", default=None, choices=("harvest", "dio"), help="override conf/world.yaml")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--splits", type=int, default=10, help="random held-out splits of each speaker's pool")
    p.add_argument("--cache", default=None, help="npz of embeddings to reuse (written if absent)")
    p.add_argument("--C", type=float, default=None, help="verifier C (default: the class default)")
    args = p.parse_args()
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)

    from speechkit.data.corpora.msc_malayalam import prepare_msc_malayalam
    from speechkit.data.datadir import iter_audio, subset
    from speechkit.features.frontends import build_frontend
    from speechkit.features.world import world_synthesize
    from speechkit.models.speaker_encoder import SpeakerEncoder, UtteranceTooShortError
    from speechkit.scoring.speaker_verification import SpeakerVerifier

    corpus = Path(args.db_root) / "msc_malayalam"
    with tempfile.TemporaryDirectory() as tmp:
        d = prepare_msc_malayalam(corpus, Path(tmp) / "crowd", subset="crowd", min_vote=0)
    spk2utt = {s: u for s, u in d.spk2utt.items() if len(u) >= args.min_recordings}
    rng = np.random.default_rng(args.seed)
    pool: dict[str, list[str]] = {}
    for spk, utts in spk2utt.items():
        pool[spk] = sorted(utts[i] for i in rng.permutation(len(utts))[:args.test + args.max_train])
    n_pool = sum(len(v) for v in pool.values())
    print(f"speakers with >= {args.min_recordings} recordings (vote >= 0): {len(spk2utt)}; pool of {n_pool} "
          f"utterances (<= {args.test + args.max_train} per speaker), {args.test} per speaker held out "
          f"in each of {args.splits} splits")

    conf = yaml.safe_load((REPO / "conf" / "world.yaml").read_text())
    if args.f0_method:
        conf["f0_method"] = args.f0_method
    emb: dict[str, dict[str, np.ndarray]] = {"raw": {}, "world": {}}
    if args.cache and Path(args.cache).is_file():
        z = np.load(args.cache)
        for kind in emb:
            emb[kind] = dict(zip(z[f"{kind}_keys"].tolist(), z[f"{kind}_emb"]))
        print(f"embeddings read from {args.cache}")
    else:
        import soxr

        world = build_frontend(conf, source="conf/world.yaml")
        enc = SpeakerEncoder()
        enc.embed(np.random.default_rng(0).standard_normal(16000 * 2).astype(np.float32) * 0.1, 16000)  # warm-up
        skipped = {"raw": 0, "world": 0}
        t_embed = audio_s = t_world = 0.0
        sub = subset(d, [u for v in pool.values() for u in v])
        sub.path = d.path
        for n, (utt, x, sr) in enumerate(iter_audio(sub), 1):
            t0 = time.perf_counter()
            try:
                emb["raw"][utt] = enc.embed(x, sr, key=utt)
            except UtteranceTooShortError:
                skipped["raw"] += 1
            t_embed += time.perf_counter() - t0
            audio_s += len(x) / sr
            t0 = time.perf_counter()
            x16 = soxr.resample(x, sr, 16000, quality="HQ") if sr != 16000 else x
            y = world_synthesize(world.compute(x16), 16000, world)
            t_world += time.perf_counter() - t0
            try:
                emb["world"][utt] = enc.embed(y, 16000, key=utt)
            except UtteranceTooShortError:
                skipped["world"] += 1
            if n % 50 == 0:
                print(f"  {n}/{n_pool} utterances", file=sys.stderr, flush=True)
        print(f"audio: {audio_s / 60:.1f} min; embedding time per second of audio (1 core, audio decoded): "
              f"{1000 * t_embed / audio_s:.2f} ms/s ({audio_s / t_embed:.0f}x real time); "
              f"WORLD analysis-synthesis ({conf['f0_method']}): {t_world / audio_s:.3f} s/s")
        print(f"skipped as too short (< {enc.min_speech} s of speech): raw {skipped['raw']}, world {skipped['world']}")
        if args.cache:
            np.savez(args.cache, **{f"{k}_keys": np.array(list(v)) for k, v in emb.items()},
                     **{f"{k}_emb": np.stack(list(v.values())) for k, v in emb.items()})

    kw = {} if args.C is None else {"C": args.C}
    for tr_kind, te_kind in (("raw", "raw"), ("world", "world"), ("world", "raw")):
        accs, worst = [], {}
        for split in range(args.splits):
            srng = np.random.default_rng([args.seed, split])
            tr, te = [], []
            for spk, utts in pool.items():
                perm = [utts[i] for i in srng.permutation(len(utts))]
                te += [u for u in perm[:args.test] if u in emb[te_kind]]
                tr += [u for u in perm[args.test:] if u in emb[tr_kind]]
            v = SpeakerVerifier(**kw).fit(np.stack([emb[tr_kind][u] for u in tr]), [d.utt2spk[u] for u in tr])
            x = np.stack([emb[te_kind][u] for u in te])
            y = [d.utt2spk[u] for u in te]
            accs.append(v.accuracy(x, y))
            for s, a in v.accuracy_per_speaker(x, y).items():
                worst[s] = worst.get(s, 0.0) + a / args.splits
        w = min(worst, key=worst.get)
        print(f"verifier trained on {tr_kind:5s}, tested on {te_kind:5s}: held-out accuracy "
              f"{100 * np.mean(accs):.1f} % (min {100 * min(accs):.1f}, max {100 * max(accs):.1f} over "
              f"{args.splits} splits of {len(te)} utterances; worst speaker {w[:8]}: {100 * worst[w]:.0f} %)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NUMBA_CACHE_DIR", "/tmp/numba_cache")
    sys.exit(main())
