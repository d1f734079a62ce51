"""Time jitter regularizer (Chorowski et al., "Unsupervised speech representation learning using WaveNet
autoencoders", IEEE/ACM TASLP 2019, sec. III-B; Tjandra et al. 2020, eq. (11)-(13)).

At training time every latent frame ``t`` is replaced by its left neighbour with probability ``p/2``,
by its right neighbour with probability ``p/2``, and kept with probability ``1 - p``:
``j_t ~ Categorical(p/2, 1 - p, p/2)`` over ``{t - 1, t, t + 1}``, ``out_t = z_{j_t}``. Indices are
clamped to the utterance (``[0, length - 1]``), so the first and last valid frames never copy a
frame from outside the utterance. The identity at evaluation time.
"""
import torch
from torch import nn


def temporal_jitter(z: torch.Tensor, p: float, lengths: torch.Tensor | None = None,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """Apply time jitter with probability ``p`` (always, whatever the module mode).

    Args:
        z: ``(B, T, D)`` latent frames.
        p: replacement probability, ``0 <= p <= 1``.
        lengths: ``(B,)`` valid lengths (default: all ``T``); padded frames are left as they are.
        generator: optional RNG (on ``z``'s device) for reproducibility.

    Returns:
        ``(B, T, D)``; gradients flow to the frames that were copied.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"temporal_jitter: probability p must be in [0, 1], got {p}")
    if p == 0.0 or z.size(1) < 2:
        return z
    B, T, D = z.shape
    u = torch.rand(B, T, generator=generator, device=z.device)
    offset = torch.zeros(B, T, dtype=torch.long, device=z.device)
    offset[u < p / 2] = -1
    offset[(u >= p / 2) & (u < p)] = 1
    pos = torch.arange(T, device=z.device).unsqueeze(0)
    if lengths is None:
        lengths = torch.full((B,), T, device=z.device)
    lengths = lengths.to(z.device).unsqueeze(1)
    index = torch.minimum(torch.clamp(pos + offset, min=0), lengths - 1)
    index = torch.where(pos < lengths, index, pos)  # padded frames stay in place
    return torch.gather(z, 1, index.unsqueeze(-1).expand(B, T, D))


class TemporalJitter(nn.Module):
    """:func:`temporal_jitter` at training time, identity in eval mode or when ``p == 0``.

    Args:
        p: replacement probability (``0`` disables the layer).

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"TemporalJitter: probability p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, z: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``z (B, T, D)``, ``lengths (B,)`` -> ``(B, T, D)``."""
        if not self.training or self.p == 0.0:
            return z
        return temporal_jitter(z, self.p, lengths)

    def extra_repr(self) -> str:
        return f"p={self.p}"
