"""SALAD: shapes, parameter count by hand, positions with an offset, normalisation buffers."""
from __future__ import annotations

import pytest
import torch

from speechkit.models.salad import OutputNormalizer, Salad, SaladConfig, count_parameters, format_parameters
from speechkit.nn.positional import sinusoidal_table
from speechkit.utils.config import FieldError


def tiny(**kw) -> SaladConfig:
    base = dict(input_dim=7, output_dim=5, embed_dim=8, num_blocks=2, num_heads=2, ff_dim=12,
                attention_dropout=0.0, ff_dropout=0.0, position_dropout=0.0)
    base.update(kw)
    return SaladConfig(**base)


def test_shapes_and_sigmoid():
    m = Salad(tiny()).eval()
    x = torch.randn(3, 11, 7)
    assert m(x).shape == (3, 11, 5)
    with torch.no_grad():
        y = Salad(tiny(output_activation="sigmoid")).eval()(x)
    assert float(y.min()) > 0 and float(y.max()) < 1
    with pytest.raises(ValueError, match=r"expected labels \(B, T, 7\)"):
        m(torch.randn(3, 11, 6))


def test_parameter_count_by_hand():
    D, d, f, O, N = 7, 8, 12, 5, 2
    embed = D * d + d
    attn = 4 * (d * d + d)                 # q, k, v (one in_proj) and out projections
    ffn = d * f + f + f * d + d
    norms = 2 * 2 * d
    out = d * O + O + 2 * d                # final layer norm + linear adapter
    assert count_parameters(Salad(tiny())) == embed + N * (attn + ffn + norms) + out
    assert format_parameters(1_042_091) == "1.04 M"


@pytest.mark.parametrize("embed,ff,expected", [(128, 1024, 1_042_091), (512, 2048, 9_667_115)])
def test_paper_sizes(embed, ff, expected):
    """Table 1 sizes with N = 3 and the paper's 364 inputs give Table 2's 1.04 M / 9.66 M."""
    assert count_parameters(Salad(SaladConfig(input_dim=364, embed_dim=embed, ff_dim=ff))) == expected


def test_positional_offset_is_a_table_shift():
    full = sinusoidal_table(50, 8)
    assert torch.allclose(sinusoidal_table(20, 8, offset=30), full[30:], atol=1e-6)


def test_offset_window_equals_positions_of_the_stream():
    """A window at offset k sees exactly rows k.. of the position table (checked by the embedding)."""
    torch.manual_seed(0)
    m = Salad(tiny(num_blocks=0)).eval()
    x = torch.randn(1, 30, 7)
    h = m.embedding(x)
    captured = []
    m.norm.register_forward_hook(lambda mod, inp, out: captured.append(inp[0]))
    m(x[:, 10:], offset=10)
    z = captured[0]  # with no blocks, the input of the final norm is the embedding plus positions
    assert torch.allclose(z, h[:, 10:] + sinusoidal_table(30, 8)[10:], atol=1e-6)
    # the offset matters (positions are not all equal)
    assert not torch.allclose(m(x[:, 10:], offset=10), m(x[:, 10:], offset=0))


def test_padding_does_not_leak():
    torch.manual_seed(0)
    m = Salad(tiny()).eval()
    x = torch.randn(2, 9, 7)
    x2 = x.clone()
    x2[1, 6:] = 100.0
    y = m(x2, lengths=torch.tensor([9, 6]))
    assert torch.allclose(y[1, :6], m(x[1:2, :6])[0], atol=1e-5)


def test_dropouts_are_separate():
    m = Salad(tiny(attention_dropout=0.1, ff_dropout=0.5, position_dropout=0.3))
    b = m.blocks[0]
    assert b.attn.dropout == 0.1 and b.attn_dropout.p == 0.1
    assert b.ff[2].p == 0.5 and b.ff_dropout.p == 0.5 and m.position_dropout.p == 0.3


def test_scale_embedding_multiplies_by_sqrt_d_before_the_positions():
    """scale_embedding (Vaswani et al. 2017 sec. 3.4): z = sqrt(d) ReLU(W x + b) + c_t, same parameters."""
    torch.manual_seed(0)
    plain = Salad(tiny(num_blocks=0)).eval()
    scaled = Salad(tiny(num_blocks=0, scale_embedding=True)).eval()
    scaled.load_state_dict(plain.state_dict())
    assert count_parameters(plain) == count_parameters(scaled)
    x = torch.randn(2, 9, 7)
    h = torch.relu(plain.embedding.proj(x))
    pe = sinusoidal_table(9, 8, offset=3)
    with torch.no_grad():
        for model, z in ((plain, h + pe), (scaled, 8 ** 0.5 * h + pe)):
            assert torch.allclose(model(x, offset=3), model.output(model.norm(z)), atol=1e-6)
        assert not torch.allclose(plain(x), scaled(x), atol=1e-3)
    with pytest.raises(FieldError, match="scale_embedding"):
        SaladConfig(scale_embedding="yes")


def test_config_errors():
    with pytest.raises(FieldError, match="embed_dim"):
        SaladConfig(embed_dim=10, num_heads=4)
    with pytest.raises(FieldError, match="ff_dropout"):
        SaladConfig(ff_dropout=1.0)
    with pytest.raises(ValueError, match="input_dim is 0"):
        Salad(SaladConfig())


def test_output_normalizer():
    n = OutputNormalizer(3)
    n.set_stats(torch.tensor([0.0, -1.0, 2.0]), torch.tensor([2.0, 1.0, 2.0]))
    y = torch.tensor([[1.0, 0.0, 2.0]])
    assert torch.allclose(n.normalize(y), torch.tensor([[0.5, 0.5, 0.0]]))
    assert torch.allclose(n.denormalize(n.normalize(y)), y)
    assert set(n.state_dict()) == {"minimum", "range"}
    with pytest.raises(ValueError, match="maximum >= minimum"):
        n.set_stats(torch.ones(3), torch.zeros(3))
