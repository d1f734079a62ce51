#!/usr/bin/env python3
"""Collect the scores of an indic_multilingual experiment into Markdown tables (RESULTS.md).

Usage: local/make_results.py --exp exp/real/rnnt_char_wb --data data/real [--lang data/real/lang_char_wb]
                             [--test-sets "test"] [--out FILE]

Reads, for every system under EXP, the scoring JSONs written by speechkit-score-wer /
speechkit-score-lid (decode_<set>*/scoring/{wer,cer,lid}.json), decode_stats.json (T_avg, RTF)
and the training records (model_info.json, metrics.jsonl, train.log); systems or decodes that
do not exist are left out. Tables follow the paper (Joshi et al., Interspeech 2021):

  data       hours and utterances per language and set (cf. the paper's Table 1)
  Table 2    monolingual vs vanilla / one-hot / multi-softmax: WER and CER per language, averages,
             WERR against vanilla
  Table 3    multi-softmax fine-tuned to each language
  Table 4    multi-softmax with language-specific prediction networks (LSP)
  Table 5    multi-softmax + LID: oracle language vs LID-free; utterance LID accuracy (vanilla's
             language = the script of its hypothesis)
  Table 7    early switch-off: tau / s_th against T_avg, WER, CER and LID accuracy
  systems    parameters (total, used to decode one language), training steps/epochs, wall-clock
             training time, decoding RTF
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from speechkit.train.report import training_summary


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
    summary = training_summary(sysdir, "valid/loss")
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--exp", required=True, type=Path)
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--lang", type=Path, default=None, help="units dir (languages.txt gives the column order)")
    p.add_argument("--test-sets", default="test")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    exp, data = args.exp, args.data
    lang_file = args.lang / "languages.txt" if args.lang else None
    units_langs = [ln.split()[0] for ln in lang_file.read_text().splitlines()] if lang_file else []
    out: list[str] = [f"# Results: {exp}", ""]

    # ---- data
    out += ["## Data (hours / utterances)", ""]
    sets = ["train", "dev"] + args.test_sets.split()
    per: dict[str, dict[str, tuple[float, int]]] = {}
    for s in sets:
        u2l = read_table(data / s / "utt2lang")
        n2f = read_table(data / s / "utt2num_frames")
        d: dict[str, list] = {}
        for u, lang in u2l.items():
            e = d.setdefault(lang, [0.0, 0])
            e[0] += int(n2f.get(u, 0)) / 360000.0
            e[1] += 1
        per[s] = {k: (v[0], v[1]) for k, v in d.items()}
    langs = units_langs or sorted({k for v in per.values() for k in v})
    out.append("| set | " + " | ".join(langs) + " | total |")
    out.append("|---|" + "---:|" * (len(langs) + 1))
    for s in sets:
        cells = [f"{per[s][k][0]:.3f} h / {per[s][k][1]}" if k in per[s] else "-" for k in langs]
        tot_h = sum(v[0] for v in per[s].values())
        tot_n = sum(v[1] for v in per[s].values())
        out.append(f"| {s} | " + " | ".join(cells) + f" | {tot_h:.3f} h / {tot_n} |")
    out.append("")

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
        base = van if van.ok else None
        out += [f"## Test set `{t}`", "",
                "WER/CER in %; 'avg' pools every language's errors over all reference words/characters "
                "(the word-weighted average); WERR/CERR: relative reduction against vanilla."]
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
            out += ["### Table 2: monolingual and multilingual models (oracle language where one is used)", ""]
            out += header() + [row(n, d, base) for n, d in rows] + [""]
        # Table 3
        rows = [("multi-softmax", dec(f"multisoftmax/decode_{t}_oracle")),
                ("multi-softmax fine-tuned per language", dec(f"ft/decode_{t}_oracle")),
                ("monolingual", dec(f"mono/decode_{t}_oracle"))]
        if dec(f"ft/decode_{t}_oracle").ok:
            out += ["### Table 3: fine-tuning the multi-softmax model to each language", ""]
            out += header() + [row(n, d, base) for n, d in rows if d.ok] + [""]
        # Table 4
        rows = [("multi-softmax", dec(f"multisoftmax/decode_{t}_oracle")),
                ("multi-softmax + LSP (prediction network per language)", dec(f"multisoftmax_lsp/decode_{t}_oracle"))]
        if rows[1][1].ok:
            out += ["### Table 4: language-specific prediction networks", ""]
            out += header() + [row(n, d, base) for n, d in rows if d.ok] + [""]
        # Table 5
        rows = [("vanilla (language = script of the hypothesis)", van, van.lid_acc()),
                ("multi-softmax + LID, oracle language", dec(f"multisoftmax_lid/decode_{t}_oracle"), None),
                ("multi-softmax + LID, LID-free", dec(f"multisoftmax_lid/decode_{t}_lidfree"),
                 dec(f"multisoftmax_lid/decode_{t}_lidfree").lid_acc()),
                ("multi-softmax, oracle language", dec(f"multisoftmax/decode_{t}_oracle"), None)]
        if rows[2][1].ok:
            out += ["### Table 5: integrated LID and LID-free decoding", "",
                    "LID acc: utterance-level accuracy of the language each system chose.", ""]
            out += header(["LID acc %"]) + [row(n, d, base, [fmt(a)]) for n, d, a in rows if d.ok] + [""]
        # Table 7
        sw = []
        for d in sorted((exp / "multisoftmax_lid").glob(f"decode_{t}_lidfree*")):
            m = re.search(r"_tau(\d+)_s([0-9.a-z]+)$", d.name)
            r = Decode(d)
            if not r.ok or r.stats is None:
                continue
            tau, s = (m.group(1), m.group(2)) if m else ("-", "inf (no switch-off)")
            sw.append((0 if not m else 1, int(m.group(1)) if m else -1,
                       float(m.group(2)) if m else float("inf"), tau, s, r))
        if sw:
            sw.sort(key=lambda x: (x[0], x[1], x[2]))
            L = len(langs)
            out += ["### Table 7: early switch-off (LID-free decoding)", "",
                    f"T_avg: decoders active per encoder frame, averaged over utterances ({L} = every "
                    "language decoded throughout, 1 = one decoder). tau in encoder frames (30 ms), s_th in nats.",
                    "", "| tau | s_th | T_avg | WER avg | CER avg | LID acc % | RTF |",
                    "|---:|---:|---:|---:|---:|---:|---:|"]
            for _, _, _, tau, s, r in sw:
                out.append(f"| {tau} | {s} | {fmt(r.stats.get('t_avg'), 3)} | {fmt(r.avg('wer'))} | "
                           f"{fmt(r.avg('cer'))} | {fmt(r.lid_acc())} | {fmt(r.stats.get('rtf'), 4)} |")
            out.append("")

        # systems
        out += ["### Systems", "",
                "| system | parameters | decode params (per language) | steps | epochs (best) | train time | "
                "test RTF (1 core) |", "|---|---:|---:|---:|---:|---:|---:|"]
        for sysdir in sorted(p for p in exp.iterdir() if p.is_dir() and (p / "checkpoints").is_dir()):
            ti = train_info(sysdir)
            cands = sorted(sysdir.glob(f"decode_{t}*/decode_stats.json"))
            pick = [c for c in cands if c.parent.name in (f"decode_{t}", f"decode_{t}_oracle")] or cands[:1]
            st = load(pick[0]) if pick else None
            dp = ti.get("decode_params") or {}
            dps = ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in dp.items())
            secs = ti.get("train_seconds")
            out.append(f"| {sysdir.name} | {fmt(ti['params'] / 1e6 if 'params' in ti else None)} M | {dps} | "
                       f"{ti.get('steps', '-')} | {ti.get('epochs', '-')} ({ti.get('best_epoch', '-')}) | "
                       f"{_duration(secs)} | "
                       f"{fmt(st.get('rtf') if st else None, 4)} |")
        out.append("")
    text = "\n".join(out) + "\n"
    if args.out:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(args.out)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
