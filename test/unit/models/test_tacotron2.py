"""Tacotron 2 (Shen et al. 2018) with location-sensitive attention: shapes, masks, attention against a
brute-force reference, stop token, speaker conditioning, a tiny overfit, the paper-size parameter count,
and mel -> waveform by Griffin-Lim."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from speechkit.decode.griffin_lim import mel_to_waveform
from speechkit.models.tacotron2 import (
    LocationSensitiveAttention,
    Tacotron2,
    Tacotron2Config,
    ZoneoutLSTMCell,
    count_parameters,
    guided_attention_weights,
    length_mask,
    stop_targets,
)
from speechkit.utils.config import ConfigError, load_config

N_MELS, SPK = 6, 4


def tiny_config(**kw) -> Tacotron2Config:
    base = dict(num_phones=9, n_mels=N_MELS, speaker_dim=SPK, embed_dim=16, encoder_conv_layers=2,
                encoder_conv_channels=16, encoder_kernel=3, encoder_lstm_units=8, attention_dim=8,
                attention_filters=4, attention_kernel=5, prenet_dim=12, decoder_lstm_units=16,
                postnet_layers=3, postnet_channels=8, postnet_kernel=3)
    base.update(kw)
    return Tacotron2Config(**base)


def batch(seed: int = 0, frames=(11, 7), phones=(5, 3)):
    g = torch.Generator().manual_seed(seed)
    b = len(frames)
    ph = torch.zeros(b, max(phones), dtype=torch.long)
    for i, n in enumerate(phones):
        ph[i, :n] = torch.randint(1, 9, (n,), generator=g)
    mels = torch.randn(b, max(frames), N_MELS, generator=g)
    return ph, torch.tensor(phones), mels, torch.tensor(frames), torch.randn(b, SPK, generator=g)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_forward_shapes(r):
    torch.manual_seed(0)
    model = Tacotron2(tiny_config(reduction_factor=r))
    ph, pl, mels, ml, spk = batch()
    out = model(ph, pl, mels, spk, ml)
    assert out.mel_before.shape == out.mel_after.shape == (2, 11, N_MELS)
    assert out.stop_logits.shape == (2, 11)
    assert out.alignments.shape == (2, math.ceil(11 / r), 5)
    assert torch.isfinite(out.mel_after).all()


def test_attention_sums_to_one_and_is_zero_on_padding():
    torch.manual_seed(1)
    model = Tacotron2(tiny_config())
    ph, pl, mels, ml, spk = batch(phones=(5, 2))
    a = model(ph, pl, mels, spk, ml).alignments  # (2, 11, 5)
    torch.testing.assert_close(a.sum(-1), torch.ones(2, 11))
    assert torch.equal(a[1, :, 2:], torch.zeros(11, 3))
    assert (a[1, :, :2] > 0).all()


def test_location_sensitive_attention_against_brute_force():
    """Chorowski et al. eqs. 8-9 written out with loops over positions, filters and taps."""
    torch.manual_seed(2)
    att = LocationSensitiveAttention(query_dim=5, memory_dim=3, attention_dim=4, filters=2, kernel=3)
    q, mem = torch.randn(1, 5), torch.randn(1, 4, 3)
    prev = torch.tensor([[0.1, 0.6, 0.3, 0.0]])
    cum = torch.tensor([[0.5, 1.2, 0.3, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    ctx, w = att(q, mem, att.process_memory(mem), prev, cum, mask)

    W, V, b = att.query_layer.weight, att.memory_layer.weight, att.memory_layer.bias
    Fk, U, v = att.location_conv.weight, att.location_layer.weight, att.v.weight[0]  # Fk: (2 filters, 2 ch, 3)
    chans = torch.stack([prev[0], cum[0]])  # (2, N)
    e = []
    for j in range(3):
        f = torch.zeros(2)
        for k in range(2):
            for c in range(2):
                for t in range(3):
                    jj = j + t - 1
                    if 0 <= jj < 4:
                        f[k] += Fk[k, c, t] * chans[c, jj]
        e.append(v @ torch.tanh(W @ q[0] + V @ mem[0, j] + b + U @ f))
    e = torch.stack(e)
    ref = torch.exp(e) / torch.exp(e).sum()
    torch.testing.assert_close(w[0, :3], ref)
    assert w[0, 3] == 0
    torch.testing.assert_close(ctx[0], (ref[:, None] * mem[0, :3]).sum(0))


def test_padded_batch_equals_items_alone():
    """Masks in the encoder convolutions, the BiLSTM, the attention and the postnet: each utterance of a
    padded batch gets exactly what it gets alone (eval mode, no prenet dropout)."""
    torch.manual_seed(3)
    model = Tacotron2(tiny_config(prenet_dropout=0.0, reduction_factor=2)).eval()
    ph, pl, mels, ml, spk = batch(frames=(11, 6), phones=(5, 3))
    with torch.no_grad():
        out = model(ph, pl, mels, spk, ml)
        for i in range(2):
            n, t = int(pl[i]), int(ml[i])
            alone = model(ph[i:i + 1, :n], pl[i:i + 1], mels[i:i + 1, :t], spk[i:i + 1], ml[i:i + 1])
            torch.testing.assert_close(out.mel_after[i, :t], alone.mel_after[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(out.stop_logits[i, :t], alone.stop_logits[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(out.alignments[i, : -(-t // 2), :n], alone.alignments[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("r", [1, 3])
def test_inference_stop_token(r):
    torch.manual_seed(4)
    model = Tacotron2(tiny_config(reduction_factor=r)).eval()
    ph, pl, _, _, spk = batch()
    with torch.no_grad():
        model.stop_proj.weight.zero_()
        model.stop_proj.bias.fill_(-20.0)  # never stops
        out = model.inference(ph, spk, max_frames=10, phone_lens=pl)
        steps = math.ceil(10 / r)
        assert out.mel.shape == (2, steps * r, N_MELS) and out.alignments.shape == (2, steps, 5)
        assert out.lengths.tolist() == [steps * r] * 2 and not out.stopped.any()
        model.stop_proj.bias.fill_(20.0)  # stops at the first frame
        out = model.inference(ph, spk, max_frames=10, phone_lens=pl)
        assert out.lengths.tolist() == [1, 1] and out.stopped.all()
        assert out.mel.shape[1] == r and torch.equal(out.mel[:, 1:], torch.zeros(2, r - 1, N_MELS))
        # the stop frame is the first one above the threshold: frame 2 of the first step when r = 3
        if r == 3:
            model.stop_proj.bias.copy_(torch.tensor([-20.0, 20.0, 20.0]))
            assert model.inference(ph, spk, max_frames=10, phone_lens=pl).lengths.tolist() == [2, 2]
        # 1-D input
        assert model.inference(ph[0], spk[0], max_frames=4).mel.shape[0] == 1


def test_speaker_vector_changes_the_output():
    torch.manual_seed(5)
    model = Tacotron2(tiny_config()).eval()
    ph, pl, mels, ml, spk = batch()
    with torch.no_grad():
        torch.manual_seed(0)
        a = model(ph, pl, mels, spk, ml).mel_after
        torch.manual_seed(0)
        b = model(ph, pl, mels, spk.flip(0), ml).mel_after
        torch.manual_seed(0)
        a2 = model(ph, pl, mels, spk, ml).mel_after
    assert torch.equal(a, a2)
    assert (a - b).abs().max() > 1e-3
    with pytest.raises(ValueError, match="speaker_dim"):
        model(ph, pl, mels, spk[:, :2], ml)
    with pytest.raises(ValueError, match="speaker_dim"):
        Tacotron2(tiny_config(speaker_dim=0))(ph, pl, mels, spk, ml)


def test_overfits_three_utterances():
    torch.manual_seed(6)
    model = Tacotron2(tiny_config(reduction_factor=2, dropout=0.0, prenet_dropout=0.0, zoneout=0.0))
    ph, pl, mels, ml, spk = batch(frames=(10, 8, 6), phones=(4, 3, 2))
    mels = torch.cumsum(mels, 1) * 0.3  # smooth, learnable trajectories
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mask = length_mask(ml)[:, :, None]

    def loss_fn():
        out = model(ph, pl, mels, spk, ml)
        mse = lambda x: ((x - mels).square() * mask).sum() / (mask.sum() * N_MELS)  # noqa: E731
        bce = torch.nn.functional.binary_cross_entropy_with_logits(out.stop_logits, stop_targets(ml, 10),
                                                                   reduction="none")
        return mse(out.mel_before) + mse(out.mel_after) + (bce * mask[:, :, 0]).sum() / mask.sum()

    first = float(loss_fn().detach())
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    last = float(loss_fn().detach())
    print(f"overfit: loss {first:.3f} -> {last:.3f} in 60 steps")
    assert last < 0.3 * first, (first, last)


def test_paper_size_parameter_count():
    """Tacotron 2 is quoted at ~28.2 M parameters (NVIDIA's implementation, 148 symbols)."""
    n = count_parameters(Tacotron2(Tacotron2Config(num_phones=148)))
    n_spk = count_parameters(Tacotron2(Tacotron2Config(num_phones=148, speaker_dim=256)))
    print(f"Tacotron 2, paper sizes, 148 symbols: {n:,} parameters; with a 256-dim speaker vector: {n_spk:,}")
    assert 27.5e6 < n < 29.0e6
    assert n_spk - n == 2_150_656  # the 256 extra memory dims feed both LSTMs, W_V and the two projections


def test_zoneout_cell():
    torch.manual_seed(7)
    cell = ZoneoutLSTMCell(3, 5, zoneout=0.5)
    x, h, c = torch.randn(2, 3), torch.randn(2, 5), torch.randn(2, 5)
    new_h, new_c = cell.cell(x, (h, c))
    cell.eval()
    eh, ec = cell(x, (h, c))
    torch.testing.assert_close(eh, 0.5 * h + 0.5 * new_h)
    torch.testing.assert_close(ec, 0.5 * c + 0.5 * new_c)
    cell.train()
    th, _ = cell(x, (h, c))
    kept = torch.isclose(th, h) | torch.isclose(th, new_h)
    assert kept.all()


def test_guided_attention_weights_hand_worked():
    w = guided_attention_weights(torch.tensor([2, 1]), torch.tensor([2, 1]), sigma=0.5)
    # utterance 0: N = T = 2, n/N - t/T in {0, 0.5}; 1 - exp(-0.25 / 0.5) = 1 - e^-0.5
    d = 1 - math.exp(-0.5)
    torch.testing.assert_close(w[0], torch.tensor([[0.0, d], [d, 0.0]]))
    torch.testing.assert_close(w[1], torch.tensor([[0.0, 0.0], [0.0, 0.0]]))


def test_stop_targets():
    assert stop_targets(torch.tensor([3, 1]), 4).tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]


@dataclass
class _Wrap:
    """Attributes:
        model: the model config.
    """

    model: Tacotron2Config = field(default_factory=Tacotron2Config)


def test_config_errors():
    with pytest.raises(ConfigError, match="model.attention_kernel"):
        load_config(_Wrap, None, ["model.attention_kernel=30"])
    with pytest.raises(ConfigError, match="model.zoneout"):
        load_config(_Wrap, None, ["model.zoneout=1.0"])
    with pytest.raises(ValueError, match="num_phones"):
        Tacotron2(Tacotron2Config())


def test_mel_to_waveform_round_trip():
    """A harmonic chirp -> log-mel -> mel_to_waveform -> log-mel again: close to the original, and much
    closer than with random phases."""
    import os

    os.environ.setdefault("NUMBA_CACHE_DIR", "/tmp/numba_cache")
    from speechkit.features.frontends import build_frontend

    conf = {"type": "logmel", "sample_rate": 16000, "n_fft": 400, "hop_length": 160, "n_mels": 40}
    fe = build_frontend(conf)
    t = np.arange(8000) / 16000.0
    f0 = 150 + 100 * t
    y = sum(0.3 / k * np.sin(2 * np.pi * k * np.cumsum(f0) / 16000.0) for k in range(1, 6)).astype(np.float32)
    ref = fe(y)
    wav = mel_to_waveform(ref, conf, n_iter=32)
    assert wav.dtype == np.float32 and len(wav) == 160 * (len(ref) - 1)
    got = fe(wav)
    err = np.median(np.abs(got[2:-2] - ref[2:-2]))  # edges: zero padding of the STFT
    # reference: the same magnitudes with random phases (no Griffin-Lim iteration)
    base = np.median(np.abs(fe(mel_to_waveform(ref, conf, n_iter=0))[2:-2] - ref[2:-2]))
    print(f"median |log-mel error| after 32 Griffin-Lim iterations: {err:.3f}; random phases: {base:.3f}")
    assert err < 0.2 and err < 0.25 * base, (err, base)
    with pytest.raises(ValueError, match="logmel"):
        mel_to_waveform(ref, {"type": "mfcc"})
    with pytest.raises(ValueError, match="frames"):
        mel_to_waveform(ref[:, :10], conf)
