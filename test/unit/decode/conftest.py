"""Fixtures of the RNN-T search tests: a scripted "model" whose joint output is a table of log-probs."""
from __future__ import annotations

import pytest
import torch
from torch import nn


# The joint output is a table indexed by (frame t, labels emitted u, last label); the encoder
# frame carries t, the prediction network carries (u, last label).
class _ScriptedJoint:
    def __init__(self, table):
        self.table = table  # (T, U, V_last, V) log-probs

    def lin_enc(self, enc):
        return enc

    def lin_pred(self, pred):
        return pred

    def from_projections(self, e, p):
        t = e[..., 0].long()
        u, last = p[..., 0].long(), p[..., 1].long()
        t, u, last = torch.broadcast_tensors(t, u, last)
        return self.table[t, u, last]


class ScriptedModel(nn.Module):
    """One language 'x', blank 0, no LID head; ``ScriptedModel(table)`` with ``table`` (T, U, V_last, V)."""

    blank = 0
    has_lid = False
    languages = ["x"]

    def __init__(self, table):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))
        self.jn = _ScriptedJoint(table)

    def joint_network(self, lang):
        return self.jn

    def prediction_step(self, lang, token, state=None):
        n = token.numel()
        if state is None:  # start symbol (blank)
            out = torch.zeros(n, 2)
        else:
            out = torch.stack([state[0][0, :, 0] + 1, token.float()], dim=1)
        h = out[None].clone()
        return out, (h, h.clone())


@pytest.fixture
def scripted_model():
    """The :class:`ScriptedModel` class: ``scripted_model(table)`` is a model for the decoders.
    Encoder frames for it: ``torch.arange(T, dtype=torch.float32)[:, None]`` (frame t carries t)."""
    return ScriptedModel
