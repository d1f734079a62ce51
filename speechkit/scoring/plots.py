"""Plots of objective TTS scores: F0 histograms of several systems (SALAD paper, Figure 2)."""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from speechkit.utils.fileio import atomic_write

# matplotlib is imported where used (heavy): a plot pays for its import, importing this module does not.

__all__ = ["plot_f0_histograms", "plot_spectrograms"]


def plot_f0_histograms(tracks: Mapping[str, np.ndarray], out_png: str | os.PathLike, *, bins: int = 60,
                       range_hz: tuple[float, float] | None = None, density: bool = True,
                       title: str = "") -> None:
    """Overlaid F0 histograms of several systems over their voiced frames, as Pascual et al. 2018,
    Figure 2 (ground truth, big RNN, big SALAD).

    Args:
        tracks: ``system name -> (V,)`` F0 values in Hz of voiced frames, in legend order (e.g. the
            concatenation over a test set of :func:`speechkit.scoring.mcd.voiced_f0_hz`). Extra
            dimensions are flattened.
        out_png: written atomically.
        bins: number of bins, shared by all systems.
        range_hz: ``(low, high)`` of the bins; default: the 0.5-99.5 percentiles of all values.
        density: normalise each histogram to unit area (systems with different frame counts compare).
        title: figure title.

    Raises:
        ValueError: no track, an empty track, a non-finite or non-positive F0 value, or a bad range.
    """
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    if not tracks:
        raise ValueError("plot_f0_histograms: no F0 track given")
    data = {}
    for name, f0 in tracks.items():
        x = np.asarray(f0, dtype=np.float64).ravel()
        if x.size == 0:
            raise ValueError(f"plot_f0_histograms: '{name}' has no voiced frame")
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            raise ValueError(f"plot_f0_histograms: '{name}' has non-finite or non-positive F0 values "
                             "(pass the F0 of voiced frames, in Hz)")
        data[name] = x
    if range_hz is None:
        allv = np.concatenate(list(data.values()))
        lo, hi = np.percentile(allv, [0.5, 99.5])
        if hi <= lo:
            lo, hi = lo - 1.0, hi + 1.0
    else:
        lo, hi = map(float, range_hz)
        if not lo < hi:
            raise ValueError(f"plot_f0_histograms: range_hz must be (low, high) with low < high, got {range_hz}")
    edges = np.linspace(lo, hi, bins + 1)
    fig = Figure(figsize=(7, 4), constrained_layout=True)
    ax = fig.subplots()
    for name, x in data.items():
        ax.hist(x, bins=edges, density=density, histtype="step", linewidth=1.6,
                label=f"{name} ({x.size} frames, mean {x.mean():.0f} Hz, sd {x.std():.0f} Hz)")
    ax.set_xlabel("F0 (Hz)")
    ax.set_ylabel("density" if density else "voiced frames")
    ax.set_xlim(lo, hi)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    with atomic_write(out_png, "wb") as f:
        fig.savefig(f, format="png", dpi=100)


def plot_spectrograms(path: str | os.PathLike, panels: list[tuple[str, np.ndarray]], sample_rate: int, hop: int) -> None:
    """Save log-magnitude plots (dB, one panel per ``(title, (frames, bins) magnitude)``) as a PNG, atomically.

    Args:
        path: the PNG to write.
        panels: ``(title, magnitude)`` pairs, magnitude ``(frames, bins)`` of a one-sided STFT.
        sample_rate: Hz (the frequency axis runs to ``sample_rate / 2``).
        hop: samples between frames (the time axis).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.2 * len(panels) + 0.4), squeeze=False)
    for ax, (title, mag) in zip(axes[:, 0], panels):
        db = 20 * np.log10(np.maximum(mag.T, 1e-5))
        vmax = float(db.max())
        im = ax.imshow(db, origin="lower", aspect="auto", cmap="magma", vmin=vmax - 80, vmax=vmax,
                       extent=(0, mag.shape[0] * hop / sample_rate, 0, sample_rate / 2000))
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("kHz")
        fig.colorbar(im, ax=ax, pad=0.01, label="dB")
    axes[-1, 0].set_xlabel("time (s)")
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=80)
    plt.close(fig)
