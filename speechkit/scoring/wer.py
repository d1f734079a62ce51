"""Word and character error rates, counted exactly as Kaldi's ``compute-wer``.

Edit distance
    Levenshtein distance with unit costs between the reference and hypothesis token sequences.
    Several minimum-cost alignments can exist and they can split the same number of errors
    differently into substitutions, insertions and deletions (ref ``a b``, hyp ``b c``: two
    substitutions, or one deletion + one insertion). This module reproduces the choice of
    Kaldi's ``LevenshteinEditDistance`` (``src/util/edit-distance-inl.h``, used by
    ``compute-wer``): in the dynamic programme over (hypothesis position, reference position) a
    cell takes the diagonal step (correct/substitution) only when it is *strictly* cheaper than
    both alternatives, otherwise the deletion when strictly cheaper than the insertion, otherwise
    the insertion. Ties therefore favour insertion/deletion pairs over substitutions, as sclite's
    weighted alignment (ins = del = 3, sub = 4) also does. The per-utterance alignment written by
    :func:`align` is the path those counts come from (Kaldi's own ``LevenshteinAlignment``, used
    only for its detailed statistics, breaks ties the other way round and can disagree with its
    own totals). jiwer/rapidfuzz break ties towards substitutions: the total error count and
    hence the WER always agree with them, the sub/ins/del split only where the minimum-cost split
    is unique (see the tests).

Report lines (``compute-wer``, byte for byte)::

    %WER 12.34 [ 56 / 454, 3 ins, 10 del, 43 sub ] [PARTIAL]
    %SER 50.00 [ 5 / 10 ]
    Scored 10 sentences, 0 not present in hyp.

The percentages are computed as Kaldi does (double division stored in a 32-bit float, printed
``%.2f``), so even the rounding of the last digit matches.

Missing hypotheses (``mode``, Kaldi's ``--mode``): ``present`` (default, as Kaldi's
``steps/score_kaldi.sh``) scores only references that have a hypothesis; ``all`` scores a
missing one as empty (all deletions); ``strict`` makes it an error. Both non-strict modes count
the missing ones in ``not present in hyp`` and append ``[PARTIAL]``.

Files (:func:`read_transcript_file`): Kaldi ``text`` (``<uttid> words ...``) or sclite ``trn``
(``words ... (uttid)``, what :func:`write_trn` writes), told apart by :func:`transcript_format`.

Tokens: words are split on ASCII whitespace, as Kaldi does (:func:`tokenize`); characters (``unit="char"``) are code
points with all whitespace removed, as Kaldi's CER recipes score them (Mandarin, e.g. aishell;
ESPnet instead keeps a ``<space>`` token, so its CERs are not comparable). No other
normalisation (case, Unicode form) is applied: references and hypotheses are compared as written.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir, read_lines, read_table

log = logging.getLogger(__name__)

MODES = ("present", "all", "strict")
EPS = "***"  # the empty side of an insertion/deletion in per-utterance alignments (Kaldi/sclite)

# choices in the dynamic programme
_DIAG, _DEL, _INS = 0, 1, 2


@dataclass(frozen=True)
class EditCounts:
    """Edit operations of one alignment (or a sum of them).

    Attributes:
        ref_len: reference tokens (words or characters).
        ins / dels / subs: insertions, deletions, substitutions.
    """

    ref_len: int
    ins: int
    dels: int
    subs: int

    @property
    def errors(self) -> int:
        """ins + dels + subs (the Levenshtein distance for one utterance)."""
        return self.ins + self.dels + self.subs

    @property
    def correct(self) -> int:
        """Reference tokens aligned to an identical hypothesis token."""
        return self.ref_len - self.dels - self.subs

    def __add__(self, other: "EditCounts") -> "EditCounts":
        return EditCounts(self.ref_len + other.ref_len, self.ins + other.ins, self.dels + other.dels,
                          self.subs + other.subs)


def _dp(ref: Sequence, hyp: Sequence) -> list[bytearray]:
    """Kaldi's choice in every cell; ``choice[h][r]`` for h = 0..len(hyp), r = 0..len(ref)."""
    R = len(ref)
    prev = list(range(R + 1))  # cost of hyp[:0] against ref[:r]: r deletions
    choice = [bytearray([_DEL]) * (R + 1)]
    for h in range(1, len(hyp) + 1):
        tok = hyp[h - 1]
        cur = [0] * (R + 1)
        ch = bytearray(R + 1)
        cur[0] = prev[0] + 1
        ch[0] = _INS
        for r in range(1, R + 1):
            ins = prev[r] + 1
            dele = cur[r - 1] + 1
            diag = prev[r - 1] + (tok != ref[r - 1])
            if diag < ins and diag < dele:
                cur[r] = diag
                ch[r] = _DIAG
            elif dele < ins:
                cur[r] = dele
                ch[r] = _DEL
            else:
                cur[r] = ins
                ch[r] = _INS
        prev = cur
        choice.append(ch)
    return choice


def align(ref: Sequence[str], hyp: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """Kaldi-tie-broken minimum-edit alignment as ``(ref_token, hyp_token)`` pairs.

    ``None`` on the reference side is an insertion, on the hypothesis side a deletion; equal
    tokens are correct, different ones a substitution. Its counts equal :func:`edit_counts`.
    O(len(ref) * len(hyp)) time and memory.
    """
    choice = _dp(ref, hyp)
    out: list[tuple[str | None, str | None]] = []
    h, r = len(hyp), len(ref)
    while h or r:
        c = choice[h][r] if h else _DEL
        if c == _DIAG:
            out.append((ref[r - 1], hyp[h - 1]))
            h, r = h - 1, r - 1
        elif c == _DEL:
            out.append((ref[r - 1], None))
            r -= 1
        else:
            out.append((None, hyp[h - 1]))
            h -= 1
    out.reverse()
    return out


def counts_of(alignment: Iterable[tuple[str | None, str | None]]) -> EditCounts:
    """Count the operations of an alignment from :func:`align`."""
    n = ins = dels = subs = 0
    for a, b in alignment:
        if a is None:
            ins += 1
            continue
        n += 1
        if b is None:
            dels += 1
        elif a != b:
            subs += 1
    return EditCounts(n, ins, dels, subs)


def edit_counts(ref: Sequence[str], hyp: Sequence[str]) -> EditCounts:
    """Insertions, deletions and substitutions of ``hyp`` against ``ref`` as Kaldi counts them."""
    if not hyp or not ref:
        return EditCounts(len(ref), len(hyp), len(ref), 0)
    return counts_of(align(ref, hyp))


def kaldi_percent(num: int, den: int) -> float:
    """``100 * num / den`` rounded to a 32-bit float as compute-wer does (inf/nan for den = 0)."""
    if den == 0:
        return math.inf if num else math.nan
    return float(np.float32(100.0 * num / den))


#: What separates tokens: ASCII whitespace only, as Kaldi's compute-wer splits (a no-break space
#: U+00A0 or an ideographic space U+3000 is part of a token, not a separator).
ASCII_SPACE = " \t\n\r\f\v"
_ASCII_SPACE_RUN = re.compile(f"[{re.escape(ASCII_SPACE)}]+")


def tokenize(text: str, unit: str = "word") -> list[str]:
    """Words (split on ASCII whitespace, as Kaldi does) or characters (code points, ASCII whitespace
    removed) of ``text``.

    Raises:
        ValueError: ``unit`` is neither ``word`` nor ``char``.
    """
    if unit == "word":
        return [w for w in _ASCII_SPACE_RUN.split(text) if w]
    if unit == "char":
        return [c for c in text if c not in ASCII_SPACE]
    raise ValueError(f"unit must be 'word' or 'char', got {unit!r}")


def nfc(table: Mapping[str, str]) -> dict[str, str]:
    """Unicode NFC form of every transcript (``utt -> text``), so that a precomposed letter and its
    decomposed spelling (e.g. Devanagari nukta letters U+0958-U+095F, which NFC decomposes) are the
    same token."""
    return {u: unicodedata.normalize("NFC", t) for u, t in table.items()}


@dataclass
class WerResult:
    """compute-wer's totals over a set of utterances.

    Attributes:
        num_words: reference tokens scored; ins/dels/subs: edit counts;
        num_sent: utterances scored; sent_errs: of those, hypotheses differing from the reference;
        num_absent: references without a hypothesis (not scored in ``present`` mode, scored as
            empty in ``all`` mode).
    """

    num_words: int = 0
    ins: int = 0
    dels: int = 0
    subs: int = 0
    num_sent: int = 0
    sent_errs: int = 0
    num_absent: int = 0

    @property
    def errors(self) -> int:
        return self.ins + self.dels + self.subs

    @property
    def wer(self) -> float | None:
        """Error rate in percent (full double precision); None without reference tokens."""
        return 100.0 * self.errors / self.num_words if self.num_words else None

    @property
    def ser(self) -> float | None:
        """Sentence error rate in percent; None when no sentence was scored."""
        return 100.0 * self.sent_errs / self.num_sent if self.num_sent else None

    @property
    def partial(self) -> bool:
        return self.num_absent > 0

    def add(self, c: EditCounts, sentence_wrong: bool) -> None:
        self.num_words += c.ref_len
        self.ins += c.ins
        self.dels += c.dels
        self.subs += c.subs
        self.num_sent += 1
        self.sent_errs += int(sentence_wrong)

    def kaldi_lines(self) -> list[str]:
        """The three lines compute-wer prints (see the module docstring)."""
        wer = kaldi_percent(self.errors, self.num_words)
        ser = kaldi_percent(self.sent_errs, self.num_sent)
        return [
            f"%WER {wer:.2f} [ {self.errors} / {self.num_words}, {self.ins} ins, {self.dels} del, "
            f"{self.subs} sub ]{' [PARTIAL]' if self.partial else ''}",
            f"%SER {ser:.2f} [ {self.sent_errs} / {self.num_sent} ]",
            f"Scored {self.num_sent} sentences, {self.num_absent} not present in hyp.",
        ]

    def to_dict(self) -> dict:
        """JSON-ready totals plus ``wer``, ``ser`` (percent, None if undefined), ``errors``, ``partial``."""
        return {**asdict(self), "errors": self.errors, "wer": self.wer, "ser": self.ser, "partial": self.partial}


@dataclass
class Scored:
    """Everything :func:`score` computed.

    Attributes:
        total: totals over every scored utterance.
        utts: scored utterance id -> (reference tokens, hypothesis tokens, counts), in reference order.
        absent: reference ids without a hypothesis.
        per_language: language -> totals of its utterances (when ``utt2lang`` was given).
    """

    total: WerResult
    utts: dict[str, tuple[list[str], list[str], EditCounts]]
    absent: list[str]
    per_language: dict[str, WerResult] | None = None

    def language_averages(self) -> dict[str, float | None]:
        """``weighted``: errors / reference tokens pooled over the languages (the word-weighted
        average, equal to the overall WER); ``unweighted``: mean of the per-language WERs (each
        language counts once). None when undefined."""
        if not self.per_language:
            return {"weighted": None, "unweighted": None}
        errs = sum(r.errors for r in self.per_language.values())
        words = sum(r.num_words for r in self.per_language.values())
        wers = [r.wer for r in self.per_language.values()]
        return {"weighted": 100.0 * errs / words if words else None,
                "unweighted": (sum(wers) / len(wers)) if all(w is not None for w in wers) else None}


def score(refs: Mapping[str, str], hyps: Mapping[str, str], *, unit: str = "word", mode: str = "present",
          utt2lang: Mapping[str, str] | None = None) -> Scored:
    """Score hypotheses against references (both utterance id -> transcript).

    Args:
        refs, hyps: transcripts; every hypothesis id must be a reference id.
        unit: ``word`` or ``char`` (see :func:`tokenize`).
        mode: ``present``, ``all`` or ``strict`` (module docstring).
        utt2lang: optional utterance -> language, for per-language totals; must cover every
            scored utterance.

    Raises:
        ValueError: bad ``unit``/``mode``, a hypothesis id that is not a reference, an
            utterance missing from ``utt2lang``.
        DataError: ``strict`` mode and a reference without hypothesis.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    extra = [u for u in hyps if u not in refs]
    if extra:
        raise ValueError(f"{len(extra)} hypothesis ids are not in the reference, e.g. '{extra[0]}'")
    total = WerResult()
    per_lang: dict[str, WerResult] | None = {} if utt2lang is not None else None
    utts: dict[str, tuple[list[str], list[str], EditCounts]] = {}
    absent: list[str] = []
    for utt, ref_text in refs.items():
        if utt not in hyps:
            if mode == "strict":
                raise DataError(f"no hypothesis for utterance '{utt}' (mode strict)")
            absent.append(utt)
            if mode == "present":
                continue
        ref = tokenize(ref_text, unit)
        hyp = tokenize(hyps.get(utt, ""), unit)
        c = edit_counts(ref, hyp)
        utts[utt] = (ref, hyp, c)
        total.add(c, ref != hyp)
        if per_lang is not None:
            if utt not in utt2lang:
                raise ValueError(f"utterance '{utt}' has no language in utt2lang")
            per_lang.setdefault(utt2lang[utt], WerResult()).add(c, ref != hyp)
    total.num_absent = len(absent)
    if per_lang is not None and utt2lang is not None:
        for utt in absent:
            lang = utt2lang.get(utt)
            if lang is not None:
                per_lang.setdefault(lang, WerResult()).num_absent += 1
        per_lang = {k: per_lang[k] for k in sorted(per_lang, key=lambda s: s.encode("utf-8"))}
    return Scored(total, utts, absent, per_lang)


def reference_fingerprint(refs: Mapping[str, str]) -> str:
    """``sha256:<hex>`` of a reference set as scored: its utterance ids (C order) with their word
    tokens, so two runs are comparable only if scored on the same utterances with the same text
    (spacing aside). Pass the references as scored (after :func:`nfc` if that was applied)."""
    import hashlib

    h = hashlib.sha256()
    for utt in sorted(refs, key=lambda u: u.encode("utf-8")):
        h.update((utt + "\t" + " ".join(tokenize(refs[utt], "word")) + "\n").encode("utf-8"))
    return "sha256:" + h.hexdigest()


@dataclass
class WerrCheck:
    """Whether a WERR compares like with like (:func:`check_werr`).

    Attributes:
        hyp_count: ``(n, N)``: this run's references with a hypothesis, of its references.
        baseline_count: the same for the baseline (``None`` when its JSON does not tell).
        checked: the baseline records the fingerprint of its reference set (and it matched).
    """

    hyp_count: tuple[int, int]
    baseline_count: tuple[int, int] | None
    checked: bool

    @property
    def flags(self) -> list[str]:
        """What the WERR line must carry: ``PARTIAL n/N`` (this run), ``baseline PARTIAL n/N``,
        ``UNCHECKED ...`` (an older baseline JSON); empty for a WERR between two complete runs on
        one reference set."""
        out = []
        n, total = self.hyp_count
        if n < total:
            out.append(f"PARTIAL {n}/{total}")
        if self.baseline_count is not None and self.baseline_count[0] < self.baseline_count[1]:
            out.append(f"baseline PARTIAL {self.baseline_count[0]}/{self.baseline_count[1]}")
        if not self.checked:
            out.append("UNCHECKED: the baseline JSON records no reference fingerprint (an older speechkit-score-wer); "
                       "that both runs were scored on the same references cannot be checked")
        return out

    def suffix(self) -> str:
        """The flags as ``' [PARTIAL 2/4] [UNCHECKED: ...]'`` (empty when there are none)."""
        return "".join(f" [{f}]" for f in self.flags)


def check_werr(baseline: Mapping, baseline_path: str | os.PathLike, refs: Mapping[str, str], num_absent: int,
               ref_path: str | os.PathLike) -> WerrCheck:
    """Check that a WERR of this run against ``baseline`` (a ``speechkit-score-wer --json``) compares
    runs scored on the same reference set, and say how complete both are.

    Args:
        baseline: the baseline JSON (:func:`load_baseline`).
        baseline_path, ref_path: for messages.
        refs: this run's references as scored.
        num_absent: this run's references without a hypothesis.

    Raises:
        DataError: the baseline was scored on another reference set (other utterance ids or other
            reference text; names both files and the utterance counts).
    """
    fp = reference_fingerprint(refs)
    base_fp = baseline.get("ref_fingerprint")
    n_refs = len(refs)

    def count(key: str) -> int | None:
        v = baseline.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    base_total = count("ref_utterances")
    if base_total is None and count("num_sent") is not None and count("num_absent") is not None:
        # older JSON: in 'all' mode the absent references are among the scored sentences
        base_total = count("num_sent") + (0 if baseline.get("mode") == "all" else count("num_absent"))
    if base_fp is not None and base_fp != fp:
        sizes = f"{base_total} and {n_refs} utterances" if base_total is not None and base_total != n_refs else \
            f"{n_refs} utterances each, other ids or other text"
        raise DataError(f"{baseline_path}: scored on another reference set than {ref_path} ({sizes}): a WERR "
                        "would compare different test sets; score both runs on one reference")
    base_count = (base_total - count("num_absent"), base_total) \
        if base_total is not None and count("num_absent") is not None else None
    return WerrCheck(hyp_count=(n_refs - num_absent, n_refs), baseline_count=base_count, checked=base_fp is not None)


def werr(baseline: float | None, new: float | None) -> float | None:
    """Relative WER reduction in percent: ``100 * (baseline - new) / baseline`` (positive = better).

    None when either is undefined or the baseline is 0.
    """
    if baseline is None or new is None or baseline == 0:
        return None
    return 100.0 * (baseline - new) / baseline


# ---------------------------------------------------------------------------------- files
def read_transcripts(path: str | os.PathLike, what: str = "transcript") -> dict[str, str]:
    """Read a Kaldi ``text`` file; a line with only the id is an empty transcript.

    Raises:
        FileNotFoundError: no such file.
        DataError: the file has no line at all (names it and ``what``), an empty line or a
            duplicate id (names file and line).
    """
    table = read_table(path, allow_empty_value=True)
    if not table:
        raise DataError(f"{path}: empty {what} file (no utterances)")
    return table


#: The transcript file formats :func:`read_transcript_file` takes (``auto``: :func:`transcript_format`).
FORMATS = ("auto", "kaldi", "trn")

# an sclite trn line: the words, then the utterance id in parentheses (sclite's "(spk_utt)")
_TRN_LINE = re.compile(r"^(?P<text>.*?)[ \t]*\((?P<id>[^()\s]+)\)[ \t\r]*$")


def read_trn(path: str | os.PathLike, what: str = "transcript") -> dict[str, str]:
    """Read an sclite ``trn`` file (``tok tok ... (uttid)`` per line, as :func:`write_trn` writes it;
    ``(uttid)`` alone is an empty transcript) into ``{uttid: "tok tok ..."}``, in file order.

    Raises:
        FileNotFoundError: no such file.
        DataError: no line at all, an empty line, a line not ending in ``(uttid)``, a duplicate id
            (names file and line).
    """
    table: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        if not line.strip():
            raise DataError(f"{path}:{lineno}: empty line")
        m = _TRN_LINE.match(line)
        if m is None:
            raise DataError(f"{path}:{lineno}: not an sclite trn line 'words ... (utt-id)': {line.strip()[:60]!r}")
        utt = m.group("id")
        if utt in table:
            raise DataError(f"{path}:{lineno}: duplicate utterance id '({utt})' (first on line {first_line[utt]})")
        table[utt] = m.group("text").strip()
        first_line[utt] = lineno
    if not table:
        raise DataError(f"{path}: empty {what} file (no utterances)")
    return table


def transcript_format(path: str | os.PathLike) -> tuple[str, str]:
    """Which format ``path`` is in, ``kaldi`` (``<uttid> words ...``) or ``trn`` (sclite ``words ... (uttid)``),
    and why.

    ``trn`` when every line ends in a parenthesised word (``she had your dark suit (fcjf0_sa1)``) and
    either no two of those are alike or the name ends in ``.trn`` (any case; then a repeated id is
    :func:`read_trn`'s error); else ``kaldi`` (a Kaldi text named ``*.trn`` included, said in the reason).
    A Kaldi text read as trn would need every transcript to end in a distinct parenthesised word
    (``--format kaldi`` reads it as written). Read as Kaldi text, a trn file keyed each line by its first
    word (TIMIT's ``she`` repeated: "duplicate key 'she'"), or worse, scored first words as ids.

    A file not named ``*.trn`` whose lines also start with distinct ids that are not parenthesised
    (``u1 the cat sat (laughter)``, ``u2 on the mat (noise)``) reads as either: ``either`` (Kaldi text
    when read alone; :func:`score_files` reads it as the format whose ids are those of the other file).

    Returns:
        ``(format, reason)``, e.g. ``("trn", "every line ends in a distinct '(utt-id)'")``; the format is
        ``kaldi``, ``trn`` or ``either``.

    Raises:
        FileNotFoundError; DataError: not UTF-8.
    """
    named = Path(path).suffix.lower() == ".trn"
    lines = [ln for ln in read_lines(path) if ln.strip()]
    matches = [_TRN_LINE.match(ln) for ln in lines]
    if lines and all(matches):
        ids = [m.group("id") for m in matches]
        if len(set(ids)) == len(ids):
            if not named and _kaldi_ids_plausible(lines):
                return "either", ("every line ends in a distinct '(word)' and starts with a distinct id: Kaldi text "
                                  "or sclite trn")
            return "trn", "every line ends in a distinct '(utt-id)'"
        if named:
            return "trn", "its name ends in .trn and every line ends in '(utt-id)'"
    return "kaldi", ("its name ends in .trn but not every line ends in '(utt-id)'" if named else "a Kaldi text")


def _kaldi_ids_plausible(lines: Sequence[str]) -> bool:
    """The first fields of ``lines`` could be a Kaldi text's ids: distinct, none parenthesised (a trn's
    empty transcript ``(utt)`` alone on its line would be one)."""
    firsts = [ln.split(None, 1)[0] for ln in lines]
    return len(set(firsts)) == len(firsts) and not any(f.startswith("(") for f in firsts)


def _ids_as(path: str | os.PathLike, fmt: str) -> set[str]:
    """The utterance ids of ``path`` read as ``fmt`` (``kaldi``: first fields; ``trn``: the parenthesised
    last ones); lines that do not parse so are left out (the reader names them later)."""
    out: set[str] = set()
    for ln in read_lines(path):
        if not ln.strip():
            continue
        if fmt == "trn":
            m = _TRN_LINE.match(ln)
            if m is not None:
                out.add(m.group("id"))
        else:
            out.add(ln.split(None, 1)[0])
    return out


def resolve_formats(ref: str | os.PathLike, hyp: str | os.PathLike,
                    logger: logging.Logger = log) -> tuple[str, str]:
    """The formats to read REF and HYP in (``auto``): each file's :func:`transcript_format`; a file that
    reads as ``either`` is read in the format under which its ids are most those of the other file (a
    Kaldi text whose lines all end in a distinct parenthesised word was read as trn: its ids were those
    words and the real ids were scored as words, exit 0). When both formats fit as well, Kaldi text,
    with a warning saying ``--format`` decides.

    Returns:
        ``(ref format, hyp format)``, each ``kaldi`` or ``trn``.
    """
    fr, fh = transcript_format(ref)[0], transcript_format(hyp)[0]
    if "either" not in (fr, fh):
        return fr, fh
    cands = [(a, b) for a in (("kaldi", "trn") if fr == "either" else (fr,))
             for b in (("kaldi", "trn") if fh == "either" else (fh,))]
    ids = {(path, f): _ids_as(path, f) for path, fs in ((ref, {a for a, _ in cands}), (hyp, {b for _, b in cands}))
           for f in fs}
    overlap = {c: len(ids[(ref, c[0])] & ids[(hyp, c[1])]) for c in cands}
    best = max(overlap.values())
    tied = [c for c in cands if overlap[c] == best]  # in order: Kaldi text first
    chosen = tied[0]
    either = [(path, f) for path, was, f in ((ref, fr, chosen[0]), (hyp, fh, chosen[1])) if was == "either"]
    if len(tied) > 1 and best > 0:
        logger.warning("%s read as Kaldi text ('utt-id words ...'), though every line also ends in a distinct "
                       "'(word)' as sclite trn lines do and both readings pair REF's and HYP's ids alike: say "
                       "--format trn if they are sclite trn", " and ".join(str(p) for p, _ in either))
    else:
        for path, f in either:
            logger.info("reading %s as %s: its lines read as either, and so its ids are those of the other file", path,
                        "sclite trn ('words ... (utt-id)')" if f == "trn" else "Kaldi text ('utt-id words ...')")
    return chosen


def read_transcript_file(path: str | os.PathLike, what: str = "transcript", fmt: str = "auto",
                         logger: logging.Logger = log) -> dict[str, str]:
    """Read a Kaldi ``text`` file or an sclite ``trn`` file (``fmt``: ``auto`` = :func:`transcript_format`,
    said at INFO level when it is ``trn``; ``kaldi``; ``trn``).

    Raises:
        ValueError: an unknown ``fmt``; the errors of :func:`read_transcripts` / :func:`read_trn`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "auto":
        fmt, why = transcript_format(path)
        if fmt == "either":  # alone: Kaldi text (score_files decides by the other file's ids)
            fmt, why = "kaldi", why + " (--format trn reads it as sclite trn)"
        if fmt == "trn" or why != "a Kaldi text":
            logger.info("reading %s %s as %s: %s", what, path,
                        "sclite trn ('words ... (utt-id)')" if fmt == "trn" else "Kaldi text ('utt-id words ...')", why)
    return read_trn(path, what) if fmt == "trn" else read_transcripts(path, what)


#: Characters that separate words in files written by other tools but not for Kaldi, which splits on
#: ASCII whitespace only: the commas / semicolons / bars of CSV-like files, and the non-ASCII spaces.
_SEPARATOR_LIKE = ",;|"


def _separator_name(c: str) -> str:
    return repr(c) if c in _SEPARATOR_LIKE else f"U+{ord(c):04X} ({unicodedata.name(c, 'space').lower()})"


def split_mismatch(refs: Mapping[str, str], hyps: Mapping[str, str], unit: str = "word", *,
                   max_ids: int = 5) -> str | None:
    """Why the hypotheses look split into words otherwise than the references, or None.

    Two signs, tried in this order:

    * a separator-like character (``,``, ``;``, ``|`` or a non-ASCII space such as U+00A0) in
      hypotheses while no reference holds it: Kaldi's split on ASCII whitespace makes ``a,b,c`` one
      word (a file separated by commas scored 100 % with exit 0);
    * with ``unit="word"``: at least 2 hypotheses, and at least half of those whose reference has 3 words
      or more, are a single word.

    Args:
        refs, hyps: ``utt -> transcript`` (the scored hypotheses: ids in ``refs``).
        unit: ``word`` or ``char`` (in ``char`` the separators count as characters).
        max_ids: how many utterance ids the message names.

    Returns:
        One line naming the character or the counts and the first ``max_ids`` utterance ids.
    """
    ref_chars = set().union(*(set(t) for t in refs.values())) if refs else set()
    for c in sorted({c for t in hyps.values() for c in t
                     if (c in _SEPARATOR_LIKE or (c.isspace() and c not in ASCII_SPACE)) and c not in ref_chars}):
        ids = [u for u, t in hyps.items() if c in t]
        shown = ", ".join(ids[:max_ids]) + (", ..." if len(ids) > max_ids else "")
        effect = ("words are split on ASCII whitespace only, so it joins words into one"
                  if unit == "word" else "it is scored as a character")
        return (f"{len(ids)} of {len(hyps)} hypotheses hold {_separator_name(c)}, which no reference holds "
                f"(e.g. {shown}): {effect}; are the hypotheses separated by it?")
    if unit == "word":
        long_refs = [u for u in hyps if len(tokenize(refs.get(u, ""))) >= 3]
        single = [u for u in long_refs if len(tokenize(hyps[u])) == 1]
        if len(single) >= 2 and 2 * len(single) >= len(long_refs):
            shown = ", ".join(single[:max_ids]) + (", ..." if len(single) > max_ids else "")
            return (f"{len(single)} of the {len(long_refs)} hypotheses whose reference has 3 words or more are one "
                    f"word (e.g. {shown}): are the hypotheses split into words by ASCII whitespace as the "
                    "references are?")
    return None


def unknown_hyp_ids(hyps: Mapping[str, str], refs: Mapping[str, str]) -> list[str]:
    """The hypothesis ids that are not in the reference, in file order (compute-wer ignores them)."""
    return [utt for utt in hyps if utt not in refs]


def write_trn(path: str | os.PathLike, items: Iterable[tuple[str, Sequence[str]]]) -> None:
    """Write sclite ``trn`` lines ``tok tok ... (uttid)`` atomically."""
    with atomic_write(path) as f:
        for utt, toks in items:
            f.write(" ".join([*toks, f"({utt})"]) + "\n")


def write_per_utt(path: str | os.PathLike, scored: Scored) -> None:
    """Kaldi ``per_utt``-style details: ``ref``/``hyp``/``op`` (C S I D) lines and ``#csid`` counts.

    The alignment is the Kaldi-tie-broken one whose counts the totals use; ``***`` marks the
    empty side of insertions and deletions.
    """
    with atomic_write(path) as f:
        for utt, (ref, hyp, c) in scored.utts.items():
            ali = align(ref, hyp)
            f.write(f"{utt} ref " + " ".join(EPS if a is None else a for a, _ in ali) + "\n")
            f.write(f"{utt} hyp " + " ".join(EPS if b is None else b for _, b in ali) + "\n")
            ops = ["I" if a is None else "D" if b is None else "C" if a == b else "S" for a, b in ali]
            f.write(f"{utt} op " + " ".join(ops) + "\n")
            f.write(f"{utt} #csid {c.correct} {c.subs} {c.ins} {c.dels}\n")


def load_baseline(path: str | os.PathLike) -> dict:
    """Read a JSON written by ``speechkit-score-wer --json``; needs ``wer`` (number).

    Raises:
        FileNotFoundError, DataError (not JSON, or ``wer`` missing / not a number).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("wer"), (int, float)):
        raise DataError(f"{path}: no numeric 'wer' key (expected a speechkit-score-wer --json file)")
    return data


# ---------------------------------------------------------------------------------- the scoring of two files
def _fmt(x: float | None, nd: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def score_files(ref: str | os.PathLike, hyp: str | os.PathLike, *, cer: bool = False, mode: str = "present",
                normalize: bool = True, utt2lang: str | os.PathLike | None = None,
                baseline_json: str | os.PathLike | None = None, json_path: str | os.PathLike | None = None,
                trn_dir: str | os.PathLike | None = None, fmt: str = "auto",
                logger: logging.Logger = log) -> tuple[list[str], dict]:
    """Score the transcript file ``hyp`` against ``ref`` as ``speechkit-score-wer`` does and write its files.

    Args:
        cer: score characters (code points, whitespace removed) instead of words.
        mode: references without hypothesis (:data:`MODES`): ``present`` not scored, ``all`` scored
            as empty, ``strict`` an error.
        normalize: NFC-normalise both sides first.
        utt2lang: an utt2lang file: per-language WER and averages.
        baseline_json: a ``json_path`` of an earlier run: WERR (relative WER reduction, %).
        json_path: write every number here (and the trn files next to it unless ``trn_dir``).
        trn_dir: write ``ref.trn`` / ``hyp.trn`` / ``per_utt`` (``.char`` with ``cer``) here.
        fmt: the format of ``ref`` and ``hyp`` (:data:`FORMATS`): ``auto`` (each file's own,
            :func:`transcript_format`: a Kaldi text, or the sclite trn this function writes), ``kaldi``, ``trn``.
        logger: where the warnings (ignored hypothesis ids, absent hypotheses, hypotheses split into words
            otherwise than the references: :func:`split_mismatch`) go.

    Returns:
        The report lines (compute-wer's three, then the per-language table and WERR lines) and
        what ``json_path`` holds. The files are written before this returns.

    Raises:
        FileNotFoundError; DataError (naming the file): an empty HYP or REF, a HYP none of whose ids is in
        REF (names the first of each), an utt2lang line that is
        not '<utt> <lang>' or a reference without a language, a baseline of another unit or reference
        set, ``strict`` with a reference without hypothesis, no reference word to score;
        WriteError: an unwritable ``json_path`` / ``trn_dir``.
        OutputOverlapError: ``json_path`` or a trn file would overwrite REF, HYP, ``utt2lang``,
            ``baseline_json`` or each other (checked before anything is read).
    """
    from speechkit.utils.outputs import check_output_files

    unit = "char" if cer else "word"
    side_dir = Path(trn_dir) if trn_dir else Path(json_path).parent if json_path else None
    sfx = ".char" if cer else ""
    check_output_files(
        [("--json", json_path)] + ([(f"--trn-dir's {n}" if trn_dir else f"the {n} written next to --json",
                                     side_dir / n) for n in
                                    (f"ref{sfx}.trn", f"hyp{sfx}.trn", f"per_utt{sfx}")] if side_dir else []),
        inputs={"REF": ref, "HYP": hyp, "--utt2lang": utt2lang, "--baseline-json": baseline_json})
    fmt_ref = fmt_hyp = fmt
    if fmt == "auto":
        fmt_ref, fmt_hyp = resolve_formats(ref, hyp, logger)
        if transcript_format(ref)[0] != "either":
            fmt_ref = "auto"  # its own format, said as before
        if transcript_format(hyp)[0] != "either":
            fmt_hyp = "auto"
    refs = read_transcript_file(ref, "reference", fmt_ref, logger)
    hyps = read_transcript_file(hyp, "hypothesis", fmt_hyp, logger)
    if normalize:
        refs, hyps = nfc(refs), nfc(hyps)
    unknown = unknown_hyp_ids(hyps, refs)
    if len(unknown) == len(hyps):  # nothing to score: a layout problem, not a set of missing utterances
        raise DataError(f"{hyp}: none of its {len(hyps)} utterance ids is in the reference {ref} (first: "
                        f"'{next(iter(hyps))}' in HYP, '{next(iter(refs))}' in REF): expected '<utt-id> words ...' "
                        "(Kaldi text, fields separated by spaces) or 'words ... (utt-id)' (sclite trn; see --format)")
    if unknown:  # as compute-wer: ignored, and said
        logger.warning("%d hypothesis utterance(s) of %s are not in the reference %s and are ignored: %s%s",
                       len(unknown), hyp, ref, " ".join(unknown[:10]), " ..." if len(unknown) > 10 else "")
        hyps = {u: t for u, t in hyps.items() if u in refs}
    mismatch = split_mismatch(refs, hyps, unit)
    if mismatch:
        logger.warning("%s: %s", hyp, mismatch)
    langs = None
    if utt2lang:
        langs = read_table(utt2lang)
        for lineno, (utt, lang) in enumerate(langs.items(), 1):
            if len(lang.split()) != 1:
                raise DataError(f"{utt2lang}:{lineno}: expected '<utt> <lang>', got {lang!r}")
        for lineno, utt in enumerate(refs, 1):
            if utt not in langs:
                raise DataError(f"{ref}:{lineno}: utterance '{utt}' has no language in {utt2lang}")
    baseline = load_baseline(baseline_json) if baseline_json else None
    if baseline is not None and baseline.get("unit", "word") != unit:
        raise DataError(f"{baseline_json}: baseline scored {baseline.get('unit')}s, this run {unit}s "
                        f"({'drop' if unit == 'word' else 'add'} --cer or use a matching baseline)")

    try:
        scored = score(refs, hyps, unit=unit, mode=mode, utt2lang=langs)
    except DataError as e:
        raise DataError(f"{hyp}: {e}") from None
    total = scored.total
    if scored.absent:
        shown = " ".join(scored.absent[:10])
        logger.warning("%d of %d reference utterances have no hypothesis in %s (%s): %s%s",
                       len(scored.absent), len(refs), hyp,
                       "not scored" if mode == "present" else "scored as empty", shown,
                       " ..." if len(scored.absent) > 10 else "")
    if total.num_words == 0:
        raise DataError(f"{ref}: the scored references have no {unit}s: error rate undefined")

    check = check_werr(baseline, baseline_json, refs, len(scored.absent), ref) \
        if baseline is not None else None
    lines = total.kaldi_lines()
    result = {"ref": str(ref), "hyp": str(hyp), "unit": unit, "mode": mode, **total.to_dict(),
              "absent": scored.absent, "ref_utterances": len(refs), "ref_fingerprint": reference_fingerprint(refs)}
    if unit == "char":
        result["cer"] = result["wer"]
    if scored.per_language is not None:
        avgs = scored.language_averages()
        lines.append(f"per-language ({len(scored.per_language)} languages, word-weighted average = pooled):")
        lines.append(f"  {'lang':<8} {'wer%':>7}  {'err':>6} / {'words':<6}  {'ins':>5} {'del':>5} {'sub':>5}"
                     f"  {'ser%':>7}  {'sents':>5}  {'absent':>6}")
        for lang, r in scored.per_language.items():
            wer = _fmt(kaldi_percent(r.errors, r.num_words) if r.num_words else None)
            ser = _fmt(kaldi_percent(r.sent_errs, r.num_sent) if r.num_sent else None)
            lines.append(f"  {lang:<8} {wer:>7}  {r.errors:>6} / {r.num_words:<6}  {r.ins:>5} {r.dels:>5} "
                         f"{r.subs:>5}  {ser:>7}  {r.num_sent:>5}  {r.num_absent:>6}")
        lines.append(f"  average wer%: word-weighted {_fmt(avgs['weighted'])}, "
                     f"unweighted mean over languages {_fmt(avgs['unweighted'])}")
        result["per_language"] = {lang: r.to_dict() for lang, r in scored.per_language.items()}
        result["avg_wer_weighted"] = avgs["weighted"]
        result["avg_wer_unweighted"] = avgs["unweighted"]
    if baseline is not None:
        w = werr(baseline["wer"], total.wer)
        result["baseline"] = str(baseline_json)
        result["werr"] = w
        result["werr_flags"] = check.flags  # [] = two complete runs on the same reference set
        lines.append(f"werr: {_fmt(w)} % relative to {baseline_json} "
                     f"(wer% {baseline['wer']:.2f} -> {total.wer:.2f}){check.suffix()}")
        if scored.per_language is not None and isinstance(baseline.get("per_language"), dict):
            per = {}
            for lang, r in scored.per_language.items():
                b = baseline["per_language"].get(lang, {})
                per[lang] = werr(b.get("wer") if isinstance(b, dict) else None, r.wer)
            result["werr_per_language"] = per
            lines.append("  werr% per language: " + ", ".join(f"{k} {_fmt(v)}" for k, v in per.items())
                         + check.suffix())
    # the files first: nothing is printed as a result unless they are written
    trn_dir = Path(trn_dir) if trn_dir else Path(json_path).parent if json_path else None
    if trn_dir is not None:
        ensure_writable_dir(trn_dir)
        sfx = ".char" if unit == "char" else ""
        write_trn(trn_dir / f"ref{sfx}.trn", ((u, r) for u, (r, _, _) in scored.utts.items()))
        write_trn(trn_dir / f"hyp{sfx}.trn", ((u, h) for u, (_, h, _) in scored.utts.items()))
        write_per_utt(trn_dir / f"per_utt{sfx}", scored)
        result["trn_dir"] = str(trn_dir)
    if json_path:
        with atomic_write(json_path) as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
            f.write("\n")
    return lines, result
