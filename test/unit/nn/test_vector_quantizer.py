"""EMA vector quantizer: assignment, straight-through gradient, losses and EMA updates by hand."""
import math

import pytest
import torch

from speechkit.nn.vector_quantizer import EMAVectorQuantizer, code_perplexity


def make_vq(codebook, **kw) -> EMAVectorQuantizer:
    vq = EMAVectorQuantizer(codebook.size(0), codebook.size(1), **kw)
    vq.set_codebook(codebook)
    return vq


def test_nearest_code_matches_brute_force():
    torch.manual_seed(0)
    vq = make_vq(torch.randn(37, 5))
    z = torch.randn(4, 19, 5)
    codes = vq.quantize(z)
    brute = torch.tensor([[min(range(37), key=lambda k: float(((z[b, t] - vq.codebook[k]) ** 2).sum()))
                           for t in range(19)] for b in range(4)])
    assert torch.equal(codes, brute)
    out = vq.eval()(z)
    assert torch.equal(out.codes, brute)
    assert torch.allclose(out.z_q, vq.codebook[brute])


def test_straight_through_gradient_equals_upstream_gradient():
    torch.manual_seed(0)
    vq = make_vq(torch.randn(8, 3)).eval()
    z = torch.randn(2, 5, 3, requires_grad=True)
    upstream = torch.randn(2, 5, 3)
    (vq(z).z_q * upstream).sum().backward()
    assert torch.allclose(z.grad, upstream)


def test_codebook_gets_no_gradient_and_is_not_a_parameter():
    vq = EMAVectorQuantizer(8, 3)
    assert list(vq.parameters()) == []
    assert {"codebook", "ema_count", "ema_weight", "unused_steps"} <= set(vq.state_dict())


def test_commitment_loss_by_hand():
    # codebook e0 = (0, 0), e1 = (10, 10); frames (1, 0), (0, 1) -> e0 at squared distance 1 each,
    # (9, 9) -> e1 at squared distance 2; gamma * mean = 0.25 * 4 / 3
    vq = make_vq(torch.tensor([[0.0, 0.0], [10.0, 10.0]]), commitment_cost=0.25).eval()
    z = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]], requires_grad=True)
    out = vq(z)
    assert out.codes.tolist() == [[0, 0, 1]]
    assert out.commitment_loss.item() == pytest.approx(0.25 * 4 / 3)
    out.commitment_loss.backward()  # d/dz of gamma/N * ||z - e||^2 = 2 gamma (z - e) / N
    assert torch.allclose(z.grad, 2 * 0.25 * (z.detach() - torch.tensor([[0.0, 0], [0, 0], [10, 10]])) / 3)


def test_ema_update_by_hand():
    # decay 0.5, eps 0.1, N starts at 1 and m at the codebook.
    # batch: codes (0, 0, 1): n = (2, 1), s = ((1, 1), (9, 9))
    # N = 0.5 * 1 + 0.5 * n = (1.5, 1.0); m = 0.5 * e + 0.5 * s = ((0.5, 0.5), (9.5, 9.5))
    # Laplace: N' = (N + 0.1) / (2.5 + 2 * 0.1) * 2.5 = (1.6, 1.1) * 2.5 / 2.7
    # e = m / N' = 0.5 * 2.7 / 4 = 0.3375 and 9.5 * 2.7 / 2.75 = 9.3272727...
    vq = make_vq(torch.tensor([[0.0, 0.0], [10.0, 10.0]]), decay=0.5, epsilon=0.1).train()
    z = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]])
    out = vq(z)
    assert torch.allclose(out.z_q, torch.tensor([[[0.0, 0], [0, 0], [10, 10]]]))  # pre-update codebook
    assert torch.allclose(vq.ema_count, torch.tensor([1.5, 1.0]))
    assert torch.allclose(vq.ema_weight, torch.tensor([[0.5, 0.5], [9.5, 9.5]]))
    assert torch.allclose(vq.codebook, torch.tensor([[0.3375, 0.3375], [9.5 * 2.7 / 2.75] * 2]), atol=1e-6)


def test_no_update_in_eval_mode():
    vq = make_vq(torch.randn(4, 2)).eval()
    before = {k: v.clone() for k, v in vq.state_dict().items()}
    vq(torch.randn(1, 6, 2))
    for k, v in vq.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_padded_frames_do_not_affect_codebook_or_losses():
    torch.manual_seed(0)
    codebook = torch.randn(16, 4)
    a, b = torch.randn(7, 4), torch.randn(4, 4)
    batch = torch.full((2, 7, 4), 1e3)  # garbage padding, far from everything
    batch[0], batch[1, :4] = a, b
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])

    padded = make_vq(codebook, decay=0.9).train()
    out = padded(batch, mask)
    # the same frames as one unpadded sequence give the same update, loss and histogram
    flat = make_vq(codebook, decay=0.9).train()
    ref = flat(torch.cat([a, b]).unsqueeze(0))
    assert torch.allclose(padded.codebook, flat.codebook, atol=1e-6)
    assert torch.allclose(padded.ema_count, flat.ema_count)
    assert out.commitment_loss.item() == pytest.approx(ref.commitment_loss.item(), rel=1e-6)
    assert torch.equal(out.counts, ref.counts) and out.counts.sum() == 11
    assert torch.all(out.codes[1, 4:] == 0) and torch.all(out.z_q[1, 4:] == 0)

    # and the batch loss is the frame-weighted mean of the two singletons' losses
    single = make_vq(codebook).eval()
    la, lb = single(a[None]).commitment_loss, single(b[None]).commitment_loss
    batch_loss = single(batch, mask).commitment_loss
    assert batch_loss.item() == pytest.approx(((7 * la + 4 * lb) / 11).item(), rel=1e-6)


def test_perplexity_of_known_histograms():
    assert code_perplexity(torch.tensor([2.0, 2.0, 0.0, 0.0])).item() == pytest.approx(2.0)
    assert code_perplexity(torch.tensor([5.0, 5.0, 5.0, 5.0])).item() == pytest.approx(4.0)
    assert code_perplexity(torch.tensor([3.0, 1.0])).item() == pytest.approx(
        math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))))
    assert code_perplexity(torch.tensor([0.0, 7.0])).item() == pytest.approx(1.0)
    assert code_perplexity(torch.zeros(3)).item() == 1.0
    # through the quantizer: codes (0, 0, 1, 2) -> p = (1/2, 1/4, 1/4) -> 2^1.5
    vq = make_vq(torch.tensor([[0.0], [10.0], [20.0], [30.0]])).eval()
    out = vq(torch.tensor([[[0.1], [0.2], [10.0], [19.0]]]))
    assert out.perplexity.item() == pytest.approx(2 ** 1.5)
    assert out.codes_used.item() == 3


def test_dead_code_restart():
    torch.manual_seed(0)
    codebook = torch.tensor([[0.0, 0.0], [100.0, 100.0], [-100.0, 100.0]])
    z = torch.randn(1, 20, 2) * 0.1 + 5.0  # always code 0
    vq = make_vq(codebook, restart_unused_steps=2).train()
    vq(z)
    assert torch.equal(vq.unused_steps, torch.tensor([0, 1, 1]))
    vq(z)  # codes 1 and 2 unused twice -> moved onto frames of this batch
    assert torch.equal(vq.unused_steps, torch.tensor([0, 0, 0]))
    for k in (1, 2):
        assert torch.min(((z[0] - vq.codebook[k]) ** 2).sum(-1)).item() < 1e-10
        assert vq.ema_count[k].item() == 1.0
    # off by default: nothing restarts
    vq = make_vq(codebook).train()
    for _ in range(5):
        vq(z)
    assert torch.all(vq.codebook[1:].abs() > 50)


def test_bad_arguments():
    for kw, name in [({"codebook_size": 0, "dim": 2}, "codebook_size"),
                     ({"codebook_size": 2, "dim": 2, "decay": 1.0}, "decay"),
                     ({"codebook_size": 2, "dim": 2, "epsilon": 0.0}, "epsilon")]:
        with pytest.raises(ValueError, match=name):
            EMAVectorQuantizer(**kw)
    with pytest.raises(ValueError, match="shape"):
        EMAVectorQuantizer(4, 3)(torch.randn(2, 5, 2))


def _ddp_worker(rank: int, world: int, init_file: str, data: torch.Tensor, codebook: torch.Tensor, queue) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        vq = make_vq(codebook, decay=0.8).train()
        out = vq(data[rank: rank + 1])
        # plain lists: a tensor sent through the queue lives in this process's shared memory, which
        # may be gone by the time the parent unpickles it
        queue.put((rank, vq.codebook.tolist(), vq.ema_count.tolist(), out.counts.tolist()))
    finally:
        dist.destroy_process_group()


def test_ddp_all_reduce_gives_the_single_process_update(tmp_path):
    """Two gloo ranks with half a batch each end with the codebook of one process seeing the whole batch."""
    import torch.multiprocessing as mp

    torch.manual_seed(0)
    codebook, data = torch.randn(6, 3), torch.randn(2, 9, 3)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    init_file = str(tmp_path / "dist_init")
    procs = [ctx.Process(target=_ddp_worker, args=(r, 2, init_file, data, codebook, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict((r, rest) for r, *rest in (queue.get(timeout=300) for _ in procs))
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    single = make_vq(codebook, decay=0.8).train()
    ref = single(data.reshape(1, 18, 3))
    for rank in (0, 1):
        cb, count, counts = map(torch.tensor, results[rank])
        assert torch.allclose(cb, single.codebook, atol=1e-6)
        assert torch.allclose(count, single.ema_count)
        assert torch.equal(counts, ref.counts)
