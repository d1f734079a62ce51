#!/usr/bin/env python3
"""The results of egs/zerospeech2019: a report over every experiment in EXPDIR, and the tracked results.

  local/make_results.py --expdir exp --datadir data [--corpus NAME] --out exp/RESULTS.md
      every EXPDIR/<tag>/scores/ holding abx_across.json (written by run.sh stage 6) in one Markdown
      report, untracked: VQ-VAE systems (EXPDIR/<tag>/vqvae/config.yaml, metrics.jsonl, wallclock;
      units/test/units.yaml; resynth/test/) and the feature baselines (EXPDIR/baseline_*); also
      EXPDIR/results.json (the table as data) and EXPDIR/abx_bitrate.png (ABX against bitrate). Links in
      the report are relative to its own location.

  local/make_results.py --collect results/NAME --expdir exp --datadir data --corpus C --tag TAG \
      [--reference baseline_mfcc ...]
      copy the small score files of one run (run.sh stage 6 does it) from EXPDIR into results/NAME/,
      replacing it whole: the experiment TAG and each --reference experiment, in EXPDIR's layout
      (<tag>/scores/*.json, scores_aux/*.json without the per-phone-pair breakdown, which stays in
      EXPDIR; vqvae/config.yaml and the epoch lines of metrics.jsonl, wallclock; units/*/units.yaml;
      the inverter's; comparisons.{md,json} of local/compare_abx.py), test_set.json (the test set's size
      and the SHA-256 of its item file) and runs.jsonl (every run.sh invocation of TAG). A NOTES.md written
      by hand in results/NAME/ is kept.

  local/make_results.py --render [RESULTS.md] [--results results]
      RESULTS.md from results/*/ alone (no EXPDIR needed: a clean clone regenerates it): per run, the
      provenance header (environment, commands, config hashes; speechkit.results), the ABX / bitrate
      table, the training table and the paired comparisons (tables: local/zerospeech_tables.py).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from speechkit.results import check_page, copy_file, provenance, run_dirs, run_folder, write_json, write_page
from speechkit.utils.cli import make_parser, run_main
from speechkit.utils.fileio import DataError
from speechkit.utils.jsonio import read_json
from zerospeech_tables import (comparisons_table, plot, read_rows, report, score_table, test_set_info,
                               training_table, triplet_counts)

#: how --collect marks the run folders it writes (speechkit.utils.results_io), and the file only it writes there
COLLECT_OWNER = "egs/zerospeech2019/local/make_results.py --collect"
RUN_SIGNATURE = ("test_set.json",)
#: per-phone-pair breakdowns of the ABX JSONs: 100-200 kB each, left in exp/ (the table needs the totals)
_BULKY_KEYS = ("by_phone_pair",)


# ----------------------------------------------------------------------------- tracked results
def _portable(value, base: Path):
    """A path string under ``base`` made relative to it (the tracked JSONs should not name this machine's tree)."""
    if isinstance(value, str) and os.path.isabs(value):
        try:
            return os.path.relpath(value, base) if Path(value).resolve().is_relative_to(base.resolve()) else value
        except ValueError:
            return value
    return value


def _copy_scores(src: Path, dst: Path, base: Path) -> None:
    """Copy src/*.json (the files of local/score.sh) into dst without the bulky keys."""
    for f in sorted(src.glob("*.json")):
        j = read_json(f, expect=dict)
        write_json(dst / f.name, {k: _portable(v, base) for k, v in j.items() if k not in _BULKY_KEYS}, indent=2,
                   allow_nan=True, ensure_ascii=False)


def _copy_training(src: Path, dst: Path) -> None:
    """The resolved config, the epoch lines of metrics.jsonl and the wall clock of a speechkit-train dir."""
    copy_file(src / "config.yaml", dst / "config.yaml")
    copy_file(src / "wallclock", dst / "wallclock")
    metrics = src / "metrics.jsonl"
    if metrics.is_file():
        dst.mkdir(parents=True, exist_ok=True)
        lines = [ln for ln in metrics.read_text(encoding="utf-8").splitlines() if '"kind": "epoch"' in ln]
        (dst / "metrics.jsonl").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")


def collect_run(expdir: Path, datadir: Path, corpus: str, tag: str, references: list[str], out: Path) -> Path:
    """Copy the small files behind one run's tables from ``expdir`` into ``out`` (replaced whole, but for a
    hand-written ``out/NOTES.md``; speechkit.results.run_folder checks ``out`` before anything is written).

    Raises:
        DataError: ``expdir/tag`` (or a reference) has no scores/abx_across.json (stage 6 not run).
        OutputOverlapError: ``out`` is, holds or lies inside ``expdir`` or ``datadir``, holds another run's
            folder, or is an existing folder that no collect made.
    """
    base = Path.cwd()
    with run_folder(out, owner=COLLECT_OWNER, signature=RUN_SIGNATURE, reads={"--expdir": expdir,
                    "--datadir": datadir}, runs=expdir / tag / "runs.jsonl", option="--collect") as tmp:
        for name in [tag, *references]:
            src = expdir / name
            if not (src / "scores" / "abx_across.json").is_file():
                raise DataError(f"{src}: no scores/abx_across.json (run stage 6 first)")
            _copy_scores(src / "scores", tmp / name / "scores", base)
            _copy_scores(src / "scores_aux", tmp / name / "scores_aux", base)
            for units in ("test", "test_aux", "voice"):
                u = src / "units" / units / "units.yaml"
                if copy_file(u, tmp / name / "units" / units / "units.yaml") and units == "test":
                    data_dir = (yaml.safe_load(u.read_text(encoding="utf-8")) or {}).get("data_dir")
                    if data_dir:  # the input features' type (k-means units)
                        copy_file(Path(data_dir) / "feats.yaml", tmp / name / "units" / units / "feats.yaml")
        vq = expdir / tag / "vqvae"
        _copy_training(vq, tmp / tag / "vqvae")
        if (vq / "config.yaml").is_file():  # the input features' type (the dump dir is not tracked)
            train_dir = (yaml.safe_load((vq / "config.yaml").read_text(encoding="utf-8")) or {}).get(
                "data", {}).get("train_dir")
            if train_dir:
                copy_file(Path(train_dir) / "feats.yaml", tmp / tag / "vqvae" / "feats.yaml")
        for inv in sorted(p for p in (expdir / tag).glob("inverter*") if p.is_dir() and not p.name.endswith(".stale")):
            _copy_training(inv, tmp / tag / inv.name)
        for f in ("comparisons.md", "comparisons.json"):
            copy_file(expdir / tag / f, tmp / tag / f)
        write_json(tmp / "test_set.json", {"corpus": corpus, "tag": tag, "references": references,
                                           "data_dir": _portable(str(datadir.resolve()), base),
                                           **test_set_info(datadir)}, indent=2)
    return out


def render(results: Path) -> list[str]:
    """RESULTS.md's lines from every ``results/<run>/`` holding a test_set.json (nothing else is read).

    Raises:
        DataError: no run under ``results``.
    """
    runs = run_dirs(results, "test_set.json", first=("mini", "local"))
    if not runs:
        raise DataError(f"{results}: no <run>/test_set.json (run.sh stage 6 writes them)")
    lines = ["# egs/zerospeech2019: RESULTS", "",
             f"Generated by `local/make_results.py --render` from the tracked score files under `{results}/` "
             "(one folder per run; `run.sh` stage 6 copies them there from `exp/`). Runs: "
             + ", ".join(f"[{d.name}](#{d.name.lower()})" for d in runs) + ".", "",
             "ABX error in % (lower is better): DTW over the frame-wise angular (cosine) distance; *by context* is the "
             "ZeroSpeech 2019 task (A, B, X share the phone context), *no ctx* drops the context constraint (many "
             "more triplets), with its 95 % interval from resampling the test speakers (1000 resamples; n/a with two "
             "test speakers, where it cannot vary). Bitrate: the ZeroSpeech 2019 definition (frames/s x entropy "
             "of the frame symbols; for continuous features every frame is its own symbol). Train times are wall "
             "clock on the machine of the run's Environment table, which may have been running other jobs: they "
             "are not idle timings.", ""]
    for run in runs:
        info = read_json(run / "test_set.json", expect=dict)
        rows = read_rows(run)
        ref, counts = triplet_counts(rows)
        lines += [f"## {run.name}", "",
                  f"Corpus `{info.get('corpus', '?')}`, experiment `{info.get('tag', '?')}`; "
                  f"test set `{info.get('data_dir', '?')}/test`: "
                  f"{info.get('utterances', '?')} utterances, {info.get('speakers', '?')} speakers, "
                  f"{info.get('abx_items', '?')} ABX items (abx.item sha256 {info.get('abx_item_sha256', '?')}); "
                  f"triplets scored ({ref['tag']}): {counts}.", "", provenance(run).rstrip(), "",
                  "### ABX and bitrate", "", *score_table(rows), *training_table(rows),
                  *comparisons_table(run, info.get("speakers", "?")), ""]
    return lines


def main(argv=None) -> int:
    p = make_parser(__doc__, prog="make_results.py")
    p.add_argument("--expdir", help="the experiments folder (the report, --collect)")
    p.add_argument("--datadir", help="the data folder (the report, --collect)")
    p.add_argument("--corpus", default="")
    p.add_argument("--out", help="the report over every experiment of --expdir (e.g. exp/RESULTS.md)")
    p.add_argument("--collect", metavar="RUN_DIR", help="copy the score files of --tag (+ --reference) into RUN_DIR")
    p.add_argument("--tag", help="with --collect: the VQ-VAE experiment of the run")
    p.add_argument("--reference", action="append", default=[], metavar="EXP",
                   help="with --collect: another experiment scored beside it (repeatable): baseline_mfcc, ...")
    p.add_argument("--render", nargs="?", const="RESULTS.md", metavar="PAGE",
                   help="write PAGE (default RESULTS.md) from --results alone")
    p.add_argument("--results", default="results", help="with --render: the folder of runs (default: %(default)s)")
    args = p.parse_args(argv)
    if sum(x is not None for x in (args.out, args.collect, args.render)) != 1:
        p.error("give exactly one of --out (report over --expdir), --collect RUN_DIR, --render [PAGE]")
    if (args.out or args.collect) and not (args.expdir and args.datadir):
        p.error("--out and --collect need --expdir and --datadir")
    if args.collect and not args.tag:
        p.error("--collect needs --tag")

    def body() -> int:
        if args.render is not None:
            check_page(args.render, option="--render", roots={"--results": args.results})
            write_page(args.render, render(Path(args.results)))
            print(f"wrote {args.render} from {args.results}/", file=sys.stderr)
            return 0
        expdir = Path(args.expdir)
        if args.collect:
            out = collect_run(expdir, Path(args.datadir), args.corpus, args.tag, args.reference, Path(args.collect))
            print(f"collected {args.tag} ({', '.join(args.reference) or 'no references'}) into {out}/", file=sys.stderr)
            return 0
        out, png = Path(args.out), expdir / "abx_bitrate.png"
        check_page(out, option="--out", roots={"--expdir": expdir}, inputs={"--datadir": args.datadir},
                   outputs={"EXPDIR/results.json": expdir / "results.json", "EXPDIR/abx_bitrate.png": png})
        rows = read_rows(expdir)
        if not rows:
            raise FileNotFoundError(f"{expdir}: no */scores/abx_across.json (run stage 6 first)")
        text = write_page(out, [report(rows, Path(args.datadir), args.corpus, out, png if plot(rows, png) else None)])
        write_json(expdir / "results.json", rows, indent=2, allow_nan=True, ensure_ascii=False)
        sys.stdout.write(text)
        return 0

    return run_main("make_results.py", body, parser=p)


if __name__ == "__main__":
    sys.exit(main())
