"""Feature extraction over a data directory, in parts, as Kaldi's ``steps/make_mfcc.sh`` does.

The utterances of a data dir (C-sorted) are split into ``nj`` contiguous parts (sizes differ by at
most one, the first parts larger: Kaldi's ``split_scp.pl``). Part ``J`` (1-based) writes::

    FEAT_DIR/raw_<type>_<tag>.J.<fp>.ark    Kaldi binary matrices (float32), via kaldiio
    FEAT_DIR/raw_<type>_<tag>.J.<fp>.scp    utt -> /abs/path/raw_<type>_<tag>.J.<fp>.ark:offset
    FEAT_DIR/raw_<type>_<tag>.J.<fp>.json   the part's manifest, written last (see below)

where ``<type>`` is the frontend type, ``<tag>`` the data dir's name plus a short hash of its
real path (:func:`data_tag`: ``train_3f2a9c1e``), so that ``a/train`` and ``b/train`` sharing a
FEAT_DIR never overwrite each other's arks (ESPnet's dump dirs are per set for the same reason),
and ``<fp>`` the first :data:`FP_CHARS` hex digits of the part's fingerprint
(:func:`part_fingerprint`, below): files are named by what they hold. A recompute with another
config, ``--compress``, ``nj`` or changed inputs writes files of new names and never touches the
arks that an older ``feats.scp`` points into -- the data dir's own ``.backup/N/feats.scp``, or
the ``feats.scp`` of a dir copied, subset or split from it -- so those keep reading the features
they were made with, and a failed recompute leaves the previous run's parts whole. Recomputing
the same part with the same fingerprint (``--force``) rewrites the same names with the same
content. **Superseded parts are kept** in FEAT_DIR until the user deletes them (a copy or backup
may still read them); :func:`merge_parts` logs which older part files of the data dir remain.

The ark and scp are written under ``*.tmp`` names and renamed when complete; the manifest is
written (atomically) after both, so **a part is complete iff its manifest exists and matches**.
The manifest records the data dir it was written for, a fingerprint of everything the part's
output depends on -- the resolved frontend config, the compression setting, the part's
utterance ids with their ``wav.scp`` (and ``segments``) lines, and the size and modification
time of every audio file they name, **including the files a command entry reads** (``sox in.wav
... |``: every word of the command that names an existing file) -- a per-utterance fingerprint
of the same inputs, and ``utt2num_frames``. A part whose manifest matches is not recomputed (the
check is by content, so it survives copies and clock skew between cluster nodes, and catches an
audio file rewritten in place). :func:`~speechkit.data.feats_manifest.check_feats_scp` (run by
``validate-data-dir``; the data layer reads manifests too) uses the
manifests to check that every ``feats.scp`` entry points at the matrix written for that
utterance and that its inputs did not change since.

:func:`merge_parts` checks that all ``nj`` parts are complete and current, then writes
``DATA_DIR/feats.scp`` (sorted), ``utt2num_frames``, ``frame_shift`` (seconds, as Kaldi) and
``feats.yaml`` (the resolved frontend config). If any part is missing, stale or failed, it
raises and writes nothing.

When a part is (re)computed, the data dir's feature files (``feats.scp``, ``utt2num_frames``,
``feats.yaml``, ``frame_shift``, ``cmvn.scp``, ``cmvn_global.ark``) are first moved to a new
numbered backup ``DATA_DIR/.backup/N/``, as Kaldi's ``make_mfcc.sh`` moves ``feats.scp`` aside:
a failed run leaves no ``feats.scp`` (of this or another frontend, e.g. one copied along by
``copy_data_dir``), while the backed-up ``feats.scp`` still reads the previous parts (never
overwritten by other contents, above). When nothing is recomputed but the merge switches
``feats.scp`` to other content (going back to an earlier config reuses its parts), the same files
are moved aside by the merge, said in a warning: CMVN stats are kept only beside the very
``feats.scp`` (by content) they were computed from.

Every utterance of ``utt2spk`` gets features or an error naming it: unreadable audio, audio
with another sample rate than the config's, audio shorter than one analysis frame
(``frontend.frame_length``; the same rule for every frontend), non-finite features. With
``skip_bad`` these utterances are skipped instead, logged one by one, recorded in the manifest,
listed in ``LOG_DIR/bad_utts`` by :func:`merge_parts` and removed from the data dir (its files
backed up first). Ids of ``wav.scp``/``text``/``segments`` that are not in ``utt2spk`` get no
features; :func:`merge_parts` names them in a warning.

Outputs depend only on the data, the config and ``nj`` -- not on which backend ran the jobs
(local pool, ``utils/run.pl``, Slurm) -- and the feature matrices do not depend on ``nj``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import yaml
from tqdm import tqdm

from speechkit.data.audio import _segment_bounds, _where, read_audio
from speechkit.data.datadir import (
    GLOBAL_CMVN, DataDir, backup_files, c_sorted, show_ids, subset,
)
from speechkit.data.feats_manifest import (  # the read side of the manifests (validate-data-dir uses it)
    MANIFEST_FORMAT, _utt_inputs, check_feats_scp, read_manifest, utt_input_hash,
)
from speechkit.data.split_data import split_contiguous
from speechkit.features.frontends import Frontend, build_frontend, load_frontend_conf
from speechkit.features.io import ark_scp_writer
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import parse_override
from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir, read_lines
from speechkit.utils.jobs import describe_failures, run_local_jobs
from speechkit.utils.outputs import check_output_dir

# torch is imported where used: the merge step and --help run without it.

logger = logging.getLogger(__name__)

#: The data dir's feature files, moved to ``.backup/N/`` before features are recomputed.
DERIVED_FILES = ("feats.scp", "utt2num_frames", "feats.yaml", "frame_shift", "cmvn.scp", GLOBAL_CMVN)
#: Kaldi compression method used with ``compress=True`` (kAutomaticMethod, copy-feats' default).
COMPRESSION_METHOD = 1
#: Hex digits of a part's fingerprint in its file names (``raw_<type>_<tag>.<job>.<fp>.ark``).
FP_CHARS = 12


def split_utts(utts: list[str], nj: int) -> list[list[str]]:
    """Split sorted ``utts`` into ``nj`` contiguous parts; the first ``len % nj`` get one more.

    Parts may be empty when ``nj > len(utts)`` (they then write empty arks).
    """
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    return split_contiguous(utts, nj)


def data_name(data_dir: str | os.PathLike) -> str:
    """The data dir's name (``data/train/`` -> ``train``)."""
    return Path(os.path.abspath(data_dir)).name


def data_tag(data_dir: str | os.PathLike) -> str:
    """The data dir's name in ark names: its name plus 8 hex digits of the SHA-1 of its real path
    (``data/train`` -> ``train_3f2a9c1e``), unique per data dir."""
    real = os.path.realpath(data_dir)
    return f"{Path(real).name}_{hashlib.sha1(real.encode('utf-8')).hexdigest()[:8]}"


def effective_nj(nj: int, num_utts: int) -> int:
    """``nj`` capped at the number of utterances (at least 1), as Kaldi's split never makes empty parts."""
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    return max(1, min(nj, num_utts))


@dataclass(frozen=True)
class PartPaths:
    """Files of part ``job`` of ``nj``: ``FEAT_DIR/raw_<type>_<tag>.<job>.<fp>.{ark,scp,json}``."""

    ark: Path
    scp: Path
    manifest: Path

    @classmethod
    def of(cls, feat_dir: str | os.PathLike, feat_type: str, name: str, job: int, fingerprint: str) -> "PartPaths":
        """The files of part ``job`` of data dir ``name`` (:func:`data_tag`) whose fingerprint
        (:func:`part_fingerprint`) is ``fingerprint``: named by what they hold, so that other
        contents never overwrite them."""
        fp = fingerprint[:FP_CHARS]
        if len(fp) != FP_CHARS or any(c not in "0123456789abcdef" for c in fp):
            raise ValueError(f"not a part fingerprint: {fingerprint!r}")
        base = Path(os.path.abspath(feat_dir)) / f"raw_{feat_type}_{name}.{job}.{fp}"
        return cls(Path(f"{base}.ark"), Path(f"{base}.scp"), Path(f"{base}.json"))

    def other_manifests(self) -> list[Path]:
        """Manifests of the same part (data dir, type and job) under another fingerprint, or under
        the unfingerprinted name of older versions (``raw_<type>_<tag>.<job>.json``)."""
        stem = self.manifest.name[: -len(".json")]
        base = stem.rsplit(".", 1)[0]
        pattern = re.compile(rf"{re.escape(base)}(\.[0-9a-f]{{{FP_CHARS}}})?\.json")
        return [p for p in _list_dir(self.manifest.parent)
                if p != self.manifest and pattern.fullmatch(p.name)]


def _list_dir(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def part_files(feat_dir: str | os.PathLike, name: str) -> list[Path]:
    """Every part file (ark, scp, manifest; any frontend, job and fingerprint) of data dir ``name``
    (:func:`data_tag`) in ``feat_dir``; temporaries (``*.tmp``) are left out."""
    pattern = re.compile(rf"raw_.+_{re.escape(name)}\.[0-9]+(\.[0-9a-f]{{{FP_CHARS}}})?\.(ark|scp|json)")
    return [p for p in _list_dir(Path(os.path.abspath(feat_dir))) if pattern.fullmatch(p.name)]


def part_fingerprint(d: DataDir, utts: list[str], conf: dict, compress: bool) -> str:
    """SHA-256 over everything part ``utts`` depends on (see the module docstring)."""
    h = hashlib.sha256()
    h.update(json.dumps({"format": MANIFEST_FORMAT, "conf": conf, "compress": compress},
                        sort_keys=True).encode())
    stamps: dict[str, list] = {}
    for utt in utts:
        rec, seg, stamp = _utt_inputs(d, utt, stamps)
        h.update(json.dumps([utt, rec, seg, stamp]).encode())
        h.update(b"\n")
    return h.hexdigest()


def part_status(paths: PartPaths, fingerprint: str, data_dir: str | os.PathLike | None = None) -> str:
    """``"done"`` if the part is complete and current, else why not (``"missing"``, ``"stale"``...).

    With ``data_dir``, a part whose manifest says it was written for another data dir is not done.
    When ``paths`` (named by ``fingerprint``) have no manifest but the same job has one under
    another fingerprint, the part is ``"stale (inputs or config changed)"``.
    """
    m = read_manifest(paths.manifest)
    if m is None:
        # a manifest of the same job under another fingerprint: computed, but from other inputs
        return "stale (inputs or config changed)" if paths.other_manifests() else "missing"
    if data_dir is not None and m.get("data_dir") not in (None, os.path.realpath(data_dir)):
        return f"written for another data dir ({m['data_dir']})"
    if m.get("fingerprint") != fingerprint:
        return "stale (inputs or config changed)"
    try:
        if paths.ark.stat().st_size != m.get("ark_bytes") or not paths.scp.is_file():
            return "incomplete (ark/scp missing or changed)"
    except OSError:
        return "incomplete (ark missing)"
    return "done"


def parse_overrides(items: list[str]) -> dict:
    """``["n_mels=40", "fmax=7600"]`` -> ``{"n_mels": 40, "fmax": 7600}``: each value is parsed by
    :func:`speechkit.utils.config.parse_override`, the rule of every override in the toolkit (YAML
    1.2 values); a ``-`` in a key is a ``_``.

    Raises:
        ConfigError: naming the item (no ``=``, a bad key or value) as one of ``overrides`` (a parameter
            reference, :mod:`speechkit.utils.errors`: speechkit-compute-feats' ``--set``).
    """
    out = {}
    for item in items:
        if "=" not in item:
            raise naming_parameters(ConfigError(f"`overrides` {item!r}: expected KEY=VALUE"))
        key, value = item.split("=", 1)
        try:
            key, value = parse_override(f"{key.strip().replace('-', '_')}={value}")
        except ConfigError as e:
            raise naming_parameters(ConfigError(f"`overrides` {item!r}: {str(e).removeprefix('command line: ')}")) \
                from None
        out[key] = value
    return out


def load_frontend(config: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> "Frontend":
    """The frontend of the YAML ``config`` with the ``KEY=VALUE`` overrides (``speechkit-compute-feats
    --config`` / ``--set``; values parsed by :func:`parse_overrides`).

    Raises:
        ConfigError: naming the file for an error of the file's, or the ``KEY=VALUE`` of ``overrides`` at
        fault (never the file for a key given on the command line).
    """
    parsed = parse_overrides(list(overrides))
    conf = load_frontend_conf(config)
    if "type" not in parsed:
        build_frontend(conf, source=config)  # an error here is the file's
    try:
        return build_frontend({**conf, **parsed}, source=config)
    except ConfigError as e:
        msg = str(e).removeprefix(f"{config}: ")
        for item, key in zip(overrides, parsed):
            if f"key '{key}'" in msg:
                raise naming_parameters(ConfigError(f"`overrides` {item}: {msg}")) from None
        raise


def stale_parts(data_dir: str | os.PathLike, frontend: "Frontend", feat_dir: str | os.PathLike, nj: int,
                compress: bool = False, force: bool = False) -> list[int]:
    """The parts (1-based) of ``nj`` that are not complete and current (:func:`part_status`): the
    jobs a local pool has to run; every part with ``force``."""
    d = DataDir.load(data_dir)
    parts = split_utts(d.utts, nj)
    conf = frontend.to_dict()
    todo = []
    for job, utts in enumerate(parts, 1):
        fp = part_fingerprint(d, utts, conf, compress)
        paths = PartPaths.of(feat_dir, frontend.name, data_tag(data_dir), job, fp)
        if force or part_status(paths, fp, data_dir) != "done":
            todo.append(job)
    return todo


def _batches(items, max_samples: int) -> Iterator[list[tuple[str, np.ndarray]]]:
    batch, total = [], 0
    for utt, x in items:
        if batch and total + len(x) > max_samples:
            yield batch
            batch, total = [], 0
        batch.append((utt, x))
        total += len(x)
    if batch:
        yield batch


def _iter_audio(d: DataDir, frontend: "Frontend", wav_src: str, seg_src: str, bad: dict[str, str] | None
                ) -> Iterator[tuple[str, np.ndarray]]:
    """``(utt, samples)`` in utterance order; a recording is decoded once for all its segments.

    An utterance whose audio cannot be read, has the wrong rate, or is shorter than one frame
    raises :class:`DataError` naming it -- or, when ``bad`` is a dict, is recorded there
    (utt -> reason) and skipped.
    """
    sr = frontend.sample_rate
    min_samples = max(1, int(round(frontend.frame_length * sr)))

    def rec_of(utt: str) -> str | None:
        if d.segments is None:
            return utt
        return d.segments[utt].recording if utt in d.segments else None

    remaining: dict[str | None, int] = {}
    for utt in d.utts:
        remaining[rec_of(utt)] = remaining.get(rec_of(utt), 0) + 1
    cache: dict[str, np.ndarray | DataError] = {}
    for utt in d.utts:
        rec = rec_of(utt)
        try:
            if d.segments is not None and utt not in d.segments:
                raise DataError(f"{seg_src}: no entry for utterance '{utt}'")
            if rec not in (d.wav_scp or {}):
                raise DataError(f"{wav_src}: no entry for utterance '{utt}'" if d.segments is None else
                                f"{seg_src}: utterance '{utt}' refers to recording '{rec}', not in {wav_src}")
            if rec not in cache:
                try:
                    cache[rec] = read_audio(d.wav_scp[rec], key=rec, expected_sr=sr, source=wav_src)[0]
                except DataError as e:
                    cache[rec] = e
            x = cache[rec]
            remaining[rec] -= 1
            if remaining[rec] == 0:
                del cache[rec]
            if isinstance(x, DataError):
                raise x
            if d.segments is not None:
                seg = d.segments[utt]
                b, e = _segment_bounds(seg.start, seg.end, sr, len(x), _where(seg_src, utt))
                x = x[b:e]
            if len(x) < min_samples:
                raise DataError(f"{wav_src}: '{utt}': {len(x)} samples ({1000 * len(x) / sr:.4g} ms) are too short "
                                f"for one {1000 * frontend.frame_length:.4g} ms {frontend.name} frame")
        except DataError as e:
            if bad is None:
                raise
            _skip(bad, utt, e)
            continue
        yield utt, x


def _skip(bad: dict[str, str], utt: str, e: Exception) -> None:
    reason = str(e).replace("\n", " ")
    bad[utt] = reason
    logger.warning("skipping '%s' (--skip-bad): %s", utt, reason)


def backup_derived(data_dir: str | os.PathLike) -> Path | None:
    """Move the data dir's feature files (:data:`DERIVED_FILES`) to a new ``.backup/N/``; the
    directory, or ``None`` when there were none."""
    dest = backup_files(data_dir, DERIVED_FILES, move=True)
    if dest is not None:
        logger.warning("%s: moved %s to %s (features are being recomputed)", data_dir,
                       " ".join(sorted(p.name for p in dest.iterdir())), dest)
    return dest


def compute_part(data_dir: str | os.PathLike, frontend: "Frontend", feat_dir: str | os.PathLike, job: int,
                 nj: int, *, compress: bool = False, batch_seconds: float = 60.0, force: bool = False,
                 progress: bool | None = None, skip_bad: bool = False) -> bool:
    """Compute part ``job`` (1-based) of ``nj`` unless it is complete and current.

    Args:
        data_dir: Kaldi data dir with ``wav.scp``, ``utt2spk`` (and optional ``segments``).
        frontend: the feature extractor; its ``sample_rate`` is required of every recording.
        feat_dir: where the part's ark/scp/manifest go (created).
        job, nj: which part of how many.
        compress: write Kaldi-compressed matrices (lossy, ~2x smaller; ``copy-feats --compress``).
        batch_seconds: audio per :meth:`Frontend.compute_batch` call.
        force: recompute even if the part is current.
        progress: tqdm bar on stderr (``None``: only when stderr is a terminal).
        skip_bad: skip (log, and record in the manifest) the utterances that fail instead of
            stopping at the first.

    Returns:
        True if computed, False if it was already current.

    Raises:
        DataError: unreadable/wrong-rate audio, an utterance shorter than one frame
            (``frontend.frame_length``), non-finite features -- naming the utterance and the file
            (unless ``skip_bad``). Nothing of the part is then left looking complete (temporary
            files removed, no manifest), and the data dir has no ``feats.scp``.
    """
    if not 1 <= job <= nj:
        raise ValueError(f"job must be in 1..nj ({nj}), got {job}")
    data_dir = Path(data_dir)
    d = DataDir.load(data_dir)
    if d.wav_scp is None:
        raise DataError(f"{data_dir}/wav.scp: missing (needed to compute features)")
    utts = split_utts(d.utts, nj)[job - 1]
    conf = frontend.to_dict()
    fp = part_fingerprint(d, utts, conf, compress)
    paths = PartPaths.of(feat_dir, frontend.name, data_tag(data_dir), job, fp)
    if not force and part_status(paths, fp, data_dir) == "done":
        logger.info("part %d/%d (%s) is complete and current; not recomputed", job, nj, paths.ark.name)
        return False
    paths.ark.parent.mkdir(parents=True, exist_ok=True)
    backup_derived(data_dir)
    with contextlib.suppress(FileNotFoundError):
        paths.manifest.unlink()
    wav_src, seg_src = str(data_dir / "wav.scp"), str(data_dir / "segments")
    t0 = time.perf_counter()
    n_frames: dict[str, int] = {}
    bad: dict[str, str] | None = {} if skip_bad else None
    audio_s = 0.0
    stamps: dict[str, list] = {}
    with ark_scp_writer(paths.ark, paths.scp, COMPRESSION_METHOD if compress else None) as writer:
        if utts:
            sub = subset(d, utts)
            sub.path = data_dir  # error messages name the real files
            bar = tqdm(total=len(utts), desc=f"{frontend.name} part {job}/{nj}", unit="utt",
                       file=sys.stderr, disable=(not sys.stderr.isatty()) if progress is None else not progress)
            max_samples = max(1, int(batch_seconds * frontend.sample_rate))
            for batch in _batches(_iter_audio(sub, frontend, wav_src, seg_src, bad), max_samples):
                for (utt, x), f in zip(batch, _compute(frontend, batch, wav_src, bad)):
                    try:
                        if f is None:
                            continue
                        if f.shape[0] == 0 or not np.isfinite(f).all():
                            what = "no frames" if f.shape[0] == 0 else "NaN or infinite values"
                            raise DataError(f"{wav_src}: '{utt}': features have {what}")
                    except DataError as e:
                        if bad is None:
                            raise
                        _skip(bad, utt, e)
                        continue
                    writer(utt, np.ascontiguousarray(f, dtype=np.float32))
                    n_frames[utt] = int(f.shape[0])
                    audio_s += len(x) / frontend.sample_rate
                bar.update(len(batch))
            bar.close()
    manifest = {"format": MANIFEST_FORMAT, "job": job, "nj": nj, "fingerprint": fp,
                "data_dir": os.path.realpath(data_dir),
                "ark": str(paths.ark), "ark_bytes": paths.ark.stat().st_size, "conf": conf,
                "compress": compress, "dim": frontend.dim, "frame_shift": frontend.frame_shift,
                "num_utts": len(utts), "utt2num_frames": n_frames,
                "inputs": {u: utt_input_hash(d, u, stamps) for u in n_frames},
                "bad_utts": bad or {}}
    with atomic_write(paths.manifest) as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    dt = time.perf_counter() - t0
    logger.info("part %d/%d: %d utterances, %.1f s of audio, %d frames of dim %d in %.1f s (%.4f x real time) -> %s",
                job, nj, len(n_frames), audio_s, sum(n_frames.values()), frontend.dim, dt,
                dt / audio_s if audio_s else 0.0, paths.ark)
    if bad:
        logger.warning("part %d/%d: skipped %d of %d utterances (--skip-bad): %s", job, nj, len(bad), len(utts),
                       ", ".join(f"'{u}'" for u in bad))
    return True


def _compute(frontend: "Frontend", batch: list[tuple[str, np.ndarray]], wav_src: str,
             bad: dict[str, str] | None = None) -> list[np.ndarray | None]:
    try:
        return frontend.compute_batch([x for _, x in batch])
    except ValueError:
        pass
    # find the offending utterance so the error names it
    out: list[np.ndarray | None] = []
    for utt, x in batch:
        try:
            out.append(frontend(x))
        except ValueError as e:
            if bad is None:
                raise DataError(f"{wav_src}: '{utt}': {e}") from None
            _skip(bad, utt, DataError(f"{wav_src}: '{utt}': {e}"))
            out.append(None)
    return out


def merge_parts(data_dir: str | os.PathLike, frontend: "Frontend", feat_dir: str | os.PathLike, nj: int, *,
                compress: bool = False, log_dir: str | os.PathLike | None = None, skip_bad: bool = False) -> int:
    """Merge the ``nj`` parts into ``DATA_DIR/{feats.scp, utt2num_frames, frame_shift, feats.yaml}``.

    Utterances skipped by parts computed with ``skip_bad`` are refused unless ``skip_bad`` is
    given here too; then they are listed (``utt reason`` lines) in ``LOG_DIR/bad_utts`` (default
    LOG_DIR: ``DATA_DIR/log``) and removed from the data dir (every table and side file filtered
    by :func:`~speechkit.data.datadir.subset`, the originals moved to ``.backup/N/`` first).
    Ids of ``wav.scp``/``text``/``segments`` that are not in ``utt2spk`` are named in a warning.
    A ``feats.scp`` of other content (another config's parts, reused) is first moved to
    ``.backup/N/`` with the files describing it, CMVN stats included (:func:`_switch_features`).

    Returns:
        The number of utterances with features.

    Raises:
        DataError: a part is missing, stale, incomplete or written for another data dir (names
            the parts and their logs); skipped utterances without ``skip_bad``; every utterance
            skipped. Nothing is written then.
    """
    data_dir = Path(data_dir)
    d = DataDir.load(data_dir)
    unlisted = d.unlisted()
    if unlisted:
        ids = sorted({u for us in unlisted.values() for u in us})
        logger.warning("%s: %d utterance%s of %s %s not in utt2spk and get%s no features: %s", data_dir, len(ids),
                       "" if len(ids) == 1 else "s", "/".join(unlisted), "is" if len(ids) == 1 else "are",
                       "s" if len(ids) == 1 else "", show_ids(ids))
    parts = split_utts(d.utts, nj)
    conf = frontend.to_dict()
    tag = data_tag(data_dir)
    bad, manifests, all_paths = [], [], []
    for job, utts in enumerate(parts, 1):
        fp = part_fingerprint(d, utts, conf, compress)
        paths = PartPaths.of(feat_dir, frontend.name, tag, job, fp)
        status = part_status(paths, fp, data_dir)
        if status != "done":
            log = f" (log: {Path(log_dir) / f'compute_feats.{job}.log'})" if log_dir is not None else ""
            bad.append(f"part {job} {status}{log}")
        else:
            manifests.append(read_manifest(paths.manifest))
            all_paths.append(paths)
    if bad:
        raise DataError(f"{data_dir}: cannot merge features, {len(bad)} of {nj} parts not complete and current "
                        f"({paths.ark.parent}): " + "; ".join(bad) + ". Re-run the failed jobs; no feats.scp written")
    bad_utts: dict[str, str] = {}
    for m in manifests:
        bad_utts.update(m.get("bad_utts") or {})
    if bad_utts and not skip_bad:
        raise naming_parameters(DataError(
            f"{data_dir}: {len(bad_utts)} utterances were skipped by parts computed with `skip_bad` "
            f"({show_ids(bad_utts)}); merge with `skip_bad` to drop them from the data dir, or fix them and recompute; "
            "no feats.scp written"))
    if bad_utts and len(bad_utts) == len(d):
        raise DataError(f"{data_dir}: every one of the {len(d)} utterances failed (e.g. {next(iter(bad_utts.values()))}); "
                        "no feats.scp written")
    feats: dict[str, str] = {}
    utt2num_frames: dict[str, int] = {}
    for paths, m in zip(all_paths, manifests):
        for line in read_lines(paths.scp):
            utt, loc = line.split(" ", 1)
            feats[utt] = loc
        utt2num_frames.update(m["utt2num_frames"])
    expected = set(d.utt2spk) - set(bad_utts)
    if set(feats) != expected or set(utt2num_frames) != expected:  # pragma: no cover - guarded by fingerprints
        raise DataError(f"{data_dir}: merged parts do not cover utt2spk exactly")
    _switch_features(data_dir, _render_table(feats), [p.ark for p in all_paths])
    if bad_utts:
        _drop_bad(data_dir, d, bad_utts, Path(log_dir) if log_dir is not None else data_dir / "log")
    resolved = yaml.safe_dump(conf, sort_keys=False)
    header = (f"# resolved {frontend.name} frontend config written by speechkit-compute-feats\n"
              f"# dim: {frontend.dim}, frame_shift: {frontend.frame_shift:.10g} s, "
              f"frame_length: {frontend.frame_length:.10g} s, compress: {str(compress).lower()}\n")
    _write_if_changed(data_dir / "feats.yaml", header + resolved)
    _write_if_changed(data_dir / "frame_shift", f"{frontend.frame_shift:.10g}\n")
    _write_table_if_changed(data_dir / "utt2num_frames", utt2num_frames)
    _write_table_if_changed(data_dir / "feats.scp", feats)
    logger.info("merged %d parts: %d utterances, %d frames -> %s", nj, len(feats), sum(utt2num_frames.values()),
                data_dir / "feats.scp")
    _log_older_parts(data_dir, feat_dir, tag, {p for ps in all_paths for p in (ps.ark, ps.scp, ps.manifest)})
    return len(feats)


def _switch_features(data_dir: Path, feats_scp: str, arks: list[Path]) -> Path | None:
    """Before ``data_dir/feats.scp`` becomes ``feats_scp``: when that is other content (the parts of
    another config or inputs, e.g. an earlier config's parts reused: nothing was recomputed, so
    :func:`compute_part` moved nothing), move the files describing the previous features
    (:data:`DERIVED_FILES`, the CMVN stats computed from them included) to a new ``.backup/N``,
    saying so. Compared by content: the same ``feats.scp`` keeps its CMVN stats."""
    try:
        if (data_dir / "feats.scp").read_text(encoding="utf-8") == feats_scp:
            return None
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    dest = backup_files(data_dir, DERIVED_FILES, move=True)
    if dest is not None:
        moved = sorted(p.name for p in dest.iterdir())
        stats = [n for n in moved if n in ("cmvn.scp", GLOBAL_CMVN)]
        logger.warning("%s: feats.scp switches to other features (%s); moved %s to %s%s", data_dir,
                       show_ids(sorted({a.name for a in arks}), 2), " ".join(moved), dest,
                       f" ({' and '.join(stats)} describe the previous features: recompute them with "
                       "speechkit-compute-cmvn-stats)" if stats else "")
    return dest


def _render_table(table: dict) -> str:
    return "".join(f"{k} {table[k]}\n" for k in c_sorted(table))


def _log_older_parts(data_dir: Path, feat_dir: str | os.PathLike, tag: str, current: set[Path]) -> None:
    """Log (INFO) the part files of the data dir in ``feat_dir`` other than ``current``: parts of
    another config, inputs, ``nj`` or frontend, kept because copies and backups may read them."""
    older = [p for p in part_files(feat_dir, tag) if p not in current]
    if not older:
        return
    size = 0
    for p in older:
        with contextlib.suppress(OSError):
            size += p.stat().st_size
    arks = [p.name for p in older if p.suffix == ".ark"] or [p.name for p in older]
    shown = f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"
    logger.info("%s: %d older part files of %s remain (%s; other configs, inputs or --nj; kept because "
                "backups or copies of its feats.scp may read them; delete them when no longer needed): %s",
                Path(os.path.abspath(feat_dir)), len(older), data_dir, shown, show_ids(arks))


def _drop_bad(data_dir: Path, d: DataDir, bad_utts: dict[str, str], log_dir: Path) -> None:
    """List ``bad_utts`` in ``log_dir/bad_utts`` and remove them from the data dir (backed up first)."""
    with atomic_write(log_dir / "bad_utts") as f:
        for u in c_sorted(bad_utts):
            f.write(f"{u} {bad_utts[u]}\n")
    kept = subset(d, [u for u in d.utts if u not in bad_utts])
    files = [p.name for p in data_dir.iterdir() if p.is_file()]
    backup = backup_files(data_dir, files)
    kept.write(data_dir, why="its utterances failed", backup=False)  # backed up just above
    logger.warning("%s: removed the %d utterances that failed (--skip-bad; listed with the reasons in %s, "
                   "the previous files in %s): %s", data_dir, len(bad_utts), log_dir / "bad_utts", backup,
                   show_ids(bad_utts))


def _write_if_changed(path: Path, text: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.read_text(encoding="utf-8") == text:
            return
    with atomic_write(path) as f:
        f.write(text)


def _write_table_if_changed(path: Path, table: dict) -> None:
    _write_if_changed(path, _render_table(table))


def make_feats(data_dir: str | os.PathLike, config: str | os.PathLike, log_dir: str | os.PathLike,
               feat_dir: str | os.PathLike, *, overrides: list[str] | tuple[str, ...] = (), nj: int = 1,
               job: int | None = None, merge_only: bool = False, compress: bool = False, batch_seconds: float = 60.0,
               num_threads: int = 1, force: bool = False, skip_bad: bool = False, max_jobs: int | None = None,
               job_argv: Callable[[int, int], list[str]] | None = None,
               run_jobs: Callable[..., list] | None = None,
               log: logging.Logger = logger) -> "tuple[int, Frontend] | None":
    """Compute the features of ``data_dir`` as ``speechkit-compute-feats`` (Kaldi's ``make_mfcc.sh``) does.

    FEAT_DIR and LOG_DIR are checked (they may lie inside DATA_DIR, not be or contain it), the
    frontend is built (:func:`load_frontend`), every output dir is checked writable and ``nj`` is
    capped at the number of utterances (logged), all before any work. Then, with ``job``, only that
    part is computed (:func:`compute_part`; a part beyond the capped ``nj`` has nothing to do);
    otherwise the parts that are not current (:func:`stale_parts`) are computed -- by
    ``run_jobs`` (default :func:`speechkit.utils.jobs.run_local_jobs`) running ``job_argv(J, nj)``
    (the command computing part J of the capped ``nj``) as local processes, at most ``max_jobs``
    (default: min(parts, CPU count)) at once, each logging to ``LOG_DIR/compute_feats.J.log``, or
    without ``job_argv`` here one after the other -- unless ``merge_only``, and merged
    (:func:`merge_parts`).

    Returns:
        ``(number of utterances merged, the frontend)``; None with ``job``.

    Raises:
        OutputOverlapError, WriteError, ConfigError: as checked above (FEAT_DIR or LOG_DIR being or
        containing the config file too); DataError: a data dir without utterances; some of the local
        processes failed (names each and the last line of its log; no feats.scp written);
        :func:`compute_part` and :func:`merge_parts`' errors.
    """
    for option, d in (("FEAT_DIR", feat_dir), ("LOG_DIR", log_dir)):
        check_output_dir(d, experiment_dirs={"DATA_DIR": data_dir}, inputs={"`config`": config}, option=option)
    if not merge_only:  # the merge needs the frontend's config only
        import torch

        torch.set_num_threads(num_threads)
    frontend = load_frontend(config, overrides)
    # every output is known to be writable before any work is done
    ensure_writable_dir(data_dir)
    ensure_writable_dir(feat_dir)
    if job is None:
        ensure_writable_dir(log_dir)
    num_utts = len(DataDir.load(data_dir))
    if num_utts == 0:
        raise DataError(f"{Path(data_dir) / 'utt2spk'}: no utterance (an empty data dir): no features to compute")
    capped = effective_nj(nj, num_utts)
    if capped < nj:
        log.info("--nj %d capped at %d: there are only %d utterances (as Kaldi's split_data.sh, no empty parts)",
                 nj, capped, num_utts)
        nj = capped
    part = dict(compress=compress, batch_seconds=batch_seconds, force=force, skip_bad=skip_bad)
    if job is not None:
        if job > nj:
            log.info("job %d: nothing to do (%d utterances make %d parts)", job, num_utts, nj)
        else:
            compute_part(data_dir, frontend, feat_dir, job, nj, **part)
        return None
    todo = [] if merge_only else stale_parts(data_dir, frontend, feat_dir, nj, compress, force)
    if not merge_only and not todo:
        log.info("all %d parts are complete and current", nj)
    elif todo and job_argv is None:
        for j in todo:
            compute_part(data_dir, frontend, feat_dir, j, nj, **part)
    elif todo:
        max_jobs = max_jobs or min(len(todo), os.cpu_count() or 1)
        log.info("computing %d of %d parts, %d at a time; logs in %s/compute_feats.*.log", len(todo), nj, max_jobs,
                 log_dir)
        failed = (run_jobs or run_local_jobs)(todo, lambda j: job_argv(j, nj),
                                              lambda j: Path(log_dir) / f"compute_feats.{j}.log",
                                              max_jobs, num_threads, desc="feature jobs")
        if failed:
            raise DataError(f"{len(failed)} of {len(todo)} jobs failed; no feats.scp written.\n  "
                            + "\n  ".join(describe_failures(failed)))
    n = merge_parts(data_dir, frontend, feat_dir, nj, compress=compress, log_dir=log_dir, skip_bad=skip_bad)
    return n, frontend


__all__ = ["split_utts", "data_name", "data_tag", "effective_nj", "PartPaths", "part_files", "part_fingerprint",
           "part_status", "parse_overrides", "load_frontend", "stale_parts", "make_feats", "compute_part",
           "merge_parts", "backup_derived", "COMPRESSION_METHOD", "DERIVED_FILES", "FP_CHARS"]
