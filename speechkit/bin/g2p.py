"""Phonemize a data dir with espeak-ng: OUT_DIR's `text` holds IPA phone tokens.

OUT_DIR is a copy of DATA_DIR (every table, frame_shift, feats.yaml, spk2gender) whose `text`
holds espeak-ng's phones (stress marks removed; no silence tokens), plus

  phone_info   <utt> <stress>:<syllable>:<word> ...   one item per phone token of `text`;
               stress 0/1 primary/2 secondary of the phone's syllable, syllable and word
               0-based indices within the utterance
  text.words   the original (word) `text`

The language of each utterance is its `utt2lang` entry (ISO codes: en -> espeak voice en-us; hi ta
gu ml ... as they are), else --lang. Syllables are derived (maximal onset with sonority
sequencing; see speechkit/text/g2p.py). An utterance with no phones is left out and reported, and
so is a text line whose id is not in utt2spk (counted, the first ids named, as Kaldi's
fix_data_dir.sh reports what it drops); a language espeak-ng lacks is an error naming utt2lang's
line. OUT_DIR may not be, contain or lie inside DATA_DIR.

Example:
  speechkit-g2p data/sp01/train data/sp01/train_phn
"""
from __future__ import annotations

import logging
import sys

from speechkit.text.g2p import g2p_data_dir
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-g2p"
logger = logging.getLogger(PROG)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="data dir with word-level text (and utt2lang)")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="phone-level data dir to write")
    parser.add_argument("--lang", default=None,
                        help="language of utterances not in utt2lang (ISO code or espeak voice, e.g. en, en-gb)")
    parser.add_argument("--nj", type=int, default=1, help="parallel espeak-ng processes (default: 1)")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file, input_dirs={"DATA_DIR": args.data_dir}, output_data_dirs={"OUT_DIR": args.out_dir})
        if args.nj < 1:
            raise ValueError(f"--nj must be >= 1, got {args.nj}")
        res = g2p_data_dir(args.data_dir, args.out_dir, lang=args.lang, nj=args.nj)
        langs = ", ".join(f"{k} {v}" for k, v in sorted(res.languages.items()))
        print(f"{PROG}: {res.num_out} of {res.num_in} utterances ({langs}), {res.num_phones} phones "
              f"-> {args.out_dir}" + (f"; {len(res.empty)} left out without phones" if res.empty else "")
              + (f"; {len(res.no_speaker)} text line(s) not in utt2spk left out" if res.no_speaker else ""))
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
