"""Codebook inverter (Tjandra et al. 2020 sec. 4): repetition, lengths, masking, loss (eq. 14), overfitting."""
import pytest
import torch

from speechkit.models.inverter import CodebookInverter, InverterConfig, inverter_loss
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import from_dict


def make(**kw) -> CodebookInverter:
    torch.manual_seed(0)
    kw.setdefault("dropout", 0.0)
    return CodebookInverter(InverterConfig.small(**kw))


def test_shapes_and_default_lengths():
    model = make(upsample_ratio=4).eval()
    codes = torch.randint(0, 64, (3, 7))
    lengths = torch.tensor([7, 5, 1])
    spec, out_lengths = model(codes, lengths)
    assert spec.shape == (3, 28, 257) and out_lengths.tolist() == [28, 20, 4]
    assert torch.all(spec >= 0)  # softplus magnitudes
    assert torch.all(spec[1, 20:] == 0) and torch.all(spec[2, 4:] == 0)


def test_target_lengths_cut_or_extend_and_bad_lengths_fail():
    model = make(upsample_ratio=4).eval()
    codes, lengths = torch.randint(0, 64, (2, 5)), torch.tensor([5, 5])
    spec, out_lengths = model(codes, lengths, target_lengths=torch.tensor([18, 23]))
    assert spec.shape == (2, 23, 257) and out_lengths.tolist() == [18, 23]
    with pytest.raises(ValueError, match=r"30 spectrogram frames do not match 5 codes x upsample_ratio 4"):
        model(codes, lengths, target_lengths=torch.tensor([20, 30]))
    with pytest.raises(ValueError, match="out of range"):
        model(torch.tensor([[64]]), torch.tensor([1]))


def test_each_code_is_repeated_r_times():
    """Without positions and with 1x1 convolutions only, frames of the same code get the same output."""
    model = make(upsample_ratio=3, conv_kernel_sizes=[1], transformer_layers=0).eval()
    model.pos.xscale, model.pos.table = 1.0, lambda n, device, dtype: torch.zeros(n, model.cfg.model_dim)
    spec, _ = model(torch.tensor([[3, 9, 3]]), torch.tensor([3]))
    frames = spec[0]
    for s in range(9):
        assert torch.allclose(frames[s], frames[(s // 3) * 3], atol=1e-6)
    assert torch.allclose(frames[0], frames[6], atol=1e-6)  # same code, same frames
    assert not torch.allclose(frames[0], frames[3])


def test_padded_batch_equals_singletons_and_vectors_equal_codes():
    model = make(upsample_ratio=2, num_speakers=2).eval()
    codes = torch.randint(0, 64, (2, 6))
    lengths, spk = torch.tensor([6, 3]), torch.tensor([1, 0])
    spec, out_lengths = model(codes, lengths, spk)
    for b in range(2):
        alone, _ = model(codes[b: b + 1, : lengths[b]], lengths[b: b + 1], spk[b: b + 1])
        assert torch.allclose(spec[b, : out_lengths[b]], alone[0], atol=1e-5)
    vectors = model.code_embedding(codes)
    assert torch.allclose(model(vectors, lengths, spk)[0], spec)
    other, _ = model(codes, lengths, torch.tensor([0, 1]))
    assert not torch.allclose(other, spec)  # the target voice matters
    with pytest.raises(ValueError, match="speakers"):
        model(codes, lengths)


def test_init_from_codebook():
    model = make()
    codebook = torch.randn(64, 32)
    model.init_from_codebook(codebook)
    assert torch.equal(model.code_embedding.weight, codebook) and not model.code_embedding.weight.requires_grad
    with pytest.raises(ValueError, match="expected"):
        model.init_from_codebook(torch.randn(10, 32))


def test_loss_by_hand():
    pred = torch.tensor([[[1.0, 2.0], [0.0, 0.0], [9.0, 9.0]], [[0.0, 1.0], [5.0, 5.0], [5.0, 5.0]]])
    target = torch.zeros_like(pred)
    # utt 0 (2 valid frames): 1 + 4 and 0; utt 1 (1 valid frame): 1 -> 6 / 3
    assert inverter_loss(pred, target, torch.tensor([2, 1])).item() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        inverter_loss(pred, target[:, :2], torch.tensor([2, 1]))


@pytest.mark.parametrize("key,value", [("codebook_size", 0), ("upsample_ratio", 0), ("conv_kernel_sizes", []),
                                       ("output_activation", "exp"), ("model_dim", 30)])
def test_bad_config_names_the_key(key, value):
    with pytest.raises(ConfigError, match=rf"'{key}'"):
        InverterConfig(**{key: value})


def test_config_loads_from_overrides():
    cfg = from_dict(InverterConfig, {"conv_kernel_sizes": [3, 9], "upsample_ratio": 8})
    assert cfg.conv_kernel_sizes == [3, 9] and CodebookInverter(cfg).cfg.upsample_ratio == 8
    with pytest.raises(ConfigError, match=r"key 'conv_kernel_sizes'"):
        from_dict(InverterConfig, {"conv_kernel_sizes": []})


def test_overfits_a_tiny_batch():
    model = make(upsample_ratio=2, output_dim=33)
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 8, (2, 6), generator=g)
    lengths = torch.tensor([6, 4])
    target_lengths = torch.tensor([12, 7])
    table = torch.rand(8, 33, generator=g) * 3  # each code has its own magnitude spectrum
    target = table[codes].repeat_interleave(2, dim=1)[:, :12]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        spec, out_lengths = model(codes, lengths, target_lengths=target_lengths)
        loss = inverter_loss(spec, target, out_lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 5, losses[::10]
