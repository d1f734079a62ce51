"""WORLD vocoder features (analysis and synthesis) via pyworld and pysptk.

Analysis (:class:`WorldFrontend`, ``type: world``) of Morise et al.'s WORLD vocoder
(IEICE Trans. Inf. & Syst. E99-D(7), 2016): F0 by Harvest (Morise 2017) or DIO + StoneMask,
spectral envelope by CheapTrick, aperiodicity by D4C. The envelope is compressed to a
mel-cepstrum with SPTK's ``sp2mc`` (all-pass warping ``alpha`` chosen for the sample rate by
``pysptk.util.mcepalpha``), F0 to a continuous log-F0 (linear interpolation of log-F0 over
unvoiced frames) plus a voiced/unvoiced flag, and aperiodicity to WORLD's coded band
aperiodicity (``pyworld.code_aperiodicity``; 1 band at 16 kHz, 2 at 22.05/24 kHz, 5 at 48 kHz).
This is the usual statistical-parametric TTS target (e.g. Merlin, nnmnkwii). At 16 kHz it has the
43 dims of the SALAD paper's Ahocoder features (Pascual et al., IberSPEECH 2018, sec. 3.2: 40 MFCCs,
log-F0, voicing frequency, U/V flag), but WORLD's one coded aperiodicity band is not Ahocoder's
voicing frequency: it is the band's aperiodicity in dB, not the frequency where the noise part of
the spectrum begins.

Feature layout, per frame (see :func:`world_streams`)::

    [ mcep (mcep_dim, c0 first) | lf0 (1) | vuv (1) | bap (num_bap) ]

Every user of the layout takes it from here: :func:`world_streams` (the slices of a config),
:class:`WorldLayout` (``mcep_dim``, ``num_bap``, ``dim`` and the column indices, used by
:mod:`speechkit.scoring.mcd`), :func:`read_world_layout` (the layout of a feature dir from its
``feats.yaml``), :func:`stream_layout` / :func:`feature_streams` (the slices the acoustic models'
tasks and synthesis use, ``bap`` open-ended).

Frames are every ``frame_period`` ms; an ``N``-sample input gives
``1 + floor(1000 N / (sample_rate * frame_period))`` frames, frame ``t`` at ``t * frame_period`` ms.

:func:`world_synthesize` is the inverse (``mc2sp``, ``decode_aperiodicity``, ``synthesize``) so a
TTS recipe can turn predicted features into a waveform.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, Mapping, Optional

import numpy as np

from speechkit.features.frontends.base import (
    Frontend, FrontendConfig, _require, build_frontend, load_frontend_conf, register_frontend,
)
from speechkit.utils.fileio import DataError

with warnings.catch_warnings():  # pyworld imports pkg_resources, which warns on import
    warnings.simplefilter("ignore")
    import pysptk
    import pyworld

__all__ = ["WorldConfig", "WorldFrontend", "world_streams", "interpolate_log_f0", "world_synthesize", "WorldLayout",
           "read_world_layout", "stream_layout", "feature_streams"]


@dataclass
class WorldConfig(FrontendConfig):
    """``type: world`` -- WORLD analysis parameters (see ``conf/world.yaml``)."""

    type_name: ClassVar[str] = "world"
    sample_rate: int = 16000
    #: frame period in milliseconds.
    frame_period: float = 5.0
    #: F0 estimator: harvest (robust, slower) or dio + stonemask refinement (fast).
    f0_method: Literal["harvest", "dio"] = "harvest"
    #: F0 search range in Hz.
    f0_floor: float = 71.0
    f0_ceil: float = 800.0
    #: mel-cepstrum coefficients per frame, c0 included (SPTK order = mcep_dim - 1).
    mcep_dim: int = 40
    #: all-pass constant of the mel warping; null = pysptk.util.mcepalpha(sample_rate) (0.41 at 16 kHz).
    alpha: Optional[float] = None
    #: FFT size of CheapTrick/D4C; null = pyworld.get_cheaptrick_fft_size(sample_rate, f0_floor).
    fft_size: Optional[int] = None
    #: D4C voicing threshold (pyworld's default 0.85).
    d4c_threshold: float = 0.85

    def check(self, where: str) -> None:
        super().check(where)
        _require(self.frame_period > 0, where, "frame_period", f"must be positive (ms), got {self.frame_period}")
        _require(0 < self.f0_floor < self.f0_ceil, where, "f0_floor",
                 f"must be positive and below f0_ceil ({self.f0_ceil}), got {self.f0_floor}")
        _require(self.f0_ceil < self.sample_rate / 2, where, "f0_ceil",
                 f"must be below sample_rate/2 ({self.sample_rate / 2:g} Hz), got {self.f0_ceil}")
        _require(self.mcep_dim >= 1, where, "mcep_dim", f"must be >= 1, got {self.mcep_dim}")
        if self.alpha is not None:
            _require(-1 < self.alpha < 1, where, "alpha", f"must be in (-1, 1), got {self.alpha}")
        if self.fft_size is not None:
            _require(self.fft_size >= 64 and self.fft_size & (self.fft_size - 1) == 0, where, "fft_size",
                     f"must be a power of two >= 64, got {self.fft_size}")
        _require(0 <= self.d4c_threshold <= 1, where, "d4c_threshold", f"must be in [0, 1], got {self.d4c_threshold}")

    @property
    def resolved_alpha(self) -> float:
        return float(pysptk.util.mcepalpha(self.sample_rate)) if self.alpha is None else self.alpha

    @property
    def resolved_fft_size(self) -> int:
        if self.fft_size is not None:
            return self.fft_size
        return int(pyworld.get_cheaptrick_fft_size(self.sample_rate, self.f0_floor))

    @property
    def num_bap(self) -> int:
        return int(pyworld.get_num_aperiodicities(self.sample_rate))


def world_streams(conf: "WorldConfig | dict") -> dict[str, slice]:
    """Column slices of the feature streams: ``{"mcep", "lf0", "vuv", "bap"}`` -> ``slice``."""
    c = _as_config(conf)
    m = c.mcep_dim
    return {"mcep": slice(0, m), "lf0": slice(m, m + 1), "vuv": slice(m + 1, m + 2),
            "bap": slice(m + 2, m + 2 + c.num_bap)}


def interpolate_log_f0(f0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Continuous log-F0 and voicing flag from an F0 track with 0 for unvoiced frames.

    Log-F0 is interpolated linearly (in the log domain) across unvoiced stretches between voiced
    frames and held constant before the first / after the last voiced frame. An utterance with
    no voiced frame gets ``lf0 = 0`` everywhere (``vuv`` all 0 says it is meaningless).

    Args:
        f0: ``(T,)`` F0 in Hz, 0 where unvoiced.

    Returns:
        ``(lf0, vuv)``: ``(T,)`` float64 natural-log F0 and ``(T,)`` float64 1.0/0.0 flag.
    """
    f0 = np.asarray(f0, dtype=np.float64)
    vuv = (f0 > 0).astype(np.float64)
    voiced = np.flatnonzero(vuv)
    if voiced.size == 0:
        return np.zeros_like(f0), vuv
    lf0 = np.interp(np.arange(len(f0)), voiced, np.log(f0[voiced]))
    return lf0, vuv


@register_frontend
class WorldFrontend(Frontend):
    """WORLD analysis -> ``[mcep | lf0 | vuv | bap]`` float32 ``(frames, mcep_dim + 2 + num_bap)``.

    See the module docstring; defaults (``conf/world.yaml``): 16 kHz, 5 ms frames, Harvest F0 in
    71-800 Hz, 40 mel-cepstral coefficients with alpha 0.41, CheapTrick/D4C with FFT size 1024,
    1 coded aperiodicity band -> 43 dims.
    """

    name = "world"
    Config = WorldConfig
    config: WorldConfig

    @property
    def frame_shift(self) -> float:
        return self.config.frame_period / 1000.0

    @property
    def frame_length(self) -> float:
        # CheapTrick's window is 3 pitch periods at the F0 floor (3 / f0_floor seconds).
        return 3.0 / self.config.f0_floor

    @property
    def dim(self) -> int:
        return self.config.mcep_dim + 2 + self.config.num_bap

    def num_frames(self, num_samples: int) -> int:
        c = self.config
        return 1 + int(1000.0 * num_samples / c.sample_rate / c.frame_period)

    def analyze(self, samples: np.ndarray) -> dict[str, np.ndarray]:
        """Raw WORLD parameters: ``f0 (T,)`` Hz, ``sp (T, fft_size/2+1)`` power envelope,
        ``ap (T, fft_size/2+1)`` aperiodicity in [0, 1], ``t (T,)`` frame times in seconds."""
        c = self.config
        x = np.ascontiguousarray(samples, dtype=np.float64)
        if c.f0_method == "harvest":
            f0, t = pyworld.harvest(x, c.sample_rate, f0_floor=c.f0_floor, f0_ceil=c.f0_ceil, frame_period=c.frame_period)
        else:
            f0, t = pyworld.dio(x, c.sample_rate, f0_floor=c.f0_floor, f0_ceil=c.f0_ceil, frame_period=c.frame_period)
            f0 = pyworld.stonemask(x, f0, t, c.sample_rate)
        fft_size = c.resolved_fft_size
        sp = pyworld.cheaptrick(x, f0, t, c.sample_rate, f0_floor=c.f0_floor, fft_size=fft_size)
        ap = pyworld.d4c(x, f0, t, c.sample_rate, threshold=c.d4c_threshold, fft_size=fft_size)
        return {"f0": f0, "sp": sp, "ap": ap, "t": t}

    def compute(self, samples: np.ndarray) -> np.ndarray:
        c = self.config
        p = self.analyze(samples)
        mcep = pysptk.sp2mc(p["sp"], order=c.mcep_dim - 1, alpha=c.resolved_alpha)
        lf0, vuv = interpolate_log_f0(p["f0"])
        bap = pyworld.code_aperiodicity(p["ap"], c.sample_rate)
        return np.concatenate([mcep, lf0[:, None], vuv[:, None], bap], axis=1).astype(np.float32)


def _as_config(conf: "WorldConfig | dict | WorldFrontend") -> WorldConfig:
    if isinstance(conf, WorldFrontend):
        return conf.config
    if isinstance(conf, WorldConfig):
        return conf
    fe = build_frontend({"type": "world", **{k: v for k, v in dict(conf).items() if k != "type"}},
                        source="<world conf>")
    return fe.config


def world_synthesize(feats: np.ndarray, sr: int, conf: "WorldConfig | dict | WorldFrontend") -> np.ndarray:
    """Waveform from ``[mcep | lf0 | vuv | bap]`` features (the inverse of :class:`WorldFrontend`).

    ``sp = mc2sp(mcep, alpha, fft_size)``, ``f0 = exp(lf0)`` where ``vuv > 0.5`` else 0,
    ``ap = decode_aperiodicity(bap, sr, fft_size)``, then ``pyworld.synthesize`` with the
    config's frame period.

    Args:
        feats: ``(T, mcep_dim + 2 + num_bap)`` features, e.g. a model's prediction.
        sr: sample rate in Hz; must equal the config's ``sample_rate``.
        conf: the analysis config (dict as in ``feats.yaml``, :class:`WorldConfig` or the frontend).

    Returns:
        float32 ``(samples,)`` waveform (not clipped; roughly ``T * frame_period`` ms long).

    Raises:
        ValueError: wrong shape, non-finite values, or ``sr`` != the config's sample rate.
    """
    c = _as_config(conf)
    if sr != c.sample_rate:
        raise ValueError(f"world_synthesize: sr {sr} Hz != config sample_rate {c.sample_rate} Hz")
    feats = np.asarray(feats, dtype=np.float64)
    dim = c.mcep_dim + 2 + c.num_bap
    if feats.ndim != 2 or feats.shape[1] != dim or feats.shape[0] == 0:
        raise ValueError(f"world_synthesize: features must be (frames, {dim}) for mcep_dim={c.mcep_dim} "
                         f"at {c.sample_rate} Hz, got shape {feats.shape}")
    if not np.isfinite(feats).all():
        raise ValueError("world_synthesize: features contain NaN or infinity")
    s = world_streams(c)
    fft_size = c.resolved_fft_size
    mcep = np.ascontiguousarray(feats[:, s["mcep"]])
    sp = pysptk.mc2sp(mcep, alpha=c.resolved_alpha, fftlen=fft_size)
    f0 = np.where(feats[:, s["vuv"]][:, 0] > 0.5, np.exp(feats[:, s["lf0"]][:, 0]), 0.0)
    ap = pyworld.decode_aperiodicity(np.ascontiguousarray(feats[:, s["bap"]]), sr, fft_size)
    y = pyworld.synthesize(np.ascontiguousarray(f0), np.ascontiguousarray(sp), np.ascontiguousarray(ap),
                           sr, frame_period=c.frame_period)
    return y.astype(np.float32)


# ----------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class WorldLayout:
    """Column layout ``[mcep (mcep_dim) | lf0 | vuv | bap (num_bap)]`` of WORLD feature matrices.

    The default (40, 1) is ``conf/world.yaml`` at 16 kHz (43 dims).
    """

    mcep_dim: int = 40
    num_bap: int = 1

    @property
    def dim(self) -> int:
        """Columns per frame: ``mcep_dim + 2 + num_bap``."""
        return self.mcep_dim + 2 + self.num_bap

    @property
    def mcep(self) -> slice:
        return slice(0, self.mcep_dim)

    @property
    def lf0(self) -> int:
        return self.mcep_dim

    @property
    def vuv(self) -> int:
        return self.mcep_dim + 1

    def describe(self) -> str:
        return f"mcep_dim={self.mcep_dim}, num_bap={self.num_bap} ({self.dim} dims)"

    @classmethod
    def from_conf(cls, conf: "WorldLayout | Mapping | object | None" = None) -> "WorldLayout":
        """The layout of a WORLD config: a :class:`WorldLayout` (returned as is), a
        :class:`WorldConfig`, a dict as in ``feats.yaml``, or None (the defaults of ``conf/world.yaml``).

        Raises:
            ConfigError: a dict with an unknown key or bad value (names the key).
        """
        if isinstance(conf, WorldLayout):
            return conf
        s = world_streams(WorldConfig() if conf is None else conf)
        return cls(mcep_dim=s["mcep"].stop, num_bap=s["bap"].stop - s["bap"].start)


def read_world_layout(feature_dir: str | os.PathLike) -> tuple[WorldLayout, str]:
    """The layout of ``feature_dir`` from its ``feats.yaml`` (the config written by
    ``speechkit-compute-feats`` / ``speechkit-tts-synthesize``), else the defaults.

    Returns:
        ``(layout, source)``: ``source`` is the ``feats.yaml`` path, or ``"default (no feats.yaml)"``.

    Raises:
        DataError: ``feats.yaml`` is not a ``type: world`` config.
        ConfigError: ``feats.yaml`` has an unknown key or a bad value (names file and key).
    """
    f = Path(feature_dir) / "feats.yaml"
    if not f.is_file():
        return WorldLayout.from_conf(None), "default (no feats.yaml)"
    conf = load_frontend_conf(f)
    if conf.get("type") != "world":
        raise DataError(f"{f}: not WORLD features (type: {conf.get('type')!r}, expected 'world')")
    cfg = build_frontend(conf, source=str(f)).config
    assert isinstance(cfg, WorldConfig)
    return WorldLayout.from_conf(cfg), str(f)


def stream_layout(mcep_dim: int = 40) -> dict[str, slice]:
    """Column slices ``{"mcep", "lf0", "vuv", "bap"}`` of ``[mcep | lf0 | vuv | bap]`` features.

    Unlike :func:`world_streams`, ``bap`` runs to the end of the row (no sample rate is needed).
    """
    return _slices(WorldLayout(mcep_dim=mcep_dim))


def _slices(lay: WorldLayout) -> dict[str, slice]:
    return {"mcep": lay.mcep, "lf0": slice(lay.lf0, lay.lf0 + 1), "vuv": slice(lay.vuv, lay.vuv + 1),
            "bap": slice(lay.vuv + 1, None)}


def feature_streams(data_dir: str | os.PathLike | None) -> dict[str, slice]:
    """The WORLD stream layout of ``data_dir``'s features (:func:`read_world_layout`: its ``feats.yaml``,
    else 40 mel-cepstra at 16 kHz), as :func:`stream_layout`'s slices.

    Raises:
        DataError: ``feats.yaml`` is not a WORLD config (the models predict WORLD features).
    """
    return _slices(read_world_layout(data_dir)[0]) if data_dir else stream_layout()
