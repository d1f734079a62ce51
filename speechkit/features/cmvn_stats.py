"""CMVN statistics of a data directory (Kaldi's ``steps/compute_cmvn_stats.sh``).

:func:`compute_cmvn_stats` reads ``DATA_DIR/feats.scp`` and writes the stats (the format and the
math are in :mod:`speechkit.features.cmvn`) as ``cmvn_global.ark`` or a per-speaker ``cmvn.scp``.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import kaldiio
import numpy as np
from tqdm import tqdm

from speechkit.data.datadir import GLOBAL_CMVN, DataDir, backup_files
from speechkit.features.cmvn import accumulate_stats
from speechkit.features.extract import data_tag
from speechkit.features.io import FeatureReader, ark_scp_writer
from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir, read_lines
from speechkit.utils.outputs import check_output_dir

logger = logging.getLogger(__name__)

__all__ = ["compute_cmvn_stats"]


def _first_key(table: Path) -> str | None:
    """The first id of a table (a byte-order mark dropped, as by every reader); None if it has none or
    is not UTF-8 (then it is not the legacy ``global`` entry either)."""
    try:
        lines = read_lines(table)
    except DataError:
        return None
    return next((line.split()[0] for line in lines if line.strip()), None)


def compute_cmvn_stats(data_dir: str | os.PathLike, cmvn_dir: str | os.PathLike | None = None,
                       per_speaker: bool = False) -> Path:
    """Accumulate CMVN stats of ``DATA_DIR/feats.scp`` and write them atomically.

    Global stats (the default) go to ``DATA_DIR/cmvn_global.ark``, one Kaldi binary matrix
    (``kaldiio.load_mat``; Kaldi: ``apply-cmvn DATA_DIR/cmvn_global.ark``), as ESPnet keeps its
    global ``cmvn.ark`` out of ``cmvn.scp``: Kaldi requires the keys of ``cmvn.scp`` to be exactly
    the speakers. A ``cmvn.scp`` holding only a ``global`` entry (older speechkit) is moved to
    ``DATA_DIR/.backup/N/``. Per-speaker stats go to ``CMVN_DIR/cmvn_<tag>.<hash>.ark`` with
    ``DATA_DIR/cmvn.scp`` keyed by speaker (``<tag>``: :func:`~speechkit.features.extract.data_tag`;
    ``<hash>``: 12 hex digits of the SHA-256 of the speakers and their stats). Named by what it holds,
    the ark of a recompute never overwrites one that an older ``cmvn.scp`` reads (the data dir's
    backup, a copied or subset dir's); earlier arks stay in CMVN_DIR until deleted.

    Args:
        data_dir: data dir with ``feats.scp`` and ``utt2spk``.
        cmvn_dir: where the per-speaker ark goes (default ``DATA_DIR/data``, as Kaldi); it may lie
            inside ``DATA_DIR`` but not be or contain it.
        per_speaker: stats per speaker of ``utt2spk`` instead of global stats.

    Returns:
        Path of ``cmvn_global.ark`` (global) or ``cmvn.scp`` (per speaker).

    Raises:
        OutputOverlapError: ``cmvn_dir`` is or contains ``data_dir`` (checked before any work).
        FileNotFoundError: no feats.scp/utt2spk.
        DataError: no utterances in ``utt2spk`` (global or per speaker; nothing is written).
        DataError: an utterance without features or an unreadable one (names it), mixed dims, a
            NaN or infinite value (names the utterance and frame). Nothing is written then.
        WriteError: ``CMVN_DIR`` or the data dir cannot be written.
    """
    data_dir = Path(data_dir)
    if cmvn_dir is not None:
        # CMVN_DIR is written file by file, never replaced; inside the data dir is the default layout
        # (DATA_DIR/data, as Kaldi), so only a CMVN_DIR that is or contains the data dir is refused
        # (the ark would land among the data dir's tables): the data dir is passed with the "may lie
        # inside" rule of experiment_dirs.
        check_output_dir(cmvn_dir, experiment_dirs={"DATA_DIR": data_dir}, option="CMVN_DIR")
    d = DataDir.load(data_dir)
    if not d.utts:
        raise DataError(f"{data_dir}: no utterances (utt2spk is empty): no features to accumulate "
                        f"{'per-speaker' if per_speaker else 'global'} CMVN stats from; nothing written")
    if per_speaker:  # the outputs are known to be writable before any work is done
        cmvn_dir = ensure_writable_dir(os.path.abspath(cmvn_dir if cmvn_dir is not None else data_dir / "data"))
    ensure_writable_dir(data_dir)
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
        h = hashlib.sha256()
        for key, stats in results.items():
            h.update(key.encode("utf-8") + b"\0" + np.ascontiguousarray(stats, dtype=np.float64).tobytes())
        with ark_scp_writer(cmvn_dir / f"cmvn_{data_tag(data_dir)}.{h.hexdigest()[:12]}.ark", out) as w:
            for key, stats in results.items():
                w(key, stats)
    else:
        out = data_dir / GLOBAL_CMVN
        cmvn_scp = data_dir / "cmvn.scp"
        if cmvn_scp.is_file() and _first_key(cmvn_scp) == "global":
            dest = backup_files(data_dir, ["cmvn.scp"], move=True)
            logger.warning("%s: held global stats (older speechkit); moved to %s, global stats now go in %s",
                           cmvn_scp, dest, out)
        with atomic_write(out, "wb") as f:
            kaldiio.save_mat(f, results["global"])
    logger.info("CMVN stats (%s) of %d utterances -> %s", "per speaker" if per_speaker else "global", len(d.utts), out)
    return out
