#!/usr/bin/env python3
"""Collect the scores of every experiment under EXPDIR into a Markdown report and an ABX/bitrate plot.

  local/make_results.py --expdir exp --datadir data [--corpus NAME] --out exp/RESULTS.md

An experiment is any EXPDIR/<tag>/scores/ holding abx_across.json (written by run.sh stage 6):
VQ-VAE systems (EXPDIR/<tag>/vqvae/config.yaml, metrics.jsonl, wallclock; units/test/units.yaml;
resynth/test/) and the feature baselines (EXPDIR/baseline_*). Also writes EXPDIR/results.json (the
table as data) and EXPDIR/abx_bitrate.png (across-speaker ABX against bitrate). Links in the report
are relative to its own location.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml

from speechkit.utils.cli import make_parser, run_main
from speechkit.utils.fileio import atomic_write, read_table

SCORES = ("abx_across", "abx_within", "abx_nocontext_across", "abx_nocontext_within")
FEATURE_NAMES = {"mfcc": "MFCC+Δ+ΔΔ", "logmel": "log-mel"}


def _json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _feature_type(data_dir: str) -> str:
    f = Path(data_dir) / "feats.yaml"
    if f.is_file():
        return (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("type", "?")
    return "?"


def _training(exp: Path) -> dict:
    """steps, epochs, last valid stats and wall-clock seconds of a speechkit-train experiment."""
    out: dict = {}
    metrics = exp / "metrics.jsonl"
    if metrics.is_file():
        epochs = [json.loads(ln) for ln in metrics.read_text(encoding="utf-8").splitlines() if '"kind": "epoch"' in ln]
        if epochs:
            last = epochs[-1]
            out.update(steps=last.get("step"), epochs=last.get("epoch"))
            best = [e for e in epochs if e.get("best")]
            if best:
                out["best"] = {k: v for k, v in best[-1].items() if k.startswith("valid/")}
    wc = exp / "wallclock"
    if wc.is_file():
        out["seconds"] = sum(int(line.split()[0]) for line in wc.read_text().splitlines() if line.strip())
    return out


def collect(expdir: Path) -> list[dict]:
    rows = []
    for scores in sorted(expdir.glob("*/scores")):
        exp = scores.parent
        if not (scores / "abx_across.json").is_file():
            continue
        row: dict = {"tag": exp.name, **_read_scores(scores)}
        cfg_file = exp / "vqvae" / "config.yaml"
        if exp.name.startswith("baseline_"):
            feat = exp.name[len("baseline_"):]
            cmvn = feat.endswith("_cmvn")
            feat = feat.removesuffix("_cmvn")
            row.update(kind="baseline", system=f"{FEATURE_NAMES.get(feat, feat)} features"
                       + (" + per-speaker CMVN" if cmvn else ""), input=feat)
        elif cfg_file.is_file():
            cfg = yaml.safe_load(cfg_file.read_text(encoding="utf-8"))
            m, d = cfg["model"], cfg["data"]
            extras = []
            if m.get("smoothing_weight"):
                extras.append(f"smoothing λ={m['smoothing_weight']:g}")
            if m.get("jitter_prob"):
                extras.append(f"jitter p={m['jitter_prob']:g}")
            t = cfg.get("trainer", {})
            if t.get("scheduler") == "none":  # the paper's optimiser (Adam, constant lr) rather than warm-up + decay
                extras.append(f"Adam lr {t.get('lr', 0):g} constant")
            if t.get("seed"):
                extras.append(f"seed {t['seed']}")
            enc = "Transformer" if m["encoder_type"] == "transformer" else "conv"
            row.update(kind="vqvae", input=_feature_type(d["train_dir"]), encoder=enc, K=m["codebook_size"],
                       stride=m["stride"], smoothing=m.get("smoothing_weight", 0), jitter=m.get("jitter_prob", 0),
                       system=f"{enc} VQ-VAE K={m['codebook_size']}" + (", " + ", ".join(extras) if extras else ""))
            row["train"] = _training(exp / "vqvae")
            units = exp / "units" / "test" / "units.yaml"
            if units.is_file():
                row["codes_used"] = yaml.safe_load(units.read_text(encoding="utf-8")).get("codes_used")
            inverters = sorted(p for p in exp.glob("inverter*") if p.is_dir() and not p.name.endswith(".stale"))
            if inverters:
                row["inverter"] = _training(inverters[0])
            # resynth/test (one voice) or resynth/test_<voice> (one inverter per voice)
            wav_scps = sorted((exp / "resynth").glob("test*/wav.scp"))
            if wav_scps:
                row["wavs"] = [str(Path(v)) for f in wav_scps for v in read_table(f).values()]
        elif (exp / "units" / "test" / "units.yaml").is_file():  # reference units (local/kmeans_units.py)
            info = yaml.safe_load((exp / "units" / "test" / "units.yaml").read_text(encoding="utf-8")) or {}
            row.update(kind="reference", system=info.get("system", exp.name), codes_used=info.get("codes_used"),
                       input=_feature_type(info.get("data_dir", "")))
        else:
            row.update(kind="other", system=exp.name)
        rows.append(row)
        if (exp / "scores_aux" / "abx_across.json").is_file():  # run.sh --aux_units true: the continuous z
            aux = exp / "units" / "test_aux" / "units.yaml"
            shift = (yaml.safe_load(aux.read_text(encoding="utf-8")) or {}).get("frame_shift") if aux.is_file() else None
            rows.append({**{k: v for k, v in row.items() if k not in ("wavs", "codes_used", "inverter")},
                         **_read_scores(exp / "scores_aux"), "tag": f"{exp.name} (z)", "kind": "aux",
                         "system": f"{row['system']}: continuous z (auxiliary embedding)"
                                   + (f" every {shift * 1000:g} ms" if shift else "")})
    return rows


def _read_scores(scores: Path) -> dict:
    row: dict = {}
    for s in SCORES:
        j = _json(scores / f"{s}.json")
        row[s] = j["error"] if j else None
        row[f"{s}_triplets"] = j["n_triplets"] if j else None
        row[f"{s}_interval"] = [j["bootstrap"]["low"], j["bootstrap"]["high"]] if j and j.get("bootstrap") else None
    b = _json(scores / "bitrate.json")
    row["bitrate"] = b["bitrate"] if b else None
    return row


def _fmt(v, spec=".2f") -> str:
    return "–" if v is None else format(v, spec)


def _interval(iv) -> str:
    """' [low, high]' of a bootstrap interval, '' without one; ' [n/a]' for a zero-width one (two test speakers
    across: every replicate that keeps an across pair is the original sample, so the interval says nothing)."""
    if not iv:
        return ""
    return " [n/a]" if iv[1] - iv[0] < 1e-9 else f" [{iv[0]:.1f}, {iv[1]:.1f}]"


def _duration(seconds) -> str:
    if seconds is None:
        return "–"
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}" if m >= 60 else f"{m}m{s:02d}"


def plot(rows: list[dict], path: Path) -> bool:
    pts = [r for r in rows if r["bitrate"] and r["abx_across"] is not None]
    if not pts:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    style = {"baseline": ("s", "C3"), "reference": ("^", "C2"), "aux": ("D", "C1")}  # VQ-VAE codes: blue circles
    for r in pts:
        marker, color = style.get(r["kind"], ("o", "C0"))
        ax.scatter(r["bitrate"], r["abx_across"], marker=marker, color=color, zorder=3)
        if r["abx_nocontext_across"] is not None:
            ax.scatter(r["bitrate"], r["abx_nocontext_across"], marker=marker, facecolors="none", edgecolors=color,
                       zorder=3)
        ax.annotate(r["tag"], (r["bitrate"], r["abx_across"]), textcoords="offset points", xytext=(4, 3), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("bitrate (bits/s, log scale)")
    ax.set_ylabel("ABX error across speakers (%)")
    ax.set_title("ABX vs bitrate (filled: by context, ZeroSpeech 2019; hollow: no context)\n"
                 "blue: VQ-VAE codes, orange: VQ-VAE z, green: k-means units, red: input features", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:  # a unique temporary name: concurrent writers do not collide
        fig.savefig(f, format="png", dpi=90)
    plt.close(fig)
    return True


def report(rows: list[dict], datadir: Path, corpus: str, out: Path, png: Path | None) -> str:
    rel = lambda p: os.path.relpath(Path(p).resolve(), out.parent.resolve())  # noqa: E731
    test = datadir / "test"
    n_utt = len(read_table(test / "utt2spk")) if (test / "utt2spk").is_file() else "?"
    n_spk = len(set(read_table(test / "utt2spk").values())) if (test / "utt2spk").is_file() else "?"
    n_items = sum(1 for ln in open(test / "abx.item", encoding="utf-8") if not ln.startswith("#")) \
        if (test / "abx.item").is_file() else "?"
    ref = next((r for r in rows if r["kind"] == "baseline"), rows[0])
    counts = ", ".join(f"{s.replace('abx_', '').replace('_', ' ')} {ref[f'{s}_triplets']}" for s in SCORES
                       if ref.get(f"{s}_triplets") is not None)
    lines = [
        f"# egs/zerospeech2019 results ({corpus})",
        "",
        f"Written by `local/make_results.py` on {time.strftime('%Y-%m-%d %H:%M')}. Test set `{test}`: {n_utt} "
        f"utterances, {n_spk} speakers, {n_items} ABX items (phones); triplets scored ({ref['tag']}): {counts}.",
        "ABX error in % (lower is better), DTW over the frame-wise angular (cosine) distance, "
        "ZeroSpeech 2019 task: triplets within one phone context (by context) and the same without the context "
        "constraint (no context: many more triplets; in brackets its 95 % interval from resampling the test "
        "speakers, local/score.sh --bootstrap; n/a with two test speakers, where it cannot vary). Bitrate: ZeroSpeech 2019 definition (frames/s x entropy of "
        "the frame symbols); for continuous features every frame is its own symbol.",
        "",
        "| system | tag | input | steps | train time | ABX across | ABX within | ABX across (no ctx) "
        "| ABX within (no ctx) | bitrate (bits/s) | codes used |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rank = {"baseline": 0, "reference": 1}  # then the VQ-VAE systems (codes, z) by tag
    order = sorted(rows, key=lambda r: (rank.get(r["kind"], 2), r["tag"]))
    for r in order:
        tr = r.get("train", {})
        lines.append(
            f"| {r['system']} | {r['tag']} | {FEATURE_NAMES.get(r.get('input'), r.get('input', ''))} "
            f"| {tr.get('steps', '–') if r['kind'] in ('vqvae', 'aux') else ''} "
            f"| {_duration(tr.get('seconds')) if r['kind'] in ('vqvae', 'aux') else ''} "
            f"| {_fmt(r['abx_across'])} | {_fmt(r['abx_within'])} | {_fmt(r['abx_nocontext_across'])}"
            f"{_interval(r.get('abx_nocontext_across_interval'))} "
            f"| {_fmt(r['abx_nocontext_within'])} | {_fmt(r['bitrate'], '.1f')} "
            f"| {r.get('codes_used') or ''} |")
    if png is not None:
        lines += ["", f"![ABX against bitrate]({rel(png)})"]
    synth = [r for r in order if r.get("wavs")]
    if synth:
        lines += ["", "## Resynthesis", "",
                  "Test utterances resynthesized in the target voice (codebook inverter + Griffin-Lim); each PNG "
                  "shows the input's spectrogram above the resynthesized one."]
        for r in synth:
            inv = r.get("inverter", {})
            sc = inv.get("best", {}).get("valid/spectral_convergence")
            lines += ["", f"**{r['tag']}** (inverter: {inv.get('steps', '?')} steps, {_duration(inv.get('seconds'))}"
                      + (f", validation spectral convergence {sc:.3f}" if sc is not None else "") + "):", ""]
            for w in r["wavs"]:
                png_file = Path(w).with_suffix(".png")
                link = f"[{Path(w).stem}.wav]({rel(w)})"
                if png_file.is_file():
                    link += f" · [spectrogram]({rel(png_file)})"
                lines.append(f"- {link}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = make_parser(__doc__, prog="make_results.py")
    p.add_argument("--expdir", required=True)
    p.add_argument("--datadir", required=True)
    p.add_argument("--corpus", default="")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    def body() -> int:
        expdir, out = Path(args.expdir), Path(args.out)
        rows = collect(expdir)
        if not rows:
            raise FileNotFoundError(f"{expdir}: no */scores/abx_across.json (run stage 6 first)")
        png = expdir / "abx_bitrate.png"
        have_png = plot(rows, png)
        text = report(rows, Path(args.datadir), args.corpus, out, png if have_png else None)
        with atomic_write(out) as f:
            f.write(text)
        with atomic_write(expdir / "results.json") as f:
            json.dump(rows, f, indent=2, ensure_ascii=False)
            f.write("\n")
        sys.stdout.write(text)
        return 0

    return run_main("make_results.py", body)


if __name__ == "__main__":
    sys.exit(main())
