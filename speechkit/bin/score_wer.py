"""Score ASR hypotheses: Kaldi compute-wer report, sclite trn files, per-language WER and WERR.

    speechkit-score-wer REF HYP [--cer] [--mode present|all|strict] [--json OUT]
                        [--trn-dir DIR] [--utt2lang F] [--baseline-json F]

REF and HYP are Kaldi 'text' files (<uttid> <transcript>); a HYP line with only the id is an
empty hypothesis. Prints compute-wer's three lines exactly:

    %WER 12.34 [ 56 / 454, 3 ins, 10 del, 43 sub ]      (+ ' [PARTIAL]' if hypotheses are missing)
    %SER 50.00 [ 5 / 10 ]
    Scored 10 sentences, 0 not present in hyp.

with Kaldi's tie-breaking of the edit distance (see speechkit.scoring.wer). --cer scores code
points with whitespace removed (Kaldi's CER recipes); the lines still read %WER, as
compute-wer's do on character tokens. With --utt2lang, a per-language table follows (lower-case
'wer%' so that Kaldi's utils/best_wer.sh only ever picks the overall line), with the word-weighted
average (pooled errors / pooled reference words, equal to the overall WER) and the unweighted
mean over languages. With --baseline-json (a JSON this tool wrote), the relative WER reduction
WERR = 100 * (WER_base - WER) / WER_base, in %, overall and per language, only between runs
scored on the same reference set (same utterance ids and reference words: the JSON records their
fingerprint and count; another set is an error). As compute-wer marks a partial WER, a WERR with
hypotheses missing on either side carries [PARTIAL n/N] (n of the N references have one) or
[baseline PARTIAL n/N]; against a JSON of an older version without the fingerprint it carries
[UNCHECKED: ...]. A WERR line without a bracket compares two complete runs on one reference set.

--json writes every number (full precision) and, next to it (or into --trn-dir), sclite
ref.trn / hyp.trn ('tok tok ... (uttid)' for the scored utterances; ref.char.trn/hyp.char.trn
with --cer) and Kaldi-style per_utt (per_utt.char) alignment details.

Output files are written before anything is printed: an unwritable --json/--trn-dir is one line
(`speechkit-score-wer: error: cannot write PATH: reason`, exit 1) and no result on stdout.
Tokens are split on ASCII whitespace, as Kaldi does (U+00A0, U+3000 are not separators), after
Unicode NFC normalisation of both sides (--no-nfc: as written). A HYP id that is not in REF is
ignored with a warning that counts them, as compute-wer does.
Errors (exit 1, naming the file): HYP with no line at all; with --mode strict, a REF id without hypothesis; an utterance without a language in
--utt2lang; no reference word to score.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from speechkit.scoring.wer import (
    MODES, check_werr, kaldi_percent, load_baseline, nfc, read_transcripts, reference_fingerprint, score,
    unknown_hyp_ids, werr, write_per_utt, write_trn,
)
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir, read_table

logger = logging.getLogger("speechkit-score-wer")


def _fmt(x: float | None, nd: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def _run(args) -> int:
    setup_logging()
    unit = "char" if args.cer else "word"
    refs = read_transcripts(args.ref, "reference")
    hyps = read_transcripts(args.hyp, "hypothesis")
    if args.nfc:
        refs, hyps = nfc(refs), nfc(hyps)
    unknown = unknown_hyp_ids(hyps, refs)
    if unknown:  # as compute-wer: ignored, and said
        logger.warning("%d hypothesis utterance(s) of %s are not in the reference %s and are ignored: %s%s",
                       len(unknown), args.hyp, args.ref, " ".join(unknown[:10]), " ..." if len(unknown) > 10 else "")
        hyps = {u: t for u, t in hyps.items() if u in refs}
    utt2lang = None
    if args.utt2lang:
        utt2lang = read_table(args.utt2lang)
        for lineno, (utt, lang) in enumerate(utt2lang.items(), 1):
            if len(lang.split()) != 1:
                raise DataError(f"{args.utt2lang}:{lineno}: expected '<utt> <lang>', got {lang!r}")
        for lineno, utt in enumerate(refs, 1):
            if utt not in utt2lang:
                raise DataError(f"{args.ref}:{lineno}: utterance '{utt}' has no language in {args.utt2lang}")
    baseline = load_baseline(args.baseline_json) if args.baseline_json else None
    if baseline is not None and baseline.get("unit", "word") != unit:
        raise DataError(f"{args.baseline_json}: baseline scored {baseline.get('unit')}s, this run {unit}s "
                        f"({'drop' if unit == 'word' else 'add'} --cer or use a matching baseline)")

    try:
        scored = score(refs, hyps, unit=unit, mode=args.mode, utt2lang=utt2lang)
    except DataError as e:
        raise DataError(f"{args.hyp}: {e}") from None
    total = scored.total
    if scored.absent:
        shown = " ".join(scored.absent[:10])
        logger.warning("%d of %d reference utterances have no hypothesis in %s (%s): %s%s",
                       len(scored.absent), len(refs), args.hyp,
                       "not scored" if args.mode == "present" else "scored as empty", shown,
                       " ..." if len(scored.absent) > 10 else "")
    if total.num_words == 0:
        raise DataError(f"{args.ref}: the scored references have no {unit}s: error rate undefined")

    check = check_werr(baseline, args.baseline_json, refs, len(scored.absent), args.ref) \
        if baseline is not None else None
    lines = total.kaldi_lines()
    result = {"ref": str(args.ref), "hyp": str(args.hyp), "unit": unit, "mode": args.mode, **total.to_dict(),
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
        result["baseline"] = str(args.baseline_json)
        result["werr"] = w
        result["werr_flags"] = check.flags  # [] = two complete runs on the same reference set
        lines.append(f"werr: {_fmt(w)} % relative to {args.baseline_json} "
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
    trn_dir = Path(args.trn_dir) if args.trn_dir else Path(args.json).parent if args.json else None
    if trn_dir is not None:
        ensure_writable_dir(trn_dir)
        sfx = ".char" if unit == "char" else ""
        write_trn(trn_dir / f"ref{sfx}.trn", ((u, r) for u, (r, _, _) in scored.utts.items()))
        write_trn(trn_dir / f"hyp{sfx}.trn", ((u, h) for u, (_, h, _) in scored.utts.items()))
        write_per_utt(trn_dir / f"per_utt{sfx}", scored)
        result["trn_dir"] = str(trn_dir)
    if args.json:
        with atomic_write(args.json) as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
            f.write("\n")
    print("\n".join(lines))
    return 0


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog="speechkit-score-wer")
    parser.add_argument("ref", help="reference Kaldi text file")
    parser.add_argument("hyp", help="hypothesis Kaldi text file (ids not in REF are ignored with a warning)")
    parser.add_argument("--nfc", default=True, action=argparse.BooleanOptionalAction,
                        help="Unicode NFC-normalise references and hypotheses before scoring (default: on; "
                             "--no-nfc compares the code points as written)")
    parser.add_argument("--cer", action="store_true",
                        help="score characters (code points, whitespace removed) instead of words")
    parser.add_argument("--mode", choices=MODES, default="present",
                        help="references without hypothesis: present = not scored (default, as Kaldi's "
                             "score_kaldi.sh), all = scored as empty, strict = error; both non-strict "
                             "modes mark the result [PARTIAL]")
    parser.add_argument("--json", default=None, help="write all numbers here (trn files go next to it)")
    parser.add_argument("--trn-dir", default=None,
                        help="write ref.trn/hyp.trn/per_utt here (default: the --json directory; none "
                             "without either)")
    parser.add_argument("--utt2lang", default=None, help="utt2lang file: per-language WER and averages")
    parser.add_argument("--baseline-json", default=None,
                        help="a --json of an earlier run: print WERR (relative WER reduction, %%)")
    args = parser.parse_args(argv)
    return run_main("speechkit-score-wer", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
