"""The tables of egs/indic_multilingual's RESULTS.md (local/make_results.py renders them from results/<run>/
alone). Tables follow the paper's numbering (Joshi et al., Interspeech 2021); systems or decodes that do not exist
are left out:

  data       hours and utterances per language and set (cf. the paper's Table 1)
  Table 2    monolingual vs vanilla / one-hot / multi-softmax: WER and CER per language, averages,
             WERR/CERR against the monolingual models (the paper's baseline)
  Table 2,   multi-softmax with language-specific prediction networks (LSP; section 4.1, the
  LSP row    paper's Table 2 row "Multi-softmax LSP")
  Table 3    multi-softmax and one-hot models fine-tuned to each language
  Tables 4, 5  LID-free decoding: vanilla, multi-softmax + LID with the oracle language and LID-free
             (WER: Table 4); utterance LID accuracy (Table 5; vanilla's language = the script of its
             hypothesis, as the paper measures it)
  Figure 2   multi-softmax with LSP, LID and both (oracle language and LID-free); the LSP + LID
             combination is drawn in Figure 2 but not evaluated in the paper
  paired     the paper's comparisons (Tables 2-4) with a paired bootstrap over utterances
             (Bisani & Ney 2004, speechkit.scoring.significance): difference, 95 % interval, P(better)
  Table 6    parameters: the paper's counts, speechkit's `paper` preset, this run's systems
  Table 7    early switch-off: the operating point of each rule chosen on dev (its dev figures) and
             the test set decoded once at it ("not recorded" for runs made before the choice on
             dev); then, as an analysis not used to choose, the sweeps on the test set: the paper's
             rule (section 6.3, eq. 1: tau in encoder frames, s_th a cumulative log-posterior gap in
             nats) and the recipe's own posterior variant (tau in ms, s_th on the running average LID
             posterior; not in the paper) against T_avg (eq. 2), WER, CER and LID accuracy
  systems    parameters (total, used to decode one language), training steps/epochs, wall-clock
             training time, the checkpoint and blank penalty decoded (chosen on dev when several were
             given), decoding RTF

WERR/CERR are relative reductions of the pooled average WER/CER against the monolingual models'
(Table 2 of the paper); '-' where the monolingual systems were not decoded.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from speechkit.models.rnnt_parameters import PAPER_TABLE6, paper_parameter_table
from speechkit.results import (NotComparable, compare, duration, number, provenance, read_json_if, signed_interval,
                               summarize)


class Decode:
    """Scores of one decode directory."""

    def __init__(self, d: Path):
        self.dir = d
        self.wer = read_json_if(d / "scoring" / "wer.json")
        self.cer = read_json_if(d / "scoring" / "cer.json")
        self.lid = read_json_if(d / "scoring" / "lid.json")
        self.stats = read_json_if(d / "decode_stats.json")

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
    mi = read_json_if(sysdir / "model_info.json")
    if mi:
        info["params"] = mi["parameters"]["total"]
        info["decode_params"] = {k[len("decode_"):]: v for k, v in mi["parameters"].items() if k.startswith("decode_")}
    summary = read_json_if(sysdir / "train_summary.json") or summarize(sysdir, "valid/loss")
    for key in ("steps", "epochs", "best_epoch", "train_seconds"):
        if key in summary:
            info[key] = summary[key]
    if "best_value" in summary:
        info["best_valid"] = summary["best_value"]
    return info


#: Decode dirs of the switch-off sweeps: the paper's rule (eq. 1), and the recipe's own posterior
#: variant, whose dirs keep their older name ``..._paper_tau<ms>ms_p<posterior>`` (tracked results).
GAP_SWITCH_OFF = re.compile(r"_lidfree_tau(\d+)_s([0-9.]+|inf)$")
POSTERIOR_SWITCH_OFF = re.compile(r"_lidfree_paper_tau(\d+)ms_p([0-9.]+)$")


#: The paper's comparisons read with the paired bootstrap: (A, B, what B is, the paper's table).
PAIRS = [("mono/decode_{t}_oracle", "multisoftmax/decode_{t}_oracle", "multi-softmax vs monolingual", "2"),
         ("vanilla/decode_{t}", "multisoftmax/decode_{t}_oracle", "multi-softmax vs vanilla", "2"),
         ("onehot/decode_{t}_oracle", "multisoftmax/decode_{t}_oracle", "multi-softmax vs one-hot", "2"),
         ("mono/decode_{t}_oracle", "vanilla/decode_{t}", "vanilla vs monolingual", "2"),
         ("vanilla/decode_{t}", "onehot/decode_{t}_oracle", "one-hot vs vanilla", "2"),
         ("multisoftmax/decode_{t}_oracle", "multisoftmax_lsp/decode_{t}_oracle", "+ LSP vs multi-softmax", "2"),
         ("multisoftmax/decode_{t}_oracle", "ft/decode_{t}_oracle", "fine-tuned vs multi-softmax", "3"),
         ("mono/decode_{t}_oracle", "ft/decode_{t}_oracle", "fine-tuned vs monolingual", "3"),
         ("ft_onehot/decode_{t}_oracle", "ft/decode_{t}_oracle", "fine-tuned vs fine-tuned one-hot", "3"),
         ("onehot/decode_{t}_oracle", "ft_onehot/decode_{t}_oracle", "fine-tuned one-hot vs one-hot", "3"),
         ("vanilla/decode_{t}", "multisoftmax_lid/decode_{t}_lidfree", "+ LID, LID-free vs vanilla", "4"),
         ("multisoftmax_lid/decode_{t}_oracle", "multisoftmax_lid/decode_{t}_lidfree",
          "+ LID: LID-free vs oracle language", "4"),
         ("multisoftmax/decode_{t}_oracle", "multisoftmax_lid/decode_{t}_oracle",
          "+ LID (oracle language) vs multi-softmax", "4"),
         ("multisoftmax_lid/decode_{t}_lidfree", "multisoftmax_lid/decode_{t}_lidfree_switchoff",
          "+ LID, LID-free: early switch-off (paper's rule, chosen on dev) vs none", "7"),
         ("multisoftmax_lid/decode_{t}_lidfree", "multisoftmax_lid/decode_{t}_lidfree_switchoff_posterior",
          "+ LID, LID-free: early switch-off (posterior variant, chosen on dev) vs none", "7")]
BOOTSTRAP_RESAMPLES = 1000


def paired_table(counts: dict, t: str) -> list[str]:
    """Markdown table of the paired bootstrap (Bisani & Ney 2004) for the pairs of :data:`PAIRS`
    found in ``counts[t]`` (:func:`utterance_counts`); empty when none is. A pair the bootstrap cannot
    compare (different utterances decoded, fewer than 2, counts that are not whole numbers) gets a row
    that says why (speechkit.scoring.significance.NotComparable), never none."""
    cs = counts.get(t)
    if not cs:
        return []
    rows = []
    for a_rel, b_rel, what, table in PAIRS:
        a_rel, b_rel = a_rel.format(t=t), b_rel.format(t=t)
        if a_rel not in cs["decodes"] or b_rel not in cs["decodes"]:
            continue
        cells = []
        res = {}
        why = None
        for unit, lens in (("wer", cs["words"]), ("cer", cs["chars"])):
            ea, eb = cs["decodes"][a_rel][unit], cs["decodes"][b_rel][unit]
            a = {u: (e, n) for u, e, n in zip(cs["utts"], ea, lens) if e is not None}
            b = {u: (e, n) for u, e, n in zip(cs["utts"], eb, lens) if e is not None}
            try:
                r = res[unit] = compare(a, b, statistic="error_rate", n_resamples=BOOTSTRAP_RESAMPLES, seed=0)
            except NotComparable as e:  # the row says why instead of vanishing
                why = f"{unit.upper()}: {e}".replace("|", "/")
                break
            cells += [f"{r.reference:.2f} -> {r.system:.2f}", signed_interval(r.delta, r.interval)]
        if why is not None:
            rows.append(f"| {what} | {table} | not compared: {why} | | | | | |")
            continue
        verdict = {-1: "B better", 1: "B worse", 0: "within noise"}[res["cer"].direction()]
        rows.append(f"| {what} | {table} | " + " | ".join(cells)
                    + f" | {res['cer'].prob_system_better:.3f} | {verdict} |")
    if not rows:
        return []
    return ["#### Paired comparisons (bootstrap over utterances)", "",
            f"Bisani & Ney (ICASSP 2004): the {len(cs['utts'])} utterances resampled with replacement, "
            f"{BOOTSTRAP_RESAMPLES} times (seed 0), the same resample for both systems; the difference "
            "B - A of the pooled rates (points; negative: B makes fewer errors) with its 95 % percentile "
            "interval, and P(B better): the share of resamples on which B makes fewer character errors. "
            "Verdict on CER: the interval excludes 0 or not. This covers the sampling of test utterances, "
            "not training variance: one training per system (one seed).", "",
            "| B vs A | paper table | WER A -> B | WER B - A [95 % CI] | CER A -> B | CER B - A [95 % CI] "
            "| P(B better) | verdict (CER) |", "|---|---|---:|---:|---:|---:|---:|---|"] + rows + [""]


#: The operating point of each switch-off rule chosen on dev (run.sh stage 4, local/pick_switch_off.py):
#: (rule, its record in the system dir, the suffix of its test decode dir, what the row calls it, tau's unit)
CHOSEN_SWITCH_OFF = [("gap", "switch_off.json", "switchoff", "the paper's rule (eq. 1)", ""),
                     ("posterior", "switch_off_posterior.json", "switchoff_posterior",
                      "the recipe's posterior variant", " ms")]


def _setting(x) -> str:
    """A recorded tau / s_th as the page writes it: ``inf`` for JSON's "inf", ``-`` when not recorded."""
    return "-" if x is None else ("inf" if x == "inf" else f"{x:g}" if isinstance(x, (int, float)) else str(x))


def chosen_switch_off_rows(sysdir: Path, t: str) -> tuple[list[str], list[dict]]:
    """Rows of the operating points chosen on dev, each with its dev figures (from the record,
    ``<sys>/switch_off.json`` / ``switch_off_posterior.json``) and this test set's figures (from
    ``decode_<t>_lidfree_switchoff[_posterior]``, decoded once at that point), and the records found.
    A rule with neither a record nor a test decode has no row; a test decode without a record shows
    "not recorded", a record without the test decode '-', a test decode at another setting than the
    record says so."""
    rows, records = [], []
    for rule, record, suffix, name, unit in CHOSEN_SWITCH_OFF:
        rec = read_json_if(sysdir / record)
        r = Decode(sysdir / f"decode_{t}_lidfree_{suffix}")
        if rec is None and not r.ok:
            continue
        test = [number((r.stats or {}).get("t_avg"), 3), number(r.avg("wer")), number(r.avg("cer")), number(r.lid_acc())]
        if rec is None:
            rows.append(f"| {name} | not recorded | | | | | " + " | ".join(test) + " |")
            continue
        records.append(rec)
        dev, base = rec.get("dev") or {}, rec.get("no_switch_off") or {}
        if rec.get("switch_off"):
            tau, s_th = _setting(rec.get("tau")) + unit, _setting(rec.get("s_th"))
        else:
            tau, s_th = "none within the margin: no switch-off", ""
        if r.ok and r.stats is not None and not _decoded_at(r.stats, rule, rec):
            test[0] += (f" (decoded at tau {r.stats.get('switch_off_tau')}, s_th {r.stats.get('switch_off_threshold')}: "
                        "not this choice; re-run stage 4)")
        rows.append(f"| {name} | {tau} | {s_th} | {number(dev.get('t_avg'), 3)} | {number(dev.get('wer'))} | "
                    f"{number(base.get('wer'))} | " + " | ".join(test) + " |")
    return rows, records


def _decoded_at(stats: dict, rule: str, rec: dict) -> bool:
    """Whether a test decode's decode_stats.json holds the setting ``rec`` chose (the posterior
    variant's tau is ms in the record, frames in the decode: its threshold and rule are compared)."""
    got_s = stats.get("switch_off_threshold")
    if not rec.get("switch_off"):
        return got_s in ("inf", None)
    if rule == "gap":
        return stats.get("switch_off_rule", "gap") == "gap" and got_s == rec.get("s_th") \
            and stats.get("switch_off_tau") == rec.get("tau")
    return stats.get("switch_off_rule") == "posterior" and got_s == rec.get("s_th")


def switch_off_tables(exp: Path, t: str, num_langs: int) -> list[str]:
    """Table 7: first the operating points chosen on dev (:func:`chosen_switch_off_rows`) with this
    test set decoded once at each, then, labelled as an analysis not used to choose, the sweeps on
    this test set by the paper's rule (eq. 1) and by the recipe's own posterior variant, each with the
    plain LID-free row (tau = s_th = inf) first. Decode dirs: ``decode_<t>_lidfree_switchoff[_posterior]``
    (the chosen points), ``decode_<t>_lidfree_tau<frames>_s<nats>`` (the paper's rule) and
    ``decode_<t>_lidfree_paper_tau<ms>ms_p<posterior>`` (the recipe's variant; the older name)."""
    sysdir = exp / "multisoftmax_lid"
    plain = Decode(sysdir / f"decode_{t}_lidfree")
    gap, posterior = [], []
    for d in sorted(sysdir.glob(f"decode_{t}_lidfree_*")):
        r = Decode(d)
        if not r.ok or r.stats is None:
            continue
        if m := GAP_SWITCH_OFF.search(d.name):
            gap.append(((int(m.group(1)), float(m.group(2))), m.group(1), m.group(2), r))
        elif m := POSTERIOR_SWITCH_OFF.search(d.name):
            # as Table 7 orders tau: from inf down to 10
            posterior.append(((-int(m.group(1)), -float(m.group(2))), m.group(1), m.group(2), r))
    chosen, records = chosen_switch_off_rows(sysdir, t)
    if not gap and not posterior and not chosen:
        return []
    out = ["#### Table 7: early switch-off (LID-free decoding)", "",
           f"T_avg (eq. 2): decoders active per encoder frame, averaged over utterances ({num_langs} = every "
           "language decoded throughout, 1 = one decoder).", ""]
    if records:
        margins = sorted({f"{r['margin_wer_points']:g}" for r in records if isinstance(r.get("margin_wer_points"),
                                                                                      (int, float))})
        utts = sorted({str(r["utterances"]) for r in records if "utterances" in r})
        out += ["**Operating points chosen on dev** (run.sh stage 4, `local/pick_switch_off.py`): per rule, the "
                "setting of its grid with the lowest dev T_avg whose dev WER is at most "
                f"{' / '.join(margins) or '-'} points above LID-free decoding without switch-off "
                "(`--switch_off_margin`; the paper's singled-out tau 30 / s_th 0.5 costs 1.30 points in its "
                f"Table 7), on {' / '.join(utts) or '-'} dev utterances; this test set is decoded once at it. "
                "Records: `multisoftmax_lid/switch_off.json`, `switch_off_posterior.json`.", "",
                "| rule | tau (chosen on dev) | s_th | dev T_avg | dev WER | dev WER, no switch-off | test T_avg "
                "| test WER | test CER | test LID acc % |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        out += chosen + [""]
    else:
        out += ["**Operating point chosen on dev: not recorded** (this run predates the choice on dev, "
                "`local/pick_switch_off.py`; run.sh stage 4 now makes it).", ""]
        if chosen:
            out += ["| rule | tau (chosen on dev) | s_th | dev T_avg | dev WER | dev WER, no switch-off | test T_avg "
                    "| test WER | test CER | test LID acc % |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            out += chosen + [""]
    if gap or posterior:
        out += ["**Analysis: sweep on test, not used to choose.** The grids below are decoded on this test set "
                "(run.sh --switch_off_test_sweep); no operating point is read off them. The first row of each "
                "grid is LID-free decoding without switch-off (tau = s_th = inf).", ""]

    def line(tau: str, s: str, r: Decode) -> str:
        return (f"| {tau} | {s} | {number(r.stats.get('t_avg'), 3)} | {number(r.avg('wer'))} | {number(r.avg('cer'))} | "
                f"{number(r.lid_acc())} | {number(r.stats.get('rtf'), 4)} |")

    head = ["| tau | s_th | T_avg | WER avg | CER avg | LID acc % | RTF |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for title, grid, unit in (
            ("The paper's rule (section 6.3, eq. 1): decoder l stops once t > tau encoder frames (30 ms "
             "each) and its cumulative LID log-posterior s_l(t) is more than s_th nats below the best "
             "running decoder's (speechkit-asr-decode --switch-off-rule gap). The paper's Table 7 sweeps tau "
             "1000, 100, 30 and 10 frames with s_th 0.2 and 0.5 (run.sh --switch_off_taus, "
             "--switch_off_thresholds).",
             gap, ""),
            ("The recipe's own variant (not in the paper): tau in ms (Table 7's column header read "
             "literally; the paper's text counts tau in frames), decoder l stops once t > tau and its LID "
             "posterior averaged over the frames so far is below s_th, the best running decoder never "
             "(--switch-off-rule posterior).", posterior, " ms")):
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
    device, :func:`speechkit.models.rnnt_parameters.paper_parameter_table`) and of this run's systems."""
    preset = paper_parameter_table()
    run: dict[str, float] = {}
    for key, sysname in (("vanilla", "vanilla"), ("onehot", "onehot"), ("multisoftmax", "multisoftmax"),
                         ("multisoftmax_lsp", "multisoftmax_lsp"), ("multisoftmax_lid", "multisoftmax_lid"),
                         ("multisoftmax_lsp_lid", "multisoftmax_lsp_lid")):
        mi = read_json_if(exp / sysname / "model_info.json")
        if mi:
            run[key] = mi["parameters"]["total"] / 1e6
    monos = [read_json_if(p) for p in sorted(exp.glob("mono_*/model_info.json"))]
    monos = [m["parameters"]["total"] / 1e6 for m in monos if m]
    if monos:
        run["mono"] = sum(monos) / len(monos)
    names = {"mono": "monolingual (one language)", "vanilla": "vanilla", "onehot": "one-hot",
             "multisoftmax": "multi-softmax", "multisoftmax_lsp": "multi-softmax + LSP",
             "multisoftmax_lid": "multi-softmax + LID", "multisoftmax_lsp_lid": "multi-softmax + LSP + LID"}
    out = ["### Table 6: parameters (M)", "",
           "paper: Joshi et al. 2021, Table 6. `paper` preset: speechkit's `paper` model sizes with the "
           "paper's Table 1 inventories (En-IN 133, Hi-IN 59, Ta-IN 97, Gu-IN 123 units; monolingual: En-IN) "
           "and a vanilla/one-hot output layer of 610 units (fitted: Table 1's union has 409; see "
           "speechkit/models/rnnt_parameters.py), built without training. this run: the trained systems "
           "(monolingual: the mean over languages).", "",
           "| system | paper | `paper` preset | preset vs paper | LID head (preset) | this run |",
           "|---|---:|---:|---:|---:|---:|"]
    for key, name in names.items():
        p = PAPER_TABLE6.get(key)
        q = preset[key]["total"] / 1e6
        rel = f"{100 * (q - p) / p:+.2f} %" if p else "-"
        lid = preset[key]["lid"] / 1e6
        out.append(f"| {name} | {number(p)} | {q:.2f} | {rel} | {f'{lid:.2f}' if lid else '-'} | "
                   f"{number(run.get(key))} |")
    return out + [""]


def checkpoint_cell(sysdir: Path, stats: dict | None) -> str:
    """The Systems table's checkpoint: from ``checkpoint_avg.json`` (run.sh --avg: the file decoded,
    with the dev CER of each candidate when several were given, "given" when one was); without that
    record (runs before it), the file the test decode's ``decode_stats.json`` names, "not recorded"
    as a choice; '-' when neither exists."""
    rec = read_json_if(sysdir / "checkpoint_avg.json")
    if rec is None:
        ckpt = (stats or {}).get("checkpoint")
        return "-" if not ckpt else f"{Path(str(ckpt)).name} (choice not recorded)"
    name = rec.get("checkpoint") or "-"
    if isinstance(rec.get("dev_cer"), dict) and rec["dev_cer"]:
        return f"{name} (" + ", ".join(f"{k}: {v:.2f}" for k, v in rec["dev_cer"].items()) + ")"
    return f"{name} (given)"


def render_run(run_dir: Path, page_dir: Path | None = None) -> list[str]:
    """The Markdown of one results run (``results/<run>``): provenance, data, Tables 2-7, systems, Table 6."""
    exp = run_dir
    info = read_json_if(run_dir / "run.json") or {}
    test_sets = info.get("test_sets") or ["test"]
    per = {s: {k: tuple(v) for k, v in d.items()} for s, d in (read_json_if(run_dir / "data.json") or {}).items()}
    out: list[str] = [f"## Run `{run_dir.name}`", ""]
    if (run_dir / "NOTES.md").is_file():   # hand-written: how the run was made, earlier measurements
        rel = Path(os.path.relpath(run_dir / "NOTES.md", page_dir or Path.cwd())).as_posix()
        out += [f"Notes on this run (how it was made; earlier measurements): [`{rel}`]({rel}).", ""]
    out += [provenance(run_dir)]

    # ---- data
    out += ["### Data (hours / utterances)", ""]
    sets = [s for s in ["train", "train_sp", "dev"] + list(test_sets) if s in per]
    langs = info.get("languages") or sorted({k for v in per.values() for k in v})
    out.append("| set | " + " | ".join(langs) + " | total |")
    out.append("|---|" + "---:|" * (len(langs) + 1))

    def hours(h: float | None) -> str:
        return "-" if h is None else f"{h:.3f} h"

    for s in sets:
        cells = [f"{hours(per[s][k][0])} / {per[s][k][1]}" if k in per[s] else "-" for k in langs]
        hs = [v[0] for v in per[s].values()]
        tot_h = None if any(h is None for h in hs) else sum(hs)
        tot_n = sum(v[1] for v in per[s].values())
        out.append(f"| {s} | " + " | ".join(cells) + f" | {hours(tot_h)} / {tot_n} |")
    if "train_sp" in per:
        out.append("")
        out.append("`train_sp`: Kaldi's 3-way speed-perturbed copy of `train` (factors 0.9, 1.0, 1.1), what the "
                   "systems were trained on.")
    out.append("")

    def row(name: str, dec: Decode, base: Decode | None, extra: list[str] | None = None) -> str:
        cells = [number(dec.lang("wer", k)) for k in langs] + [number(dec.avg("wer"))]
        cells += [number(dec.lang("cer", k)) for k in langs] + [number(dec.avg("cer"))]
        cells.append(number(werr(base.avg("wer"), dec.avg("wer")) if base is not None and base.ok else None, 1))
        cells.append(number(werr(base.avg("cer"), dec.avg("cer")) if base is not None and base.ok else None, 1))
        return f"| {name} | " + " | ".join(cells + (extra or [])) + " |"

    def header(extra: list[str] | None = None) -> list[str]:
        cols = [f"WER {k}" for k in langs] + ["WER avg"] + [f"CER {k}" for k in langs] + ["CER avg",
                                                                                            "WERR %", "CERR %"]
        cols += extra or []
        return ["| system | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]

    for t in test_sets:
        dec = lambda rel: Decode(exp / rel)  # noqa: E731
        van = dec(f"vanilla/decode_{t}")
        mono = dec(f"mono/decode_{t}_oracle")
        base = mono if mono.ok else None
        out += [f"### Test set `{t}`", "",
                "WER/CER in %; 'avg' pools every language's errors over all reference words/characters "
                "(the word-weighted average); WERR/CERR: relative reduction against the monolingual "
                "models (the paper's baseline)."]
        stats = [read_json_if(p) for p in sorted(exp.glob(f"*/decode_{t}*/decode_stats.json"))]
        stats = [x for x in stats if x]
        if stats:
            st = stats[0]
            search = f"beam search (beam {st['beam']})" if st.get("search") == "beam" else \
                f"greedy search (at most {st.get('max_symbols_per_frame')} symbols per frame)"
            penalties = sorted({float(x.get("blank_penalty") or 0.0) for x in stats})
            if len(penalties) > 1:
                bp = ", blank penalty per system (" + " to ".join(f"{p:g}" for p in (penalties[0], penalties[-1])) \
                    + " nats, chosen on dev: the Systems table)"
            else:
                bp = f", blank penalty {penalties[0]:g}" if penalties[0] else ""
            out[-1] += f" Decoding: {search}, streaming chunks of {st.get('chunk_frames')} feature frames{bp}."
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
        # Table 2's LSP row
        rows = [("multi-softmax", dec(f"multisoftmax/decode_{t}_oracle")),
                ("multi-softmax + LSP (prediction network per language)", dec(f"multisoftmax_lsp/decode_{t}_oracle"))]
        if rows[1][1].ok:
            out += ["#### Table 2, LSP row: language-specific prediction networks (section 4.1)", ""]
            out += header() + [row(n, d, base) for n, d in rows if d.ok] + [""]
        # Tables 4 and 5
        rows = [("vanilla (language = script of the hypothesis)", van, van.lid_acc()),
                ("multi-softmax + LID, oracle language", dec(f"multisoftmax_lid/decode_{t}_oracle"), None),
                ("multi-softmax + LID, LID-free", dec(f"multisoftmax_lid/decode_{t}_lidfree"),
                 dec(f"multisoftmax_lid/decode_{t}_lidfree").lid_acc()),
                ("multi-softmax, oracle language", dec(f"multisoftmax/decode_{t}_oracle"), None)]
        if rows[2][1].ok:
            out += ["#### Tables 4 and 5: LID-free decoding (WER: Table 4; LID accuracy: Table 5)", "",
                    "LID acc: utterance-level accuracy of the language each system chose (Table 5). WERR/CERR "
                    "against the monolingual models, as on the rest of this page (the paper's Table 4 gives "
                    "WERR against vanilla).", ""]
            out += header(["LID acc %"]) + [row(n, d, base, [number(a)]) for n, d, a in rows if d.ok] + [""]
        # Figure 2
        rows = [("multi-softmax, oracle language", dec(f"multisoftmax/decode_{t}_oracle")),
                ("+ LSP, oracle language", dec(f"multisoftmax_lsp/decode_{t}_oracle")),
                ("+ LID, oracle language", dec(f"multisoftmax_lid/decode_{t}_oracle")),
                ("+ LID, LID-free", dec(f"multisoftmax_lid/decode_{t}_lidfree")),
                ("+ LSP + LID, oracle language", dec(f"multisoftmax_lsp_lid/decode_{t}_oracle")),
                ("+ LSP + LID, LID-free", dec(f"multisoftmax_lsp_lid/decode_{t}_lidfree"))]
        if rows[4][1].ok or rows[5][1].ok:
            out += ["#### Figure 2: multi-softmax with LSP, LID and both", "",
                    "Figure 2 draws the LID head on the LSP model; the paper evaluates LID only on the plain "
                    "multi-softmax model (Tables 4-7), so the + LSP + LID rows have no counterpart in its "
                    "tables.", ""]
            out += header(["LID acc %"]) + [row(n, d, base, [number(d.lid_acc())]) for n, d in rows if d.ok] + [""]
        out += paired_table(read_json_if(run_dir / "utt_counts.json") or {}, t)
        # Table 7
        out += switch_off_tables(exp, t, len(langs))

        # systems
        out += ["#### Systems", "",
                "| system | parameters | decode params (per language) | steps | epochs (best) | train time | "
                "checkpoint (dev CER % per --avg) | blank penalty (dev CER % per candidate) | test RTF (1 core) |",
                "|---|---:|---:|---:|---:|---:|---|---|---:|"]
        for sysdir in sorted(p for p in exp.iterdir() if (p / "train_summary.json").is_file()):
            ti = train_info(sysdir)
            cands = sorted(sysdir.glob(f"decode_{t}*/decode_stats.json"))
            pick = [c for c in cands if c.parent.name in (f"decode_{t}", f"decode_{t}_oracle")] or cands[:1]
            st = read_json_if(pick[0]) if pick else None
            dp = ti.get("decode_params") or {}
            dps = ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in dp.items())
            secs = ti.get("train_seconds")
            bp = read_json_if(sysdir / "blank_penalty.json") or {}
            bps = "-" if "blank_penalty" not in bp else f"{bp['blank_penalty']:g}" + (
                " (" + ", ".join(f"{k}: {v:.2f}" for k, v in bp["dev_cer"].items()) + ")" if bp.get("dev_cer") else
                " (given)")
            out.append(f"| {sysdir.name} | {number(ti['params'] / 1e6 if 'params' in ti else None)} M | {dps} | "
                       f"{ti.get('steps', '-')} | {ti.get('epochs', '-')} ({ti.get('best_epoch', '-')}) | "
                       f"{duration(secs)} | {checkpoint_cell(sysdir, st)} | {bps} | "
                       f"{number(st.get('rtf') if st else None, 4)} |")
        out.append("")
    out += table6(exp)
    return out
