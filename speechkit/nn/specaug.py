"""SpecAugment time and frequency masks (Park et al., "SpecAugment: A Simple Data Augmentation
Method for Automatic Speech Recognition", Interspeech 2019, section 2), training only.

Defaults are lhotse's ``SpecAugment`` as icefall's recipes use it: two frequency masks of up to
27 bins (the paper's F = 27, m_F = 2, the LibriSpeech policies), and up to ten time masks of up to
100 frames (T = 100) whose number and width are capped so that at most 15 % of an utterance's
frames are masked (``max_time_mask_fraction``: icefall's adaptive masking, which keeps short
utterances usable), applied to each utterance with probability 0.9. Mask widths are drawn
uniformly in ``[0, size)``, start positions uniformly where the mask fits. Masked values are 0,
the mean of CMVN-normalised features (lhotse fills with the utterance mean, ESPnet with 0). Time
warping is not implemented (the paper's ablation finds it the least important of the three
augmentations; ESPnet and icefall both let it be turned off).

:class:`SpecAugment` masks plain ``(B, T, D)`` features, or features already stacked by
:func:`speechkit.features.stack.stack_frames`: there the masks are drawn on the *input* (10 ms)
frame axis and applied to every copy of a frame in the overlapping stacks, so the result is
exactly what stacking the masked input would give (tested).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from speechkit.utils.config import FieldError

__all__ = ["SpecAugmentConfig", "SpecAugment"]


@dataclass
class SpecAugmentConfig:
    """SpecAugment settings (lhotse/icefall defaults; section ``specaug`` of the rnnt task).

    Attributes:
        enabled: apply SpecAugment to training batches (never to validation or decoding).
        num_freq_masks: frequency masks per utterance (paper m_F; 2).
        freq_mask_size: widest frequency mask, in feature bins (paper F; 27).
        num_time_masks: most time masks per utterance (icefall 10), lowered for short
            utterances by ``max_time_mask_fraction``.
        time_mask_size: widest time mask, in input (10 ms) frames (paper T; 100).
        max_time_mask_fraction: at most this fraction of an utterance's frames masked in all
            (icefall 0.15): ``n = min(num_time_masks, ceil(f N / time_mask_size))`` masks of width
            below ``min(time_mask_size, floor(f N / n))`` for ``N`` frames.
        p: probability that an utterance is augmented at all (lhotse 0.9).
    """

    enabled: bool = False
    num_freq_masks: int = 2
    freq_mask_size: int = 27
    num_time_masks: int = 10
    time_mask_size: int = 100
    max_time_mask_fraction: float = 0.15
    p: float = 0.9

    def __post_init__(self) -> None:
        for name in ("num_freq_masks", "freq_mask_size", "num_time_masks", "time_mask_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise FieldError(name, f"must be an int >= 0, got {v!r}")
        for name in ("max_time_mask_fraction", "p"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise FieldError(name, f"must be a number in [0, 1], got {v!r}")


def _band(size: int, max_width: int, generator) -> tuple[int, int]:
    """``(start, width)``: width uniform in ``[0, max_width)``, start uniform where it fits."""
    if max_width < 1 or size < 1:
        return 0, 0
    width = int(torch.randint(0, max_width, (1,), generator=generator))
    width = min(width, size)
    start = int(torch.randint(0, size - width + 1, (1,), generator=generator))
    return start, width


class SpecAugment:
    """Time and frequency masking of a batch (see the module docstring).

    Args:
        config: a :class:`SpecAugmentConfig` (``enabled`` is not looked at here).
        feat_dim: dimension of one input frame (80 for log-mel).
        num_stack, stride: the stacking of the batches given to :meth:`__call__` (1, 1: plain
            features); as :func:`speechkit.features.stack.stack_frames`.
    """

    def __init__(self, config: SpecAugmentConfig, feat_dim: int, num_stack: int = 1, stride: int = 1) -> None:
        if feat_dim < 1 or num_stack < 1 or stride < 1:
            raise ValueError(f"feat_dim, num_stack and stride must be >= 1, got {feat_dim}, {num_stack}, {stride}")
        self.config, self.feat_dim, self.num_stack, self.stride = config, feat_dim, num_stack, stride

    def masks(self, num_frames: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Masks of one utterance of ``num_frames`` input frames: ``(time (N,), freq (D,))`` bool,
        True = masked (both all False when the utterance is not augmented, probability ``1 - p``)."""
        c = self.config
        t_mask = torch.zeros(num_frames, dtype=torch.bool)
        f_mask = torch.zeros(self.feat_dim, dtype=torch.bool)
        if float(torch.rand((), generator=generator)) >= c.p:
            return t_mask, f_mask
        for _ in range(c.num_freq_masks):
            s, w = _band(self.feat_dim, c.freq_mask_size, generator)
            f_mask[s : s + w] = True
        budget = c.max_time_mask_fraction * num_frames
        if c.num_time_masks > 0 and c.time_mask_size > 0 and budget >= 1:
            n = min(c.num_time_masks, math.ceil(budget / c.time_mask_size))
            width = min(c.time_mask_size, int(budget // n))
            for _ in range(n):
                s, w = _band(num_frames, width, generator)
                t_mask[s : s + w] = True
        return t_mask, f_mask

    def __call__(self, feats: torch.Tensor, lengths: torch.Tensor,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Masked copy of ``feats (B, T, num_stack * feat_dim)`` with ``lengths (B,)`` valid frames.

        With stacking, utterance ``b`` covers ``stride * (lengths[b] - 1) + num_stack`` input
        frames; masks are drawn over those. Padding frames are left as they are.

        Raises:
            ValueError: ``feats`` is not ``(B, T, num_stack * feat_dim)``.
        """
        K, D, S = self.num_stack, self.feat_dim, self.stride
        if feats.dim() != 3 or feats.size(2) != K * D:
            raise ValueError(f"feats must be (B, T, {K * D}), got shape {tuple(feats.shape)}")
        B, T, _ = feats.shape
        mask = torch.zeros(B, T, K, D, dtype=torch.bool)
        raw_index = S * torch.arange(T)[:, None] + torch.arange(K)[None, :]  # (T, K) input frame of each block
        for b in range(B):
            n_out = int(lengths[b])
            if n_out < 1:
                continue
            t_mask, f_mask = self.masks(S * (n_out - 1) + K, generator)
            m = t_mask[raw_index[:n_out].clamp(max=t_mask.numel() - 1)]  # (n_out, K)
            mask[b, :n_out] = m[:, :, None] | f_mask[None, None, :]
        out = feats.view(B, T, K, D).masked_fill(mask.to(feats.device), 0.0)
        return out.view(B, T, K * D)
