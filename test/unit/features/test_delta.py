"""Delta features vs librosa (Savitzky-Golay) and vs a brute-force Kaldi add-deltas."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.features.delta import kaldi_delta, savgol_delta, savgol_operator


@pytest.mark.parametrize("T", [9, 10, 57])
@pytest.mark.parametrize("order", [1, 2])
def test_savgol_delta_matches_librosa(T, order):
    librosa = pytest.importorskip("librosa")
    x = np.random.default_rng(T).standard_normal((T, 13)) * 10
    ref = librosa.feature.delta(x.T, width=9, order=order, mode="interp").T
    got = savgol_delta(torch.from_numpy(x), width=9, order=order).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-10)


@pytest.mark.parametrize("width", [3, 5, 7])
def test_savgol_delta_other_widths_match_librosa(width):
    librosa = pytest.importorskip("librosa")
    x = np.random.default_rng(width).standard_normal((20, 3))
    for order in (1, 2):
        ref = librosa.feature.delta(x.T, width=width, order=order).T
        np.testing.assert_allclose(savgol_delta(torch.from_numpy(x), width, order).numpy(), ref, atol=1e-10)


def test_savgol_delta_exact_on_polynomials():
    # a quadratic has exact first derivative 2at + b and second derivative 2a everywhere (edges too)
    t = torch.arange(30, dtype=torch.float64)[:, None]
    x = 0.5 * t**2 - 3 * t + 7
    torch.testing.assert_close(savgol_delta(x, 9, 2), torch.full_like(x, 1.0))
    # the order-1 fit is linear: exact on a line, and on a quadratic exact in the interior
    line = 2.0 * t + 1
    torch.testing.assert_close(savgol_delta(line, 9, 1), torch.full_like(line, 2.0))
    torch.testing.assert_close(savgol_delta(x, 9, 1)[4:-4], (t - 3)[4:-4])


def test_savgol_delta_short_inputs():
    x = torch.tensor([[1.0], [3.0], [5.0]], dtype=torch.float64)  # 3 frames < width 9: one fit over all
    torch.testing.assert_close(savgol_delta(x, 9, 1), torch.full_like(x, 2.0))
    torch.testing.assert_close(savgol_delta(x[:1], 9, 1), torch.zeros(1, 1, dtype=torch.float64))
    assert savgol_delta(torch.zeros(0, 4), 9, 1).shape == (0, 4)
    with pytest.raises(ValueError, match="odd"):
        savgol_delta(x, 8, 1)


def test_savgol_operator_rows_sum():
    op = savgol_operator(9, 2, 0)  # deriv 0: smoothing, rows sum to 1
    np.testing.assert_allclose(op.sum(1), np.ones(9))


def _kaldi_brute(x: np.ndarray, order: int, N: int = 2) -> np.ndarray:
    """Kaldi DeltaFeatures by its definition: scales built by repeated convolution, edges clamped."""
    T = len(x)
    scales = [np.array([1.0])]
    norm = sum(j * j for j in range(-N, N + 1))
    for _ in range(order):
        prev = scales[-1]
        cur = np.zeros(len(prev) + 2 * N)
        for j in range(-N, N + 1):
            for k in range(len(prev)):
                cur[j + N + k] += j * prev[k] / norm
        scales.append(cur)
    out = []
    for s in scales:
        h = len(s) // 2
        out.append(np.stack([sum(s[j + h] * x[min(max(t + j, 0), T - 1)] for j in range(-h, h + 1))
                             for t in range(T)]))
    return np.concatenate(out, axis=1)


def test_kaldi_delta_vs_brute_force():
    x = np.random.default_rng(0).standard_normal((12, 4))
    got = kaldi_delta(torch.from_numpy(x), order=2, window=2).numpy()
    np.testing.assert_allclose(got, _kaldi_brute(x, 2), atol=1e-12)
    # first delta on a ramp: slope 1 in the interior (regression formula), smaller at clamped edges
    ramp = torch.arange(10, dtype=torch.float64)[:, None]
    d = kaldi_delta(ramp, order=1)[:, 1]
    torch.testing.assert_close(d[2:-2], torch.ones(6, dtype=torch.float64))
    assert d[0] < 1


@pytest.mark.parametrize("T", [1, 5, 9, 40])
def test_append_savgol_deltas_equals_separate_orders(T):
    from speechkit.features.delta import append_savgol_deltas

    x = torch.from_numpy(np.random.default_rng(T).standard_normal((T, 13)).astype(np.float32))
    ref = torch.cat([x, savgol_delta(x, 9, 1), savgol_delta(x, 9, 2)], dim=1)
    torch.testing.assert_close(append_savgol_deltas(x, 9, 2), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(append_savgol_deltas(x, 9, 0), x)
