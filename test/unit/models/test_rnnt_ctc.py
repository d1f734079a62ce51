"""Auxiliary CTC on the RNN-T encoder: the loss against a brute-force sum over CTC paths, the
encoder warm-up (ctc_only) trains only the encoder and the CTC heads, monolingual reduction keeps
the language's head, parameter counts, config errors; and the failure it fixes: a tiny RNN-T
must fit utterances whose content only the acoustics tell, emitting every label after its
evidence (the "prediction-network LM" optimum emits them all in the first frames)."""
import itertools
import math

import numpy as np
import pytest
import torch

from speechkit.decode.rnnt_search import DecodeConfig, recognize
from speechkit.models.rnnt import RNNT, RNNTConfig, parameter_counts, to_monolingual
from speechkit.utils.cli import ConfigError

SMALL = dict(input_dim=6, encoder_layers=1, encoder_hidden=10, encoder_proj=0, pred_layers=1, pred_hidden=8,
             pred_proj=0, embed_dim=4, joint_dim=8)


def model(variant="multisoftmax", vocab=None, **kw):
    torch.manual_seed(0)
    return RNNT(RNNTConfig.from_dict({"vocab_sizes": vocab or {"aa": 4, "bb": 5}, "variant": variant,
                                      **SMALL, **kw}))


def ctc_brute_force(logp: torch.Tensor, y: list[int]) -> float:
    """-log sum over every frame labelling that collapses (merge repeats, drop blank 0) to y."""
    T, V = logp.shape
    total = -math.inf
    for path in itertools.product(range(V), repeat=T):
        out = [k for i, k in enumerate(path) if k != 0 and (i == 0 or path[i - 1] != k)]
        if out == y:
            total = np.logaddexp(total, float(sum(logp[t, k] for t, k in enumerate(path))))
    return -total


@pytest.mark.parametrize("variant", ["multisoftmax", "vanilla"])
def test_ctc_loss_against_brute_force(variant):
    m = model(variant, ctc_weight=0.5)
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(2, 5, 6, generator=g)
    targets = torch.tensor([[1, 1, 2], [3, 0, 0]])
    tl = torch.tensor([3, 1])
    lang = ["aa", "bb"] if variant == "vanilla" else "bb"
    out = m(feats, torch.tensor([5, 4]), targets, tl, lang)
    enc, _, _ = m.encode(feats)
    want = []
    for b in range(2):
        ln = lang[b] if isinstance(lang, list) else lang
        head = m.ctc_head if variant == "vanilla" else m.ctc_heads[ln]
        y = targets[b, : tl[b]]
        if variant == "vanilla":
            y = m.to_union(ln, y)
        T = 5 if b == 0 else 4
        want.append(ctc_brute_force(torch.log_softmax(head(enc[b, :T]), -1).detach(), y.tolist()))
    assert out["ctc"].item() == pytest.approx(np.mean(want), rel=1e-5)
    assert out["total"].item() == pytest.approx(out["rnnt"].item() + 0.5 * out["ctc"].item(), rel=1e-6)


def test_ctc_only_trains_encoder_and_ctc_heads_only():
    m = model("multisoftmax_lid", ctc_weight=0.3, ctc_warmup_epochs=1)
    feats = torch.randn(2, 6, 6)
    out = m(feats, torch.tensor([6, 6]), torch.tensor([[1, 2], [2, 3]]), torch.tensor([2, 2]), "aa", ctc_only=True)
    assert out["rnnt"].item() == 0.0
    assert out["total"].item() == pytest.approx(0.3 * out["ctc"].item() + out["lid_ce"].item(), rel=1e-6)
    out["total"].backward()
    for name, p in m.named_parameters():
        trained = p.grad is not None and bool(p.grad.abs().sum() > 0)
        expected = name.startswith(("encoder.", "lid_head.", "ctc_heads.aa."))
        assert trained == expected, name
    with pytest.raises(ValueError, match="ctc_only needs a CTC head"):
        model()(feats, torch.tensor([6, 6]), torch.tensor([[1], [2]]), torch.tensor([1, 1]), "aa", ctc_only=True)


@pytest.mark.parametrize("variant", ["multisoftmax", "onehot"])
def test_to_monolingual_keeps_the_languages_ctc_head(variant):
    m = model(variant, ctc_weight=0.3)
    mono = to_monolingual(m, "bb")
    enc = torch.randn(3, m.config.encoder_dim)
    if variant == "onehot":
        rows = torch.tensor(m.config.union_map_lists()["bb"])
        want = m.ctc_head(enc)[:, rows]
    else:
        want = m.ctc_heads["bb"](enc)
    torch.testing.assert_close(mono.ctc_heads["bb"](enc), want)


def test_parameter_counts_and_config_errors():
    plain, with_ctc = model(), model(ctc_weight=0.3)
    c0, c1 = parameter_counts(plain), parameter_counts(with_ctc)
    assert c0["ctc"] == 0 and c1["ctc"] == (10 + 1) * (4 + 5)
    assert c1["total"] == c0["total"] + c1["ctc"] and c1["decode_aa"] == c0["decode_aa"]
    with pytest.raises(ConfigError, match="ctc_warmup_epochs: needs ctc_weight"):
        model(ctc_warmup_epochs=2)
    with pytest.raises(ConfigError, match="ctc_weight"):
        model(ctc_weight=-1.0)


# ------------------------------------------------------------ the RNN-T must listen to the encoder
V, D, SIL, SEG = 10, 12, 4, 3


def acoustic_only_task(n=24, seed=0):
    """Utterances '1 x 2 y' (templates 1, 2; contents x, y drawn from 3..9): every label is SEG
    frames of its own random vector after SIL frames of silence, so the first frames are the same
    for all and only the acoustics say x and y. Returns feats (n, T, D), targets (n, 4), and the
    first frame of each label's evidence."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(V, D, generator=g) * 2
    feats, tgts, starts = [], [], []
    for _ in range(n):
        lab = [1, *torch.randint(3, V, (1,), generator=g).tolist(), 2, *torch.randint(3, V, (1,), generator=g).tolist()]
        frames, st, t = [torch.zeros(SIL, D)], [], SIL
        for k in lab:
            st.append(t)
            frames += [emb[k].expand(SEG, D), torch.zeros(1, D)]
            t += SEG + 1
        feats.append(torch.cat(frames))  # no noise: nothing but the content tells utterances apart
        tgts.append(lab)
        starts.append(st)
    return torch.stack(feats), torch.tensor(tgts), starts


def emission_frames(m: RNNT, feats: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Posterior expected emission frame of each label, sum_t t P(label u emitted at t | x, y),
    from a plain per-node forward-backward over the model's joint log-probs (Graves 2012)."""
    with torch.no_grad():
        enc, _, _ = m.encode(feats[None])
        pred = m.prediction_network(0, torch.cat([torch.zeros(1, dtype=torch.long), y])[None])
        lp = m.joint(0, enc[0, :, None, :], pred[0, None]).double().numpy()
    T, U = lp.shape[0], len(y)
    b, lab = lp[:, :, 0], np.stack([lp[:, u, int(y[u])] for u in range(U)], 1)
    a = np.full((T, U + 1), -np.inf)
    be = np.full((T, U + 1), -np.inf)
    a[0, 0] = 0.0
    for t in range(T):
        for u in range(U + 1):
            if t or u:
                a[t, u] = np.logaddexp(a[t - 1, u] + b[t - 1, u] if t else -np.inf,
                                       a[t, u - 1] + lab[t, u - 1] if u else -np.inf)
    for t in range(T - 1, -1, -1):
        for u in range(U, -1, -1):
            be[t, u] = b[t, u] if (t, u) == (T - 1, U) else np.logaddexp(
                be[t + 1, u] + b[t, u] if t < T - 1 else -np.inf, be[t, u + 1] + lab[t, u] if u < U else -np.inf)
    occ = np.exp(a[:, :U] + lab + be[:, 1:] - be[0, 0])  # P(label u emitted at frame t)
    return (occ * np.arange(T)[:, None]).sum(0)


def _acoustic_model(**kw):
    torch.manual_seed(0)
    return RNNT(RNNTConfig.from_dict({
        "vocab_sizes": {"a": V}, "variant": "multisoftmax", "input_dim": D, "encoder_layers": 1,
        "encoder_hidden": 48, "encoder_proj": 0, "pred_layers": 1, "pred_hidden": 32, "pred_proj": 0,
        "embed_dim": 8, "joint_dim": 32, **kw}))


def _train(m, feats, y, steps, ctc_only=False):
    B, T = feats.shape[:2]
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    for _ in range(steps):
        out = m(feats, torch.full((B,), T), y, torch.full((B,), y.size(1)), "a", ctc_only=ctc_only)
        opt.zero_grad()
        out["total"].backward()
        opt.step()
    return m.eval()


def test_encoder_alone_transcribes_the_acoustic_task_with_ctc():
    feats, y, _ = acoustic_only_task()
    m = _train(_acoustic_model(ctc_weight=1.0), feats, y, 300, ctc_only=True)
    with torch.no_grad():
        best = m.ctc_heads["a"](m.encode(feats)[0]).argmax(-1)
    hyps = [[int(k) for i, k in enumerate(p) if k and (i == 0 or p[i - 1] != k)] for p in best]
    assert hyps == y.tolist()


def test_rnnt_fits_acoustic_content_and_emits_it_after_the_evidence():
    """Greedy search returns every training transcript, and the content labels (x, y: only the
    acoustics tell them) are emitted after their evidence starts. A model in the prediction-
    network-LM optimum fails both: it emits all four labels in the first frames (about 8 and 12
    frames early; this model is there after 300 updates and has left it after 600)."""
    feats, y, starts = acoustic_only_task()
    m = _train(_acoustic_model(), feats, y, 600)
    for i in range(len(y)):
        assert recognize(m, feats[i], DecodeConfig(method="greedy"), lang="a", stacked_input=True).tokens \
            == y[i].tolist(), i
        frames = emission_frames(m, feats[i], y[i])
        assert frames[1] >= starts[i][1] - 0.5 and frames[3] >= starts[i][3] - 0.5, (i, frames)
