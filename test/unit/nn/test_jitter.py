"""Time jitter (Chorowski et al. 2019; Tjandra et al. 2020 eq. 11-13)."""
import pytest
import torch

from speechkit.nn.jitter import TemporalJitter, temporal_jitter


def test_identity_at_eval_and_when_off():
    z = torch.randn(2, 10, 3)
    layer = TemporalJitter(0.5).eval()
    assert torch.equal(layer(z), z)
    assert torch.equal(TemporalJitter(0.0).train()(z), z)


@pytest.mark.parametrize("p", [0.075, 0.3])
def test_replacement_statistics_match_p(p):
    """Eq. 11: Categorical(p, 1 - 2p, p) -- each neighbour with probability p (not p / 2)."""
    torch.manual_seed(0)
    B, T = 64, 200
    z = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(B, T, 1).contiguous()
    out = TemporalJitter(p).train()(z)[..., 0]
    delta = out - z[..., 0]
    interior = delta[:, 1:-1]
    n = interior.numel()
    assert set(delta.unique().tolist()) <= {-1.0, 0.0, 1.0}  # only neighbours
    # binomial standard deviation of the frequency is ~0.003 here; allow 5 sigma
    assert (interior != 0).float().mean().item() == pytest.approx(2 * p, abs=0.02)
    assert (interior == -1).float().mean().item() == pytest.approx(p, abs=0.015)
    assert (interior == 1).float().mean().item() == pytest.approx(p, abs=0.015)
    assert n == B * (T - 2)


def test_edges_and_padding_stay_inside_the_utterance():
    torch.manual_seed(0)
    T = 8
    z = torch.arange(T, dtype=torch.float32).view(1, T, 1).repeat(50, 1, 1)
    lengths = torch.full((50,), 5)
    out = temporal_jitter(z, 0.5, lengths)[..., 0]
    assert out[:, :5].min() >= 0 and out[:, :5].max() <= 4  # never reads a padded frame
    assert torch.equal(out[:, 5:], z[:, 5:, 0])  # padded frames untouched
    assert set(out[:, 0].tolist()) <= {0.0, 1.0}


def test_gradient_flows_to_copied_frames():
    z = torch.randn(1, 6, 2, requires_grad=True)
    temporal_jitter(z, 0.5, generator=torch.Generator().manual_seed(0)).sum().backward()
    assert z.grad.sum().item() == pytest.approx(12.0)


def test_bad_probability():
    with pytest.raises(ValueError, match=r"\[0, 0.5\]"):
        TemporalJitter(0.6)
    with pytest.raises(ValueError, match=r"\[0, 0.5\]"):
        temporal_jitter(torch.zeros(1, 3, 1), -0.1)
