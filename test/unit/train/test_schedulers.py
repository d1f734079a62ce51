"""LR schedules vs hand-computed values (Vaswani et al. 2017 eq. (3) for Noam)."""
from __future__ import annotations

import math

import pytest
import torch

from speechkit.train.schedulers import StepSchedule, lr_at, noam_lr

torch.set_num_threads(1)


# d_model = 512, warmup = 4000 (the paper's base model). Values worked out by hand:
#   n = 1:     512^-0.5 * 1 * 4000^-1.5 = 0.0441942 * 3.95285e-6 = 1.746928e-7
#   n = 4000:  512^-0.5 * 4000^-0.5 = 1 / sqrt(2048000)          = 6.987712e-4  (the peak)
#   n = 2000:  half of the peak (linear warmup)                  = 3.493856e-4
#   n = 16000: 512^-0.5 * 16000^-0.5 = peak / 2 (inverse sqrt)   = 3.493856e-4
@pytest.mark.parametrize("n, expected", [(1, 1.746928107e-7), (2000, 3.493856215e-4),
                                         (4000, 6.987712430e-4), (16000, 3.493856215e-4)])
def test_noam_matches_paper_formula(n, expected):
    assert noam_lr(n, warmup_steps=4000, model_dim=512) == pytest.approx(expected, rel=1e-8)
    assert lr_at("noam", n, 2.0, warmup_steps=4000, model_dim=512) == pytest.approx(2 * expected, rel=1e-8)


def test_noam_peak_parametrization():
    # model_dim = 0: 'lr' is the peak, reached at n = warmup: 0.002 * sqrt(10) * min(n^-.5, n * 10^-1.5)
    vals = {n: lr_at("noam", n, 0.002, warmup_steps=10) for n in (1, 5, 10, 40)}
    assert vals[1] == pytest.approx(0.0002)
    assert vals[5] == pytest.approx(0.001)
    assert vals[10] == pytest.approx(0.002)
    assert vals[40] == pytest.approx(0.001)
    assert max(lr_at("noam", n, 0.002, warmup_steps=10) for n in range(1, 100)) == pytest.approx(0.002)


def test_noam_rejects_step_zero_and_missing_warmup():
    with pytest.raises(ValueError, match="1-based"):
        noam_lr(0, 10)
    with pytest.raises(ValueError, match="warmup_steps"):
        noam_lr(5, 0)


def test_warmup_linear_and_cosine_endpoints():
    base, w, total = 1.0, 10, 110
    for kind in ("warmup_linear", "warmup_cosine", "warmup_constant"):
        assert lr_at(kind, 5, base, w, total_steps=total) == pytest.approx(0.5)
        assert lr_at(kind, 10, base, w, total_steps=total) == pytest.approx(1.0)
    assert lr_at("warmup_linear", 60, base, w, total_steps=total, min_lr=0.1) == pytest.approx(0.55)
    assert lr_at("warmup_linear", 110, base, w, total_steps=total, min_lr=0.1) == pytest.approx(0.1)
    assert lr_at("warmup_linear", 500, base, w, total_steps=total, min_lr=0.1) == pytest.approx(0.1)
    assert lr_at("warmup_cosine", 60, base, w, total_steps=total) == pytest.approx(0.5)  # cos(pi/2)
    assert lr_at("warmup_cosine", 35, base, w, total_steps=total) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_at("warmup_cosine", 110, base, w, total_steps=total, min_lr=0.2) == pytest.approx(0.2)
    assert lr_at("warmup_constant", 10 ** 6, base, w) == 1.0
    with pytest.raises(ValueError, match="total_steps"):
        lr_at("warmup_linear", 20, base, w, total_steps=5)


def _used_lrs(sched_kwargs, n_updates, base=0.5, restore_at=None):
    """The lr each optimizer.step() actually used; optionally rebuild optimizer+scheduler mid-way."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base)
    sched = StepSchedule(opt, **sched_kwargs)
    used = []
    for k in range(n_updates):
        if restore_at is not None and k == restore_at:
            sd_opt, sd_sched = opt.state_dict(), sched.state_dict()
            opt = torch.optim.SGD([p], lr=base)
            sched = StepSchedule(opt, **sched_kwargs)
            opt.load_state_dict(sd_opt)
            sched.load_state_dict(sd_sched)
        used.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return used


def test_step_schedule_drives_optimizer_with_1_based_updates():
    kw = dict(kind="noam", warmup_steps=4, model_dim=16)
    used = _used_lrs(kw, 12)
    assert used == pytest.approx([lr_at("noam", n, 0.5, 4, 16) for n in range(1, 13)], rel=1e-12)
    assert used[0] > 0  # the first update does not get lr 0


def test_step_schedule_state_round_trip():
    kw = dict(kind="warmup_cosine", warmup_steps=3, total_steps=20, min_lr=0.01)
    assert _used_lrs(kw, 20, restore_at=7) == _used_lrs(kw, 20)
