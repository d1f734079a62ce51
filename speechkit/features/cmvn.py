"""Cepstral mean and variance normalisation with Kaldi's statistics format.

Stats of a set of frames ``x_t`` (``D`` dims) are a ``2 x (D+1)`` float64 matrix, exactly Kaldi's
``compute-cmvn-stats`` output::

    [ sum_t x_t[0]    ... sum_t x_t[D-1]    | count ]
    [ sum_t x_t[0]^2  ... sum_t x_t[D-1]^2  | 0     ]

They add up (the stats of a union are the sum). Non-finite frames are refused (one NaN would make
every normalised utterance NaN). Applying them is Kaldi's ``apply-cmvn``
(``ApplyCmvn`` in ``transform/cmvn.cc``): ``mean = sum / count``, ``var = sumsq / count - mean^2``
floored at ``1e-20``, ``y = (x - mean) / sqrt(var)`` (or ``y = x - mean`` without ``norm_vars``).

This module holds the math only; accumulating the stats of a data dir's ``feats.scp`` and writing
``cmvn_global.ark`` / ``cmvn.scp`` (``speechkit-compute-cmvn-stats``) is
:func:`speechkit.features.cmvn_stats.compute_cmvn_stats`.
"""
from __future__ import annotations

import logging
from typing import Iterable

import numpy as np

logger = logging.getLogger(__name__)

#: Kaldi's variance floor in apply-cmvn.
VAR_FLOOR = 1e-20

__all__ = ["accumulate_stats", "apply_cmvn", "VAR_FLOOR"]


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

