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
      provenance header (environment, commands, config hashes; speechkit.utils.provenance), the ABX /
      bitrate table, the training table and the paired comparisons.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

from speechkit.utils.cli import make_parser, run_main
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.jsonio import read_json, read_jsonl
from speechkit.utils.provenance import markdown_header, read_runs
from speechkit.utils.results_io import check_page, collect_dir

SCORES = ("abx_across", "abx_within", "abx_nocontext_across", "abx_nocontext_within")
#: how --collect marks the run folders it writes (speechkit.utils.results_io), and the file only it writes there
COLLECT_OWNER = "egs/zerospeech2019/local/make_results.py --collect"
RUN_SIGNATURE = ("test_set.json",)
FEATURE_NAMES = {"mfcc": "MFCC+Δ+ΔΔ", "logmel": "log-mel"}


def _json(path: Path) -> dict | None:
    return read_json(path, expect=dict) if path.is_file() else None


def _feature_type(*data_dirs) -> str:
    """The feature type ('mfcc', 'logmel', ...) of the first of ``data_dirs`` holding a feats.yaml, '?' if none."""
    for d in data_dirs:
        f = Path(d) / "feats.yaml"
        if d and f.is_file():
            return (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("type", "?")
    return "?"


def _training(exp: Path) -> dict:
    """steps, epochs, last valid stats and wall-clock seconds of a speechkit-train experiment."""
    out: dict = {}
    metrics = exp / "metrics.jsonl"
    if metrics.is_file():
        epochs = [r for r in read_jsonl(metrics, skip_bad=True) if r.get("kind") == "epoch"]  # as read_metrics
        if epochs:
            last = epochs[-1]
            out.update(steps=last.get("step"), epochs=last.get("epoch"))
            best = [e for e in epochs if e.get("best")]
            if best:
                out["best"] = {k: v for k, v in best[-1].items() if k.startswith("valid/")}
                out["best_epoch"] = best[-1].get("epoch")
            out["last"] = {k: v for k, v in last.items() if k.startswith("valid/")}
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
            if t.get("scheduler") == "none":  # constant lr (Adam at the paper's 1e-4, sec. 5.1) instead of warm-up + decay
                extras.append(f"Adam lr {t.get('lr', 0):g} constant")
            if t.get("seed"):
                extras.append(f"seed {t['seed']}")
            enc = "Transformer" if m["encoder_type"] == "transformer" else "conv"
            # collected results hold the input's feats.yaml in vqvae/ (the dump dir is not tracked)
            row.update(kind="vqvae", input=_feature_type(exp / "vqvae", d["train_dir"]), encoder=enc,
                       K=m["codebook_size"],
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
                       input=_feature_type(exp / "units" / "test", info.get("data_dir", "")))
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


def _ordered(rows: list[dict]) -> list[dict]:
    """Baselines, then references (k-means), then the VQ-VAE systems (codes, z) by tag."""
    rank = {"baseline": 0, "reference": 1}
    return sorted(rows, key=lambda r: (rank.get(r["kind"], 2), r["tag"]))


def _score_table(rows: list[dict]) -> list[str]:
    """The ABX / bitrate table (Markdown lines) of collect()'s rows."""
    lines = ["| system | tag | input | steps | train time | ABX across | ABX within | ABX across (no ctx) "
             "| ABX within (no ctx) | bitrate (bits/s) | codes used |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in _ordered(rows):
        tr = r.get("train", {})
        lines.append(
            f"| {r['system']} | {r['tag']} | {FEATURE_NAMES.get(r.get('input'), r.get('input', ''))} "
            f"| {tr.get('steps', '–') if r['kind'] in ('vqvae', 'aux') else ''} "
            f"| {_duration(tr.get('seconds')) if r['kind'] in ('vqvae', 'aux') else ''} "
            f"| {_fmt(r['abx_across'])} | {_fmt(r['abx_within'])} | {_fmt(r['abx_nocontext_across'])}"
            f"{_interval(r.get('abx_nocontext_across_interval'))} "
            f"| {_fmt(r['abx_nocontext_within'])} | {_fmt(r['bitrate'], '.1f')} "
            f"| {r.get('codes_used') or ''} |")
    return lines


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
        *_score_table(rows),
    ]
    order = _ordered(rows)
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


# ----------------------------------------------------------------------------- tracked results
#: per-phone-pair breakdowns of the ABX JSONs: 100-200 kB each, left in exp/ (the table needs the totals)
_BULKY_KEYS = ("by_phone_pair",)


def _portable(value, base: Path):
    """A path string under ``base`` made relative to it (the tracked JSONs should not name this machine's tree)."""
    if isinstance(value, str) and os.path.isabs(value):
        try:
            return os.path.relpath(value, base) if Path(value).resolve().is_relative_to(base.resolve()) else value
        except ValueError:
            return value
    return value


def _copy_scores(src: Path, dst: Path, base: Path) -> int:
    """Copy src/*.json (the files of local/score.sh) into dst without the bulky keys; returns how many."""
    n = 0
    for f in sorted(src.glob("*.json")):
        j = read_json(f, expect=dict)
        j = {k: _portable(v, base) for k, v in j.items() if k not in _BULKY_KEYS}
        dst.mkdir(parents=True, exist_ok=True)
        (dst / f.name).write_text(json.dumps(j, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        n += 1
    return n


def _copy_if(src: Path, dst: Path) -> None:
    if src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def _copy_training(src: Path, dst: Path) -> None:
    """The resolved config, the epoch lines of metrics.jsonl and the wall clock of a speechkit-train dir."""
    _copy_if(src / "config.yaml", dst / "config.yaml")
    _copy_if(src / "wallclock", dst / "wallclock")
    metrics = src / "metrics.jsonl"
    if metrics.is_file():
        dst.mkdir(parents=True, exist_ok=True)
        lines = [ln for ln in metrics.read_text(encoding="utf-8").splitlines() if '"kind": "epoch"' in ln]
        (dst / "metrics.jsonl").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")


def test_set_info(datadir: Path) -> dict:
    """Size of ``datadir/test``: utterances, speakers, ABX items and the SHA-256 of abx.item ({} without one)."""
    test = datadir / "test"
    if not (test / "utt2spk").is_file():
        return {}
    utt2spk = read_table(test / "utt2spk")
    info: dict = {"utterances": len(utt2spk), "speakers": len(set(utt2spk.values()))}
    item = test / "abx.item"
    if item.is_file():
        data = item.read_bytes()
        info["abx_items"] = sum(1 for ln in data.decode("utf-8").splitlines() if ln and not ln.startswith("#"))
        info["abx_item_sha256"] = hashlib.sha256(data).hexdigest()[:12]
    return info


def collect_run(expdir: Path, datadir: Path, corpus: str, tag: str, references: list[str], out: Path) -> Path:
    """Copy the small files behind one run's tables from ``expdir`` into ``out`` (replaced whole, but for
    a hand-written ``out/NOTES.md``, which is kept). ``out`` is a folder this collect made (or a new one):
    speechkit.utils.results_io's output rule, checked before anything is written.

    Args:
        expdir: the experiments folder (run.sh --expdir).
        datadir: the data folder (run.sh --datadir): the test set's size goes to test_set.json.
        corpus: the corpus name, recorded in test_set.json.
        tag: the VQ-VAE experiment (``expdir/tag``).
        references: the other experiments scored beside it (baselines, k-means units).
        out: the run's results folder, e.g. results/mini.

    Returns:
        ``out``.

    Raises:
        DataError: ``expdir/tag`` (or a reference) has no scores/abx_across.json (stage 6 not run).
        OutputOverlapError: ``out`` is, holds or lies inside ``expdir`` or ``datadir``, holds another run's
            folder, or is an existing folder that no collect made.
    """
    base = Path.cwd()
    reads = {"--expdir": expdir, "--datadir": datadir}
    with collect_dir(out, owner=COLLECT_OWNER, signature=RUN_SIGNATURE, reads=reads, option="--collect") as tmp:
        _copy_if(out / "NOTES.md", tmp / "NOTES.md")  # written by hand, not collected: kept
        for name in [tag, *references]:
            src = expdir / name
            if not (src / "scores" / "abx_across.json").is_file():
                raise DataError(f"{src}: no scores/abx_across.json (run stage 6 first)")
            _copy_scores(src / "scores", tmp / name / "scores", base)
            _copy_scores(src / "scores_aux", tmp / name / "scores_aux", base)
            for units in ("test", "test_aux", "voice"):
                u = src / "units" / units / "units.yaml"
                if u.is_file():
                    _copy_if(u, tmp / name / "units" / units / "units.yaml")
                    info = yaml.safe_load(u.read_text(encoding="utf-8")) or {}
                    if units == "test" and info.get("data_dir"):  # the input features' type (k-means units)
                        _copy_if(Path(info["data_dir"]) / "feats.yaml", tmp / name / "units" / units / "feats.yaml")
        vq = expdir / tag / "vqvae"
        _copy_training(vq, tmp / tag / "vqvae")
        cfg = vq / "config.yaml"
        if cfg.is_file():  # the input features' type (the dump dir is not tracked)
            train_dir = (yaml.safe_load(cfg.read_text(encoding="utf-8")) or {}).get("data", {}).get("train_dir")
            if train_dir:
                _copy_if(Path(train_dir) / "feats.yaml", tmp / tag / "vqvae" / "feats.yaml")
        for inv in sorted(p for p in (expdir / tag).glob("inverter*") if p.is_dir() and not p.name.endswith(".stale")):
            _copy_training(inv, tmp / tag / inv.name)
        for f in ("comparisons.md", "comparisons.json"):
            _copy_if(expdir / tag / f, tmp / tag / f)
        _copy_if(expdir / tag / "runs.jsonl", tmp / "runs.jsonl")
        info = {"corpus": corpus, "tag": tag, "references": references, "data_dir": _portable(
            str(datadir.resolve()), base), **test_set_info(datadir)}
        (tmp / "test_set.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return out


def _run_order(name: str) -> tuple:
    """mini first, then local, then the rest by name."""
    return ({"mini": 0, "local": 1}.get(name, 2), name)


def render(results: Path) -> str:
    """RESULTS.md from every ``results/<run>/`` holding a test_set.json (nothing else is read).

    Raises:
        DataError: no run under ``results``.
    """
    runs = sorted((d for d in results.iterdir() if (d / "test_set.json").is_file()), key=lambda d: _run_order(d.name)) \
        if results.is_dir() else []
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
        header = markdown_header(read_runs(run / "runs.jsonl"))
        header = "\n".join("#" + ln if ln.startswith("## ") else ln for ln in header.splitlines())
        rows = collect(run)
        ref = next((r for r in rows if r["kind"] == "baseline"), rows[0])
        counts = ", ".join(f"{s.replace('abx_', '').replace('_', ' ')} {ref[f'{s}_triplets']}" for s in SCORES
                           if ref.get(f"{s}_triplets") is not None)
        lines += [f"## {run.name}", "",
                  f"Corpus `{info.get('corpus', '?')}`, experiment `{info.get('tag', '?')}`; "
                  f"test set `{info.get('data_dir', '?')}/test`: "
                  f"{info.get('utterances', '?')} utterances, {info.get('speakers', '?')} speakers, "
                  f"{info.get('abx_items', '?')} ABX items (abx.item sha256 {info.get('abx_item_sha256', '?')}); "
                  f"triplets scored ({ref['tag']}): {counts}.", "", header.rstrip(), "", "### ABX and bitrate", ""]
        lines += _score_table(rows)
        trained = [r for r in rows if r["kind"] == "vqvae"]
        if trained:
            lines += ["", "### Training", "",
                      "`best.pt` (the checkpoint units are extracted with) is the epoch of lowest "
                      "`trainer.best_metric` (default `valid/loss` = reconstruction + commitment (+ smoothing)).", "",
                      "| model | epochs | updates | best.pt epoch | valid recon / commitment at best.pt | "
                      "valid recon / commitment at the last epoch | train time |", "|---|---:|---:|---:|---|---|---:|"]
            for r in trained:
                for what, tr in (("VQ-VAE", r.get("train", {})), ("inverter", r.get("inverter"))):
                    if not tr:
                        continue
                    lines.append(f"| {r['tag']} {what} | {tr.get('epochs', '–')} | {tr.get('steps', '–')} "
                                 f"| {tr.get('best_epoch', '–')} | {_stats(tr.get('best', {}))} "
                                 f"| {_stats(tr.get('last', {}))} | {_duration(tr.get('seconds'))} |")
        comps = sorted(run.glob("*/comparisons.json"))
        lines += ["", "### Paired comparisons", ""]
        if comps:
            lines += ["No-context ABX across speakers (%), both systems on the same speaker resamples "
                      "(`local/compare_abx.py`, 1000 resamples); difference = system - reference, negative: the system "
                      "is better; *beyond noise*: the 95 % paired interval excludes 0 (speaker sampling only, one "
                      "training seed).", "",
                      "| system | reference | system | reference | difference [95 % paired interval] | verdict |",
                      "|---|---|---:|---:|---:|---|"]
            for c in comps:
                for row in read_json(c, expect=list):
                    lines.append(f"| {row['system']} | {row['reference']} | {row['system_error']:.2f} | "
                                 f"{row['reference_error']:.2f} | {row['difference']:+.2f} [{row['low']:+.2f}, "
                                 f"{row['high']:+.2f}] | {row['verdict']} |")
        else:
            lines.append(f"None: {info.get('speakers', '?')} test speakers (a paired speaker-bootstrap interval needs "
                         "3 or more).")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _stats(d: dict) -> str:
    recon, commit = d.get("valid/recon"), d.get("valid/commitment")
    if recon is None:
        sc = d.get("valid/spectral_convergence")
        return "–" if sc is None else f"spectral convergence {sc:.3f}"
    return f"{recon:.2f} / {commit:.2f}" if commit is not None else f"{recon:.2f}"


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
    modes = sum(x is not None for x in (args.out, args.collect, args.render))
    if modes != 1:
        p.error("give exactly one of --out (report over --expdir), --collect RUN_DIR, --render [PAGE]")
    if (args.out or args.collect) and not (args.expdir and args.datadir):
        p.error("--out and --collect need --expdir and --datadir")
    if args.collect and not args.tag:
        p.error("--collect needs --tag")

    def body() -> int:
        if args.render is not None:
            check_page(args.render, option="--render", roots={"--results": args.results})
            text = render(Path(args.results))
            with atomic_write(args.render) as f:
                f.write(text)
            print(f"wrote {args.render} from {args.results}/", file=sys.stderr)
            return 0
        expdir = Path(args.expdir)
        if args.collect:
            out = collect_run(expdir, Path(args.datadir), args.corpus, args.tag, args.reference, Path(args.collect))
            print(f"collected {args.tag} ({', '.join(args.reference) or 'no references'}) into {out}/", file=sys.stderr)
            return 0
        out = Path(args.out)
        png = expdir / "abx_bitrate.png"
        check_page(out, option="--out", roots={"--expdir": expdir}, inputs={"--datadir": args.datadir},
                   outputs={"EXPDIR/results.json": expdir / "results.json", "EXPDIR/abx_bitrate.png": png})
        rows = collect(expdir)
        if not rows:
            raise FileNotFoundError(f"{expdir}: no */scores/abx_across.json (run stage 6 first)")
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
