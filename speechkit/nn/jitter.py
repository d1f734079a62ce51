"""Time jitter regularizer (Chorowski et al., "Unsupervised speech representation learning using WaveNet
autoencoders", IEEE/ACM TASLP 2019, sec. III-B; Tjandra, Sakti & Nakamura, "Transformer VQ-VAE for
Unsupervised Unit Discovery and Speech Synthesis: ZeroSpeech 2020 Challenge", Interspeech 2020,
sec. 3.2.2, eq. (11)-(13)).

The paper's definition, as written::

    j_t ~ Categorical(p, p, 1 - 2 * p) in {1, 2, 3}                                  (11)
    c^_t = c_{t-1}  if j_t = 1 and t > 1
           c_{t+1}  if j_t = 2 and t < T
           c_t      else                                                             (12)
    e_t = E[c^_t]                                                                    (13)

Category 1 (probability ``p``) takes the left neighbour, category 2 (probability ``p``) the right
neighbour, category 3 (probability ``1 - 2p``) keeps the frame; hence ``0 <= p <= 0.5`` (Chorowski et al.
2019 also put ``p`` on each neighbour). Here one uniform draw ``u_t`` per frame gives ``j_t = 1`` for
``u_t < p``, ``j_t = 2`` for ``p <= u_t < 2p`` and ``j_t = 3`` otherwise, and ``out_t`` is ``z_{t-1}``,
``z_{t+1}`` or ``z_t``. Eq. 12's boundary cases ("else": the first frame never takes a left neighbour,
the last never a right one) apply at each utterance's valid length, so the first and last valid frames
stay in place with probability ``1 - p`` and never read a frame outside the utterance. The identity at
evaluation time.

The paper jitters the code indices ``c_t`` and looks the codebook up afterwards (eq. 13);
:class:`speechkit.models.vqvae.VQVAE` applies this function to the quantized frames ``z_q = E[c_t]``,
which yields the same ``e_t``, with the straight-through gradient going to the encoder frame that was
copied. The paper's values: ``p`` in {0.05, 0.075} (its Table 3); its submitted system and its best
one both use ``p = 0.05`` together with temporal smoothing (Table 3).

Earlier versions of this module put ``p / 2`` on each neighbour: a config written for them with ``p = q``
behaves the same here with ``p = q / 2``.
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
