"""Sinusoidal positional encoding (Vaswani et al., "Attention Is All You Need", NeurIPS 2017, sec. 3.5).

``PE[pos, 2i] = sin(pos / 10000^(2i / d))`` and ``PE[pos, 2i + 1] = cos(pos / 10000^(2i / d))``.
The table is computed for whatever length the input has (no maximum length to configure) and
cached per device/dtype.
"""
import math

import torch
from torch import nn


def sinusoidal_table(length: int, dim: int, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal position table (Vaswani et al. 2017, sec. 3.5).

    Args:
        length: number of positions ``T``.
        dim: encoding size ``d`` (any positive integer; an odd ``d`` drops the last cosine column).
        offset: position of the first row (row ``t`` encodes position ``offset + t``).
        base: the wavelength base (10000 in the paper).

    Returns:
        float32 tensor ``(T, d)``.

    Raises:
        ValueError: ``length < 0`` or ``dim < 1``.
    """
    if length < 0 or dim < 1:
        raise ValueError(f"sinusoidal_table: need length >= 0 and dim >= 1, got length={length} dim={dim}")
    half = (dim + 1) // 2
    pos = torch.arange(offset, offset + length, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    inv_freq = torch.exp(-math.log(base) * torch.arange(0, 2 * half, 2, dtype=torch.float64) / dim)  # (half,)
    angles = pos * inv_freq  # (T, half)
    table = torch.empty(length, 2 * half, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table[:, :dim].to(torch.float32)


class SinusoidalPositionalEncoding(nn.Module):
    """Add sinusoidal positions to a ``(B, T, d)`` sequence: ``dropout(x * xscale + PE[:T])``.

    Args:
        dim: model size ``d``.
        dropout: dropout applied after the addition.
        scale_input: multiply ``x`` by ``sqrt(d)`` first (Vaswani et al. 2017, sec. 3.4, as ESPnet does),
            so that positions do not swamp small-valued embeddings.
    """

    def __init__(self, dim: int, dropout: float = 0.0, scale_input: bool = True) -> None:
        super().__init__()
        self.dim = dim
        self.xscale = math.sqrt(dim) if scale_input else 1.0
        self.dropout = nn.Dropout(dropout)
        self._cache: torch.Tensor | None = None

    def table(self, length: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The ``(length, d)`` table on ``device``/``dtype`` (cached and grown on demand)."""
        cache = self._cache
        if cache is None or cache.size(0) < length or cache.device != device or cache.dtype != dtype:
            grow = max(length, 0 if cache is None else cache.size(0))
            cache = sinusoidal_table(grow, self.dim).to(device=device, dtype=dtype)
            self._cache = cache
        return cache[:length]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``(B, T, d)`` -> ``(B, T, d)``."""
        if x.size(-1) != self.dim:
            raise ValueError(f"SinusoidalPositionalEncoding: expected last dim {self.dim}, got {tuple(x.shape)}")
        return self.dropout(x * self.xscale + self.table(x.size(1), x.device, x.dtype))
