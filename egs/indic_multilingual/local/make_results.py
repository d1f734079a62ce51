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
(T_avg, RTF), model_info.json, blank_penalty.json and a summary of the training records
(train_summary.json: steps, epochs, best epoch, wall-clock time), plus the hours and utterances of every
set (data.json) and the run records (runs.jsonl: command lines, environment, config hashes), into
results/<run>/ (replaced as a whole: small JSON files only, tracked in git). Rendering reads only
results/, so a clean clone regenerates RESULTS.md without exp/. Systems or decodes that do not exist
are left out. Tables follow the paper (Joshi et al., Interspeech 2021):

  data       hours and utterances per language and set (cf. the paper's Table 1)
  Table 2    monolingual vs vanilla / one-hot / multi-softmax: WER and CER per language, averages,
             WERR/CERR against the monolingual models (the paper's baseline)
  Table 3    multi-softmax and one-hot models fine-tuned to each language
  Table 4    multi-softmax with language-specific prediction networks (LSP)
  Table 5    multi-softmax + LID: oracle language vs LID-free; utterance LID accuracy (vanilla's
             language = the script of its hypothesis)
  Figure 2   multi-softmax with LSP, LID and both (oracle language and LID-free)
  Table 6    parameters: the paper's counts, speechkit's `paper` preset, this run's systems
  Table 7    early switch-off: the recipe's grid (tau in encoder frames, s_th in nats) and the
             paper's (tau in ms, s_th on the running average LID posterior) against T_avg, WER,
             CER and LID accuracy
  systems    parameters (total, used to decode one language), training steps/epochs, wall-clock
             training time, decoding RTF

WERR/CERR are relative reductions of the pooled average WER/CER against the monolingual models'
(Table 2 of the paper); '-' where the monolingual systems were not decoded.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

from speechkit.train.report import training_summary
from speechkit.utils.fileio import atomic_write
from speechkit.utils.outputs import replace_dir
from speechkit.utils.provenance import markdown_header, read_runs

#: Files of an experiment that results/<run>/ keeps (relative to a system dir, or to a decode dir).
SYSTEM_FILES = ("model_info.json", "blank_penalty.json")
DECODE_FILES = ("decode_stats.json", "scoring/wer.json", "scoring/cer.json", "scoring/lid.json")


def load(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fmt(x, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def read_table(p: Path) -> dict[str, str]:
    out = {}
    if p.is_file():
        for line in p.read_text(encoding="utf-8").splitlines():
            parts = line.split(maxsplit=1)
            if parts:
                out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


class Decode:
    """Scores of one decode directory."""

    def __init__(self, d: Path):
        self.dir = d
        self.wer = load(d / "scoring" / "wer.json")
        self.cer = load(d / "scoring" / "cer.json")
        self.lid = load(d / "scoring" / "lid.json")
        self.stats = load(d / "decode_stats.json")

    @property
    def ok(self) -> bool:
        return self.wer is not None and self.cer is not None

    def lang(self, which: str, lang: str) -> float | None:
        j = self.wer if which == "wer" else self.cer
        r = (j or {}).get("per_language", {}).get(lang)
        return r.get("wer") if isinstance(r, dict) and r.get("num_words") else None

    def avg(self, which: str) -> float | None:
        j = self.wer if which == "wer" else self.cer
        return None if j is None else j.get("wer")

    def mean(self, which: str) -> float | None:
        j = self.wer if which == "wer" else self.cer
        return None if j is None else j.get("avg_wer_unweighted")

    def lid_acc(self) -> float | None:
        return None if self.lid is None else self.lid.get("accuracy")


def werr(base: float | None, x: float | None) -> float | None:
    if base is None or x is None or base == 0:
        return None
    return 100.0 * (base - x) / base


def train_info(sysdir: Path) -> dict:
    """Parameters, steps, epochs and wall-clock training time of one experiment dir."""
    info: dict = {}
    mi = load(sysdir / "model_info.json")
    if mi:
        info["params"] = mi["parameters"]["total"]
        info["decode_params"] = {k[len("decode_"):]: v for k, v in mi["parameters"].items() if k.startswith("decode_")}
    summary = load(sysdir / "train_summary.json") or training_summary(sysdir, "valid/loss")
    for key in ("steps", "epochs", "best_epoch", "train_seconds"):
        if key in summary:
            info[key] = summary[key]
    if "best_value" in summary:
        info["best_valid"] = summary["best_value"]
    return info


def _duration(secs: float | None) -> str:
    if secs is None:
        return "-"
    return f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.1f} min"


RECIPE_SWITCH_OFF = re.compile(r"_lidfree_tau(\d+)_s([0-9.]+|inf)$")
PAPER_SWITCH_OFF = re.compile(r"_lidfree_paper_tau(\d+)ms_p([0-9.]+)$")


def switch_off_tables(exp: Path, t: str, num_langs: int) -> list[str]:
    """Table 7: the recipe's switch-off grid and the paper's, each with the plain LID-free row
    (tau = s_th = inf) first. Decode dirs: ``decode_<t>_lidfree_tau<frames>_s<nats>`` (recipe) and
    ``decode_<t>_lidfree_paper_tau<ms>ms_p<posterior>`` (paper)."""
    sysdir = exp / "multisoftmax_lid"
    plain = Decode(sysdir / f"decode_{t}_lidfree")
    recipe, paper = [], []
    for d in sorted(sysdir.glob(f"decode_{t}_lidfree_*")):
        r = Decode(d)
        if not r.ok or r.stats is None:
            continue
        if m := RECIPE_SWITCH_OFF.search(d.name):
            recipe.append(((int(m.group(1)), float(m.group(2))), m.group(1), m.group(2), r))
        elif m := PAPER_SWITCH_OFF.search(d.name):
            # the paper orders tau from inf down to 10 ms
            paper.append(((-int(m.group(1)), -float(m.group(2))), m.group(1), m.group(2), r))
    if not recipe and not paper:
        return []
    out = ["#### Table 7: early switch-off (LID-free decoding)", "",
           f"T_avg: decoders active per encoder frame, averaged over utterances ({num_langs} = every language "
           "decoded throughout, 1 = one decoder). The first row of each grid is LID-free decoding without "
           "switch-off (tau = s_th = inf).", ""]

    def line(tau: str, s: str, r: Decode) -> str:
        return (f"| {tau} | {s} | {fmt(r.stats.get('t_avg'), 3)} | {fmt(r.avg('wer'))} | {fmt(r.avg('cer'))} | "
                f"{fmt(r.lid_acc())} | {fmt(r.stats.get('rtf'), 4)} |")

    head = ["| tau | s_th | T_avg | WER avg | CER avg | LID acc % | RTF |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for title, grid, unit in (
            ("The recipe's grid: decoder l stops once t > tau encoder frames (30 ms) and its cumulative LID "
             "log-posterior is more than s_th nats below the best running decoder's "
             "(speechkit-asr-decode --switch-off-rule gap).", recipe, ""),
            ("The paper's grid (Table 7): tau in ms, decoder l stops once t > tau and its LID posterior "
             "averaged over the frames so far is below s_th, the best running decoder never "
             "(--switch-off-rule posterior; the paper's exact rule is an assumption here).", paper, " ms")):
        if not grid:
            continue
        out += [title, ""] + head
        if plain.ok and plain.stats is not None:
            out.append(line("inf", "inf", plain))
        for _, tau, s, r in sorted(grid, key=lambda x: x[0]):
            out.append(line(tau + unit, s, r))
        out.append("")
    return out


def table6(exp: Path) -> list[str]:
    """Table 6: parameters (M) of the paper, of speechkit's ``paper`` preset (built on the meta
    device, :func:`speechkit.models.rnnt.paper_parameter_table`) and of this run's systems."""
    from speechkit.models.rnnt import PAPER_TABLE6, paper_parameter_table

    preset = paper_parameter_table()
    run: dict[str, float] = {}
    for key, sysname in (("vanilla", "vanilla"), ("onehot", "onehot"), ("multisoftmax", "multisoftmax"),
                         ("multisoftmax_lsp", "multisoftmax_lsp"), ("multisoftmax_lid", "multisoftmax_lid"),
                         ("multisoftmax_lsp_lid", "multisoftmax_lsp_lid")):
        mi = load(exp / sysname / "model_info.json")
        if mi:
            run[key] = mi["parameters"]["total"] / 1e6
    monos = [load(p) for p in sorted(exp.glob("mono_*/model_info.json"))]
    monos = [m["parameters"]["total"] / 1e6 for m in monos if m]
    if monos:
        run["mono"] = sum(monos) / len(monos)
    names = {"mono": "monolingual (one language)", "vanilla": "vanilla", "onehot": "one-hot",
             "multisoftmax": "multi-softmax", "multisoftmax_lsp": "multi-softmax + LSP",
             "multisoftmax_lid": "multi-softmax + LID", "multisoftmax_lsp_lid": "multi-softmax + LSP + LID"}
    out = ["### Table 6: parameters (M)", "",
           "paper: Joshi et al. 2021, Table 6. `paper` preset: speechkit's `paper` model sizes with the "
           "paper's four languages' inventories (fitted, see speechkit/models/rnnt.py), built without "
           "training. this run: the trained systems (monolingual: the mean over languages).", "",
           "| system | paper | `paper` preset | preset vs paper | LID head (preset) | this run |",
           "|---|---:|---:|---:|---:|---:|"]
    for key, name in names.items():
        p = PAPER_TABLE6.get(key)
        q = preset[key]["total"] / 1e6
        rel = f"{100 * (q - p) / p:+.2f} %" if p else "-"
        lid = preset[key]["lid"] / 1e6
        out.append(f"| {name} | {fmt(p)} | {q:.2f} | {rel} | {f'{lid:.2f}' if lid else '-'} | "
                   f"{fmt(run.get(key))} |")
    return out + [""]


def data_summary(data: Path, sets: list[str]) -> dict[str, dict[str, list]]:
    """``{set: {language: [hours, utterances]}}`` from each set's utt2lang and utt2num_frames (10 ms frames)."""
    per: dict[str, dict[str, list]] = {}
    for s in sets:
        u2l = read_table(data / s / "utt2lang")
        n2f = read_table(data / s / "utt2num_frames")
        d: dict[str, list] = {}
        for u, lang in u2l.items():
            e = d.setdefault(lang, [0.0, 0])
            e[0] += int(n2f.get(u, 0)) / 360000.0
            e[1] += 1
        per[s] = d
    return per


def collect(exp: Path, data: Path, lang: Path | None, test_sets: list[str], out: Path,
            runs_file: Path | None) -> None:
    """Copy what the tables need from an experiment into ``out`` (replaced as a whole).

    Raises:
        FileNotFoundError: ``exp`` is not a directory.
    """
    if not exp.is_dir():
        raise FileNotFoundError(2, "no such experiment directory", str(exp))
    with replace_dir(out, backup=False) as tmp:
        info = {"exp": str(exp), "data": str(data), "test_sets": test_sets,
                "languages": [ln.split()[0] for ln in (lang / "languages.txt").read_text().splitlines() if ln.strip()]
                if lang is not None and (lang / "languages.txt").is_file() else []}
        (tmp / "run.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        (tmp / "data.json").write_text(json.dumps(data_summary(data, ["train", "dev", *test_sets]), indent=1)
                                       + "\n", encoding="utf-8")
        if runs_file is not None and runs_file.is_file():
            shutil.copyfile(runs_file, tmp / "runs.jsonl")
        for sysdir in sorted(p for p in exp.iterdir() if p.is_dir()):
            dest = tmp / sysdir.name
            for f in SYSTEM_FILES:
                if (sysdir / f).is_file():
                    dest.mkdir(exist_ok=True)
                    shutil.copyfile(sysdir / f, dest / f)
            if (sysdir / "checkpoints").is_dir():
                dest.mkdir(exist_ok=True)
                summary = training_summary(sysdir, "valid/loss")
                (dest / "train_summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
            for d in sorted(sysdir.glob("decode_*")):
                for f in DECODE_FILES:
                    if (d / f).is_file():
                        (dest / d.name / f).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(d / f, dest / d.name / f)


def render_run(run_dir: Path) -> list[str]:
    """The Markdown of one results run (``results/<run>``): provenance, data, Tables 2-7, systems, Table 6."""
    exp = run_dir
    info = load(run_dir / "run.json") or {}
    test_sets = info.get("test_sets") or ["test"]
    per = {s: {k: tuple(v) for k, v in d.items()} for s, d in (load(run_dir / "data.json") or {}).items()}
    out: list[str] = [f"## Run `{run_dir.name}`", ""]
    out += [markdown_header(read_runs(run_dir / "runs.jsonl"), level=3)]

    # ---- data
    out += ["### Data (hours / utterances)", ""]
    sets = [s for s in ["train", "dev"] + list(test_sets) if s in per]
    langs = info.get("languages") or sorted({k for v in per.values() for k in v})
    out.append("| set | " + " | ".join(langs) + " | total |")
    out.append("|---|" + "---:|" * (len(langs) + 1))
    for s in sets:
        cells = [f"{per[s][k][0]:.3f} h / {per[s][k][1]}" if k in per[s] else "-" for k in langs]
        tot_h = sum(v[0] for v in per[s].values())
        tot_n = sum(v[1] for v in per[s].values())
        out.append(f"| {s} | " + " | ".join(cells) + f" | {tot_h:.3f} h / {tot_n} |")
    out.append("")
    args = argparse.Namespace(test_sets=" ".join(test_sets))

    def row(name: str, dec: Decode, base: Decode | None, extra: list[str] | None = None) -> str:
        cells = [fmt(dec.lang("wer", k)) for k in langs] + [fmt(dec.avg("wer"))]
        cells += [fmt(dec.lang("cer", k)) for k in langs] + [fmt(dec.avg("cer"))]
        cells.append(fmt(werr(base.avg("wer"), dec.avg("wer")) if base is not None and base.ok else None, 1))
        cells.append(fmt(werr(base.avg("cer"), dec.avg("cer")) if base is not None and base.ok else None, 1))
        return f"| {name} | " + " | ".join(cells + (extra or [])) + " |"

    def header(extra: list[str] | None = None) -> list[str]:
        cols = [f"WER {k}" for k in langs] + ["WER avg"] + [f"CER {k}" for k in langs] + ["CER avg",
                                                                                            "WERR %", "CERR %"]
        cols += extra or []
        return ["| system | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]

    for t in args.test_sets.split():
        dec = lambda rel: Decode(exp / rel)  # noqa: E731
        van = dec(f"vanilla/decode_{t}")
        mono = dec(f"mono/decode_{t}_oracle")
        base = mono if mono.ok else None
        out += [f"### Test set `{t}`", "",
                "WER/CER in %; 'avg' pools every language's errors over all reference words/characters "
                "(the word-weighted average); WERR/CERR: relative reduction against the monolingual "
                "models (the paper's baseline)."]
        st = next((load(p) for p in sorted(exp.glob(f"*/decode_{t}*/decode_stats.json"))), None)
        if st:
            search = f"beam search (beam {st['beam']})" if st.get("search") == "beam" else \
                f"greedy search (at most {st.get('max_symbols_per_frame')} symbols per frame)"
            out[-1] += (f" Decoding: {search}, streaming chunks of {st.get('chunk_frames')} feature frames"
                        + (f", blank penalty {st['blank_penalty']}" if st.get("blank_penalty") else "") + ".")
        out.append("")

        # Table 2
        rows = [("monolingual (one model per language)", dec(f"mono/decode_{t}_oracle")),
                ("vanilla (union softmax)", van),
                ("one-hot language input", dec(f"onehot/decode_{t}_oracle")),
                ("multi-softmax", dec(f"multisoftmax/decode_{t}_oracle"))]
        rows = [(n, d) for n, d in rows if d.ok]
        if rows:
            out += ["#### Table 2: monolingual and multilingual models (oracle language where one is used)", ""]
            out += header() + [row(n, d, base) for n, d in rows] + [""]
        # Table 3
        rows = [("multi-softmax", dec(f"multisoftmax/decode_{t}_oracle")),
                ("multi-softmax fine-tuned per language", dec(f"ft/decode_{t}_oracle")),
                ("one-hot language input", dec(f"onehot/decode_{t}_oracle")),
                ("one-hot fine-tuned per language (union softmax cut to the language)",
                 dec(f"ft_onehot/decode_{t}_oracle")),
                ("monolingual", dec(f"mono/decode_{t}_oracle"))]
        if dec(f"ft/decode_{t}_oracle").ok or dec(f"ft_onehot/decode_{t}_oracle").ok:
            out += ["#### Table 3: fine-tuning the multi-softmax and one-hot models to each language", ""]
            out += header() + [row(n, d, base) for n, d in rows if d.ok] + [""]
        # Table 4
        rows = [("multi-softmax", dec(f"multisoftmax/decode_{t}_oracle")),
                ("multi-softmax + LSP (prediction network per language)", dec(f"multisoftmax_lsp/decode_{t}_oracle"))]
        if rows[1][1].ok:
            out += ["#### Table 4: language-specific prediction networks", ""]
            out += header() + [row(n, d, base) for n, d in rows if d.ok] + [""]
        # Table 5
        rows = [("vanilla (language = script of the hypothesis)", van, van.lid_acc()),
                ("multi-softmax + LID, oracle language", dec(f"multisoftmax_lid/decode_{t}_oracle"), None),
                ("multi-softmax + LID, LID-free", dec(f"multisoftmax_lid/decode_{t}_lidfree"),
                 dec(f"multisoftmax_lid/decode_{t}_lidfree").lid_acc()),
                ("multi-softmax, oracle language", dec(f"multisoftmax/decode_{t}_oracle"), None)]
        if rows[2][1].ok:
            out += ["#### Table 5: integrated LID and LID-free decoding", "",
                    "LID acc: utterance-level accuracy of the language each system chose.", ""]
            out += header(["LID acc %"]) + [row(n, d, base, [fmt(a)]) for n, d, a in rows if d.ok] + [""]
        # Figure 2
        rows = [("multi-softmax, oracle language", dec(f"multisoftmax/decode_{t}_oracle")),
                ("+ LSP, oracle language", dec(f"multisoftmax_lsp/decode_{t}_oracle")),
                ("+ LID, oracle language", dec(f"multisoftmax_lid/decode_{t}_oracle")),
                ("+ LID, LID-free", dec(f"multisoftmax_lid/decode_{t}_lidfree")),
                ("+ LSP + LID, oracle language", dec(f"multisoftmax_lsp_lid/decode_{t}_oracle")),
                ("+ LSP + LID, LID-free", dec(f"multisoftmax_lsp_lid/decode_{t}_lidfree"))]
        if rows[4][1].ok or rows[5][1].ok:
            out += ["#### Figure 2: multi-softmax with LSP, LID and both", ""]
            out += header(["LID acc %"]) + [row(n, d, base, [fmt(d.lid_acc())]) for n, d in rows if d.ok] + [""]
        # Table 7
        out += switch_off_tables(exp, t, len(langs))

        # systems
        out += ["#### Systems", "",
                "| system | parameters | decode params (per language) | steps | epochs (best) | train time | "
                "blank penalty (dev CER % per candidate) | test RTF (1 core) |", "|---|---:|---:|---:|---:|---:|---|---:|"]
        for sysdir in sorted(p for p in exp.iterdir() if (p / "train_summary.json").is_file()):
            ti = train_info(sysdir)
            cands = sorted(sysdir.glob(f"decode_{t}*/decode_stats.json"))
            pick = [c for c in cands if c.parent.name in (f"decode_{t}", f"decode_{t}_oracle")] or cands[:1]
            st = load(pick[0]) if pick else None
            dp = ti.get("decode_params") or {}
            dps = ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in dp.items())
            secs = ti.get("train_seconds")
            bp = load(sysdir / "blank_penalty.json") or {}
            bps = "-" if "blank_penalty" not in bp else f"{bp['blank_penalty']:g}" + (
                " (" + ", ".join(f"{k}: {v:.2f}" for k, v in bp["dev_cer"].items()) + ")" if bp.get("dev_cer") else
                " (given)")
            out.append(f"| {sysdir.name} | {fmt(ti['params'] / 1e6 if 'params' in ti else None)} M | {dps} | "
                       f"{ti.get('steps', '-')} | {ti.get('epochs', '-')} ({ti.get('best_epoch', '-')}) | "
                       f"{_duration(secs)} | {bps} | "
                       f"{fmt(st.get('rtf') if st else None, 4)} |")
        out.append("")
    out += table6(exp)
    return out


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
        collect(args.exp, args.data, args.lang, args.test_sets.split(), args.results_dir / args.run, args.runs_file)
    runs = sorted(d for d in args.results_dir.iterdir() if (d / "run.json").is_file()) \
        if args.results_dir.is_dir() else []
    if not runs:
        p.error(f"{args.results_dir}: no results run (run.json) to render; collect one first (--collect)")
    out = ["# RESULTS: egs/indic_multilingual", "",
           "Generated by `local/make_results.py` from the tracked score files under `results/<run>/` "
           "(`cd egs/indic_multilingual && local/make_results.py` regenerates this page; "
           "`./run.sh` stage 6 collects a run's files from `exp/` first). One section per run: "
           + ", ".join(f"[`{d.name}`](#{d.name})" for d in runs) + ".", ""]
    for d in runs:
        out += render_run(d)
    text = "\n".join(out).rstrip("\n") + "\n"
    with atomic_write(args.out) as f:
        f.write(text)
    print(f"make_results.py: wrote {args.out} ({', '.join(d.name for d in runs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
