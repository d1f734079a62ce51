"""The rnnt task's auxiliary CTC warm-up (epochs <= model.ctc_warmup_epochs train the encoder
losses only; validation always the full loss) and SpecAugment (training batches only)."""
from __future__ import annotations

import pytest
import torch

from speechkit.tasks import get_task
from speechkit.utils.cli import ConfigError
from speechkit.utils.config import load_config


def make(env, *extra):
    task = get_task("rnnt")
    return task, load_config(task.Config, None, env["overrides"] + list(extra))


def _batch(task, cfg, train, epoch):
    return task.collate([train[i] for i in task.make_batches(train, cfg, epoch, 0)[0]])


def test_ctc_warmup_epochs_then_full_loss(rnnt_env):
    task, cfg = make(rnnt_env, "model.variant=multisoftmax", "model.ctc_weight=0.5", "model.ctc_warmup_epochs=1")
    torch.manual_seed(0)
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    model.train()
    b1 = _batch(task, cfg, train, 1)  # make_batches tells the task the epoch
    loss, stats = task.forward_loss(model, b1)
    assert stats["rnnt"] == 0.0 and stats["ctc"] > 0 and loss.item() == pytest.approx(0.5 * stats["ctc"], rel=1e-6)
    model.eval()  # validation: the full loss, even during the warm-up
    loss, stats = task.forward_loss(model, b1)
    assert stats["rnnt"] > 0 and loss.item() == pytest.approx(stats["rnnt"] + 0.5 * stats["ctc"], rel=1e-5)
    model.train()
    loss, stats = task.forward_loss(model, _batch(task, cfg, train, 2))
    assert stats["rnnt"] > 0 and loss.item() == pytest.approx(stats["rnnt"] + 0.5 * stats["ctc"], rel=1e-5)
    with pytest.raises(ConfigError, match="ctc_warmup_epochs"):
        make(rnnt_env, "model.ctc_warmup_epochs=1")


def test_specaug_only_on_training_batches(rnnt_env):
    task, cfg = make(rnnt_env, "model.variant=multisoftmax", "specaug.enabled=true", "specaug.p=1.0",
                     "specaug.max_time_mask_fraction=0.5", "specaug.freq_mask_size=8")
    model = task.build_model(cfg)
    train, _ = task.build_datasets(cfg)
    batch = _batch(task, cfg, train, 1)
    seen = []
    orig = model.forward

    def spy(feats, *args, **kw):
        seen.append(feats.clone())
        return orig(feats, *args, **kw)

    model.forward = spy
    model.eval()
    task.forward_loss(model, batch)
    assert torch.equal(seen[-1], batch["feats"])
    model.train()
    task.forward_loss(model, batch)
    changed = seen[-1] != batch["feats"]
    assert changed.any() and (seen[-1][changed] == 0).all()  # masked values are 0 (the CMVN mean)
    task2, cfg2 = make(rnnt_env, "model.variant=multisoftmax")
    task2.build_model(cfg2)
    assert task2.specaug is None
