"""Score utterance-level language identification against the reference utt2lang.

    speechkit-score-lid REF_UTT2LANG HYP_UTT2LANG [--json OUT] [--plot PNG]

Prints the confusion matrix (rows: reference language, columns: hypothesis) with per-language
recall, then, as the last line,

    LID accuracy: 97.50 % [ 390 / 400 ]

Every reference utterance counts; one without a hypothesis is an error (column '<missing>',
warned about). Errors (exit 1, naming the file): an empty HYP; a HYP utterance that is not in
REF (file and line); a malformed line.
"""
from __future__ import annotations

import json
import logging
import sys

from speechkit.scoring.lid import read_utt2lang, score_lid
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write

logger = logging.getLogger("speechkit-score-lid")


def _run(args) -> int:
    setup_logging()
    ref = read_utt2lang(args.ref, "reference utt2lang")
    hyp = read_utt2lang(args.hyp, "hypothesis utt2lang", allow_empty=True)  # no language at all: 0 %
    for lineno, utt in enumerate(hyp, 1):
        if utt not in ref:
            raise DataError(f"{args.hyp}:{lineno}: utterance '{utt}' is not in the reference {args.ref}")
    res = score_lid(ref, hyp)
    if res.missing:
        logger.warning("%d of %d reference utterances have no hypothesis in %s (counted as errors): %s%s",
                       len(res.missing), res.total, args.hyp, " ".join(res.missing[:10]),
                       " ..." if len(res.missing) > 10 else "")
    print(res.table())
    print(f"balanced accuracy (mean recall): {res.balanced_accuracy():.2f} %")
    print(res.summary_line())
    if args.json:
        with atomic_write(args.json) as f:
            json.dump({"ref": str(args.ref), "hyp": str(args.hyp), **res.to_dict()}, f, indent=2, ensure_ascii=False)
            f.write("\n")
    if args.plot:
        res.plot(args.plot)
    return 0


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog="speechkit-score-lid")
    parser.add_argument("ref", help="reference utt2lang (<utt> <lang>)")
    parser.add_argument("hyp", help="hypothesis utt2lang (utterances must be in REF)")
    parser.add_argument("--json", default=None, help="write accuracy, confusion matrix, recall, precision here")
    parser.add_argument("--plot", default=None, help="save the confusion matrix as a PNG here")
    args = parser.parse_args(argv)
    return run_main("speechkit-score-lid", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
