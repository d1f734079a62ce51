"""Table 3's one-hot fine-tuning row through the rnnt task: init.exp_dir of a trained one-hot
model with init.language gives the one-language multi-softmax reduction (speechkit.models.rnnt.
to_monolingual), and a training step runs from it."""
from __future__ import annotations

import torch

from speechkit.models.rnnt import to_monolingual
from speechkit.tasks import get_task, load_model
from speechkit.train.trainer import Trainer
from speechkit.utils.config import load_config


def make(env, *extra):
    task = get_task("rnnt")
    return task, load_config(task.Config, None, env["overrides"] + list(extra))


def test_fine_tune_onehot_per_language(rnnt_env):
    task, cfg = make(rnnt_env, "trainer.max_epochs=1", "model.variant=onehot")
    Trainer(task, cfg, "exp/onehot").fit()
    src, _ = load_model("exp/onehot")
    ft = ["model.variant=multisoftmax", "data.languages=[bb]", "init.exp_dir=exp/onehot", "init.language=bb"]
    task, cfg = make(rnnt_env, *ft)
    model = task.build_model(cfg)
    want = to_monolingual(src, "bb").state_dict()
    assert set(model.state_dict()) == set(want)
    for k, v in want.items():
        torch.testing.assert_close(model.state_dict()[k], v)
    # the union logits of bb's units survive the reduction
    src.eval(), model.eval()
    x = torch.randn(1, 6, cfg.model.input_dim)
    e1, _, _ = src.encode(x, lang="bb")
    e2, _, _ = model.encode(x)
    torch.testing.assert_close(e1, e2)
    # and it trains (one epoch, bb only)
    task, cfg = make(rnnt_env, "trainer.max_epochs=1", *ft)
    Trainer(task, cfg, "exp/ft_onehot_bb").fit()
    tuned, _ = load_model("exp/ft_onehot_bb")
    assert tuned.languages == ["bb"] and tuned.config.variant == "multisoftmax"
