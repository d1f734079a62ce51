#!/usr/bin/env python3
"""Choose the early switch-off operating point of an LID model on dev (Joshi et al. 2021, section 6.3).

Usage: local/pick_switch_off.py --ref DEV_TEXT [--rule gap|posterior] [--margin POINTS] \\
           EXP_DIR BASELINE_DIR TAU,S=DECODE_DIR ...

BASELINE_DIR is the LID-free decode of the dev set without switch-off (``speechkit-asr-decode
--lid-free``); each ``TAU,S=DECODE_DIR`` the same dev set decoded with ``--switch-off-tau`` /
``--switch-off-threshold`` (``--rule gap``: the paper's rule, eq. 1, TAU in encoder frames, S in nats;
``--rule posterior``: the recipe's own variant, TAU in ms as run.sh names it, S a posterior). Each
decode's ``text`` is scored against DEV_TEXT (pooled WER and CER, speechkit-score-wer's rules: NFC,
whitespace-separated words, code points for CER); its ``decode_stats.json`` gives T_avg (eq. 2:
decoders active per encoder frame, averaged over utterances) and the LID accuracy.

The rule (the paper's Table 7 framing: "an appropriate setting with acceptable computational cost and
WER trade-off"; the setting its text singles out, tau 30 / s_th 0.5, costs 1.30 WER points, 21.84 ->
23.14, for T_avg 4 -> 1.72): among the settings whose dev WER is at most ``--margin`` points above the
baseline's (default 1.3, that cost), the one of lowest dev T_avg; ties go to the lower dev WER, then to
the larger tau, then to the larger s_th (the more cautious setting). The baseline itself (no
switch-off, T_avg = the number of languages) is always a candidate, so when no setting is within the
margin the choice is "no switch-off", and a setting that saves nothing over it is never chosen.

Writes ``EXP_DIR/switch_off`` (``--rule posterior``: ``switch_off_posterior``): one line ``TAU S``, or
``none``; and beside it ``.json`` with the choice, the rule and margin, the dev figures of the choice,
of the baseline and of every candidate, and the number of dev utterances.

Errors (one line, exit 1): a decode dir without ``text`` or ``decode_stats.json`` (or without T_avg),
decodes of different utterances, checkpoints or blank penalties, a decode whose recorded switch-off
setting is not the one its ``TAU,S`` names, a baseline decoded with switch-off, an utterance missing
from the reference, a malformed ``TAU,S=DIR``.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from speechkit.scoring.wer import nfc, score
from speechkit.utils.cli import make_parser, nonnegative_float, run_main
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.jsonio import read_json

PROG = "pick_switch_off.py"
#: the paper's Table 7: tau 30 / s_th 0.5 against no switch-off, 23.14 - 21.84 WER points
DEFAULT_MARGIN = 1.3
#: output file (without .json) per rule
RECORD = {"gap": "switch_off", "posterior": "switch_off_posterior"}
TAU_UNIT = {"gap": "encoder frames (30 ms)", "posterior": "ms"}


@dataclass(frozen=True)
class Point:
    """One operating point measured on dev.

    Attributes:
        tau, s_th: the switch-off setting (``inf`` both: no switch-off, the baseline).
        t_avg: T_avg (eq. 2), decoders active per encoder frame (1 .. number of languages).
        wer: pooled dev WER in %.
        cer: pooled dev CER in % (reported, not used by the rule).
        lid_accuracy: utterance LID accuracy in % (reported), None when not recorded.
    """

    tau: float
    s_th: float
    t_avg: float
    wer: float
    cer: float | None = None
    lid_accuracy: float | None = None


def choose(baseline: Point, grid: list[Point], margin: float) -> Point:
    """The operating point of lowest T_avg whose WER is at most ``margin`` points above ``baseline.wer``.

    ``baseline`` (no switch-off) is always admissible; ties on T_avg go to the lower WER, then the larger
    tau, then the larger s_th (so the baseline wins a tie with a setting that saves nothing).

    Args:
        baseline: LID-free decoding without switch-off (tau = s_th = inf).
        grid: the switch-off settings decoded on the same set.
        margin: the WER cost allowed, in absolute points (finite, >= 0).

    Raises:
        ValueError: ``margin`` negative or not finite.
    """
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"--margin must be a finite number of WER points >= 0, got {margin}")
    admissible = [baseline] + [p for p in grid if within(p, baseline, margin)]
    return min(admissible, key=lambda p: (p.t_avg, p.wer, -p.tau, -p.s_th))


def within(p: Point, baseline: Point, margin: float) -> bool:
    """Whether ``p``'s WER is at most ``margin`` points above the baseline's (1e-9 of rounding slack)."""
    return p.wer <= baseline.wer + margin + 1e-9


def pooled(ref: dict[str, str], hyp: dict[str, str], unit: str) -> float:
    """Pooled error rate (%) of ``hyp`` over its utterances, ``unit`` ``word`` or ``char``.

    Raises:
        ValueError: an utterance of ``hyp`` is not in ``ref``.
    """
    r = score(nfc(ref), nfc(hyp), unit=unit, mode="present").total
    return r.wer if r.wer is not None else 0.0


def _num(x: float) -> float | str | None:
    """A number for JSON: ``inf`` as the string ``"inf"`` (JSON has no infinity)."""
    return "inf" if x == math.inf else x


def measure(d: Path, ref: dict[str, str], ref_path: str, tau: float, s_th: float) -> tuple[Point, dict, set[str]]:
    """The dev figures of decode dir ``d`` (``text`` + ``decode_stats.json``), its stats and utterances.

    Raises:
        DataError: no ``text``, no ``decode_stats.json`` or no ``t_avg`` in it, an utterance not in ``ref``.
    """
    if not (d / "text").is_file():
        raise DataError(f"{d}: no text: not a finished decode (speechkit-asr-decode)")
    if not (d / "decode_stats.json").is_file():
        raise DataError(f"{d}: no decode_stats.json: not a finished decode (speechkit-asr-decode)")
    stats = read_json(d / "decode_stats.json", expect=dict)
    if not isinstance(stats.get("t_avg"), (int, float)):
        raise DataError(f"{d}/decode_stats.json: no t_avg: not an LID-free decode (speechkit-asr-decode --lid-free)")
    hyp = read_table(d / "text", allow_empty_value=True)
    try:
        wer, cer = pooled(ref, hyp, "word"), pooled(ref, hyp, "char")
    except ValueError as e:
        raise DataError(f"{d}/text: {e} ({ref_path})") from None
    lid = stats.get("chosen_language_accuracy")
    return Point(tau, s_th, float(stats["t_avg"]), wer, cer, lid if isinstance(lid, (int, float)) else None), \
        stats, set(hyp)


def check_setting(d: Path, stats: dict, rule: str, tau: float, s_th: float) -> None:
    """``d``'s decode_stats.json records the rule and threshold (and, for ``gap``, the tau) its name gives.

    Raises:
        DataError: naming the file, the recorded and the expected setting.
    """
    got_rule = stats.get("switch_off_rule", "gap")
    got_s = stats.get("switch_off_threshold")
    got_s = math.inf if got_s == "inf" else got_s
    got_tau = stats.get("switch_off_tau")
    baseline = tau == math.inf
    if baseline:
        ok = got_tau is None and got_s is None
        want = "no switch-off"
    else:
        ok = got_rule == rule and got_s is not None and float(got_s) == s_th and \
            (rule != "gap" or (got_tau is not None and float(got_tau) == tau))
        want = f"--switch-off-rule {rule}, tau {tau:g}, s_th {s_th:g}"
    if not ok or stats.get("mode") not in (None, "lid_free"):
        raise DataError(f"{d}/decode_stats.json: decoded with mode {stats.get('mode')}, rule {got_rule}, "
                        f"tau {got_tau}, s_th {stats.get('switch_off_threshold')}; expected LID-free, {want}")


def parse_candidate(item: str) -> tuple[float, float, Path]:
    """``TAU,S=DIR`` -> (tau, s_th, DIR).

    Raises:
        ValueError: not of that form, or TAU/S not numbers >= 0 (``inf`` allowed).
    """
    key, eq, d = item.partition("=")
    tau, comma, s = key.partition(",")
    try:
        if not (eq and comma and d):
            raise ValueError
        t, sv = float(tau), float(s)
    except ValueError:
        raise ValueError(f"{item}: expected TAU,S=DECODE_DIR with numbers TAU and S") from None
    if not (0 <= t < math.inf and sv >= 0):
        raise ValueError(f"{item}: TAU must be a finite number >= 0, S a number >= 0 (or inf)")
    return t, sv, Path(d)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("exp_dir", metavar="EXP_DIR")
    parser.add_argument("baseline", metavar="BASELINE_DIR", help="LID-free dev decode without switch-off")
    parser.add_argument("decodes", metavar="TAU,S=DECODE_DIR", nargs="+")
    parser.add_argument("--ref", metavar="DEV_TEXT", required=True, help="the dev set's reference text")
    parser.add_argument("--rule", choices=sorted(RECORD), default="gap",
                        help="gap: the paper's rule (eq. 1); posterior: the recipe's own variant")
    parser.add_argument("--margin", type=nonnegative_float, default=DEFAULT_MARGIN, metavar="POINTS",
                        help=f"dev WER allowed above the baseline's, absolute points (default {DEFAULT_MARGIN})")
    args = parser.parse_args(argv)

    def body() -> int:
        exp = Path(args.exp_dir)
        ref = read_table(args.ref, allow_empty_value=True)
        base, base_stats, utts = measure(Path(args.baseline), ref, args.ref, math.inf, math.inf)
        check_setting(Path(args.baseline), base_stats, args.rule, math.inf, math.inf)
        grid: list[Point] = []
        for item in args.decodes:
            tau, s_th, d = parse_candidate(item)
            p, stats, u = measure(d, ref, args.ref, tau, s_th)
            check_setting(d, stats, args.rule, tau, s_th)
            if u != utts:
                raise DataError(f"{d}/text: holds other utterances than {args.baseline} ({len(u)} vs {len(utts)})")
            for key in ("checkpoint", "blank_penalty"):
                if stats.get(key) != base_stats.get(key):
                    raise DataError(f"{d}/decode_stats.json: {key} {stats.get(key)!r}, the baseline "
                                    f"{args.baseline} {base_stats.get(key)!r}: not comparable")
            grid.append(p)
        chosen = choose(base, grid, args.margin)
        off = chosen is not base

        def fig(p: Point) -> dict:
            return {k: (None if v is None else _num(round(v, 4) if isinstance(v, float) and math.isfinite(v) else v))
                    for k, v in asdict(p).items()}

        info = {"rule": args.rule, "tau_unit": TAU_UNIT[args.rule], "switch_off": off,
                "tau": (int(chosen.tau) if chosen.tau.is_integer() else chosen.tau) if off else None,
                "s_th": _num(chosen.s_th) if off else None,
                "criterion": f"lowest dev T_avg among the settings whose dev WER is at most {args.margin:g} points "
                             "above LID-free decoding without switch-off (ties: lower WER, larger tau, larger s_th)",
                "margin_wer_points": args.margin, "chosen_on": str(args.ref), "utterances": len(utts),
                "dev": fig(chosen), "no_switch_off": fig(base),
                "candidates": [{**fig(p), "within_margin": within(p, base, args.margin)} for p in grid]}
        name = RECORD[args.rule]
        with atomic_write(exp / name) as f:
            f.write(f"{chosen.tau:g} {chosen.s_th:g}\n" if off else "none\n")
        with atomic_write(exp / f"{name}.json") as f:
            json.dump(info, f, indent=1, allow_nan=False)
            f.write("\n")
        what = f"tau {chosen.tau:g}, s_th {chosen.s_th:g}" if off else "no switch-off"
        print(f"{PROG}: {exp}: {args.rule} rule: {what} (dev T_avg {chosen.t_avg:.3f}, WER {chosen.wer:.2f} %; "
              f"no switch-off: T_avg {base.t_avg:.3f}, WER {base.wer:.2f} %; margin {args.margin:g} points, "
              f"{len(utts)} utterances)")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
