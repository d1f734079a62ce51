"""Score utterance-level language identification against the reference utt2lang.

    speechkit-score-lid REF_UTT2LANG HYP_UTT2LANG [--json OUT] [--plot PNG]

Prints the confusion matrix (rows: reference language, columns: hypothesis) with per-language
recall, then, as the last line,

    LID accuracy: 97.50 % [ 390 / 400 ]

Every reference utterance counts; one without a hypothesis is an error (column '<missing>',
warned about). An empty HYP (a system that attached no language to any utterance) therefore
scores 0 %, with that warning, and exits 0. Errors (exit 1, naming the file): an empty REF; a HYP
utterance that is not in REF (file and line); a malformed line; a --json/--plot that cannot be
written, that is a directory, or that names an input or the other output (checked before
anything is read or scored). The --json and --plot files are written before anything is printed.
"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from speechkit.scoring.lid import read_utt2lang, score_lid
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir
from speechkit.utils.outputs import check_output_files

logger = logging.getLogger("speechkit-score-lid")


def _check_outputs(args) -> None:
    """Refuse an output that cannot be written, is a directory, or is an input or the other output.

    Raises:
        WriteError: an output whose directory cannot be created or written, or that is a directory.
        OutputOverlapError (a ValueError): an output that is REF, HYP or the other output (names both).
    """
    outputs = {"--json": args.json, "--plot": args.plot}
    check_output_files(outputs, inputs={"REF": args.ref, "HYP": args.hyp})
    for path in outputs.values():
        if path is not None:
            ensure_writable_dir(Path(path).parent)


def _run(args) -> int:
    setup_logging()
    _check_outputs(args)  # before any work, so that an unwritable output never follows a printed result
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
    # the files first: nothing is printed as a result unless they are written
    if args.plot:
        res.plot(args.plot)
    if args.json:
        with atomic_write(args.json) as f:
            json.dump({"ref": str(args.ref), "hyp": str(args.hyp), **res.to_dict()}, f, indent=2, ensure_ascii=False)
            f.write("\n")
    print(res.table())
    print(f"balanced accuracy (mean recall): {res.balanced_accuracy():.2f} %")
    print(res.summary_line())
    return 0


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog="speechkit-score-lid")
    parser.add_argument("ref", help="reference utt2lang (<utt> <lang>)")
    parser.add_argument("hyp", help="hypothesis utt2lang (utterances must be in REF)")
    parser.add_argument("--json", default=None, help="write accuracy, confusion matrix, recall, precision here")
    parser.add_argument("--plot", default=None, help="save the confusion matrix as a PNG here")
    args = parser.parse_args(argv)
    return run_main("speechkit-score-lid", lambda: _run(args), parser=parser)


if __name__ == "__main__":
    sys.exit(main())
