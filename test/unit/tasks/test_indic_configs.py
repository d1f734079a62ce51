"""egs/indic_multilingual/conf: every training config loads into the rnnt task's schema, and each
tuning config (the plain RNN-T kept for comparison) differs from its default in exactly the keys its
header names."""
from __future__ import annotations

from pathlib import Path

import pytest

from speechkit.tasks import get_task
from speechkit.utils.config import config_diff, load_config, to_dict

CONF = Path(__file__).resolve().parents[3] / "egs" / "indic_multilingual" / "conf"


@pytest.mark.parametrize("path", sorted(p for p in CONF.rglob("train_*.yaml")), ids=lambda p: p.name)
def test_every_training_config_loads(path):
    cfg = load_config(get_task("rnnt").Config, path, [])
    assert cfg.trainer.max_epochs > 0


def _diff(base: str, other: str) -> dict:
    task = get_task("rnnt")
    a = to_dict(load_config(task.Config, CONF / base, []))
    b = to_dict(load_config(task.Config, CONF / other, []))
    return {k: (x, y) for k, x, y in config_diff(a, b)}


def test_real_default_is_the_no_ctc_config_plus_ctc_dropout_and_cosine_decay():
    assert _diff("tuning/train_real_no_ctc.yaml", "train_real.yaml") == {
        "trainer.max_epochs": (20, 16), "trainer.scheduler": ("warmup_constant", "warmup_cosine"),
        "trainer.min_lr": (0.0, 1e-5), "model.ctc_weight": (0.0, 0.3),
        "model.ctc_warmup_epochs": (0, 1), "model.dropout": (0.0, 0.2)}


def test_mini_default_is_the_no_ctc_config_plus_ctc_and_fewer_epochs():
    assert _diff("tuning/train_mini_no_ctc.yaml", "train_mini.yaml") == {
        "trainer.max_epochs": (30, 8), "model.ctc_weight": (0.0, 0.3), "model.ctc_warmup_epochs": (0, 2)}
