"""A data dir decoded with a :class:`~speechkit.inference.speech2text.Recognizer` in parts (``speechkit-asr-decode``).

The utterances of ``DATA_DIR/feats.scp`` (C-sorted) are split round-robin into ``nj`` parts
(:mod:`speechkit.inference.parts`); :func:`decode_part` decodes one part into ``OUT_DIR/parts``
(skipped while its fingerprint -- options, checkpoint, utterances, their feats.scp entries and
languages, the size and time of the arks they read; :func:`part_fingerprint` -- and the content of the
CMVN stats and units it read are unchanged); :func:`decode_data_dir` runs the parts that are not
current in worker processes and :func:`merge_parts` checks every part is current and writes ``text``,
``utt2lang``, ``lid_posteriors``, ``results.jsonl`` and ``decode_stats.json``. Errors are named as
the command line spells its options.

::

    stats, summary = decode_data_dir("exp/rnnt", None, "data/test", "exp/rnnt/decode_test", DecodeOptions(), nj=4)
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from speechkit.features.io import FeatureReader, scp_entry_file, scp_files
from speechkit.inference.parts import (
    PartsFailed, PartStore, content_digests, dumps, file_states, run_parts, split_parts,
)
from speechkit.inference.speech2text import DecodeOptions, Recognizer
from speechkit.train.checkpoint import resolve_checkpoint
from speechkit.utils.errors import naming_parameters, parameter_template
from speechkit.utils.fileio import DataError, atomic_write, read_table
from speechkit.utils.outputs import OutputOverlapError, check_output_dir

# torch, train.runtime and decode.rnnt_search (torch) are imported where used: merging the parts needs none of them.

__all__ = ["read_utterances", "part_fingerprint", "input_hashes", "check_decode_paths", "decode_part",
           "merge_parts", "decode_data_dir"]

log = logging.getLogger(__name__)


def read_utterances(data_dir: str | os.PathLike) -> tuple[list[str], dict[str, str]]:
    """The C-sorted utterance ids of ``data_dir/feats.scp`` and its table.

    Raises:
        FileNotFoundError: no feats.scp; DataError: an empty one.
    """
    scp = Path(data_dir) / "feats.scp"
    if not scp.is_file():
        raise FileNotFoundError(f"{scp}: no features (run utils/make_feats.sh / speechkit-compute-feats)")
    table = read_table(scp)
    if not table:
        raise DataError(f"{scp}: no utterances")
    return sorted(table, key=lambda u: u.encode("utf-8")), table


def part_fingerprint(options: DecodeOptions, ckpt: Path, data_dir: str | os.PathLike, utts: list[str],
                     feats: dict[str, str]) -> str:
    """sha256 of what a part's result depends on: the options, the checkpoint (path, size, mtime),
    each utterance's feats.scp entry and language (``data_dir/utt2lang``), and the size and
    modification time of every feature file those entries read (an ark rewritten in place).

    The CMVN stats and the units dir the decode read (options or the model's config) are checked
    by content separately (:func:`input_hashes`, recorded in the part's ``done.J.json``).
    """
    st = ckpt.resolve().stat()
    h = hashlib.sha256()
    h.update(json.dumps({"options": options.fingerprint_dict(), "checkpoint": str(ckpt.resolve()),
                         "size": st.st_size, "mtime_ns": st.st_mtime_ns}, sort_keys=True).encode())
    lang_file = Path(data_dir) / "utt2lang"
    langs = read_table(lang_file) if lang_file.is_file() else {}
    arks: dict[str, None] = {}
    for u in utts:
        h.update(f"{u} {feats[u]} {langs.get(u, '')}\n".encode())
        arks[scp_entry_file(feats[u])] = None
    h.update(file_states(arks).encode())
    return h.hexdigest()


def input_hashes(cmvn_source: str | os.PathLike, units_dir: str | os.PathLike | None) -> dict[str, str]:
    """SHA-256 of the content of the CMVN stats a decode read (a stats file; or a data dir's
    ``cmvn_global.ark`` and ``cmvn.scp``; a ``.scp`` with the arks it reads) and of every file of its
    units dir, keyed by path: a part is current only while these are unchanged
    (:meth:`~speechkit.inference.parts.PartStore.current`)."""
    src = Path(cmvn_source)
    files = [src] if src.is_file() else [p for p in (src / "cmvn_global.ark", src / "cmvn.scp") if p.is_file()]
    files += [a for p in files if p.suffix == ".scp" for a in scp_files(p)]  # the arks a cmvn.scp reads
    if units_dir is not None and Path(units_dir).is_dir():
        files += sorted(p for p in Path(units_dir).rglob("*") if p.is_file())
    return content_digests(files)


def _check_finite(m, utt: str, data_dir: Path, entry: str) -> None:
    """Raise DataError naming the utterance and its feats.scp entry if ``m`` holds a NaN or infinity
    (decoded, it would give an empty hypothesis counted as decoded)."""
    finite = np.isfinite(m)
    if not finite.all():
        t, k = np.argwhere(~finite)[0]
        raise DataError(f"{data_dir}/feats.scp: '{utt}' ({entry}): frame {t} (of {m.shape[0]}) has a non-finite "
                        f"value ({m[t, k]} in dimension {k}); fix or remove the utterance (nothing merged)")


def _finite_record(rec: dict, ckpt: Path) -> dict:
    """``rec`` if its scores and LID posteriors are finite; else DataError naming the utterance."""
    values = {f"score of {k}": v for k, v in rec["scores"].items()}
    values.update({f"LID posterior of {k}": v for k, v in (rec["lid_posteriors"] or {}).items()})
    for what, v in values.items():
        if not math.isfinite(v):
            raise DataError(f"{ckpt}: utterance '{rec['utt']}': {what} is {v} from finite features (are the "
                            "model's weights finite?); nothing merged")
    return rec



#: files of a data dir or a units dir: an OUT_DIR holding one is refused (a decode writes text and utt2lang there)
_NOT_A_DECODE_DIR = ("utt2spk", "wav.scp", "feats.scp", "segments", "languages.txt")
#: what a merge writes into OUT_DIR besides decode_stats.json: found without a decode's own files, refused
_DECODE_TABLES = ("text", "utt2lang", "lid_posteriors", "results.jsonl")


def _decode_output(out_dir: Path) -> bool:
    """``out_dir`` holds a decode's own files: a merge's ``decode_stats.json`` or a part's ``parts/done.J.json``."""
    return (out_dir / "decode_stats.json").is_file() or PartStore(out_dir).has_parts()


def check_decode_paths(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                       out_dir: str | os.PathLike, options: DecodeOptions) -> None:
    """``out_dir`` must not be, contain or lie inside ``data_dir``, the checkpoint (or EXP/checkpoints),
    ``units_dir`` or ``cmvn_stats``, nor be or contain the experiment dir EXP (EXP/decode_test is
    ESPnet's layout, and fine), nor hold a data dir's or units dir's files (``utt2spk``, ``wav.scp``,
    ``feats.scp``, ``segments``, ``languages.txt``: a decode would replace its ``text`` -- e.g. the
    model's own training dir), nor hold ``text``, ``utt2lang``, ``lid_posteriors`` or ``results.jsonl``
    without a decode's own ``decode_stats.json`` or ``parts/done.J.json`` (a reference kept on its own:
    refused, not backed up, as a data dir is); a ``device`` that cannot run is refused before any work.

    Raises:
        FileNotFoundError: no such experiment or checkpoint. OutputOverlapError (a ValueError):
        names ``out_dir`` and the input; ConfigError: ``device``.
    """
    md = Path(model_dir)
    exp = md if md.is_dir() else None
    check_output_dir(out_dir, option="`out_dir`",
                     inputs={"`data_dir`": data_dir,
                             "the checkpoint dir": exp / "checkpoints" if exp is not None else None,
                             "the checkpoint": resolve_checkpoint(model_dir, checkpoint, param="model_dir"),
                             "`units_dir`": options.units_dir, "`cmvn_stats`": options.cmvn_stats},
                     experiment_dirs={"`model_dir`": exp})
    held = [n for n in _NOT_A_DECODE_DIR if (Path(out_dir) / n).exists()]
    if held:
        raise naming_parameters(OutputOverlapError(
            f"`out_dir` {out_dir} holds {held[0]}: it is a data dir or a units dir, whose tables (text, utt2lang) "
            "a decode would replace; choose another output dir (ESPnet's layout: EXP/decode_<set>)"))
    tables = [n for n in _DECODE_TABLES if (Path(out_dir) / n).exists()]
    if tables and not _decode_output(Path(out_dir)):  # a reference text/utt2lang kept on their own (case 5)
        raise naming_parameters(OutputOverlapError(
            f"`out_dir` {out_dir} holds {', '.join(tables)} that no decode wrote (no decode_stats.json nor "
            "parts/done.J.json): a decode would replace them; choose another output dir (ESPnet's layout: "
            "EXP/decode_<set>)"))
    if options.device != "cpu":  # the CPU always runs (and needs no torch import: a merge step stays light)
        from speechkit.train.runtime import resolve_device

        resolve_device(options.device, "`device`")


def decode_part(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                out_dir: str | os.PathLike, options: DecodeOptions, job: int, nj: int, *,
                force: bool = False, logger: logging.Logger = log) -> None:
    """Decode part ``job`` of ``nj`` of ``data_dir`` into ``out_dir/parts`` (skipped when current,
    unless ``force``).

    Args:
        model_dir, checkpoint: as :class:`~speechkit.inference.speech2text.Recognizer`'s.
        logger: where the part's log lines go.

    Raises:
        DataError: a feature matrix with a NaN or infinite value (names the utterance, its
            feats.scp entry and the frame), a non-finite score (names the utterance), features of
            another dimension than the model's input; FileNotFoundError: no utt2lang where the
            mode needs it; :class:`~speechkit.inference.speech2text.Recognizer`'s errors.
    """
    import torch

    from speechkit.decode.rnnt_search import recognize

    torch.set_num_threads(options.num_threads)
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    ckpt = resolve_checkpoint(model_dir, checkpoint, param="model_dir")
    utts_all, feats_table = read_utterances(data_dir)
    utts = split_parts(utts_all, nj)[job - 1]
    fp = part_fingerprint(options, ckpt, data_dir, utts, feats_table)
    store = PartStore(out_dir)
    if not force and store.current(job, fp):
        logger.info("part %d of %d is complete and current; nothing to do", job, nj)
        return
    # the checkpoint fingerprinted (an absolute path is never read as 'best' / 'latest' / 'avgN')
    recognizer = Recognizer(model_dir, str(ckpt.resolve()), options=options)
    model, cfg = recognizer.model, recognizer.cfg
    need_lang = recognizer.needs_language
    utt2lang = {}
    lang_file = data_dir / "utt2lang"
    if lang_file.is_file():
        utt2lang = read_table(lang_file)
    elif need_lang:
        raise naming_parameters(FileNotFoundError(
            f"{lang_file}: missing; `mode=oracle` decoding of a {model.config.variant} model needs every "
            "utterance's language (or use `mode=lid_free` with a multisoftmax_lid model)"))
    reader = FeatureReader(data_dir, cmvn="none")
    if reader.dim * cfg.data.num_stack != model.config.input_dim:
        raise DataError(f"{data_dir}/feats.scp: {reader.dim}-dim features x num_stack {cfg.data.num_stack} != "
                        f"the model's input_dim {model.config.input_dim} (another frontend?)")
    frame_shift = reader.frame_shift or 0.01
    o = options
    logger.info("part %d/%d: %d utterances; model %s (%s, %s) from %s; mode %s, %s search%s%s, %d thread(s), "
                "%s, encoder batch %d",
                job, nj, len(utts), model_dir, model.config.variant, " ".join(model.languages), ckpt.name, o.mode,
                o.search, f" beam {o.beam}" if o.search == "beam" else "",
                f", switch-off tau={o.switch_off_tau} s_th={o.switch_off_threshold}"
                if o.switch_off_tau is not None else "", o.num_threads, recognizer.device, o.batch_size)
    records = []
    dec_s = audio_s = 0.0

    def too_short(rec: dict, x) -> dict:
        return {**rec, "skipped": f"too short: {x.size(0)} frames < num_stack {cfg.data.num_stack}"}

    def add(rec: dict, res: dict) -> None:
        nonlocal dec_s, audio_s
        records.append(_finite_record({**rec, **res}, ckpt))
        dec_s += res["decode_seconds"]
        audio_s += res["audio_seconds"]

    pending: list[tuple[dict, str | None, Any]] = []  # the batch being gathered

    def flush() -> None:
        if not pending:
            return
        results = recognizer.batch([x for _, _, x in pending], [lang for _, lang, _ in pending],
                                   frame_shift=frame_shift)
        for (rec, _, x), res in zip(pending, results):
            if res is None:
                records.append(too_short(rec, x))
            else:
                add(rec, res)
        pending.clear()

    dcfg = recognizer.decode_config(frame_shift)
    bar = tqdm(utts, desc=f"decode {job}/{nj}", unit="utt", file=sys.stderr, disable=None, leave=False)
    for utt in bar:
        rec = {"utt": utt, "ref_lang": utt2lang.get(utt)}
        lang = None
        if need_lang:
            lang = utt2lang.get(utt)
            if lang is None:
                records.append({**rec, "skipped": "no language in utt2lang"})
                continue
            if lang not in model.languages:
                records.append({**rec, "skipped": f"language '{lang}' not in the model"})
                continue
        m = reader.raw(utt)
        _check_finite(m, utt, data_dir, feats_table[utt])
        x = recognizer.prepare(m)
        if o.batch_size > 1:
            pending.append((rec, lang, x))
            if len(pending) == o.batch_size:
                flush()
            continue
        on_partial = None
        if o.show_partial:
            def on_partial(p, utt=utt):
                logger.info("%s partial: %s", utt, " | ".join(
                    f"{k}: {recognizer.decode_text(v, k if k != 'union' else None)}" for k, v in p.items()))
        try:
            r = recognize(model, x, dcfg, lang=lang, on_partial=on_partial)
        except ValueError as e:
            if "too short" not in str(e):
                raise
            records.append(too_short(rec, x))
            continue
        add(rec, recognizer.result(r))
    flush()
    records.sort(key=lambda r: r["utt"].encode("utf-8"))
    bar.close()
    n_ok = sum(1 for r in records if "skipped" not in r)
    logger.info("part %d/%d: decoded %d of %d utterances, %.1f s of audio in %.1f s: RTF %.4f on %d thread(s)",
                job, nj, n_ok, len(utts), audio_s, dec_s, dec_s / audio_s if audio_s else float("nan"),
                o.num_threads)
    store.write(job, records, {"fingerprint": fp, "job": job, "nj": nj, "checkpoint": str(ckpt),
                               "utterances": len(utts), "decoded": n_ok, "decode_seconds": dec_s,
                               "audio_seconds": audio_s, "inputs": input_hashes(recognizer.cmvn_source,
                                                                                cfg.data.units_dir)})


def merge_parts(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                out_dir: str | os.PathLike, options: DecodeOptions, nj: int, *,
                logger: logging.Logger = log) -> tuple[dict, str]:
    """Check every part is current, then write text, utt2lang, lid_posteriors, results.jsonl and
    decode_stats.json (warnings for skipped utterances and hypotheses without language go to ``logger``).

    Returns:
        The stats (``decode_stats.json``) and a one-line summary (``OUT_DIR: decoded N of M ...``).

    Raises:
        DataError: a part is missing or stale (names it); a part holding a non-finite score (names
            it and the utterance); no utterance decoded.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    ckpt = resolve_checkpoint(model_dir, checkpoint, param="model_dir")
    utts_all, feats_table = read_utterances(data_dir)
    parts = split_parts(utts_all, nj)
    store = PartStore(out_dir)
    records = []
    for job, utts in enumerate(parts, 1):
        fp = part_fingerprint(options, ckpt, data_dir, utts, feats_table)
        if not store.current(job, fp):
            raise DataError(f"{out_dir}/parts: part {job} of {nj} is missing or was decoded with other inputs "
                            f"(see {out_dir}/log/decode.{job}.log); nothing merged")
        part = store.records(job)
        for r in part:
            if "skipped" not in r:
                try:
                    _finite_record(r, ckpt)
                except DataError:
                    raise naming_parameters(DataError(
                        f"{store.paths(job)[0]}: utterance '{r['utt']}' has a non-finite score (decoded by an older "
                        "speechkit from features with a NaN?); decode it again with `force`")) from None
        records.extend(part)
    records.sort(key=lambda r: r["utt"].encode("utf-8"))
    done = [r for r in records if "skipped" not in r]
    if not done:
        reasons = sorted({r["skipped"] for r in records})
        raise DataError(f"{data_dir}: no utterance could be decoded ({'; '.join(reasons[:3])})")
    skipped: dict[str, int] = {}
    for r in records:
        if "skipped" in r:
            kind = r["skipped"].split(":")[0]
            skipped[kind] = skipped.get(kind, 0) + 1
    ckpt_used = store.summary(1)["checkpoint"]
    languages = None
    with atomic_write(out_dir / "text") as f:
        for r in done:
            f.write(f"{r['utt']} {r['text']}\n" if r["text"] else f"{r['utt']}\n")
    no_lang = [r["utt"] for r in done if r["lang"] is None]
    with atomic_write(out_dir / "utt2lang") as f:
        for r in done:
            if r["lang"] is not None:
                f.write(f"{r['utt']} {r['lang']}\n")
    have_lid = done[0]["lid_posteriors"] is not None
    if have_lid:
        languages = list(done[0]["lid_posteriors"])
        with atomic_write(out_dir / "lid_posteriors") as f:
            for r in done:
                f.write(f"{r['utt']} [ " + " ".join(f"{r['lid_posteriors'][k]:.6g}" for k in languages) + " ]\n")
    elif (out_dir / "lid_posteriors").exists():
        (out_dir / "lid_posteriors").unlink()
    with atomic_write(out_dir / "results.jsonl") as f:
        for r in records:
            f.write(dumps(r) + "\n")
    dec_s = sum(r["decode_seconds"] for r in done)
    audio_s = sum(r["audio_seconds"] for r in done)
    t_avg = sum(r["active_decoders_per_frame"] for r in done) / len(done)
    lid_correct = [r["lang"] == r["ref_lang"] for r in done if r["ref_lang"] is not None]
    stats = {
        "data_dir": str(data_dir), "model_dir": str(model_dir), "checkpoint": ckpt_used,
        **options.fingerprint_dict(), "nj": nj,
        # JSON has no infinity: an infinite threshold (no switch-off) is written as the option was, "inf"
        **({"switch_off_threshold": "inf"} if options.switch_off_threshold == float("inf") else {}),
        "languages": languages,
        "num_utterances": len(records), "num_decoded": len(done), "num_skipped": len(records) - len(done),
        "skipped": skipped, "num_without_language": len(no_lang),
        "t_avg": t_avg, "audio_seconds": audio_s, "decode_seconds": dec_s,
        "rtf": dec_s / audio_s if audio_s > 0 else None,
        "chosen_language_accuracy": (100.0 * sum(lid_correct) / len(lid_correct)) if lid_correct else None,
    }
    with atomic_write(out_dir / "decode_stats.json") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    if skipped:
        logger.warning("skipped %d of %d utterances: %s", stats["num_skipped"], len(records),
                       ", ".join(f"{n} {k}" for k, n in skipped.items()))
    if no_lang:
        logger.warning("%d hypotheses tell no language (left out of %s/utt2lang): %s%s", len(no_lang), out_dir,
                       " ".join(no_lang[:5]), " ..." if len(no_lang) > 5 else "")
    acc = stats["chosen_language_accuracy"]
    chooses = options.mode == "lid_free" or "union" in done[0]["hyps"]  # LID-free, or a vanilla model
    summary = (f"{out_dir}: decoded {len(done)} of {len(records)} utterances ({audio_s:.1f} s of audio); "
               f"T_avg {t_avg:.3f}; RTF {stats['rtf']:.4f} ({options.num_threads} thread(s) per job)"
               + (f"; chosen language correct for {acc:.2f} %" if acc is not None and chooses else ""))
    return stats, summary



def decode_data_dir(model_dir: str | os.PathLike, checkpoint: str | None, data_dir: str | os.PathLike,
                    out_dir: str | os.PathLike, options: DecodeOptions, *, nj: int = 1, job: int | None = None,
                    merge_only: bool = False, force: bool = False, max_jobs: int | None = None,
                    logger: logging.Logger = log) -> tuple[dict, str] | None:
    """Decode ``data_dir`` into ``out_dir`` in ``nj`` parts, as ``speechkit-asr-decode`` does.

    The options and paths are checked first (:meth:`DecodeOptions.check`, :func:`check_decode_paths`).
    With ``job``, only that part is decoded (its log lines go to ``logger``) and None is returned.
    Otherwise the parts that are not current (all with ``force``) are decoded -- in at most
    ``max_jobs`` (default ``nj``) worker processes, each part logging to ``OUT_DIR/log/decode.J.log``
    (:func:`speechkit.inference.parts.run_parts`; one at a time: here, ``logger``'s lines copied
    there) -- unless ``merge_only``, and then merged (:func:`merge_parts`).

    Returns:
        :func:`merge_parts`' stats and summary line; None with ``job``.

    Raises:
        DataError: some parts failed in worker processes (names each, its log and its error;
            nothing merged); :func:`decode_part` and :func:`merge_parts`' errors.
    """
    options.check()
    where = dict(model_dir=model_dir, checkpoint=checkpoint, data_dir=data_dir, out_dir=out_dir, options=options)
    check_decode_paths(**where)
    if job is not None:
        decode_part(**where, job=job, nj=nj, force=force, logger=logger)
        return None
    if not merge_only:
        todo = list(range(1, nj + 1))
        if not force:
            ckpt = resolve_checkpoint(model_dir, checkpoint, param="model_dir")
            utts, feats_table = read_utterances(data_dir)
            store = PartStore(out_dir)
            current = [j for j, part in enumerate(split_parts(utts, nj), 1)
                       if store.current(j, part_fingerprint(options, ckpt, data_dir, part, feats_table))]
            for j in current:
                logger.info("part %d of %d is complete and current; nothing to do", j, nj)
            todo = [j for j in todo if j not in current]
        log_dir = Path(out_dir) / "log"
        try:
            run_parts(decode_part, [(j, (), {**where, "job": j, "nj": nj, "force": force, "logger": logger})
                                    for j in todo],
                      workers=max_jobs or nj, log_of=lambda j: log_dir / f"decode.{j}.log", logger=logger,
                      threads=options.num_threads)
        except PartsFailed as e:  # the parts' errors as they name parameters, for a CLI to spell
            raise naming_parameters(DataError(f"{len(e.failures)} of {nj} jobs failed; nothing merged.\n  "
                                              + "\n  ".join(parameter_template(e).splitlines()))) from None
    return merge_parts(**where, nj=nj, logger=logger)
