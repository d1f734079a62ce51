"""Griffin-Lim phase reconstruction in torch (batched, on any device).

The fast Griffin-Lim algorithm of Perraudin, Balazs & Sondergaard, "A fast Griffin-Lim algorithm",
WASPAA 2013 (Algorithm 2), exactly as ``librosa.griffinlim`` implements it (librosa >= 0.7):

    X_0 = |S| * exp(i phi_0)
    for n = 1..n_iter:
        T_n = STFT(ISTFT(X_{n-1}))                          (projection onto consistent spectrograms)
        C_n = T_n - momentum / (1 + momentum) * T_{n-1}     (acceleration; T_0 = 0)
        X_n = |S| * C_n / (|C_n| + tiny)                    (projection onto the target magnitude)
    y = ISTFT(X_{n_iter})

``C_n`` is proportional to Perraudin's ``T_n + alpha (T_n - T_{n-1})`` with ``alpha = momentum``, and the
magnitude projection ignores the scale, so this is the paper's iteration; ``momentum = 0`` gives the
original Griffin & Lim (1984) algorithm. STFT conventions follow librosa: periodic window of
``win_length`` centred in ``n_fft``, ``center=True`` pads ``n_fft // 2`` on both sides (zeros by default,
``pad_mode="constant"`` as in librosa >= 0.10), no normalisation.

With the toolkit's spectrogram front end: ``griffin_lim(spec.T, **frontend.stft_params())`` (a Kaldi
feature matrix is ``(T, F)``; this module, like librosa, takes ``(F, T)``).

:func:`mel_to_waveform` inverts a ``logmel`` front end's features (mel filterbank, then
Griffin-Lim): the vocoder of the Tacotron 2 recipes.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Mapping

import numpy as np
import torch

from speechkit.features.frontends import LogMelConfig, build_frontend

# librosa is imported where used (heavy): only mel_to_waveform needs it.

logger = logging.getLogger(__name__)

_WINDOWS = {
    "hann": torch.hann_window,
    "hamming": torch.hamming_window,
    "blackman": torch.blackman_window,
    "boxcar": lambda n, **kw: torch.ones(n, **{k: v for k, v in kw.items() if k in ("dtype", "device")}),
}


def make_window(window: str | torch.Tensor, win_length: int, dtype: torch.dtype = torch.float32,
                device: torch.device | str | None = None) -> torch.Tensor:
    """A periodic analysis window (``scipy.signal.get_window(name, win_length, fftbins=True)``).

    Args:
        window: ``hann`` | ``hamming`` | ``blackman`` | ``boxcar``, or a ``(win_length,)`` tensor.

    Raises:
        ValueError: unknown name or wrong length.
    """
    if isinstance(window, torch.Tensor):
        if window.shape != (win_length,):
            raise ValueError(f"window tensor must have shape ({win_length},), got {tuple(window.shape)}")
        return window.to(dtype=dtype, device=device)
    if window not in _WINDOWS:
        raise ValueError(f"unknown window '{window}' (choose from {', '.join(sorted(_WINDOWS))})")
    return _WINDOWS[window](win_length, periodic=True, dtype=dtype, device=device)


def _stft_args(n_fft: int, hop_length: int | None, win_length: int | None) -> tuple[int, int]:
    if n_fft < 2:
        raise ValueError(f"n_fft must be >= 2, got {n_fft}")
    win_length = n_fft if win_length is None else win_length
    hop_length = win_length // 4 if hop_length is None else hop_length
    if not 1 <= win_length <= n_fft:
        raise ValueError(f"win_length must be in [1, n_fft={n_fft}], got {win_length}")
    if hop_length < 1:
        raise ValueError(f"hop_length must be >= 1, got {hop_length}")
    return hop_length, win_length


def stft(y: torch.Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: str | torch.Tensor = "hann", center: bool = True, pad_mode: str = "constant") -> torch.Tensor:
    """Complex STFT with librosa's conventions: ``y (L,)`` or ``(B, L)`` -> ``(F, T)`` / ``(B, F, T)``,
    ``F = n_fft // 2 + 1``, ``T = 1 + L // hop_length`` when ``center``."""
    hop_length, win_length = _stft_args(n_fft, hop_length, win_length)
    w = make_window(window, win_length, dtype=y.dtype, device=y.device)
    return torch.stft(y, n_fft, hop_length, win_length, w, center=center, pad_mode=pad_mode,
                      normalized=False, onesided=True, return_complex=True)


def istft(spec: torch.Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: str | torch.Tensor = "hann", center: bool = True, length: int | None = None) -> torch.Tensor:
    """Inverse STFT (weighted overlap-add, divided by the summed squared window, as ``librosa.istft``)."""
    hop_length, win_length = _stft_args(n_fft, hop_length, win_length)
    w = make_window(window, win_length, dtype=spec.real.dtype, device=spec.device)
    return torch.istft(spec, n_fft, hop_length, win_length, w, center=center, normalized=False,
                       onesided=True, length=length)


def spectral_convergence(reference: torch.Tensor, estimate: torch.Tensor) -> torch.Tensor:
    """``||S_ref - S_est||_F / ||S_ref||_F`` over magnitudes of the same shape (0 = identical).

    Raises:
        ValueError: shapes differ.
    """
    if reference.shape != estimate.shape:
        raise ValueError(f"spectral_convergence: shapes differ, {tuple(reference.shape)} vs {tuple(estimate.shape)}")
    return torch.linalg.vector_norm(reference - estimate) / torch.linalg.vector_norm(reference).clamp_min(1e-30)


def griffin_lim(mag: torch.Tensor | np.ndarray, n_fft: int, hop_length: int | None = None,
                win_length: int | None = None, window: str | torch.Tensor = "hann", n_iter: int = 60,
                momentum: float = 0.99, init: str | None | torch.Tensor = "random", seed: int | None = None,
                center: bool = True, pad_mode: str = "constant", length: int | None = None) -> torch.Tensor:
    """Waveform whose STFT magnitude approximates ``mag`` (fast Griffin-Lim; see the module docstring).

    Args:
        mag: linear magnitude ``(F, T)`` or ``(B, F, T)``, ``F = n_fft // 2 + 1``, non-negative.
            float64 input gives a float64 result (and complex128 arithmetic).
        n_fft: FFT size (samples).
        hop_length: frame shift in samples (default ``win_length // 4``).
        win_length: window length in samples (default ``n_fft``).
        window: window name (``hann`` ...) or a ``(win_length,)`` tensor.
        n_iter: iterations (>= 0).
        momentum: acceleration ``alpha`` (0.99 as in librosa; 0 = original Griffin-Lim).
        init: ``"random"`` (uniform phases, from ``seed``), ``None`` (zero phase, as librosa's ``init=None``),
            or a real tensor of initial phases in radians shaped like ``mag``.
        seed: seed of the random initial phases (a fixed seed gives a reproducible result).
        center, pad_mode: STFT framing, as ``librosa.stft`` (``pad_mode="constant"`` is librosa's default).
        length: length in samples of the output (default ``hop_length * (T - 1)`` when ``center``).

    Returns:
        Waveform ``(L,)`` or ``(B, L)``, same real dtype as ``mag``.

    Raises:
        ValueError: wrong shape (``F != n_fft // 2 + 1``), negative ``n_iter``/``momentum``, bad ``init``.
    """
    mag = torch.as_tensor(mag)
    if not mag.is_floating_point():
        mag = mag.float()
    if mag.dim() not in (2, 3) or mag.size(-2) != n_fft // 2 + 1:
        raise ValueError(f"griffin_lim: mag must be (F, T) or (B, F, T) with F = n_fft // 2 + 1 = {n_fft // 2 + 1}, "
                         f"got {tuple(mag.shape)}")
    if n_iter < 0:
        raise ValueError(f"griffin_lim: n_iter must be >= 0, got {n_iter}")
    if momentum < 0:
        raise ValueError(f"griffin_lim: momentum must be >= 0, got {momentum}")
    if momentum > 1:
        logger.warning("griffin_lim: momentum=%g > 1 can be unstable", momentum)
    hop_length, win_length = _stft_args(n_fft, hop_length, win_length)
    frames = mag.size(-1)

    if isinstance(init, torch.Tensor):
        if init.shape != mag.shape:
            raise ValueError(f"griffin_lim: init phases must have shape {tuple(mag.shape)}, got {tuple(init.shape)}")
        phase = init.to(dtype=mag.dtype, device=mag.device)
    elif init == "random":
        gen = torch.Generator(device="cpu")
        gen.manual_seed(seed if seed is not None else int(torch.randint(2**31 - 1, (1,))))
        phase = (2 * math.pi * torch.rand(mag.shape, generator=gen, dtype=torch.float64)).to(mag.dtype).to(mag.device)
    elif init is None:
        phase = torch.zeros_like(mag)
    else:
        raise ValueError(f"griffin_lim: init must be 'random', None or a phase tensor, got {init!r}")

    tiny = torch.finfo(mag.dtype).tiny
    coef = momentum / (1.0 + momentum)
    args = dict(n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window, center=center)
    angles = torch.polar(mag, phase)
    previous = None
    for _ in range(n_iter):
        rebuilt = stft(istft(angles, length=length, **args), pad_mode=pad_mode, **args)
        if rebuilt.size(-1) != frames:  # an explicit `length` can change the frame count by one
            rebuilt = torch.nn.functional.pad(rebuilt[..., :frames], (0, max(0, frames - rebuilt.size(-1))))
        update = rebuilt if previous is None else rebuilt - coef * previous
        angles = mag * update / (update.abs() + tiny)
        previous = rebuilt
    return istft(angles, length=length, **args)


def mel_to_waveform(log_mel: np.ndarray | torch.Tensor, frontend: Mapping[str, Any] | Any, n_iter: int = 60,
                    seed: int = 0) -> np.ndarray:
    """Waveform from a natural-log mel spectrogram by mel-filterbank inversion + Griffin-Lim.

    The mel energies ``exp(log_mel)`` are mapped back to a linear STFT magnitude with
    ``librosa.feature.inverse.mel_to_stft`` (non-negative least squares against the front end's
    own mel filterbank), whose phase is then estimated by the toolkit's fast Griffin-Lim
    (:func:`griffin_lim`, Perraudin et al. 2013, the same iteration
    as ``librosa.griffinlim``) with the front end's STFT parameters.

    Args:
        log_mel: ``(T, n_mels)`` natural-log mel energies (a ``logmel`` front end's features,
            e.g. :meth:`~speechkit.models.tacotron2.Tacotron2.denormalize` of a prediction).
        frontend: the ``logmel`` front-end config the features were computed with: a dict as in
            a data dir's ``feats.yaml`` / ``conf/logmel.yaml``, or a
            :class:`~speechkit.features.frontends.LogMelConfig`.
        n_iter: Griffin-Lim iterations.
        seed: seed of Griffin-Lim's random initial phases.

    Returns:
        float32 waveform ``(hop_length * (T - 1),)`` at ``frontend.sample_rate`` Hz, in [-1, 1]
        when the features came from such audio.

    Raises:
        ValueError: not a ``logmel`` front end, or ``log_mel`` of the wrong shape.
    """
    import librosa

    if isinstance(frontend, LogMelConfig):
        c = frontend
    else:
        conf = dict(frontend)
        if conf.get("type") != "logmel":
            raise ValueError(f"mel_to_waveform: needs a 'logmel' front-end config, got type {conf.get('type')!r} "
                             f"(Griffin-Lim inverts the STFT-based log-mel of conf/logmel.yaml)")
        c = build_frontend(conf, source="mel_to_waveform").config
    m = np.asarray(log_mel.detach().cpu() if isinstance(log_mel, torch.Tensor) else log_mel, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] != c.n_mels:
        raise ValueError(f"mel_to_waveform: log_mel must be (frames, {c.n_mels}), got {m.shape}")
    mel = np.exp(m).T  # (n_mels, T), |X|^power summed by the filters
    mag = librosa.feature.inverse.mel_to_stft(mel, sr=c.sample_rate, n_fft=c.n_fft, power=c.power, fmin=c.fmin,
                                              fmax=c.fmax, htk=c.htk, norm=c.mel_norm)
    wav = griffin_lim(torch.from_numpy(mag.astype(np.float32)), n_fft=c.n_fft, hop_length=c.hop_length,
                      win_length=c.window_length, window=c.window, n_iter=n_iter, seed=seed, center=c.center,
                      pad_mode=c.pad_mode)
    return wav.numpy().astype(np.float32)
