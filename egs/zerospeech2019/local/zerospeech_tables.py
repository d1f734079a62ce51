"""The tables of egs/zerospeech2019's results (local/make_results.py): the systems read from an experiments
folder or a results run folder (the same layout), the ABX / bitrate table, the ABX-against-bitrate plot, the
training table, the paired comparisons of local/compare_abx.py, the test set's size and the untracked report
over every experiment of an experiments folder (--out)."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import yaml

from speechkit.results import number, read_json_if, signed_interval, summarize
from speechkit.results import duration as _duration
from speechkit.utils.fileio import atomic_write, read_table

SCORES = ("abx_across", "abx_within", "abx_nocontext_across", "abx_nocontext_within")
FEATURE_NAMES = {"mfcc": "MFCC+Δ+ΔΔ", "logmel": "log-mel"}
#: a missing figure on this recipe's pages
MISSING = "–"


def duration(seconds) -> str:
    return _duration(seconds, missing=MISSING)


def _feature_type(*data_dirs) -> str:
    """The feature type ('mfcc', 'logmel', ...) of the first of ``data_dirs`` holding a feats.yaml, '?' if none."""
    for d in data_dirs:
        f = Path(d) / "feats.yaml"
        if d and f.is_file():
            return (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("type", "?")
    return "?"


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def _vqvae_row(exp: Path, cfg: dict) -> dict:
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
    row = dict(kind="vqvae", input=_feature_type(exp / "vqvae", d["train_dir"]), encoder=enc, K=m["codebook_size"],
               stride=m["stride"], smoothing=m.get("smoothing_weight", 0), jitter=m.get("jitter_prob", 0),
               system=f"{enc} VQ-VAE K={m['codebook_size']}" + (", " + ", ".join(extras) if extras else ""),
               train=summarize(exp / "vqvae", detail=True))
    units = exp / "units" / "test" / "units.yaml"
    if units.is_file():
        row["codes_used"] = _yaml(units).get("codes_used")
    inverters = sorted(p for p in exp.glob("inverter*") if p.is_dir() and not p.name.endswith(".stale"))
    if inverters:
        row["inverter"] = summarize(inverters[0], detail=True)
    # resynth/test (one voice) or resynth/test_<voice> (one inverter per voice)
    wav_scps = sorted((exp / "resynth").glob("test*/wav.scp"))
    if wav_scps:
        row["wavs"] = [str(Path(v)) for f in wav_scps for v in read_table(f).values()]
    return row


def read_rows(expdir: Path) -> list[dict]:
    """One row per system of ``expdir`` (an experiments folder or a results run folder) whose scores/ hold
    abx_across.json, and one more for the continuous z of a system scored with it (scores_aux/)."""
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
            row.update(_vqvae_row(exp, yaml.safe_load(cfg_file.read_text(encoding="utf-8"))))
        elif (exp / "units" / "test" / "units.yaml").is_file():  # reference units (local/kmeans_units.py)
            info = _yaml(exp / "units" / "test" / "units.yaml")
            row.update(kind="reference", system=info.get("system", exp.name), codes_used=info.get("codes_used"),
                       input=_feature_type(exp / "units" / "test", info.get("data_dir", "")))
        else:
            row.update(kind="other", system=exp.name)
        rows.append(row)
        if (exp / "scores_aux" / "abx_across.json").is_file():  # run.sh --aux_units true: the continuous z
            aux = exp / "units" / "test_aux" / "units.yaml"
            shift = _yaml(aux).get("frame_shift") if aux.is_file() else None
            rows.append({**{k: v for k, v in row.items() if k not in ("wavs", "codes_used", "inverter")},
                         **_read_scores(exp / "scores_aux"), "tag": f"{exp.name} (z)", "kind": "aux",
                         "system": f"{row['system']}: continuous z (auxiliary embedding)"
                                   + (f" every {shift * 1000:g} ms" if shift else "")})
    return rows


def _read_scores(scores: Path) -> dict:
    row: dict = {}
    for s in SCORES:
        j = read_json_if(scores / f"{s}.json", expect=dict)
        row[s] = j["error"] if j else None
        row[f"{s}_triplets"] = j["n_triplets"] if j else None
        row[f"{s}_interval"] = [j["bootstrap"]["low"], j["bootstrap"]["high"]] if j and j.get("bootstrap") else None
    b = read_json_if(scores / "bitrate.json", expect=dict)
    row["bitrate"] = b["bitrate"] if b else None
    return row


def _interval(iv) -> str:
    """' [low, high]' of a bootstrap interval, '' without one; ' [n/a]' for a zero-width one (two test speakers
    across: every replicate that keeps an across pair is the original sample, so the interval says nothing)."""
    if not iv:
        return ""
    return " [n/a]" if iv[1] - iv[0] < 1e-9 else f" [{iv[0]:.1f}, {iv[1]:.1f}]"


def ordered(rows: list[dict]) -> list[dict]:
    """Baselines, then references (k-means), then the VQ-VAE systems (codes, z) by tag."""
    rank = {"baseline": 0, "reference": 1}
    return sorted(rows, key=lambda r: (rank.get(r["kind"], 2), r["tag"]))


def triplet_counts(rows: list[dict]) -> tuple[dict, str]:
    """The row whose triplet counts the page gives (the first baseline, else the first row) and the counts."""
    ref = next((r for r in rows if r["kind"] == "baseline"), rows[0])
    return ref, ", ".join(f"{s.replace('abx_', '').replace('_', ' ')} {ref[f'{s}_triplets']}" for s in SCORES
                          if ref.get(f"{s}_triplets") is not None)


def score_table(rows: list[dict]) -> list[str]:
    """The ABX / bitrate table (Markdown lines) of read_rows()'s rows."""
    lines = ["| system | tag | input | steps | train time | ABX across | ABX within | ABX across (no ctx) "
             "| ABX within (no ctx) | bitrate (bits/s) | codes used |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in ordered(rows):
        tr, trained = r.get("train", {}), r["kind"] in ("vqvae", "aux")
        lines.append(
            f"| {r['system']} | {r['tag']} | {FEATURE_NAMES.get(r.get('input'), r.get('input', ''))} "
            f"| {tr.get('steps', MISSING) if trained else ''} "
            f"| {duration(tr.get('wallclock_seconds')) if trained else ''} "
            f"| {number(r['abx_across'], 2, MISSING)} | {number(r['abx_within'], 2, MISSING)} "
            f"| {number(r['abx_nocontext_across'], 2, MISSING)}{_interval(r.get('abx_nocontext_across_interval'))} "
            f"| {number(r['abx_nocontext_within'], 2, MISSING)} | {number(r['bitrate'], 1, MISSING)} "
            f"| {r.get('codes_used') or ''} |")
    return lines


def _stats(d: dict) -> str:
    recon, commit = d.get("valid/recon"), d.get("valid/commitment")
    if recon is None:
        sc = d.get("valid/spectral_convergence")
        return MISSING if sc is None else f"spectral convergence {sc:.3f}"
    return f"{recon:.2f} / {commit:.2f}" if commit is not None else f"{recon:.2f}"


def training_table(rows: list[dict]) -> list[str]:
    """The training table of the VQ-VAE systems (and their inverters); [] without one."""
    trained = [r for r in rows if r["kind"] == "vqvae"]
    if not trained:
        return []
    lines = ["", "### Training", "",
             "`best.pt` (the checkpoint units are extracted with) is the epoch of lowest "
             "`trainer.best_metric` (default `valid/loss` = reconstruction + commitment (+ smoothing)).", "",
             "| model | epochs | updates | best.pt epoch | valid recon / commitment at best.pt | "
             "valid recon / commitment at the last epoch | train time |", "|---|---:|---:|---:|---|---|---:|"]
    for r in trained:
        for what, tr in (("VQ-VAE", r.get("train", {})), ("inverter", r.get("inverter"))):
            if tr:
                lines.append(f"| {r['tag']} {what} | {tr.get('epochs', MISSING)} | {tr.get('steps', MISSING)} "
                             f"| {tr.get('best_epoch', MISSING)} | {_stats(tr.get('best_valid', {}))} "
                             f"| {_stats(tr.get('last_valid', {}))} | {duration(tr.get('wallclock_seconds'))} |")
    return lines


def comparisons_table(run: Path, speakers) -> list[str]:
    """The paired comparisons local/compare_abx.py wrote (``<tag>/comparisons.json`` of the run folder)."""
    comps = sorted(run.glob("*/comparisons.json"))
    lines = ["", "### Paired comparisons", ""]
    if not comps:
        return lines + [f"None: {speakers} test speakers (a paired speaker-bootstrap interval needs 3 or more)."]
    lines += ["No-context ABX across speakers (%), both systems on the same speaker resamples "
              "(`local/compare_abx.py`, 1000 resamples); difference = system - reference, negative: the system "
              "is better; *beyond noise*: the 95 % paired interval excludes 0 (speaker sampling only, one "
              "training seed).", "",
              "| system | reference | system | reference | difference [95 % paired interval] | verdict |",
              "|---|---|---:|---:|---:|---|"]
    for c in comps:
        for row in read_json_if(c, expect=list):
            lines.append(f"| {row['system']} | {row['reference']} | {row['system_error']:.2f} | "
                         f"{row['reference_error']:.2f} | "
                         f"{signed_interval(row['difference'], (row['low'], row['high']))} | {row['verdict']} |")
    return lines


def plot(rows: list[dict], path: Path) -> bool:
    """ABX across speakers against bitrate (log scale), every system a point; False (nothing written) without one."""
    pts = [r for r in rows if r["bitrate"] and r["abx_across"] is not None]
    if not pts:
        return False
    import matplotlib  # heavy: only the report over exp/ plots

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


ABX_LEGEND = ("ABX error in % (lower is better), DTW over the frame-wise angular (cosine) distance, ZeroSpeech 2019 "
              "task: triplets within one phone context (by context) and the same without the context constraint (no "
              "context: many more triplets; in brackets its 95 % interval from resampling the test speakers, "
              "local/score.sh --bootstrap; n/a with two test speakers, where it cannot vary). Bitrate: ZeroSpeech 2019 "
              "definition (frames/s x entropy of the frame symbols); for continuous features every frame is its own "
              "symbol.")


def report(rows: list[dict], datadir: Path, corpus: str, out: Path, png: Path | None) -> str:
    """The untracked report over every experiment of an experiments folder (--out)."""
    rel = lambda p: os.path.relpath(Path(p).resolve(), out.parent.resolve())  # noqa: E731
    test = datadir / "test"
    info = test_set_info(datadir)
    ref, counts = triplet_counts(rows)
    lines = [f"# egs/zerospeech2019 results ({corpus})", "",
             f"Written by `local/make_results.py` on {time.strftime('%Y-%m-%d %H:%M')}. Test set `{test}`: "
             f"{info.get('utterances', '?')} utterances, {info.get('speakers', '?')} speakers, "
             f"{info.get('abx_items', '?')} ABX items (phones); triplets scored ({ref['tag']}): {counts}.",
             ABX_LEGEND, "", *score_table(rows)]
    if png is not None:
        lines += ["", f"![ABX against bitrate]({rel(png)})"]
    synth = [r for r in ordered(rows) if r.get("wavs")]
    if synth:
        lines += ["", "## Resynthesis", "",
                  "Test utterances resynthesized in the target voice (codebook inverter + Griffin-Lim); each PNG "
                  "shows the input's spectrogram above the resynthesized one."]
    for r in synth:
        inv = r.get("inverter", {})
        sc = inv.get("best_valid", {}).get("valid/spectral_convergence")
        lines += ["", f"**{r['tag']}** (inverter: {inv.get('steps', '?')} steps, "
                  f"{duration(inv.get('wallclock_seconds'))}"
                  + (f", validation spectral convergence {sc:.3f}" if sc is not None else "") + "):", ""]
        for w in r["wavs"]:
            png_file = Path(w).with_suffix(".png")
            link = f"[{Path(w).stem}.wav]({rel(w)})"
            lines.append(f"- {link}" + (f" · [spectrogram]({rel(png_file)})" if png_file.is_file() else ""))
    return "\n".join(lines) + "\n"
