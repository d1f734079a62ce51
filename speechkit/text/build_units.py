"""Build ASR output-unit inventories from a data directory's transcripts (``speechkit-make-units``).

:func:`make_units` reads ``DATA_DIR/text`` (and ``utt2lang`` per language), builds one
:class:`~speechkit.text.units.UnitInventory` or a :class:`~speechkit.text.units.MultilingualUnits`
(see :mod:`speechkit.text.units` for the unit types), encodes the training text and every check
dir with it (:func:`encode_report`: out-of-vocabulary and skip counts, logged per language) and
writes OUT_DIR as a whole (the previous one kept as ``OUT_DIR/.backup/N``):
``units.txt`` (+ ``bpe.model``), or the per-language layout, and ``report.json``. Nothing is
written unless every input has been read and checked.

Example::

    from speechkit.text.build_units import make_units
    report = make_units("data/train", "data/lang_char", "char", per_language=True, check=["data/dev"])
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from speechkit.text.units import (
    MultilingualUnits, UnitInventory, UnkStats,
    check_language_id, encode_transcripts,
)
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.outputs import check_output_dir, replace_dir

logger = logging.getLogger(__name__)

__all__ = ["read_text_and_langs", "encode_report", "make_units"]


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
        raise naming_parameters(FileNotFoundError(f"{lang_file}: missing (`per_language` needs the language of every "
                                                  "utterance)"))
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


def encode_report(text: dict[str, str], units, utt2lang: dict[str, str] | None, name: str,
                  log: logging.Logger = logger) -> dict:
    """Encode every transcript (with skips), log OOV counts per language (to ``log``); return JSON-ready stats
    (``{lang: UnkStats.to_dict()}``, ``all`` for a single inventory; languages without utterances left out)."""
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
        log.log(level, "%s", st.summary(f"{name}/{lang}" if lang != "all" else name))
        if st.num_skipped:
            shown = list(st.skipped.items())[:10]
            log.warning("%s/%s: skipped %d transcript(s): %s%s", name, lang, st.num_skipped,
                           "; ".join(f"{u}: {r}" for u, r in shown),
                           " ..." if st.num_skipped > len(shown) else "")
        out[lang] = st.to_dict()
    return out


def make_units(data_dir: str | os.PathLike, out_dir: str | os.PathLike, unit: str, *, per_language: bool = False,
               vocab_size: int | None = None, min_count: int = 1, languages: str | None = None,
               check: list[str | os.PathLike] = (), log: logging.Logger = logger) -> dict:
    """Build the units of ``data_dir`` and write them to ``out_dir`` (see the module doc).

    Args:
        unit: ``char``, ``char_wb`` or ``bpe`` (:data:`speechkit.text.units.UNIT_TYPES`).
        per_language: one inventory per language of ``utt2lang`` plus their union.
        vocab_size: ``bpe`` only (required): ids per inventory, ``<blank>`` and ``<unk>`` included.
        min_count: ``char`` / ``char_wb`` only: leave out units seen fewer times.
        languages: comma-separated known language ids (with ``per_language``).
        check: data dirs to encode with the new units and report on.
        log: where the inventories, OOV counts and skips are logged (the CLI passes its own).

    Returns:
        The ``report.json`` dict (unit type, sizes, per-language OOV and skip counts).

    Raises:
        ParameterError: options that do not go together (``bpe`` without ``vocab_size``, ...), named.
        OutputOverlapError: ``out_dir`` is, contains or lies inside ``data_dir`` or a check dir.
        FileNotFoundError, DataError: a missing file, no utterances, a bad or unknown language
            (file and line named), a language without training text.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    if unit == "bpe" and vocab_size is None:
        raise ParameterError("vocab_size", "`unit=bpe` needs `vocab_size`")
    if unit != "bpe" and vocab_size is not None:
        raise ParameterError("vocab_size", "`vocab_size` applies to `unit=bpe` only")
    if unit == "bpe" and min_count != 1:
        raise ParameterError("min_count", "`min_count` applies to `unit=char`/char_wb only")
    known = None
    if languages is not None:
        try:
            known = [check_language_id(x, "`languages`") for x in languages.split(",") if x]
        except DataError as e:
            raise naming_parameters(e) from None
        if not known:
            raise ParameterError("languages", "`languages` is empty")
        if not per_language:
            raise ParameterError("languages", "`languages` needs `per_language`")

    check_output_dir(out_dir, inputs=[("DATA_DIR", data_dir)] + [("`check`", d) for d in check],
                     option="OUT_DIR")
    # Read and check every input before building or writing anything.
    text, utt2lang = read_text_and_langs(data_dir, per_language, known)
    if not text:
        raise DataError(f"{data_dir / 'text'}: no utterances")
    check_langs = (known or sorted(set(utt2lang.values()))) if per_language else None
    checks = [(d, *read_text_and_langs(Path(d), per_language, check_langs)) for d in check]

    if per_language:
        by_lang: dict[str, list[str]] = {lang: [] for lang in (known or [])}
        for utt, t in text.items():
            by_lang.setdefault(utt2lang[utt], []).append(t)
        empty = [lang for lang, ts in by_lang.items() if not any(t.strip() for t in ts)]
        if empty:
            raise DataError(f"{data_dir}: no training transcript for language(s) {' '.join(empty)}")
        units = MultilingualUnits.build(by_lang, unit, min_count=min_count, vocab_size=vocab_size)
        log.info("%s", units)
    else:
        units = UnitInventory.build(text.values(), unit, min_count=min_count, vocab_size=vocab_size)
        log.info("%s", units)

    report = {
        "unit_type": unit, "data_dir": str(data_dir), "min_count": min_count,
        "vocab_size_requested": vocab_size, "per_language": bool(per_language),
    }
    if isinstance(units, MultilingualUnits):
        report["languages"] = units.languages
        report["num_units"] = {**units.vocab_sizes, "union": len(units.union)}
    else:
        report["num_units"] = len(units)
    report["train"] = encode_report(text, units, utt2lang, str(data_dir), log)
    report["check"] = {str(d): encode_report(t, units, u2l, str(d), log) for d, t, u2l in checks}

    # Write as a whole, so that load_units() cannot pick up a file of an old inventory or layout.
    with replace_dir(out_dir) as tmp:
        units.save(tmp)
        with atomic_write(tmp / "report.json") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
    log.info("wrote %s", out_dir)
    return report
