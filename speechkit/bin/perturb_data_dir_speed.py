"""Speed-perturb a Kaldi data directory (Kaldi's utils/data/perturb_data_dir_speed.sh and
perturb_data_dir_speed_3way.sh).

  python -m speechkit.bin.perturb_data_dir_speed FACTOR SRC DEST
  python -m speechkit.bin.perturb_data_dir_speed --3way [--always-include-prefix] SRC DEST

(utils/perturb_data_dir_speed.sh and utils/perturb_data_dir_speed_3way.sh call these.)

FACTOR SRC DEST: DEST is SRC played FACTOR times faster: wav.scp entries become sox pipes
('sox a.wav -t wav - speed 0.9 |'), utterance, speaker (and, with segments, recording) ids get the
prefix sp<FACTOR>- (sp0.9-), utt2dur / segments / reco2dur / phone_alignments times are divided by
FACTOR; text, utt2lang, spk2gender follow the new ids; utt2uniq maps each new utterance to its
source. Features are not carried (compute them on DEST). utt2dur is computed from the audio when
SRC has none.

--3way SRC DEST: SRC plus its 0.9 and 1.1 copies (3x the data); SRC keeps its ids, or gets sp1.0-
with --always-include-prefix.

The result passes speechkit-validate-data-dir --no-feats: a SRC whose speaker ids are not prefixes
of its utterance ids is an error naming utt2spk's line, and the result is validated before it is
written. DEST may not be, contain or lie inside SRC. Needs sox on PATH to read the audio.

Example:
  utils/perturb_data_dir_speed_3way.sh data/train data/train_sp
"""
from __future__ import annotations

import sys

from speechkit.data.speed_perturb import perturb_data_dir_speed, perturb_data_dir_speed_3way
from speechkit.utils.cli import make_parser, run_main, setup_logging

PROG = "speechkit-perturb-data-dir-speed"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("args", nargs="+", metavar="ARG", help="FACTOR SRC DEST, or with --3way: SRC DEST")
    parser.add_argument("--3way", dest="three_way", action="store_true",
                        help="SRC plus its 0.9 and 1.1 speed copies, combined")
    parser.add_argument("--always-include-prefix", "--always_include_prefix", dest="always_include_prefix",
                        choices=("true", "false"), default=None, nargs="?", const="true",
                        help="--3way only: give the source's ids the prefix sp1.0- too (default: false)")
    args = parser.parse_args(argv)

    def body() -> None:
        setup_logging()
        if args.always_include_prefix is not None and not args.three_way:
            raise ValueError("--always-include-prefix applies to --3way only (a single FACTOR always prefixes "
                             "its ids with sp<FACTOR>-)")
        if args.three_way:
            if len(args.args) != 2:
                raise ValueError(f"--3way takes SRC DEST, got {len(args.args)} argument(s)")
            src, dest = args.args
            out = perturb_data_dir_speed_3way(src, dest, always_include_prefix=args.always_include_prefix == "true")
            print(f"{PROG}: wrote {dest}: {len(out)} utterances (source, speed 0.9, speed 1.1)")
            return
        if len(args.args) != 3:
            raise ValueError(f"expected FACTOR SRC DEST, got {len(args.args)} argument(s)")
        factor, src, dest = args.args
        try:
            f = float(factor)
        except ValueError:
            raise ValueError(f"FACTOR must be a number (e.g. 0.9), got {factor!r}") from None
        out = perturb_data_dir_speed(f, src, dest)
        print(f"{PROG}: wrote {dest}: {len(out)} utterances at speed {factor}")

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
