"""Score ASR hypotheses: Kaldi compute-wer report, sclite trn files, per-language WER and WERR.

    speechkit-score-wer REF HYP [--cer] [--mode present|all|strict] [--json OUT]
                        [--trn-dir DIR] [--utt2lang F] [--baseline-json F] [--format auto|kaldi|trn]

REF and HYP are Kaldi 'text' files (<uttid> <transcript>) or sclite trn files (<transcript> (<uttid>),
as this tool writes them); a line with only the id is an empty hypothesis. --format auto (default)
reads a file as trn when every line ends in '(uttid)' and those ids are distinct (or the name ends
in .trn), else as Kaldi text; a file that reads as either (its lines also start with distinct ids) is
read in the format that pairs its ids with the other file's (Kaldi text when both do, with a warning). Prints compute-wer's three lines exactly:

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
ignored with a warning that counts them, as compute-wer does; a HYP none of whose ids is in REF is an
error. A warning names HYP and a few ids when the hypotheses are not split into words as the
references are (a ',', ';', '|' or non-ASCII space that no reference holds; one-word hypotheses
for references of 3+ words): a file separated by commas would score about 100 %.
Errors (exit 1, naming the file): HYP with no line at all; with --mode strict, a REF id without hypothesis; an utterance without a language in
--utt2lang; no reference word to score.
"""
from __future__ import annotations

import argparse
import logging
import sys

from speechkit.scoring.wer import FORMATS, MODES, score_files
from speechkit.utils.cli import make_parser, run_main, setup_logging

logger = logging.getLogger("speechkit-score-wer")


def _run(args) -> int:
    setup_logging()
    lines, _ = score_files(args.ref, args.hyp, cer=args.cer, mode=args.mode, normalize=args.nfc,
                           utt2lang=args.utt2lang, baseline_json=args.baseline_json, json_path=args.json,
                           trn_dir=args.trn_dir, fmt=args.format, logger=logger)
    print("\n".join(lines))
    return 0


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog="speechkit-score-wer")
    parser.add_argument("ref", help="reference: Kaldi text file or sclite trn file")
    parser.add_argument("hyp", help="hypotheses: Kaldi text or sclite trn file (ids not in REF are ignored with a "
                                    "warning)")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="how REF and HYP are read: auto (trn when every line ends in '(uttid)' and those ids "
                             "are distinct or the name ends in .trn, else Kaldi text), kaldi, trn (default: "
                             "%(default)s)")
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
    return run_main("speechkit-score-wer", lambda: _run(args), parser=parser,
                    flags={"fmt": "--format", "json_path": "--json"})


if __name__ == "__main__":
    sys.exit(main())
