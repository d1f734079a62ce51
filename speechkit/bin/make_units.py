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

import json
import logging
import sys
from pathlib import Path

from speechkit.text.units import (
    UNIT_TYPES, MultilingualUnits, UnitInventory, UnkStats,
    check_language_id, encode_transcripts,
)
from speechkit.utils.cli import ConfigError, make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.outputs import check_output_dir, replace_dir

logger = logging.getLogger("speechkit-make-units")


def read_text_and_langs(data_dir: Path, need_lang: bool, known: list[str] | None
                        ) -> tuple[dict[str, str], dict[str, str] | None]:
    """Read ``text`` (empty transcripts allowed) and, if ``need_lang``, ``utt2lang``.

    Raises:
        FileNotFoundError: a needed file is missing.
        DataError: a language id that is malformed or not in ``known`` (names utt2lang:line);
            an utterance of ``text`` with no language (names text:line).
    """
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{data_dir}: no such data directory")
    text_file = data_dir / "text"
    if not text_file.is_file():
        raise FileNotFoundError(f"{text_file}: missing (units are built from / checked on 'text')")
    text = read_table(text_file, allow_empty_value=True)
    if not need_lang:
        return text, None
    lang_file = data_dir / "utt2lang"
    if not lang_file.is_file():
        raise FileNotFoundError(f"{lang_file}: missing (--per-language needs the language of every utterance)")
    utt2lang = read_table(lang_file)
    for lineno, (utt, lang) in enumerate(utt2lang.items(), 1):  # read_table: one entry per line
        where = f"{lang_file}:{lineno}"
        if len(lang.split()) != 1:
            raise DataError(f"{where}: expected '<utt> <lang>', got a multi-word language {lang!r}")
        check_language_id(lang, where)
        if known is not None and lang not in known:
            raise DataError(f"{where}: unknown language '{lang}' for utterance '{utt}' "
                            f"(known: {' '.join(known)})")
    for lineno, utt in enumerate(text, 1):
        if utt not in utt2lang:
            raise DataError(f"{text_file}:{lineno}: utterance '{utt}' has no language in {lang_file}")
    return text, utt2lang


def encode_report(text: dict[str, str], units, utt2lang: dict[str, str] | None, name: str) -> dict:
    """Encode every transcript (with skips), log OOV counts per language; return JSON-ready stats."""
    invs = units.inventories if isinstance(units, MultilingualUnits) else {"all": units}
    for inv in invs.values():
        inv.reset_stats()
    encode_transcripts(text, units, utt2lang)
    out = {}
    for lang, inv in invs.items():
        st: UnkStats = inv.reset_stats()
        if st.num_utts == 0 and st.num_skipped == 0:
            continue
        level = logging.WARNING if st.num_oov or st.num_skipped else logging.INFO
        logger.log(level, "%s", st.summary(f"{name}/{lang}" if lang != "all" else name))
        if st.num_skipped:
            shown = list(st.skipped.items())[:10]
            logger.warning("%s/%s: skipped %d transcript(s): %s%s", name, lang, st.num_skipped,
                           "; ".join(f"{u}: {r}" for u, r in shown),
                           " ..." if st.num_skipped > len(shown) else "")
        out[lang] = st.to_dict()
    return out


def _run(args) -> int:
    setup_logging()
    data_dir, out_dir = Path(args.data_dir), Path(args.out_dir)
    if args.unit == "bpe" and args.vocab_size is None:
        raise ConfigError("--unit bpe needs --vocab-size")
    if args.unit != "bpe" and args.vocab_size is not None:
        raise ConfigError("--vocab-size applies to --unit bpe only")
    if args.unit == "bpe" and args.min_count != 1:
        raise ConfigError("--min-count applies to --unit char/char_wb only")
    known = None
    if args.languages is not None:
        known = [check_language_id(x, "--languages") for x in args.languages.split(",") if x]
        if not known:
            raise ConfigError("--languages is empty")
        if not args.per_language:
            raise ConfigError("--languages needs --per-language")

    check_output_dir(out_dir, inputs=[("DATA_DIR", data_dir)] + [("--check", d) for d in args.check],
                     option="OUT_DIR")
    # Read and check every input before building or writing anything.
    text, utt2lang = read_text_and_langs(data_dir, args.per_language, known)
    if not text:
        raise DataError(f"{data_dir / 'text'}: no utterances")
    check_langs = (known or sorted(set(utt2lang.values()))) if args.per_language else None
    checks = [(d, *read_text_and_langs(Path(d), args.per_language, check_langs)) for d in args.check]

    if args.per_language:
        by_lang: dict[str, list[str]] = {lang: [] for lang in (known or [])}
        for utt, t in text.items():
            by_lang.setdefault(utt2lang[utt], []).append(t)
        empty = [lang for lang, ts in by_lang.items() if not any(t.strip() for t in ts)]
        if empty:
            raise DataError(f"{data_dir}: no training transcript for language(s) {' '.join(empty)}")
        units = MultilingualUnits.build(by_lang, args.unit, min_count=args.min_count, vocab_size=args.vocab_size)
        logger.info("%s", units)
    else:
        units = UnitInventory.build(text.values(), args.unit, min_count=args.min_count, vocab_size=args.vocab_size)
        logger.info("%s", units)

    report = {
        "unit_type": args.unit, "data_dir": str(data_dir), "min_count": args.min_count,
        "vocab_size_requested": args.vocab_size, "per_language": bool(args.per_language),
    }
    if isinstance(units, MultilingualUnits):
        report["languages"] = units.languages
        report["num_units"] = {**units.vocab_sizes, "union": len(units.union)}
    else:
        report["num_units"] = len(units)
    report["train"] = encode_report(text, units, utt2lang, str(data_dir))
    report["check"] = {str(d): encode_report(t, units, u2l, str(d)) for d, t, u2l in checks}

    # Write as a whole, so that load_units() cannot pick up a file of an old inventory or layout.
    with replace_dir(out_dir) as tmp:
        units.save(tmp)
        with atomic_write(tmp / "report.json") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
    logger.info("wrote %s", out_dir)
    return 0


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
    return run_main("speechkit-make-units", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
