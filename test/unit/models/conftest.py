"""Fixtures of the model tests: a tiny RNN-T of any variant."""
from __future__ import annotations

import pytest
import torch

from speechkit.models.rnnt import RNNT, RNNTConfig

#: The languages and vocabulary sizes (blank included) of the tiny RNN-T.
RNNT_VOCAB = {"hi": 9, "ta": 7, "gu": 8}


def _tiny_rnnt(variant, vocab=RNNT_VOCAB, **kw):
    torch.manual_seed(0)
    args = dict(input_dim=12, encoder_layers=2, encoder_hidden=16, encoder_proj=0, pred_layers=2,
                pred_hidden=12, pred_proj=0, embed_dim=6, joint_dim=10)
    args.update(kw)
    return RNNT(RNNTConfig.from_dict({"vocab_sizes": dict(vocab), "variant": variant, **args}))


@pytest.fixture
def tiny():
    """``tiny(variant, vocab=RNNT_VOCAB, **config)``: an RNN-T of that variant (seed 0), 12-dim input,
    2-layer encoder (16) and prediction network (12), joint 10; ``config`` overrides any key."""
    return _tiny_rnnt
