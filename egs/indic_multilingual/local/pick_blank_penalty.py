#!/usr/bin/env python3
"""Choose a system's blank penalty (and, with several, its checkpoint average) on dev: lowest dev CER.

Usage: local/pick_blank_penalty.py --ref DEV_TEXT [--given-avg N] EXP_DIR P1=DECODE_DIR1 P2=DECODE_DIR2 ...
       local/pick_blank_penalty.py --ref DEV_TEXT EXP_DIR N1:P1=DECODE_DIR ... N2:P1=DECODE_DIR ...
       local/pick_blank_penalty.py --given P [--given-avg N] EXP_DIR

Each ``P=DIR`` is a decode of the dev set with ``speechkit-asr-decode --blank-penalty P``; each
``N:P=DIR`` one with the checkpoint ``run.sh --avg N`` names (0: ``best.pt``; N >= 2:
``avg<N>.pt``, the mean of the last N epochs) and penalty P. DIR/text is scored against the reference
lines of the utterances it holds (a monolingual system decodes only its own language's utterances,
the others are skipped by the decoder), so every decode must hold the same utterances; DIR's
``decode_stats.json`` must record the penalty (and checkpoint) its key names. The choice is the lowest
pooled CER over every decode given (with ``N:P``, over the pairs: each checkpoint with its own best
penalty); a tie goes to the smaller N, then the smaller penalty.

Writes ``EXP_DIR/blank_penalty`` (the value, one line) and ``EXP_DIR/blank_penalty.json`` (the value,
the dev CER of each penalty in % -- with ``N:P``, at the chosen checkpoint --, the number of
utterances scored); ``--given P`` records P without a choice (``"chosen_on": null``). With ``N:P``
decodes or ``--given-avg N`` also ``EXP_DIR/checkpoint_avg`` (N, one line) and
``EXP_DIR/checkpoint_avg.json`` (N, the checkpoint file, and with a choice the dev CER of each
checkpoint at its best penalty and of every pair).

Errors (one line, exit 1): a decode without ``text`` or ``decode_stats.json``, one whose recorded
penalty or checkpoint is not the one its key names, decodes of different utterances, an utterance
missing from the reference, a key that is not ``P`` / ``N:P`` with numbers (keys of both forms mixed,
``N:P`` keys with ``--given-avg``, an N of 1).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from speechkit.scoring.wer import nfc, score
from speechkit.utils.cli import make_parser, nonnegative_float, nonnegative_int, run_main
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.jsonio import read_json

PROG = "pick_blank_penalty.py"


def cer_percent(ref: dict[str, str], hyp: dict[str, str]) -> float:
    """Pooled character error rate (%) of ``hyp`` against ``ref`` over the utterances of ``hyp``
    (speechkit-score-wer --cer's rules: NFC, code points, whitespace not counted).

    Raises:
        ValueError: an utterance of ``hyp`` is not in ``ref``.
    """
    result = score(nfc(ref), nfc(hyp), unit="char", mode="present").total
    return result.wer if result.wer is not None else 0.0


def checkpoint_name(avg: int) -> str:
    """The checkpoint file run.sh decodes for ``--avg N``: ``best.pt`` for 0, else ``avg<N>.pt``.

    Raises:
        ValueError: N is 1 or negative (run.sh's --avg: 0 or a number of checkpoints >= 2).
    """
    if avg < 0 or avg == 1:
        raise ValueError(f"avg {avg}: expected 0 (best.pt) or a number of checkpoints >= 2")
    return "best.pt" if avg == 0 else f"avg{avg}.pt"


def parse_key(item: str) -> tuple[int | None, float, Path]:
    """``P=DIR`` -> (None, P, DIR); ``N:P=DIR`` -> (N, P, DIR).

    Raises:
        ValueError: another form, P not a number >= 0, N not 0 or a whole number >= 2.
    """
    key, eq, d = item.partition("=")
    n, colon, p = key.rpartition(":")
    try:
        if not (eq and d):
            raise ValueError
        value = float(p)
        avg = int(n) if colon else None
    except ValueError:
        raise ValueError(f"{item}: expected P=DECODE_DIR or N:P=DECODE_DIR with numbers N and P") from None
    if not value >= 0:
        raise ValueError(f"{item}: the penalty must be >= 0")
    if avg is not None:
        checkpoint_name(avg)
    return avg, value, Path(d)


def choose(cers: dict[tuple[int, float], float]) -> tuple[int, float]:
    """The (avg, penalty) of lowest dev CER; a tie goes to the smaller avg, then the smaller penalty.

    Args:
        cers: (avg N, blank penalty in nats) -> pooled dev CER in %; non-empty.
    """
    return min(cers, key=lambda k: (cers[k], k[0], k[1]))


def check_decode(d: Path, avg: int | None, penalty: float) -> None:
    """``d`` is a finished decode whose ``decode_stats.json`` records ``penalty`` (and, when ``avg`` is
    given, the checkpoint :func:`checkpoint_name` gives).

    Raises:
        DataError: no ``text`` or ``decode_stats.json``, or another penalty / checkpoint recorded.
    """
    for name in ("text", "decode_stats.json"):
        if not (d / name).is_file():
            raise DataError(f"{d}: no {name}: not a finished decode (speechkit-asr-decode)")
    stats = read_json(d / "decode_stats.json", expect=dict)
    got = float(stats.get("blank_penalty") or 0.0)
    if got != penalty:
        raise DataError(f"{d}/decode_stats.json: decoded with blank penalty {got:g}, its key names {penalty:g}")
    if avg is not None and Path(str(stats.get("checkpoint"))).name != checkpoint_name(avg):
        raise DataError(f"{d}/decode_stats.json: decoded from {stats.get('checkpoint')}, its key names "
                        f"{checkpoint_name(avg)} (avg {avg})")


def write_record(exp: Path, name: str, value: str, info: dict) -> None:
    """``exp/name`` (``value``, one line) and ``exp/name.json`` (``info``), each written atomically."""
    with atomic_write(exp / name) as f:
        f.write(f"{value}\n")
    with atomic_write(exp / f"{name}.json") as f:
        json.dump(info, f, indent=1, allow_nan=False)
        f.write("\n")


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("exp_dir", metavar="EXP_DIR")
    parser.add_argument("decodes", metavar="[N:]P=DECODE_DIR", nargs="*")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--ref", metavar="DEV_TEXT", help="the dev set's reference text")
    group.add_argument("--given", metavar="P", type=nonnegative_float, help="record P (no choice on dev)")
    parser.add_argument("--given-avg", metavar="N", type=nonnegative_int, default=None,
                        help="record run.sh's one --avg value N (no choice of checkpoint on dev)")
    args = parser.parse_args(argv)

    def body() -> int:
        exp = Path(args.exp_dir)
        if args.given_avg is not None:
            checkpoint_name(args.given_avg)
        if args.given is not None:
            if args.decodes:
                raise ValueError("--given takes no decode dirs")
            chosen_avg, chosen = args.given_avg, args.given
            info = {"blank_penalty": chosen, "chosen_on": None}
            avg_info = {"avg": chosen_avg, "chosen_on": None}
        else:
            if len(args.decodes) < 2:
                raise ValueError("--ref: give at least two [N:]P=DECODE_DIR to choose from")
            keys = [parse_key(item) for item in args.decodes]
            grid = keys[0][0] is not None
            if any((n is not None) != grid for n, _, _ in keys):
                raise ValueError("give every decode as P=DECODE_DIR or every one as N:P=DECODE_DIR, not both")
            if grid and args.given_avg is not None:
                raise ValueError("--given-avg: the N:P=DECODE_DIR decodes choose the checkpoint; give one or the other")
            ref = read_table(args.ref, allow_empty_value=True)
            cers: dict[tuple[int, float], float] = {}
            utts = None
            for n, value, d in keys:
                check_decode(d, n, value)
                hyp = read_table(d / "text", allow_empty_value=True)
                if utts is None:
                    utts = set(hyp)
                elif set(hyp) != utts:
                    raise DataError(f"{d}/text: holds other utterances than the first decode ({len(hyp)} vs {len(utts)})")
                if (n or 0, value) in cers:
                    raise ValueError(f"{d}: a second decode of {'' if n is None else f'avg {n}, '}penalty {value:g}")
                try:
                    cers[(n or 0, value)] = cer_percent(ref, hyp)
                except ValueError as e:
                    raise DataError(f"{d}/text: {e} ({args.ref})") from None
            chosen_avg, chosen = choose(cers)
            at = {p: c for (n, p), c in sorted(cers.items()) if n == chosen_avg}
            info = {"blank_penalty": chosen, "chosen_on": str(args.ref), "utterances": len(utts or ()),
                    "dev_cer": {f"{v:g}": round(c, 4) for v, c in at.items()}}
            if grid:
                info["checkpoint_avg"] = chosen_avg
                best = {n: min(c for (m, _), c in cers.items() if m == n) for n in sorted({n for n, _ in cers})}
                avg_info = {"avg": chosen_avg, "chosen_on": str(args.ref), "utterances": len(utts or ()),
                            "dev_cer": {str(n): round(c, 4) for n, c in best.items()},
                            "dev_cer_grid": {f"{n}:{p:g}": round(c, 4) for (n, p), c in sorted(cers.items())}}
            else:
                chosen_avg = args.given_avg
                avg_info = {"avg": chosen_avg, "chosen_on": None}
            print(f"{PROG}: {exp}: " + (f"checkpoint {checkpoint_name(chosen_avg)} (dev CER at its best penalty "
                                        + ", ".join(f"avg {n}: {c:.2f} %" for n, c in best.items()) + "), "
                                        if grid else "")
                  + f"blank penalty {chosen:g} (dev CER " + ", ".join(f"{v:g}: {c:.2f} %" for v, c in at.items()) + ")")
        write_record(exp, "blank_penalty", f"{chosen:g}", info)
        if chosen_avg is not None:
            avg_info["checkpoint"] = checkpoint_name(chosen_avg)
            write_record(exp, "checkpoint_avg", str(chosen_avg), avg_info)
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
