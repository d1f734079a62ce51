"""Build ASR output-unit inventories (units.txt) from a data directory's transcripts.

    speechkit-make-units DATA_DIR OUT_DIR --unit char|char_wb|bpe [--per-language]
                         [--vocab-size N] [--min-count N] [--languages hi,ml] [--check DIR ...]

Unit types (see speechkit.text.units): 'char' = one unit per code point (NFC) plus <space>;
'char_wb' = code points with a 'B-' prefix on each word's first one (Joshi et al. 2021,
section 5); 'bpe' = sentencepiece BPE trained on DATA_DIR/text (bpe.model saved next to
units.txt). Ids: <blank> 0, <unk> 1, then the units.

Without --per-language: OUT_DIR/units.txt (+ bpe.model), one inventory over all the text.
With --per-language (needs DATA_DIR/utt2lang):
    OUT_DIR/languages.txt        <lang> <index>
    OUT_DIR/<lang>/units.txt     per-language inventory (+ bpe.model; --vocab-size is per language)
    OUT_DIR/<lang>/to_union.int  <id in lang> <id in union>
    OUT_DIR/union/units.txt      union of all languages' units (the vanilla model's softmax)
OUT_DIR/report.json holds the sizes and out-of-vocabulary counts of the training text and of
every --check directory (dev/test sets encoded with the new units; their OOV characters, which
map to <unk>, are logged per language). Transcripts that are empty or have no in-vocabulary
character are counted and reported as skips, never a crash. A language in a utt2lang that is not
among the known languages (--languages, or those of DATA_DIR) is an error naming file and line.
Nothing is written unless every input has been read and checked.

OUT_DIR is written as a whole (a temporary directory swapped in when every file is written, so no
file of an earlier layout or inventory stays beside the new one); the previous OUT_DIR is kept as
OUT_DIR/.backup/N. OUT_DIR may not be, contain or lie inside DATA_DIR or a --check dir.
"""
from __future__ import annotations

import logging
import sys

from speechkit.text.build_units import make_units
from speechkit.text.units import UNIT_TYPES
from speechkit.utils.cli import make_parser, run_main, setup_logging

logger = logging.getLogger("speechkit-make-units")


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog="speechkit-make-units")
    parser.add_argument("data_dir", help="Kaldi data directory with 'text' (and 'utt2lang' for --per-language)")
    parser.add_argument("out_dir", help="output directory for units.txt (and the per-language layout)")
    parser.add_argument("--unit", required=True, choices=UNIT_TYPES,
                        help="char: code points + <space>; char_wb: code points with B- word-begin "
                             "prefix; bpe: sentencepiece BPE")
    parser.add_argument("--per-language", action="store_true",
                        help="one inventory per language of utt2lang, plus their union (default: one "
                             "inventory over all text)")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="bpe only (required): ids per inventory including <blank> and <unk>; a soft "
                             "limit, tiny text gives fewer")
    parser.add_argument("--min-count", type=int, default=1,
                        help="char/char_wb only: leave out units seen fewer times in the training text "
                             "(they map to <unk>) (default: 1 = keep all)")
    parser.add_argument("--languages", default=None,
                        help="comma-separated language ids (with --per-language): every utt2lang must "
                             "use only these; a listed language without training text is an error "
                             "(default: the languages of DATA_DIR/utt2lang)")
    parser.add_argument("--check", action="append", default=[], metavar="DIR",
                        help="data directory (e.g. dev, test) to encode with the new units and report "
                             "OOV characters and skipped transcripts for, per language; repeatable")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging()
        make_units(args.data_dir, args.out_dir, args.unit, per_language=args.per_language,
                   vocab_size=args.vocab_size, min_count=args.min_count, languages=args.languages,
                   check=args.check, log=logger)
        return 0

    return run_main("speechkit-make-units", body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
