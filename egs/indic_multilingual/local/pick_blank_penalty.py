#!/usr/bin/env python3
"""Choose a system's blank penalty on dev: the value whose decode has the lowest CER.

Usage: local/pick_blank_penalty.py --ref DEV_TEXT EXP_DIR P1=DECODE_DIR1 P2=DECODE_DIR2 ...
       local/pick_blank_penalty.py --given P EXP_DIR

Each ``P=DIR`` is a decode of the dev set with ``speechkit-asr-decode --blank-penalty P``; DIR/text is
scored against the reference lines of the utterances it holds (a monolingual system decodes only
its own language's utterances, the others are skipped by the decoder), so every decode must hold the
same utterances. The choice is the lowest pooled CER; a tie goes to the smaller penalty. Writes
``EXP_DIR/blank_penalty`` (the value, one line) and ``EXP_DIR/blank_penalty.json`` (the value, the
dev CER of each candidate in %, the number of utterances scored); ``--given P`` records P without a
choice (``"chosen_on": null``).

Errors (one line, exit 1): a decode without ``text``, decodes of different utterances, an utterance
missing from the reference, a penalty that is not a number.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from speechkit.scoring.wer import nfc, score
from speechkit.utils.cli import make_parser, run_main
from speechkit.utils.fileio import DataError, atomic_write, read_table

PROG = "pick_blank_penalty.py"


def cer_percent(ref: dict[str, str], hyp: dict[str, str]) -> float:
    """Pooled character error rate (%) of ``hyp`` against ``ref`` over the utterances of ``hyp``
    (speechkit-score-wer --cer's rules: NFC, code points, whitespace not counted).

    Raises:
        ValueError: an utterance of ``hyp`` is not in ``ref``.
    """
    result = score(nfc(ref), nfc(hyp), unit="char", mode="present").total
    return result.wer if result.wer is not None else 0.0


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("exp_dir", metavar="EXP_DIR")
    parser.add_argument("decodes", metavar="P=DECODE_DIR", nargs="*")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--ref", metavar="DEV_TEXT", help="the dev set's reference text")
    group.add_argument("--given", metavar="P", type=float, help="record P (no choice on dev)")
    args = parser.parse_args(argv)

    def body() -> int:
        exp = Path(args.exp_dir)
        if args.given is not None:
            if args.decodes:
                raise ValueError("--given takes no decode dirs")
            chosen, info = args.given, {"blank_penalty": args.given, "chosen_on": None}
        else:
            if len(args.decodes) < 2:
                raise ValueError("--ref: give at least two P=DECODE_DIR to choose from")
            ref = read_table(args.ref, allow_empty_value=True)
            cers: dict[float, float] = {}
            utts = None
            for item in args.decodes:
                p, eq, d = item.partition("=")
                try:
                    value = float(p)
                except ValueError:
                    raise ValueError(f"{item}: expected P=DECODE_DIR with a number P") from None
                if not eq:
                    raise ValueError(f"{item}: expected P=DECODE_DIR")
                hyp = read_table(Path(d) / "text", allow_empty_value=True)
                if utts is None:
                    utts = set(hyp)
                elif set(hyp) != utts:
                    raise DataError(f"{d}/text: holds other utterances than the first decode ({len(hyp)} vs {len(utts)})")
                try:
                    cers[value] = cer_percent(ref, hyp)
                except ValueError as e:
                    raise DataError(f"{d}/text: {e} ({args.ref})") from None
            chosen = min(cers, key=lambda v: (cers[v], v))
            info = {"blank_penalty": chosen, "chosen_on": str(args.ref), "utterances": len(utts or ()),
                    "dev_cer": {f"{v:g}": round(c, 4) for v, c in sorted(cers.items())}}
            print(f"{PROG}: {exp}: blank penalty {chosen:g} (dev CER " +
                  ", ".join(f"{v:g}: {c:.2f} %" for v, c in sorted(cers.items())) + ")")
        with atomic_write(exp / "blank_penalty") as f:
            f.write(f"{chosen:g}\n")
        with atomic_write(exp / "blank_penalty.json") as f:
            json.dump(info, f, indent=1, allow_nan=False)
            f.write("\n")
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
