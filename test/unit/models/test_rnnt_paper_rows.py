"""The paper's rows of issue 11 at the model level: Table 6 parameter counts of the ``paper``
preset, shared joint projections, the multisoftmax_lsp_lid variant (drawn in Figure 2) and the one-hot /
vanilla models reduced to one language for fine-tuning (Table 3)."""
import pytest
import torch

from speechkit.models.rnnt import parameter_counts, to_monolingual
from speechkit.models.rnnt_parameters import (PAPER_TABLE6, PAPER_UNION_VOCAB_SIZE, PAPER_VOCAB_SIZES,
                                              padded_union_maps, paper_parameter_table)
from speechkit.nn.rnnt_loss import rnnt_loss

VOCAB = {"hi": 9, "ta": 7, "gu": 8}  # the tiny fixture's (conftest.py)


def lstm(i, h):  # parameters of one unprojected LSTM layer: 4H x (in + H) weights + 2 x 4H biases
    return 4 * h * (i + h) + 8 * h


def test_table6_within_2_percent_and_ordering():
    table = paper_parameter_table()
    for system, paper_m in PAPER_TABLE6.items():
        got = table[system]["total"] / 1e6
        assert abs(got - paper_m) / paper_m < 0.02, (system, got, paper_m)
        assert abs(got - paper_m) / paper_m < 0.001, (system, got, paper_m)  # what Table 1's inventories give
    tot = {k: v["total"] for k, v in table.items()}
    assert tot["mono"] < tot["multisoftmax"] < tot["vanilla"] < tot["onehot"] < tot["multisoftmax_lid"]
    assert tot["multisoftmax_lsp"] > tot["multisoftmax_lid"]
    assert 1.4e6 < table["multisoftmax_lid"]["lid"] < 1.7e6  # a hidden layer, not a linear head
    assert table["multisoftmax_lsp_lid"]["total"] == tot["multisoftmax_lsp"] + table["multisoftmax_lid"]["lid"]


def test_table6_by_hand():
    """The counts from the layer formulas, independently of the model code; the inventories are
    Table 1's (En-IN 133, Hi-IN 59, Ta-IN 97, Gu-IN 123 units), the union padded to 610."""
    H, E, J, Vu, L = 1024, 1024, 1024, 610, 4
    V = {"en": 133, "hi": 59, "ta": 97, "gu": 123}
    assert PAPER_VOCAB_SIZES == V and PAPER_UNION_VOCAB_SIZE == Vu
    enc = lstm(640, H) + 5 * lstm(H, H)
    pred = lstm(E, H) + lstm(H, H)
    proj = H * J + J + H * J  # W_enc (bias) + W_pred, shared
    out = {k: E * v + J * v + v for k, v in V.items()}  # embedding + output layer
    table = paper_parameter_table()
    assert table["mono"]["total"] == enc + pred + proj + out["en"]
    assert table["multisoftmax"]["total"] == enc + pred + proj + sum(out.values())
    assert table["multisoftmax_lsp"]["total"] == enc + L * pred + proj + sum(out.values())
    assert table["vanilla"]["total"] == enc + pred + proj + E * Vu + J * Vu + Vu
    assert table["onehot"]["total"] == table["vanilla"]["total"] + 4 * H * L
    assert table["multisoftmax_lid"]["lid"] == H * 1536 + 1536 + 1536 * L + L
    # decoding one language uses the shared projections in full
    assert table["multisoftmax"]["decode_en"] == table["mono"]["total"]


def test_padded_union_maps():
    m = padded_union_maps({"a": 3, "b": 4}, 9)
    assert m == {"a": [0, 1, 2], "b": [0, 3, 4, 8]}
    with pytest.raises(ValueError, match="disjoint union"):
        padded_union_maps({"a": 3, "b": 4}, 5)


def test_shared_joint_projections(tiny):
    m = tiny("multisoftmax", share_joint_proj=True)
    assert m.joint_nets["hi"].lin_enc is m.joint_nets["ta"].lin_enc
    assert m.joint_nets["gu"].lin_pred is m.joint_nets["hi"].lin_pred
    c = parameter_counts(m)
    assert c["total"] == sum(p.numel() for p in m.parameters())
    assert c["joint"] == 16 * 10 + 10 + 12 * 10 + sum(10 * v + v for v in VOCAB.values())
    # one gradient step moves the shared projection for every language
    feats, tl = torch.randn(2, 6, 12), torch.tensor([6, 5])
    out = m(feats, tl, torch.tensor([[1, 2], [3, 0]]), torch.tensor([2, 1]), "ta")
    out["total"].backward()
    assert m.joint_nets["hi"].lin_enc.weight.grad is not None
    # checkpoint round trip keeps the sharing
    m2 = tiny("multisoftmax", share_joint_proj=True, )
    m2.load_state_dict(m.state_dict())
    assert m2.joint_nets["hi"].lin_enc is m2.joint_nets["gu"].lin_enc
    torch.testing.assert_close(m2.joint_nets["gu"].lin_enc.weight, m.joint_nets["hi"].lin_enc.weight)
    mono = to_monolingual(m, "ta")
    assert parameter_counts(mono)["total"] == c["decode_ta"]


def test_multisoftmax_lsp_lid(tiny):
    m = tiny("multisoftmax_lsp_lid")
    assert m.has_lid and set(m.pred_rnns) == set(VOCAB)
    feats, tl = torch.randn(3, 8, 12), torch.tensor([8, 7, 6])
    out = m(feats, tl, torch.tensor([[1, 2], [3, 1], [2, 2]]), torch.tensor([2, 2, 1]), ["hi", "ta", "gu"])
    assert out["lid_ce"] > 0
    torch.testing.assert_close(out["total"], out["rnnt"] + out["lid_ce"])
    out["total"].backward()
    assert m.pred_rnns["ta"].weight_ih_l0.grad.abs().sum() > 0
    assert m.lid_head.weight.grad.abs().sum() > 0
    mono = to_monolingual(m.eval(), "gu")
    assert mono.config.variant == "multisoftmax_lsp" and not mono.has_lid


@pytest.mark.parametrize("variant,config", [("onehot", {}), ("onehot", {"onehot_scale": 25.3}), ("vanilla", {})])
def test_to_monolingual_shared_softmax(variant, config, tiny):
    """The one-language model's joint logits equal the union model's at the language's units,
    so its RNN-T loss equals the loss of the union logits restricted to those units (for one-hot
    at any ``onehot_scale``: the fold into the bias carries the scale)."""
    m = tiny(variant, **config).eval()
    mono = to_monolingual(m, "ta").eval()
    assert mono.config.variant == "multisoftmax" and mono.languages == ["ta"]
    assert mono.config.input_dim == 12 and mono.encoder.weight_ih_l0.shape[1] == 12
    rows = torch.tensor(m.config.union_map_lists()["ta"])
    x = torch.randn(2, 7, 12)
    e1, _, _ = m.encode(x, lang="ta")
    e2, _, _ = mono.encode(x)
    torch.testing.assert_close(e1, e2)
    y = torch.tensor([[1, 4, 6], [2, 2, 0]])  # per-language ids of 'ta'
    pin = torch.cat([torch.zeros(2, 1, dtype=torch.long), y], 1)
    g1 = m.prediction_network("ta", m.to_union("ta", pin))
    g2 = mono.prediction_network("ta", pin)
    torch.testing.assert_close(g1, g2)
    z1 = m.joint_network("ta")(e1[:, :, None], g1[:, None])[..., rows]
    z2 = mono.joint_network("ta")(e2[:, :, None], g2[:, None])
    torch.testing.assert_close(z1, z2)
    lengths, ylen = torch.tensor([7, 6]), torch.tensor([3, 2])
    ref = rnnt_loss(z1, y, lengths, ylen, blank=0, reduction="none")
    got = mono(x, lengths, y, ylen, "ta")["rnnt"]
    torch.testing.assert_close(got, ref.mean())
    assert parameter_counts(mono)["total"] < parameter_counts(m)["total"]


def test_onehot_fold_differs_by_language(tiny):
    m = tiny("onehot").eval()
    x = torch.randn(1, 5, 12)
    a, _, _ = to_monolingual(m, "hi").encode(x)
    b, _, _ = to_monolingual(m, "gu").encode(x)
    assert not torch.allclose(a, b)
