"""Check a Kaldi data directory (same checks as Kaldi's utils/validate_data_dir.sh).

Prints one line per problem, `<file>:<line>: <message>`, to stderr and exits 1 if there is any;
otherwise prints `Successfully validated data-directory DIR` and exits 0.

Checked: every file sorted under LC_ALL=C, unique ids, a final newline, no empty lines, UTF-8;
utt2spk/spk2utt present and consistent; speaker ids are prefixes of utterance ids; text ids ==
utt2spk ids, without the words <s>, </s>, #0; wav.scp present and covering every recording (and
segments well formed, with end > start >= 0 and recordings in wav.scp); utt2lang/utt2dur/utt2uniq
cover the utterances (durations > 0), reco2dur the recordings; feats.scp and utt2num_frames cover
the same utterances with positive frame counts; cmvn.scp keyed by exactly the speakers (global
stats belong in cmvn_global.ark); spk2gender keyed by exactly the speakers, values m/f;
phone_alignments of utterances in utt2spk, grouped and sorted.

Not in Kaldi: every feats.scp entry must point into an ark that exists; for arks written by
speechkit-compute-feats (their manifest knows), at the matrix written for that utterance (not one
written since for another data dir), and with unchanged inputs (a wav.scp entry or audio file
changed since the features were computed is reported as stale).
Every cmvn.scp entry must read a statistics matrix (its ark exists and holds one at the offset).

With --check-audio (not in Kaldi) every wav.scp entry is opened too.

Example:
  speechkit-validate-data-dir --no-feats data/train
  speechkit-validate-data-dir --no-feats --check-audio --sample-rate 16000 data/train
"""
from __future__ import annotations

import sys

from speechkit.data.validate import validate
from speechkit.utils.cli import make_parser, positive_int, run_main

PROG = "speechkit-validate-data-dir"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DIR", help="the data directory to check")
    parser.add_argument("--no-feats", action="store_true", help="do not require feats.scp (before feature extraction)")
    parser.add_argument("--no-text", action="store_true", help="do not require text (untranscribed data)")
    parser.add_argument("--no-wav", action="store_true", help="do not require wav.scp (features-only data)")
    parser.add_argument("--no-spk-sort", action="store_true",
                        help="do not require speaker ids to be prefixes of utterance ids")
    parser.add_argument("--check-audio", action="store_true",
                        help="also open every wav.scp entry (runs commands): reports missing, empty, "
                             "truncated and non-audio files and segments past the end of the audio")
    parser.add_argument("--sample-rate", type=positive_int, default=None, metavar="HZ",
                        help="with --check-audio: the sample rate every recording must have")
    args = parser.parse_args(argv)
    if args.sample_rate is not None and not args.check_audio:
        parser.error("--sample-rate needs --check-audio")

    def body() -> int:
        problems = validate(args.data_dir, no_feats=args.no_feats, no_text=args.no_text, no_wav=args.no_wav,
                            no_spk_sort=args.no_spk_sort, check_audio=args.check_audio,
                            expected_sr=args.sample_rate)
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print(f"{PROG}: {len(problems)} problem(s) in {args.data_dir}", file=sys.stderr)
            return 1
        print(f"Successfully validated data-directory {args.data_dir}")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
