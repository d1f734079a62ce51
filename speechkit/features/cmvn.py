"""Cepstral mean and variance normalisation with Kaldi's statistics format.

Stats of a set of frames ``x_t`` (``D`` dims) are a ``2 x (D+1)`` float64 matrix, exactly Kaldi's
``compute-cmvn-stats`` output::

    [ sum_t x_t[0]    ... sum_t x_t[D-1]    | count ]
    [ sum_t x_t[0]^2  ... sum_t x_t[D-1]^2  | 0     ]

They add up (the stats of a union are the sum). Non-finite frames are refused (one NaN would make
every normalised utterance NaN). Applying them is Kaldi's ``apply-cmvn``
(``ApplyCmvn`` in ``transform/cmvn.cc``): ``mean = sum / count``, ``var = sumsq / count - mean^2``
floored at ``1e-20``, ``y = (x - mean) / sqrt(var)`` (or ``y = x - mean`` without ``norm_vars``).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

import numpy as np

from speechkit.utils.fileio import DataError

logger = logging.getLogger(__name__)

#: Kaldi's variance floor in apply-cmvn.
VAR_FLOOR = 1e-20

__all__ = ["accumulate_stats", "apply_cmvn", "compute_cmvn_stats", "VAR_FLOOR"]


def accumulate_stats(feats: Iterable[np.ndarray] | np.ndarray, dim: int | None = None) -> np.ndarray:
    """Kaldi CMVN stats of one matrix ``(T, D)`` or an iterable of them (all the same ``D``).

    Returns:
        float64 ``(2, D+1)`` (see the module docstring).

    Raises:
        ValueError: a matrix that is not 2-D or has another dimension than the first; a NaN or
            infinite value (the message names the matrix index and frame); nothing to
            accumulate and ``dim`` not given.
    """
    if isinstance(feats, np.ndarray):
        feats = [feats]
    stats = None if dim is None else np.zeros((2, dim + 1))
    for i, m in enumerate(feats):
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2:
            raise ValueError(f"features must be (frames, dim), got shape {m.shape}")
        finite = np.isfinite(m)
        if not finite.all():
            t, k = np.argwhere(~finite)[0]
            raise ValueError(f"matrix {i}: frame {t} (of {m.shape[0]}) has a non-finite value ({m[t, k]} in "
                             f"dimension {k}); CMVN stats would be NaN for every utterance")
        if stats is None:
            stats = np.zeros((2, m.shape[1] + 1))
        if m.shape[1] != stats.shape[1] - 1:
            raise ValueError(f"feature dimension {m.shape[1]} differs from {stats.shape[1] - 1}")
        stats[0, :-1] += m.sum(axis=0)
        stats[1, :-1] += np.square(m).sum(axis=0)
        stats[0, -1] += m.shape[0]
    if stats is None:
        raise ValueError("no features to accumulate CMVN stats from")
    return stats


def apply_cmvn(feats: np.ndarray, stats: np.ndarray, norm_vars: bool = True) -> np.ndarray:
    """Normalise ``feats (T, D)`` with Kaldi ``stats (2, D+1)``; returns float32 ``(T, D)``.

    Raises:
        ValueError: stats dimension != ``D``, or a count below 1 (Kaldi: "insufficient stats").
    """
    stats = np.asarray(stats, dtype=np.float64)
    dim = stats.shape[1] - 1
    if feats.ndim != 2 or feats.shape[1] != dim:
        raise ValueError(f"CMVN stats are for dimension {dim}, features have shape {feats.shape}")
    count = stats[0, dim]
    if count < 1.0:
        raise ValueError(f"insufficient CMVN stats (count {count})")
    mean = stats[0, :dim] / count
    if not norm_vars:
        return (feats - mean).astype(np.float32)
    var = stats[1, :dim] / count - mean * mean
    if np.any(var < VAR_FLOOR):
        logger.warning("CMVN: %d dimension(s) with variance below %g floored", int((var < VAR_FLOOR).sum()), VAR_FLOOR)
        var = np.maximum(var, VAR_FLOOR)
    scale = 1.0 / np.sqrt(var)
    return (feats * scale - mean * scale).astype(np.float32)


def compute_cmvn_stats(data_dir: str | os.PathLike, cmvn_dir: str | os.PathLike | None = None,
                       per_speaker: bool = False) -> Path:
    """Accumulate CMVN stats of ``DATA_DIR/feats.scp`` and write them atomically.

    Global stats (the default) go to ``DATA_DIR/cmvn_global.ark``, one Kaldi binary matrix
    (``kaldiio.load_mat``; Kaldi: ``apply-cmvn DATA_DIR/cmvn_global.ark``), as ESPnet keeps its
    global ``cmvn.ark`` out of ``cmvn.scp``: Kaldi requires the keys of ``cmvn.scp`` to be exactly
    the speakers. A ``cmvn.scp`` holding only a ``global`` entry (older speechkit) is moved to
    ``DATA_DIR/.backup/N/``. Per-speaker stats go to ``CMVN_DIR/cmvn_<tag>.ark`` with
    ``DATA_DIR/cmvn.scp`` keyed by speaker (``<tag>``: :func:`~speechkit.features.extract.data_tag`).

    Args:
        data_dir: data dir with ``feats.scp`` and ``utt2spk``.
        cmvn_dir: where the per-speaker ark goes (default ``DATA_DIR/data``, as Kaldi).
        per_speaker: stats per speaker of ``utt2spk`` instead of global stats.

    Returns:
        Path of ``cmvn_global.ark`` (global) or ``cmvn.scp`` (per speaker).

    Raises:
        FileNotFoundError: no feats.scp/utt2spk.
        DataError: an utterance without features or an unreadable one (names it), mixed dims, a
            NaN or infinite value (names the utterance and frame). Nothing is written then.
        WriteError: ``CMVN_DIR`` or the data dir cannot be written.
    """
    import kaldiio
    from tqdm import tqdm

    from speechkit.data.datadir import GLOBAL_CMVN, DataDir, backup_files
    from speechkit.features.extract import data_tag
    from speechkit.features.io import FeatureReader, ark_scp_writer
    from speechkit.utils.fileio import atomic_write, ensure_writable_dir

    data_dir = Path(data_dir)
    if per_speaker:  # the outputs are known to be writable before any work is done
        cmvn_dir = ensure_writable_dir(os.path.abspath(cmvn_dir if cmvn_dir is not None else data_dir / "data"))
    if data_dir.is_dir():
        ensure_writable_dir(data_dir)
    d = DataDir.load(data_dir)
    reader = FeatureReader(data_dir)
    missing = [u for u in d.utts if u not in reader]
    if missing:
        raise DataError(f"{data_dir}/feats.scp: no features for {len(missing)} utterance(s) of utt2spk, "
                        f"e.g. '{missing[0]}' (run utils/fix_data_dir.sh or recompute features)")
    groups = d.spk2utt if per_speaker else {"global": d.utts}
    results: dict[str, np.ndarray] = {}
    with tqdm(total=len(d.utts), desc="cmvn stats", unit="utt", disable=None) as bar:
        for key, utts in groups.items():
            stats = None
            for u in utts:
                try:
                    m = accumulate_stats(reader[u])
                except ValueError as e:
                    raise DataError(f"{data_dir}/feats.scp: '{u}': {str(e).removeprefix('matrix 0: ')}") from None
                if stats is not None and m.shape != stats.shape:
                    raise DataError(f"{data_dir}/feats.scp: '{u}': feature dimension {m.shape[1] - 1} differs "
                                    f"from {stats.shape[1] - 1} (speaker '{key}')")
                stats = m if stats is None else stats + m
                bar.update(1)
            if stats is None:
                raise DataError(f"{data_dir}/utt2spk: speaker '{key}': no features to accumulate CMVN stats from")
            results[key] = stats
    if per_speaker:
        out = data_dir / "cmvn.scp"
        with ark_scp_writer(cmvn_dir / f"cmvn_{data_tag(data_dir)}.ark", out) as w:
            for key, stats in results.items():
                w(key, stats)
    else:
        out = data_dir / GLOBAL_CMVN
        cmvn_scp = data_dir / "cmvn.scp"
        if cmvn_scp.is_file() and cmvn_scp.read_text(encoding="utf-8", errors="replace").split(maxsplit=1)[:1] == ["global"]:
            dest = backup_files(data_dir, ["cmvn.scp"], move=True)
            logger.warning("%s: held global stats (older speechkit); moved to %s, global stats now go in %s",
                           cmvn_scp, dest, out)
        with atomic_write(out, "wb") as f:
            kaldiio.save_mat(f, results["global"])
    logger.info("CMVN stats (%s) of %d utterances -> %s", "per speaker" if per_speaker else "global", len(d.utts), out)
    return out
