"""Copy a Kaldi data directory, optionally renaming ids (Kaldi's utils/copy_data_dir.sh).

Utterance ids become PREFIX+utt+SUFFIX in every per-utterance file (phone_alignments included,
and wav.scp when there are no segments); speaker ids become SPK_PREFIX+spk+SPK_SUFFIX in
utt2spk/spk2utt/cmvn.scp/spk2gender. feats.scp keeps pointing at the source's arks (the
validator accepts renamed ids there); frame_shift, feats.yaml, cmvn_global.ark are copied. Give the same
prefix to both so that speaker ids stay prefixes of utterance ids.

DEST may not be, contain or lie inside SRC. An existing DEST gets the new tables (stale tables
removed); its features and CMVN stats (added by later tools) stay while its utterances and audio
(utt2spk, wav.scp, segments) are the same, and whatever is replaced or removed is first copied
to DEST/.backup/N (logged). Other files there (logs, arks) are never touched.

Example:
  speechkit-copy-data-dir --utt-prefix sp1.1- --spk-prefix sp1.1- data/train data/train_sp
"""
from __future__ import annotations

import sys

from speechkit.data.copy_data_dir import copy_data_dir
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-copy-data-dir"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("src", metavar="SRC", help="source data directory")
    parser.add_argument("dest", metavar="DEST", help="destination data directory")
    parser.add_argument("--utt-prefix", default="", help="prefix added to utterance ids (default: none)")
    parser.add_argument("--spk-prefix", default="", help="prefix added to speaker ids (default: none)")
    parser.add_argument("--utt-suffix", default="", help="suffix added to utterance ids (default: none)")
    parser.add_argument("--spk-suffix", default="", help="suffix added to speaker ids (default: none)")
    args = parser.parse_args(argv)

    def body() -> None:
        setup_logging()
        out = copy_data_dir(args.src, args.dest, utt_prefix=args.utt_prefix, spk_prefix=args.spk_prefix,
                            utt_suffix=args.utt_suffix, spk_suffix=args.spk_suffix)
        print(f"{PROG}: copied {len(out)} utterances to {args.dest}")

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
