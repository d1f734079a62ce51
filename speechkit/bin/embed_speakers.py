"""Speaker embeddings of a Kaldi data directory with the frozen GE2E encoder of Resemblyzer.

  speechkit-embed-speakers DATA_DIR OUT_DIR [--nj N] [--min-speech S] [--no-trim-silence] [--no-renormalize]

Every utterance of DATA_DIR (wav.scp, optional segments; any sample rate, resampled to 16 kHz)
is level-normalised, VAD-trimmed and embedded (see speechkit.models.speaker_encoder). Writes, each
file atomically (Kaldi ark/scp through kaldiio, float32 *vectors* of 256 dims, as Kaldi's
xvector.scp / spk_xvector.scp; kaldiio reads them back as 1-D arrays):

  OUT_DIR/embeddings.{ark,scp}      utterance -> unit-norm utterance embedding
  OUT_DIR/spk_embeddings.{ark,scp}  speaker -> mean of its utterance embeddings, re-normalised to
                                    unit L2 norm (unless --no-renormalize): the speaker vector of
                                    Hemati & Borth (2021), section 3
  OUT_DIR/num_utts                  '<speaker> <utterances averaged>'
  OUT_DIR/utt2spk                   the embedded utterances' speakers (the verifier's labels)
  OUT_DIR/skipped                   '<utt> <speech-seconds>' for each utterance with less than
                                    --min-speech seconds of speech after trimming (empty if none)

Skipped utterances are counted and reported (warning with the first ids, after OUT_DIR/skipped is
written); a speaker all of whose utterances were skipped gets no speaker vector (warning naming
it); when every utterance is skipped that is an error naming the first ones, and nothing is
written. Unreadable audio is an error naming the utterance.

OUT_DIR is written as a whole: the files go to a temporary directory that replaces OUT_DIR only when
all are written, so a failed or killed run leaves the previous OUT_DIR complete and untouched. The
previous OUT_DIR is deleted, not backed up, when an earlier speechkit-embed-speakers run wrote it (its
.speechkit-output marker; embeddings are derived data that the same inputs give again, and the vctk
recipe re-runs this at every stage 5); any other existing directory is kept in OUT_DIR/.backup/N. OUT_DIR may not be, contain or lie inside DATA_DIR;
an existing file as OUT_DIR is an error. Both, and the options, are checked before any work.
--nj N embeds N contiguous parts of the utterance list in N worker processes (one CPU thread each);
the output does not depend on N.

Example:
  speechkit-embed-speakers data/train exp/spk_embed/train --nj 2
"""
from __future__ import annotations

import logging
import sys

from speechkit.inference.speaker_embeddings import embed_speakers
from speechkit.utils.cli import finite_float, make_parser, run_main, setup_logging

PROG = "speechkit-embed-speakers"
logger = logging.getLogger(PROG)

__all__ = ["main"]


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="Kaldi data dir (wav.scp, utt2spk)")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="where the embeddings go (replaced as a whole; derived data: no backup)")
    parser.add_argument("--nj", type=int, default=1, help="worker processes (default: 1)")
    parser.add_argument("--min-speech", type=finite_float, default=None, metavar="S",
                        help="minimum seconds of speech after VAD trimming (default: 0.5)")
    parser.add_argument("--no-trim-silence", dest="trim_silence", action="store_false",
                        help="do not cut long silences (the whole signal counts as speech)")
    parser.add_argument("--no-renormalize", dest="renormalize", action="store_false",
                        help="speaker vector = plain mean, not scaled to unit length")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file, input_dirs={"DATA_DIR": args.data_dir}, output_dirs={"OUT_DIR": args.out_dir})
        embed_speakers(args.data_dir, args.out_dir, nj=args.nj, min_speech=args.min_speech,
                       trim_silence=args.trim_silence, renormalize=args.renormalize, log=logger)
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
