"""Forced aligner's GMMs: log-likelihoods and an EM step against scipy/sklearn, weighted updates,
splitting, split targets."""
import math

import numpy as np
import pytest

from speechkit.align.gmm import DiagGmmSet, split_targets


# ------------------------------------------------------------------------------ GMMs
def test_gmm_log_likelihood_and_em_step_match_sklearn():
    mixture = pytest.importorskip("sklearn.mixture")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-2, 0.5, (300, 3)), rng.normal(1.5, 1.2, (200, 3))])
    means = np.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]])
    vars_ = np.array([[1.0, 2.0, 1.0], [0.5, 1.0, 1.5]])
    weights = np.array([0.3, 0.7])
    gmm = DiagGmmSet(means[None], vars_[None], np.log(weights)[None])
    from scipy.stats import multivariate_normal as mvn
    direct = np.logaddexp(math.log(0.3) + mvn.logpdf(x, means[0], np.diag(vars_[0])),
                          math.log(0.7) + mvn.logpdf(x, means[1], np.diag(vars_[1])))
    assert np.allclose(gmm.log_likelihood(x)[:, 0], direct, atol=2e-3)  # float32 product
    ref = mixture.GaussianMixture(2, covariance_type="diag", max_iter=1, reg_covar=1e-12, tol=0.0,
                                  weights_init=weights, means_init=means, precisions_init=1 / vars_)
    # one EM step (sklearn: E-step with the init parameters, then M-step)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "did not converge" after one iteration
        ref.fit(x)
    occ = gmm.em_update([x], var_floor=np.full(3, 1e-6), min_count=1.0)
    assert occ[0] == len(x)
    order = np.argsort(gmm.means[0, :, 0])
    assert np.allclose(np.exp(gmm.log_weights[0, order]), ref.weights_, atol=1e-6)
    assert np.allclose(gmm.means[0, order], ref.means_, atol=1e-6)
    assert np.allclose(gmm.vars[0, order], ref.covariances_, atol=1e-6)


def test_weighted_single_gaussian_update_is_the_weighted_moments():
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(50, 2)), rng.uniform(0.1, 1.0, 50)
    gmm = DiagGmmSet.single(2, np.zeros(2), np.ones(2))
    occ = gmm.em_update([(x, w), None], var_floor=np.full(2, 1e-6))
    mean = (w[:, None] * x).sum(0) / w.sum()
    assert occ[0] == pytest.approx(w.sum()) and occ[1] == 0
    assert np.allclose(gmm.means[0, 0], mean)
    assert np.allclose(gmm.vars[0, 0], (w[:, None] * (x - mean) ** 2).sum(0) / w.sum())
    assert np.allclose(gmm.means[1, 0], 0.0)  # no data: unchanged
    # variance floor, split, and component removal by min_count
    gmm.split(np.array([3, 1]))
    assert list(gmm.num_components()) == [3, 1]
    assert np.exp(gmm.log_weights[0, :3]).sum() == pytest.approx(1.0)
    gmm.em_update([(x[:4], w[:4]), None], var_floor=np.full(2, 10.0), min_count=3.0)
    assert gmm.num_components()[0] == 1 and np.allclose(gmm.vars[0, 0], 10.0)


def test_split_targets():
    t = split_targets(np.array([1000.0, 100.0, 10.0, 0.0]), total=20, power=0.2, min_count=20)
    assert t[0] >= t[1] >= t[2] == 1 and t[3] == 1
    assert t[1] <= 5  # at most occ / min_count
