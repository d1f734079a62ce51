"""Write a ZeroSpeech/ABXpy ABX item file from phone alignments: one item per phone token.

ALIGNMENTS is a '<utt> <start-s> <end-s> <phone>' file (what the corpus preparers write as
'phone_alignments' in a data dir), or a data dir holding one (its utt2spk is then used unless
--utt2spk says otherwise).

Each phone's context is the phone before and after it in the same utterance (excluded labels
such as h# still count as context: they mark silence), or --boundary-context at an utterance
edge. The speaker comes from --utt2spk, else from the utterance id before its first '_'
(speechkit's corpus preparers name utterances <speaker>_<rest>).

Output header: '#file onset offset #phone prev-phone next-phone speaker'; the times are copied
unchanged from the alignments. OUT_ITEM is written atomically and may not be the alignments file or
the utt2spk it reads (checked before any work).

Example:
  speechkit-make-abx-items data/test data/test/abx.item --min-duration 0.02
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from speechkit.scoring.abx_items import BOUNDARY, DEFAULT_EXCLUDE_PHONES, make_abx_items, read_phone_alignments, write_item_file
from speechkit.utils.cli import make_parser, nonnegative_float, run_main, setup_logging
from speechkit.utils.fileio import read_table
from speechkit.utils.outputs import check_output_files

PROG = "speechkit-make-abx-items"
logger = logging.getLogger(PROG)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("alignments", metavar="ALIGNMENTS", help="phone_alignments file, or a data dir holding one")
    parser.add_argument("out_item", metavar="OUT_ITEM", help="item file to write (atomically)")
    parser.add_argument("--utt2spk", metavar="F", default=None,
                        help="'<utt> <speaker>' table (default: DIR/utt2spk when ALIGNMENTS is a data dir, "
                             "else the utterance id before its first '_')")
    parser.add_argument("--exclude-phones", default=",".join(DEFAULT_EXCLUDE_PHONES), metavar="LIST",
                        help="comma-separated labels that get no item (default: %(default)s; '' for none)")
    parser.add_argument("--min-duration", type=nonnegative_float, default=0.0, metavar="S",
                        help="skip phones shorter than this many seconds (default: %(default)s)")
    parser.add_argument("--boundary-context", default=BOUNDARY, metavar="LABEL",
                        help="context label at an utterance edge (default: %(default)s)")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging()
        src = Path(args.alignments)
        utt2spk_path = args.utt2spk
        if src.is_dir():
            if utt2spk_path is None and (src / "utt2spk").is_file():
                utt2spk_path = src / "utt2spk"
            src = src / "phone_alignments"
        check_output_files({"OUT_ITEM": args.out_item},
                           inputs={f"the alignments {src}": src, f"utt2spk {utt2spk_path}": utt2spk_path},
                           input_dirs={"the data dir": args.alignments} if Path(args.alignments).is_dir() else None)
        alignments = read_phone_alignments(src)
        utt2spk = read_table(utt2spk_path) if utt2spk_path else None
        exclude = [p for p in args.exclude_phones.split(",") if p]
        rows = make_abx_items(alignments, utt2spk, exclude, args.min_duration, args.boundary_context)
        if not rows:
            raise ValueError(f"{src}: no phone left to make an item of (check --exclude-phones/--min-duration)")
        n = write_item_file(args.out_item, rows)
        n_segs = sum(len(v) for v in alignments.values())
        print(f"{PROG}: wrote {n} items ({len({r[3] for r in rows})} phones, {len({r[6] for r in rows})} speakers, "
              f"{len({r[0] for r in rows})} utterances; {n_segs - n} of {n_segs} segments skipped) to {args.out_item}")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
