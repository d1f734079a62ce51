"""Transformer encoder layers for padded batches of ``(B, T, d)`` sequences.

The block follows Tjandra, Sakti & Nakamura, "Transformer VQ-VAE for Unsupervised Unit Discovery and
Speech Synthesis: ZeroSpeech 2020 Challenge" (Interspeech 2020), sec. 2 and eq. (1)-(3): layer norm,
multi-head self-attention; layer norm, two linear layers with a ReLU (the norm before each part: pre-norm).
The residual connection around each part, as in Vaswani et al.'s block, is not mentioned in sec. 2's text.
Attention itself is Vaswani et al. 2017, eq. (1) and sec. 3.2.2's multi-head form (the paper's eq. 1-3).

Padding convention everywhere in :mod:`speechkit.nn`: a batch carries ``lengths (B,)``; frame ``t`` of
utterance ``b`` is valid iff ``t < lengths[b]``; a padded frame never influences a valid one.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def lengths_to_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Boolean validity mask from lengths.

    Args:
        lengths: ``(B,)`` integer tensor.
        max_len: width ``T`` of the mask (default ``lengths.max()``).

    Returns:
        ``(B, T)`` bool, ``True`` at valid frames (``t < lengths[b]``).
    """
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


class MultiHeadSelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention (Vaswani et al. 2017, eq. (1) and sec. 3.2.2).

    ``softmax(Q K^T / sqrt(d_k)) V`` per head, keys at padded frames excluded.

    Args:
        dim: model size ``d`` (divisible by ``num_heads``).
        num_heads: number of heads ``h``; ``d_k = d / h``.
        dropout: dropout on the attention weights (training only).

    Raises:
        ValueError: ``dim`` not divisible by ``num_heads``.
    """

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if num_heads < 1 or dim % num_heads:
            raise ValueError(f"MultiHeadSelfAttention: dim={dim} is not divisible by num_heads={num_heads}")
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.in_proj = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: ``(B, T, d)``; ``mask``: ``(B, T)`` bool (True = valid key) -> ``(B, T, d)``."""
        B, T, _ = x.shape
        q, k, v = self.in_proj(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attn_mask = None if mask is None else mask[:, None, None, :]  # (B, 1, 1, T): True = attend
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0,
            scale=1.0 / math.sqrt(self.head_dim),
        )  # (B, h, T, d_k)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, self.dim))


class TransformerBlock(nn.Module):
    """One pre-norm Transformer encoder block (Tjandra et al. 2020, sec. 2).

    ``y = x + Dropout(MHA(LN(x)))``; ``out = y + Dropout(W2 ReLU(W1 LN(y)))``.

    Args:
        dim: model size ``d``.
        num_heads: attention heads.
        ff_dim: inner size of the position-wise feed-forward layer.
        dropout: residual and feed-forward dropout.
        attention_dropout: dropout on the attention weights.
    """

    def __init__(self, dim: int, num_heads: int, ff_dim: int, dropout: float = 0.1,
                 attention_dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, num_heads, attention_dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(
            nn.Linear(dim, ff_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff_dim, dim)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: ``(B, T, d)``; ``mask``: ``(B, T)`` bool (True = valid) -> ``(B, T, d)``."""
        x = x + self.dropout(self.attn(self.norm1(x), mask))
        return x + self.dropout(self.ff(self.norm2(x)))


class TransformerStack(nn.Module):
    """``num_layers`` :class:`TransformerBlock` s, a final layer norm, padded frames zeroed on output.

    Args:
        num_layers: number of blocks (0 gives the identity, without the final norm).
        dim, num_heads, ff_dim, dropout, attention_dropout: as :class:`TransformerBlock`.
    """

    def __init__(self, num_layers: int, dim: int, num_heads: int, ff_dim: int, dropout: float = 0.1,
                 attention_dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            TransformerBlock(dim, num_heads, ff_dim, dropout, attention_dropout) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(dim) if num_layers else nn.Identity()

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: ``(B, T, d)``, ``lengths``: ``(B,)`` -> ``(B, T, d)`` (zero at padded frames)."""
        if not len(self.layers):
            return x
        mask = None if lengths is None else lengths_to_mask(lengths, x.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        x = self.norm(x)
        return x if mask is None else x * mask.unsqueeze(-1).to(x.dtype)
