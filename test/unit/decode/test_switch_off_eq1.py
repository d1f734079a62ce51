"""Early switch-off by the paper's rule (Joshi et al. 2021, section 6.3; switch_off_rule: gap, the
default): s_l(t) = sum_{t'=0}^{t} log P_t'(l) (eq. 1); decoder l is turned off once t > tau frames
and s_l(t) < s_lmax(t) - s_th, l_max the best language still decoding. Checked against the rule
written out frame by frame from the model's own LID posteriors, at the paper's Table 7 settings
(tau 10 / 30 / 100 frames, s_th 0.2 / 0.5) and others."""
import math

import pytest
import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.features.stack import stack_frames
from speechkit.models.rnnt import RNNT, RNNTConfig

VOCAB = {"hi": 7, "ta": 6, "gu": 8}
RAW = 10


def model(bias):
    torch.manual_seed(0)
    m = RNNT(RNNTConfig.from_dict({
        "vocab_sizes": VOCAB, "variant": "multisoftmax_lid", "input_dim": 8 * RAW, "encoder_layers": 1,
        "encoder_hidden": 24, "encoder_proj": 0, "pred_layers": 1, "pred_hidden": 16, "pred_proj": 0,
        "embed_dim": 8, "joint_dim": 16,
    })).eval()
    with torch.no_grad():
        m.lid_head.weight.mul_(3.0)
        m.lid_head.bias.copy_(torch.tensor(bias))
    return m


def feats(T=420, seed=5):
    return torch.randn(T, RAW, generator=torch.Generator().manual_seed(seed))


def eq1_stops(m, x, tau, s_th):
    """0-based frame at which each decoder is turned off: eq. 1 summed from t' = 0; after the
    frame with 0-based index k (k + 1 frames seen) the decoders have run k + 1 frames, and the
    rule may act once that count exceeds tau; a decoder turned off there does not decode frame k."""
    st, _ = stack_frames(x, None, 8, 3)
    with torch.no_grad():
        enc, _, _ = m.encode(st[None])
        logp = torch.log(m.lid_posteriors(enc)[0].double())
    names = list(m.languages)
    s = torch.zeros(len(names), dtype=torch.float64)
    active, stops = set(names), {n: None for n in names}
    for k in range(logp.size(0)):
        s += logp[k]                                # s_l(k) = sum_{t'=0}^{k} log P_t'(l)
        if k + 1 <= tau:
            continue
        s_max = max(float(s[i]) for i, n in enumerate(names) if n in active)
        for i, n in enumerate(names):
            if n in active and float(s[i]) < s_max - s_th:
                active.discard(n)
                stops[n] = k
    return stops


@pytest.mark.parametrize("tau,s_th", [(10, 0.2), (10, 0.5), (30, 0.2), (30, 0.5), (100, 0.5), (0, 5.0), (3, 2.0)])
def test_gap_rule_is_eq1(tau, s_th):
    m, x = model([0.2, -0.3, 0.1]), feats()
    r = recognize(m, x, DecodeConfig(mode="lid_free", tau=tau, s_th=s_th, chunk_frames=17))
    want = eq1_stops(m, x, tau, s_th)
    assert r.switched_off_at == want
    assert any(at is not None for at in want.values())   # the case switches something off
    for n, at in want.items():
        assert r.decoder_frames[n] == (r.num_frames if at is None else at)
        if at is not None:
            assert at >= tau                                # every decoder ran the first tau frames
    # the default rule is the paper's
    assert DecodeConfig().switch_off_rule == "gap"


def test_tau_beyond_the_utterance_and_infinite_threshold_switch_nothing_off():
    """Table 7's first rows: tau or s_th at infinity is plain LID-free decoding."""
    m, x = model([0.2, -0.3, 0.1]), feats()
    plain = recognize(m, x, DecodeConfig(mode="lid_free"))
    for cfg in (DecodeConfig(mode="lid_free", tau=plain.num_frames, s_th=0.2),
                DecodeConfig(mode="lid_free", tau=0, s_th=math.inf)):
        r = recognize(m, x, cfg)
        assert r.switched_off_at == {k: None for k in VOCAB}
        assert r.hyps == plain.hyps and r.language == plain.language
