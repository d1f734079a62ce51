"""1-D convolution stacks over padded, channel-last ``(B, T, C)`` batches.

Length rule (used by every strided layer in the toolkit): a convolution with kernel ``k`` and stride
``s`` is padded with ``k - 1`` zeros in total (``(k - 1) // 2`` on the left, the rest on the right),
so an input of ``T`` frames gives exactly ``ceil(T / s)`` output frames, for every ``T >= 1``; a stack
of strides ``s1, s2, ...`` gives ``ceil(T / (s1 * s2 * ...))``.

Padded frames are zeroed before every convolution, so a padded utterance in a batch gives exactly
the output the same utterance gives alone (a lone utterance is padded with zeros by the convolution).
"""
import torch
import torch.nn.functional as F
from torch import nn

from speechkit.nn.transformer import lengths_to_mask


def conv_output_lengths(lengths: torch.Tensor, stride: int) -> torch.Tensor:
    """``ceil(lengths / stride)`` (the output length of a "same"-padded strided convolution)."""
    return torch.div(lengths + stride - 1, stride, rounding_mode="floor")


def make_activation(name: str) -> nn.Module:
    """``relu`` | ``leaky_relu`` (slope 0.2) | ``gelu`` | ``tanh``.

    Raises:
        ValueError: unknown name.
    """
    table = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "leaky_relu": lambda: nn.LeakyReLU(0.2)}
    if name not in table:
        raise ValueError(f"unknown activation '{name}' (choose from {', '.join(sorted(table))})")
    return table[name]()


def _masked(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    if lengths is None:
        return x
    return x * lengths_to_mask(lengths, x.size(1)).unsqueeze(-1).to(x.dtype)


class MaskedConv1d(nn.Module):
    """A "same"-padded, optionally strided ``Conv1d`` on channel-last padded batches.

    Args:
        in_channels, out_channels: channel sizes.
        kernel_size: ``k``; total zero padding ``k - 1`` (left ``(k - 1) // 2``).
        stride: ``s``; output length ``ceil(T / s)`` (see module docstring).
        bias: add a bias.

    Shapes: ``x (B, T, C_in)``, ``lengths (B,)`` -> ``(B, ceil(T / s), C_out)``, ``(B,)``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 bias: bool = True) -> None:
        super().__init__()
        if kernel_size < 1 or stride < 1:
            raise ValueError(f"MaskedConv1d: need kernel_size >= 1 and stride >= 1, got {kernel_size}, {stride}")
        self.stride = stride
        self.pad_left = (kernel_size - 1) // 2
        self.pad_right = kernel_size - 1 - self.pad_left
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, bias=bias)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = _masked(x, lengths).transpose(1, 2)
        y = self.conv(F.pad(x, (self.pad_left, self.pad_right))).transpose(1, 2)
        out_lengths = None if lengths is None else conv_output_lengths(lengths, self.stride)
        return y, out_lengths


class ConvBlock(nn.Module):
    """Pre-norm convolution block: ``y = act(conv(LN(x)))``; ``x + dropout(y)`` when shapes allow.

    The residual is used when ``stride == 1`` and ``in_channels == out_channels``. Padded output
    frames are zero.

    Args:
        in_channels, out_channels, kernel_size, stride: as :class:`MaskedConv1d`.
        activation: see :func:`make_activation`.
        dropout: dropout on the convolution branch.
        norm: apply a per-frame LayerNorm over channels before the convolution.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 activation: str = "relu", dropout: float = 0.0, norm: bool = True) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(in_channels) if norm else nn.Identity()
        self.conv = MaskedConv1d(in_channels, out_channels, kernel_size, stride)
        self.act = make_activation(activation)
        self.dropout = nn.Dropout(dropout)
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (B, T, C_in)``, ``lengths (B,)`` -> ``(B, ceil(T / s), C_out)``, out lengths."""
        y, out_lengths = self.conv(self.norm(x), lengths)
        y = self.dropout(self.act(y))
        if self.residual:
            y = x + y
        return _masked(y, out_lengths), out_lengths


class MultiScaleConv1d(nn.Module):
    """Parallel convolutions of several kernel sizes, concatenated and projected back (a residual block).

    The multi-scale block of the Code2Spec inverter (Tjandra et al., "VQVAE Unsupervised Unit Discovery
    and Multi-scale Code2Spec Inverter for Zerospeech Challenge 2019", Interspeech 2019, sec. 3):
    each branch ``i`` sees ``LN(x)`` through a kernel of size ``k_i``; the branch outputs are
    concatenated over channels, passed through the activation and a 1x1 projection, and added to ``x``:
    ``x + dropout(W [act(conv_k1(LN x)); ...; act(conv_kn(LN x))])``.

    Args:
        dim: channels in and out.
        kernel_sizes: one branch per kernel size (e.g. ``(1, 3, 5, 7)``).
        branch_channels: channels per branch (default ``dim``).
        activation: see :func:`make_activation`.
        dropout: dropout on the block output before the residual sum.

    Shapes: ``x (B, T, dim)``, ``lengths (B,)`` -> ``(B, T, dim)`` (zero at padded frames).
    """

    def __init__(self, dim: int, kernel_sizes: tuple[int, ...] | list[int] = (1, 3, 5, 7),
                 branch_channels: int | None = None, activation: str = "relu", dropout: float = 0.0) -> None:
        super().__init__()
        if not kernel_sizes:
            raise ValueError("MultiScaleConv1d: kernel_sizes is empty")
        branch_channels = branch_channels or dim
        self.norm = nn.LayerNorm(dim)
        self.branches = nn.ModuleList(MaskedConv1d(dim, branch_channels, k) for k in kernel_sizes)
        self.act = make_activation(activation)
        self.proj = nn.Linear(branch_channels * len(kernel_sizes), dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        y = torch.cat([self.act(branch(h, lengths)[0]) for branch in self.branches], dim=-1)
        return _masked(x + self.dropout(self.proj(y)), lengths)


def repeat_upsample(x: torch.Tensor, factor: int, lengths: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Repeat every frame ``factor`` times: ``(B, T, C)`` -> ``(B, T * factor, C)``, lengths ``* factor``."""
    if factor == 1:
        return x, lengths
    return x.repeat_interleave(factor, dim=1), None if lengths is None else lengths * factor
