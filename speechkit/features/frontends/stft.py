"""The STFT-based frontends (librosa's definitions, computed in torch): ``mfcc``, ``logmel``,
``spectrogram``, with the mel filterbank and DCT they use.

They share one STFT convention (librosa's): frames are centred (``center=True``, the signal padded
with ``n_fft // 2`` zeros each side), so an ``N``-sample input gives ``1 + N // hop_length`` frames
and frame ``t`` is centred on sample ``t * hop_length``; with the default hop of 160 samples MFCC,
log-mel and spectrogram frames line up one to one. They work in the STFT's ``(freq, time)`` layout
with the mel filterbank as a sparse matrix.
"""
from __future__ import annotations

import functools
import logging
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Optional

import numpy as np

from speechkit.features.frontends.base import Frontend, FrontendConfig, _require, register_frontend

# torch and features.delta (torch) are imported where used: a frontend is built from its config without torch.

if TYPE_CHECKING:  # pragma: no cover
    import torch

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- mel / DCT helpers


def hz_to_mel(f: np.ndarray | float, htk: bool = False) -> np.ndarray:
    """Hz -> mel. ``htk``: ``2595 log10(1 + f/700)``; else Slaney's Auditory Toolbox scale
    (linear ``f / (200/3)`` below 1 kHz, logarithmic above, step ``ln(6.4)/27``), as librosa."""
    f = np.asarray(f, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_sp = 200.0 / 3
    min_log_hz, logstep = 1000.0, math.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-300) / min_log_hz) / logstep, f / f_sp)


def mel_to_hz(m: np.ndarray | float, htk: bool = False) -> np.ndarray:
    """Inverse of :func:`hz_to_mel`."""
    m = np.asarray(m, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp = 200.0 / 3
    min_log_hz, logstep = 1000.0, math.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


@functools.lru_cache(maxsize=32)
def mel_filterbank(sr: int, n_fft: int, n_mels: int, fmin: float = 0.0, fmax: float | None = None,
                   htk: bool = False, norm: str | None = "slaney") -> np.ndarray:
    """Triangular mel filters, ``(n_mels, 1 + n_fft // 2)`` float32 -- ``librosa.filters.mel``'s.

    ``n_mels + 2`` points equally spaced on the mel scale between ``fmin`` and ``fmax`` (Hz,
    default ``sr / 2``) are the corners of the triangles, evaluated at the FFT bin frequencies
    ``k * sr / n_fft``; ``norm="slaney"`` scales filter ``i`` by ``2 / (f[i+2] - f[i])`` (equal
    area), ``None`` leaves peaks at 1.
    """
    fmax = sr / 2.0 if fmax is None else fmax
    fft_freqs = np.linspace(0, sr / 2.0, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin, htk), hz_to_mel(fmax, htk), n_mels + 2), htk)
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    if norm == "slaney":
        weights *= (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]
    elif norm is not None:  # pragma: no cover - guarded by the config Literal
        raise ValueError(f"mel norm must be 'slaney' or None, got {norm!r}")
    if np.any(weights.max(axis=1) == 0):
        logger.warning("mel filterbank (sr=%d, n_fft=%d, n_mels=%d): some filters are empty; "
                       "use fewer mels or a larger n_fft", sr, n_fft, n_mels)
    return weights.astype(np.float32)


@functools.lru_cache(maxsize=8)
def dct_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Orthonormal DCT-II, ``(n_out, n_in)``: ``C[k, n] = s_k cos(pi k (2n + 1) / (2 n_in))`` with
    ``s_0 = sqrt(1/n_in)``, ``s_k = sqrt(2/n_in)`` (``scipy.fft.dct(type=2, norm="ortho")``)."""
    n = np.arange(n_in)
    k = np.arange(n_out)[:, None]
    c = np.cos(np.pi * k * (2 * n + 1) / (2.0 * n_in)) * math.sqrt(2.0 / n_in)
    c[0] /= math.sqrt(2.0)
    return c



# ----------------------------------------------------------------------------- torch STFT frontends

# torch is imported on first use (building a frontend from its config stays torch-free: what
# speechkit-compute-feats --merge-only needs is the config, name, dim and frame geometry); the
# window, mel and DCT tensors are made on the first computation
_WINDOWS = {"hann": "hann_window", "hamming": "hamming_window", "blackman": "blackman_window", "boxcar": None}
WindowName = Literal["hann", "hamming", "blackman", "boxcar"]


@dataclass
class StftConfig(FrontendConfig):
    """STFT parameters shared by mfcc/logmel/spectrogram (names and meaning as ``librosa.stft``)."""

    #: FFT size in samples (400 = 25 ms at 16 kHz).
    n_fft: int = 400
    #: hop between frames in samples (160 = 10 ms at 16 kHz).
    hop_length: int = 160
    #: analysis window length in samples, <= n_fft (zero-padded to n_fft, centred); null = n_fft.
    win_length: Optional[int] = None
    #: window function (periodic, as scipy.signal.get_window(..., fftbins=True)).
    window: WindowName = "hann"
    #: centre frames on t * hop_length by padding n_fft // 2 samples each side.
    center: bool = True
    #: how to pad when center is true: zeros (librosa >= 0.10 default) or reflection.
    pad_mode: Literal["constant", "reflect"] = "constant"

    def check(self, where: str) -> None:
        super().check(where)
        _require(self.n_fft > 0, where, "n_fft", f"must be positive, got {self.n_fft}")
        _require(self.hop_length > 0, where, "hop_length", f"must be positive, got {self.hop_length}")
        if self.win_length is not None:
            _require(0 < self.win_length <= self.n_fft, where, "win_length",
                     f"must be in 1..n_fft ({self.n_fft}), got {self.win_length}")

    @property
    def window_length(self) -> int:
        return self.n_fft if self.win_length is None else self.win_length


class StftFrontend(Frontend):
    """Base for the torch frontends: batched, centred power/magnitude STFT."""

    Config = StftConfig
    config: StftConfig

    @functools.cached_property
    def _window(self) -> "torch.Tensor":
        import torch

        c = self.config
        if _WINDOWS[c.window] is None:  # boxcar
            return torch.ones(c.window_length, dtype=torch.float32)
        return getattr(torch, _WINDOWS[c.window])(c.window_length, periodic=True, dtype=torch.float32)

    @property
    def frame_shift(self) -> float:
        return self.config.hop_length / self.config.sample_rate

    @property
    def frame_length(self) -> float:
        return self.config.window_length / self.config.sample_rate

    def num_frames(self, num_samples: int) -> int:
        c = self.config
        n = num_samples + (2 * (c.n_fft // 2) if c.center else 0)
        return 0 if n < c.n_fft else 1 + (n - c.n_fft) // c.hop_length

    def stft_params(self) -> dict:
        """``n_fft, hop_length, win_length, window, center`` -- what an inverse STFT / Griffin-Lim needs."""
        c = self.config
        return {"n_fft": c.n_fft, "hop_length": c.hop_length, "win_length": c.window_length,
                "window": c.window, "center": c.center}

    def _stft(self, batch: list[np.ndarray]) -> tuple[torch.Tensor, list[int]]:
        """Complex STFT of a zero-padded batch, ``(B, 1 + n_fft // 2, T_max)``, and frames per item."""
        import torch
        import torch.nn.functional as F

        c = self.config
        lengths = [self.num_frames(len(x)) for x in batch]
        for x, n in zip(batch, lengths):
            if n == 0:
                raise ValueError(f"{len(x)} samples give no frames (shorter than n_fft={c.n_fft}, center=false)")
        xs = [torch.from_numpy(x) for x in batch]
        if c.center:
            p = c.n_fft // 2
            if c.pad_mode == "reflect":
                short = [len(x) for x in xs if len(x) <= p]
                if short:
                    raise ValueError(f"{short[0]} samples is too short for reflect padding of {p} samples")
                xs = [F.pad(x[None, None], (p, p), mode="reflect")[0, 0] for x in xs]
            else:
                xs = [F.pad(x, (p, p)) for x in xs]
        wav = xs[0][None] if len(xs) == 1 else torch.nn.utils.rnn.pad_sequence(xs, batch_first=True)
        spec = torch.stft(wav, c.n_fft, c.hop_length, c.window_length, self._window, center=False,
                          return_complex=True)
        return spec[:, :, : max(lengths)], lengths

    @staticmethod
    def _magnitude(spec: torch.Tensor, power: float) -> torch.Tensor:
        """``|X|^power`` of a complex tensor (power 2 without the square root)."""
        if power == 2.0:
            return spec.real.square() + spec.imag.square()
        mag = spec.abs()
        return mag if power == 1.0 else mag.pow_(power)

    def features(self, spec: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """Features ``(T, dim)`` of one utterance's complex STFT ``(1 + n_fft // 2, T)``."""
        raise NotImplementedError

    def compute(self, samples: np.ndarray) -> np.ndarray:
        spec, _ = self._stft([samples])
        return self.features(spec[0]).numpy()

    # compute_batch: the base class's per-utterance loop. A batched STFT over zero-padded signals
    # (then per-utterance slices) gives the same numbers but measured 10-100 % slower on one CPU
    # core (hindi_noa, 6.6 s utterances, 8 per batch: MFCC 1.14 vs 0.90 CPU-s per hour of audio).


class _MelMixin:
    """Holds a mel filterbank as a sparse CSR matrix (about 1.5 % of its entries are non-zero,
    so the sparse product costs a fraction of the dense one; the sums are the same)."""

    def _init_mel(self, c) -> None:
        self._mel_csr: torch.Tensor | None = None

    @functools.cached_property
    def _mel_dense(self) -> "torch.Tensor":
        import torch

        c = self.config
        return torch.from_numpy(mel_filterbank(c.sample_rate, c.n_fft, c.n_mels, c.fmin, c.fmax, c.htk, c.mel_norm))

    def _mel(self, power_spec: torch.Tensor) -> torch.Tensor:
        """``(n_mels, F) @ (F, T)`` -> ``(n_mels, T)``."""
        if self._mel_csr is None:
            with warnings.catch_warnings():  # "sparse CSR support is in beta"
                warnings.simplefilter("ignore")
                self._mel_csr = self._mel_dense.to_sparse_csr()
        return self._mel_csr @ power_spec.contiguous()

    def __getstate__(self) -> dict:  # sparse tensors are rebuilt after unpickling
        state = dict(self.__dict__)
        state["_mel_csr"] = None
        return state


@dataclass
class MfccConfig(StftConfig):
    """``type: mfcc`` -- librosa MFCC + librosa deltas (see :class:`MfccFrontend`)."""

    type_name: ClassVar[str] = "mfcc"
    #: number of cepstral coefficients kept (c0 included).
    n_mfcc: int = 13
    #: mel bands before the DCT (librosa.feature.mfcc's default 128).
    n_mels: int = 128
    #: lowest / highest mel band edge in Hz (null fmax = sample_rate / 2).
    fmin: float = 0.0
    fmax: Optional[float] = None
    #: HTK mel scale instead of Slaney's.
    htk: bool = False
    #: mel filter normalisation: 'slaney' (equal area) or null (peak 1).
    mel_norm: Optional[Literal["slaney"]] = "slaney"
    #: exponent of the magnitude spectrum (2 = power).
    power: float = 2.0
    #: power_to_db floor (amin) and dynamic range (top_db, dB below the utterance maximum; null = none).
    amin: float = 1e-10
    top_db: Optional[float] = 80.0
    #: cepstral liftering coefficient (librosa's `lifter`; 0 = none).
    lifter: float = 0.0
    #: append delta (1) or delta + delta-delta (2) features, librosa.feature.delta style; 0 = none.
    delta_order: int = 2
    #: delta window in frames (odd, >= 3).
    delta_width: int = 9

    def check(self, where: str) -> None:
        super().check(where)
        nyq = self.sample_rate / 2
        _require(self.n_mels > 0, where, "n_mels", f"must be positive, got {self.n_mels}")
        _require(0 < self.n_mfcc <= self.n_mels, where, "n_mfcc", f"must be in 1..n_mels ({self.n_mels}), got {self.n_mfcc}")
        _require(0 <= self.fmin < (self.fmax or nyq), where, "fmin", f"must be in [0, fmax), got {self.fmin}")
        if self.fmax is not None:
            _require(0 < self.fmax <= nyq, where, "fmax", f"must be in (0, sample_rate/2 = {nyq:g}] Hz, got {self.fmax}")
        _require(self.power > 0, where, "power", f"must be positive, got {self.power}")
        _require(self.amin > 0, where, "amin", f"must be positive, got {self.amin}")
        if self.top_db is not None:
            _require(self.top_db >= 0, where, "top_db", f"must be >= 0 or null, got {self.top_db}")
        _require(self.lifter >= 0, where, "lifter", f"must be >= 0, got {self.lifter}")
        _require(self.delta_order in (0, 1, 2), where, "delta_order", f"must be 0, 1 or 2, got {self.delta_order}")
        _require(self.delta_width >= 3 and self.delta_width % 2 == 1, where, "delta_width",
                 f"must be an odd integer >= 3, got {self.delta_width}")


@register_frontend
class MfccFrontend(_MelMixin, StftFrontend):
    """MFCC (+ deltas) with librosa's numerics, computed in torch.

    With the defaults in ``conf/mfcc.yaml`` the output is, to float32 rounding,
    ``np.concatenate([m, librosa.feature.delta(m, width=9, order=1), librosa.feature.delta(m,
    width=9, order=2)]).T`` where::

        m = librosa.feature.mfcc(y=y, sr=16000, n_mfcc=13, n_fft=400, hop_length=160,
                                 win_length=None, window="hann", center=True, pad_mode="constant",
                                 power=2.0, n_mels=128, fmin=0.0, fmax=None, htk=False,
                                 mel_norm="slaney", dct_type=2, norm="ortho", lifter=0)

    i.e. power spectrogram -> Slaney mel filterbank -> ``power_to_db(S, ref=1.0, amin=1e-10,
    top_db=80.0)`` (``10 log10(max(S, amin))``, then floored at the utterance's maximum minus
    ``top_db``) -> orthonormal DCT-II, first ``n_mfcc`` -> Savitzky-Golay deltas
    (:func:`~speechkit.features.delta.savgol_delta`). This is the feature of Tjandra et al.
    (ZeroSpeech 2019/2020, who used librosa): 13 MFCC + delta + delta-delta, 25 ms / 10 ms.
    Tested against librosa to ``|ours - librosa| <= 2e-3 + 1e-4 |librosa|``.

    Unlike librosa, utterances shorter than ``delta_width`` frames are accepted (see
    :func:`~speechkit.features.delta.savgol_delta`). Output: ``(1 + N // hop_length,
    n_mfcc * (1 + delta_order))`` float32.
    """

    name = "mfcc"
    Config = MfccConfig
    config: MfccConfig

    def __init__(self, config: MfccConfig):
        super().__init__(config)
        c = config
        self._init_mel(c)

    @functools.cached_property
    def _dct(self) -> "torch.Tensor":
        """``(n_mfcc, n_mels)``, liftered."""
        import torch

        c = self.config
        dct = dct_matrix(c.n_mels, c.n_mfcc)
        if c.lifter > 0:
            dct = dct * (1 + (c.lifter / 2) * np.sin(np.pi * np.arange(1, 1 + c.n_mfcc) / c.lifter))[:, None]
        return torch.from_numpy(dct.astype(np.float32))

    @property
    def dim(self) -> int:
        return self.config.n_mfcc * (1 + self.config.delta_order)

    def features(self, spec: torch.Tensor) -> torch.Tensor:
        c = self.config
        db = self._mel(self._magnitude(spec, c.power)).clamp_(min=c.amin).log10_().mul_(10.0)  # (n_mels, T)
        if c.top_db is not None:  # power_to_db's floor, over this utterance
            db.clamp_(min=float(db.max()) - c.top_db)
        m = (self._dct @ db).T  # (T, n_mfcc)
        if not c.delta_order:
            return m.contiguous()
        from speechkit.features.delta import append_savgol_deltas

        return append_savgol_deltas(m, c.delta_width, c.delta_order)


@dataclass
class LogMelConfig(StftConfig):
    """``type: logmel`` -- natural-log mel spectrogram (see :class:`LogMelFrontend`)."""

    type_name: ClassVar[str] = "logmel"
    #: number of mel bands.
    n_mels: int = 80
    fmin: float = 0.0
    fmax: Optional[float] = None
    htk: bool = False
    mel_norm: Optional[Literal["slaney"]] = "slaney"
    #: exponent of the magnitude spectrum (2 = power mel spectrogram, 1 = magnitude).
    power: float = 2.0
    #: log(max(mel, floor)).
    floor: float = 1e-10

    def check(self, where: str) -> None:
        super().check(where)
        nyq = self.sample_rate / 2
        _require(self.n_mels > 0, where, "n_mels", f"must be positive, got {self.n_mels}")
        _require(0 <= self.fmin < (self.fmax or nyq), where, "fmin", f"must be in [0, fmax), got {self.fmin}")
        if self.fmax is not None:
            _require(0 < self.fmax <= nyq, where, "fmax", f"must be in (0, sample_rate/2 = {nyq:g}] Hz, got {self.fmax}")
        _require(self.power > 0, where, "power", f"must be positive, got {self.power}")
        _require(self.floor > 0, where, "floor", f"must be positive, got {self.floor}")


@register_frontend
class LogMelFrontend(_MelMixin, StftFrontend):
    """Log mel spectrogram: ``log(max(librosa.feature.melspectrogram(...), floor))``.

    Defaults (``conf/logmel.yaml``): 80 Slaney-normalised mel bands 0-8 kHz over a 400-point
    (25 ms) Hann-windowed power STFT every 160 samples (10 ms), centred with zero padding,
    natural log floored at 1e-10 -- the 80-dim log-mel of Joshi et al. (2021, section 5).
    Output ``(1 + N // hop_length, n_mels)`` float32.
    """

    name = "logmel"
    Config = LogMelConfig
    config: LogMelConfig

    def __init__(self, config: LogMelConfig):
        super().__init__(config)
        self._init_mel(config)

    @property
    def dim(self) -> int:
        return self.config.n_mels

    def features(self, spec: torch.Tensor) -> torch.Tensor:
        mel = self._mel(self._magnitude(spec, self.config.power))
        return mel.clamp_(min=self.config.floor).log_().T.contiguous()


@dataclass
class SpectrogramConfig(StftConfig):
    """``type: spectrogram`` -- linear magnitude STFT (see :class:`SpectrogramFrontend`)."""

    type_name: ClassVar[str] = "spectrogram"
    n_fft: int = 512
    hop_length: int = 160
    win_length: Optional[int] = 400
    #: output log(max(|X|, log_floor)) instead of |X|.
    log: bool = False
    log_floor: float = 1e-5

    def check(self, where: str) -> None:
        super().check(where)
        _require(self.log_floor > 0, where, "log_floor", f"must be positive, got {self.log_floor}")


@register_frontend
class SpectrogramFrontend(StftFrontend):
    """Linear magnitude spectrogram ``|STFT|`` -- the codebook inverter's target.

    Defaults (``conf/spectrogram.yaml``): 16 kHz, ``n_fft=512`` (257 bins, 31.25 Hz apart),
    400-sample (25 ms) periodic Hann window, hop 160 (10 ms, so frames align with the MFCC
    frames), centred with zero padding; ``np.abs(librosa.stft(y, n_fft=512, hop_length=160,
    win_length=400, window="hann", center=True, pad_mode="constant")).T``. With ``log: true``
    the output is ``log(max(|X|, log_floor))``. :meth:`stft_params` gives what Griffin-Lim needs
    to invert it. Output ``(1 + N // hop_length, 1 + n_fft // 2)`` float32.
    """

    name = "spectrogram"
    Config = SpectrogramConfig
    config: SpectrogramConfig

    @property
    def dim(self) -> int:
        return 1 + self.config.n_fft // 2

    def features(self, spec: torch.Tensor) -> torch.Tensor:
        mag = spec.abs()
        if self.config.log:
            mag = mag.clamp_(min=self.config.log_floor).log_()
        return mag.T.contiguous()
