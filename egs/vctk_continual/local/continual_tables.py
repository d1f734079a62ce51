"""The tables of egs/vctk_continual's RESULTS.md (local/make_results.py renders them from results/<name>/
alone): per setup, the setup and its speaker orders, the strategies' final RA/FG (mean +/- sd over the orders),
RA/FG after every episode, the ER buffer sizes (Table 3), EWC's lambda chosen on dev, the paired comparisons over
the orders (t-intervals, speechkit.results.t_interval) with a verdict, and the figures.

Verdicts of a paired comparison A - B (the claim: A above B): with two or more orders, ``holds``
when the 95 % t-interval of the mean difference lies above 0, ``does not hold`` when it lies at
or below 0 (no difference in any order included), ``within noise`` otherwise; with one order,
``within noise`` when |A - B| <= NOISE_ONE_ORDER (15 points: one order's final RA moves by 10-15
points with the training randomness alone, see README.md), else ``holds`` / ``does not hold``,
marked "(one order)".
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from speechkit.results import duration, percent, provenance, read_json_if, signed, signed_interval, t_interval
from speechkit.scoring.continual_plots import plot_confusion_matrix, plot_ra_fg_curves
from speechkit.utils.jsonio import read_json

NOISE_ONE_ORDER = 0.15


# ------------------------------------------------------------------------------------------ names
def label(run: str) -> str:
    """A run name (run.sh stage 7) as the tables name it."""
    fixed = {"jt": "JT (the paper's: theta_init trained on all seen speakers, upper bound)",
             "jt_cumulative": "JT-cumulative (the recipe's own variant: all seen speakers, fine-tuned from the "
                              "previous episode)",
             "sa": "SA (sequential adaptation, lower bound)", "ewc": "EWC (the config's λ)"}
    if run in fixed:
        return fixed[run]
    if run.startswith("ewc_l"):
        return f"EWC (λ = {float(run[5:]):g})"
    if run.startswith("er_kd_b"):
        return f"ER-KD (N_B = {run[7:]})"
    if run.startswith("er_br_b"):
        b, k = run[7:].split("_k")
        return f"ER-BR (N_B = {b}, K = {k})"
    if run.startswith("er_b"):
        return f"ER (N_B = {run[4:]})"
    return run


def short(run: str) -> str:
    """A compact name for comparison rows and plots."""
    return {"jt": "JT", "jt_cumulative": "JT-cumulative", "sa": "SA", "ewc": "EWC"}.get(run) or \
        label(run).replace(" (the config's λ)", "")


def run_key(run: str) -> tuple:
    """Table order: JT, JT-cumulative, SA, EWC (config, then by λ), ER-KD, ER-BR, ER by buffer size."""
    m = re.match(r"^(er_kd_b|er_br_b|er_b|ewc_l)(.*)$", run)
    head = {"jt": 0, "jt_cumulative": 1, "sa": 2, "ewc": 3}
    if run in head:
        return (head[run], 0.0, run)
    if m is None:
        return (9, 0.0, run)
    num = re.match(r"[0-9.e+-]+", m.group(2))
    val = float(num.group(0)) if num else 0.0
    return ({"ewc_l": 4, "er_b": 5, "er_kd_b": 6, "er_br_b": 7}[m.group(1)], val, run)



# ------------------------------------------------------------------------------------------ render
def mean_sd(values) -> str:
    """Shares (0-1) as ``mean ± sd`` in percent over the orders (the sd with n - 1); one value alone; '-' for none."""
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return "-"
    if len(v) == 1:
        return percent(v[0])
    return f"{percent(v.mean())} ± {100 * v.std(ddof=1):.1f}"


def verdict(diffs: list[float]) -> str:
    """The verdict on 'A above B' from the per-order differences A - B (see the module docstring)."""
    if not diffs:
        return "not measured"
    c = t_interval(diffs)
    if c.interval is None:
        v = "within noise" if abs(c.delta) <= NOISE_ONE_ORDER else ("holds" if c.delta > 0 else "does not hold")
        return f"{v} (one order)"
    n = f"({len(diffs)} orders)"
    if c.interval[0] > 0:
        return f"holds {n}"
    if c.interval[1] <= 0:  # the whole interval at or below 0 (e.g. no difference in any order)
        return f"does not hold {n}"
    return f"within noise {n}"


class Setup:
    """One results/<name>/ folder, read."""

    def __init__(self, d: Path):
        self.dir, self.name = d, d.name
        self.info = read_json_if(d / "setup.json") or {}
        self.runs: dict[str, dict[str, dict]] = {}
        for s in sorted(d.glob("*/order*/scores.json")):
            run, order = s.parents[1].name, s.parent.name[len("order"):]
            rec = {"scores": read_json(s)}
            for f in ("last_episode", "train", "plan"):
                p = s.parent / f"{f}.json"
                rec[f] = read_json_if(p)
            self.runs.setdefault(run, {})[order] = rec
        self.runs = {r: dict(sorted(self.runs[r].items(), key=lambda kv: int(kv[0])))
                     for r in sorted(self.runs, key=run_key)}
        self.grid = read_json_if(d / "ewc_grid.json")

    def orders(self) -> dict[str, list[tuple[list[str], dict, list[str]]]]:
        """Per order K: every distinct (speaker order, how it was made, runs) among the runs; one entry when
        every run of order K used the same speakers in the same order. The design is ``{"design": "seed"}``
        when the results hold no plan.json (collected before it was copied: every order was drawn from its
        seed then)."""
        out: dict[str, list[tuple[list[str], dict, list[str]]]] = {}
        for r, recs in self.runs.items():
            for o, rec in recs.items():
                spk = list(rec["scores"]["order"])
                plan = rec.get("plan") or {}
                design = plan.get("order_design") or {"design": "seed", "seed": int(o), "assumed": True}
                if plan and plan.get("order") and list(plan["order"]) != spk:
                    spk = list(plan["order"])
                for entry in out.setdefault(o, []):
                    if entry[0] == spk and entry[1].get("design") == design.get("design"):
                        entry[2].append(r)
                        break
                else:
                    out[o].append((spk, design, [r]))
        return dict(sorted(out.items(), key=lambda kv: int(kv[0])))

    def ewc_lambdas(self, run: str) -> list[float]:
        """The lambdas the orders of an EWC run trained with (their plan.json; [] when not recorded)."""
        return sorted({float(rec["plan"]["ewc_lambda"]) for rec in self.runs.get(run, {}).values()
                       if rec.get("plan") and rec["plan"].get("ewc_lambda")})

    def ewc_note(self) -> str:
        """How the ``ewc`` run's lambda relates to the dev grid (``""`` without a grid)."""
        if not self.grid or "ewc" not in self.runs:
            return ""
        chosen = float(self.grid["chosen"]["lambda"])
        lams = self.ewc_lambdas("ewc")
        if lams == [chosen]:
            return f"λ = {chosen:g}, chosen on dev"
        used = " / ".join(f"{x:g}" for x in lams) if lams else "not recorded"
        return f"λ = {used}, not the dev grid's choice {chosen:g}"

    def final(self, run: str, key: str = "final_ra") -> dict[str, float]:
        return {o: rec["scores"][key] for o, rec in self.runs.get(run, {}).items()
                if rec["scores"].get(key) is not None}

    def last_share(self, run: str) -> dict[str, float]:
        """Per order: the share of the last episode's syntheses of earlier speakers verified as the last speaker."""
        out = {}
        for o, rec in self.runs.get(run, {}).items():
            ep, order = rec["last_episode"], rec["scores"]["order"]
            if not ep or len(order) < 2:
                continue
            earlier = [u for u in ep["utterances"] if u["speaker"] != order[-1]]
            if earlier:
                out[o] = float(np.mean([u["predicted"] == order[-1] for u in earlier]))
        return out

    def paired(self, a: str, b: str, key: str = "final_ra") -> list[float]:
        """Per order both runs have, with the same speakers in the same sequence: A - B (an order K that the
        two runs took in different sequences, e.g. one drawn from a seed and one a design row, is no pair)."""
        fa, fb = self.final(a, key), self.final(b, key)
        ra, rb = self.runs.get(a, {}), self.runs.get(b, {})
        return [fa[o] - fb[o] for o in fa
                if o in fb and ra[o]["scores"]["order"] == rb[o]["scores"]["order"]]


def comparison_rows(S: Setup) -> list[tuple[str, str, str, list[float]]]:
    """(what, kind, A - B description, per-order differences) of the paper's claims and the recipe's
    own observations, for the runs present."""
    have = set(S.runs)
    er = f"er_b{S.info.get('buffer_size', 5)}"
    rows = []

    def add(kind, what, a, b):
        if a in have and b in have:
            rows.append((what, kind, f"{short(a)} − {short(b)}", S.paired(a, b)))

    add("paper", "JT above SA (SA forgets; JT the upper bound, SA the lower: sec. 3.1, 3.2.1)", "jt", "sa")
    cl = [r for r in S.runs if r not in ("jt", "jt_cumulative")]
    if "jt" in have and cl:
        best = max(cl, key=lambda r: np.mean(list(S.final(r).values())) if S.final(r) else -1)
        add("paper", f"JT above the best continual-learning run ({short(best)}), sec. 3.1", "jt", best)
    add("paper", "ER above SA (sec. 4.1, 5)", er, "sa")
    add("paper", "ER above EWC (sec. 4.1, 5)", er, "ewc")
    if S.ewc_note():
        add("paper", f"EWC above SA (sec. 4.1: 'only a little bit better than SA in some cases'); EWC at "
            f"{S.ewc_note()} (section 'EWC's λ chosen on dev')", "ewc", "sa")
    else:
        add("paper", "EWC above SA (sec. 4.1: 'only a little bit better than SA in some cases'; +0.0 in every "
            "order means EWC was inert at its λ: untested; no λ grid on dev in these results)", "ewc", "sa")
    for r in S.runs:
        if r.startswith("ewc_l"):
            add("recipe", f"{short(r)} above SA", r, "sa")
    brs = [r for r in S.runs if r.startswith("er_br_b")]
    for r in brs:
        b = r[len("er_br_b"):].split("_k")[0]
        add("paper", f"ER-BR above ER at the same buffer (N_B = {b}), sec. 4.3, Table 4", r, f"er_b{b}")
    sizes = sorted(int(r[4:]) for r in S.runs if re.fullmatch(r"er_b\d+", r))
    if len(sizes) > 2:
        add("paper", f"a larger buffer retains more (N_B = {sizes[-1]} vs {sizes[0]}), Table 3",
            f"er_b{sizes[-1]}", f"er_b{sizes[0]}")
    if len(sizes) >= 2:
        for lo, hi in zip(sizes, sizes[1:]):
            add("paper", f"a larger buffer retains more (N_B = {hi} vs {lo}), Table 3", f"er_b{hi}", f"er_b{lo}")
    add("recipe", "ER-KD above ER (both the paper's, sec. 3.2.3; it claims no order between them)",
        f"er_kd_b{S.info.get('buffer_size', 5)}", er)
    add("recipe", "JT (the paper's) vs JT-cumulative (the recipe's own)", "jt", "jt_cumulative")
    return rows


def ewc_label(S: Setup) -> str:
    """The ``ewc`` run's name in the tables: its lambda (plan.json) and whether the dev grid chose it."""
    if S.ewc_note():
        return f"EWC ({S.ewc_note()})"
    lams = S.ewc_lambdas("ewc")
    return f"EWC (the config's λ = {' / '.join(f'{x:g}' for x in lams)})" if lams else label("ewc")


def _first_speakers_shared(S: Setup) -> list[tuple[str, list[str]]]:
    """(first speaker, orders) for every first speaker that more than one order begins with."""
    first: dict[str, list[str]] = {}
    for o, entries in S.orders().items():
        for spk, _, _ in entries[:1]:
            first.setdefault(spk[0], []).append(o)
    return [(s, os_) for s, os_ in first.items() if len(os_) > 1]


def order_lines(S: Setup) -> list[str]:
    """The setup's speaker orders: each order's speakers and how they were made (a Williams design row, or
    drawn from the seed), and whether two orders begin with the same speaker."""
    orders = S.orders()
    if not orders:
        return []
    L = [f"- speaker orders ({len(orders)}):"]
    for o, entries in orders.items():
        for spk, design, runs in entries:
            if design.get("design") == "williams":
                how = f"row {design.get('row')} of the Williams design over the {len(spk)} C-sorted speakers"
            elif design.get("assumed"):
                how = f"drawn from seed {design.get('seed')}: collected before the order design was recorded"
            else:
                how = f"drawn from seed {design.get('seed')}"
            which = "" if len(entries) == 1 else f" (runs: {', '.join(short(r) for r in runs)})"
            L.append(f"  - order {o}{which}: {' '.join(spk)} ({how})")
    shared = _first_speakers_shared(S)
    if shared:
        L.append("  - " + "; ".join(f"orders {' and '.join(os_)} begin with the same speaker ({s})"
                                    for s, os_ in shared))
    elif len(orders) > 1:
        L.append("  - no two orders begin with the same speaker")
    return L


def independence_note(S: Setup) -> str:
    """What the orders are as samples, for the comparisons' preamble."""
    designs = {e[1].get("design") for entries in S.orders().values() for e in entries}
    shared = _first_speakers_shared(S)
    if designs == {"williams"} and not shared:
        return ("The orders are distinct rows of a Williams design (rows of a Latin square: no two begin with the "
                "same speaker); they still permute the same continual speakers, so they are not independent samples "
                "and the intervals may be too narrow.")
    return ("The orders permute the same continual speakers"
            + (" and some begin with the same speaker" if shared else "")
            + ", so they are not independent samples and the intervals may be too narrow.")


def grid_lines(S: Setup) -> list[str]:
    """The section of the EWC lambda grid chosen on dev (results/<name>/ewc_grid.json, local/ewc_grid.py)."""
    g = S.grid
    orders = [str(o) for o in g.get("orders", [])]
    chosen = float(g["chosen"]["lambda"])
    nutts = sorted({v.get("num_utts") for e in g["grid"] for v in e["orders"].values() if v.get("num_utts")})
    L = ["### EWC's λ chosen on dev\n",
         f"Every λ of the grid trained in each of the n = {len(orders)} orders (runs `ewc_l<λ>`), every episode "
         f"scored by the verifier on syntheses of the dev sentences ({' / '.join(map(str, nutts)) or '?'} per "
         "speaker) of the speakers seen so far (`eval_dev/`). "
         f"Criterion: {g.get('criterion', '?')}; ties: {g.get('tie_rule', '?')}. Chosen: **λ = {chosen:g}**"
         + (f"; the EWC run of the tables trains at {S.ewc_note()}." if S.ewc_note() else ".") + "\n",
         f"| λ | final dev RA per order ({' / '.join(orders)}) | mean final dev RA (n = {len(orders)}) | "
         "mean final dev FG | |",
         "|---:|---|---:|---:|---|"]
    for e in g["grid"]:
        per = " / ".join(percent(e["orders"][o]["final_ra"]) if o in e["orders"] else "-" for o in orders)
        mark = "**chosen**" if float(e["lambda"]) == chosen else ""
        L.append(f"| {float(e['lambda']):g} | {per} | {percent(e['mean_final_ra'])} | {percent(e.get('mean_final_fg'))} | "
                 f"{mark} |")
    L.append("")
    return L


def render_setup(S: Setup, rel: str) -> list[str]:
    """The RESULTS.md section of one setup; its figures go to S.dir/figures, linked as ``rel``."""
    info, L = S.info, []
    cont, extra = info.get("continual_speakers", []), info.get("verifier_extra_speakers", [])
    orders = sorted({o for r in S.runs.values() for o in r}, key=int)
    L.append(f"## `{S.name}`: corpus {info.get('corpus', '?')}, base TTS {info.get('tts_model', '?')}\n")
    L.append(provenance(S.dir))
    L.append("### Setup\n")
    L.append(f"- continual speakers ({len(cont)}, one per episode, in each order's sequence below): "
             f"{' '.join(cont)}; pre-training speakers: {info.get('pretrain_speakers', '?')}")
    L.append(f"- the verifier's classes: the continual speakers seen so far + {len(extra)} pre-training "
             f"speakers{' (' + ' '.join(extra) + ')' if extra else ''}")
    for line in info.get("verifier", [])[:2]:
        L.append(f"- {line}")
    ti = info.get("theta_init") or {}
    bv = ti.get("best_valid") or {}
    if ti.get("epochs") is not None:
        mets = ", ".join(f"{k[6:]} {v:.4g}" for k, v in bv.items() if isinstance(v, (int, float)))
        L.append(f"- θ_init: {ti['epochs']} epochs ({ti.get('steps')} updates, "
                 f"{duration(ti.get('train_seconds'))}) on {ti.get('speakers', '?')} speakers; best "
                 f"validation epoch {ti.get('best_epoch')}: {mets}")
    L += order_lines(S)
    L.append("- RA, FG and shares in %; ± is the standard deviation over the orders\n")

    # ---- strategies
    L.append("### Strategies: final RA and FG (Figure 3's last episode)\n")
    L.append("| run | orders | final RA | final FG | RA per order | last-episode syntheses of earlier speakers "
             "verified as the last speaker | verifier held-out acc. (mean over episodes) | episodes | updates | "
             "training time |")
    L.append("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r, recs in S.runs.items():
        ra = S.final(r)
        name = ewc_label(S) if r == "ewc" else label(r)
        ver = [x for rec in recs.values() for x in rec["scores"]["verifier_accuracy"] if x is not None]
        tr = [e for rec in recs.values() for e in (rec["train"] or [])]
        note = "" if all(rec["scores"].get("complete") for rec in recs.values()) else " (unfinished)"
        L.append(f"| {name}{note} | {len(recs)} | {mean_sd(ra.values())} | "
                 f"{mean_sd(S.final(r, 'final_fg').values())} | {' / '.join(percent(x) for x in ra.values())} | "
                 f"{mean_sd(S.last_share(r).values())} | {percent(float(np.mean(ver))) if ver else '-'} | {len(tr)} | "
                 f"{sum(e.get('steps') or 0 for e in tr)} | {duration(sum(e.get('train_seconds') or 0 for e in tr))} |")
    L.append("")

    # ---- per episode
    T = min(len(rec["scores"]["retained_accuracy"]) for recs in S.runs.values() for rec in recs.values())
    L.append("### RA and FG after every episode (mean over orders; the paper's Figure 3 plots RA of one order, "
             "Figure 5 RA over 3 orders)\n")
    L.append("| run | " + " | ".join(f"RA_{t}" for t in range(1, T + 1)) + " | "
             + " | ".join(f"FG_{t}" for t in range(2, T + 1)) + " |")
    L.append("|---|" + "---:|" * (2 * T - 1))
    curves = {}
    for r, recs in S.runs.items():
        ra = np.array([[np.nan if x is None else x for x in rec["scores"]["retained_accuracy"][:T]]
                       for rec in recs.values()], dtype=float)
        fg = np.array([[np.nan if x is None else x for x in rec["scores"]["forgetting"][:T]]
                       for rec in recs.values()], dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (FG_1)
            mra, mfg = np.nanmean(ra, 0), np.nanmean(fg, 0)
        L.append(f"| {short(r)} | " + " | ".join(percent(x) for x in mra) + " | "
                 + " | ".join(percent(x) for x in mfg[1:]) + " |")
        curves[r] = {"ra": list(ra), "fg": list(fg)}
    L.append("")
    fig_dir = S.dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    er = f"er_b{info.get('buffer_size', 5)}"
    main = [r for r in S.runs if not re.fullmatch(r"er_b\d+", r) or r == er]
    main = [r for r in main if not r.startswith("ewc_l")]
    plot_ra_fg_curves({short(r): curves[r] for r in main}, fig_dir / "ra_fg_curves.png",
                      title=f"{S.name}: RA and FG per episode (mean ± sd over orders)", dpi=70)
    L.append(f"![RA and FG per episode]({rel}/ra_fg_curves.png)\n")

    # ---- buffer sizes
    sweep = [r for r in S.runs if re.fullmatch(r"er_b\d+", r) or r.startswith("er_br_b")]
    if len(sweep) > 1:
        L.append("### Experience replay: buffer size N_B and replication K (the paper's Table 3; ER-BR: Table 4, "
                 "Figure 5)\n")
        L.append("| run | orders | final RA | final FG | RA per order |")
        L.append("|---|---:|---:|---:|---|")
        for r in sweep:
            ra = S.final(r)
            L.append(f"| {label(r)} | {len(ra)} | {mean_sd(ra.values())} | {mean_sd(S.final(r, 'final_fg').values())} "
                     f"| {' / '.join(percent(x) for x in ra.values())} |")
        L.append("")
        plot_ra_fg_curves({short(r): curves[r] for r in sweep}, fig_dir / "er_buffer_sizes.png",
                          title=f"{S.name}: ER buffer sizes and ER-BR", dpi=70)
        L.append(f"![ER buffer sizes]({rel}/er_buffer_sizes.png)\n")

    # ---- EWC's lambda on dev
    if S.grid:
        L += grid_lines(S)

    # ---- comparisons
    rows = comparison_rows(S)
    if rows:
        L.append("### Paired comparisons of final RA over the speaker orders\n")
        L.append("Difference in points per order (same order, same speakers), its mean and 95 % t-interval over the "
                 "n orders it rests on (t with n − 1 degrees of freedom); "
                 f"verdict on 'A above B' (with one order: within noise up to {100 * NOISE_ONE_ORDER:.0f} points). "
                 "*paper*: a claim of the paper; *recipe*: this recipe's own observation. "
                 + independence_note(S) + "\n")
        L.append("| comparison | of | A − B | per order | mean [95 % interval] (n orders) | verdict |")
        L.append("|---|---|---|---|---|---|")
        for what, kind, ab, d in rows:
            c = t_interval(d) if d else None
            mean = (f"{signed_interval(c.delta, c.interval, 1, 100)} (n = {len(d)})" if c and c.interval else
                    (f"{signed(d[0], 1, 100)} (n = 1)" if d else "-"))
            L.append(f"| {what} | {kind} | {ab} | {' / '.join(signed(x, 1, 100) for x in d)} | {mean} | "
                     f"{verdict(d)} |")
        L.append("")
        if "sa" in S.runs:
            share = S.last_share("sa")
            ncls = len(extra) + len(cont)
            ci = t_interval(list(share.values())).interval if share else None
            rng = f" [{percent(max(ci[0], 0.0))}, {percent(min(ci[1], 1.0))}]" if ci else ""
            over = (f" (95 % t-interval over n = {len(share)} orders)" if ci else
                    f" (n = {len(share)} order)" if share else "")
            L.append(f"SA's collapse toward the last speaker: {mean_sd(share.values())} %{rng}{over} of its "
                     f"last-episode syntheses of earlier speakers verified as the last speaker (chance: 1 of {ncls} "
                     f"classes, {percent(1 / ncls)} %).\n")

    # ---- Figure 4
    first = orders[0] if orders else None
    shown = [r for r in ("sa", er, "jt", "jt_cumulative") if r in S.runs and first in S.runs[r]]
    cells = []
    for r in shown:
        ep = S.runs[r][first]["last_episode"]
        if not ep:
            continue
        order = S.runs[r][first]["scores"]["order"]
        classes = list(ep.get("classes") or [])
        labels = [c for c in classes if c not in order] + list(order)
        png = fig_dir / f"{r}_order{first}_confusion_matrix.png"
        plot_confusion_matrix([u["speaker"] for u in ep["utterances"]], [u["predicted"] for u in ep["utterances"]],
                              png, labels=labels, title=f"{short(r)}, order {first}, last episode", dpi=70)
        cells.append((short(r), f"{rel}/{png.name}"))
    if cells:
        L.append(f"### Last episode of order {first}: true vs verified speaker (Figure 4a)\n")
        L.append("| " + " | ".join(c for c, _ in cells) + " |")
        L.append("|" + "---|" * len(cells))
        L.append("| " + " | ".join(f"![{c}]({p})" for c, p in cells) + " |\n")
    audio = sorted((S.dir / "audio").glob("*.flac")) if (S.dir / "audio").is_dir() else []
    if audio:
        links = []
        for a in audio:
            run = a.stem.split("_order")[0]
            what = "vocoded ground truth" if a.stem.startswith("groundtruth") else f"{short(run)}, last episode"
            pred = ""
            if not a.stem.startswith("groundtruth") and first in S.runs.get(run, {}):
                ep = S.runs[run][first]["last_episode"] or {}
                spk = a.stem.rsplit("_", 1)[-1]
                hit = [u for u in ep.get("utterances", []) if u["speaker"] == spk]
                if hit:
                    pred = f" (verified as `{hit[0]['predicted']}`)"
            links.append(f"[{what}]({rel.rsplit('/', 1)[0]}/audio/{a.name}){pred}")
        L.append("To listen to, the first test sentence of the first continual speaker of order "
                 f"{first}: " + ", ".join(links) + ".\n")
    return L
