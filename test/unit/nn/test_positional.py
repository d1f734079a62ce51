"""Sinusoidal positional encoding vs the formula of Vaswani et al. 2017, sec. 3.5."""
import math

import pytest
import torch

from speechkit.nn.positional import SinusoidalPositionalEncoding, sinusoidal_table


def test_table_matches_formula_by_hand():
    table = sinusoidal_table(7, 6)
    assert table.shape == (7, 6)
    for pos in range(7):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_odd_dim_and_offset():
    odd = sinusoidal_table(4, 5)  # columns sin, cos, sin, cos, sin with wavelengths from d = 5
    assert odd.shape == (4, 5)
    assert odd[3, 4].item() == pytest.approx(math.sin(3 / 10000 ** (4 / 5)), abs=1e-6)
    assert odd[3, 3].item() == pytest.approx(math.cos(3 / 10000 ** (2 / 5)), abs=1e-6)
    assert torch.allclose(sinusoidal_table(3, 8, offset=5), sinusoidal_table(8, 8)[5:])
    with pytest.raises(ValueError):
        sinusoidal_table(3, 0)


def test_module_adds_scaled_input_and_grows_cache():
    pe = SinusoidalPositionalEncoding(8, scale_input=True)
    x = torch.randn(2, 5, 8)
    assert torch.allclose(pe(x), x * math.sqrt(8) + sinusoidal_table(5, 8))
    x = torch.randn(1, 11, 8)  # longer than the cached table
    assert torch.allclose(pe(x), x * math.sqrt(8) + sinusoidal_table(11, 8))
    assert torch.allclose(SinusoidalPositionalEncoding(8, scale_input=False)(x), x + sinusoidal_table(11, 8))
    with pytest.raises(ValueError, match="last dim 8"):
        pe(torch.randn(1, 3, 4))
