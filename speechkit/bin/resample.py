"""Decode an audio file, mix it to mono and resample it: 16-bit PCM WAV on stdout (or --out FILE).

Usage:
  speechkit-resample --rate HZ FILE [--out OUT]

Any format libsndfile reads: WAV, FLAC, Ogg Vorbis and Opus, MP3 (what Common Voice ships), ...
Channels are averaged (as sox's -c 1), the rate is changed with soxr (high quality; nothing at the
native rate), no dither: the same bytes on every run. It is the wav.scp pipe of the corpus
preparers for the files sox cannot read (Debian's sox has no MP3 or Opus handler):

  utt1 speechkit-resample --rate 16000 /corpus/clips/common_voice_en_1.mp3 |

speechkit's tools read an entry of exactly that form in their own process (the same bytes, no
subprocess); Kaldi and other tools run the command. A missing, empty or undecodable file is one
line on stderr naming it, and exit 1. --out is written atomically (a failed run leaves no part of it)
and is never FILE itself nor a table of a data dir (speechkit.utils.outputs.check_output_files).
"""
from __future__ import annotations

import sys

from speechkit.data.audio import resampled_wav_bytes
from speechkit.utils.cli import make_parser, positive_int, run_main
from speechkit.utils.fileio import atomic_write
from speechkit.utils.outputs import check_output_files

PROG = "speechkit-resample"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("file", metavar="FILE", help="the audio file")
    parser.add_argument("--rate", type=positive_int, required=True, metavar="HZ", help="output sample rate (Hz)")
    parser.add_argument("--out", default="-", metavar="OUT", help="output WAV file (default: -, stdout)")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.out != "-":  # --out FILE replaced the input it was read from (exit 0)
            check_output_files({"--out": args.out}, inputs={"FILE": args.file})
        data = resampled_wav_bytes(args.file, args.rate)
        if args.out == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with atomic_write(args.out, "wb") as f:
                f.write(data)
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
