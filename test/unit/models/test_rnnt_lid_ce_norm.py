"""The LID cross-entropy of multisoftmax_lid: frame-averaged (default, today's numbers) or summed
per utterance like the RNN-T loss (lid_ce_norm), against a hand-computed reference; the language
id rules of the units and the model."""
import pytest
import torch
import torch.nn.functional as F

from speechkit.models.rnnt import RNNT, RNNTConfig
from speechkit.text.units import check_language_id
from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError

VOCAB = {"hi": 7, "ta": 6}


def tiny(**kw):
    torch.manual_seed(0)
    return RNNT(RNNTConfig.from_dict({
        "vocab_sizes": dict(VOCAB), "variant": "multisoftmax_lid", "input_dim": 12, "encoder_layers": 1,
        "encoder_hidden": 16, "encoder_proj": 0, "pred_layers": 1, "pred_hidden": 8, "pred_proj": 0,
        "embed_dim": 4, "joint_dim": 8, **kw}))


def batch():
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(3, 9, 12, generator=g)
    feat_lengths = torch.tensor([9, 6, 2])
    targets = torch.randint(1, 6, (3, 3), generator=g)
    target_lengths = torch.tensor([3, 2, 1])
    lang = torch.tensor([0, 1, 0])
    return feats, feat_lengths, targets, target_lengths, lang


def reference_frame_ce(model, feats, feat_lengths, lang):
    """Per-utterance lists of -log P_t(lang) over the valid encoder frames, by hand."""
    enc, enc_lengths, _ = model.encode(feats, feat_lengths, lang=lang)
    logp = torch.log_softmax(model.lid_logits(enc), dim=-1)
    return [-logp[b, : int(enc_lengths[b]), int(lang[b])] for b in range(feats.size(0))]


def test_frame_and_utterance_normalisation_against_hand_computation():
    feats, fl, tg, tl, lang = batch()
    m_frame = tiny().eval()
    m_utt = tiny(lid_ce_norm="utterance").eval()
    m_utt.load_state_dict(m_frame.state_dict())
    with torch.no_grad():
        per_utt = reference_frame_ce(m_frame, feats, fl, lang)
        out_f = m_frame(feats, fl, tg, tl, lang)
        out_u = m_utt(feats, fl, tg, tl, lang)
    frames = sum(len(x) for x in per_utt)
    assert frames == 9 + 6 + 2  # the model reads stacked frames: one encoder frame each
    want_frame = sum(float(x.sum()) for x in per_utt) / frames
    want_utt = sum(float(x.sum()) for x in per_utt) / 3
    assert float(out_f["lid_ce"]) == pytest.approx(want_frame, rel=1e-5)
    assert float(out_u["lid_ce"]) == pytest.approx(want_utt, rel=1e-5)
    assert float(out_f["rnnt"]) == float(out_u["rnnt"])
    for out in (out_f, out_u):
        assert float(out["total"]) == pytest.approx(float(out["rnnt"] + out["lid_ce"]), rel=1e-6)


def test_frame_norm_is_todays_cross_entropy_mean():
    feats, fl, tg, tl, lang = batch()
    m = tiny(lid_weight=0.3).eval()
    with torch.no_grad():
        out = m(feats, fl, tg, tl, lang)
        enc, el, _ = m.encode(feats, fl, lang=lang)
        ok = torch.arange(enc.size(1))[None, :] < el[:, None]
        old = F.cross_entropy(m.lid_logits(enc)[ok], lang[:, None].expand(3, enc.size(1))[ok])
    assert torch.allclose(out["lid_ce"], old, rtol=1e-6, atol=0)
    assert float(out["total"]) == pytest.approx(float(out["rnnt"] + 0.3 * old), rel=1e-6)


def test_bad_lid_ce_norm_is_a_config_error():
    with pytest.raises(ConfigError, match="lid_ce_norm"):
        RNNTConfig.from_dict({"vocab_sizes": dict(VOCAB), "lid_ce_norm": "token"})


@pytest.mark.parametrize("lang", ["en.us", "to", "keys"])
def test_model_refuses_language_ids_torch_cannot_key(lang):
    with pytest.raises(ConfigError, match="bad language name"):
        RNNTConfig(vocab_sizes={lang: 3}).validate()


@pytest.mark.parametrize("lang", ["no", "on", "yes", "hi", "en-IN", "x_1"])
def test_ordinary_ids_pass_both_rules(lang):
    assert check_language_id(lang) == lang
    RNNTConfig(vocab_sizes={lang: 3}).validate()


def test_units_rule_refuses_a_dot_like_the_model():
    with pytest.raises(DataError, match=r"utt2lang:3: language id 'en\.us' must match"):
        check_language_id("en.us", "utt2lang:3")
