"""Feature transforms of the forced aligner: frame splicing, LDA, MLLT (semi-tied covariance) and
fMLLR (constrained MLLR), as Kaldi's ``splice-feats``, ``est-lda``, ``est-mllt`` and
``FmllrDiagGmmAccs``."""
from __future__ import annotations

import math

import numpy as np

# scipy is imported where used (heavy): only training's LDA needs it; alignment with a trained model runs without it.


def splice(x: np.ndarray, context: int) -> np.ndarray:
    """``(T, D)`` -> ``(T, D * (2 context + 1))``: each frame with ``context`` neighbours each side
    (edge frames repeated), as Kaldi's ``splice-feats``."""
    if context == 0:
        return np.ascontiguousarray(x)
    p = np.pad(x, ((context, context), (0, 0)), mode="edge")
    w = np.lib.stride_tricks.sliding_window_view(p, 2 * context + 1, axis=0)  # (T, D, 2c+1)
    return np.ascontiguousarray(w.transpose(0, 2, 1).reshape(len(x), -1))


def estimate_lda(x: np.ndarray, labels: np.ndarray, dim: int, num_classes: int | None = None) -> np.ndarray:
    """Linear discriminant analysis (Kaldi's ``acc-lda`` + ``est-lda``; Duda, Hart & Stork 2001, sec. 3.8.3).

    With ``W = sum_c (n_c / n) Cov_c`` (within-class scatter) and ``B = Cov(x) - W`` (between-class),
    the rows of the result are the ``dim`` generalised eigenvectors ``B v = lambda W v`` of largest
    ``lambda``, normalised to ``v^T W v = 1`` (the projected within-class covariance is the identity).

    Args:
        x: ``(N, D)`` frames.
        labels: int ``(N,)`` class (pdf) of each frame.
        dim: output dimension (``<= D``).
        num_classes: number of classes (default ``labels.max() + 1``).

    Returns:
        float64 ``(dim, D)``: project with ``x @ lda.T``.

    Raises:
        ValueError: ``dim`` out of range or fewer than two classes with frames.
    """
    import scipy.linalg

    x = np.asarray(x, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    N, D = x.shape
    if not 1 <= dim <= D:
        raise ValueError(f"LDA dimension {dim} not in 1..{D}")
    K = int(labels.max()) + 1 if num_classes is None else num_classes
    n = np.bincount(labels, minlength=K).astype(np.float64)
    if (n > 0).sum() < 2:
        raise ValueError("LDA needs frames of at least two classes")
    mean = x.mean(0)
    xc = x - mean
    total = xc.T @ xc / N
    cm = np.zeros((K, D))
    np.add.at(cm, labels, xc)
    cm /= np.maximum(n, 1)[:, None]
    between = (cm * (n / N)[:, None]).T @ cm
    within = total - between
    within += 1e-6 * np.trace(within) / D * np.eye(D)
    evals, evecs = scipy.linalg.eigh(between, within)
    return evecs[:, ::-1][:, :dim].T.copy()


def estimate_mllt(covs: np.ndarray, counts: np.ndarray, num_iters: int = 20,
                  init: np.ndarray | None = None) -> np.ndarray:
    """Maximum likelihood linear transform / semi-tied covariance (Gales 1999, "Semi-tied covariance
    matrices for hidden Markov models", eqs. 19-22; Kaldi's ``est-mllt``).

    Finds the square ``A`` maximising ``sum_c n_c (log |det A|^2 - log |diag(A S_c A^T)|)``, the
    likelihood gain of diagonal-covariance Gaussians in the space ``A x``, by row-wise updates
    ``a_i = c_i G_i^{-1} sqrt(n / (c_i G_i^{-1} c_i^T))``, ``G_i = sum_c n_c S_c / (a_i S_c a_i^T)``
    (``c_i`` the cofactor row of ``A``).

    Args:
        covs: ``(C, D, D)`` full covariances of the Gaussians (classes) in the current space.
        counts: ``(C,)`` frames of each.
        num_iters: sweeps over the rows.
        init: starting ``A`` (default identity).

    Returns:
        float64 ``(D, D)`` ``A``.
    """
    covs = np.asarray(covs, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    keep = counts > 0
    covs, counts = covs[keep], counts[keep]
    D = covs.shape[1]
    A = np.eye(D) if init is None else np.array(init, dtype=np.float64)
    beta = counts.sum()
    for _ in range(num_iters):
        for i in range(D):
            cof = np.linalg.det(A) * np.linalg.inv(A).T[i]  # cofactor row i
            var = np.einsum("d,cde,e->c", A[i], covs, A[i])
            G = np.einsum("c,cde->de", counts / var, covs)
            gc = np.linalg.solve(G, cof)
            A[i] = gc * math.sqrt(beta / float(cof @ gc))
        A /= abs(np.linalg.det(A)) ** (1.0 / D)  # the objective is invariant to scale; keep det 1
    return A


def estimate_fmllr(beta: float, K: np.ndarray, G: np.ndarray, num_iters: int = 10,
                   init: np.ndarray | None = None) -> np.ndarray:
    """Feature-space MLLR (constrained MLLR) of one speaker, by Gales' row-by-row update (Gales 1998,
    "Maximum likelihood linear transformations for HMM-based speech recognition", eqs. 27-31;
    Kaldi's ``FmllrDiagGmmAccs::Update``).

    The transform ``x' = W [x; 1]`` (``W = [A b]``) maximises
    ``beta log |det A| - 1/2 sum_i (w_i G_i w_i^T - 2 w_i k_i^T)``, the diagonal-GMM log-likelihood of
    the transformed frames, with the sufficient statistics
    ``K = sum_t sum_m gamma_tm (mu_m / var_m) xi_t^T`` and ``G_i = sum_t sum_m gamma_tm / var_mi xi_t xi_t^T``
    (``xi_t = [x_t; 1]``, ``gamma_tm`` the posterior of Gaussian ``m``).

    Args:
        beta: frames (occupancy) of the speaker.
        K: ``(D, D + 1)``.
        G: ``(D, D + 1, D + 1)``.
        num_iters: sweeps over the rows.
        init: starting ``W`` ``(D, D + 1)`` (default ``[I 0]``).

    Returns:
        float64 ``(D, D + 1)`` ``W``.
    """
    D = K.shape[0]
    W = np.hstack([np.eye(D), np.zeros((D, 1))]) if init is None else np.array(init, dtype=np.float64)
    Ginv = np.linalg.inv(G + 1e-10 * np.eye(D + 1)[None])
    for _ in range(num_iters):
        for i in range(D):
            A = W[:, :D]
            p = np.append(np.linalg.det(A) * np.linalg.inv(A).T[i], 0.0)  # extended cofactor row
            gp, gk = Ginv[i] @ p, Ginv[i] @ K[i]
            e1, e2 = float(p @ gp), float(p @ gk)
            disc = math.sqrt(e2 * e2 + 4.0 * beta * e1)
            roots = [(-e2 + disc) / (2 * e1), (-e2 - disc) / (2 * e1)]
            alpha = max(roots, key=lambda a: beta * math.log(max(abs(a * e1 + e2), 1e-300)) - 0.5 * a * a * e1)
            W[i] = alpha * gp + gk
    return W


def fmllr_objective(W: np.ndarray, beta: float, K: np.ndarray, G: np.ndarray) -> float:
    """The auxiliary function of :func:`estimate_fmllr` (up to a constant)."""
    D = K.shape[0]
    _, logdet = np.linalg.slogdet(W[:, :D])
    return float(beta * logdet - 0.5 * np.einsum("ij,ijk,ik->", W, G, W) + np.sum(W * K))


def mllt_objective(A: np.ndarray, covs: np.ndarray, counts: np.ndarray) -> float:
    """``sum_c n_c (log |det A|^2 - log |diag(A S_c A^T)|) / 2``: the log-likelihood gain of
    :func:`estimate_mllt`'s transform (up to a constant)."""
    keep = np.asarray(counts) > 0
    covs, counts = np.asarray(covs)[keep], np.asarray(counts)[keep]
    _, logdet = np.linalg.slogdet(A)
    var = np.einsum("id,cde,ie->ci", A, covs, A)
    return float(0.5 * np.sum(counts * (2 * logdet - np.log(var).sum(1))))


def _apply_fmllr(W: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """``x @ A^T + b`` for ``W = [A b]`` (None = identity)."""
    if W is None:
        return x
    D = x.shape[1]
    return (x @ W[:, :D].T + W[:, D]).astype(np.float32)
