"""Masked conv stacks: the ceil(T / s) length rule, padding invariance, multi-scale block."""
import math

import pytest
import torch

from speechkit.nn.conv import ConvBlock, MaskedConv1d, MultiScaleConv1d, conv_output_lengths, repeat_upsample


@pytest.mark.parametrize("kernel", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("stride", [1, 2, 3, 4])
def test_output_length_is_ceil(kernel, stride):
    conv = MaskedConv1d(3, 2, kernel, stride)
    for T in range(1, 12):
        y, out_len = conv(torch.randn(1, T, 3), torch.tensor([T]))
        assert y.shape == (1, math.ceil(T / stride), 2)
        assert out_len.item() == math.ceil(T / stride)


def test_conv_matches_manual_zero_padded_convolution():
    torch.manual_seed(0)
    conv = MaskedConv1d(2, 3, 3, stride=2)
    x = torch.randn(1, 7, 2)
    y, _ = conv(x, torch.tensor([7]))
    w, b = conv.conv.weight, conv.conv.bias  # (3, 2, 3)
    xp = torch.cat([torch.zeros(1, 2), x[0], torch.zeros(1, 2)])  # k - 1 = 2 zeros: 1 left, 1 right
    for j in range(4):
        window = xp[2 * j: 2 * j + 3]  # (3, 2)
        expected = torch.einsum("oik,ki->o", w, window) + b
        assert torch.allclose(y[0, j], expected, atol=1e-6)


def test_padded_batch_equals_singletons():
    torch.manual_seed(0)
    blocks = [ConvBlock(4, 4, 3, stride=2), ConvBlock(4, 4, 5), MultiScaleConv1d(4, (1, 3, 5))]
    lengths = torch.tensor([9, 5])
    x = torch.randn(2, 9, 4)
    x[1, 5:] = 1e3  # garbage padding
    ys, ls = [], []
    for b in range(2):
        h, L = x[b: b + 1, : lengths[b]], lengths[b: b + 1]
        h, L = blocks[0](h, L)
        h, L = blocks[1](h, L)
        ys.append(blocks[2](h, L)[0])
        ls.append(L)
    h, L = blocks[0](x, lengths)
    h, L = blocks[1](h, L)
    h = blocks[2](h, L)
    assert L.tolist() == [5, 3]
    for b in range(2):
        assert torch.allclose(h[b, : L[b]], ys[b][: L[b]], atol=1e-5)
        assert torch.all(h[b, L[b]:] == 0)


def test_multiscale_is_residual_and_uses_every_branch():
    torch.manual_seed(0)
    block = MultiScaleConv1d(4, (1, 3))
    with torch.no_grad():
        block.proj.weight.zero_()
        block.proj.bias.zero_()
    x = torch.randn(1, 6, 4)
    assert torch.allclose(block(x), x)
    assert block.proj.in_features == 8
    with pytest.raises(ValueError):
        MultiScaleConv1d(4, ())


def test_helpers():
    assert conv_output_lengths(torch.tensor([1, 4, 5, 8]), 4).tolist() == [1, 1, 2, 2]
    x = torch.arange(6.0).view(1, 3, 2)
    y, L = repeat_upsample(x, 2, torch.tensor([3]))
    assert y[0, :, 0].tolist() == [0, 0, 2, 2, 4, 4] and L.tolist() == [6]
