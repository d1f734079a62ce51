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
    """Eq. 11: Categorical(p, p, 1 - 2p) -- each neighbour with probability p (not p / 2)."""
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


def test_categories_in_the_order_of_eq_11_and_12():
    """Eq. 11-12 as written: j = 1 (u < p) takes c_{t-1}, j = 2 (p <= u < 2p) takes c_{t+1}, j = 3 keeps c_t;
    at t = 1 a j = 1 and at t = T a j = 2 keep c_t ("else")."""
    p, B, T = 0.2, 16, 40
    z = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(B, T, 1).contiguous()
    out = temporal_jitter(z, p, generator=torch.Generator().manual_seed(3))[..., 0]
    u = torch.rand(B, T, generator=torch.Generator().manual_seed(3))  # the draws the function made
    pos = torch.arange(T, dtype=torch.float32).expand(B, T)
    j1, j2 = u < p, (u >= p) & (u < 2 * p)
    expected = torch.where(j1, pos - 1, torch.where(j2, pos + 1, pos)).clamp(0, T - 1)
    assert torch.equal(out, expected)
    assert j1[:, 0].any() and j2[:, -1].any()  # both boundary cases occur in these draws
    assert torch.equal(out[:, 0][j1[:, 0]], torch.zeros(int(j1[:, 0].sum())))
    assert torch.equal(out[:, -1][j2[:, -1]], torch.full((int(j2[:, -1].sum()),), T - 1.0))


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
