"""Plots of a continual speaker-adaptation run (Hemati & Borth 2021, Figures 3, 4 and 5).

* :func:`plot_confusion_matrix` -- the speaker verifier on the synthesized speech of the final
  episode: true speaker (rows) vs predicted speaker (columns), row-normalised (sequential
  adaptation collapses toward the last speaker's column; Figure 4a);
* :func:`plot_embeddings_2d` -- ground-truth and synthesized utterance embeddings projected to 2-D
  (PCA, or t-SNE), coloured by speaker, ground truth as dots and synthesized speech as crosses
  (Figure 4b: t-SNE of the synthesized speech only);
* :func:`plot_ra_fg_curves` -- retained accuracy and forgetting vs episode, one line per strategy,
  mean over runs (speaker orders) with a +/- one standard deviation band (Figure 3 plots RA of one
  order; Figure 5, RA over three orders with a confidence interval).

All figures are drawn with matplotlib's object API (no pyplot state, no display) and written
atomically as PNG; the pixel size is ``figsize * dpi`` exactly.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

import numpy as np

from speechkit.scoring.speaker_verification import aggregate_runs
from speechkit.utils.fileio import atomic_write

# matplotlib and sklearn are imported where used (heavy): only the plots need them.

__all__ = ["plot_confusion_matrix", "plot_embeddings_2d", "plot_ra_fg_curves", "project_2d"]


def _save(fig, path: str | os.PathLike, dpi: int) -> None:
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)


def _colors(n: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def plot_confusion_matrix(true_labels: Sequence[str], pred_labels: Sequence[str], path: str | os.PathLike, *,
                          labels: Sequence[str] | None = None, title: str = "", figsize: tuple[float, float] = (6, 5),
                          dpi: int = 100) -> np.ndarray:
    """Row-normalised confusion matrix of the speaker verifier, written as a PNG.

    Args:
        true_labels, pred_labels: true and predicted speaker of each synthesized utterance.
        path: PNG to write.
        labels: row/column order (default: the episode order is not known here, so C-sorted true
            and predicted labels); pass the speaker order of the run to read the collapse easily.
        title: figure title.

    Returns:
        The count matrix ``(len(labels), len(labels))`` (rows true, columns predicted).

    Raises:
        ValueError: different lengths, or no utterances.
    """
    from matplotlib.figure import Figure
    from sklearn.metrics import confusion_matrix

    if len(true_labels) != len(pred_labels) or len(true_labels) == 0:
        raise ValueError(f"confusion matrix needs as many predictions as true labels (> 0), got "
                         f"{len(true_labels)} and {len(pred_labels)}")
    if labels is None:
        labels = sorted(set(map(str, true_labels)) | set(map(str, pred_labels)), key=lambda s: s.encode("utf-8"))
    labels = list(labels)
    cm = confusion_matrix([str(t) for t in true_labels], [str(p) for p in pred_labels], labels=labels)
    rows = cm.sum(axis=1, keepdims=True)
    frac = np.divide(cm, rows, out=np.zeros(cm.shape), where=rows > 0)
    fig = Figure(figsize=figsize)
    ax = fig.add_subplot()
    im = ax.imshow(frac, vmin=0, vmax=1, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlabel("predicted speaker")
    ax.set_ylabel("true speaker")
    if len(labels) <= 15:
        for i in range(len(labels)):
            for j in range(len(labels)):
                if cm[i, j]:
                    ax.text(j, i, str(cm[i, j]), ha="center", va="center", fontsize=7,
                            color="white" if frac[i, j] > 0.5 else "black")
    fig.colorbar(im, ax=ax, label="fraction of the true speaker's utterances")
    ax.set_title(title or "speaker verifier on synthesized speech")
    fig.tight_layout()
    _save(fig, path, dpi)
    return cm


def project_2d(x: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """``(N, D)`` -> ``(N, 2)`` by PCA (``sklearn.decomposition.PCA``) or t-SNE (``sklearn.manifold.TSNE``,
    perplexity ``min(30, (N - 1) / 3)``, PCA initialisation, ``random_state=seed``).

    Raises:
        ValueError: unknown method, fewer than 3 points, or not 2-D.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3:
        raise ValueError(f"need at least 3 embeddings of shape (N, dim) to project, got {x.shape}")
    if method == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=2, random_state=seed).fit_transform(x)
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = max(1.0, min(30.0, (x.shape[0] - 1) / 3))
        return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(x)
    raise ValueError(f"projection method must be 'pca' or 'tsne', got {method!r}")


def plot_embeddings_2d(ground_truth: np.ndarray, gt_speakers: Sequence[str], synthesized: np.ndarray,
                       syn_speakers: Sequence[str], path: str | os.PathLike, *, method: str = "pca",
                       speakers: Sequence[str] | None = None, title: str = "", seed: int = 0,
                       figsize: tuple[float, float] = (6, 5), dpi: int = 100) -> np.ndarray:
    """2-D map of ground-truth and synthesized speaker embeddings, coloured by speaker (Figure 4b).

    Both sets are projected together (one PCA / t-SNE fit) so their positions are comparable.

    Args:
        ground_truth: ``(N, D)`` embeddings of real utterances, with ``gt_speakers`` (N).
        synthesized: ``(M, D)`` embeddings of synthesized utterances, with ``syn_speakers`` (M);
            ``M`` may be 0.
        path: PNG to write.
        method: ``pca`` or ``tsne``.
        speakers: legend/colour order (default: C-sorted union).

    Returns:
        The ``(N + M, 2)`` projected points (ground truth first).

    Raises:
        ValueError: label counts differ from the embeddings, dimensions differ, too few points.
    """
    from matplotlib.figure import Figure

    gt = np.asarray(ground_truth, dtype=np.float64)
    syn = np.asarray(synthesized, dtype=np.float64).reshape(-1, gt.shape[1] if gt.ndim == 2 else 0)
    if gt.ndim != 2 or len(gt) != len(gt_speakers) or len(syn) != len(syn_speakers):
        raise ValueError(f"embeddings and speaker labels differ in number: {gt.shape} / {len(gt_speakers)} "
                         f"ground truth, {syn.shape} / {len(syn_speakers)} synthesized")
    pts = project_2d(np.concatenate([gt, syn]), method, seed)
    if speakers is None:
        speakers = sorted(set(map(str, gt_speakers)) | set(map(str, syn_speakers)), key=lambda s: s.encode("utf-8"))
    colour = dict(zip(speakers, _colors(len(speakers))))
    fig = Figure(figsize=figsize)
    ax = fig.add_subplot()
    gl, sl = np.asarray(list(map(str, gt_speakers))), np.asarray(list(map(str, syn_speakers)))
    for s in speakers:
        g = pts[: len(gt)][gl == s]
        y = pts[len(gt):][sl == s]
        if len(g):
            ax.scatter(g[:, 0], g[:, 1], s=14, color=colour[s], marker="o", alpha=0.6, label=s)
        if len(y):
            ax.scatter(y[:, 0], y[:, 1], s=40, color=colour[s], marker="x", label=None if len(g) else s)
    ax.set_xlabel(f"{method.upper()} 1")
    ax.set_ylabel(f"{method.upper()} 2")
    ax.set_title(title or "speaker embeddings: o ground truth, x synthesized")
    if len(speakers) <= 20:
        ax.legend(fontsize=6, loc="best", ncol=2 if len(speakers) > 10 else 1)
    fig.tight_layout()
    _save(fig, path, dpi)
    return pts


def plot_ra_fg_curves(curves: Mapping[str, Mapping[str, Sequence[Sequence[float]]]], path: str | os.PathLike, *,
                      title: str = "", percent: bool = True, figsize: tuple[float, float] = (10, 4),
                      dpi: int = 100) -> None:
    """Retained accuracy and forgetting vs episode per strategy, mean +/- std over runs (Figures 3, 5).

    Args:
        curves: strategy -> ``{"ra": runs x episodes, "fg": runs x episodes}`` (fractions in [0, 1],
            NaN where undefined, e.g. FG_1), as :func:`~speechkit.scoring.speaker_verification.ra_fg_curves`
            gives for each run (speaker order).
        path: PNG to write.
        percent: plot in percent.

    Raises:
        ValueError: no strategies, or a strategy without both curves (named).
    """
    from matplotlib.figure import Figure

    if not curves:
        raise ValueError("plot_ra_fg_curves: no strategies")
    scale = 100.0 if percent else 1.0
    fig = Figure(figsize=figsize)
    axes = fig.subplots(1, 2)
    for (name, c), colour in zip(curves.items(), _colors(len(curves))):
        for ax, key in zip(axes, ("ra", "fg")):
            if key not in c or len(c[key]) == 0:
                raise ValueError(f"plot_ra_fg_curves: strategy '{name}' has no '{key}' curves")
            agg = aggregate_runs([np.asarray(r, dtype=np.float64) for r in c[key]])
            ep = np.arange(1, len(agg["mean"]) + 1)
            m, s = agg["mean"] * scale, agg["std"] * scale
            ax.plot(ep, m, marker="o", ms=3, color=colour, label=f"{name} (n={agg['n']})")
            if agg["n"] > 1:
                ax.fill_between(ep, m - s, m + s, color=colour, alpha=0.2, linewidth=0)
    unit = " (%)" if percent else ""
    for ax, lab in zip(axes, ("retained accuracy RA" + unit, "forgetting FG" + unit)):
        ax.set_xlabel("episode")
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path, dpi)
