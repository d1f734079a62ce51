"""Combining Kaldi data directories (Kaldi's ``utils/combine_data.sh``)."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from speechkit.data.datadir import (
    EXTRA_FILES, PHONE_ALIGNMENTS, TABLES, DataDir, Segment, _as_datadir,
)
from speechkit.utils.fileio import DataError
from speechkit.utils.outputs import check_output_dir

# speechkit.data.audio (numpy, soundfile) is imported where used: the data-dir tools start without numpy.

logger = logging.getLogger(__name__)


def combine(dirs) -> DataDir:
    """The union of several data dirs (Kaldi's ``utils/combine_data.sh``), in memory.

    Optional tables (``text``, ``utt2lang``, ``utt2dur``, ``feats.scp``, ``utt2num_frames``,
    ``cmvn.scp``) are kept only if every source has them (else dropped with a warning). When only
    some sources have ``segments``, the others get whole-recording segments (durations from
    ``utt2dur``, else read from the audio headers). A recording id in two sources must have the
    same ``wav.scp`` entry; conflicting ``cmvn.scp`` entries drop ``cmvn.scp`` (recompute it).

    Raises:
        ValueError: fewer than one source.
        DataError: an utterance id in two sources (naming both), or a recording id with two
            different ``wav.scp`` entries.
    """
    ds = [_as_datadir(x) for x in dirs]
    if not ds:
        raise ValueError("combine: no source data directories")
    names = [str(x.path) if x.path is not None else f"<source {i + 1}>" for i, x in enumerate(ds)]
    out = DataDir()
    owner: dict[str, int] = {}
    for i, x in enumerate(ds):
        for u in x.utt2spk:
            if u in owner:
                raise DataError(f"utterance '{u}' is in both {names[owner[u]]} and {names[i]}")
            owner[u] = i
        out.utt2spk.update(x.utt2spk)

    for attr in ("text", "utt2lang", "utt2dur", "feats_scp", "utt2num_frames", "phone_alignments"):
        have = [x for x in ds if getattr(x, attr) is not None]
        if len(have) == len(ds):
            setattr(out, attr, {k: v for x in ds for k, v in getattr(x, attr).items()})
        elif have:
            logger.warning("combine: only %d of %d sources have %s; not creating it",
                           len(have), len(ds), _file_of(attr))
    if all(x.spk2gender is not None for x in ds):
        out.spk2gender = {}
        for x in ds:
            for k, v in x.spk2gender.items():
                if out.spk2gender.setdefault(k, v) != v:
                    raise DataError(f"speaker '{k}' has different genders in the sources' spk2gender")
    elif any(x.spk2gender is not None for x in ds):
        logger.warning("combine: not every source has spk2gender; not creating it")

    if all(x.wav_scp is not None for x in ds):
        out.wav_scp = {}
        rec_owner: dict[str, int] = {}
        for i, x in enumerate(ds):
            for rec, v in x.wav_scp.items():
                if rec in out.wav_scp and out.wav_scp[rec] != v:
                    raise DataError(f"recording '{rec}' has different wav.scp entries in "
                                    f"{names[rec_owner[rec]]} and {names[i]}")
                out.wav_scp[rec] = v
                rec_owner.setdefault(rec, i)
        if any(x.segments is not None for x in ds):
            out.segments = {}
            for i, x in enumerate(ds):
                out.segments.update(x.segments if x.segments is not None else _whole_segments(x, names[i]))
    elif any(x.wav_scp is not None for x in ds):
        logger.warning("combine: not every source has wav.scp; not creating wav.scp/segments")

    if all(x.cmvn_scp is not None for x in ds):
        out.cmvn_scp = {}
        for x in ds:
            for k, v in x.cmvn_scp.items():
                if k in out.cmvn_scp and out.cmvn_scp[k] != v:
                    logger.warning("combine: conflicting cmvn.scp entries for '%s'; not creating cmvn.scp "
                                   "(recompute the stats for the combined data)", k)
                    out.cmvn_scp = None
                    break
                out.cmvn_scp[k] = v
            if out.cmvn_scp is None:
                break
    return out


def _file_of(attr: str) -> str:
    return PHONE_ALIGNMENTS if attr == "phone_alignments" else next(f for f, a in TABLES.items() if a == attr)


def _whole_segments(x: DataDir, name: str) -> dict[str, Segment]:
    from speechkit.data.audio import probe_audio

    seg = {}
    for u in x.utts:
        if x.utt2dur is not None and u in x.utt2dur:
            dur = x.utt2dur[u]
        else:
            n, sr = probe_audio(x.wav_scp[u], key=u, source=f"{name}/wav.scp")
            dur = n / sr
        seg[u] = Segment(u, 0.0, dur)
    return seg


def combine_data_dirs(dest: str | os.PathLike, srcs) -> DataDir:
    """Combine the data dirs ``srcs`` into ``dest`` (see :func:`combine`) and write it.

    ``frame_shift``/``feats.yaml``/``cmvn_global.ark`` are copied when every source has the same
    one; otherwise one already in ``dest`` is removed (stale, as the tables :meth:`DataDir.write` removes).
    An existing ``dest`` is updated by :func:`~speechkit.data.datadir.update_data_dir` (what is replaced
    or removed is backed up to ``dest/.backup/N`` first; later features kept while the utterances
    and audio stay the same).

    Raises:
        OutputOverlapError: ``dest`` is, contains or lies inside one of the sources.
        DataError: as :func:`combine`.
    """
    dest = Path(dest)
    srcs = [Path(s) for s in srcs]
    check_output_dir(dest, inputs=[("source", s) for s in srcs], option="destination")
    out = combine(srcs)
    extras: dict[str, bytes | None] = {}
    for name in EXTRA_FILES:
        contents = {(s / name).read_bytes() if (s / name).is_file() else None for s in srcs}
        if len(contents) == 1 and None not in contents:
            extras[name] = contents.pop()
        else:
            if contents != {None}:
                logger.warning("combine: the sources' %s files differ or are missing; not copying it", name)
            extras[name] = None
    out.write(dest, extras=extras, why="not every source has the same one")
    logger.info("%s: combined %d utterances from %d dirs", dest, len(out), len(srcs))
    return out
