#!/usr/bin/env python3
"""The results page of egs/indic_multilingual: RESULTS.md from the tracked score files in results/.

Usage (in egs/indic_multilingual):
  local/make_results.py                      # render RESULTS.md from results/<run>/ (every run there)
  local/make_results.py --collect --exp exp/mini/rnnt_char_wb --data data/mini --lang data/mini/lang_char_wb \
      [--test-sets "test test_unseen_voice"] --run mini [--runs-file exp/mini/runs.jsonl]
                                             # copy an experiment's score files into results/<run>/ first
  local/make_results.py --out FILE           # render to FILE instead (also: --results-dir DIR)

Stage 6 of run.sh does both. --collect copies, for every system under EXP, the scoring JSONs written by
speechkit-score-wer / speechkit-score-lid (decode_<set>*/scoring/{wer,cer,lid}.json), decode_stats.json
(T_avg, RTF), model_info.json, the choices made on dev (blank_penalty.json, checkpoint_avg.json,
switch_off.json, switch_off_posterior.json) and a summary of the training records
(train_summary.json: steps, epochs, best epoch, wall-clock time), plus the hours and utterances of every
set (data.json), per-utterance error counts of every decode (utt_counts.json, for the paired
bootstrap) and the run records (runs.jsonl: command lines, environment, config hashes), into
results/<run>/ (replaced as a whole, but for a hand-written NOTES.md, which is kept: small JSON files
only, tracked in git). Rendering reads only results/, so a clean clone regenerates RESULTS.md without
exp/: per run the provenance header (speechkit.results), the data, the paper's Tables 2-7, Figure 2,
the paired comparisons and the systems (local/indic_tables.py, which lists them).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from indic_tables import render_run
from speechkit.results import (check_page, check_run_name, copy_files, run_dirs, run_folder, summarize, write_json,
                               write_page)
from speechkit.scoring.significance import read_per_utt_counts
from speechkit.utils.cli import run_main

#: Files of an experiment that results/<run>/ keeps (relative to a system dir, or to a decode dir).
SYSTEM_FILES = ("model_info.json", "blank_penalty.json", "checkpoint_avg.json", "switch_off.json",
                "switch_off_posterior.json")
DECODE_FILES = ("decode_stats.json", "scoring/wer.json", "scoring/cer.json", "scoring/lid.json")
#: how --collect marks the run folders it writes (speechkit.utils.results_io), and the file only it writes there
COLLECT_OWNER = "egs/indic_multilingual/local/make_results.py --collect"
RUN_SIGNATURE = ("run.json",)


def read_table(p: Path) -> dict[str, str]:
    """A Kaldi table (``key value...`` lines) as ``{key: rest}``; {} without the file."""
    out = {}
    if p.is_file():
        for line in p.read_text(encoding="utf-8").splitlines():
            parts = line.split(maxsplit=1)
            if parts:
                out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


def data_summary(data: Path, sets: list[str]) -> dict[str, dict[str, list]]:
    """``{set: {language: [hours, utterances]}}`` of each set of ``data`` that exists.

    Hours come from the set's ``utt2num_frames`` (10 ms frames), else from its ``utt2dur``
    (seconds); a language with an utterance in neither gets ``None`` hours (shown as ``-``, never
    as 0). Utterances are counted from ``utt2lang``.
    """
    per: dict[str, dict[str, list]] = {}
    for s in sets:
        if not (data / s / "utt2lang").is_file():
            continue
        u2l = read_table(data / s / "utt2lang")
        if (data / s / "utt2num_frames").is_file():
            secs = {u: int(v) / 100.0 for u, v in read_table(data / s / "utt2num_frames").items()}
        elif (data / s / "utt2dur").is_file():
            secs = {u: float(v) for u, v in read_table(data / s / "utt2dur").items()}
        else:
            secs = {}
        d: dict[str, list] = {}
        for u, lang in u2l.items():
            e = d.setdefault(lang, [0.0, 0])
            e[0] = None if e[0] is None or u not in secs else e[0] + secs[u] / 3600.0
            e[1] += 1
        per[s] = d
    return per


def utterance_counts(exp: Path, test_sets: list[str]) -> dict:
    """Per-utterance error counts of every decode of ``exp``, for the paired bootstrap.

    Read from each decode's ``scoring/per_utt`` and ``scoring/per_utt.char`` (written by
    speechkit-score-wer). Returns ``{set: {"utts": [...], "words": [...], "chars": [...],
    "decodes": {"<system>/<decode dir>": {"wer": [errors or None, ...], "cer": [...]}}}}``, the
    lists aligned with ``utts`` (None: the decode did not cover the utterance). A decode whose
    reference lengths disagree with the set's is left out with a warning.
    """
    out: dict = {}
    by_set: dict[str, list[tuple[str, dict, dict]]] = {}
    for d in sorted(exp.glob("*/decode_*")):
        names = [t for t in test_sets if d.name == f"decode_{t}" or d.name.startswith(f"decode_{t}_")]
        pw, pc = d / "scoring" / "per_utt", d / "scoring" / "per_utt.char"
        if not names or not pw.is_file() or not pc.is_file():
            continue
        t = max(names, key=len)   # decode_test_unseen_voice_* belongs to test_unseen_voice, not test
        by_set.setdefault(t, []).append((f"{d.parent.name}/{d.name}", read_per_utt_counts(pw),
                                         read_per_utt_counts(pc)))
    for t, decodes in by_set.items():
        words: dict[str, int] = {}
        chars: dict[str, int] = {}
        kept = []
        for rel, w, c in decodes:
            if any(words.get(u, n) != n for u, (_, n) in w.items()) or \
                    any(chars.get(u, n) != n for u, (_, n) in c.items()):
                print(f"make_results.py: warning: {rel}: reference lengths differ from the set's; "
                      "left out of the paired comparisons", file=sys.stderr)
                continue
            for u, (_, n) in w.items():
                words[u] = n
            for u, (_, n) in c.items():
                chars[u] = n
            kept.append((rel, w, c))
        utts = sorted(words)
        out[t] = {"utts": utts, "words": [words[u] for u in utts], "chars": [chars.get(u) for u in utts],
                  "decodes": {rel: {"wer": [w[u][0] if u in w else None for u in utts],
                                    "cer": [c[u][0] if u in c else None for u in utts]}
                              for rel, w, c in kept}}
    return out


def collect(exp: Path, data: Path, lang: Path | None, test_sets: list[str], out: Path,
            runs_file: Path | None) -> None:
    """Copy what the tables need from an experiment into ``out`` (replaced as a whole but for a
    hand-written ``out/NOTES.md``, which is kept).

    Raises:
        FileNotFoundError: ``exp`` is not a directory.
    """
    if not exp.is_dir():
        raise FileNotFoundError(2, "no such experiment directory", str(exp))
    reads = {"--exp": exp, "--data": data, "--lang": lang, "--runs-file": runs_file}
    with run_folder(out, owner=COLLECT_OWNER, signature=RUN_SIGNATURE, reads=reads, option="--run",
                    runs=runs_file) as tmp:
        languages = (lang / "languages.txt").read_text().splitlines() \
            if lang is not None and (lang / "languages.txt").is_file() else []
        write_json(tmp / "run.json", {"exp": str(exp), "data": str(data), "test_sets": test_sets,
                                      "languages": [ln.split()[0] for ln in languages if ln.strip()]}, allow_nan=True)
        write_json(tmp / "data.json", data_summary(data, ["train", "train_sp", "dev", *test_sets]), allow_nan=True)
        write_json(tmp / "utt_counts.json", utterance_counts(exp, test_sets), indent=None, allow_nan=True)
        for sysdir in sorted(p for p in exp.iterdir() if p.is_dir()):
            dest = tmp / sysdir.name
            copy_files(sysdir, dest, SYSTEM_FILES)
            if (sysdir / "checkpoints").is_dir():
                write_json(dest / "train_summary.json", summarize(sysdir, "valid/loss"), allow_nan=True)
            for d in sorted(sysdir.glob("decode_*")):
                copy_files(d, dest / d.name, DECODE_FILES)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collect", action="store_true", help="copy --exp's score files into results/<--run> first")
    p.add_argument("--exp", type=Path, help="--collect: the experiment dir (exp/<setup>/rnnt_<unit>)")
    p.add_argument("--data", type=Path, help="--collect: the data dir (data/<setup>)")
    p.add_argument("--lang", type=Path, default=None, help="--collect: units dir (languages.txt gives the column order)")
    p.add_argument("--test-sets", default="test", help="--collect: the sets decoded")
    p.add_argument("--run", help="--collect: the name of the results run (results/<run>)")
    p.add_argument("--runs-file", type=Path, default=None, help="--collect: the runs.jsonl of the experiment")
    p.add_argument("--results-dir", type=Path, default=Path("results"), help="default: results (of the recipe dir)")
    p.add_argument("--out", type=Path, default=Path("RESULTS.md"), help="default: RESULTS.md (of the recipe dir)")
    args = p.parse_args(argv)
    if args.collect:
        missing = [o for o, v in (("--exp", args.exp), ("--data", args.data), ("--run", args.run)) if not v]
        if missing:
            p.error(f"--collect needs {', '.join(missing)}")
        check_run_name(args.run, "--run")
    # the page never replaces what it is made from (speechkit.utils.results_io), checked before the collect
    check_page(args.out, option="--out", roots={"--results-dir": args.results_dir},
               inputs={"--exp": args.exp, "--data": args.data, "--lang": args.lang, "--runs-file": args.runs_file}
               if args.collect else None)
    if args.collect:
        collect(args.exp, args.data, args.lang, args.test_sets.split(), args.results_dir / args.run, args.runs_file)
    runs = run_dirs(args.results_dir, "run.json")
    if not runs:
        p.error(f"{args.results_dir}: no results run (run.json) to render; collect one first (--collect)")
    out = ["# RESULTS: egs/indic_multilingual", "",
           "Generated by `local/make_results.py` from the tracked score files under `results/<run>/` "
           "(`cd egs/indic_multilingual && local/make_results.py` regenerates this page; "
           "`./run.sh` stage 6 collects a run's files from `exp/` first). One section per run: "
           + ", ".join(f"[`{d.name}`](#{d.name})" for d in runs) + ".", ""]
    for d in runs:
        out += render_run(d, args.out.resolve().parent)
    write_page(args.out, out)
    print(f"make_results.py: wrote {args.out} ({', '.join(d.name for d in runs)})")
    return 0


if __name__ == "__main__":
    sys.exit(run_main("make_results.py", main))  # an error is one line and exit 1
