"""egs/indic_multilingual/conf: every training config loads into the rnnt task's schema, and the
tuning config differs from conf/train_real.yaml in exactly the keys its header names."""
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


def test_tuning_config_is_train_real_plus_its_named_changes():
    task = get_task("rnnt")
    base = to_dict(load_config(task.Config, CONF / "train_real.yaml", []))
    tuned = to_dict(load_config(task.Config, CONF / "tuning" / "train_real_sp_ctc.yaml", []))
    assert {k: (a, b) for k, a, b in config_diff(base, tuned)} == {
        "trainer.max_epochs": (20, 16), "trainer.scheduler": ("warmup_constant", "warmup_cosine"),
        "trainer.min_lr": (0.0, 1e-5), "trainer.keep_last": (1, 6), "model.ctc_weight": (0.0, 0.3),
        "model.ctc_warmup_epochs": (0, 1), "model.dropout": (0.0, 0.2)}
