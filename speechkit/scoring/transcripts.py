"""The transcript files a WER is scored from and writes: Kaldi ``text`` and sclite ``trn``.

Formats: Kaldi ``text`` (``<uttid> words ...``, :func:`read_transcripts`) or sclite ``trn``
(``words ... (uttid)``, :func:`read_trn`; what :func:`write_trn` writes). :func:`transcript_format`
tells them apart from a file's lines (and its ``.trn`` name); a file that reads as either is read
in the format that pairs its ids with those of the other file (:func:`resolve_formats`).
:func:`read_transcript_file` reads one file in a given or detected format.

Checks of a hypothesis file against its reference before scoring: :func:`unknown_hyp_ids`
(ids compute-wer would ignore) and :func:`split_mismatch` (hypotheses split into words otherwise
than the references, e.g. by commas, which Kaldi's split on ASCII whitespace would score as one word).
"""
from __future__ import annotations

import logging
import os
import re
import unicodedata
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from speechkit.scoring.edit_distance import ASCII_SPACE, tokenize
from speechkit.utils.errors import ParameterError
from speechkit.utils.fileio import DataError, atomic_write, read_lines, read_table

# the scorer's logger (speechkit.scoring.wer), so the default ``logger`` keeps the name its messages always had
log = logging.getLogger("speechkit.scoring.wer")


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
        ParameterError: an unknown ``fmt``; the errors of :func:`read_transcripts` / :func:`read_trn`.
    """
    if fmt not in FORMATS:
        raise ParameterError("fmt", f"`fmt` must be one of {', '.join(FORMATS)}, got {fmt!r}")
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
