"""Diagonal-covariance GMMs of the forced aligner's HMM states, vectorised in numpy/torch.

:class:`DiagGmmSet` holds one diagonal-covariance Gaussian mixture per HMM state ("pdf") as padded
arrays ``(P, M, D)``; log-likelihoods of many frames against many pdfs in one matrix product; one EM
step per pdf from Viterbi-aligned frames (the ``gmm-acc-stats-ali`` + ``gmm-est`` step of Kaldi's
``train_mono.sh``); Gaussian splitting ("mixing up") towards a total count shared out by occupancy
(:func:`split_targets`, Kaldi's ``GetSplitTargets``, power 0.2).

Scores are natural-log; ``-inf`` marks an unused (padding) component.
"""
from __future__ import annotations

import math

import numpy as np
import torch

NEG_INF = -np.inf
_LOG_2PI = math.log(2.0 * math.pi)
#: log-likelihood offset of padding components (finite, so that the matrix product has no inf - inf).
_PAD_LOGLIK = -1e30


class DiagGmmSet:
    """``P`` diagonal-covariance GMMs of up to ``M`` components each over ``D``-dim features.

    Attributes:
        means: float64 ``(P, M, D)``.
        vars: float64 ``(P, M, D)`` (variances, already floored).
        log_weights: float64 ``(P, M)``; ``-inf`` for unused (padding) components.

    ``log p(x | pdf p) = logsumexp_m [log w_pm + log N(x; mu_pm, diag(var_pm))]``.
    """

    def __init__(self, means: np.ndarray, vars: np.ndarray, log_weights: np.ndarray):
        self.means = np.asarray(means, dtype=np.float64)
        self.vars = np.asarray(vars, dtype=np.float64)
        self.log_weights = np.asarray(log_weights, dtype=np.float64)
        if self.means.ndim != 3 or self.vars.shape != self.means.shape or \
                self.log_weights.shape != self.means.shape[:2]:
            raise ValueError(f"GMM arrays disagree: means {self.means.shape}, vars {self.vars.shape}, "
                             f"log_weights {self.log_weights.shape}")
        self._cache: dict | None = None

    @classmethod
    def single(cls, num_pdfs: int, mean: np.ndarray, var: np.ndarray) -> "DiagGmmSet":
        """``num_pdfs`` one-component GMMs all equal to ``N(mean, diag(var))`` (Kaldi's ``gmm-init-mono``)."""
        mean = np.asarray(mean, dtype=np.float64)
        var = np.asarray(var, dtype=np.float64)
        return cls(np.tile(mean, (num_pdfs, 1, 1)), np.tile(var, (num_pdfs, 1, 1)), np.zeros((num_pdfs, 1)))

    @property
    def num_pdfs(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[2]

    def num_components(self) -> np.ndarray:
        """Used components per pdf, int ``(P,)``."""
        return np.isfinite(self.log_weights).sum(axis=1)

    def _precompute(self) -> dict:
        if self._cache is None:
            used = np.isfinite(self.log_weights)
            inv = 1.0 / self.vars
            const = self.log_weights - 0.5 * (self.dim * _LOG_2PI + np.log(self.vars).sum(-1)
                                              + (self.means ** 2 * inv).sum(-1))
            const = np.where(used, const, _PAD_LOGLIK)
            # log N(x) + log w = [x^2, x, 1] . [-0.5 / var, mu / var, const]: one matrix product
            w = np.concatenate([-0.5 * inv, self.means * inv, const[..., None]], axis=-1)
            self._cache = {"w": torch.from_numpy(w.astype(np.float32))}
        return self._cache

    def log_likelihood(self, x: np.ndarray, pdfs: np.ndarray | None = None,
                       block: int = 8192) -> np.ndarray:
        """Per-frame log-likelihoods under the GMMs ``pdfs``.

        Computed in float32 (torch), ``block`` frames at a time.

        Args:
            x: ``(T, D)`` features.
            pdfs: int ``(Q,)`` pdf indices; ``None`` = all ``P``.

        Returns:
            float32 ``(T, Q)``: ``log p(x_t | pdf q)``.
        """
        w = self._precompute()["w"]
        if pdfs is not None:
            w = w[torch.from_numpy(np.asarray(pdfs, dtype=np.int64))]
        q, m = w.shape[0], w.shape[1]
        wt = w.reshape(q * m, -1).T.contiguous()
        xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        out = torch.empty(len(xt), q)
        for b in range(0, len(xt), block):
            xb = xt[b:b + block]
            xa = torch.cat([xb * xb, xb, torch.ones(len(xb), 1)], dim=1)
            out[b:b + block] = torch.logsumexp((xa @ wt).view(len(xb), q, m), dim=2)
        return out.numpy()

    def component_log_likelihood(self, x: np.ndarray, pdf: int) -> np.ndarray:
        """float64 ``(T, M)``: ``log w_m + log N(x_t; mu_m, var_m)`` of pdf ``pdf``'s components
        (``-inf`` for unused ones)."""
        x = np.asarray(x, dtype=np.float64)
        used = np.isfinite(self.log_weights[pdf])
        inv = 1.0 / self.vars[pdf]
        const = self.log_weights[pdf] - 0.5 * (self.dim * _LOG_2PI + np.log(self.vars[pdf]).sum(-1)
                                               + (self.means[pdf] ** 2 * inv).sum(-1))
        ll = (x * x) @ (-0.5 * inv).T + x @ (self.means[pdf] * inv).T + np.where(used, const, 0.0)[None]
        return np.where(used[None], ll, NEG_INF)

    # ------------------------------------------------------------------ estimation
    def em_update(self, frames_of_pdf: list, var_floor: np.ndarray,
                  min_count: float = 3.0) -> np.ndarray:
        """One EM step of every GMM from the frames aligned to it (Viterbi training).

        Per pdf, the component posteriors ``gamma_tm`` under the current parameters give
        ``N_m = sum_t gamma_tm``, ``w_m = N_m / sum N``, ``mu_m = sum_t gamma_tm x_t / N_m``,
        ``var_m = sum_t gamma_tm x_t^2 / N_m - mu_m^2`` floored at ``var_floor`` (Bishop 2006,
        eqs. 9.24-9.26). A component with ``N_m < min_count`` is removed (unless it is the pdf's
        last one); a pdf with no frames keeps its parameters.

        Args:
            frames_of_pdf: for each pdf, ``(n_p, D)`` frames, or a pair ``(frames, weights)`` with
                ``weights`` ``(n_p,)`` the state posteriors (Baum-Welch), or ``None``.
            var_floor: ``(D,)`` variance floor (e.g. 0.01 x the global variance, as Kaldi).
            min_count: minimum occupancy of a component, in frames.

        Returns:
            float64 ``(P,)``: the occupancy (frame count) of each pdf.
        """
        P, M, D = self.means.shape
        occ = np.zeros(P)
        for p, x in enumerate(frames_of_pdf):
            if x is None:
                continue
            x, wt = x if isinstance(x, tuple) else (x, None)
            if len(x) == 0:
                continue
            x = np.asarray(x, dtype=np.float64)
            occ[p] = len(x) if wt is None else float(np.sum(wt))
            lc = self.component_log_likelihood(x, p)
            gamma = np.exp(lc - _logsumexp(lc, axis=1)[:, None])  # (n, M); 0 for unused comps
            if wt is not None:
                gamma *= np.asarray(wt, dtype=np.float64)[:, None]
            n_m = gamma.sum(0)
            used = np.isfinite(self.log_weights[p])
            keep = used & (n_m >= min_count)
            if not keep.any():  # keep the most occupied component
                keep = np.zeros(M, dtype=bool)
                keep[int(np.argmax(np.where(used, n_m, -1.0)))] = True
            sx = gamma.T @ x
            sxx = gamma.T @ (x * x)
            with np.errstate(divide="ignore", invalid="ignore"):
                mu = sx / n_m[:, None]
                var = sxx / n_m[:, None] - mu ** 2
            # re-normalise over the kept components
            tot = n_m[keep].sum()
            self.means[p, keep] = mu[keep]
            self.vars[p, keep] = np.maximum(var[keep], var_floor[None])
            self.log_weights[p] = np.where(keep, np.log(np.maximum(n_m, 1e-300) / tot), NEG_INF)
        self._compact()
        self._cache = None
        return occ

    def split(self, targets: np.ndarray, perturb: float = 0.2, rng: np.random.Generator | None = None) -> None:
        """Split components until pdf ``p`` has ``targets[p]`` of them (never fewer than now).

        The component of largest weight is split into two of half its weight, with means
        ``mu +/- perturb * sigma * r`` (``r`` a random direction per dimension, as Kaldi's
        ``DiagGmm::Split``) and the same variance.
        """
        rng = rng or np.random.default_rng(0)
        cur = self.num_components()
        targets = np.maximum(np.asarray(targets, dtype=int), cur)
        new_m = int(targets.max())
        if new_m > self.means.shape[1]:
            pad = new_m - self.means.shape[1]
            self.means = np.concatenate([self.means, np.zeros((self.num_pdfs, pad, self.dim))], 1)
            self.vars = np.concatenate([self.vars, np.ones((self.num_pdfs, pad, self.dim))], 1)
            self.log_weights = np.concatenate([self.log_weights, np.full((self.num_pdfs, pad), NEG_INF)], 1)
        for p in np.nonzero(targets > cur)[0]:
            for _ in range(int(targets[p] - cur[p])):
                lw = self.log_weights[p]
                big = int(np.argmax(lw))
                slot = int(np.nonzero(~np.isfinite(lw))[0][0])
                r = rng.standard_normal(self.dim) * perturb * np.sqrt(self.vars[p, big])
                self.means[p, slot] = self.means[p, big] + r
                self.means[p, big] = self.means[p, big] - r
                self.vars[p, slot] = self.vars[p, big]
                lw[big] -= math.log(2.0)
                lw[slot] = lw[big]
        self._cache = None

    def _compact(self) -> None:
        """Move used components first and drop all-unused trailing columns."""
        order = np.argsort(~np.isfinite(self.log_weights), axis=1, kind="stable")
        self.means = np.take_along_axis(self.means, order[..., None], 1)
        self.vars = np.take_along_axis(self.vars, order[..., None], 1)
        self.log_weights = np.take_along_axis(self.log_weights, order, 1)
        m = max(1, int(self.num_components().max()))
        self.means, self.vars, self.log_weights = self.means[:, :m], self.vars[:, :m], self.log_weights[:, :m]


def split_targets(occ: np.ndarray, total: int, power: float = 0.2, min_count: float = 20.0) -> np.ndarray:
    """Components per pdf for a total of about ``total``: proportional to ``occ ** power``, at most
    ``occ / min_count`` and at least 1 (Kaldi's ``GetSplitTargets`` in ``gmm-est --mix-up``).

    Args:
        occ: ``(P,)`` occupancies (frames per pdf).
        total: wanted total number of Gaussians.
        power: occupancy exponent.
        min_count: minimum frames per Gaussian.

    Returns:
        int ``(P,)``.
    """
    occ = np.asarray(occ, dtype=np.float64)
    share = occ ** power
    if share.sum() <= 0:
        return np.ones(len(occ), dtype=int)
    t = np.floor(total * share / share.sum() + 0.5)
    t = np.minimum(t, np.floor(occ / min_count))
    return np.maximum(t, 1).astype(int)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)
