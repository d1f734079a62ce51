"""Transformer layers: attention vs torch.nn.MultiheadAttention, masking, block layout."""
import pytest
import torch

from speechkit.nn.transformer import MultiHeadSelfAttention, TransformerBlock, TransformerStack, lengths_to_mask


def test_lengths_to_mask():
    m = lengths_to_mask(torch.tensor([3, 1, 0]), 4)
    assert m.tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]
    assert lengths_to_mask(torch.tensor([2, 5])).shape == (2, 5)


def test_attention_matches_torch_multihead_attention():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(16, 4).eval()
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.in_proj_bias.copy_(ours.in_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(3, 7, 16)
    lengths = torch.tensor([7, 4, 1])
    mask = lengths_to_mask(lengths, 7)
    expected, _ = ref(x, x, x, key_padding_mask=~mask, need_weights=False)
    got = ours(x, mask)
    assert torch.allclose(got[mask], expected[mask], atol=1e-5)


def test_attention_rejects_bad_heads():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadSelfAttention(10, 3)


def test_masked_positions_do_not_influence_valid_outputs():
    torch.manual_seed(0)
    stack = TransformerStack(2, 16, 4, 32, dropout=0.0).eval()
    lengths = torch.tensor([6, 3])
    x = torch.randn(2, 6, 16)
    y = x.clone()
    y[1, 3:] = 100 * torch.randn(3, 16)  # garbage in the padding
    out_x, out_y = stack(x, lengths), stack(y, lengths)
    assert torch.allclose(out_x, out_y, atol=1e-5)
    assert torch.all(out_x[1, 3:] == 0)
    # and the padded utterance equals the same utterance alone
    alone = stack(x[1:, :3], lengths[1:])
    assert torch.allclose(out_x[1, :3], alone[0], atol=1e-5)


def test_block_is_pre_norm_residual():
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, 16, dropout=0.0).eval()
    x = torch.randn(1, 4, 8)
    h = x + block.attn(block.norm1(x))
    expected = h + block.ff(block.norm2(h))
    assert torch.allclose(block(x), expected, atol=1e-6)


def test_empty_stack_is_identity():
    x = torch.randn(2, 3, 8)
    assert torch.equal(TransformerStack(0, 8, 2, 16)(x, torch.tensor([3, 2])), x)
