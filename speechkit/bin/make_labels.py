"""Frame-level linguistic label vectors (SALAD section 3.2) from phones, phone_info and alignments.

DATA_DIR holds `text` (phone tokens from speechkit-g2p), `phone_info`, `utt2num_frames` and
`frame_shift` of its WORLD features (5 ms); ALIGNMENTS is a phone_alignments file
('<utt> <start-s> <end-s> <phone>', `sil` segments inserted by the aligner). With --fit the label
front end (phone inventory, z-norm statistics, longest phone) is fitted on DATA_DIR and saved to
--frontend-dir (phones.txt, frontend.yaml); without it, it is loaded from there. Writes

  OUT_DIR/labels.scp, OUT_DIR/labels.ark   float32 (T, D) per utterance, T = utt2num_frames
  OUT_DIR/label_dim                        D

The alignment may cover up to --tolerance frames more or fewer than utt2num_frames (the last
segment is stretched or cut); a larger difference, a phone outside the inventory, or aligned
phones that differ from `text` are errors. An utterance without alignment or frame count is left
out, counted and reported. See speechkit/text/labels.py for the features.

Example:
  speechkit-make-labels --fit --frontend-dir exp/frontend data/sp01/train exp/align/phone_alignments data/sp01/train
  speechkit-make-labels --frontend-dir exp/frontend data/sp01/test exp/align_test/phone_alignments data/sp01/test
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write

PROG = "speechkit-make-labels"
logger = logging.getLogger(PROG)
#: WORLD's frame shift, used when DATA_DIR has no frame_shift file and none is given.
DEFAULT_FRAME_SHIFT = 0.005


def _frame_shift(data_dir: Path, given: float | None) -> float:
    from speechkit.scoring.feature_dir import resolve_frame_shift

    if given is None and not (data_dir / "frame_shift").is_file():
        logger.warning("%s/frame_shift missing; assuming %g s (WORLD)", data_dir, DEFAULT_FRAME_SHIFT)
        return DEFAULT_FRAME_SHIFT
    return resolve_frame_shift(data_dir, given)


def make_labels(data_dir, alignments, out_dir, frontend_dir, *, fit: bool = False, frame_shift: float | None = None,
                tolerance: int = 2) -> dict:
    """Library form of the command; returns counts (utterances, frames, dim, skipped)."""
    from speechkit.data.datadir import DataDir
    from speechkit.features.io import ark_scp_writer
    from speechkit.text.g2p import read_phone_info
    from speechkit.text.labels import LabelFrontend, make_label_input, read_alignments

    data_dir, out_dir = Path(data_dir), Path(out_dir)
    d = DataDir.load(data_dir)
    for name, table in (("text", d.text), ("utt2num_frames", d.utt2num_frames)):
        if table is None:
            raise FileNotFoundError(f"{data_dir}/{name}: missing")
    info_path = data_dir / "phone_info"
    if not info_path.is_file():
        raise FileNotFoundError(f"{info_path}: missing (run speechkit-g2p)")
    info = read_phone_info(info_path)
    shift = _frame_shift(data_dir, frame_shift)
    ali = read_alignments(alignments)
    inputs, skipped = [], {"no alignment": [], "no utt2num_frames": []}
    for utt in d.utts:
        if utt not in d.text:
            continue
        if utt not in ali:
            skipped["no alignment"].append(utt)
            continue
        if utt not in d.utt2num_frames:
            skipped["no utt2num_frames"].append(utt)
            continue
        if utt not in info:
            raise DataError(f"{info_path}: no line for utterance '{utt}' (of {data_dir}/text)")
        lineno, rows = info[utt]
        tokens = d.text[utt].split()
        if len(rows) != len(tokens):
            raise DataError(f"{info_path}:{lineno}: utterance '{utt}' has {len(rows)} items but {data_dir}/text has "
                            f"{len(tokens)} phones")
        inputs.append(make_label_input(utt, tokens, rows, ali[utt], source=str(alignments),
                                       text_source=f"{data_dir}/text"))
    for reason, utts in skipped.items():
        if utts:
            logger.warning("%d utterances left out (%s; first: %s)", len(utts), reason, ", ".join(utts[:5]))
    if not inputs:
        raise DataError(f"{data_dir}: no utterance has both an alignment in {alignments} and a frame count; "
                        "nothing written")
    if fit:
        fe = LabelFrontend.fit(inputs, frame_shift=shift)
        fe.save(frontend_dir)
        logger.info("fitted the label front end on %d utterances: %d phones, dim %d -> %s", len(inputs),
                    len(fe.phones), fe.dim, frontend_dir)
    else:
        fe = LabelFrontend.load(frontend_dir)
        if fe.frame_shift is not None and abs(fe.frame_shift - shift) > 1e-9:
            logger.warning("frame shift %g s differs from the %g s the front end was fitted with", shift,
                           fe.frame_shift)
    frames = 0
    ark = Path(os.path.abspath(out_dir)) / "labels.ark"
    with ark_scp_writer(ark, out_dir / "labels.scp") as w:
        for x in inputs:
            m = fe.frame_labels(x, d.utt2num_frames[x.utt], shift, tolerance=tolerance)
            w(x.utt, m)
            frames += len(m)
    with atomic_write(out_dir / "label_dim") as f:
        f.write(f"{fe.dim}\n")
    return {"utterances": len(inputs), "frames": frames, "dim": fe.dim,
            "skipped": sum(len(v) for v in skipped.values())}


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="phone data dir (text, phone_info, utt2num_frames)")
    parser.add_argument("alignments", metavar="ALIGNMENTS", help="phone_alignments file")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="where labels.scp/ark and label_dim go (may be DATA_DIR)")
    parser.add_argument("--frontend-dir", required=True, metavar="DIR", help="label front end (written with --fit)")
    parser.add_argument("--fit", action="store_true", help="fit the front end on DATA_DIR and save it to DIR")
    parser.add_argument("--frame-shift", type=float, default=None, metavar="S",
                        help=f"seconds per frame (default: DATA_DIR/frame_shift, else {DEFAULT_FRAME_SHIFT})")
    parser.add_argument("--tolerance", type=int, default=2, metavar="N",
                        help="most frames by which the alignment may differ from utt2num_frames (default: 2)")
    parser.add_argument("--log-file", default=None, help="append the log here too")
    args = parser.parse_args(argv)

    def body() -> int:
        setup_logging(args.log_file)
        if args.tolerance < 0:
            raise ValueError(f"--tolerance must be >= 0, got {args.tolerance}")
        res = make_labels(args.data_dir, args.alignments, args.out_dir, args.frontend_dir, fit=args.fit,
                          frame_shift=args.frame_shift, tolerance=args.tolerance)
        print(f"{PROG}: {res['utterances']} utterances, {res['frames']} frames, label dim {res['dim']} -> "
              f"{Path(args.out_dir) / 'labels.scp'}" + (f"; {res['skipped']} left out" if res["skipped"] else ""))
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
