"""Acoustic features: frontends, deltas, WORLD analysis/synthesis, CMVN, ark/scp I/O.

================================  ===========================================================
module                            what
================================  ===========================================================
:mod:`~.frontends`                ``build_frontend(conf)`` -> MFCC+deltas, log-mel, spectrogram,
                                  Kaldi fbank / MFCC (configs in ``conf/*.yaml``)
:mod:`~.world`                    WORLD features (``type: world``), their column layout, ``world_synthesize``
:mod:`~.delta`                    librosa (Savitzky-Golay) and Kaldi (regression) deltas
:mod:`~.extract`                  data-dir extraction in parts (``speechkit-compute-feats``)
:mod:`~.cmvn`                     Kaldi CMVN stats (the math) and ``apply_cmvn``
:mod:`~.cmvn_stats`               ``compute_cmvn_stats`` of a data dir (``speechkit-compute-cmvn-stats``)
:mod:`~.io`                       ``ScpReader`` (one scp of matrices: the one reader and its guard),
                                  ``FeatureReader`` (a data dir: feats.scp + CMVN on load), atomic ark/scp writer
:mod:`~.stack`                    frame stacking / subsampling for low-frame-rate models
================================  ===========================================================

The names below are importable from ``speechkit.features`` directly (loaded on first use, so
``import speechkit.features.stack`` stays light).
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "build_frontend": "frontends", "frontend_from_file": "frontends", "load_frontend_conf": "frontends",
    "Frontend": "frontends", "FRONTENDS": "frontends",
    "world_synthesize": "world", "world_streams": "world",
    "FeatureReader": "io", "ScpReader": "io", "ark_scp_writer": "io",
    "accumulate_stats": "cmvn", "apply_cmvn": "cmvn", "compute_cmvn_stats": "cmvn_stats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
