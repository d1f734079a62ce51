"""VQ-VAE (Tjandra et al. 2020) and its conv baseline: shapes, masking, losses by hand, errors, overfitting."""
import math
from dataclasses import dataclass, field

import pytest
import torch

from speechkit.models.vqvae import VQVAE, VQVAEConfig, temporal_smoothness
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config

ENCODERS = ["transformer", "conv"]


def make(encoder_type="transformer", **kw) -> VQVAE:
    torch.manual_seed(0)
    kw.setdefault("dropout", 0.0)
    kw.setdefault("num_speakers", 3)
    return VQVAE(VQVAEConfig.small(encoder_type=encoder_type, **kw))


@pytest.mark.parametrize("encoder_type", ENCODERS)
@pytest.mark.parametrize("stride", [1, 2, 4, 8])
def test_shapes_for_strides_and_odd_lengths(encoder_type, stride):
    model = make(encoder_type, stride=stride).eval()
    lengths = torch.tensor([29, 17, 9, 8])
    feats = torch.randn(4, 29, 39)
    out = model(feats, lengths, torch.tensor([0, 1, 2, 0]))
    t_prime = math.ceil(29 / stride)
    assert out.recon.shape == (4, 29, 39)  # decoder output length == input length
    assert out.z_e.shape == out.z_q.shape == (4, t_prime, 32)
    assert out.codes.shape == out.mask.shape == (4, t_prime) and out.codes.dtype == torch.long
    assert out.out_lengths.tolist() == [math.ceil(n / stride) for n in (29, 17, 9, 8)]
    assert out.mask.sum(1).tolist() == out.out_lengths.tolist()
    assert torch.all(out.recon[1, 17:] == 0) and torch.all(out.z_e[2, math.ceil(9 / stride):] == 0)
    codes, z_e, z_q, out_lengths = model.encode(feats, lengths)
    assert torch.equal(codes, out.codes) and torch.equal(out_lengths, out.out_lengths)
    assert torch.allclose(z_e, out.z_e) and torch.allclose(z_q, out.z_q, atol=1e-6)


@pytest.mark.parametrize("encoder_type", ENCODERS)
def test_padded_batch_equals_singletons(encoder_type):
    model = make(encoder_type).eval()
    lengths = torch.tensor([23, 10])
    feats = torch.randn(2, 23, 39)
    feats[1, 10:] = 50.0  # garbage padding
    spk = torch.tensor([1, 2])
    out = model(feats, lengths, spk)
    frame_losses = []
    for b in range(2):
        alone = model(feats[b: b + 1, : lengths[b]], lengths[b: b + 1], spk[b: b + 1])
        n = int(out.out_lengths[b])
        assert torch.allclose(out.recon[b, : lengths[b]], alone.recon[0], atol=1e-4)
        assert torch.allclose(out.z_e[b, :n], alone.z_e[0], atol=1e-5)
        assert torch.equal(out.codes[b, :n], alone.codes[0])
        frame_losses.append((alone.losses["recon"] * lengths[b], alone.losses["commitment"] * n))
    # losses are averaged over valid frames: the batch mean is the frame-weighted mean of the singletons
    recon = sum(r for r, _ in frame_losses) / lengths.sum()
    commit = sum(c for _, c in frame_losses) / out.out_lengths.sum()
    assert out.losses["recon"].item() == pytest.approx(recon.item(), rel=1e-5)
    assert out.losses["commitment"].item() == pytest.approx(commit.item(), rel=1e-5)


def test_padding_never_reaches_the_codebook_in_training():
    lengths = torch.tensor([20, 12])
    feats = torch.randn(2, 20, 39)
    spk = torch.tensor([0, 1])
    codebooks = []
    for garbage in (0.0, 1e3):
        model = make().train()
        x = feats.clone()
        x[1, 12:] = garbage
        out = model(x, lengths, spk)
        assert model.quantizer.commit_update()  # the optimizer step would apply it
        codebooks.append(model.quantizer.codebook.clone())
        assert out.stats["codes_used"] >= 1
    assert torch.allclose(codebooks[0], codebooks[1])
    assert not torch.allclose(codebooks[0], make().quantizer.codebook)  # it was updated


def test_losses_by_hand():
    model = make(smoothing_weight=0.5, commitment_cost=0.25).eval()
    lengths = torch.tensor([16, 11])
    feats = torch.randn(2, 16, 39)
    out = model(feats, lengths, torch.tensor([0, 1]))
    recon = sum(((out.recon[b, :n] - feats[b, :n]) ** 2).sum() for b, n in enumerate(lengths.tolist())) / 27
    assert out.losses["recon"].item() == pytest.approx(recon.item(), rel=1e-5)
    n_codes = out.out_lengths.tolist()
    e = model.quantizer.codebook[out.codes]
    commit = 0.25 * sum(((out.z_e[b, :n] - e[b, :n]) ** 2).sum() for b, n in enumerate(n_codes)) / sum(n_codes)
    assert out.losses["commitment"].item() == pytest.approx(commit.item(), rel=1e-5)
    pairs = [(b, t) for b, n in enumerate(n_codes) for t in range(n - 1)]
    # eq. 9-10: lambda * SUM over pairs, divided by the 27 input frames as the reconstruction term
    smooth = sum(((out.z_e[b, t] - out.z_e[b, t + 1]) ** 2).sum() for b, t in pairs) / 27
    assert out.losses["smoothing"].item() == pytest.approx(0.5 * smooth.item(), rel=1e-5)
    total = out.losses["recon"] + out.losses["commitment"] + out.losses["smoothing"]
    assert out.losses["total"].item() == pytest.approx(total.item())
    assert make().eval()(feats, lengths, torch.tensor([0, 1])).losses["smoothing"].item() == 0.0


def test_temporal_smoothness_hand_case():
    z = torch.tensor([[[0.0], [1.0], [3.0], [99.0]], [[1.0], [1.0], [0.0], [0.0]]])
    # utt 0 (3 valid): (1-0)^2 + (3-1)^2 = 5; utt 1 (2 valid): 0 -> a sum of 5 (eq. 9), not a mean
    assert temporal_smoothness(z, torch.tensor([3, 2])).item() == pytest.approx(5.0)
    assert temporal_smoothness(z[:, :1], torch.tensor([1, 1])).item() == 0.0


def test_gradients_encoder_gets_commitment_codebook_gets_none():
    model = make().train()
    out = model(torch.randn(2, 12, 39), torch.tensor([12, 9]), torch.tensor([0, 1]))
    out.losses["commitment"].backward()
    assert model.encoder.output.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.decoder.parameters())
    assert "codebook" not in dict(model.named_parameters()) and "quantizer.codebook" in model.state_dict()


def test_encode_never_updates_the_codebook():
    model = make().train()
    before = model.quantizer.codebook.clone()
    model.encode(torch.randn(1, 12, 39), torch.tensor([12]))
    assert torch.equal(model.quantizer.codebook, before)


def test_speaker_conditioning_and_decode():
    model = make().eval()
    feats, lengths = torch.randn(1, 14, 39), torch.tensor([14])
    a = model(feats, lengths, torch.tensor([0]))
    b = model(feats, lengths, torch.tensor([2]))
    assert torch.equal(a.codes, b.codes) and not torch.allclose(a.recon, b.recon)
    assert torch.allclose(model.decode(a.z_q, lengths, torch.tensor([2])), b.recon, atol=1e-6)
    with pytest.raises(ValueError, match="speakers"):
        model(feats, lengths)
    with pytest.raises(ValueError, match="out of range"):
        model(feats, lengths, torch.tensor([3]))


def test_jitter_only_in_training():
    model = make(jitter_prob=0.5)
    feats, lengths, spk = torch.randn(1, 40, 39), torch.tensor([40]), torch.tensor([0])
    model.eval()
    assert torch.equal(model(feats, lengths, spk).recon, model(feats, lengths, spk).recon)
    model.jitter.train()  # jitter on, everything else (codebook updates) frozen
    r1, r2 = model(feats, lengths, spk).recon, model(feats, lengths, spk).recon
    assert not torch.allclose(r1, r2)
    assert repr(model.jitter) == "TemporalJitter(p=0.5)"


def test_utterance_shorter_than_stride_is_an_error():
    model = make(stride=8).eval()
    with pytest.raises(ValueError, match=r"has 5 frames, shorter than the total stride 8"):
        model(torch.randn(2, 12, 39), torch.tensor([12, 5]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="stride 8"):
        model.encode(torch.randn(1, 7, 39), torch.tensor([7]))


@pytest.mark.parametrize("key,value", [("codebook_size", 0), ("codebook_size", -3), ("stride", 3), ("stride", 0),
                                       ("jitter_prob", 1.5), ("jitter_prob", 0.6), ("smoothing_weight", -1.0), ("encoder_type", "rnn"),
                                       ("encoder_dim", 30)])
def test_bad_config_names_the_key(key, value):
    with pytest.raises(ConfigError, match=rf"'{key}'"):
        VQVAEConfig(**{key: value})


@dataclass
class _TaskConfig:
    """Attributes:
        model: the VQ-VAE.
    """
    model: VQVAEConfig = field(default_factory=VQVAEConfig)


def test_bad_config_from_yaml_names_file_and_dotted_key(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("model:\n  codebook_size: 0\n")
    with pytest.raises(ConfigError, match=r"train\.yaml: key 'model\.codebook_size': must be a positive integer"):
        load_config(_TaskConfig, path)
    cfg = load_config(_TaskConfig, None, ["model.stride=8", "model.encoder_type=conv"])
    assert cfg.model.stride == 8 and VQVAE(cfg.model).stride == 8


@pytest.mark.parametrize("encoder_type", ENCODERS)
def test_overfits_a_tiny_batch(encoder_type):
    """Piecewise-constant 'phones' from 8 prototypes: 40 Adam steps cut the reconstruction loss by > 3x."""
    model = make(encoder_type, num_speakers=2).train()
    g = torch.Generator().manual_seed(1)
    prototypes = torch.randn(8, 39, generator=g)
    feats = prototypes[torch.randint(0, 8, (4, 10), generator=g)].repeat_interleave(4, dim=1)
    spk = torch.tensor([0, 1, 0, 1])
    feats = feats + 0.5 * spk[:, None, None]
    lengths = torch.tensor([40, 36, 33, 40])
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(40):
        out = model(feats, lengths, spk)
        opt.zero_grad()
        out.losses["total"].backward()
        opt.step()
        first = first if first is not None else out.losses["recon"].item()
    model.eval()
    final = model(feats, lengths, spk).losses["recon"].item()
    assert final < first / 3, (first, final)


def _train_step(model, opt, feats, lengths, spk) -> bool:
    """One step as speechkit.train.Trainer takes it: the update is skipped for a non-finite gradient norm."""
    out = model(feats, lengths, spk)
    out.losses["total"].backward()
    norm = float(torch.nn.utils.clip_grad_norm_(list(model.parameters()), 5.0))
    stepped = math.isfinite(norm)
    if stepped:
        opt.step()
    opt.zero_grad(set_to_none=True)
    return stepped


@pytest.mark.parametrize("set_to_none", [True, False])
def test_a_skipped_step_never_updates_the_ema_codebook(caplog, set_to_none):
    """A NaN batch: the step is skipped, and so is its EMA update (deferred to the optimizer step)."""
    lengths, spk = torch.tensor([16, 12]), torch.tensor([0, 1])
    good = [torch.randn(2, 16, 39, generator=torch.Generator().manual_seed(s)) for s in (1, 2)]
    bad = good[0].clone()
    bad[0, 3, 5] = float("nan")

    def run(batches):
        model = make().train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        zero = opt.zero_grad
        opt.zero_grad = lambda set_to_none=set_to_none: zero(set_to_none=set_to_none)
        steps = [_train_step(model, opt, b, lengths, spk) for b in batches]
        return model, steps

    model, steps = run([good[0], bad, good[1]])
    assert steps == [True, False, True]
    reference, _ = run([good[0], good[1]])  # the same run without the NaN batch
    assert torch.isfinite(model.quantizer.codebook).all()
    assert torch.allclose(model.quantizer.codebook, reference.quantizer.codebook, atol=1e-6)
    assert torch.allclose(model.quantizer.ema_count, reference.quantizer.ema_count)
    assert not torch.allclose(reference.quantizer.codebook, make().quantizer.codebook)  # updates did happen
    assert "EMA codebook update is discarded" in caplog.text
    # after the NaN batch alone, before the next forward, the codebook is that of the first step
    model, _ = run([good[0]])
    after_one = model.quantizer.codebook.clone()
    model, _ = run([good[0], bad])
    assert torch.equal(model.quantizer.codebook, after_one)


def test_accumulated_micro_batches_make_one_ema_step():
    """Two forwards before one optimizer step: one EMA step with the summed statistics."""
    lengths, spk = torch.tensor([16, 16]), torch.tensor([0, 1])
    x = torch.randn(2, 16, 39)
    model = make().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for half in (slice(0, 1), slice(1, 2)):
        model(x[half], lengths[half], spk[half]).losses["total"].backward()
    assert model.quantizer.has_pending_update
    opt.step()
    assert not model.quantizer.has_pending_update
    whole = make().train()
    whole(x, lengths, spk)  # one forward over both utterances
    assert whole.quantizer.commit_update()
    assert torch.allclose(model.quantizer.codebook, whole.quantizer.codebook, atol=1e-6)
