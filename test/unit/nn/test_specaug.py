"""SpecAugment masks: stacked masking equals stacking the masked input, the icefall time-mask
budget, p = 0 is the identity, config validation."""
import math

import pytest
import torch

from speechkit.features.stack import stack_frames
from speechkit.nn.specaug import SpecAugment, SpecAugmentConfig
from speechkit.utils.config import FieldError


def test_stacked_masking_equals_stacking_the_masked_input():
    D, K, S = 5, 4, 2
    cfg = SpecAugmentConfig(enabled=True, freq_mask_size=3, time_mask_size=6, max_time_mask_fraction=0.5, p=1.0)
    raw = torch.randn(2, 31, D) + 3.0
    raw_len = torch.tensor([31, 20])
    stacked, st_len = stack_frames(raw, raw_len, K, S)
    aug = SpecAugment(cfg, D, K, S)
    out = aug(stacked, st_len, generator=torch.Generator().manual_seed(3))
    # the same draws on the input frames, applied before stacking
    g = torch.Generator().manual_seed(3)
    masked = raw.clone()
    for b in range(2):
        n = S * (int(st_len[b]) - 1) + K
        t_mask, f_mask = aug.masks(n, g)
        masked[b, :n][t_mask] = 0.0
        masked[b, :n, f_mask] = 0.0
    ref, _ = stack_frames(masked, raw_len, K, S)
    assert not torch.equal(out, stacked)
    for b in range(2):
        n = int(st_len[b])
        assert torch.equal(out[b, :n], ref[b, :n])
        assert torch.equal(out[b, n:], stacked[b, n:])  # padding untouched


def test_time_mask_budget_and_widths():
    cfg = SpecAugmentConfig(enabled=True, num_freq_masks=0, p=1.0)  # icefall: 10 x 100, at most 15 %
    aug = SpecAugment(cfg, 80)
    g = torch.Generator().manual_seed(0)
    for n in (40, 130, 700, 3000):
        budget = 0.15 * n
        masks = math.ceil(budget / 100)
        assert masks == min(10, masks)
        for _ in range(50):
            t_mask, f_mask = aug.masks(n, g)
            assert not f_mask.any()
            assert int(t_mask.sum()) <= min(10, masks) * min(100, budget // masks)


def test_frequency_masks_at_most_two_bands_of_27():
    aug = SpecAugment(SpecAugmentConfig(enabled=True, num_time_masks=0, p=1.0), 80)
    g = torch.Generator().manual_seed(1)
    widest = 0
    for _ in range(200):
        _, f = aug.masks(100, g)
        edges = torch.diff(torch.cat([torch.zeros(1), f.float(), torch.zeros(1)]))
        assert int((edges == 1).sum()) <= 2
        widest = max(widest, int(f.sum()))
    assert 27 <= widest <= 2 * 26


def test_p_zero_is_identity_and_bad_config():
    x = torch.randn(1, 9, 8)
    assert torch.equal(SpecAugment(SpecAugmentConfig(p=0.0), 8)(x, torch.tensor([9])), x)
    with pytest.raises(FieldError):
        SpecAugmentConfig(p=1.5)
    with pytest.raises(FieldError):
        SpecAugmentConfig(num_time_masks=-1)
    with pytest.raises(ValueError):
        SpecAugment(SpecAugmentConfig(), 8, 2, 1)(x, torch.tensor([9]))  # 8 != 2 x 8
