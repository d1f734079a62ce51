"""Time jitter regularizer (Chorowski et al., "Unsupervised speech representation learning using WaveNet
autoencoders", IEEE/ACM TASLP 2019, sec. III-B; Tjandra et al. 2020, eq. (11)-(13)).

At training time every latent frame ``t`` is replaced by its left neighbour with probability ``p``,
by its right neighbour with probability ``p``, and kept with probability ``1 - 2p`` (Tjandra et al.
2020, eq. 11: ``j_t ~ Categorical(p, 1 - 2p, p)`` over ``{t - 1, t, t + 1}``; Chorowski et al. 2019
define the same ``p`` per neighbour), ``out_t = z_{j_t}``; hence ``0 <= p <= 0.5``. The paper uses
``p`` in {0.05, 0.075} (its Table 3). Indices are clamped to the utterance (``[0, length - 1]``), so the
first and last valid frames never copy a frame from outside the utterance (the first frame then
stays in place with probability ``1 - p``). The identity at evaluation time.

Earlier versions of this module put ``p / 2`` on each neighbour: a config's old ``p`` is the new ``p / 2``.
"""
import torch
from torch import nn


def temporal_jitter(z: torch.Tensor, p: float, lengths: torch.Tensor | None = None,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """Apply time jitter with probability ``p`` (always, whatever the module mode).

    Args:
        z: ``(B, T, D)`` latent frames.
        p: probability of each neighbour, ``0 <= p <= 0.5`` (eq. 11); a frame moves with probability ``2p``.
        lengths: ``(B,)`` valid lengths (default: all ``T``); padded frames are left as they are.
        generator: optional RNG (on ``z``'s device) for reproducibility.

    Returns:
        ``(B, T, D)``; gradients flow to the frames that were copied.

    Raises:
        ValueError: ``p`` outside ``[0, 0.5]``.
    """
    if not 0.0 <= p <= 0.5:
        raise ValueError(f"temporal_jitter: probability p (of each neighbour, eq. 11) must be in [0, 0.5], got {p}")
    if p == 0.0 or z.size(1) < 2:
        return z
    B, T, D = z.shape
    u = torch.rand(B, T, generator=generator, device=z.device)
    offset = torch.zeros(B, T, dtype=torch.long, device=z.device)
    offset[u < p] = -1
    offset[(u >= p) & (u < 2 * p)] = 1
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
        p: probability of each neighbour (eq. 11; ``0`` disables the layer).

    Raises:
        ValueError: ``p`` outside ``[0, 0.5]``.
    """

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= p <= 0.5:
            raise ValueError(f"TemporalJitter: probability p (of each neighbour, eq. 11) must be in [0, 0.5], got {p}")
        self.p = p

    def forward(self, z: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``z (B, T, D)``, ``lengths (B,)`` -> ``(B, T, D)``."""
        if not self.training or self.p == 0.0:
            return z
        return temporal_jitter(z, self.p, lengths)

    def extra_repr(self) -> str:
        return f"p={self.p}"
