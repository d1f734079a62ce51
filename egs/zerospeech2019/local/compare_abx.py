#!/usr/bin/env python3
"""Paired comparisons of systems already scored by stage 6: difference of no-context across-speaker ABX
error with a paired 95 % speaker-bootstrap interval, as a Markdown table.

  local/compare_abx.py --expdir exp_local --out exp_local/COMPARISONS.md \\
      "vqvae_tr_k128_logmel=vqvae_tr_k128" "vqvae_tr_k128 (z)=baseline_mfcc_cmvn" ...

Each comparison is 'SYSTEM=REFERENCE'; a name is a tag under EXPDIR (its scores/) or 'tag (z)' (its
scores_aux/, the continuous z of run.sh --aux_units true); a name with a '/' is a path to a system's
folder (exp_local_sp/<tag>). A system's features and item file are those
its scores/abx_nocontext_across.json names (what stage 6 scored); both systems of a comparison must have
been scored on one item file (the same file or the same content). Each system is scored once (about 6 s for 2800 items on one core),
then speechkit.scoring.abx.paired_bootstrap_difference draws the same speaker resamples for both:
the speaker sampling they share cancels, which the unpaired intervals of RESULTS.md do not allow for.
A difference whose interval excludes 0 is a gain or a loss beyond speaker-sampling noise (the training
run's own seed-to-seed variation is not in it).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from speechkit.scoring.abx import abx_error, paired_bootstrap_difference
from speechkit.scoring.abx_items import read_item_file
from speechkit.scoring.feature_dir import load_item_features, resolve_frame_shift
from speechkit.utils.cli import make_parser, run_main
from speechkit.utils.fileio import DataError, atomic_write

SCORE = "abx_nocontext_across.json"


def _scores_json(expdir: Path, name: str) -> Path:
    tag, aux = (name[:-4].strip(), True) if name.endswith("(z)") else (name, False)
    path = (Path(tag) if "/" in tag else expdir / tag) / ("scores_aux" if aux else "scores") / SCORE
    if not path.is_file():
        raise DataError(f"{name}: no {path} (run stage 6 of that system first)")
    return path


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog="compare_abx.py")
    parser.add_argument("comparisons", nargs="+", metavar="SYSTEM=REFERENCE")
    parser.add_argument("--expdir", required=True, help="the experiments folder (exp, exp_local ...)")
    parser.add_argument("--out", required=True, help="the Markdown table to write (also OUT with .json)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the resampling (default: %(default)s)")
    args = parser.parse_args(argv)

    def body() -> int:
        expdir = Path(args.expdir)
        pairs = []
        for c in args.comparisons:
            pair = tuple(p.strip() for p in c.split("="))
            if len(pair) != 2 or not all(pair):
                raise ValueError(f"comparison '{c}' is not SYSTEM=REFERENCE")
            pairs.append(pair)
        meta = {n: json.loads(_scores_json(expdir, n).read_text(encoding="utf-8")) for p in pairs for n in p}
        for s, r in pairs:
            a, b = Path(meta[s]["item_file"]), Path(meta[r]["item_file"])
            if a != b and a.read_bytes() != b.read_bytes():
                raise DataError(f"'{s}' was scored on {meta[s]['item_file']}, '{r}' on {meta[r]['item_file']}")
        items_cache: dict = {}
        results: dict = {}

        def result(name: str):
            if name not in results:
                m = meta[name]
                if m["item_file"] not in items_cache:  # systems compared share one item file: read it once
                    items_cache[m["item_file"]] = read_item_file(m["item_file"])
                items = items_cache[m["item_file"]]
                feats = load_item_features(m["feature_dir"], items, m["item_file"])
                results[name] = abx_error(feats, items, mode="across", distance=m["distance"],
                                          frame_shift=resolve_frame_shift(m["feature_dir"], None),
                                          normalize=m["normalize"], empty_items=m.get("empty_items", "overlap"),
                                          source=m["item_file"])
                if abs(results[name].error - m["error"]) > 1e-6:
                    raise DataError(f"{name}: rescored {results[name].error:.4f} % but {_scores_json(expdir, name)} "
                                    f"says {m['error']:.4f} % (features changed since stage 6?)")
                print(f"scored {name}: {results[name].error:.2f} %", file=sys.stderr)
            return results[name]

        rows = []
        for s, r in pairs:
            d = paired_bootstrap_difference(result(s), result(r), args.bootstrap, args.seed)
            verdict = ("better" if d.high < 0 else "worse") + " beyond noise" if d.significant else "within noise"
            rows.append({"system": s, "reference": r, "system_error": result(s).error,
                         "reference_error": result(r).error, **d.to_dict(), "verdict": verdict})
        lines = [f"Paired comparisons, no-context ABX across speakers (%), {args.bootstrap} speaker resamples "
                 f"(seed {args.seed}); difference = system - reference (negative: the system is better).", "",
                 "| system | reference | system | reference | difference [95 % paired interval] | verdict |",
                 "|---|---|---:|---:|---:|---|"]
        for row in rows:
            lines.append(f"| {row['system']} | {row['reference']} | {row['system_error']:.2f} | "
                         f"{row['reference_error']:.2f} | {row['difference']:+.2f} [{row['low']:+.2f}, "
                         f"{row['high']:+.2f}] | {row['verdict']} |")
        out = Path(args.out)
        with atomic_write(out) as f:
            f.write("\n".join(lines) + "\n")
        with atomic_write(out.with_suffix(".json")) as f:
            json.dump(rows, f, indent=2)
            f.write("\n")
        print("\n".join(lines))
        return 0

    return run_main("compare_abx.py", body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
