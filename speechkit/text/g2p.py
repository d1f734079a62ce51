"""Grapheme-to-phoneme conversion with espeak-ng: phone tokens with stress, syllables and words.

Used by ``speechkit-g2p`` (stage 1 of ``egs/tcstar_salad``) to turn a word-level Kaldi data
directory into a phone-level one whose ``text`` holds IPA phone tokens, with a ``phone_info``
table giving each token's stress, syllable and word (the input of :mod:`speechkit.text.labels`).

Phonemes
    espeak-ng through the ``phonemizer`` package (``EspeakBackend``, ``with_stress=True``,
    ``language_switch='remove-flags'``, punctuation removed), one backend per language and one
    batched call per language (phonemizer's per-call cost dominates otherwise). Languages are
    the ISO codes the corpora write in ``utt2lang`` (``en hi ta gu ml``), mapped to espeak
    voices by :func:`espeak_voice` (``en`` -> ``en-us``; any other code espeak-ng knows is used
    as it is, so ``en-gb`` or ``es`` work too).

Tokenisation
    A phone is one of espeak's own phonemes: phonemizer asks espeak-ng for IPA with its phoneme
    separator (``espeak_TextToPhonemes`` with ``_`` between phonemes) and we split on it, never
    on characters. So diphthongs and long vowels stay one token as espeak writes them (``oʊ``,
    ``aɪ``, ``iː``), as do affricates (``tʃ``), aspirated/breathy stops (``pʰ``), syllabic
    consonants (``əl``), and every combining diacritic (nasalisation, ``ː`` length) stays on
    its phone. A few espeak phonemes have no IPA symbol and keep espeak's spelling (Hindi's
    flap ``r.``); Malayalam's palatalisation comes out as a token ``ʲ`` of its own. Tokens never
    contain whitespace.

Stress
    espeak writes ``ˈ`` (primary) and ``ˌ`` (secondary) inside the phone string, before the
    stressed syllable's vowel (espeak-ng 1.51; older versions put it before the onset). Either
    way the mark stresses the syllable of the *next vowel* of the word; the marks are stripped
    from the tokens. ``phone_info`` gives every phone the stress of its syllable.

Syllables
    espeak gives none, so they are derived per word (a syllable never crosses a word): one
    syllable per vowel nucleus (:func:`is_vowel`: a token holding an IPA vowel letter, which
    includes rhotic and syllabic ``ɚ`` ``əl``, or a syllabic-consonant diacritic); the consonants
    between two nuclei are split by the maximal-onset principle restricted by sonority
    sequencing: the onset of the next syllable is the longest end of the cluster in which every
    step towards the vowel rises in sonority by at least 2 on the scale stop/affricate 1 <
    fricative 2 < nasal 3 < liquid 4 < glide 5 (:func:`sonority`; a minimum sonority distance as
    in Selkirk 1984), and at least one consonant (V.CV). For English (``en*``) an ``s`` before
    a voiceless stop onset joins it (``s t`` in *under.stood*). Leading consonants go to the
    first syllable, trailing ones to the last; a word with no vowel is one syllable. Examples
    (en-us): *banana* ``b ɐ . n ˈæ . n ə``; *international*
    ``ˌɪ n . t ɚ . n ˈæ . ʃ ə . n əl``.

Words
    espeak's words, which are not always the input's (``"123"`` becomes three words,
    ``"to be"`` may become one); words without phones (punctuation) disappear. The original
    text is kept in ``text.words``.

``phone_info`` (1:1 with the tokens of ``text``)::

    <utt> <stress>:<syllable>:<word> <stress>:<syllable>:<word> ...

stress in {0, 1 primary, 2 secondary}; syllable and word are 0-based indices within the
utterance, non-decreasing.
"""
from __future__ import annotations

import logging
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from speechkit.data.datadir import DataDir, _copy_extras, subset
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError, read_lines, write_table
from speechkit.utils.outputs import check_output_dir

# phonemizer is imported where used (heavy): only the two functions that call espeak-ng need it.

logger = logging.getLogger(__name__)

__all__ = [
    "ESPEAK_VOICES", "Pronunciation", "G2PResult", "espeak_voice", "g2p_data_dir", "is_vowel", "parse_phonemized",
    "phonemize", "read_phone_info", "sonority", "syllabify", "write_phone_info",
]

#: ISO codes whose espeak-ng voice differs from the code.
ESPEAK_VOICES: dict[str, str] = {"en": "en-us"}
#: espeak's stress marks -> phone_info stress value.
STRESS_MARKS: dict[str, int] = {"ˈ": 1, "ˌ": 2}
#: IPA vowel letters (the IPA chart's vowels plus the rhotic schwas ɚ ɝ and ᵻ of espeak's English).
VOWEL_LETTERS = frozenset("iyɨʉɯuɪʏʊeøɘɵɤoəɛœɜɞʌɔæɐaɶɑɒɚɝᵻ")
#: Combining marks that make a consonant a syllable nucleus (syllabic, U+0329 below, U+030D above).
SYLLABIC_MARKS = frozenset("\u0329\u030d")
# Sonority classes by the token's first letter (affricates start with their stop).
_SONORITY: dict[str, int] = {}
for _cls, _letters in ((1, "pbtdʈɖcɟkɡgqɢʔʡ"), (2, "ɸβfvθðszʃʒʂʐçʝxɣχʁħʕhɦɕʑɬɮɧ"), (3, "mɱnɳɲŋɴ"),
                       (4, "lɭʎʟrɾɽɹɻʀʙⱱɺ"), (5, "jwɥɰʋʲʷ")):
    for _ch in _letters:
        _SONORITY[_ch] = _cls
SONORITY_CLASSES = ("stop", "fricative", "nasal", "liquid", "glide", "vowel")
_VOICELESS_STOPS = frozenset("ptk")
#: The utterance-info separator inside one ``phone_info`` item.
INFO_SEP = ":"
# Word separator asked of phonemizer (espeak's words are separated by spaces, phones by '_').
_WORD_SEP = "\t"


# ---------------------------------------------------------------------------------------- phone classes
def is_vowel(phone: str) -> bool:
    """True if ``phone`` (an espeak IPA token, stress marks removed) is a syllable nucleus.

    A nucleus holds an IPA vowel letter (so diphthongs, long, nasalised and r-coloured vowels and
    espeak's syllabic ``əl`` count) or a syllabic-consonant mark (U+0329, U+030D).
    """
    return any(ch in VOWEL_LETTERS or ch in SYLLABIC_MARKS for ch in unicodedata.normalize("NFD", phone))


def sonority(phone: str) -> int:
    """Sonority class of ``phone``: 1 stop/affricate, 2 fricative, 3 nasal, 4 liquid, 5 glide, 6 vowel.

    Consonants are classed by their first letter (``tʃ`` is a stop, ``pʰ`` a stop, ``r.`` a
    liquid); a letter outside the table counts as a stop (the least sonorous class).
    """
    if is_vowel(phone):
        return 6
    for ch in unicodedata.normalize("NFD", phone):
        if ch in _SONORITY:
            return _SONORITY[ch]
    return 1


def _onset_length(cluster: Sequence[str], english: bool) -> int:
    """How many consonants at the end of an intervocalic ``cluster`` start the next syllable."""
    if not cluster:
        return 0
    n = 1
    while n < len(cluster):
        prev, first = cluster[-n - 1], cluster[-n]
        if sonority(first) - sonority(prev) >= 2:
            n += 1
        elif english and prev == "s" and first in _VOICELESS_STOPS:
            n += 1
            break  # nothing precedes the s of an s+stop onset
        else:
            break
    return n


def syllabify(phones: Sequence[str], lang: str = "") -> list[int]:
    """0-based syllable index of each phone of ONE word (see the module docstring for the rule).

    Args:
        phones: the word's phone tokens, stress marks removed.
        lang: the espeak voice or ISO code (``en*`` enables the English s+stop onsets).

    Returns:
        A non-decreasing list, one index per phone; all 0 for a word with no vowel.
    """
    nuclei = [i for i, p in enumerate(phones) if is_vowel(p)]
    out = [0] * len(phones)
    if len(nuclei) < 2:
        return out
    english = lang.lower().startswith("en")
    starts = [0]  # first phone of each syllable
    for a, b in zip(nuclei, nuclei[1:]):
        starts.append(b - _onset_length(phones[a + 1:b], english))
    syl = 0
    for i in range(len(phones)):
        while syl + 1 < len(starts) and i >= starts[syl + 1]:
            syl += 1
        out[i] = syl
    return out


# ---------------------------------------------------------------------------------------- pronunciations
@dataclass
class Pronunciation:
    """The phones of one utterance with their linguistic positions (all lists of equal length).

    Attributes:
        phones: IPA phone tokens (no stress marks, no silence).
        stress: 0 unstressed, 1 primary, 2 secondary, of the phone's syllable.
        syllable: 0-based syllable index within the utterance (non-decreasing).
        word: 0-based word index within the utterance (non-decreasing).
    """

    phones: list[str]
    stress: list[int]
    syllable: list[int]
    word: list[int]

    def __len__(self) -> int:
        return len(self.phones)

    def info_items(self) -> list[str]:
        """The ``phone_info`` items ``<stress>:<syllable>:<word>`` of the phones."""
        return [f"{s}{INFO_SEP}{y}{INFO_SEP}{w}" for s, y, w in zip(self.stress, self.syllable, self.word)]

    @property
    def num_words(self) -> int:
        return self.word[-1] + 1 if self.word else 0

    @property
    def num_syllables(self) -> int:
        return self.syllable[-1] + 1 if self.syllable else 0


def parse_phonemized(words: Iterable[str], lang: str = "") -> Pronunciation:
    """Build a :class:`Pronunciation` from espeak's words.

    Args:
        words: one string per espeak word, phones separated by spaces, stress marks ``ˈ``/``ˌ``
            inside the tokens (phonemizer's output with ``Separator(phone=' ')``).
        lang: espeak voice or ISO code, for :func:`syllabify`.

    Returns:
        The utterance's phones; words without phones are dropped (and not counted).
    """
    pron = Pronunciation([], [], [], [])
    word_idx = 0
    syl_base = 0
    for word in words:
        phones: list[str] = []
        nucleus_stress: dict[int, int] = {}  # phone index of a nucleus -> stress
        pending = 0
        for tok in word.split():
            base = "".join(ch for ch in tok if ch not in STRESS_MARKS)
            for ch in tok:
                if ch in STRESS_MARKS:
                    pending = STRESS_MARKS[ch]
            if not base:
                continue
            if is_vowel(base) and pending:
                nucleus_stress[len(phones)] = pending
                pending = 0
            phones.append(base)
        if not phones:
            continue
        syl = syllabify(phones, lang)
        syl_stress = {syl[i]: s for i, s in nucleus_stress.items()}
        for p, s in zip(phones, syl):
            pron.phones.append(p)
            pron.stress.append(syl_stress.get(s, 0))
            pron.syllable.append(syl_base + s)
            pron.word.append(word_idx)
        syl_base += syl[-1] + 1
        word_idx += 1
    return pron


def espeak_voice(lang: str) -> str:
    """The espeak-ng voice for a language code (``en`` -> ``en-us``; others as they are).

    Raises:
        ValueError: espeak-ng (as installed) has no such language.
    """
    from phonemizer.backend import EspeakBackend

    voice = ESPEAK_VOICES.get(lang, lang)
    if voice not in EspeakBackend.supported_languages():
        raise ValueError(f"espeak-ng has no language '{lang}' (see `espeak-ng --voices`)")
    return voice


def phonemize(texts: Sequence[str], voice: str, njobs: int = 1, ids: Sequence[str] | None = None
              ) -> list[Pronunciation]:
    """Phonemize many texts of one language in one batched espeak-ng call.

    Words espeak-ng reads in another language (a "language switch", e.g. English words in Hindi
    text) keep that language's phones, the switch flags removed; they are counted and logged
    as one warning naming the first utterances.

    Args:
        texts: one utterance per item (no newlines).
        voice: an espeak-ng voice (see :func:`espeak_voice`).
        njobs: parallel espeak processes (phonemizer's ``njobs``).
        ids: utterance ids of ``texts``, for the warning (default: 1-based item numbers).

    Returns:
        One :class:`Pronunciation` per text (empty when espeak produced no phone).
    """
    from phonemizer.backend import EspeakBackend
    from phonemizer.separator import Separator

    class _Capture(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    capture = _Capture()
    plog = logging.getLogger(f"{__name__}.phonemizer")
    plog.propagate = False
    plog.handlers = [capture]
    plog.setLevel(logging.WARNING)
    backend = EspeakBackend(voice, with_stress=True, language_switch="remove-flags", preserve_punctuation=False,
                            logger=plog)
    texts = [t.replace("\n", " ") for t in texts]
    out = backend.phonemize(texts, separator=Separator(phone=" ", word=_WORD_SEP, syllable=""), strip=True,
                            njobs=max(1, njobs))
    switched: list[int] = []
    for msg in capture.messages:
        m = re.search(r"language switches on lines ([\d, ]+)", msg)
        if m:
            switched += [int(x) for x in m.group(1).split(",") if x.strip()]
    if switched:
        names = [ids[i - 1] if ids is not None and 0 < i <= len(ids) else str(i) for i in sorted(switched)]
        logger.warning("espeak-ng voice %s: %d utterances contain words read with another language's phones "
                       "(language switch, flags removed; first: %s)", voice, len(names), ", ".join(names[:5]))
    return [parse_phonemized(line.split(_WORD_SEP), voice) for line in out]


# ---------------------------------------------------------------------------------------- phone_info I/O
def write_phone_info(path: str | os.PathLike, info: dict[str, Pronunciation]) -> None:
    """Write ``phone_info`` (C-sorted, atomically) from utt -> :class:`Pronunciation`."""
    write_table(path, {u: " ".join(p.info_items()) for u, p in info.items()})


def read_phone_info(path: str | os.PathLike) -> dict[str, tuple[int, list[tuple[int, int, int]]]]:
    """Read ``phone_info`` into ``utt -> (line number, [(stress, syllable, word), ...])``.

    Raises:
        DataError: a malformed item, a stress outside {0, 1, 2}, negative or decreasing
            syllable/word indices, a syllable shared by two words, or a duplicate utterance
            (names the file and line).
    """
    out: dict[str, tuple[int, list[tuple[int, int, int]]]] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            raise DataError(f"{path}:{lineno}: empty line")
        utt, items = parts[0], parts[1:]
        if utt in out:
            raise DataError(f"{path}:{lineno}: duplicate utterance '{utt}'")
        rows: list[tuple[int, int, int]] = []
        for k, item in enumerate(items, 1):
            fields = item.split(INFO_SEP)
            try:
                s, y, w = (int(x) for x in fields)
            except ValueError:
                raise DataError(f"{path}:{lineno}: item {k} of '{utt}' is {item!r}, expected "
                                "<stress>:<syllable>:<word> (integers)") from None
            if s not in (0, 1, 2) or y < 0 or w < 0:
                raise DataError(f"{path}:{lineno}: item {k} of '{utt}' is {item!r}: stress must be 0, 1 or 2 "
                                "and indices >= 0")
            if rows:
                ps, py, pw = rows[-1]
                if y < py or w < pw:
                    raise DataError(f"{path}:{lineno}: item {k} of '{utt}' ({item!r}): syllable and word indices "
                                    "must not decrease")
                if y == py and w != pw:
                    raise DataError(f"{path}:{lineno}: item {k} of '{utt}' ({item!r}): syllable {y} spans two words")
            rows.append((s, y, w))
        out[utt] = (lineno, rows)
    return out


# ---------------------------------------------------------------------------------------- data dirs
@dataclass
class G2PResult:
    """What :func:`g2p_data_dir` did: utterance counts, the empty ones skipped (no text line or no
    phones) and the ``text`` lines dropped because their id is not in ``utt2spk``."""

    num_in: int
    num_out: int
    num_phones: int
    empty: list[str]
    languages: dict[str, int]
    no_speaker: list[str] = field(default_factory=list)


def _line_of(path: Path, key: str) -> int | None:
    for lineno, line in enumerate(read_lines(path), 1):
        if line.split(maxsplit=1)[:1] == [key]:
            return lineno
    return None


def g2p_data_dir(data_dir: str | os.PathLike, out_dir: str | os.PathLike, *, lang: str | None = None,
                 nj: int = 1) -> G2PResult:
    """Write a phone-level copy of a word-level data dir (``speechkit-g2p``).

    ``out_dir`` gets every table of ``data_dir`` (plus ``frame_shift``, ``feats.yaml`` and a
    filtered ``spk2gender``), with ``text`` replaced by the phone tokens, and ``phone_info`` and
    ``text.words`` (the original ``text``) next to it. Utterances whose G2P output is empty are
    left out, counted and reported; so are ``text`` lines whose id is not in ``utt2spk`` (a
    warning with their count and the first ids, as Kaldi's ``fix_data_dir.sh`` reports what it
    drops).

    Args:
        data_dir: source data dir with ``text`` and ``utt2lang`` (else ``lang`` is used).
        out_dir: destination (not ``data_dir``).
        lang: language of utterances ``utt2lang`` does not cover (ISO code or espeak voice).
        nj: parallel espeak processes.

    Raises:
        OutputOverlapError (a ValueError): ``out_dir`` is, contains or lies inside ``data_dir``;
            WriteError: ``out_dir`` is an existing file.
        FileNotFoundError: no ``text``.
        DataError: a language espeak-ng lacks (names ``utt2lang``'s line), no language for an
            utterance, or nothing left to write.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    check_output_dir(out_dir, inputs={"DATA_DIR": data_dir}, option="OUT_DIR")
    d = DataDir.load(data_dir)
    if d.text is None:
        raise FileNotFoundError(f"{data_dir}/text: missing (G2P needs the word transcripts)")
    no_speaker = [u for u in d.text if u not in d.utt2spk]
    if no_speaker:
        logger.warning("%s/text: %d line(s) whose utterance is not in %s/utt2spk are left out (first: %s)",
                       data_dir, len(no_speaker), data_dir, ", ".join(no_speaker[:5]))
    voices: dict[str, str] = {}  # language -> voice
    by_voice: dict[str, list[str]] = {}
    langs: dict[str, int] = {}
    for utt in d.utts:
        if utt not in d.text:
            continue
        code = (d.utt2lang or {}).get(utt, lang)
        if code is None:
            where = f"{data_dir}/utt2lang has no line for '{utt}'" if d.utt2lang is not None else \
                f"{data_dir} has no utt2lang"
            raise naming_parameters(DataError(f"{where} and no `lang` was given"))
        if code not in voices:
            try:
                voices[code] = espeak_voice(code)
            except ValueError as e:
                if d.utt2lang is not None and utt in d.utt2lang:
                    ln = _line_of(data_dir / "utt2lang", utt)
                    raise DataError(f"{data_dir}/utt2lang:{ln}: utterance '{utt}': {e}") from None
                raise naming_parameters(DataError(f"`lang` {code}: {e}")) from None
        by_voice.setdefault(voices[code], []).append(utt)
        langs[code] = langs.get(code, 0) + 1
    prons: dict[str, Pronunciation] = {}
    for voice, utts in by_voice.items():
        logger.info("phonemizing %d utterances with espeak-ng voice %s", len(utts), voice)
        for utt, pron in zip(utts, phonemize([d.text[u] for u in utts], voice, njobs=nj, ids=utts)):
            prons[utt] = pron
    empty = [u for u in d.utts if u in d.text and len(prons.get(u, ())) == 0]
    missing_text = [u for u in d.utts if u not in d.text]
    if missing_text:
        logger.warning("%s: %d utterances have no text line and are left out (first: %s)", data_dir,
                       len(missing_text), ", ".join(missing_text[:5]))
    if empty:
        logger.warning("%s: %d utterances with no phones from espeak-ng are left out (first: %s)", data_dir,
                       len(empty), ", ".join(empty[:5]))
    keep = [u for u in d.utts if len(prons.get(u, ())) > 0]
    if not keep:
        raise DataError(f"{data_dir}: no utterance has phones; nothing written to {out_dir}")
    out = subset(d, keep)
    words = {u: d.text[u] for u in keep}
    out.text = {u: " ".join(prons[u].phones) for u in keep}
    # A corpus's own phone alignments (e.g. mini's espeak mnemonics) are in another phone set than
    # the new text: leave them out (speechkit-align writes alignments of these phones).
    out.phone_alignments = None
    out.write(out_dir)
    _copy_extras(data_dir, out_dir)
    write_phone_info(out_dir / "phone_info", {u: prons[u] for u in keep})
    write_table(out_dir / "text.words", words)
    return G2PResult(num_in=len(d), num_out=len(keep), num_phones=sum(len(prons[u]) for u in keep),
                     empty=empty + missing_text, languages=langs, no_speaker=no_speaker)
