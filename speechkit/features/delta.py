"""Dynamic (delta) features: librosa's Savitzky-Golay deltas and Kaldi's regression deltas, in torch.

Two conventions are in use and they give different numbers:

* :func:`savgol_delta` -- ``librosa.feature.delta(data, width=9, order=k, mode="interp")``: the
  k-th derivative of a degree-k polynomial fitted by least squares to ``width`` frames around each
  frame (Savitzky & Golay 1964). In the interior this is a fixed FIR filter; the first and last
  ``width // 2`` frames use the polynomial fitted to the first/last ``width`` frames, evaluated at
  the frame's own position (scipy's ``savgol_filter(mode="interp")``, which librosa calls). Note
  that librosa's order-2 delta is the second derivative of a quadratic fit, *not* the delta of the
  delta.
* :func:`kaldi_delta` -- Kaldi's ``add-deltas`` (``DeltaFeatures`` in ``feat/feature-functions.cc``):
  ``d_t = sum_{n=1..N} n (c_{t+n} - c_{t-n}) / (2 sum_{n=1..N} n^2)`` (the HTK regression formula,
  HTK book eq. 5.16) with the first/last frame repeated at the edges; order 2 applies it twice.

Both work on ``(frames, dim)`` tensors and are linear in the input, so they are written as one
small matrix product over a sliding window (``Tensor.unfold``), not a Python loop over frames.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch


@functools.lru_cache(maxsize=64)
def savgol_operator(width: int, order: int, deriv: int | None = None) -> np.ndarray:
    """The ``(width, width)`` matrix of Savitzky-Golay derivative weights over one window.

    Row ``t`` holds the weights ``w`` such that ``sum_j w[j] * x[j]`` is the ``deriv``-th
    derivative, evaluated at position ``t``, of the degree-``order`` polynomial fitted by least
    squares to ``x[0..width-1]`` (positions in frames, unit spacing). The middle row is the
    interior FIR filter; the first/last ``width // 2`` rows are the edge rules of
    ``scipy.signal.savgol_filter(mode="interp")``.

    Derived directly from the normal equations: with ``V[j, m] = (j - c)^m`` (``c`` the window
    centre, for conditioning), the fitted coefficients are ``pinv(V) @ x`` and the derivative of
    ``sum_m a_m u^m`` at ``u`` is ``sum_{m>=d} a_m m!/(m-d)! u^(m-d)``.

    Args:
        width: window length in frames (>= 1).
        order: polynomial degree; if ``order >= width`` the degree is lowered to ``width - 1``
            (an exact fit; derivatives above the degree are zero).
        deriv: derivative order, default ``order`` (as ``librosa.feature.delta`` uses).

    Returns:
        float64 array of shape ``(width, width)``.
    """
    if width < 1:
        raise ValueError(f"delta width must be >= 1, got {width}")
    if order < 0:
        raise ValueError(f"delta order must be >= 0, got {order}")
    deriv = order if deriv is None else deriv
    degree = min(order, width - 1)
    c = (width - 1) / 2.0
    u = np.arange(width, dtype=np.float64) - c
    vander = u[:, None] ** np.arange(degree + 1)[None, :]  # (width, degree+1)
    fit = np.linalg.pinv(vander)  # (degree+1, width): x -> polynomial coefficients
    # d-th derivative of u^m at each position: m!/(m-d)! u^(m-d) for m >= d, else 0.
    dmat = np.zeros((width, degree + 1))
    for m in range(deriv, degree + 1):
        dmat[:, m] = math.factorial(m) / math.factorial(m - deriv) * u ** (m - deriv)
    return dmat @ fit


def savgol_delta(feats: torch.Tensor, width: int = 9, order: int = 1) -> torch.Tensor:
    """librosa-compatible delta features along the frame axis.

    Matches ``librosa.feature.delta(feats.T, width=width, order=order, mode="interp").T``
    (Savitzky-Golay smoothing derivative; see the module docstring) to float32 rounding.
    Unlike librosa, sequences shorter than ``width`` are accepted: the polynomial is then fitted
    to all ``T`` frames (degree ``min(order, T - 1)``; a 1-frame input gives zeros).

    Args:
        feats: ``(T, D)`` tensor (frames x coefficients).
        width: odd window length in frames, ``>= 3`` (librosa's rule).
        order: derivative order (1 = delta, 2 = delta-delta as librosa defines it).

    Returns:
        ``(T, D)`` tensor, same dtype and device as ``feats``.

    Raises:
        ValueError: even or too small ``width``, ``order < 1``, or ``feats`` not 2-D.
    """
    if feats.dim() != 2:
        raise ValueError(f"feats must be (frames, dim), got shape {tuple(feats.shape)}")
    if width < 3 or width % 2 == 0:
        raise ValueError(f"delta width must be an odd integer >= 3, got {width}")
    if order < 1:
        raise ValueError(f"delta order must be >= 1, got {order}")
    T = feats.shape[0]
    if T == 0:
        return feats.clone()
    if T < width:  # fit one polynomial to the whole (short) sequence
        op = torch.as_tensor(savgol_operator(T, order, order), dtype=feats.dtype, device=feats.device)
        return op @ feats
    op = torch.as_tensor(savgol_operator(width, order, order), dtype=feats.dtype, device=feats.device)
    half = width // 2
    out = torch.empty_like(feats)
    # interior: (T - width + 1, D, width) windows @ (width,) kernel (the middle row)
    out[half:T - half] = feats.unfold(0, width, 1) @ op[half]
    out[:half] = op[:half] @ feats[:width]
    out[T - half:] = op[half + 1:] @ feats[T - width:]
    return out


@functools.lru_cache(maxsize=32)
def _stacked_operators(width: int, max_order: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cached torch operators for orders 1..max_order: interior kernels ``(width, K)``, left
    edges ``(K, half, width)``, right edges ``(K, half, width)``."""
    half = width // 2
    ops = [savgol_operator(width, k, k) for k in range(1, max_order + 1)]
    kern = np.stack([op[half] for op in ops], axis=1)
    left = np.stack([op[:half] for op in ops])
    right = np.stack([op[half + 1:] for op in ops])
    return tuple(torch.as_tensor(a, dtype=dtype) for a in (kern, left, right))


def append_savgol_deltas(feats: torch.Tensor, width: int = 9, max_order: int = 2) -> torch.Tensor:
    """``[feats, delta_1, ..., delta_max_order]`` along dim 1: :func:`savgol_delta` for every order
    in one pass (one windowed product for all orders; same numbers).

    Args:
        feats: ``(T, D)``.
        width: odd window length in frames, ``>= 3``.
        max_order: highest derivative order (librosa ``order``), ``>= 0``.

    Returns:
        ``(T, D * (1 + max_order))`` tensor.
    """
    if feats.dim() != 2:
        raise ValueError(f"feats must be (frames, dim), got shape {tuple(feats.shape)}")
    if width < 3 or width % 2 == 0:
        raise ValueError(f"delta width must be an odd integer >= 3, got {width}")
    T, D = feats.shape
    if max_order < 1 or T < width:
        return torch.cat([feats] + [savgol_delta(feats, width, k) for k in range(1, max_order + 1)], dim=1)
    half, K = width // 2, max_order
    kern, left, right = _stacked_operators(width, max_order, feats.dtype)
    out = feats.new_empty(T, D * (1 + K))
    out[:, :D] = feats
    inner = feats.unfold(0, width, 1) @ kern  # (T - width + 1, D, K)
    out[half:T - half, D:] = inner.transpose(1, 2).reshape(T - 2 * half, K * D)
    out[:half, D:] = (left @ feats[:width]).transpose(0, 1).reshape(half, K * D)
    out[T - half:, D:] = (right @ feats[T - width:]).transpose(0, 1).reshape(half, K * D)
    return out


@functools.lru_cache(maxsize=16)
def kaldi_delta_kernels(order: int, window: int = 2) -> tuple[np.ndarray, ...]:
    """Kaldi's ``DeltaFeatures`` scales: kernel ``i`` (length ``2 * i * window + 1``) for order ``i``.

    ``scales[0] = [1]``; ``scales[i][j + k] += j * scales[i-1][k] / sum_{n=-N..N} n^2`` for
    ``j`` in ``-N..N`` (``N = window``), exactly as ``feat/feature-functions.cc``.
    """
    if window < 1:
        raise ValueError(f"delta window must be >= 1, got {window}")
    scales = [np.ones(1)]
    norm = float(sum(j * j for j in range(-window, window + 1)))
    for _ in range(order):
        prev = scales[-1]
        cur = np.zeros(len(prev) + 2 * window)
        for j in range(-window, window + 1):
            cur[j + window: j + window + len(prev)] += j * prev / norm
        scales.append(cur)
    return tuple(scales)


def kaldi_delta(feats: torch.Tensor, order: int = 2, window: int = 2) -> torch.Tensor:
    """Kaldi ``add-deltas``: append deltas up to ``order`` (edge frames repeated).

    Args:
        feats: ``(T, D)`` tensor.
        order: number of delta orders to append (Kaldi ``--delta-order``, default 2).
        window: Kaldi ``--delta-window`` (default 2, i.e. 5 frames per regression).

    Returns:
        ``(T, D * (order + 1))`` tensor ``[feats, delta, delta-delta, ...]``.
    """
    if feats.dim() != 2:
        raise ValueError(f"feats must be (frames, dim), got shape {tuple(feats.shape)}")
    if order < 0:
        raise ValueError(f"delta order must be >= 0, got {order}")
    outs = [feats]
    T = feats.shape[0]
    for kernel in kaldi_delta_kernels(order, window)[1:]:
        half = len(kernel) // 2
        if T == 0:
            outs.append(feats.clone())
            continue
        idx = torch.arange(-half, T + half, device=feats.device).clamp_(0, T - 1)
        padded = feats[idx]  # (T + 2 half, D), edges repeated
        k = torch.as_tensor(kernel, dtype=feats.dtype, device=feats.device)
        outs.append(padded.unfold(0, len(kernel), 1) @ k)
    return torch.cat(outs, dim=1)
