"""Word and character error rates, counted exactly as Kaldi's ``compute-wer``: totals, per-language
breakdown, the report and its files.

Report lines (``compute-wer``, byte for byte)::

    %WER 12.34 [ 56 / 454, 3 ins, 10 del, 43 sub ] [PARTIAL]
    %SER 50.00 [ 5 / 10 ]
    Scored 10 sentences, 0 not present in hyp.

Missing hypotheses (``mode``, Kaldi's ``--mode``): ``present`` (default, as Kaldi's
``steps/score_kaldi.sh``) scores only references that have a hypothesis; ``all`` scores a
missing one as empty (all deletions); ``strict`` makes it an error. Both non-strict modes count
the missing ones in ``not present in hyp`` and append ``[PARTIAL]``.

How: :func:`score` tokenizes each reference/hypothesis pair and counts its edits
(:mod:`speechkit.scoring.edit_distance`: Kaldi's tie-breaking, tokens, 32-bit percentages) into
:class:`WerResult` totals, overall and per language; :func:`score_files` is ``speechkit-score-wer``:
it reads the two files (:mod:`speechkit.scoring.transcripts`: Kaldi text or sclite trn), checks
them, scores, compares with a baseline run (:mod:`speechkit.scoring.werr`) and writes the JSON,
the trn files and the per-utterance alignments (:func:`write_per_utt`). Every public name of those
three modules is also importable from here.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

from speechkit.scoring.edit_distance import (
    ASCII_SPACE,
    EPS,
    EditCounts,
    align,
    counts_of,
    edit_counts,
    kaldi_percent,
    nfc,
    tokenize,
)
from speechkit.scoring.transcripts import (
    FORMATS,
    read_transcript_file,
    read_transcripts,
    read_trn,
    resolve_formats,
    split_mismatch,
    transcript_format,
    unknown_hyp_ids,
    write_trn,
)
from speechkit.scoring.werr import WerrCheck, check_werr, load_baseline, reference_fingerprint, werr
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir, read_table
from speechkit.utils.outputs import check_output_files

__all__ = [
    "MODES", "WerResult", "Scored", "score", "write_per_utt", "score_files",
    # speechkit.scoring.edit_distance
    "ASCII_SPACE", "EPS", "EditCounts", "align", "counts_of", "edit_counts", "kaldi_percent", "nfc", "tokenize",
    # speechkit.scoring.transcripts
    "FORMATS", "read_transcript_file", "read_transcripts", "read_trn", "resolve_formats", "split_mismatch",
    "transcript_format", "unknown_hyp_ids", "write_trn",
    # speechkit.scoring.werr
    "WerrCheck", "check_werr", "load_baseline", "reference_fingerprint", "werr",
]

log = logging.getLogger(__name__)

MODES = ("present", "all", "strict")


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
    unit = "char" if cer else "word"
    side_dir = Path(trn_dir) if trn_dir else Path(json_path).parent if json_path else None
    sfx = ".char" if cer else ""
    check_output_files(
        [("`json_path`", json_path)] + ([(f"`trn_dir`'s {n}" if trn_dir else f"the {n} written next to `json_path`",
                                          side_dir / n) for n in
                                         (f"ref{sfx}.trn", f"hyp{sfx}.trn", f"per_utt{sfx}")] if side_dir else []),
        inputs={"REF": ref, "HYP": hyp, "`utt2lang`": utt2lang, "`baseline_json`": baseline_json})
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
        raise naming_parameters(DataError(
            f"{hyp}: none of its {len(hyps)} utterance ids is in the reference {ref} (first: '{next(iter(hyps))}' in "
            f"HYP, '{next(iter(refs))}' in REF): expected '<utt-id> words ...' (Kaldi text, fields separated by "
            "spaces) or 'words ... (utt-id)' (sclite trn; see `fmt`)"))
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
        raise naming_parameters(DataError(f"{baseline_json}: baseline scored {baseline.get('unit')}s, this run "
                                          f"{unit}s ({'drop' if unit == 'word' else 'add'} `cer` or use a matching "
                                          "baseline)"))

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
