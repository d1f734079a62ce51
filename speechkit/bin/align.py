"""Forced phone alignment: speechkit-align DATA_DIR EXP_DIR [--model-dir DIR] [--nj N] [--optional-silence true|false] [--config YAML] [--KEY VALUE ...]

Without --model-dir, trains a flat-start HMM-GMM aligner (Kaldi's train_mono.sh + train_deltas.sh
recipe: MFCC + deltas with per-speaker CMVN, 3-state left-to-right phone HMMs, Baum-Welch then
Viterbi re-estimation with Gaussian splitting, then decision-tree tied triphones; optional
LDA+MLLT and fMLLR speaker-adaptive stages; see speechkit.align) on DATA_DIR's audio
(wav.scp, optional segments) and the tokens of its `text` (phones; no boundary is read), saves it
in EXP_DIR and aligns DATA_DIR with it. With --model-dir DIR it loads the aligner trained in DIR
and only aligns.

Outputs in EXP_DIR:
  phone_alignments   '<utt> <start-s> <end-s> <phone>', contiguous from 0 to the end of the audio;
                     optional silences are 'sil' segments (dropping them gives the text's tokens)
  unaligned          '<utt> <reason>' for every utterance that could not be aligned (empty text,
                     unknown token, too few frames, unreadable audio); they are also counted and
                     the first ones named in a warning
  final.mdl, phones.txt, config.yaml, log/train.log   (training only: the aligner)
  .backup/N/         training into an EXP_DIR that holds an aligner: the previous one, with the
                     alignments made with it and its log, moved here when the new one is saved
With --model-dir, an EXP_DIR holding another aligner (a final.mdl other than DIR's) is refused:
its alignments would lie beside a model that did not make them.

Optional silence ('sil') may be inserted at the start, at the end and between words, where
DATA_DIR/phone_info ('<utt> <stress>:<syllable>:<word> ...') gives word indices;
--optional-silence false turns it off (e.g. TIMIT, whose text carries h#/pau/epi explicitly).

Config overrides are the keys of AlignerConfig, '-' and '_' alike (training only; an aligner
loaded with --model-dir keeps its own): --frame-shift 0.005  --num-iters 20  --tri-leaves 0 (monophones)

The exit status is non-zero on bad input files (a message naming the file and line) or when no
utterance could be aligned.

Examples:
  speechkit-align data/train_phones exp/align
  speechkit-align data/test_phones exp/align_test --model-dir exp/align
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from speechkit.utils.cli import ConfigError, make_parser, positive_int, run_main, setup_logging
from speechkit.utils.cli import split_overrides as cli_split_overrides
from speechkit.utils.config import str2bool
from speechkit.utils.fileio import DataError, write_table
from speechkit.utils.outputs import check_output_dir

# speechkit.align (torch) is imported where used: --help and argument errors answer without torch.

PROG = "speechkit-align"
logger = logging.getLogger(PROG)
_OWN = {"--model-dir", "--nj", "--optional-silence", "--config", "--log-file", "--help", "-h"}


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(own_args, "key=VALUE" overrides)``: :func:`speechkit.utils.cli.split_overrides`."""
    return cli_split_overrides(argv, _OWN, {"--help"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="data dir with wav.scp and phone-token text")
    parser.add_argument("exp_dir", metavar="EXP_DIR", help="output dir (alignments; the aligner when training)")
    parser.add_argument("--model-dir", default=None, metavar="DIR", help="align with the aligner trained in DIR")
    parser.add_argument("--nj", type=positive_int, default=1, help="parallel processes")
    parser.add_argument("--optional-silence", default=None, metavar="true|false",
                        help="insert optional 'sil' (training; default true)")
    parser.add_argument("--config", default=None, metavar="YAML", help="aligner config (training)")
    parser.add_argument("--log-file", default=None, help="append the log here too")

    def body() -> int:
        own, overrides = split_overrides(argv)
        args = parser.parse_args(own)
        from speechkit.align import (ALIGNMENTS_FILE, CONFIG_FILE, MAX_LISTED, MODEL_FILE, PHONES_FILE, UNALIGNED_FILE,
                                     Aligner, check_alignment_dir, load_aligner_config, train_aligner)

        setup_logging(args.log_file, inputs={"--config": args.config},
                      input_dirs={"DATA_DIR": args.data_dir, "--model-dir": args.model_dir},
                      outputs=[(f"EXP_DIR's {n}", Path(args.exp_dir) / n)
                               for n in (ALIGNMENTS_FILE, UNALIGNED_FILE, MODEL_FILE, PHONES_FILE, CONFIG_FILE)])

        # EXP_DIR may lie inside --model-dir (exp/align/align_test), never be or contain it nor what is read
        # (the data, the --config file, which training would overwrite with the resolved config.yaml)
        exp_dir = check_output_dir(args.exp_dir, inputs={"DATA_DIR": args.data_dir, "--config": args.config},
                                   experiment_dirs={"--model-dir": args.model_dir}, option="EXP_DIR")
        t0 = time.time()
        if args.model_dir is not None:
            if overrides or args.config or args.optional_silence is not None:
                raise ConfigError("command line: --config, --optional-silence and config overrides apply to "
                                  "training only; the aligner of --model-dir keeps its own settings")
            check_alignment_dir(exp_dir, args.model_dir)
            aligner = Aligner.load(args.model_dir)
            result = aligner.align(args.data_dir, nj=args.nj)
        else:
            if args.optional_silence is not None:
                silence = str2bool(args.optional_silence, "--optional-silence")
                overrides = [f"optional_silence={str(silence).lower()}", *overrides]
            config = load_aligner_config(args.config, overrides)
            _, result = train_aligner(args.data_dir, exp_dir, config, nj=args.nj)
        n_ok, n_bad = len(result.alignments), len(result.unaligned)
        if n_bad:
            first = ", ".join(f"{u} ({r})" for u, r in list(result.unaligned.items())[:MAX_LISTED])
            logger.warning("could not align %d of %d utterance(s): %s%s", n_bad, n_ok + n_bad, first,
                           " ..." if n_bad > MAX_LISTED else "")
        if n_ok == 0:  # no (stale) phone_alignments that a later stage could take for this run's
            (exp_dir / ALIGNMENTS_FILE).unlink(missing_ok=True)
            write_table(exp_dir / UNALIGNED_FILE, {u: " ".join(r.split()) for u, r in result.unaligned.items()})
            raise DataError(f"{args.data_dir}: no utterance could be aligned (reasons in {exp_dir / UNALIGNED_FILE})")
        lines = result.write(exp_dir)
        print(f"{PROG}: aligned {n_ok} of {n_ok + n_bad} utterances ({lines} segments) in "
              f"{time.time() - t0:.1f} s -> {exp_dir / ALIGNMENTS_FILE}")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
