"""Writing synthesized audio: the peak limit, the 16-bit wav and its spectrogram PNG.

Every waveform a speechkit synthesizer writes (speechkit-tts-synthesize, speechkit-vocode,
speechkit-resynthesize, the continual evaluation) goes through :func:`write_synthesized`:

1. :func:`limit_peak`: scaled down to a peak of :data:`PEAK` (0.99) only if it would exceed it
   (never scaled up, never clipped), so that the 16-bit PCM cannot clip;
2. :func:`speechkit.data.audio.write_wav`: 16-bit PCM, atomically;
3. with a title, :func:`plot_spectrogram` beside it (``<utt>.png``: 25 ms Hann windows, 5 ms hop,
   dB) -- none for a waveform shorter than one 25 ms window; :func:`warn_unplotted` then names
   those utterances in one warning.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Collection, Iterable

import numpy as np

from speechkit.data.audio import write_wav
from speechkit.scoring.plots import plot_spectrograms

# scipy.signal is imported where used (heavy): only a spectrogram PNG needs it.

__all__ = ["PEAK", "limit_peak", "plot_spectrogram", "write_synthesized", "warn_unplotted"]

log = logging.getLogger(__name__)

#: The largest absolute sample value a written synthesis has (full scale = 1.0).
PEAK = 0.99


def limit_peak(wav: np.ndarray, peak: float = PEAK) -> np.ndarray:
    """``wav`` scaled by ``peak / max|wav|`` if its peak exceeds ``peak``, else ``wav`` itself.

    Args:
        wav: ``(samples,)`` float waveform (full scale 1.0); its dtype is kept.
        peak: the largest absolute value allowed.

    Returns:
        The waveform, at most ``peak`` in absolute value (up to rounding); an empty one as it is.
    """
    top = float(np.abs(wav).max()) if wav.size else 0.0
    if top > peak:
        wav = wav * (peak / top)
    return wav


def plot_spectrogram(path: str | os.PathLike, wav: np.ndarray, sr: int, title: str) -> bool:
    """Save the log-magnitude spectrogram (25 ms Hann windows, 5 ms hop, dB) of ``wav`` as a PNG, atomically.

    Args:
        path: the PNG to write.
        wav: ``(samples,)`` waveform at ``sr`` Hz.
        sr: sample rate in Hz.
        title: the plot's title.

    Returns:
        ``False`` (nothing written) for a ``wav`` shorter than one 25 ms window, else ``True``.
    """
    from scipy.signal import stft

    nper, hop = int(0.025 * sr), int(0.005 * sr)
    if len(wav) < nper:
        return False
    _, _, z = stft(wav, fs=sr, window="hann", nperseg=nper, noverlap=nper - hop)
    plot_spectrograms(path, [(title, np.abs(z).T)], sr, hop)
    return True


def write_synthesized(path: str | os.PathLike, wav: np.ndarray, sr: int, title: str | None = None, *,
                      limit: bool = True) -> tuple[float, bool]:
    """Write one synthesized waveform: peak-limited, as a 16-bit PCM wav, with its spectrogram.

    Args:
        path: the wav to write (atomically; parent directories are created).
        wav: ``(samples,)`` float waveform at ``sr`` Hz (full scale 1.0), not empty.
        sr: sample rate in Hz.
        title: draw the spectrogram (:func:`plot_spectrogram`) to ``path`` with suffix ``.png``
            under this title; ``None``: no PNG.
        limit: apply :func:`limit_peak` first (``False`` for a waveform the caller limited
            already, e.g. to use the same samples elsewhere).

    Returns:
        ``(seconds, plotted)``: the duration in seconds, and whether the PNG was drawn (``False``
        without a title or for a waveform shorter than one 25 ms window).

    Raises:
        ValueError: empty or non-finite samples, or a non-positive sample rate
            (:func:`speechkit.data.audio.write_wav`).
    """
    if limit:
        wav = limit_peak(wav)
    path = Path(path)
    write_wav(path, wav, sr)
    plotted = plot_spectrogram(path.with_suffix(".png"), wav, sr, title) if title is not None else False
    return len(wav) / sr, plotted


def warn_unplotted(results: Iterable[tuple[str, str, float, bool]], wanted: Collection[str],
                   logger: logging.Logger = log) -> None:
    """Warn (on ``logger``) naming the utterances of ``wanted`` whose spectrogram was not drawn (too short).

    Args:
        results: ``(utt, path, seconds, plotted)`` tuples of the vocoders
            (:func:`speechkit.decode.vocode.world_vocode`, :func:`~speechkit.decode.vocode.griffin_lim_vocode`).
        wanted: the utterances whose PNG was asked for.
        logger: where the warning goes (a CLI passes its own).
    """
    missing = [u for u, _, _, plotted in results if u in wanted and not plotted]
    if missing:
        logger.warning("no spectrogram PNG for %d utterance(s) shorter than the 25 ms analysis window: %s%s",
                       len(missing), ", ".join(missing[:10]), " ..." if len(missing) > 10 else "")
