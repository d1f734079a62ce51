"""Frame-level linguistic label vectors (SALAD section 3.2) from phones, phone_info and alignments.

DATA_DIR holds `text` (phone tokens from speechkit-g2p), `phone_info`, `utt2num_frames` and
`frame_shift` of its WORLD features (5 ms); ALIGNMENTS is a phone_alignments file
('<utt> <start-s> <end-s> <phone>', `sil` segments inserted by the aligner). With --fit the label
front end (phone inventory, z-norm statistics, longest phone) is fitted on DATA_DIR and saved to
--frontend-dir (phones.txt, frontend.yaml); without it, it is loaded from there. Writes

  OUT_DIR/labels.scp, OUT_DIR/labels.ark   float32 (T, D) per utterance, T = utt2num_frames
  OUT_DIR/label_dim                        D

Models trained on the labels depend on the front end, so --fit never silently replaces one:
frontend.yaml records a content fingerprint of what it was fitted on (DATA_DIR's utt2spk, text,
phone_info and utt2num_frames, the ALIGNMENTS file, the frame shift). --fit into a --frontend-dir
fitted on the same content reuses it ("up to date", nothing rewritten: a recipe stage can be
re-run); one fitted on other data (or written by an older version, without a fingerprint) is an
error saying what changed, unless --overwrite: then it is re-fitted and the previous front end is
kept as DIR/.backup/N.

OUT_DIR is written as a whole (a temporary directory swapped in when every utterance is done; a
failed run leaves the previous OUT_DIR as it was; the previous labels are not kept, they are
re-derivable). OUT_DIR may not be, contain or lie inside DATA_DIR, ALIGNMENTS or --frontend-dir,
nor --frontend-dir (with --fit) overlap DATA_DIR or ALIGNMENTS; both are checked before any work.

The alignment may cover up to --tolerance frames more or fewer than utt2num_frames (the last
segment is stretched or cut); a larger difference, a phone outside the inventory, or aligned
phones that differ from `text` are errors. An utterance without alignment or frame count is left
out, counted and reported. See speechkit/text/labels.py for the features.

Example:
  speechkit-make-labels --fit --frontend-dir exp/frontend data/sp01/train exp/align/phone_alignments exp/labels/train
  speechkit-make-labels --frontend-dir exp/frontend data/sp01/test exp/align_test/phone_alignments exp/labels/test
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path

from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError, atomic_write
from speechkit.utils.outputs import check_output_dir, replace_dir

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


#: The files of DATA_DIR whose content the fitted front end depends on (utt2spk: which utterances).
FIT_FILES = ("utt2spk", "text", "phone_info", "utt2num_frames")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fit_record(data_dir: Path, alignments: Path, frame_shift: float, num_utts: int, phones: set[str]) -> dict:
    """What a front end is fitted on, for ``frontend.yaml``'s ``fitted_on``: the ``fingerprint``
    (sha256 over the content of :data:`FIT_FILES` of ``data_dir``, of ``alignments`` and over the
    fitting options; paths do not count), the per-file hashes (to say which one changed), and, for
    messages only, the paths, the number of utterances fitted on and of phones (``sil`` included).
    """
    from speechkit.text.labels import FORMAT_VERSION, SIL

    files = {name: _sha256(data_dir / name) for name in FIT_FILES if (data_dir / name).is_file()}
    files["ALIGNMENTS"] = _sha256(Path(alignments))
    options = {"frame_shift": float(frame_shift), "format_version": FORMAT_VERSION}
    fingerprint = hashlib.sha256(json.dumps({"files": files, "options": options}, sort_keys=True).encode()).hexdigest()
    return {"fingerprint": fingerprint, "data_dir": str(data_dir), "alignments": str(alignments),
            "utterances": int(num_utts), "phones": len(set(phones) | {SIL}), "files": files, "options": options}


def describe_change(frontend_dir: Path, old: dict | None, new: dict) -> str:
    """The error for ``--fit`` into a front end fitted on other content (``old`` is its
    ``fitted_on``, ``None`` if it has none): what it was fitted on, what changed, what to do."""
    advice = (f"re-fitting would invalidate models trained with it; use --overwrite to refit (the old one is "
              f"kept in {frontend_dir}/.backup/N) or another --frontend-dir")
    now = f"{new['utterances']} utterances of {new['data_dir']} with {new['phones']} phones"
    if not old:
        return (f"--frontend-dir {frontend_dir}: holds a label front end that does not record what it was fitted on "
                f"(written by an older speechkit-make-labels), so it cannot be told apart from one fitted on other "
                f"data than {now}: {advice}")
    old_files, new_files = old.get("files") or {}, new["files"]
    changed = [n for n in dict.fromkeys([*old_files, *new_files]) if old_files.get(n) != new_files.get(n)]
    what = [f"{n if n == 'ALIGNMENTS' else 'DATA_DIR/' + n} differs" for n in changed]
    old_opts = old.get("options") or {}
    what += [f"{k} {old_opts.get(k)} -> {v}" for k, v in new["options"].items() if old_opts.get(k) != v]
    return (f"--frontend-dir {frontend_dir}: fitted on {old.get('utterances')} utterances of {old.get('data_dir')} "
            f"with {old.get('phones')} phones; now {now} ({', '.join(what) or 'content differs'}): {advice}")


def make_labels(data_dir, alignments, out_dir, frontend_dir, *, fit: bool = False, frame_shift: float | None = None,
                tolerance: int = 2, overwrite: bool = False) -> dict:
    """Library form of the command (see the module docstring); returns counts (utterances, frames,
    dim, skipped) and ``frontend``: ``fitted``, ``refitted``, ``up to date`` or ``loaded``.

    Raises:
        OutputOverlapError: OUT_DIR or (with ``fit``) the front-end dir overlaps an input.
        ValueError: ``fit`` into a front end fitted on other content, without ``overwrite``
            (names the dir and what changed); ``overwrite`` without ``fit``.
        DataError, FileNotFoundError: bad or missing inputs (file and line named).
    """
    from speechkit.data.datadir import DataDir
    from speechkit.features.io import ark_scp_writer
    from speechkit.text.g2p import read_phone_info
    from speechkit.text.labels import LabelFrontend, make_label_input, read_alignments

    data_dir, out_dir, frontend_dir = Path(data_dir), Path(out_dir), Path(frontend_dir)
    if overwrite and not fit:
        raise ValueError("--overwrite applies to --fit only (it re-fits an existing front end)")
    read = {"DATA_DIR": data_dir, "ALIGNMENTS": Path(alignments)}
    check_output_dir(out_dir, inputs={**read, "--frontend-dir": frontend_dir}, option="OUT_DIR")
    if fit:
        check_output_dir(frontend_dir, inputs=read, option="--frontend-dir")
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
    refit = False
    if fit:
        record = fit_record(data_dir, Path(alignments), shift, len(inputs), {p for x in inputs for p in x.phones})
        fe, status = None, "fitted"
        if (frontend_dir / "frontend.yaml").exists():
            try:
                old = LabelFrontend.load(frontend_dir)
            except DataError:
                if not overwrite:
                    raise
                old = None
            old_record = old.fitted_on if old is not None else None
            if old_record is not None and old_record.get("fingerprint") == record["fingerprint"]:
                fe, status = old, "up to date"
                logger.info("%s: up to date (fitted on the same content of %s and %s); not re-fitted", frontend_dir,
                            data_dir, alignments)
            elif not overwrite:
                raise ValueError(describe_change(frontend_dir, old_record, record))
            else:
                status = "refitted"
        if fe is None:
            fe = LabelFrontend.fit(inputs, frame_shift=shift)
            fe.fitted_on = record
            refit = True
    else:
        fe, status = LabelFrontend.load(frontend_dir), "loaded"
        if fe.frame_shift is not None and abs(fe.frame_shift - shift) > 1e-9:
            logger.warning("frame shift %g s differs from the %g s the front end was fitted with", shift,
                           fe.frame_shift)
    frames = 0
    ark = Path(os.path.abspath(out_dir)) / "labels.ark"
    with replace_dir(out_dir, backup=False) as tmp:
        with ark_scp_writer(tmp / "labels.ark", tmp / "labels.scp", scp_ark=ark) as w:
            for x in inputs:
                m = fe.frame_labels(x, d.utt2num_frames[x.utt], shift, tolerance=tolerance)
                w(x.utt, m)
                frames += len(m)
        with atomic_write(tmp / "label_dim") as f:
            f.write(f"{fe.dim}\n")
        if refit:  # only once every label is computed: a bad utterance leaves the previous front end
            with replace_dir(frontend_dir) as fe_tmp:
                fe.save(fe_tmp)
            logger.info("%s the label front end on %d utterances: %d phones, dim %d -> %s", status, len(inputs),
                        len(fe.phones), fe.dim, frontend_dir)
    return {"utterances": len(inputs), "frames": frames, "dim": fe.dim,
            "skipped": sum(len(v) for v in skipped.values()), "frontend": status}


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA_DIR", help="phone data dir (text, phone_info, utt2num_frames)")
    parser.add_argument("alignments", metavar="ALIGNMENTS", help="phone_alignments file")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="where labels.scp/ark and label_dim go (replaced as a whole; not DATA_DIR)")
    parser.add_argument("--frontend-dir", required=True, metavar="DIR", help="label front end (written with --fit)")
    parser.add_argument("--fit", action="store_true",
                        help="fit the front end on DATA_DIR and save it to DIR; reuses DIR when it was fitted on "
                             "the same content, refuses one fitted on other data (see --overwrite)")
    parser.add_argument("--overwrite", action="store_true",
                        help="with --fit: re-fit a front end fitted on other data (the old one is kept in "
                             "DIR/.backup/N); models trained with the old one no longer match it")
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
                          frame_shift=args.frame_shift, tolerance=args.tolerance, overwrite=args.overwrite)
        print(f"{PROG}: {res['utterances']} utterances, {res['frames']} frames, label dim {res['dim']} -> "
              f"{Path(args.out_dir) / 'labels.scp'}" + (f"; {res['skipped']} left out" if res["skipped"] else ""))
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
