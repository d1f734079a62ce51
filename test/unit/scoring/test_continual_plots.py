"""Continual-learning plots: files written, right pixel size, right counts."""
from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.image import imread

from speechkit.scoring.continual_plots import plot_confusion_matrix, plot_embeddings_2d, plot_ra_fg_curves, project_2d


def _png_shape(path):
    assert path.is_file() and path.stat().st_size > 1000
    return imread(path).shape[:2]


def test_confusion_matrix(tmp_path):
    true = ["a", "a", "b", "b", "c", "c"]
    pred = ["c", "a", "c", "c", "c", "c"]                  # collapse toward the last speaker
    cm = plot_confusion_matrix(true, pred, tmp_path / "cm.png", labels=["a", "b", "c"], figsize=(4, 3), dpi=50)
    np.testing.assert_array_equal(cm, [[1, 0, 1], [0, 0, 2], [0, 0, 2]])
    assert _png_shape(tmp_path / "cm.png") == (150, 200)
    with pytest.raises(ValueError, match="as many predictions"):
        plot_confusion_matrix(true, pred[:2], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_embeddings_2d(tmp_path):
    rng = np.random.default_rng(0)
    gt = rng.standard_normal((12, 8))
    syn = gt[:6] + 0.01
    pts = plot_embeddings_2d(gt, ["a"] * 6 + ["b"] * 6, syn, ["a"] * 3 + ["b"] * 3, tmp_path / "pca.png", dpi=40)
    assert pts.shape == (18, 2) and _png_shape(tmp_path / "pca.png") == (200, 240)
    # the projection is sklearn's PCA of both sets together
    from sklearn.decomposition import PCA

    ref = PCA(2).fit_transform(np.concatenate([gt, syn]))
    np.testing.assert_allclose(np.abs(pts), np.abs(ref), atol=1e-8)
    plot_embeddings_2d(gt, ["a"] * 12, np.zeros((0, 8)), [], tmp_path / "tsne.png", method="tsne", dpi=30)
    assert _png_shape(tmp_path / "tsne.png") == (150, 180)
    with pytest.raises(ValueError, match="differ in number"):
        plot_embeddings_2d(gt, ["a"], syn, ["a"] * 6, tmp_path / "bad.png")
    with pytest.raises(ValueError, match="'pca' or 'tsne'"):
        project_2d(gt, "umap")


def test_ra_fg_curves(tmp_path):
    nan = math.nan
    curves = {"sa": {"ra": [[1.0, 0.5, 0.3], [0.9, 0.6, 0.4]], "fg": [[nan, 0.5, 0.6], [nan, 0.3, 0.5]]},
              "er": {"ra": [[1.0, 0.9, 0.8]], "fg": [[nan, 0.1, 0.1]]}}
    plot_ra_fg_curves(curves, tmp_path / "rafg.png", title="mini", dpi=50)
    assert _png_shape(tmp_path / "rafg.png") == (200, 500)
    with pytest.raises(ValueError, match="strategy 'jt' has no 'fg'"):
        plot_ra_fg_curves({"jt": {"ra": [[1.0]]}}, tmp_path / "bad.png")
