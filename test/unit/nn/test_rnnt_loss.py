"""RNN-T loss: brute force over all alignments, gradcheck, the per-node reference, torchaudio."""
import itertools

import pytest
import torch

from speechkit.nn.rnnt_loss import RNNTLoss, _logsumexp_chunked, rnnt_loss, rnnt_loss_reference


def brute_force_nll(lp: torch.Tensor, y, T: int, U: int, blank: int = 0) -> torch.Tensor:
    """-log sum over every alignment of exp(sum of its log-probs); lp is (T_max, U_max+1, V).

    An alignment interleaves T blanks and U labels and ends with a blank (at node (T-1, U)); the
    blank at (t, u) moves to (t+1, u), the label at (t, u) emits y[u] and moves to (t, u+1).
    """
    paths = []
    for label_slots in itertools.combinations(range(T - 1 + U), U):
        t = u = 0
        s = lp.new_zeros(())
        for i in range(T - 1 + U):
            if i in label_slots:
                s = s + lp[t, u, y[u]]
                u += 1
            else:
                s = s + lp[t, u, blank]
                t += 1
        paths.append(s + lp[T - 1, U, blank])
    return -torch.logsumexp(torch.stack(paths), 0)


def _case(B=3, T=4, U=3, V=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V, generator=g, dtype=dtype) * 2
    targets = torch.randint(1, V, (B, U), generator=g)
    T_b = torch.tensor([T] + [max(1, T - 1 - i) for i in range(B - 1)])
    U_b = torch.tensor([U] + [max(0, U - 2 + i) % (U + 1) for i in range(B - 1)])
    return logits.requires_grad_(), targets, T_b, U_b


def _hand_case():
    """T=2, U=1, V=2 (blank=0, label=1): two alignments, worked by hand."""
    p = torch.tensor([[[0.6, 0.4], [0.7, 0.3]], [[0.5, 0.5], [0.9, 0.1]]], dtype=torch.float64)
    # alignments: (label@(0,0), blank@(0,1), blank@(1,1)) and (blank@(0,0), label@(1,0), blank@(1,1))
    prob = 0.4 * 0.7 * 0.9 + 0.6 * 0.5 * 0.9
    return p.log()[None], torch.tensor([[1]]), torch.tensor([2]), torch.tensor([1]), prob


def test_hand_worked_case():
    lp, y, tl, ul, prob = _hand_case()
    loss = rnnt_loss(lp, y, tl, ul, reduction="none", fused_log_softmax=False)
    assert loss.item() == pytest.approx(-torch.log(torch.tensor(prob, dtype=torch.float64)).item(), abs=1e-12)
    # fused: log-softmax of log-probs is the identity
    assert rnnt_loss(lp, y, tl, ul).item() == pytest.approx(loss.item(), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("blank", [0, 2])
@pytest.mark.parametrize("fused", [True, False])
def test_matches_brute_force_loss_and_grad(seed, blank, fused):
    B, T, U, V = 4, 4, 3, 5
    logits, targets, T_b, U_b = _case(B, T, U, V, seed)
    targets = targets.masked_fill(targets == blank, (blank + 1) % V)
    x = logits if fused else torch.log_softmax(logits, -1).detach().requires_grad_()
    ours = rnnt_loss(x, targets, T_b, U_b, blank=blank, reduction="none", fused_log_softmax=fused)
    lp = torch.log_softmax(x, -1) if fused else x
    ref = torch.stack([brute_force_nll(lp[b], targets[b], int(T_b[b]), int(U_b[b]), blank) for b in range(B)])
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)
    w = torch.rand(B, dtype=torch.float64)  # non-uniform upstream gradient
    g_ours, = torch.autograd.grad((ours * w).sum(), x)
    g_ref, = torch.autograd.grad((ref * w).sum(), x)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-9, atol=1e-10)
    # padded frames and labels get exactly zero gradient
    for b in range(B):
        assert g_ours[b, int(T_b[b]):].abs().sum() == 0
        assert g_ours[b, :, int(U_b[b]) + 1:].abs().sum() == 0


@pytest.mark.parametrize("fused", [True, False])
def test_gradcheck_float64(fused):
    logits, targets, T_b, U_b = _case(3, 3, 2, 4, seed=3)
    for reduction in ("mean", "sum", "none"):
        assert torch.autograd.gradcheck(
            lambda x: rnnt_loss(x, targets, T_b, U_b, reduction=reduction, fused_log_softmax=fused),
            (logits,), eps=1e-6, atol=1e-6,
        )


def test_matches_per_node_reference_medium_float32():
    torch.manual_seed(0)
    B, T, U, V = 3, 23, 9, 17
    x = torch.randn(B, T, U + 1, V, requires_grad=True)
    y = torch.randint(1, V, (B, U))
    tl, ul = torch.tensor([23, 17, 5]), torch.tensor([9, 4, 9])
    a = rnnt_loss(x, y, tl, ul, reduction="sum")
    b = rnnt_loss_reference(x, y, tl, ul, reduction="sum")
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)
    ga, = torch.autograd.grad(a, x)
    gb, = torch.autograd.grad(b, x)
    torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("max_elements", [1, 7, 20, 10**6])
def test_chunked_logsumexp(max_elements):
    x = torch.randn(3, 5, 4, 6)
    torch.testing.assert_close(_logsumexp_chunked(x, torch.float32, max_elements), torch.logsumexp(x, -1))
    torch.testing.assert_close(_logsumexp_chunked(x.half(), torch.float32, max_elements),
                               torch.logsumexp(x.half().float(), -1))


def test_reductions_module_and_empty_targets():
    logits, targets, T_b, U_b = _case(3, 4, 3, 5, seed=5)
    none = rnnt_loss(logits, targets, T_b, U_b, reduction="none")
    assert none.shape == (3,)
    torch.testing.assert_close(rnnt_loss(logits, targets, T_b, U_b), none.mean())
    torch.testing.assert_close(RNNTLoss(reduction="sum")(logits, targets, T_b, U_b), none.sum())
    # U = 0 everywhere: the only alignment is T blanks
    lp = torch.log_softmax(logits[:, :, :1], -1)
    l0 = rnnt_loss(lp, targets[:, :0], T_b, torch.zeros(3, dtype=torch.long), reduction="none", fused_log_softmax=False)
    want = torch.stack([-lp[b, : int(T_b[b]), 0, 0].sum() for b in range(3)])
    torch.testing.assert_close(l0, want)


def test_float16_and_clamp():
    logits, targets, T_b, U_b = _case(2, 5, 3, 6, seed=7, dtype=torch.float32)
    h = logits.detach().half().requires_grad_()
    lh = rnnt_loss(h, targets, T_b, U_b)
    assert lh.dtype == torch.float16
    torch.testing.assert_close(lh.float(), rnnt_loss(h.float(), targets, T_b, U_b), rtol=1e-3, atol=1e-3)
    g, = torch.autograd.grad(rnnt_loss(logits, targets, T_b, U_b, clamp=0.01), logits)
    assert g.abs().max() <= 0.01 + 1e-7


def test_bad_input_messages():
    logits, targets, T_b, U_b = _case(2, 4, 3, 5)
    with pytest.raises(ValueError, match="logit_lengths"):
        rnnt_loss(logits, targets, torch.tensor([0, 4]), U_b[:2])
    with pytest.raises(ValueError, match="target_lengths"):
        rnnt_loss(logits, targets, T_b[:2], torch.tensor([4, 1]))
    with pytest.raises(ValueError, match="blank"):
        rnnt_loss(logits, torch.zeros_like(targets), T_b[:2], U_b[:2])
    with pytest.raises(ValueError, match=r"\(B, T, U\+1, V\)"):
        rnnt_loss(logits[0], targets, T_b[:2], U_b[:2])
    with pytest.raises(ValueError, match="reduction"):
        rnnt_loss(logits, targets, T_b[:2], U_b[:2], reduction="avg")


def _torchaudio_rnnt_loss():
    F = pytest.importorskip("torchaudio.functional", reason="torchaudio is not installed")
    try:  # the op lives in a compiled extension that may not load on this torch build
        x = torch.zeros(1, 2, 2, 3)
        F.rnnt_loss(x, torch.ones(1, 1, dtype=torch.int32), torch.tensor([2], dtype=torch.int32),
                    torch.tensor([1], dtype=torch.int32))
    except Exception as e:  # noqa: BLE001 - any load/dispatch failure means "not available"
        pytest.skip(f"torchaudio.functional.rnnt_loss does not load here: {type(e).__name__}: {e}")
    return F.rnnt_loss


@pytest.mark.parametrize("fused", [True, False])
def test_matches_torchaudio(fused):
    ta_rnnt_loss = _torchaudio_rnnt_loss()
    torch.manual_seed(0)
    B, T, U, V = 4, 30, 10, 20
    logits = torch.randn(B, T, U + 1, V)
    x = (logits if fused else logits.log_softmax(-1)).requires_grad_()
    y = torch.randint(1, V, (B, U), dtype=torch.int32)
    tl = torch.tensor([30, 25, 20, 30], dtype=torch.int32)
    ul = torch.tensor([10, 7, 3, 0], dtype=torch.int32)
    ref = ta_rnnt_loss(x, y, tl, ul, blank=0, reduction="none", fused_log_softmax=fused)
    ours = rnnt_loss(x, y, tl, ul, blank=0, reduction="none", fused_log_softmax=fused)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-4)
    if fused:  # torchaudio's non-fused gradient follows its own convention; brute force checks ours
        g_ref, = torch.autograd.grad(ref.sum(), x)
        g_ours, = torch.autograd.grad(ours.sum(), x)
        torch.testing.assert_close(g_ours, g_ref, rtol=1e-4, atol=1e-5)
