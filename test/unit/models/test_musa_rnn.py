"""MUSA-RNN: shapes, parameter count by hand, state continuity, causality."""
from __future__ import annotations

import pytest
import torch

from speechkit.models.musa_rnn import MusaRnn, MusaRnnConfig, detach_state
from speechkit.models.salad import count_parameters


def tiny(**kw) -> MusaRnnConfig:
    base = dict(input_dim=7, output_dim=5, embed_dim=8, hidden_size=6, dropout=0.0)
    base.update(kw)
    return MusaRnnConfig(**base)


def lstm_params(inp: int, hid: int) -> int:
    return 4 * hid * (inp + hid) + 8 * hid  # W_ih, W_hh, b_ih, b_hh


def test_shapes_and_parameter_count():
    m = MusaRnn(tiny())
    y, (hid, out) = m(torch.randn(3, 11, 7))
    assert y.shape == (3, 11, 5) and hid[0].shape == (1, 3, 6) and out[0].shape == (1, 3, 5)
    assert count_parameters(m) == 7 * 8 + 8 + lstm_params(8, 6) + lstm_params(6, 5)


@pytest.mark.parametrize("embed,hidden,expected", [(128, 450, 1_175_860), (512, 1300, 9_851_020)])
def test_paper_sizes(embed, hidden, expected):
    """Table 1 sizes with the paper's 364 inputs give Table 2's 1.17 M / 9.85 M."""
    assert count_parameters(MusaRnn(MusaRnnConfig(input_dim=364, embed_dim=embed, hidden_size=hidden))) == expected


def test_state_carried_equals_one_pass():
    torch.manual_seed(0)
    m = MusaRnn(tiny()).eval()
    x = torch.randn(2, 30, 7)
    whole, _ = m(x)
    y1, s = m(x[:, :12])
    y2, _ = m(x[:, 12:], detach_state(s))
    assert torch.allclose(torch.cat([y1, y2], 1), whole, atol=1e-6)
    assert torch.allclose(m.infer(x), whole)
    assert all(not t.requires_grad for pair in detach_state(s) for t in pair)


def test_causal():
    torch.manual_seed(0)
    m = MusaRnn(tiny()).eval()
    x = torch.randn(1, 20, 7)
    x2 = x.clone()
    x2[:, 10:] += 5.0
    assert torch.allclose(m(x)[0][:, :10], m(x2)[0][:, :10])


def test_errors():
    with pytest.raises(ValueError, match="input_dim is 0"):
        MusaRnn(MusaRnnConfig())
    with pytest.raises(ValueError, match=r"expected labels \(B, T, 7\)"):
        MusaRnn(tiny())(torch.randn(1, 3, 4))
