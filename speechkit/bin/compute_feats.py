"""Compute features for a Kaldi data directory (Kaldi's steps/make_mfcc.sh, one tool for every frontend).

  speechkit-compute-feats --config conf/mfcc.yaml [--nj N] [--job J | --merge-only] DATA_DIR [LOG_DIR [FEAT_DIR]]

The frontend (mfcc, logmel, spectrogram, fbank, kaldi_mfcc, world) is chosen by the config's `type:`
(see conf/*.yaml). The utterances of DATA_DIR (C-sorted) are split into N contiguous parts:

  --job J       compute part J only, writing FEAT_DIR/raw_<type>_<tag>.J.<fp>.{ark,scp} (Kaldi ark/scp
                via kaldiio, renamed into place when complete) and its manifest .J.<fp>.json; logs to
                stdout. <tag> is the data dir's name and a hash of its path (train_3f2a9c1e), so data
                dirs of the same name never share arks; <fp> is 12 hex digits of the part's fingerprint
                (config, --compress and the part's inputs, below). This is what utils/make_feats.sh
                runs under $cmd (run.pl, slurm.pl).
  (neither)     run the N parts as local processes (at most --max-jobs at once), each logging to
                LOG_DIR/compute_feats.J.log, then merge.
  --merge-only  only merge: check all N parts are complete and current, then write DATA_DIR/feats.scp
                (sorted), DATA_DIR/utt2num_frames, DATA_DIR/frame_shift (seconds) and DATA_DIR/feats.yaml
                (the resolved frontend config). A missing or failed part is an error; no feats.scp is
                written then.

A part is recomputed only if its inputs (wav.scp/segments lines, the sizes and times of the audio
files, including those a 'sox FILE ... |' pipe reads), the resolved config or --compress changed
(use --force to recompute anyway). Before a part is recomputed, DATA_DIR's feats.scp,
utt2num_frames, feats.yaml, frame_shift, cmvn.scp and cmvn_global.ark are moved to
DATA_DIR/.backup/N/ (as Kaldi's make_mfcc.sh does), so a failed run leaves no feats.scp;
a merge that switches feats.scp to other content without recomputing (an earlier config's
parts reused) moves them the same way: CMVN stats stay only beside the feats.scp they describe.
Since part files are named by their fingerprint, a recompute with another config or changed
inputs writes new files and never overwrites the arks an older feats.scp reads (the backup's, or
that of a dir made by copy-/subset-/split-data-dir), and a failed run leaves the previous parts
whole; --force rewrites the same names with the same content. Superseded parts are kept in
FEAT_DIR until you delete them (the merge logs which older part files of DATA_DIR remain).

Audio with another sample rate than the config's, unreadable audio, or an utterance shorter than
one analysis frame (any frontend) fails the job with an error naming the utterance; with
--skip-bad these utterances are skipped instead: each is logged, the merge lists them all in
LOG_DIR/bad_utts (with the reason) and removes them from DATA_DIR (files backed up first). Ids of
wav.scp/text that are not in utt2spk get no features and are named in a warning. N is capped at
the number of utterances (a note says so); --job J beyond it has nothing to do and exits 0.
Defaults: LOG_DIR = DATA_DIR/log, FEAT_DIR = DATA_DIR/data. FEAT_DIR and LOG_DIR may lie inside
DATA_DIR but may not be or contain it (checked before any work).

Example:
  speechkit-compute-feats --config conf/mfcc.yaml --nj 4 data/train exp/make_mfcc/train mfcc
  speechkit-compute-feats --config conf/logmel.yaml --set n_mels=40 data/dev
  speechkit-compute-feats --config conf/mfcc.yaml --nj 8 --skip-bad data/crawled   # drop broken files
"""
from __future__ import annotations

import logging
import os
import sys

from speechkit.features.extract import make_feats
from speechkit.utils.cli import make_parser, positive_float, positive_int, run_main, setup_logging
from speechkit.utils.config import str2bool
from speechkit.utils.jobs import run_local_jobs

PROG = "speechkit-compute-feats"
logger = logging.getLogger(PROG)


def build_parser():
    p = make_parser(__doc__, prog=PROG)
    p.add_argument("data_dir", metavar="DATA_DIR", help="Kaldi data dir (wav.scp, utt2spk, optional segments)")
    p.add_argument("log_dir", metavar="LOG_DIR", nargs="?", help="per-job logs (default: DATA_DIR/log)")
    p.add_argument("feat_dir", metavar="FEAT_DIR", nargs="?", help="where the arks go (default: DATA_DIR/data)")
    p.add_argument("--config", required=True, metavar="YAML", help="frontend config (conf/mfcc.yaml, ...)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (value parsed as YAML); repeatable")
    p.add_argument("--nj", type=positive_int, default=1, help="number of parts (default: 1)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--job", type=positive_int, metavar="J", help="compute part J (1..N) only")
    g.add_argument("--merge-only", action="store_true", help="only merge the N finished parts into DATA_DIR")
    p.add_argument("--compress", type=str2bool, default=False, metavar="BOOL",
                   help="write Kaldi-compressed matrices (lossy, about half the size): true|false (also yes/no, "
                        "on/off, 1/0) (default: false)")
    p.add_argument("--max-jobs", type=positive_int, default=None, metavar="M",
                   help="without --job: run at most M parts at once (default: min(N, CPU count))")
    p.add_argument("--batch-seconds", type=positive_float, default=60.0, metavar="S",
                   help="seconds of audio per batched frontend call (default: 60)")
    p.add_argument("--num-threads", type=positive_int, default=1, metavar="T",
                   help="torch threads per job (default: 1)")
    p.add_argument("--force", action="store_true", help="recompute parts even if they are current")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip utterances whose audio fails (counted, logged, listed in LOG_DIR/bad_utts and "
                        "removed from DATA_DIR) instead of stopping at the first (default: stop)")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def _child_argv(args, job: int, nj: int | None = None) -> list[str]:
    argv = [sys.executable, "-m", "speechkit.bin.compute_feats", "--config", args.config, "--nj", str(nj or args.nj),
            "--job", str(job), "--compress", str(args.compress).lower(), "--batch-seconds", str(args.batch_seconds),
            "--num-threads", str(args.num_threads)]
    argv += [w for o in args.overrides for w in ("--set", o)]
    argv += [flag for flag, on in (("--force", args.force), ("--skip-bad", args.skip_bad), ("--verbose", args.verbose))
             if on]
    return argv + [args.data_dir, args.log_dir, args.feat_dir]


def _body(args) -> int:
    if args.job is not None and not 1 <= args.job <= args.nj:
        raise ValueError(f"--job must be in 1..{args.nj}, got {args.job}")
    args.log_dir = args.log_dir or os.path.join(args.data_dir, "log")
    args.feat_dir = args.feat_dir or os.path.join(args.data_dir, "data")
    done = make_feats(args.data_dir, args.config, args.log_dir, args.feat_dir, overrides=args.overrides, nj=args.nj,
                      job=args.job, merge_only=args.merge_only, compress=args.compress,
                      batch_seconds=args.batch_seconds, num_threads=args.num_threads, force=args.force,
                      skip_bad=args.skip_bad, max_jobs=args.max_jobs, job_argv=lambda j, nj: _child_argv(args, j, nj),
                      run_jobs=run_local_jobs, log=logger)
    if done is not None:
        n, frontend = done
        print(f"{PROG}: {n} utterances, {frontend.name} features of dim {frontend.dim} -> {args.data_dir}/feats.scp")
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.job is not None:  # a job's log is its stdout (run.pl/slurm.pl capture it)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout, force=True,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        setup_logging(verbose=args.verbose)
    return run_main(PROG, lambda: _body(args), parser=parser)


if __name__ == "__main__":
    sys.exit(main())
