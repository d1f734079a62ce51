"""Forced aligner's feature transforms: splicing, LDA against sklearn, MLLT, fMLLR."""
import numpy as np
import pytest

from speechkit.align.transforms import estimate_lda, estimate_mllt, mllt_objective, splice


def test_splice_matches_a_loop():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = splice(x, 2)
    for t in range(4):
        want = np.concatenate([x[min(max(t + k, 0), 3)] for k in range(-2, 3)])
        assert np.array_equal(out[t], want)


# ------------------------------------------------------------------------------ LDA, MLLT, state tying
def test_lda_matches_sklearn():
    lda_mod = pytest.importorskip("sklearn.discriminant_analysis")
    rng = np.random.default_rng(0)
    means = rng.normal(0, 2, (5, 6))
    y = rng.integers(0, 5, 600)
    mix = rng.normal(size=(6, 6))
    x = (means[y] + rng.normal(size=(600, 6))) @ mix
    ours = estimate_lda(x, y, 3)
    ref = lda_mod.LinearDiscriminantAnalysis(solver="eigen", n_components=3).fit(x, y)
    a, b = x @ ours.T, ref.transform(x)
    for k in range(3):  # the same directions, up to sign; unit within-class variance
        assert abs(np.corrcoef(a[:, k], b[:, k])[0, 1]) > 1 - 1e-6
        assert np.allclose(np.abs(a[:, k] - a[:, k].mean()), np.abs(b[:, k] - b[:, k].mean()), atol=1e-3)
    within = sum(np.cov(a[y == c], rowvar=False, bias=True) * np.mean(y == c) for c in range(5))
    assert np.allclose(within, np.eye(3), atol=1e-4)
    with pytest.raises(ValueError, match="dimension"):
        estimate_lda(x, y, 7)


def test_mllt_finds_the_shared_rotation():
    rng = np.random.default_rng(0)
    R = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    covs = np.stack([R @ np.diag(rng.uniform(0.2, 3.0, 4)) @ R.T for _ in range(6)])
    counts = rng.uniform(50, 200, 6)
    A = estimate_mllt(covs, counts, num_iters=50)
    best = mllt_objective(R.T, covs, counts)  # the semi-tied optimum: every A S A^T diagonal
    assert mllt_objective(A, covs, counts) == pytest.approx(best, abs=1e-4)
    assert mllt_objective(A, covs, counts) > mllt_objective(np.eye(4), covs, counts)
    for S in covs:
        T = A @ S @ A.T
        assert np.abs(T - np.diag(np.diag(T))).max() < 1e-3 * np.abs(T).max()
    # a class with no frames is ignored
    A0 = estimate_mllt(np.concatenate([covs, np.zeros((1, 4, 4))]), np.append(counts, 0.0), num_iters=50)
    assert np.allclose(np.abs(A0), np.abs(A), atol=1e-6)


def test_fmllr_undoes_a_speaker_transform():
    from speechkit.align.transforms import estimate_fmllr, fmllr_objective

    rng = np.random.default_rng(0)
    D, C = 3, 6
    mus, vars_ = rng.normal(0, 2, (C, D)), rng.uniform(0.3, 2.0, (C, D))
    y = rng.integers(0, C, 4000)
    canon = mus[y] + rng.normal(size=(4000, D)) * np.sqrt(vars_[y])
    M = np.eye(D) + 0.3 * rng.normal(size=(D, D))
    b = rng.normal(size=D)
    x = (canon - b) @ np.linalg.inv(M).T  # the speaker's frames: canon = M x + b
    xi = np.hstack([x, np.ones((len(x), 1))])
    K = ((mus[y] / vars_[y]).T @ xi)
    G = np.einsum("ti,tj,tk->ijk", 1.0 / vars_[y], xi, xi)
    W = estimate_fmllr(len(x), K, G, num_iters=20)
    assert np.allclose(W[:, :D], M, atol=0.05) and np.allclose(W[:, D], b, atol=0.05)
    ident = np.hstack([np.eye(D), np.zeros((D, 1))])
    assert fmllr_objective(W, len(x), K, G) > fmllr_objective(ident, len(x), K, G)
    # the optimum: no coordinate perturbation improves the auxiliary function
    best = fmllr_objective(W, len(x), K, G)
    for _ in range(20):
        assert fmllr_objective(W + 1e-3 * rng.normal(size=W.shape), len(x), K, G) <= best + 1e-9
