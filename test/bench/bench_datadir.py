"""Benchmark: DataDir validate / fix / split / subset / combine on a large synthetic data dir.

Run: python test/bench/bench_datadir.py [--utts 200000] [--speakers 2000]
Prints wall-clock seconds per operation (not collected by pytest).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from speechkit.data.combine_data import combine
from speechkit.data.datadir import DataDir, Segment
from speechkit.data.fix import fix_data_dir
from speechkit.data.split_data import split
from speechkit.data.subset_data_dir import subset_data_dir
from speechkit.data.validate import validate


def build(path: Path, n_utts: int, n_spk: int, tag: str = "") -> DataDir:
    d = DataDir(wav_scp={}, text={}, segments={}, utt2dur={})
    per = n_utts // n_spk
    for s in range(n_spk):
        spk = f"{tag}spk{s:05d}"
        rec = f"{spk}-rec"
        d.wav_scp[rec] = f"/corpus/{rec}.flac"
        for i in range(per):
            utt = f"{spk}-{i:05d}"
            d.utt2spk[utt] = spk
            d.text[utt] = "the quick brown fox jumps over the lazy dog"
            d.segments[utt] = Segment(rec, 3.0 * i, 3.0 * i + 2.5)
            d.utt2dur[utt] = 2.5
    return d.write(path) and d


def timed(label: str, fn):
    t0 = time.perf_counter()
    out = fn()
    print(f"{label:<40s} {time.perf_counter() - t0:8.2f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--utts", type=int, default=200_000)
    ap.add_argument("--speakers", type=int, default=2_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print(f"{args.utts} utterances, {args.speakers} speakers, with segments")
        timed("write", lambda: build(tmp / "a", args.utts, args.speakers))
        timed("load", lambda: DataDir.load(tmp / "a"))
        problems = timed("validate (no_feats)", lambda: validate(tmp / "a", no_feats=True))
        assert problems == [], problems[:3]
        timed("fix_data_dir (nothing to change)", lambda: fix_data_dir(tmp / "a"))
        text = (tmp / "a" / "text").read_text().splitlines(True)
        (tmp / "a" / "text").write_text("".join(reversed(text[1:])))
        timed("validate (unsorted text, 1 utt missing)", lambda: validate(tmp / "a", no_feats=True))
        timed("fix_data_dir (sort + drop 1)", lambda: fix_data_dir(tmp / "a"))
        timed("split 32 by speaker", lambda: split(tmp / "a", 32))
        timed("split 32 again (reused)", lambda: split(tmp / "a", 32))
        timed("subset 10% at random", lambda: subset_data_dir(tmp / "a", tmp / "s", num=args.utts // 10))
        build(tmp / "b", args.utts // 10, args.speakers // 10, tag="b")
        timed("combine a + b (in memory)", lambda: combine([tmp / "a", tmp / "b"]))


if __name__ == "__main__":
    main()
