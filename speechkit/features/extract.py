"""Feature extraction over a data directory, in parts, as Kaldi's ``steps/make_mfcc.sh`` does.

The utterances of a data dir (C-sorted) are split into ``nj`` contiguous parts (sizes differ by at
most one, the first parts larger: Kaldi's ``split_scp.pl``). Part ``J`` (1-based) writes::

    FEAT_DIR/raw_<type>_<data>.J.ark    Kaldi binary matrices (float32), via kaldiio
    FEAT_DIR/raw_<type>_<data>.J.scp    utt -> /abs/path/raw_<type>_<data>.J.ark:offset
    FEAT_DIR/raw_<type>_<data>.J.json   the part's manifest, written last (see below)

where ``<type>`` is the frontend type and ``<data>`` the data dir's name. The ark and scp are
written under ``*.tmp`` names and renamed when complete; the manifest is written (atomically)
after both, so **a part is complete iff its manifest exists and matches**. The manifest records
a fingerprint of everything the part's output depends on -- the resolved frontend config, the
compression setting, the part's utterance ids with their ``wav.scp`` (and ``segments``) lines,
and the size and modification time of every audio file they name -- plus ``utt2num_frames``.
A part whose manifest matches is not recomputed (the check is by content, so it survives
copies and clock skew between cluster nodes, and catches an audio file rewritten in place).

:func:`merge_parts` checks that all ``nj`` parts are complete and current, then writes
``DATA_DIR/feats.scp`` (sorted), ``utt2num_frames``, ``frame_shift`` (seconds, as Kaldi) and
``feats.yaml`` (the resolved frontend config). If any part is missing, stale or failed, it
raises and writes nothing.

Before a part's ark is overwritten, a ``DATA_DIR/feats.scp`` that points into it is moved to
``DATA_DIR/.backup/`` (with ``utt2num_frames`` and ``cmvn.scp``), as Kaldi's scripts do, so no
``feats.scp`` is ever left pointing at offsets of a rewritten ark.

Outputs depend only on the data, the config and ``nj`` -- not on which backend ran the jobs
(local pool, ``utils/run.pl``, Slurm) -- and the feature matrices do not depend on ``nj``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import yaml

from speechkit.data.audio import is_command, iter_audio
from speechkit.data.datadir import DataDir, c_sorted, subset
from speechkit.features.frontends import Frontend
from speechkit.features.io import ark_scp_writer
from speechkit.utils.fileio import DataError, atomic_write, read_lines

logger = logging.getLogger(__name__)

MANIFEST_FORMAT = "speechkit-feats-part/1"
#: Kaldi compression method used with ``compress=True`` (kAutomaticMethod, copy-feats' default).
COMPRESSION_METHOD = 1


def split_utts(utts: list[str], nj: int) -> list[list[str]]:
    """Split sorted ``utts`` into ``nj`` contiguous parts; the first ``len % nj`` get one more.

    Parts may be empty when ``nj > len(utts)`` (they then write empty arks).
    """
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    q, r = divmod(len(utts), nj)
    out, i = [], 0
    for j in range(nj):
        k = q + (1 if j < r else 0)
        out.append(utts[i:i + k])
        i += k
    return out


def data_name(data_dir: str | os.PathLike) -> str:
    """The data dir's name as used in ark names (``data/train/`` -> ``train``)."""
    return Path(os.path.abspath(data_dir)).name


@dataclass(frozen=True)
class PartPaths:
    """Files of part ``job`` of ``nj``."""

    ark: Path
    scp: Path
    manifest: Path

    @classmethod
    def of(cls, feat_dir: str | os.PathLike, feat_type: str, name: str, job: int) -> "PartPaths":
        base = Path(os.path.abspath(feat_dir)) / f"raw_{feat_type}_{name}.{job}"
        return cls(Path(f"{base}.ark"), Path(f"{base}.scp"), Path(f"{base}.json"))


def _audio_stamp(spec: str) -> list:
    """``[spec, size, mtime_ns]`` for a path (``None``s if absent), ``[spec]`` for a command."""
    if is_command(spec):
        return [spec]
    try:
        st = os.stat(spec.strip())
        return [spec, st.st_size, st.st_mtime_ns]
    except OSError:
        return [spec, None, None]


def part_fingerprint(d: DataDir, utts: list[str], conf: dict, compress: bool) -> str:
    """SHA-256 over everything part ``utts`` depends on (see the module docstring)."""
    h = hashlib.sha256()
    h.update(json.dumps({"format": MANIFEST_FORMAT, "conf": conf, "compress": compress},
                        sort_keys=True).encode())
    wav = d.wav_scp or {}
    stamps: dict[str, list] = {}
    for utt in utts:
        rec = d.recording_of(utt) if d.segments is None or utt in d.segments else None
        seg = d.segments.get(utt) if d.segments is not None else None
        if rec is not None and rec not in stamps:
            stamps[rec] = _audio_stamp(wav[rec]) if rec in wav else [None]
        h.update(json.dumps([utt, rec, list(seg) if seg else None, stamps.get(rec)]).encode())
        h.update(b"\n")
    return h.hexdigest()


def read_manifest(path: Path) -> dict | None:
    """The manifest at ``path``, or ``None`` if it is absent or unreadable."""
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and m.get("format") == MANIFEST_FORMAT else None


def part_status(paths: PartPaths, fingerprint: str) -> str:
    """``"done"`` if the part is complete and current, else why not (``"missing"``, ``"stale"``...)."""
    m = read_manifest(paths.manifest)
    if m is None:
        return "missing"
    if m.get("fingerprint") != fingerprint:
        return "stale (inputs or config changed)"
    try:
        if paths.ark.stat().st_size != m.get("ark_bytes") or not paths.scp.is_file():
            return "incomplete (ark/scp missing or changed)"
    except OSError:
        return "incomplete (ark missing)"
    return "done"


def _batches(items: Iterator[tuple[str, np.ndarray, int]], max_samples: int) -> Iterator[list[tuple[str, np.ndarray]]]:
    batch, total = [], 0
    for utt, x, _sr in items:
        if batch and total + len(x) > max_samples:
            yield batch
            batch, total = [], 0
        batch.append((utt, x))
        total += len(x)
    if batch:
        yield batch


def _backup_derived(data_dir: Path, ark: Path) -> None:
    """Move ``feats.scp`` (+ ``utt2num_frames``, ``cmvn.scp``) to ``.backup/`` if it points into ``ark``."""
    feats = data_dir / "feats.scp"
    try:
        text = feats.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    if f" {ark}:" not in text:
        return
    backup = data_dir / ".backup"
    backup.mkdir(exist_ok=True)
    for name in ("feats.scp", "utt2num_frames", "cmvn.scp"):
        with contextlib.suppress(FileNotFoundError):  # a concurrent job may have moved it already
            os.replace(data_dir / name, backup / name)
            logger.warning("%s: moved to %s (its features are being recomputed)", data_dir / name, backup / name)


def compute_part(data_dir: str | os.PathLike, frontend: Frontend, feat_dir: str | os.PathLike, job: int,
                 nj: int, *, compress: bool = False, batch_seconds: float = 60.0, force: bool = False,
                 progress: bool | None = None) -> bool:
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

    Returns:
        True if computed, False if it was already current.

    Raises:
        DataError: unreadable/wrong-rate audio, an utterance too short for one frame, non-finite
            features -- naming the utterance and the file. Nothing of the part is then left
            looking complete (temporary files removed, no manifest).
    """
    from tqdm import tqdm

    if not 1 <= job <= nj:
        raise ValueError(f"job must be in 1..nj ({nj}), got {job}")
    data_dir = Path(data_dir)
    d = DataDir.load(data_dir)
    if d.wav_scp is None:
        raise DataError(f"{data_dir}/wav.scp: missing (needed to compute features)")
    utts = split_utts(d.utts, nj)[job - 1]
    conf = frontend.to_dict()
    fp = part_fingerprint(d, utts, conf, compress)
    paths = PartPaths.of(feat_dir, frontend.name, data_name(data_dir), job)
    if not force and part_status(paths, fp) == "done":
        logger.info("part %d/%d (%s) is complete and current; not recomputed", job, nj, paths.ark.name)
        return False
    paths.ark.parent.mkdir(parents=True, exist_ok=True)
    _backup_derived(data_dir, paths.ark)
    with contextlib.suppress(FileNotFoundError):
        paths.manifest.unlink()
    wav_src = str(data_dir / "wav.scp")
    t0 = time.perf_counter()
    n_frames: dict[str, int] = {}
    audio_s = 0.0
    with ark_scp_writer(paths.ark, paths.scp, COMPRESSION_METHOD if compress else None) as writer:
        if utts:
            sub = subset(d, utts)
            sub.path = data_dir  # error messages name the real files
            bar = tqdm(total=len(utts), desc=f"{frontend.name} part {job}/{nj}", unit="utt",
                       file=sys.stderr, disable=(not sys.stderr.isatty()) if progress is None else not progress)
            max_samples = max(1, int(batch_seconds * frontend.sample_rate))
            for batch in _batches(iter_audio(sub, expected_sr=frontend.sample_rate), max_samples):
                feats = _compute(frontend, batch, wav_src)
                for (utt, x), f in zip(batch, feats):
                    if f.shape[0] == 0 or not np.isfinite(f).all():
                        what = "no frames" if f.shape[0] == 0 else "NaN or infinite values"
                        raise DataError(f"{wav_src}: '{utt}': features have {what}")
                    writer(utt, np.ascontiguousarray(f, dtype=np.float32))
                    n_frames[utt] = int(f.shape[0])
                    audio_s += len(x) / frontend.sample_rate
                bar.update(len(batch))
            bar.close()
    manifest = {"format": MANIFEST_FORMAT, "job": job, "nj": nj, "fingerprint": fp,
                "ark": str(paths.ark), "ark_bytes": paths.ark.stat().st_size, "conf": conf,
                "compress": compress, "dim": frontend.dim, "frame_shift": frontend.frame_shift,
                "num_utts": len(utts), "utt2num_frames": n_frames}
    with atomic_write(paths.manifest) as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    dt = time.perf_counter() - t0
    logger.info("part %d/%d: %d utterances, %.1f s of audio, %d frames of dim %d in %.1f s (%.4f x real time) -> %s",
                job, nj, len(utts), audio_s, sum(n_frames.values()), frontend.dim, dt,
                dt / audio_s if audio_s else 0.0, paths.ark)
    return True


def _compute(frontend: Frontend, batch: list[tuple[str, np.ndarray]], wav_src: str) -> list[np.ndarray]:
    try:
        return frontend.compute_batch([x for _, x in batch])
    except ValueError:
        pass
    # find the offending utterance so the error names it
    out = []
    for utt, x in batch:
        try:
            out.append(frontend(x))
        except ValueError as e:
            raise DataError(f"{wav_src}: '{utt}': {e}") from None
    return out  # pragma: no cover - the batch failed, so one utterance must fail


def merge_parts(data_dir: str | os.PathLike, frontend: Frontend, feat_dir: str | os.PathLike, nj: int, *,
                compress: bool = False, log_dir: str | os.PathLike | None = None) -> int:
    """Merge the ``nj`` parts into ``DATA_DIR/{feats.scp, utt2num_frames, frame_shift, feats.yaml}``.

    Returns:
        The number of utterances.

    Raises:
        DataError: a part is missing, stale or incomplete (names the parts and their logs);
            nothing is written then.
    """
    data_dir = Path(data_dir)
    d = DataDir.load(data_dir)
    parts = split_utts(d.utts, nj)
    conf = frontend.to_dict()
    name = data_name(data_dir)
    bad, manifests, all_paths = [], [], []
    for job, utts in enumerate(parts, 1):
        paths = PartPaths.of(feat_dir, frontend.name, name, job)
        status = part_status(paths, part_fingerprint(d, utts, conf, compress))
        if status != "done":
            log = f" (log: {Path(log_dir) / f'compute_feats.{job}.log'})" if log_dir is not None else ""
            bad.append(f"part {job} {status}{log}")
        else:
            manifests.append(read_manifest(paths.manifest))
            all_paths.append(paths)
    if bad:
        raise DataError(f"{data_dir}: cannot merge features, {len(bad)} of {nj} parts not complete and current "
                        f"({paths.ark.parent}): " + "; ".join(bad) + ". Re-run the failed jobs; no feats.scp written")
    feats: dict[str, str] = {}
    utt2num_frames: dict[str, int] = {}
    for paths, m in zip(all_paths, manifests):
        for line in read_lines(paths.scp):
            utt, loc = line.split(" ", 1)
            feats[utt] = loc
        utt2num_frames.update(m["utt2num_frames"])
    if set(feats) != set(d.utt2spk) or set(utt2num_frames) != set(d.utt2spk):  # pragma: no cover - guarded by fingerprints
        raise DataError(f"{data_dir}: merged parts do not cover utt2spk exactly")
    newest = max((p.manifest.stat().st_mtime for p in all_paths), default=0.0)
    cmvn = data_dir / "cmvn.scp"
    if cmvn.exists() and cmvn.stat().st_mtime < newest:
        (data_dir / ".backup").mkdir(exist_ok=True)
        os.replace(cmvn, data_dir / ".backup" / "cmvn.scp")
        logger.warning("%s: older than the features; moved to %s/.backup (recompute CMVN stats)", cmvn, data_dir)
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
    return len(feats)


def _write_if_changed(path: Path, text: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.read_text(encoding="utf-8") == text:
            return
    with atomic_write(path) as f:
        f.write(text)


def _write_table_if_changed(path: Path, table: dict) -> None:
    text = "".join(f"{k} {table[k]}\n" for k in c_sorted(table))
    _write_if_changed(path, text)


__all__ = ["split_utts", "data_name", "PartPaths", "part_fingerprint", "part_status", "read_manifest",
           "compute_part", "merge_parts", "COMPRESSION_METHOD"]
