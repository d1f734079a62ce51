"""ASR output-unit inventories: graphemes, word-begin graphemes and sentencepiece pieces.

Joshi et al., "Multiple Softmax Architecture for Streaming Multilingual End-to-End ASR Systems"
(Interspeech 2021), section 5, use per-language *graphemes*, graphemes with a word-begin ``B-``
prefix, and the RNN-T blank as output units (Table 1: 133, 59, 97 and 123 units for En-IN, Hi-IN,
Ta-IN and Gu-IN; graphemes are distinct between languages); the ``vanilla`` model has one softmax
over the union of every language's units. This module builds, stores and applies such inventories.

Ids
    ``<blank>`` is always id 0 and ``<unk>`` id 1 (the RNN-T blank and the out-of-vocabulary
    symbol), then the unit type's fixed extra symbol (``<space>`` for ``char``, ``B-<unk>`` for
    ``char_wb``, none for ``bpe``), then the units in C-locale (code point) order; ``bpe`` keeps
    sentencepiece's own order after ``<blank>`` and ``<unk>``.

Unit types
    ``char``
        One unit per character; words are separated by ``<space>`` (ESPnet's ``token_type=char``).
    ``char_wb``
        One unit per character, the first character of each word prefixed with ``B-`` (paper
        section 5): ``"ab c" -> B-a b B-c``; no space unit. An out-of-vocabulary word-initial
        character becomes ``B-<unk>`` (not ``<unk>``) so word boundaries survive OOV characters
        and decoding still reconstructs every space.
    ``bpe``
        A sentencepiece BPE model (Kudo & Richardson 2018) trained on the training text with
        ``character_coverage=1.0`` and identity normalisation (so decoding is exact); the
        ``bpe.model`` file is stored next to ``units.txt``. ``vocab_size`` counts every id,
        ``<blank>`` and ``<unk>`` included; it is a soft limit (tiny data gives fewer pieces).

What is a character? A Unicode *code point* after NFC normalisation, not an extended grapheme
cluster (UAX #29). Reasons: ESPnet/fairseq character models use code points (the ``hindi_noa``
letter transcripts ``train.ltr`` split ``ड़`` into ``ड ़``; the paper does not say which it means
by a grapheme); Indic grapheme clusters
(consonant + vowel sign, conjuncts through the virama) multiply the inventory -- on the real
Hindi news text 69 code points against 444 base-plus-combining-mark clusters, on the Malayalam
sentences 71 against 347 -- and make most units rare. Combining marks (vowel signs, virama,
anusvara, nukta) and the zero-width (non-)joiners used by Malayalam are therefore units of their
own, and ``B-`` only ever attaches to the first code point of a word. NFC makes canonically
equivalent spellings (``U+095C`` vs ``U+0921 U+093C``) one unit sequence; it does not unify the
old and new Malayalam chillu encodings (``ന്‍`` vs ``ൻ``), which are different text.

Text is normalised before encoding: NFC, then whitespace (anything ``str.split`` splits on)
collapsed to single spaces with no leading or trailing space. For such text
``decode(encode(text)) == text`` exactly when every character is in the inventory; an
out-of-vocabulary character decodes as the literal ``<unk>``.

On disk an inventory is a Kaldi ``words.txt``-style ``units.txt`` with ``<unit> <id>`` per line
(ESPnet's token list with explicit ids). A multilingual set (:class:`MultilingualUnits`) is::

    OUT/languages.txt          <lang> <index>  (C-sorted; the language index of one-hot/LID heads)
    OUT/<lang>/units.txt       that language's inventory (+ bpe.model)
    OUT/<lang>/to_union.int    <id-in-lang> <id-in-union> for every id of the language
    OUT/union/units.txt        the union inventory (the vanilla model's softmax)
"""
from __future__ import annotations

import io
import logging
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import sentencepiece as spm

from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError, atomic_write, read_lines

logger = logging.getLogger(__name__)

BLANK = "<blank>"
UNK = "<unk>"
SPACE = "<space>"
WORD_BEGIN = "B-"
WB_UNK = WORD_BEGIN + UNK
SP_WORD_BEGIN = "\u2581"  # sentencepiece's word-begin mark '▁'
UNIT_TYPES = ("char", "char_wb", "bpe")
UNION = "union"
BPE_MODEL = "bpe.model"
UNITS_TXT = "units.txt"
LANGUAGES_TXT = "languages.txt"
TO_UNION = "to_union.int"
# No '.': a language id also keys the model's per-language layers (torch ModuleDict), where a
# '.' would split the parameter names (speechkit.models.rnnt.RNNTConfig.validate).
_LANG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def canonical_text(text: str) -> str:
    """NFC-normalise ``text`` and collapse whitespace to single spaces (no leading/trailing): the form the
    inventories see. Case and punctuation are left as they are (a corpus preparer's fuller normalisation is
    :func:`speechkit.data.corpora._common.normalize_text`)."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def check_language_id(lang: str, where: str = "") -> str:
    """Return ``lang`` if it can name a language directory, else raise.

    The rule of the units; the model adds its own (:meth:`speechkit.models.rnnt.RNNTConfig.validate`:
    no name of a torch ``ModuleDict`` attribute such as ``to``), and a recipe checks both at data
    preparation (egs/indic_multilingual/local/check_languages.py).

    Raises:
        DataError: ``lang`` is empty, has characters outside ``[A-Za-z0-9_-]`` (no ``.``: the model
            keys layers by it), or is ``union`` (reserved for the union inventory). ``where``
            (e.g. ``"utt2lang:3"``) prefixes the message.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(lang, str) or not _LANG_RE.match(lang):
        raise DataError(f"{prefix}language id {lang!r} must match [A-Za-z0-9][A-Za-z0-9_-]*")
    if lang == UNION:
        raise DataError(f"{prefix}language id 'union' is reserved for the union inventory")
    return lang


# ---------------------------------------------------------------------------------- statistics
@dataclass
class UnkStats:
    """Out-of-vocabulary bookkeeping of an inventory's :meth:`UnitInventory.encode` calls.

    Attributes:
        num_utts: transcripts encoded.
        num_chars: characters (code points, spaces excluded) encoded.
        num_oov: characters that mapped to ``<unk>`` (or ``B-<unk>``).
        oov: character -> how often it was out of vocabulary.
        num_skipped: transcripts :meth:`UnitInventory.encode_checked` refused (see ``skipped``).
        skipped: utterance key (or running index) -> reason, for refused transcripts.
    """

    num_utts: int = 0
    num_chars: int = 0
    num_oov: int = 0
    oov: Counter = field(default_factory=Counter)
    num_skipped: int = 0
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def oov_rate(self) -> float:
        """Percentage of encoded characters that were out of vocabulary (0 when none encoded)."""
        return 100.0 * self.num_oov / self.num_chars if self.num_chars else 0.0

    def summary(self, name: str = "", max_items: int = 10) -> str:
        """One log line, e.g. ``hi: 12 of 3456 characters (0.35 %) -> <unk>: 'x' x5, 'é' x3``."""
        head = f"{name}: " if name else ""
        line = (f"{head}{self.num_oov} of {self.num_chars} characters ({self.oov_rate:.2f} %) in "
                f"{self.num_utts} transcript(s) -> <unk>")
        if self.oov:
            items = ", ".join(f"{c!r} (U+{ord(c):04X}) x{n}" if len(c) == 1 else f"{c!r} x{n}"
                              for c, n in self.oov.most_common(max_items))
            more = f", ... ({len(self.oov) - max_items} more)" if len(self.oov) > max_items else ""
            line += f": {items}{more}"
        if self.num_skipped:
            line += f"; skipped {self.num_skipped} transcript(s)"
        return line

    def to_dict(self) -> dict:
        """JSON-ready form (OOV characters most frequent first)."""
        return {
            "num_utts": self.num_utts, "num_chars": self.num_chars, "num_oov": self.num_oov,
            "oov_rate": round(self.oov_rate, 4), "oov": dict(self.oov.most_common()),
            "num_skipped": self.num_skipped, "skipped": dict(self.skipped),
        }


# ---------------------------------------------------------------------------------- inventory
class UnitInventory:
    """A list of output units with ids: ``<blank>`` = 0, ``<unk>`` = 1, then the units.

    Build one with :meth:`build`, read one with :meth:`load`. ``encode`` turns a transcript into
    ids (``<unk>`` for out-of-vocabulary characters, counted in :attr:`stats`); ``decode`` turns
    ids back into text (``<blank>`` ids are dropped), reconstructing spaces exactly.

    Args:
        tokens: every unit in id order, starting with ``<blank>``, ``<unk>`` and the unit type's
            extra symbol (see the module docstring).
        unit_type: ``char``, ``char_wb`` or ``bpe``.
        language: the language this inventory belongs to (``None`` for a single/union inventory).
        sp_model: serialized sentencepiece model (``bpe`` only; ``None`` for a bpe union, which
            encodes through its languages' models, see :class:`MultilingualUnits`).

    Raises:
        ConfigError: unknown ``unit_type``; the reserved symbols are not where they must be; a
            duplicate unit or one containing whitespace; a char unit that is not one code point;
            a bpe model whose pieces differ from ``tokens``.
    """

    def __init__(self, tokens: Sequence[str], unit_type: str, language: str | None = None,
                 sp_model: bytes | None = None):
        if unit_type not in UNIT_TYPES:
            raise ConfigError(f"unit type {unit_type!r}: expected one of {', '.join(UNIT_TYPES)}")
        self.unit_type = unit_type
        self.language = language
        self.tokens: list[str] = list(tokens)
        head = _reserved(unit_type)
        if self.tokens[: len(head)] != head:
            raise ConfigError(f"{unit_type} inventory must start with {' '.join(head)}, "
                              f"got {' '.join(self.tokens[:len(head)])}")
        self.token_to_id: dict[str, int] = {}
        for i, tok in enumerate(self.tokens):
            if tok in self.token_to_id:
                raise ConfigError(f"unit {tok!r} appears twice (ids {self.token_to_id[tok]} and {i})")
            if not tok or any(c.isspace() for c in tok):
                raise ConfigError(f"unit {tok!r} (id {i}) is empty or contains whitespace")
            if i >= len(head) and unit_type != "bpe":
                base = tok[len(WORD_BEGIN):] if unit_type == "char_wb" and tok.startswith(WORD_BEGIN) \
                    and len(tok) > len(WORD_BEGIN) else tok
                if len(base) != 1:
                    raise ConfigError(f"{unit_type} unit {tok!r} (id {i}) is not one code point"
                                      f"{' (optionally B- prefixed)' if unit_type == 'char_wb' else ''}")
            self.token_to_id[tok] = i
        self.sp_model = sp_model
        self._sp = None
        self._sp_chars: set[str] = set()
        if unit_type == "bpe":
            self._sp_chars = {c for t in self.tokens[len(head):] for c in t if c != SP_WORD_BEGIN}
            if sp_model is not None:
                self._sp = _sp_processor(sp_model)
                pieces = [self._sp.id_to_piece(i) for i in range(self._sp.get_piece_size())]
                if pieces != self.tokens:
                    bad = next((i for i, (a, b) in enumerate(zip(pieces, self.tokens)) if a != b),
                               min(len(pieces), len(self.tokens)))
                    raise ConfigError(f"bpe model and unit list differ at id {bad} "
                                      f"({len(pieces)} pieces vs {len(self.tokens)} units)")
        self.stats = UnkStats()

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, texts: Iterable[str], unit_type: str, *, min_count: int = 1,
              vocab_size: int | None = None, language: str | None = None) -> "UnitInventory":
        """Build an inventory from training transcripts.

        Args:
            texts: transcripts (normalised here with :func:`canonical_text`; empty ones ignored).
            unit_type: ``char``, ``char_wb`` or ``bpe``.
            min_count: ``char``/``char_wb``: units seen fewer times are left out (they encode
                to ``<unk>``). Must be 1 for ``bpe`` (sentencepiece keeps every character).
            vocab_size: ``bpe`` only and required there: number of ids including ``<blank>``
                and ``<unk>`` (a soft limit: small data gives fewer).
            language: recorded on the inventory (for log messages and the multilingual layout).

        Raises:
            ConfigError: bad option combination, or no units at all (no non-empty transcript).
        """
        if unit_type not in UNIT_TYPES:
            raise ConfigError(f"unit type {unit_type!r}: expected one of {', '.join(UNIT_TYPES)}")
        if min_count < 1:
            raise ConfigError(f"min_count must be >= 1, got {min_count}")
        what = f" for language '{language}'" if language else ""
        texts = [t for t in (canonical_text(x) for x in texts) if t]
        if not texts:
            raise ConfigError(f"no non-empty transcript to build {unit_type} units{what}")
        if unit_type == "bpe":
            if min_count != 1:
                raise ConfigError("min_count applies to char/char_wb units only "
                                  "(sentencepiece keeps every training character)")
            if vocab_size is None:
                raise ConfigError("bpe units need vocab_size")
            model = _train_sentencepiece(texts, vocab_size)
            sp = _sp_processor(model)
            tokens = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
            if len(tokens) != vocab_size:
                logger.warning("bpe%s: asked for %d units, the text supports %d", what, vocab_size, len(tokens))
            return cls(tokens, unit_type, language, sp_model=model)
        if vocab_size is not None:
            raise ConfigError("vocab_size applies to bpe units only")
        counts: Counter = Counter()
        for t in texts:
            counts.update(_char_units(t, unit_type))
        counts.pop(SPACE, None)
        kept = [u for u, n in counts.items() if n >= min_count]
        dropped = {u: n for u, n in counts.items() if n < min_count}
        if dropped:
            logger.info("%s%s: %d units seen fewer than %d times left out (-> <unk>): %s", unit_type, what,
                        len(dropped), min_count, " ".join(sorted(dropped, key=_c_key)[:30]))
        return cls(_reserved(unit_type) + sorted(kept, key=_c_key), unit_type, language)

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        lang = f", language={self.language!r}" if self.language else ""
        return f"UnitInventory({self.unit_type!r}, {len(self)} units{lang})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, UnitInventory) and self.unit_type == other.unit_type
                and self.tokens == other.tokens)

    @property
    def blank_id(self) -> int:
        """Id of the RNN-T blank (always 0)."""
        return 0

    @property
    def unk_id(self) -> int:
        """Id of ``<unk>`` (always 1)."""
        return 1

    @property
    def can_encode(self) -> bool:
        """False only for a bpe union inventory (it encodes through its languages' models)."""
        return self.unit_type != "bpe" or self._sp is not None

    def reset_stats(self) -> UnkStats:
        """Return the OOV statistics gathered so far and start new ones."""
        old, self.stats = self.stats, UnkStats()
        return old

    # ------------------------------------------------------------------ encoding
    def tokenize(self, text: str) -> list[str]:
        """Units of ``text`` as strings, before any ``<unk>`` mapping (bpe: after it).

        ``"ab c"`` -> char: ``a b <space> c``; char_wb: ``B-a b B-c``; bpe: sentencepiece pieces.
        """
        text = canonical_text(text)
        if self.unit_type == "bpe":
            return self._require_sp().encode(text, out_type=str) if text else []
        return _char_units(text, self.unit_type)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; out-of-vocabulary characters become ``<unk>`` (``B-<unk>`` word-initially
        for char_wb) and are counted in :attr:`stats`. Never fails on content; an all-``<unk>``
        result is possible (see :meth:`encode_checked`).

        Raises:
            ConfigError: a bpe union inventory (use :meth:`MultilingualUnits.encode`).
        """
        return self._encode(canonical_text(text))[0]

    def encode_checked(self, text: str, key: str | None = None) -> tuple[list[int] | None, str | None]:
        """Like :meth:`encode` but refuse transcripts a model cannot learn from.

        Returns:
            ``(ids, None)``, or ``(None, reason)`` when the transcript is empty or has no
            in-vocabulary symbol (every character is out of vocabulary); the refusal is counted
            in :attr:`stats` under ``key`` (default: a running number).
        """
        norm = canonical_text(text)
        reason = None
        if not norm:
            reason = "empty transcript"
            ids = None
        else:
            ids, n_known = self._encode(norm)
            if n_known == 0:
                chars = norm.replace(" ", "")
                reason = (f"no in-vocabulary symbol: all {len(chars)} characters map to <unk> "
                          f"({chars[:20]!r}{'...' if len(chars) > 20 else ''})")
        if reason is not None:
            self.stats.num_skipped += 1
            self.stats.skipped[key if key is not None else str(self.stats.num_skipped)] = reason
            return None, reason
        return ids, None

    def _encode(self, text: str) -> tuple[list[int], int]:
        """(ids, number of in-vocabulary non-space units) for normalised ``text``; updates stats."""
        st = self.stats
        st.num_utts += 1
        if self.unit_type == "bpe":
            sp = self._require_sp()
            ids = sp.encode(text) if text else []
            for c in text:
                if c != " ":
                    st.num_chars += 1
                    if c not in self._sp_chars:
                        st.num_oov += 1
                        st.oov[c] += 1
            known = sum(1 for i in ids if i > 1 and self.tokens[i] != SP_WORD_BEGIN)
            return ids, known
        ids: list[int] = []
        known = 0
        t2i = self.token_to_id
        for unit in _char_units(text, self.unit_type):
            if unit == SPACE:
                ids.append(t2i[SPACE])
                continue
            st.num_chars += 1
            i = t2i.get(unit)
            if i is None:
                wb = self.unit_type == "char_wb" and unit.startswith(WORD_BEGIN) and len(unit) > 2
                st.num_oov += 1
                st.oov[unit[2:] if wb else unit] += 1
                i = t2i[WB_UNK] if wb else self.unk_id
            else:
                known += 1
            ids.append(i)
        return ids, known

    def _require_sp(self):
        if self._sp is None:
            raise ConfigError("this bpe inventory has no sentencepiece model (a union inventory "
                              "encodes through its languages' models: MultilingualUnits.encode)")
        return self._sp

    # ------------------------------------------------------------------ decoding
    def decode(self, ids: Iterable[int]) -> str:
        """Text of a unit-id sequence; ``<blank>`` (0) is skipped, ``<unk>`` becomes ``<unk>``.

        Spaces come from ``<space>`` (char), ``B-`` units (char_wb) or ``▁`` (bpe); the result
        is whitespace-normalised, so a hypothesis that starts mid-word or repeats ``<space>``
        still decodes to clean text.

        Raises:
            ValueError: an id outside ``[0, len(self))``.
        """
        n = len(self.tokens)
        pieces: list[str] = []
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"unit id {i} out of range [0, {n}) of {self!r}")
            if i == 0:
                continue
            tok = self.tokens[i]
            if self.unit_type == "char":
                pieces.append(" " if tok == SPACE else tok)
            elif self.unit_type == "char_wb":
                if tok.startswith(WORD_BEGIN) and len(tok) > 2:
                    pieces.append(" ")
                    tok = tok[2:]
                pieces.append(tok)
            else:
                pieces.append(tok.replace(SP_WORD_BEGIN, " "))
        return " ".join("".join(pieces).split())

    # ------------------------------------------------------------------ I/O
    def save(self, out_dir: str | os.PathLike) -> Path:
        """Write ``out_dir/units.txt`` (and ``bpe.model`` for bpe) atomically; return units.txt."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.sp_model is not None:
            with atomic_write(out_dir / BPE_MODEL, "wb") as f:
                f.write(self.sp_model)
        elif (out_dir / BPE_MODEL).exists():
            (out_dir / BPE_MODEL).unlink()  # stale model from an earlier bpe run
        with atomic_write(out_dir / UNITS_TXT) as f:
            for i, tok in enumerate(self.tokens):
                f.write(f"{tok} {i}\n")
        return out_dir / UNITS_TXT

    @classmethod
    def load(cls, path: str | os.PathLike, unit_type: str | None = None,
             language: str | None = None) -> "UnitInventory":
        """Read ``units.txt`` (``path`` is the file or its directory) and a ``bpe.model`` beside it.

        ``unit_type`` is inferred when not given: ``bpe`` if ``bpe.model`` is present, else
        ``char`` if ``<space>`` is a unit, else ``char_wb`` if ``B-<unk>`` is one.

        Raises:
            FileNotFoundError: no units.txt.
            DataError: a malformed line, a non-integer or duplicate id, ids not 0..N-1
                (message names file and line).
            ConfigError: the list does not fit the unit type (see the constructor).
        """
        path = Path(path)
        if path.is_dir():
            path = path / UNITS_TXT
        by_id: dict[int, str] = {}
        for lineno, line in enumerate(read_lines(path), 1):
            parts = line.split()
            if len(parts) != 2:
                raise DataError(f"{path}:{lineno}: expected '<unit> <id>', got {line!r}")
            try:
                i = int(parts[1])
            except ValueError:
                raise DataError(f"{path}:{lineno}: id {parts[1]!r} is not an integer") from None
            if i in by_id:
                raise DataError(f"{path}:{lineno}: id {i} already used by unit {by_id[i]!r}")
            by_id[i] = parts[0]
        if sorted(by_id) != list(range(len(by_id))):
            missing = next(i for i in range(len(by_id) + 1) if i not in by_id)
            raise DataError(f"{path}: ids must be 0..{len(by_id) - 1} without gaps; id {missing} is missing")
        tokens = [by_id[i] for i in range(len(by_id))]
        model_path = path.parent / BPE_MODEL
        sp_model = model_path.read_bytes() if model_path.is_file() else None
        if unit_type is None:
            unit_type = ("bpe" if sp_model is not None else "char" if SPACE in tokens
                         else "char_wb" if WB_UNK in tokens else None)
            if unit_type is None:
                raise DataError(f"{path}: cannot tell the unit type (no bpe.model, no {SPACE}, "
                                f"no {WB_UNK}); pass unit_type")
        try:
            return cls(tokens, unit_type, language, sp_model=sp_model if unit_type == "bpe" else None)
        except ConfigError as e:
            raise DataError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------------- multilingual
class MultilingualUnits:
    """Per-language inventories plus their union (the ``vanilla`` model's single softmax).

    Args:
        inventories: language -> its :class:`UnitInventory` (all of one unit type).
        union: inventory over every language's units; built by :meth:`build` or :meth:`union_of`.

    Attributes:
        languages: C-sorted language ids; ``languages.index(lang)`` is the language index used
            for one-hot inputs and LID heads.
        to_union: language -> list mapping each of its ids to the union id (blank->0, unk->1).

    Raises:
        ConfigError: mixed unit types, or a language unit missing from the union.
    """

    def __init__(self, inventories: Mapping[str, UnitInventory], union: UnitInventory):
        if not inventories:
            raise ConfigError("no languages")
        self.languages = sorted(inventories, key=_c_key)
        self.inventories = {lang: inventories[lang] for lang in self.languages}
        types = {inv.unit_type for inv in self.inventories.values()} | {union.unit_type}
        if len(types) != 1:
            raise ConfigError(f"mixed unit types {sorted(types)}")
        self.unit_type = union.unit_type
        self.union = union
        self.to_union: dict[str, list[int]] = {}
        for lang, inv in self.inventories.items():
            inv.language = lang
            missing = [t for t in inv.tokens if t not in union.token_to_id]
            if missing:
                raise ConfigError(f"language '{lang}': units missing from the union: {' '.join(missing[:10])}")
            self.to_union[lang] = [union.token_to_id[t] for t in inv.tokens]

    @staticmethod
    def union_of(inventories: Iterable[UnitInventory]) -> UnitInventory:
        """The union inventory: reserved symbols, then every language's units in C order."""
        inventories = list(inventories)
        unit_type = inventories[0].unit_type
        head = _reserved(unit_type)
        units = {t for inv in inventories for t in inv.tokens} - set(head)
        return UnitInventory(head + sorted(units, key=_c_key), unit_type)

    @classmethod
    def build(cls, texts_by_lang: Mapping[str, Iterable[str]], unit_type: str, *, min_count: int = 1,
              vocab_size: int | None = None) -> "MultilingualUnits":
        """Build one inventory per language (same options for all) and their union.

        ``vocab_size`` (bpe) is per language. Raises as :meth:`UnitInventory.build`.
        """
        invs = {lang: UnitInventory.build(texts, unit_type, min_count=min_count, vocab_size=vocab_size,
                                          language=lang)
                for lang, texts in texts_by_lang.items()}
        return cls(invs, cls.union_of(invs.values()))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{lang}: {len(inv)}" for lang, inv in self.inventories.items())
        return f"MultilingualUnits({self.unit_type!r}, union {len(self.union)}; {sizes})"

    def lang_index(self, lang: str) -> int:
        """Index of ``lang`` in :attr:`languages`. Raises KeyError naming the known languages."""
        try:
            return self.languages.index(lang)
        except ValueError:
            raise KeyError(f"unknown language {lang!r}; known: {' '.join(self.languages)}") from None

    def __getitem__(self, lang: str) -> UnitInventory:
        self.lang_index(lang)
        return self.inventories[lang]

    @property
    def vocab_sizes(self) -> dict[str, int]:
        """Language -> number of ids (blank included): what a multi-softmax model's heads need."""
        return {lang: len(inv) for lang, inv in self.inventories.items()}

    def encode(self, text: str, lang: str, target: str = "lang") -> list[int]:
        """Encode ``text`` with ``lang``'s inventory; ``target="union"`` maps the ids into the union.

        Out-of-vocabulary characters are judged against the *language's* inventory (and counted
        in its :attr:`UnitInventory.stats`), so the union and per-language ids of an utterance
        always describe the same unit sequence.
        """
        ids = self[lang].encode(text)
        return self.map_to_union(ids, lang) if target == "union" else _check_target(ids, target)

    def map_to_union(self, ids: Iterable[int], lang: str) -> list[int]:
        """Map ids of ``lang``'s inventory to union ids."""
        self.lang_index(lang)
        table = self.to_union[lang]
        return [table[int(i)] for i in ids]

    def decode(self, ids: Iterable[int], lang: str | None = None) -> str:
        """Decode ids of ``lang``'s inventory, or of the union when ``lang`` is None."""
        return (self.union if lang is None else self[lang]).decode(ids)

    def save(self, out_dir: str | os.PathLike) -> Path:
        """Write the layout of the module docstring under ``out_dir`` (atomically, file by file)."""
        out_dir = Path(out_dir)
        for lang, inv in self.inventories.items():
            inv.save(out_dir / lang)
            with atomic_write(out_dir / lang / TO_UNION) as f:
                for i, j in enumerate(self.to_union[lang]):
                    f.write(f"{i} {j}\n")
        self.union.save(out_dir / UNION)
        with atomic_write(out_dir / LANGUAGES_TXT) as f:
            for i, lang in enumerate(self.languages):
                f.write(f"{lang} {i}\n")
        return out_dir

    @classmethod
    def load(cls, out_dir: str | os.PathLike) -> "MultilingualUnits":
        """Read what :meth:`save` wrote; ``to_union.int`` files are checked against the units.

        Raises:
            FileNotFoundError: ``languages.txt`` or a language's ``units.txt`` missing.
            DataError: malformed files, or a ``to_union.int`` that disagrees with the unit lists.
        """
        out_dir = Path(out_dir)
        langs_file = out_dir / LANGUAGES_TXT
        langs = []
        for lineno, line in enumerate(read_lines(langs_file), 1):
            parts = line.split()
            if len(parts) != 2 or parts[1] != str(lineno - 1):
                raise DataError(f"{langs_file}:{lineno}: expected '<lang> {lineno - 1}', got {line!r}")
            langs.append(check_language_id(parts[0], f"{langs_file}:{lineno}"))
        invs = {lang: UnitInventory.load(out_dir / lang, language=lang) for lang in langs}
        union = UnitInventory.load(out_dir / UNION, unit_type=next(iter(invs.values())).unit_type)
        try:
            mu = cls(invs, union)
        except ConfigError as e:
            raise DataError(f"{out_dir}: {e}") from None
        for lang in langs:
            f = out_dir / lang / TO_UNION
            if f.is_file():
                got = [line.split() for line in read_lines(f)]
                want = [[str(i), str(j)] for i, j in enumerate(mu.to_union[lang])]
                if got != want:
                    raise DataError(f"{f}: does not match {out_dir / lang / UNITS_TXT} and "
                                    f"{out_dir / UNION / UNITS_TXT} (rebuild the units)")
        return mu


def encode_transcripts(text: Mapping[str, str], units: UnitInventory | MultilingualUnits,
                       utt2lang: Mapping[str, str] | None = None, target: str = "lang",
                       ) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Encode a Kaldi ``text`` table for training or scoring, skipping what cannot be learnt.

    Args:
        text: utterance -> transcript.
        units: one inventory, or a multilingual set (then ``utt2lang`` is required).
        utt2lang: utterance -> language (multilingual only).
        target: ``lang`` (ids of the utterance's language) or ``union`` (union ids).

    Returns:
        ``(ids, skipped)``: utterance -> unit ids for the usable transcripts, and utterance ->
        reason for the refused ones (see :meth:`UnitInventory.encode_checked`). OOV counts
        accumulate in each inventory's :attr:`UnitInventory.stats`.

    Raises:
        ValueError: multilingual ``units`` without ``utt2lang``, an utterance without language,
            or a language not in ``units`` (the message names the utterance).
    """
    ids: dict[str, list[int]] = {}
    skipped: dict[str, str] = {}
    for utt, t in text.items():
        if isinstance(units, MultilingualUnits):
            if utt2lang is None or utt not in utt2lang:
                raise ValueError(f"utterance '{utt}' has no language (utt2lang)")
            lang = utt2lang[utt]
            if lang not in units.inventories:
                raise ValueError(f"utterance '{utt}': unknown language '{lang}' "
                                 f"(known: {' '.join(units.languages)})")
            x, reason = units.inventories[lang].encode_checked(t, key=utt)
            if x is not None and target == "union":
                x = units.map_to_union(x, lang)
            elif target not in ("lang", "union"):
                raise ValueError(f"target must be 'lang' or 'union', got {target!r}")
        else:
            x, reason = units.encode_checked(t, key=utt)
        if x is None:
            skipped[utt] = reason
        else:
            ids[utt] = x
    return ids, skipped


def load_units(path: str | os.PathLike) -> UnitInventory | MultilingualUnits:
    """Load what ``speechkit-make-units`` wrote: a single inventory (``units.txt`` there, or
    ``path`` is the file) or a multilingual set (``languages.txt`` there)."""
    path = Path(path)
    if path.is_dir() and (path / LANGUAGES_TXT).is_file():
        return MultilingualUnits.load(path)
    return UnitInventory.load(path)


# ---------------------------------------------------------------------------------- helpers
def _reserved(unit_type: str) -> list[str]:
    return [BLANK, UNK] + {"char": [SPACE], "char_wb": [WB_UNK], "bpe": []}[unit_type]


def _c_key(s: str) -> bytes:
    return s.encode("utf-8")


def _char_units(text: str, unit_type: str) -> list[str]:
    """Unit strings of normalised ``text`` for char/char_wb (no vocabulary lookup)."""
    out: list[str] = []
    for n, word in enumerate(text.split(" ") if text else []):
        if unit_type == "char":
            if n:
                out.append(SPACE)
            out.extend(word)
        else:
            out.append(WORD_BEGIN + word[0])
            out.extend(word[1:])
    return out


def _check_target(ids: list[int], target: str) -> list[int]:
    if target != "lang":
        raise ValueError(f"target must be 'lang' or 'union', got {target!r}")
    return ids


def _sp_processor(model: bytes):
    return spm.SentencePieceProcessor(model_proto=model)


def _train_sentencepiece(texts: list[str], vocab_size: int) -> bytes:
    """Train a BPE sentencepiece model whose ids 0 and 1 are ``<blank>`` and ``<unk>``."""
    if vocab_size < 3:
        raise ConfigError(f"vocab_size must be >= 3 (blank, unk and one piece), got {vocab_size}")
    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=buf, model_type="bpe", vocab_size=vocab_size,
            character_coverage=1.0, normalization_rule_name="identity", hard_vocab_limit=False,
            pad_id=0, pad_piece=BLANK, unk_id=1, unk_piece=UNK, bos_id=-1, eos_id=-1,
            num_threads=1, minloglevel=2, input_sentence_size=0, shuffle_input_sentence=False,
        )
    except RuntimeError as e:
        raise ConfigError(f"sentencepiece training failed: {e}") from None
    return buf.getvalue()
