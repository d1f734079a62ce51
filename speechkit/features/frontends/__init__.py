"""Feature frontends: waveform -> ``(frames, dim)`` float32 feature matrix.

A frontend is built from a YAML dict with a ``type:`` key and that type's parameters
(``conf/mfcc.yaml``, ``conf/logmel.yaml``, ``conf/spectrogram.yaml``, ``conf/fbank.yaml``,
``conf/world.yaml``)::

    fe = build_frontend(load_frontend_conf("conf/mfcc.yaml"), source="conf/mfcc.yaml")
    feats = fe(samples)                   # samples: float32 (N,) at fe.sample_rate Hz
    fe.dim, fe.frame_shift, fe.frame_length   # 39, 0.01 s, 0.025 s

===============  =============================================================  =========  =====
type             what                                                           reference  dim
===============  =============================================================  =========  =====
``mfcc``         13 MFCC + delta + delta-delta, librosa's definition, in torch  librosa    39
``logmel``       log mel spectrogram (natural log), in torch                    librosa    80
``spectrogram``  linear magnitude STFT ``|X|`` (optionally log), in torch       librosa    257
``fbank``        Kaldi ``compute-fbank-feats`` via ``kaldi_native_fbank``       Kaldi      80
``kaldi_mfcc``   Kaldi ``compute-mfcc-feats`` (+ ``add-deltas``), same library  Kaldi      13/39
``world``        WORLD mcep, interpolated log-F0, V/UV, coded aperiodicity      pyworld    43
===============  =============================================================  =========  =====

By family: :mod:`~speechkit.features.frontends.stft` (the three torch frontends, librosa's
STFT convention and mel filterbank; on one CPU core the 39-dim MFCC takes about a third of
librosa's CPU time at matching numerics, ``test/bench/bench_mfcc.py``),
:mod:`~speechkit.features.frontends.kaldi` (Kaldi's ``compute-fbank-feats`` /
``compute-mfcc-feats`` options), :mod:`speechkit.features.world` (``world``, imported on first use);
the interface, registry and config building they share are in
:mod:`~speechkit.features.frontends.base`. This package exports the names below.

Configs follow the toolkit's one rule (:mod:`speechkit.utils.config`, in its strict mode: an int
key takes no ``80.0``, a bool key no Python string): unknown keys, wrong types and bad values raise
:class:`~speechkit.utils.cli.ConfigError` naming the key and the config file.
"""
from __future__ import annotations

from speechkit.features.frontends.base import (
    FRONTENDS, Frontend, FrontendConfig, as_samples, build_frontend, frontend_from_file, load_frontend_conf,
    register_frontend,
)
from speechkit.features.frontends.kaldi import (
    FbankConfig, FbankFrontend, KaldiFrameConfig, KaldiFrontend, KaldiMelConfig, KaldiMfccConfig,
    KaldiMfccFrontend,
)
from speechkit.features.frontends.stft import (
    LogMelConfig, LogMelFrontend, MfccConfig, MfccFrontend, SpectrogramConfig, SpectrogramFrontend, StftConfig,
    StftFrontend, dct_matrix, hz_to_mel, mel_filterbank, mel_to_hz,
)

__all__ = [
    "Frontend", "build_frontend", "load_frontend_conf", "frontend_from_file", "register_frontend",
    "MfccConfig", "LogMelConfig", "SpectrogramConfig", "FbankConfig", "KaldiMfccConfig",
    "MfccFrontend", "LogMelFrontend", "SpectrogramFrontend", "FbankFrontend", "KaldiMfccFrontend",
    "mel_filterbank", "dct_matrix", "hz_to_mel", "mel_to_hz", "FRONTENDS",
]
