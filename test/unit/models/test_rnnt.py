"""Multilingual RNN-T models: shapes per variant, streaming encoder, LID gradient flow,
union mapping, mixed batches, monolingual fine-tuning, parameter counts, an overfit run."""
import pytest
import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.models.rnnt import VARIANTS, RNNT, RNNTConfig, lstm_step, parameter_counts, to_monolingual
from speechkit.models.rnnt_parameters import parameter_table
from speechkit.nn.rnnt_loss import rnnt_loss
from speechkit.utils.cli import ConfigError

VOCAB = {"hi": 9, "ta": 7, "gu": 8}  # the tiny fixture's (conftest.py)


def batch(B=4, T=11, U=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(B, T, 12, generator=g)
    feat_lengths = torch.tensor([T, T - 3, 5, 1][:B])
    targets = torch.randint(1, 7, (B, U), generator=g)
    target_lengths = torch.tensor([U, 2, 0, 3][:B])
    return feats, feat_lengths, targets, target_lengths


@pytest.mark.parametrize("variant", VARIANTS)
def test_shapes_and_losses_per_variant(variant, tiny):
    m = tiny(variant)
    feats, fl, y, yl = batch()
    out = m(feats, fl, y, yl, ["hi", "ta", "hi", "gu"])
    assert set(out) == {"rnnt", "lid_ce", "total"}
    assert all(v.dim() == 0 and torch.isfinite(v) for v in out.values())
    assert (out["lid_ce"] > 0) == variant.endswith("_lid")
    torch.testing.assert_close(out["total"], out["rnnt"] + out["lid_ce"])
    out["total"].backward()
    enc, lens, (h, c) = m.encode(feats, fl, lang="hi")
    assert enc.shape == (4, 11, 16) and lens.tolist() == fl.tolist() and h.shape == (2, 4, 16)
    pred, st = m.prediction_step("ta", torch.tensor([0, 3]))
    assert pred.shape == (2, 12) and st[0].shape == (2, 2, 12)
    lp = m.joint("ta", enc[:2, :, None, :], pred[:, None, None, :])
    V = m.vocab_size("ta")
    assert V == (1 + sum(v - 1 for v in VOCAB.values()) if variant in ("vanilla", "onehot") else 7)
    assert lp.shape == (2, 11, 1, V)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 11, 1))
    if variant.endswith("_lid"):
        post = m.lid_posteriors(enc)
        assert post.shape == (4, 11, 3)
        torch.testing.assert_close(post.sum(-1), torch.ones(4, 11))
    else:
        with pytest.raises(ValueError, match="LID head"):
            m.lid_posteriors(enc)


@pytest.mark.parametrize("variant", ["multisoftmax_lid", "onehot"])
def test_streaming_encoder_equals_full(variant, tiny):
    m = tiny(variant).eval()
    x = torch.randn(1, 23, 12)
    full, _, _ = m.encode(x, lang="gu")
    for chunk in (1, 4, 10):
        state, parts = None, []
        for i in range(0, 23, chunk):
            e, _, state = m.encode(x[:, i : i + chunk], state=state, lang="gu")
            parts.append(e)
        torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.parametrize("proj", [0, 5])
def test_lstm_step_equals_torch_lstm(proj):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 8, num_layers=3, batch_first=True, proj_size=proj)
    x = torch.randn(4, 3, 6)
    want, (h, c) = lstm(x)
    state, outs = None, []
    for t in range(3):
        o, state = lstm_step(lstm, x[:, t], state)
        outs.append(o)
    torch.testing.assert_close(torch.stack(outs, 1), want)
    torch.testing.assert_close(state[0], h)
    torch.testing.assert_close(state[1], c)


def test_prediction_step_matches_prediction_network(tiny):
    m = tiny("multisoftmax_lsp").eval()
    tokens = torch.tensor([[0, 3, 1, 6], [0, 2, 2, 5]])
    full = m.prediction_network("ta", tokens)
    state = None
    for u in range(4):
        out, state = m.prediction_step("ta", tokens[:, u], state)
        torch.testing.assert_close(out, full[:, u])


def test_lid_ce_reaches_only_encoder_and_lid_head(tiny):
    m = tiny("multisoftmax_lid")
    feats, fl, y, yl = batch()
    out = m(feats, fl, y, yl, "hi")
    out["lid_ce"].backward(retain_graph=True)
    for name, p in m.named_parameters():
        got = p.grad is not None and bool(p.grad.abs().sum() > 0)
        expected = name.startswith(("encoder.", "lid_head."))
        assert got == expected, name
    m.zero_grad(set_to_none=True)
    out["rnnt"].backward()  # and the RNN-T loss never reaches the LID head
    assert all(p.grad is None for n, p in m.named_parameters() if n.startswith("lid_head."))
    assert m.encoder.weight_ih_l0.grad.abs().sum() > 0


def test_mixed_language_batch_equals_per_language_batches(tiny):
    m = tiny("multisoftmax_lsp")
    feats, fl, y, yl = batch()
    langs = ["hi", "ta", "hi", "gu"]
    mixed = m(feats, fl, y, yl, langs)["rnnt"]
    per = []
    for i, lang in enumerate(langs):
        T, U = int(fl[i]), int(yl[i])
        per.append(m(feats[i : i + 1, :T], fl[i : i + 1], y[i : i + 1, :U], yl[i : i + 1], lang)["rnnt"])
    torch.testing.assert_close(mixed, torch.stack(per).mean(), rtol=1e-5, atol=1e-5)


def test_multisoftmax_uses_language_specific_joint_and_embedding(tiny):
    m = tiny("multisoftmax")
    feats, fl, y, yl = batch()
    m(feats, fl, y, yl, "ta")["total"].backward()
    assert m.joint_nets["ta"].out.weight.grad is not None and m.embeddings["ta"].weight.grad is not None
    assert m.joint_nets["hi"].out.weight.grad is None and m.embeddings["gu"].weight.grad is None
    assert m.pred_rnn.weight_hh_l0.grad is not None  # shared prediction LSTM


def test_vanilla_union_mapping_default_and_custom(tiny):
    m = tiny("vanilla")
    # default disjoint union: blank, hi 1..8, ta 9..14, gu 15..21
    assert m.union_vocab_size == 22
    assert m.to_union("ta", torch.tensor([0, 1, 6])).tolist() == [0, 9, 14]
    feats, fl, y, yl = batch(B=1)
    loss = m(feats, fl, y, yl, "ta")["rnnt"]
    # independent computation with the union ids
    enc, _, _ = m.encode(feats)
    yu = m.to_union("ta", y[:, :4])
    pred = m.prediction_network(0, torch.cat([torch.zeros(1, 1, dtype=torch.long), yu], 1))
    logits = m.joint_net(enc[:, :, None], pred[:, None])
    torch.testing.assert_close(loss, rnnt_loss(logits, yu, fl, yl))
    # a shared inventory: hi and ta units 1..6 are the same union units
    maps = {"hi": list(range(9)), "ta": list(range(7)), "gu": [0] + list(range(9, 16))}
    m2 = tiny("vanilla", union_maps=maps)
    assert m2.union_vocab_size == 16
    a = m2(feats, fl, y, yl, "hi")["rnnt"]
    b = m2(feats, fl, y, yl, "ta")["rnnt"]
    torch.testing.assert_close(a, b)


def test_onehot_encoder_depends_on_language(tiny):
    m = tiny("onehot").eval()
    x = torch.randn(1, 5, 12)
    a, _, _ = m.encode(x, lang="hi")
    b, _, _ = m.encode(x, lang="ta")
    assert not torch.allclose(a, b)
    with pytest.raises(ValueError, match="language"):
        m.encode(x)


def test_onehot_scale_is_the_hot_entry(tiny):
    """``onehot_scale`` s: the encoder sees s at the language's input (same weights: the same
    output as a scale-1 model whose one-hot columns are multiplied by s); 1 is the default."""
    assert tiny("onehot").config.onehot_scale == 1.0
    m1, ms = tiny("onehot").eval(), tiny("onehot", onehot_scale=25.3).eval()
    ms.load_state_dict(m1.state_dict())
    x = torch.randn(2, 5, 12)
    a, _, _ = ms.encode(x, lang=["hi", "gu"])
    with torch.no_grad():
        m1.encoder.weight_ih_l0[:, 12:] *= 25.3
    b, _, _ = m1.encode(x, lang=["hi", "gu"])
    torch.testing.assert_close(a, b)
    with torch.no_grad():
        m1.encoder.weight_ih_l0[:, 12:] /= 25.3
    c, _, _ = m1.encode(x, lang=["hi", "gu"])
    assert not torch.allclose(a, c)
    for bad in (0, -1.0, float("inf"), True, "5"):
        with pytest.raises(ConfigError, match="onehot_scale"):
            tiny("onehot", onehot_scale=bad)


@pytest.mark.parametrize("variant", ["multisoftmax", "multisoftmax_lsp", "multisoftmax_lid"])
def test_to_monolingual(variant, tiny):
    m = tiny(variant).eval()
    mono = to_monolingual(m, "gu").eval()
    assert mono.languages == ["gu"] and not mono.has_lid
    assert mono.config.variant == ("multisoftmax_lsp" if variant == "multisoftmax_lsp" else "multisoftmax")
    x = torch.randn(2, 7, 12)
    tok = torch.tensor([0, 5])
    e1, _, _ = m.encode(x)
    e2, _, _ = mono.encode(x)
    p1, _ = m.prediction_step("gu", tok)
    p2, _ = mono.prediction_step("gu", tok)
    torch.testing.assert_close(m.joint("gu", e1[:, :, None], p1[:, None, None]),
                               mono.joint("gu", e2[:, :, None], p2[:, None, None]))
    assert parameter_counts(mono)["total"] == parameter_counts(m)["decode_gu"]
    assert not any(".hi." in k or ".ta." in k or k.startswith("lid_head") for k in mono.state_dict())


def test_to_monolingual_unknown_language(tiny):
    with pytest.raises(ValueError, match="unknown language"):
        to_monolingual(tiny("vanilla"), "xx")


def test_parameter_counts_by_hand(tiny):
    m = tiny("multisoftmax_lid")
    c = parameter_counts(m)
    assert c["total"] == sum(p.numel() for p in m.parameters())
    # LSTM layer: 4H x (in + H) weights + 2 x 4H biases
    assert c["encoder"] == 4 * 16 * (12 + 16) + 8 * 16 + 4 * 16 * (16 + 16) + 8 * 16
    assert c["lid"] == 16 * 3 + 3
    # joint per language: lin_enc (16->10, bias) + lin_pred (12->10) + out (10->V, bias)
    assert c["joint"] == sum(16 * 10 + 10 + 12 * 10 + 10 * v + v for v in VOCAB.values())


def test_parameter_table_paper_preset():
    vocab = {"hi": 70, "mr": 70, "ta": 60}
    table = parameter_table(vocab, "paper")
    assert set(table) == set(VARIANTS)
    # LSTM layer: 4H x (in + H) + 8H biases; 6 layers, first input 640 (+3 one-hot inputs)
    H = 1024
    layer = lambda i: 4 * H * (i + H) + 8 * H  # noqa: E731
    assert table["multisoftmax"]["encoder"] == layer(640) + 5 * layer(H)
    assert table["onehot"]["encoder"] == layer(643) + 5 * layer(H)
    assert table["multisoftmax_lsp"]["prediction"] > 2.5 * table["multisoftmax"]["prediction"]
    assert table["multisoftmax_lid"]["lid"] == H * 1536 + 1536 + 1536 * 3 + 3
    # a disjoint union is smaller than the three softmaxes (extra blanks, shared W_enc/W_pred)
    assert table["vanilla"]["total"] < table["multisoftmax"]["total"]


def test_config_validation_names_the_key():
    with pytest.raises(ConfigError, match="encoder_layer"):
        RNNTConfig.from_dict({"vocab_sizes": VOCAB, "encoder_layer": 3})
    with pytest.raises(ConfigError, match="variant"):
        RNNTConfig(vocab_sizes=VOCAB, variant="multi")
    with pytest.raises(ConfigError, match="vocab_sizes.ta"):
        RNNTConfig(vocab_sizes={"hi": 5, "ta": 1})
    with pytest.raises(ConfigError, match="union_maps"):
        RNNTConfig(vocab_sizes=VOCAB, variant="multisoftmax", union_maps={"hi": [0]})
    with pytest.raises(ConfigError, match="preset"):
        RNNTConfig.preset("huge", VOCAB)
    empty = RNNTConfig()  # defaults are constructible (vocab_sizes filled in later) ...
    with pytest.raises(ConfigError, match="vocab_sizes"):
        RNNT(empty)  # ... but a model needs languages
    cfg = RNNTConfig.preset("small", VOCAB, "multisoftmax_lid", dropout=0.1)
    assert RNNTConfig.from_dict(cfg.to_dict()) == cfg


def test_bad_batches(tiny):
    m = tiny("multisoftmax")
    feats, fl, y, yl = batch()
    with pytest.raises(ValueError, match="no encoder frames"):
        m(feats, torch.tensor([11, 0, 5, 1]), y, yl, "hi")
    with pytest.raises(ValueError, match="outside"):
        m(feats, fl, torch.full_like(y, 7), yl, "ta")  # ta has 7 units incl. blank
    with pytest.raises(ValueError, match="unknown language"):
        m(feats, fl, y, yl, "xx")


def test_overfit_tiny_model_transcribes_fixed_sequences():
    """A tiny multisoftmax RNN-T learns three fixed utterances; greedy decoding returns them."""
    torch.manual_seed(0)
    vocab = {"a": 6, "b": 5}
    m = RNNT(RNNTConfig.from_dict({
        "vocab_sizes": vocab, "variant": "multisoftmax", "input_dim": 8, "encoder_layers": 1,
        "encoder_hidden": 48, "encoder_proj": 0, "pred_layers": 1, "pred_hidden": 32, "pred_proj": 0,
        "embed_dim": 8, "joint_dim": 32,
    }))
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(3, 10, 8, generator=g)
    targets = torch.tensor([[1, 2, 3, 4], [5, 1, 5, 0], [4, 3, 0, 0]])
    lengths = torch.tensor([4, 3, 2])
    langs = ["a", "a", "b"]
    fl = torch.full((3,), 10)
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    for _ in range(150):
        opt.zero_grad()
        loss = m(feats, fl, targets, lengths, langs)["total"]
        loss.backward()
        opt.step()
    assert loss.item() < 0.1
    for i in range(3):
        r = recognize(m, feats[i], DecodeConfig(method="greedy"), lang=langs[i], stacked_input=True)
        assert r.tokens == targets[i, : lengths[i]].tolist(), i
        # beam search allows one symbol per frame: it agrees with greedy search under that cap
        one = recognize(m, feats[i], DecodeConfig(max_symbols_per_frame=1), lang=langs[i], stacked_input=True)
        beam = recognize(m, feats[i], DecodeConfig(method="beam", beam=3), lang=langs[i], stacked_input=True)
        assert beam.tokens == one.tokens and beam.scores[langs[i]] >= one.scores[langs[i]] - 1e-6
