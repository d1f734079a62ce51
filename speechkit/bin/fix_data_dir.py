"""Repair a Kaldi data directory in place (Kaldi's utils/fix_data_dir.sh).

Sorts every file (LC_ALL=C), drops duplicate ids, empty and malformed lines, keeps only the
utterances present in every per-utterance file (utt2spk, text, segments, utt2lang, utt2dur,
feats.scp, utt2num_frames; wav.scp when there are no segments) whose recording is in wav.scp,
prunes wav.scp to the recordings, cmvn.scp and spk2gender to the speakers and phone_alignments to
the utterances still used, and regenerates spk2utt. A cmvn.scp holding only a 'global' entry is
moved to cmvn_global.ark. The original files are copied to a new numbered DIR/.backup/N/ first
(1, 2, ...: an earlier backup is never overwritten); a directory that needs no change is not
touched. The utterances dropped are counted and named (first few) in a warning. Prints
`kept N utterances out of M`, M counting every utterance id found in any per-utterance file.
Exits 1, modifying nothing, if no utterance would remain.

Example:
  speechkit-fix-data-dir data/train
"""
from __future__ import annotations

import sys

from speechkit.data.fix import fix_data_dir
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-fix-data-dir"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DIR", help="the data directory to fix (modified in place)")
    args = parser.parse_args(argv)

    def body() -> None:
        setup_logging()
        kept, total = fix_data_dir(args.data_dir)
        print(f"{PROG}: kept {kept} utterances out of {total}")

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
