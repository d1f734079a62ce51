"""The Kaldi-compatible frontends, through ``kaldi_native_fbank``: ``fbank``
(``compute-fbank-feats``) and ``kaldi_mfcc`` (``compute-mfcc-feats`` + ``add-deltas``).

Their configs are Kaldi's options under Kaldi's names: :class:`KaldiFrameConfig` (framing,
``FrameExtractionOptions``), :class:`KaldiMelConfig` (the mel bank and energy options both
share), then each type's own.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import kaldi_native_fbank as knf
import numpy as np

from speechkit.features.frontends.base import Frontend, FrontendConfig, _require, register_frontend

# torch and features.delta (torch) are imported where used: a frontend is built from its config without torch.

logger = logging.getLogger(__name__)


@dataclass
class KaldiFrameConfig(FrontendConfig):
    """Kaldi's ``FrameExtractionOptions`` (same names, ``--frame-length`` in ms etc.)."""

    #: window length and shift in milliseconds.
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    #: Gaussian dither amount (Kaldi's default is 1.0; 0 here so that outputs are reproducible).
    dither: float = 0.0
    preemph_coeff: float = 0.97
    remove_dc_offset: bool = True
    window_type: Literal["povey", "hamming", "hanning", "rectangular", "blackman", "sine"] = "povey"
    round_to_power_of_two: bool = True
    blackman_coeff: float = 0.42
    #: true: only frames that fit entirely in the signal (1 + (N - len) // shift of them).
    snip_edges: bool = True
    #: mel bank edges in Hz; high_freq <= 0 means Nyquist + high_freq.
    low_freq: float = 20.0
    high_freq: float = 0.0
    #: multiply [-1, 1] samples by this before analysis (32768: the int16 scale Kaldi reads WAV in).
    scale: float = 32768.0

    def check(self, where: str) -> None:
        super().check(where)
        _require(self.frame_length_ms > 0, where, "frame_length_ms", f"must be positive, got {self.frame_length_ms}")
        _require(self.frame_shift_ms > 0, where, "frame_shift_ms", f"must be positive, got {self.frame_shift_ms}")
        _require(self.dither >= 0, where, "dither", f"must be >= 0, got {self.dither}")
        nyq = self.sample_rate / 2
        high = self.high_freq if self.high_freq > 0 else nyq + self.high_freq
        _require(0 <= self.low_freq < high <= nyq, where, "high_freq" if self.high_freq else "low_freq",
                 f"must satisfy 0 <= low_freq < high_freq <= {nyq:g} Hz (low {self.low_freq}, high {high})")
        _require(self.scale > 0, where, "scale", f"must be positive, got {self.scale}")
        if self.dither > 0:
            logger.warning("dither=%g: features are random and not reproducible run to run", self.dither)

    def apply(self, opts: Any) -> None:
        """Set these options on a ``kaldi_native_fbank`` options object (``FbankOptions``, ``MfccOptions``)."""
        fo = opts.frame_opts
        fo.samp_freq = float(self.sample_rate)
        fo.frame_length_ms = self.frame_length_ms
        fo.frame_shift_ms = self.frame_shift_ms
        fo.dither = self.dither
        fo.preemph_coeff = self.preemph_coeff
        fo.remove_dc_offset = self.remove_dc_offset
        fo.window_type = self.window_type
        fo.round_to_power_of_two = self.round_to_power_of_two
        fo.blackman_coeff = self.blackman_coeff
        fo.snip_edges = self.snip_edges
        mo = opts.mel_opts
        mo.low_freq = self.low_freq
        mo.high_freq = self.high_freq
        mo.is_librosa = False  # Kaldi's own HTK-style mel banks (no Slaney normalisation)
        mo.htk_mode = False


@dataclass
class KaldiMelConfig(KaldiFrameConfig):
    """The mel-bank and energy options ``compute-fbank-feats`` and ``compute-mfcc-feats`` share
    (Kaldi's ``--num-mel-bins``, ``--use-energy``, ``--energy-floor``, ``--raw-energy``,
    ``--htk-compat``); each type sets its own defaults."""

    num_mel_bins: int = 80
    #: log energy: fbank appends it as an extra first column, MFCC puts it in place of c0.
    use_energy: bool = False
    energy_floor: float = 0.0
    raw_energy: bool = True
    htk_compat: bool = False

    def check(self, where: str) -> None:
        super().check(where)
        _require(self.num_mel_bins > 0, where, "num_mel_bins", f"must be positive, got {self.num_mel_bins}")

    def apply(self, opts: Any) -> None:
        super().apply(opts)
        opts.mel_opts.num_bins = self.num_mel_bins
        opts.use_energy = self.use_energy
        opts.energy_floor = self.energy_floor
        opts.raw_energy = self.raw_energy
        opts.htk_compat = self.htk_compat


class KaldiFrontend(Frontend):
    """Base for the kaldi-native-fbank frontends: ``options_class`` (``FbankOptions``, ``MfccOptions``)
    filled by the config's ``apply``, the samples run through the online computer ``computer``."""

    config: KaldiFrameConfig
    #: names in ``kaldi_native_fbank`` of the options class and the online computer.
    options_class: ClassVar[str] = "?"
    computer: ClassVar[str] = "?"

    @property
    def frame_shift(self) -> float:
        return self.config.frame_shift_ms / 1000.0

    @property
    def frame_length(self) -> float:
        return self.config.frame_length_ms / 1000.0

    def num_frames(self, num_samples: int) -> int:
        c = self.config
        shift = int(c.sample_rate * c.frame_shift_ms / 1000.0)
        length = int(c.sample_rate * c.frame_length_ms / 1000.0)
        if c.snip_edges:
            return 0 if num_samples < length else 1 + (num_samples - length) // shift
        return (num_samples + shift // 2) // shift

    def __init__(self, config: KaldiFrameConfig):
        super().__init__(config)
        self._opts = self._make_options()

    def _make_options(self) -> Any:
        opts = getattr(knf, self.options_class)()
        self.config.apply(opts)
        return opts

    def __getstate__(self) -> dict:  # kaldi-native-fbank option objects do not pickle; rebuilt on use
        state = dict(self.__dict__)
        state.pop("_opts", None)
        return state

    def _run(self, computer: str, samples: np.ndarray) -> np.ndarray:
        if "_opts" not in self.__dict__:
            self._opts = self._make_options()
        comp = getattr(knf, computer)(self._opts)
        # a list converts faster than an ndarray through pybind11's Sequence[float] (measured ~15 %)
        comp.accept_waveform(float(self.config.sample_rate), (samples * np.float32(self.config.scale)).tolist())
        comp.input_finished()
        n = comp.num_frames_ready
        if n == 0:
            c = self.config
            raise ValueError(f"{len(samples)} samples ({len(samples) / c.sample_rate:.3f} s) give no frames "
                             f"(shorter than one {c.frame_length_ms:g} ms frame"
                             f"{'' if c.snip_edges else f' / half a {c.frame_shift_ms:g} ms shift'}, "
                             f"snip_edges={str(c.snip_edges).lower()})")
        return np.stack([comp.get_frame(i) for i in range(n)]).astype(np.float32, copy=False)


@dataclass
class FbankConfig(KaldiMelConfig):
    """``type: fbank`` -- Kaldi ``compute-fbank-feats`` options."""

    type_name: ClassVar[str] = "fbank"
    use_log_fbank: bool = True
    use_power: bool = True

    def apply(self, opts: Any) -> None:
        super().apply(opts)
        opts.use_log_fbank = self.use_log_fbank
        opts.use_power = self.use_power


@register_frontend
class FbankFrontend(KaldiFrontend):
    """Kaldi filterbank features (``compute-fbank-feats``) through ``kaldi_native_fbank``.

    Kaldi's defaults except ``dither`` (0 here, for reproducible output) and 80 bins: DC removal,
    pre-emphasis 0.97, Povey window of 25 ms every 10 ms, FFT padded to a power of two, power
    spectrum, HTK-mel triangular bins from 20 Hz to Nyquist, natural log. Samples are scaled by
    ``scale`` (32768) first so that values match Kaldi run on 16-bit WAV files.
    Output ``(num_frames(N), num_mel_bins [+1 with use_energy])`` float32.
    """

    name = "fbank"
    Config = FbankConfig
    config: FbankConfig
    options_class = "FbankOptions"
    computer = "OnlineFbank"

    @property
    def dim(self) -> int:
        return self.config.num_mel_bins + int(self.config.use_energy)

    def compute(self, samples: np.ndarray) -> np.ndarray:
        return self._run(self.computer, samples)


@dataclass
class KaldiMfccConfig(KaldiMelConfig):
    """``type: kaldi_mfcc`` -- Kaldi ``compute-mfcc-feats`` (+ ``add-deltas``) options."""

    type_name: ClassVar[str] = "kaldi_mfcc"
    num_mel_bins: int = 23
    num_ceps: int = 13
    #: replace c0 with log energy (Kaldi's default).
    use_energy: bool = True
    cepstral_lifter: float = 22.0
    #: Kaldi add-deltas: orders appended (0 = none, 2 = +delta +delta-delta), regression window.
    delta_order: int = 0
    delta_window: int = 2

    def check(self, where: str) -> None:
        super().check(where)
        _require(0 < self.num_ceps <= self.num_mel_bins, where, "num_ceps",
                 f"must be in 1..num_mel_bins ({self.num_mel_bins}), got {self.num_ceps}")
        _require(self.delta_order >= 0, where, "delta_order", f"must be >= 0, got {self.delta_order}")
        _require(self.delta_window >= 1, where, "delta_window", f"must be >= 1, got {self.delta_window}")

    def apply(self, opts: Any) -> None:
        super().apply(opts)
        opts.num_ceps = self.num_ceps
        opts.cepstral_lifter = self.cepstral_lifter

    def to_dict(self) -> dict:
        """As :meth:`FrontendConfig.to_dict`, keys in ``compute-mfcc-feats``' order (``num_ceps`` after
        ``num_mel_bins``, ``cepstral_lifter`` before ``htk_compat``), as ``feats.yaml`` has always had them."""
        d = super().to_dict()
        keys = [k for k in d if k not in ("num_ceps", "cepstral_lifter")]
        keys.insert(keys.index("num_mel_bins") + 1, "num_ceps")
        keys.insert(keys.index("htk_compat"), "cepstral_lifter")
        return {k: d[k] for k in keys}


@register_frontend
class KaldiMfccFrontend(KaldiFrontend):
    """Kaldi MFCC (``compute-mfcc-feats``, 13 ceps from 23 bins, c0 = log energy, lifter 22)
    through ``kaldi_native_fbank``, optionally with Kaldi ``add-deltas``
    (:func:`~speechkit.features.delta.kaldi_delta`). Output ``(frames, num_ceps * (1 + delta_order))``."""

    name = "kaldi_mfcc"
    Config = KaldiMfccConfig
    config: KaldiMfccConfig
    options_class = "MfccOptions"
    computer = "OnlineMfcc"

    @property
    def dim(self) -> int:
        return self.config.num_ceps * (1 + self.config.delta_order)

    def compute(self, samples: np.ndarray) -> np.ndarray:
        feats = self._run(self.computer, samples)
        if self.config.delta_order:
            import torch

            from speechkit.features.delta import kaldi_delta

            feats = kaldi_delta(torch.from_numpy(feats), self.config.delta_order, self.config.delta_window).numpy()
        return feats
