"""Early switch-off by the recipe's own variant (switch_off_rule: posterior; not in the paper, whose
rule is eq. 1's log-posterior gap, test_switch_off_eq1.py): a decoder stops once t > tau and its
running average LID posterior is below s_th, the best running one never; checked against a
frame-by-frame reference computed from the model's own LID posteriors."""
import math

import pytest
import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.features.stack import stack_frames
from speechkit.models.rnnt import RNNT, RNNTConfig

VOCAB = {"hi": 7, "ta": 6, "gu": 8}
RAW = 10


def tiny(variant="multisoftmax_lid"):
    torch.manual_seed(0)
    return RNNT(RNNTConfig.from_dict({
        "vocab_sizes": VOCAB, "variant": variant, "input_dim": 8 * RAW, "encoder_layers": 1,
        "encoder_hidden": 24, "encoder_proj": 0, "pred_layers": 1, "pred_hidden": 16, "pred_proj": 0,
        "embed_dim": 8, "joint_dim": 16,
    })).eval()


def feats(T=120, seed=3):
    return torch.randn(T, RAW, generator=torch.Generator().manual_seed(seed))


def reference_stops(model, x, tau, s_th):
    """Frame (0-based) at which each decoder stops, by the rule written out frame by frame."""
    st, _ = stack_frames(x, None, 8, 3)
    with torch.no_grad():
        enc, _, _ = model.encode(st[None])
        post = model.lid_posteriors(enc)[0].double()
    names = list(model.languages)
    active, stops, run = set(names), {n: None for n in names}, torch.zeros(len(names), dtype=torch.float64)
    for t in range(1, post.size(0) + 1):
        run += post[t - 1]
        if t <= tau:
            continue
        avg = run / t
        best = max((i for i, n in enumerate(names) if n in active), key=lambda i: float(avg[i]))
        for i, n in enumerate(names):
            if n in active and i != best and float(avg[i]) < s_th:
                active.discard(n)
                stops[n] = t - 1
    return stops


def biased(bias):
    m = tiny()
    with torch.no_grad():
        m.lid_head.weight.mul_(3.0)
        m.lid_head.bias.copy_(torch.tensor(bias))
    return m


@pytest.mark.parametrize("tau,s_th", [(0, 0.2), (3, 0.5), (10, 0.2), (33, 0.5), (1, 0.3)])
def test_posterior_rule_matches_reference(tau, s_th):
    m = biased([0.3, -0.4, 0.0])
    x = feats()
    r = recognize(m, x, DecodeConfig(mode="lid_free", tau=tau, s_th=s_th, switch_off_rule="posterior",
                                     chunk_frames=13))
    want = reference_stops(m, x, tau, s_th)
    assert r.switched_off_at == want
    for n, at in want.items():
        assert r.decoder_frames[n] == (r.num_frames if at is None else at)
    assert r.switched_off_at[r.language] is None


def test_posterior_rule_infinite_threshold_keeps_only_the_best():
    m = biased([0.0, 2.0, -1.0])
    r = recognize(m, feats(), DecodeConfig(mode="lid_free", tau=4, s_th=math.inf, switch_off_rule="posterior"))
    assert sorted(n for n, at in r.switched_off_at.items() if at is None) == [r.language]
    assert all(at == 4 for n, at in r.switched_off_at.items() if n != r.language)


def test_posterior_rule_zero_threshold_and_long_tau_equal_plain_lid_free():
    m = biased([0.3, -0.4, 0.0])
    plain = recognize(m, feats(), DecodeConfig(mode="lid_free"))
    for cfg in (DecodeConfig(mode="lid_free", tau=0, s_th=0.0, switch_off_rule="posterior"),
                DecodeConfig(mode="lid_free", tau=10_000, s_th=0.5, switch_off_rule="posterior")):
        r = recognize(m, feats(), cfg)
        assert r.hyps == plain.hyps and r.language == plain.language
        assert r.switched_off_at == {k: None for k in VOCAB}


def test_bad_rule():
    with pytest.raises(ValueError, match="switch_off_rule"):
        recognize(tiny(), feats(), DecodeConfig(mode="lid_free", tau=1, s_th=0.5, switch_off_rule="ratio"))


def test_lsp_lid_variant_decodes_lid_free():
    m = tiny("multisoftmax_lsp_lid")
    r = recognize(m, feats(), DecodeConfig(mode="lid_free", tau=3, s_th=0.5, switch_off_rule="posterior"))
    assert r.language in VOCAB and set(r.hyps) == set(VOCAB)
