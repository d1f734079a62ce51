"""Frame-level label vectors of a data dir with a fitted label front end (``speechkit-make-labels``).

The label front end (:class:`~speechkit.text.labels.LabelFrontend`, the features of each label
frame) is fitted on a training set like a model, then applied to the utterances of any data dir:
the job here, one level above the scorers whose frame-shift rule it shares
(:func:`speechkit.scoring.feature_dir.resolve_frame_shift`).

:func:`make_labels` reads DATA_DIR's ``text`` (phones), ``phone_info``, ``utt2num_frames`` and
``frame_shift`` and a ``phone_alignments`` file, fits (``fit=True``) or loads the
:class:`~speechkit.text.labels.LabelFrontend` in the front-end dir and writes
``OUT_DIR/labels.{scp,ark}`` (float32 ``(T, D)`` per utterance) and ``OUT_DIR/label_dim``, OUT_DIR
as a whole. A front end records what it was fitted on (:func:`fit_record`: a content fingerprint
of :data:`FIT_FILES`, the alignments and the options); ``fit`` into one fitted on other content is
an error saying what changed (:func:`describe_change`) unless ``overwrite``. The command's
docstring (``speechkit-make-labels --help``) gives the whole contract; the features are those of
:mod:`speechkit.text.labels`.

Example::

    from speechkit.inference.frame_labels import make_labels
    make_labels("data/sp01/train", "exp/align/phone_alignments", "exp/labels/train", "exp/frontend", fit=True)
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from speechkit.data.datadir import DataDir
from speechkit.features.io import ark_scp_writer
from speechkit.scoring.feature_dir import resolve_frame_shift
from speechkit.text.g2p import read_phone_info
from speechkit.text.labels import FORMAT_VERSION, SIL, LabelFrontend, make_label_input, read_alignments
from speechkit.utils.errors import ParameterError, naming_parameters
from speechkit.utils.fileio import DataError, atomic_write
from speechkit.utils.outputs import check_output_dir, replace_dir

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_FRAME_SHIFT", "FIT_FILES", "fit_record", "describe_change", "make_labels"]

#: WORLD's frame shift, used when DATA_DIR has no frame_shift file and none is given.
DEFAULT_FRAME_SHIFT = 0.005


def _frame_shift(data_dir: Path, given: float | None, log: logging.Logger = logger) -> float:
    if given is None and not (data_dir / "frame_shift").is_file():
        log.warning("%s/frame_shift missing; assuming %g s (WORLD)", data_dir, DEFAULT_FRAME_SHIFT)
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
    files = {name: _sha256(data_dir / name) for name in FIT_FILES if (data_dir / name).is_file()}
    files["ALIGNMENTS"] = _sha256(Path(alignments))
    options = {"frame_shift": float(frame_shift), "format_version": FORMAT_VERSION}
    fingerprint = hashlib.sha256(json.dumps({"files": files, "options": options}, sort_keys=True).encode()).hexdigest()
    return {"fingerprint": fingerprint, "data_dir": str(data_dir), "alignments": str(alignments),
            "utterances": int(num_utts), "phones": len(set(phones) | {SIL}), "files": files, "options": options}


def describe_change(frontend_dir: Path, old: dict | None, new: dict) -> str:
    """The error for ``fit`` into a front end fitted on other content (``old`` is its
    ``fitted_on``, ``None`` if it has none): what it was fitted on, what changed, what to do; the
    parameters as references (:mod:`speechkit.utils.errors`)."""
    advice = (f"re-fitting would invalidate models trained with it; use `overwrite` to refit (the old one is "
              f"kept in {frontend_dir}/.backup/N) or another `frontend_dir`")
    now = f"{new['utterances']} utterances of {new['data_dir']} with {new['phones']} phones"
    if not old:
        return (f"`frontend_dir` {frontend_dir}: holds a label front end that does not record what it was fitted on "
                f"(written by an older speechkit-make-labels), so it cannot be told apart from one fitted on other "
                f"data than {now}: {advice}")
    old_files, new_files = old.get("files") or {}, new["files"]
    changed = [n for n in dict.fromkeys([*old_files, *new_files]) if old_files.get(n) != new_files.get(n)]
    what = [f"{'`alignments`' if n == 'ALIGNMENTS' else '`data_dir`/' + n} differs" for n in changed]
    old_opts = old.get("options") or {}
    what += [f"{k} {old_opts.get(k)} -> {v}" for k, v in new["options"].items() if old_opts.get(k) != v]
    return (f"`frontend_dir` {frontend_dir}: fitted on {old.get('utterances')} utterances of {old.get('data_dir')} "
            f"with {old.get('phones')} phones; now {now} ({', '.join(what) or 'content differs'}): {advice}")


def make_labels(data_dir, alignments, out_dir, frontend_dir, *, fit: bool = False, frame_shift: float | None = None,
                tolerance: int = 2, overwrite: bool = False, log: logging.Logger = logger) -> dict:
    """Label vectors of ``data_dir`` into ``out_dir`` (see the module doc); returns counts (utterances,
    frames, dim, skipped) and ``frontend``: ``fitted``, ``refitted``, ``up to date`` or ``loaded``.
    ``log``: where the warnings and the fitting summary go (the CLI passes its own logger).

    Raises:
        OutputOverlapError: ``out_dir`` or (with ``fit``) the front-end dir overlaps an input.
        ValueError: ``fit`` into a front end fitted on other content, without ``overwrite``
            (names the dir and what changed); ParameterError: ``overwrite`` without ``fit``.
        DataError, FileNotFoundError: bad or missing inputs (file and line named).
    """
    data_dir, out_dir, frontend_dir = Path(data_dir), Path(out_dir), Path(frontend_dir)
    if overwrite and not fit:
        raise ParameterError("overwrite", "`overwrite` applies to `fit` only (it re-fits an existing front end)")
    read = {"`data_dir`": data_dir, "`alignments`": Path(alignments)}
    check_output_dir(out_dir, inputs={**read, "`frontend_dir`": frontend_dir}, option="`out_dir`")
    if fit:
        check_output_dir(frontend_dir, inputs=read, option="`frontend_dir`")
    d = DataDir.load(data_dir)
    for name, table in (("text", d.text), ("utt2num_frames", d.utt2num_frames)):
        if table is None:
            raise FileNotFoundError(f"{data_dir}/{name}: missing")
    info_path = data_dir / "phone_info"
    if not info_path.is_file():
        raise FileNotFoundError(f"{info_path}: missing (run speechkit-g2p)")
    info = read_phone_info(info_path)
    shift = _frame_shift(data_dir, frame_shift, log)
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
            log.warning("%d utterances left out (%s; first: %s)", len(utts), reason, ", ".join(utts[:5]))
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
                log.info("%s: up to date (fitted on the same content of %s and %s); not re-fitted", frontend_dir,
                            data_dir, alignments)
            elif not overwrite:
                raise naming_parameters(ValueError(describe_change(frontend_dir, old_record, record)))
            else:
                status = "refitted"
        if fe is None:
            fe = LabelFrontend.fit(inputs, frame_shift=shift)
            fe.fitted_on = record
            refit = True
    else:
        fe, status = LabelFrontend.load(frontend_dir), "loaded"
        if fe.frame_shift is not None and abs(fe.frame_shift - shift) > 1e-9:
            log.warning("frame shift %g s differs from the %g s the front end was fitted with", shift,
                           fe.frame_shift)
    frames = 0
    ark = Path(os.path.abspath(out_dir)) / "labels.ark"
    with replace_dir(out_dir, backup=False, owner="speechkit-make-labels") as tmp:
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
            log.info("%s the label front end on %d utterances: %d phones, dim %d -> %s", status, len(inputs),
                        len(fe.phones), fe.dim, frontend_dir)
    return {"utterances": len(inputs), "frames": frames, "dim": fe.dim,
            "skipped": sum(len(v) for v in skipped.values()), "frontend": status}
