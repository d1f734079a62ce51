"""ABX error: DTW and frame distances against brute force and hand-worked cases, ZeroSpeech averaging,
item files, feature directories and the two ABX CLIs."""
from __future__ import annotations

import collections
import importlib.util
import json
import logging
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from speechkit.scoring.abx import batches, cells, counting, dispatch, kernels_c, pairs, tiles
from speechkit.bin import make_abx_items as make_items_cli
from speechkit.bin import score_abx as score_abx_cli
from speechkit.scoring.abx import (
    CONVENTIONS,
    DISTANCES,
    MODES,
    TooFewResamplesError,
    abx_error,
    batched_dtw,
    bootstrap_interval,
    dtw_distance,
    frame_distance,
    min_usable_resamples,
    paired_bootstrap_difference,
    select_frames,
)
from speechkit.scoring.abx_items import (
    ITEM_HEADER,
    Item,
    make_abx_items,
    read_item_file,
    read_phone_alignments,
    write_item_file,
)
from speechkit.scoring.feature_dir import FeatureDir, read_text_features, resolve_frame_shift
from speechkit.utils.fileio import DataError

_spec = importlib.util.spec_from_file_location("abx_reference", Path(__file__).with_name("abx_reference.py"))
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)


def synthetic(seed, kind="cont", dim=4, n_spk=3, n_utt=1, dur=0.45):
    """Random features and items: 3 phones x 2 contexts, several speakers, 1-7 frame tokens."""
    rng = np.random.default_rng(seed)
    feats, items = {}, []
    for s in range(n_spk):
        for u in range(n_utt):
            f = f"s{s}_u{u}"
            n = int(dur * 100) + 10
            if kind == "cont":
                feats[f] = rng.normal(size=(n, dim))
            elif kind == "pos":
                feats[f] = rng.dirichlet(np.ones(dim), size=n)
                feats[f][rng.random(n) < 0.1, 0] = 0.0  # exact zeros: epsilon smoothing matters
            else:
                feats[f] = np.eye(dim)[rng.integers(0, dim, size=n)]
            t = 0.0
            while t < dur:
                d = int(rng.integers(1, 8)) * 0.01 + 0.002
                items.append(Item(f, round(t, 4), round(t + d, 4), str(rng.choice(["a", "b", "c"])),
                                  (str(rng.choice(["x", "y"])), "z"), f"s{s}", len(items) + 2))
                t += d
    return feats, items


def as_dicts(items):
    return [dict(file=i.file, onset=i.onset, offset=i.offset, phone=i.phone, context=i.context, speaker=i.speaker)
            for i in items]


# ------------------------------------------------------------------------------ hand-worked DTW
def test_dtw_2x3_by_hand():
    # x: 2 frames, y: 3 frames; cosine distance arccos(cos)/pi:
    #   d = [[0, 1, .5], [.5, .5, 0]]
    # cost row 0: 0, 1, 1.5; row 1: .5, .5 + min(1, 0, .5) = .5, 0 + min(1.5, 1, .5) = .5
    # backtrack from (1,2): up 1.5, left .5, diag 1 -> left; (1,1): diag 0 -> (0,0): 3 frame pairs
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(frame_distance(x, y, "cosine"), [[0, 1, 0.5], [0.5, 0.5, 0]], atol=1e-15)
    assert dtw_distance(x, y, "cosine", normalize=False) == pytest.approx(0.5, abs=1e-15)
    assert dtw_distance(x, y, "cosine") == pytest.approx(0.5 / 3, abs=1e-15)
    assert dtw_distance(y, x, "cosine") == pytest.approx(0.5 / 3, abs=1e-15)


def test_batched_dtw_given_matrix_by_hand():
    # d = [[1, 2, 4], [3, 1, 1]]: cost [[1, 3, 7], [4, 2, 3]], total 3, path (0,0) (1,1) (1,2)
    d = torch.tensor([[[1.0, 2, 4], [3, 1, 1]]], dtype=torch.float64)
    total, len_rc, len_cr = batched_dtw(d, torch.tensor([2]), torch.tensor([3]))
    assert total.tolist() == [3.0] and len_rc.tolist() == [3] and len_cr.tolist() == [3]


def test_backtrack_tie_break_depends_on_argument_order():
    # 3x3 with equal up/left costs where the diagonal is dearer: ABXpy prefers the step along
    # its second argument (j), so d(x, y) and d(y, x) differ in path length, hence in value.
    d = np.array([[0.0, 0.0, 9.0], [0.0, 9.0, 9.0], [9.0, 9.0, 0.0]])
    d[1, 1] = 1.0
    a, b = ref.ref_dtw(d), ref.ref_dtw(d.T)
    total, len_rc, len_cr = batched_dtw(torch.from_numpy(d)[None], torch.tensor([3]), torch.tensor([3]))
    assert total.item() / len_rc.item() == pytest.approx(a, abs=1e-15)
    assert total.item() / len_cr.item() == pytest.approx(b, abs=1e-15)


def test_batched_dtw_matches_bruteforce_on_padded_random_batch():
    rng = np.random.default_rng(3)
    mats = []
    for k in range(300):
        n, m = int(rng.integers(1, 13)), int(rng.integers(1, 13))
        # half of them integer-valued: many exact ties in the minimum and in the backtrack
        d = rng.integers(0, 3, size=(n, m)).astype(float) if k % 2 else rng.random((n, m))
        mats.append(d)
    nmax, mmax = max(d.shape[0] for d in mats), max(d.shape[1] for d in mats)
    batch = torch.full((len(mats), nmax, mmax), 7.0, dtype=torch.float64)  # padding must not matter
    for b, d in enumerate(mats):
        batch[b, : d.shape[0], : d.shape[1]] = torch.from_numpy(d)
    total, len_rc, len_cr = batched_dtw(batch, torch.tensor([d.shape[0] for d in mats]),
                                        torch.tensor([d.shape[1] for d in mats]))
    n_asym = 0
    for b, d in enumerate(mats):
        assert total[b].item() == pytest.approx(ref.ref_dtw(d, normalize=False), abs=1e-12)
        assert total[b].item() / len_rc[b].item() == pytest.approx(ref.ref_dtw(d), abs=1e-12)
        assert total[b].item() / len_cr[b].item() == pytest.approx(ref.ref_dtw(d.T), abs=1e-12)
        n_asym += len_rc[b].item() != len_cr[b].item()
    assert n_asym > 0  # the tie-break case was exercised


# --------------------------------------------------------------------------- frame distances
@pytest.mark.parametrize("distance", ["cosine", "kl", "hamming"])
def test_frame_distance_matches_reference(distance):
    rng = np.random.default_rng(1)
    if distance == "cosine":
        x, y = rng.normal(size=(6, 5)), rng.normal(size=(4, 5))
        x[2] = 0.0  # zero frames: 1 against non-zero, 0 against zero
        y[1] = 0.0
        y[3] = 3 * x[0]  # cos = 1 exactly in theory: clamped
    elif distance == "kl":
        x, y = rng.dirichlet(np.ones(5), 6), rng.dirichlet(np.ones(5), 4)
        x[0] = [1, 0, 0, 0, 0]
        y[0] = 2 * x[1]  # unnormalised input is normalised first
    else:
        x, y = np.eye(5)[rng.integers(0, 5, 6)], rng.integers(0, 3, size=(4, 5)).astype(float)
    np.testing.assert_allclose(frame_distance(x, y, distance), ref.ref_frame_distance(x, y, distance), atol=1e-12)


def test_kl_is_symmetrised_and_zero_on_identical_frames():
    p = np.array([[0.7, 0.2, 0.1]])
    q = np.array([[0.1, 0.1, 0.8]])
    kl = lambda a, b: float(np.sum(a * np.log(a / b)))  # noqa: E731
    assert frame_distance(p, q, "kl")[0, 0] == pytest.approx(0.5 * kl(p[0], q[0]) + 0.5 * kl(q[0], p[0]), rel=1e-9)
    assert frame_distance(p, p, "kl")[0, 0] == pytest.approx(0.0, abs=1e-15)


def test_hamming_on_one_hot_codes():
    x = np.eye(4)[[0, 1]]
    np.testing.assert_allclose(frame_distance(x, x, "hamming"), [[0, 0.5], [0.5, 0]])


# ------------------------------------------------------------------------------ ABX vs brute force
@pytest.mark.parametrize("mode", ["across", "within"])
@pytest.mark.parametrize("distance,kind", [("cosine", "cont"), ("kl", "pos"), ("hamming", "onehot")])
def test_abx_matches_per_triplet_bruteforce(mode, distance, kind):
    feats, items = synthetic(7, kind=kind, n_utt=2, dur=0.3)
    res = abx_error(feats, items, mode=mode, distance=distance)
    err, n = ref.ref_abx(feats, as_dicts(items), mode=mode, distance=distance)
    assert res.n_triplets == n > 50
    assert abs(res.error - err) < 1e-6
    assert sum(p.n_triplets for p in res.by_phone_pair) == n


@pytest.mark.parametrize("mode", ["across", "within"])
def test_needed_pairs_of_large_contexts_by_speaker_block(mode, monkeypatch):
    """Within speakers, a context of DEVICE_PAIRS_MIN_TOKENS tokens or more finds its needed pairs one speaker
    block at a time: forced here on a small task, the same triplets and the same bits as the whole-context
    masks, and the brute force's score."""
    feats, items = synthetic(7, n_utt=2, dur=0.3)
    dense = abx_error(feats, items, mode=mode)
    monkeypatch.setattr(dispatch, "DEVICE_PAIRS_MIN_TOKENS", 1)
    blocked = abx_error(feats, items, mode=mode)
    assert (blocked.n_dtw_pairs, blocked.n_triplets, blocked.error) == (dense.n_dtw_pairs, dense.n_triplets,
                                                                        dense.error)
    err, n = ref.ref_abx(feats, as_dicts(items), mode=mode)
    assert blocked.n_triplets == n and abs(blocked.error - err) < 1e-6


@pytest.mark.parametrize("mode", ["across", "within"])
@pytest.mark.parametrize("n", [40, 600])
def test_needed_pairs_from_integer_codes_are_the_labels_pairs(mode, n):
    """abx_error passes each context's phones and speakers as integer codes of the whole item set (not labels),
    numbered in the labels' order: the same pairs in the same order, however sparse the numbering (codes past 255
    are renumbered), for a small context (numpy) and a large one (torch masks; within: one speaker at a time)."""
    rng = np.random.default_rng(n)
    ph, sp = rng.integers(0, 6, n), rng.integers(0, 4, n)
    ref = pairs.needed_pairs([f"p{k}" for k in ph], [f"s{k}" for k in sp], mode)
    assert len(ref[0]) > 0
    for ph_codes, sp_codes in [(ph, sp), (ph * 7 + 3, sp * 2 + 1), (ph * 1000 + 5, sp + 300)]:
        got = pairs.needed_pairs(ph_codes, sp_codes, mode)
        assert got[0].tolist() == ref[0].tolist() and got[1].tolist() == ref[1].tolist()


def test_token_groups_number_contexts_and_speakers_by_first_appearance():
    """pairs.token_groups (the tiles' (context, speaker) grouping) against a loop over the contexts and their tokens in
    order, numbering contexts and speakers as they first appear; speaker codes sparse and out of that order."""
    rng = np.random.default_rng(4)
    n = 500
    ctx_of, spk_code = rng.integers(0, 30, n), rng.integers(0, 9, n) * 5 + 2
    members: dict[tuple[str, ...], list[int]] = {}
    for k, c in enumerate(ctx_of.tolist()):
        members.setdefault((f"c{c}",), []).append(k)
    expect = np.empty(n, dtype=np.int64)
    seen: dict[int, int] = {}
    for c, mem in enumerate(members.values()):
        for k in mem:
            expect[k] = (c << 32) | seen.setdefault(int(spk_code[k]), len(seen))
    assert pairs.token_groups(spk_code, members).tolist() == expect.tolist()


@pytest.mark.parametrize("mode", ["across", "within"])
def test_small_torch_operations_run_on_one_thread(mode, monkeypatch):
    """abx_error builds needed-pair masks on one torch thread unless they are large (THREADED_MASK_ELEMENTS):
    on a loaded machine each parallel region of a small operation waited for a descheduled pool thread
    (5 ms per context instead of 0.16 ms: a 567-triplet task took 2.7 s instead of 0.2 s on 2 cores with a busy
    one). The caller's setting is restored, the bits unchanged."""
    feats, items = synthetic(7, n_utt=2, dur=0.3)
    seen = []
    real = pairs.needed_pairs

    def spy(*a, **k):
        seen.append(torch.get_num_threads())
        return real(*a, **k)

    monkeypatch.setattr(pairs, "needed_pairs", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the caller's pool (the test session runs with one thread)
    try:
        small = abx_error(feats, items, mode=mode)
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        monkeypatch.setattr(dispatch, "THREADED_MASK_ELEMENTS", 1)  # every mask counts as large
        monkeypatch.setattr(dispatch, "DEVICE_PAIRS_MIN_TOKENS", 1)  # within: the per-speaker blocks too
        large = abx_error(feats, items, mode=mode)
        assert set(seen) == {2} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert (large.n_triplets, large.error) == (small.n_triplets, small.error)


def test_abx_matches_bruteforce_without_normalisation():
    feats, items = synthetic(11, dur=0.3)
    res = abx_error(feats, items, normalize=False)
    err, n = ref.ref_abx(feats, as_dicts(items), normalize=False)
    assert res.n_triplets == n and abs(res.error - err) < 1e-6


def test_batch_plan_covers_every_pair_within_bounds():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(1, 3000))
        a, b = rng.integers(1, 40, n), rng.integers(1, 40, n)
        nr, nc = np.maximum(a, b), np.minimum(a, b)
        o = np.lexsort((nc, nr))[::-1]
        nr, nc = nr[o], nc[o]
        cap = int(rng.integers(100, 200000))
        plan = batches.plan_batches(nr, nc, cap)
        assert plan[0][0] == 0 and plan[-1][1] == n
        for (s, e, bn, bm), nxt in zip(plan, plan[1:] + [(n,)]):
            assert e == nxt[0] and e > s
            assert nr[s:e].max() <= bn and nc[s:e].max() <= bm
            assert e - s == 1 or (e - s) * bn * (bn + bm) <= cap


def test_batching_does_not_change_the_score():
    feats, items = synthetic(2024, dim=6, n_spk=4, n_utt=2, dur=0.5)
    one = abx_error(feats, items)
    many = abx_error(feats, items, max_batch_elements=4000)  # dozens of small batches
    assert one.error == many.error and one.n_triplets == many.n_triplets


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("distance", DISTANCES)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_abx_on_cuda_matches_cpu(distance, convention, monkeypatch):
    """Every distance, both conventions, both CUDA DTWs (Triton where it imports, torch): CUDA scored hamming
    53.78 % where the CPU scored 53.39 % (same triplets). ``auto`` scores a task this small on the CPU (CUDA's start
    costs more), so the size limits are lowered here to keep ``auto`` on the GPU."""
    monkeypatch.setattr(dispatch, "NUMBA_MIN_PAIRS", 0)
    monkeypatch.setattr(dispatch, "NUMBA_MIN_TRIPLETS", 0)
    monkeypatch.setattr(dispatch, "CUDA_MIN_CPU_SECONDS", 0.0)
    feats, items = synthetic(2024, dim=6, n_spk=4, n_utt=2, dur=0.5)
    if distance == "hamming":
        feats = {u: (m > 0).astype(float) for u, m in feats.items()}
    elif distance == "kl":
        feats = {u: np.exp(m) for u, m in feats.items()}
    for mode in MODES:
        cpu = abx_error(feats, items, mode=mode, distance=distance, convention=convention)
        for backend in ("auto", "torch") + (("triton",) if importlib.util.find_spec("triton") else ()):
            gpu = abx_error(feats, items, mode=mode, distance=distance, convention=convention, device="cuda",
                            backend=backend)
            assert gpu.n_triplets == cpu.n_triplets and abs(gpu.error - cpu.error) < 1e-6, (
                mode, backend, gpu.error, cpu.error)


def test_small_task_on_cuda_is_scored_on_the_cpu(monkeypatch):
    """``backend="auto"`` scores a small task (fewer than NUMBA_MIN_PAIRS DTW pairs and NUMBA_MIN_TRIPLETS
    triplets) on the CPU whatever the device: the CPU's bits, and no CUDA DTW called. Its contexts are too small
    for their needed pairs to be found on the device: it runs on a machine without CUDA as well."""
    feats, items = synthetic(2024, dim=6, n_spk=4, n_utt=2, dur=0.5)
    cpu = abx_error(feats, items)

    def no_device_dtw(backend, dev):
        assert dev.type == "cpu", dev
        return batched_dtw

    monkeypatch.setattr(dispatch, "device_dtw", no_device_dtw)
    gpu = abx_error(feats, items, device="cuda")
    assert (gpu.error, gpu.n_triplets) == (cpu.error, cpu.n_triplets)
    # past the size limits, a task whose CPU work is estimated under CUDA_MIN_CPU_SECONDS goes to the CPU too
    monkeypatch.setattr(dispatch, "NUMBA_MIN_PAIRS", 0)
    monkeypatch.setattr(dispatch, "NUMBA_MIN_TRIPLETS", 0)
    estimates = []
    cpu_seconds = dispatch.cpu_seconds
    monkeypatch.setattr(dispatch, "cpu_seconds", lambda *a: estimates.append(cpu_seconds(*a)) or estimates[-1])
    gpu = abx_error(feats, items, device="cuda")
    assert (gpu.error, gpu.n_triplets) == (cpu.error, cpu.n_triplets)
    assert 0 < estimates[0] < 0.01


def test_cpu_seconds_by_hand():
    # 1000 pairs of 10-frame tokens on average: 100 000 frame pairs x 10 ns = 1 ms; 1 M triplets x 11 ns = 11 ms;
    # a tenth on one thread, the rest on two: 12 ms x (0.1 + 0.45) = 6.6 ms; on one thread all of it
    assert dispatch.cpu_seconds(1000, np.array([5, 15, 10]), 1_000_000, 2) == pytest.approx(6.6e-3)
    assert dispatch.cpu_seconds(1000, np.array([5, 15, 10]), 1_000_000, 1) == pytest.approx(12e-3)


@pytest.mark.parametrize("mode", ["across", "within"])
def test_pairs_bound_holds_and_is_exact_by_hand(mode):
    """cells.pairs_bound (the early CUDA-or-CPU decision's pairs) is never below the pairs pairs.needed_pairs finds,
    and by hand: speakers of 3 and 2 tokens, within 3 + 1 pairs, across 3 x 2."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        phones = [str(p) for p in rng.integers(0, 4, size=40)]
        speakers = [str(s) for s in rng.integers(0, 3, size=40)]
        groups: dict = {}
        for k, (p, s) in enumerate(zip(phones, speakers)):
            groups.setdefault(p, {}).setdefault(s, []).append(k)
        u, v = pairs.needed_pairs(phones, speakers, mode, torch.device("cpu"))
        assert cells.pairs_bound(cells.speaker_counts(groups), mode) >= len(u) > 0
    hand = {"a": {"s1": [0, 1], "s2": [2]}, "b": {"s1": [3], "s2": [4]}}
    assert cells.pairs_bound(cells.speaker_counts(hand), mode) == (4 if mode == "within" else 6)


def test_task_routed_to_the_cpu_never_touches_cuda(monkeypatch):
    """A task that ``auto`` scores on the CPU is sent there before any CUDA tensor is made (CUDA's start costs
    ~0.3 s), here a context of DEVICE_PAIRS_MIN_TOKENS tokens or more, whose needed pairs would otherwise be
    found on the device: without a GPU (as in CI) the old order failed creating that mask on CUDA. The same
    score as on the CPU."""
    monkeypatch.setattr(dispatch, "DEVICE_PAIRS_MIN_TOKENS", 16)
    feats, items = synthetic(11, n_spk=3, n_utt=2, dur=0.3)
    items = [Item(i.file, i.onset, i.offset, i.phone, (), i.speaker, i.line) for i in items]
    assert len(items) >= 2 * 16
    made_on = []
    real_zeros = torch.zeros

    def zeros(*a, **k):
        made_on.append(torch.device(k.get("device") or "cpu").type)
        return real_zeros(*a, **k)

    monkeypatch.setattr(torch, "zeros", zeros)
    for mode in MODES:
        cpu = abx_error(feats, items, mode=mode)
        gpu = abx_error(feats, items, mode=mode, device="cuda")
        assert (gpu.error, gpu.n_triplets) == (cpu.error, cpu.n_triplets)
    assert made_on and set(made_on) == {"cpu"}


def test_speaker_blocks_by_hand():
    """Tokens of speakers b, a, b, c, b: b's three first (3 x 3 at 0), a's one (1 x 1 at 9), c's one (at 10)."""
    local, offset, width, by_speaker, size = pairs.speaker_blocks(["b", "a", "b", "c", "b"])
    assert local.tolist() == [0, 0, 1, 0, 2]
    assert offset.tolist() == [0, 9, 0, 10, 0] and width.tolist() == [3, 1, 3, 1, 3]
    assert by_speaker == {"b": (0, 3), "a": (9, 1), "c": (10, 1)} and size == 11


@pytest.mark.parametrize("backend", ["torch"] + (["numba"] if importlib.util.find_spec("numba") else []))
def test_within_speakers_stores_one_matrix_per_speaker(backend, monkeypatch):
    """Within speakers the token distances of a context are kept as one n x n matrix per speaker (sum of n^2
    entries) instead of one w x w matrix of the context (the 9.8 M-triplet bench task: 1.5 M entries instead of
    30.2 M, 12 instead of 241 MB); the brute force's score, on one context of every token (no context)."""
    feats, items = synthetic(21, n_spk=3, n_utt=2, dur=0.4)
    items = _no_context(items)
    sizes = []
    real_full = torch.full

    def full(size, value, **k):
        if k.get("dtype") == torch.float64 and isinstance(value, float) and math.isnan(value):
            sizes.append(size[0])  # dflat
        return real_full(size, value, **k)

    monkeypatch.setattr(torch, "full", full)
    res = abx_error(feats, items, mode="within", backend=backend, num_threads=2)
    per_speaker = collections.Counter(i.speaker for i in items)  # every token selects a frame here
    assert sizes == [sum(n * n for n in per_speaker.values())] and sizes[0] < len(items) ** 2 / 2
    err, n = ref.ref_abx(feats, as_dicts(items), mode="within")
    assert res.n_triplets == n and abs(res.error - err) < 1e-9


def _triton_device():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("needs triton (shipped with CUDA builds of torch)")
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs a CUDA device, or Triton's interpreter (TRITON_INTERPRET=1) on the CPU")
    return "cpu"


def test_triton_dtw_kernel_matches_torch():
    """The Triton kernel (the CUDA DTW) against batched_dtw, bit for bit, ties included. Runs on a GPU, or on the
    CPU under TRITON_INTERPRET=1 (slow: a few pairs)."""
    dev = _triton_device()
    from speechkit.scoring.abx.kernels_triton import dtw_batch

    rng = np.random.default_rng(6)
    mats = [rng.integers(0, 3, size=(int(rng.integers(1, 7)), int(rng.integers(1, 7)))).astype(float) if k % 2
            else rng.random((int(rng.integers(1, 7)), int(rng.integers(1, 7)))) for k in range(24)]
    mats.append(np.array([[1.0, 2, 0, 2], [1, 2, 1, 0], [0, 1, 2, 0], [1, 1, 0, 1]]))  # tie-breaks: lengths 5, 6
    nmax, mmax = max(d.shape[0] for d in mats), max(d.shape[1] for d in mats)
    batch = torch.full((len(mats), nmax, mmax), 7.0, dtype=torch.float64)
    for b, d in enumerate(mats):
        batch[b, : d.shape[0], : d.shape[1]] = torch.from_numpy(d)
    n_rows = torch.tensor([d.shape[0] for d in mats])
    n_cols = torch.tensor([d.shape[1] for d in mats])
    got = dtw_batch(batch.to(dev), n_rows.to(dev), n_cols.to(dev))
    want = batched_dtw(batch, n_rows, n_cols)
    for g, w in zip(got, want):
        assert g.cpu().tolist() == w.tolist()
    assert (got[1][-1].item(), got[2][-1].item()) == (5, 6)


def test_triton_backend_gives_the_same_bits():
    dev = _triton_device()
    feats, items = synthetic(7, kind="onehot", dur=0.3)  # a hundred pairs or so: the interpreter is slow
    for mode in MODES:
        a = abx_error(feats, items, mode=mode, distance="hamming", backend="torch")
        b = abx_error(feats, items, mode=mode, distance="hamming", backend="triton", device=dev)
        assert (a.error, a.n_triplets, a.n_dtw_pairs) == (b.error, b.n_triplets, b.n_dtw_pairs) and a.n_triplets > 10


@pytest.mark.parametrize("block", [16, 64])
def test_triton_kernel_compiles_for_a_cuda_target(block):
    """The compiled form of the Triton DTW (its for loop over each pair's own diagonals; the interpreter runs the
    while loop instead) compiles to a cubin for an H100/H200 (sm_90), with no GPU: Triton bundles ptxas. Runs
    wherever triton is installed (a CUDA build of torch, e.g. tools/venv-peers)."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("needs triton (shipped with CUDA builds of torch)")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from speechkit.scoring.abx.kernels_triton import _dtw_kernel

    signature = dict.fromkeys(["dist_ptr", "cost_ptr", "total_ptr"], "*fp64")
    signature.update(dict.fromkeys(["n_rows_ptr", "n_cols_ptr", "lrc_ptr", "lcr_ptr"], "*i64"), lens_ptr="*i32",
                     NMAX="i64", MMAX="i64", BLOCK="constexpr", INTERPRETED="constexpr")
    src = ASTSource(fn=_dtw_kernel, signature=signature, constexprs={"BLOCK": block, "INTERPRETED": False})
    try:
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": max(1, block // 32)})
    except RuntimeError as e:  # e.g. a triton without its bundled ptxas
        if "ptxas" in str(e):
            pytest.skip(f"triton cannot assemble here: {e}")
        raise
    assert kernel.asm["cubin"] and kernel.asm["ptx"].count("bar.sync") >= 2


def test_hamming_symbol_table_does_not_depend_on_torch_unique(monkeypatch):
    """The symbol table was built with torch.unique(dim=0, return_inverse=True) on the scoring device; an
    inverse in the unique array's sorted order (pytorch/pytorch#64593, CUDA) silently changed every hamming
    distance. Emulated here on the CPU: the distances must not change."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=(9, 5)).astype(float)
    y = rng.integers(0, 2, size=(7, 5)).astype(float)
    want = ref.ref_frame_distance(x, y, "hamming")
    real_unique = torch.unique

    def sorted_order_inverse(t, *args, **kwargs):
        out = real_unique(t, *args, **kwargs)
        if kwargs.get("return_inverse") and kwargs.get("dim") == 0:
            uniq, inv = out[0], out[1]
            return (uniq, inv[torch.argsort(inv, stable=True)], *out[2:])
        return out

    monkeypatch.setattr(torch, "unique", sorted_order_inverse)
    np.testing.assert_allclose(frame_distance(x, y, "hamming"), want, atol=1e-15)


needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs numba")


@pytest.fixture(params=["numba", "c"])
def kernels(request):
    """Each set of compiled CPU kernels: numba's (kernels_numba) and C's (kernels_c's loaded library, built by
    tools/install.sh)."""
    if request.param == "numba":
        if importlib.util.find_spec("numba") is None:
            pytest.skip("needs numba")
        from speechkit.scoring.abx import kernels_numba as K
    else:
        K = kernels_c.load()
        if K is None:
            pytest.skip(f"needs the C kernels: {kernels_c.why_not()}")
    return K


def test_small_task_takes_c_kernels_on_one_thread_else_torch_until_numba_is_loaded(monkeypatch):
    """Under ``auto`` a small task (fewer than NUMBA_MIN_PAIRS DTW pairs) runs on one thread: with C's kernels
    where they are built (they load in a millisecond), else on the torch path until numba's have been loaded once
    (their start costs more than the task). The same score either way."""
    feats, items = synthetic(17, n_spk=3, n_utt=2)
    seen = []
    real = tiles.pair_distances

    def spy(*a, **k):
        seen.append((a[9], a[10], a[13]))  # use_numba, n_threads, kernels
        return real(*a, **k)

    monkeypatch.setattr(tiles, "pair_distances", spy)
    ref = abx_error(feats, items, backend="torch").error
    seen.clear()
    if kernels_c.available():
        assert abx_error(feats, items, num_threads=2).error == ref
        assert seen == [(True, 1, kernels_c.load())]
        seen.clear()
    monkeypatch.setattr(kernels_c, "available", lambda: False)
    monkeypatch.setattr(dispatch, "numba_kernels_loaded", lambda: False)
    assert abx_error(feats, items, num_threads=2).error == ref
    assert seen == [(False, 1, None)]


def test_dtw_kernel_matches_torch_and_bruteforce(kernels):
    dtw_block = kernels.dtw_block
    rng = np.random.default_rng(5)
    mats = [rng.integers(0, 3, size=(int(rng.integers(1, 11)), int(rng.integers(1, 11)))).astype(float) if k % 2
            else rng.random((int(rng.integers(1, 11)), int(rng.integers(1, 11)))) for k in range(200)]
    nmax, mmax = max(d.shape[0] for d in mats), max(d.shape[1] for d in mats)
    batch = np.full((len(mats), nmax, mmax), 7.0)
    for b, d in enumerate(mats):
        batch[b, : d.shape[0], : d.shape[1]] = d
    n_rows = np.array([d.shape[0] for d in mats], dtype=np.int64)
    n_cols = np.array([d.shape[1] for d in mats], dtype=np.int64)
    tot, lrc, lcr = np.empty(len(mats)), np.empty(len(mats), dtype=np.int64), np.empty(len(mats), dtype=np.int64)
    dtw_block(batch, n_rows, n_cols, tot, lrc, lcr)
    t_tot, t_lrc, t_lcr = batched_dtw(torch.from_numpy(batch), torch.from_numpy(n_rows), torch.from_numpy(n_cols))
    assert tot.tolist() == t_tot.tolist() and lrc.tolist() == t_lrc.tolist() and lcr.tolist() == t_lcr.tolist()
    for b, d in enumerate(mats):
        assert tot[b] / lrc[b] == pytest.approx(ref.ref_dtw(d), abs=1e-12)
        assert tot[b] / lcr[b] == pytest.approx(ref.ref_dtw(d.T), abs=1e-12)
    assert (lrc != lcr).any()


def test_strided_kernel_reads_a_tile_in_place_and_transposed(kernels):
    """dtw_strided on pairs inside one tile (rows in the tile's rows, or in its columns: read transposed) gives the
    bits of dtw_block on the same submatrices copied into a padded batch."""
    dtw_block, dtw_strided = kernels.dtw_block, kernels.dtw_strided

    rng = np.random.default_rng(11)
    tile = rng.random((23, 17))
    tile[:, 5] = tile[:, 6]  # equal costs: the tie-breaks matter
    pairs = []  # (row0, n, col0, m, transposed)
    for _ in range(60):
        t = bool(rng.integers(0, 2))
        n, m = int(rng.integers(1, 8)), int(rng.integers(1, 8))
        r0, c0 = int(rng.integers(0, (17 if t else 23) - n + 1)), int(rng.integers(0, (23 if t else 17) - m + 1))
        pairs.append((r0, n, c0, m, t))
    w = tile.shape[1]
    base = np.array([c0 * w + r0 if t else r0 * w + c0 for r0, n, c0, m, t in pairs], dtype=np.int64)
    rs = np.array([1 if p[4] else w for p in pairs], dtype=np.int64)
    cs = np.array([w if p[4] else 1 for p in pairs], dtype=np.int64)
    n_rows = np.array([p[1] for p in pairs], dtype=np.int64)
    n_cols = np.array([p[3] for p in pairs], dtype=np.int64)
    out = [np.empty(len(pairs)), np.empty(len(pairs), np.int64), np.empty(len(pairs), np.int64)]
    dtw_strided(tile.reshape(-1), base, rs, cs, n_rows, n_cols, *out)
    batch = np.full((len(pairs), 7, 7), 9.0)
    for b, (r0, n, c0, m, t) in enumerate(pairs):
        batch[b, :n, :m] = tile.T[r0:r0 + n, c0:c0 + m] if t else tile[r0:r0 + n, c0:c0 + m]
    ref_out = [np.empty(len(pairs)), np.empty(len(pairs), np.int64), np.empty(len(pairs), np.int64)]
    dtw_block(batch, n_rows, n_cols, *ref_out)
    for a, b in zip(out, ref_out):
        assert a.tolist() == b.tolist()


def test_make_tiles_by_hand():
    # groups 0 (frames 3 + 4), 1 (5 + 5 + 5 + 2: larger than a tile of 8), 2 (2), 3 (3)
    groups = np.array([0, 0, 1, 1, 1, 1, 2, 3])
    lengths = np.array([3, 4, 5, 5, 5, 2, 2, 3])
    tile_of, tile_start = tiles.make_tiles(groups, lengths, groups, tile_frames=8)
    # group 0 fits (7 frames); group 1 is split where its tokens start: at 0, 5 -> chunk 0; 10 -> 1; 15 -> 1;
    # groups 2 and 3 share the next tile (2 + 3 <= 8)
    assert tile_of.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert tile_start.tolist() == [0, 7, 17, 24, 29]
    # no group holds a quarter of a tile: no tile pair can be dense, no tiles
    assert tiles.make_tiles(groups, lengths, groups, tile_frames=200) is None
    # a token longer than two tiles: its chunk numbers 0-2, the next token's chunk 3 -> tiles 0 and 1
    tile_of, tile_start = tiles.make_tiles(np.zeros(3, dtype=np.int64), np.array([20, 3, 3]),
                                                 np.zeros(3, dtype=np.int64), tile_frames=8)
    assert tile_of.tolist() == [0, 1, 1] and tile_start.tolist() == [0, 20, 26]


@pytest.mark.parametrize("n_tiles,n_pairs,chunk,threads", [(40, 3000, None, 1), (40, 3000, 7, 1), (40, 3000, 7, 3),
                                                           (600, 250_000, None, 1), (600, 250_000, 30_000, 1),
                                                           (600, 250_000, 30_000, 3), (5000, 60_000, None, 1),
                                                           (5000, 60_000, 999, 1), (5000, 60_000, 999, 3)])
def test_tile_tasks_group_every_dense_pair_once(n_tiles, n_pairs, chunk, threads, monkeypatch):
    """tiles.tile_tasks against a per-pair reckoning: a pair is dense iff its tile pair's frame pairs fill a quarter of
    it; each task holds exactly the dense pairs of its tile pair, in increasing order; the others are the sparse
    ones, in increasing order. Sizes cover the look-up table, more than 2^16 dense tile pairs (a stable sort of
    int64 ranks) and more than 1024 tiles (keys sorted per chunk); chunks of a few pairs, cut anywhere, taken by
    one thread or three (in any order: the same result)."""
    if chunk is not None:
        monkeypatch.setattr(dispatch, "TILE_CHUNK", chunk)
    rng = np.random.default_rng(n_tiles)
    many = n_tiles == 600  # one one-frame token per tile: every tile pair with a pair is dense
    per_tile = np.ones(n_tiles, dtype=np.int64) if many else rng.integers(1, 4, n_tiles)  # tokens per tile
    tile_of = np.repeat(np.arange(n_tiles), per_tile)
    lengths = np.ones(len(tile_of), dtype=np.int64) if many else rng.integers(1, 4, len(tile_of))
    tile_start = np.concatenate([[0], np.cumsum(np.bincount(tile_of, weights=lengths).astype(np.int64))])
    rows, cols = rng.integers(0, len(tile_of), (2, n_pairs))
    tasks, dense, sparse = tiles.tile_tasks(rows, cols, lengths, tile_of, tile_start, n_threads=threads)
    lo, hi = np.minimum(tile_of[rows], tile_of[cols]), np.maximum(tile_of[rows], tile_of[cols])
    filled = {}
    for a, b, c in zip(lo.tolist(), hi.tolist(), (lengths[rows] * lengths[cols]).tolist()):
        filled[a, b] = filled.get((a, b), 0) + c
    size = np.diff(tile_start)
    expect = {k: [] for k, v in filled.items() if v >= dispatch.TILE_MIN_DENSITY * size[k[0]] * size[k[1]]}
    for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        if (a, b) in expect:
            expect[a, b].append(k)
    assert len(tasks) == len(expect)
    got = {(t[1], t[2]): dense[t[3]:t[4]].tolist() for t in tasks}
    assert got == expect
    assert sorted(dense.tolist()) == sorted(k for v in expect.values() for k in v)
    is_dense = np.zeros(n_pairs, dtype=bool)
    is_dense[dense] = True
    assert sparse.tolist() == np.nonzero(~is_dense)[0].tolist()
    sizes = [int(np.diff(tile_start)[t[1]] * np.diff(tile_start)[t[2]]) for t in tasks]
    assert sizes == sorted(sizes, reverse=True)
    if many:
        assert len(tasks) > 1 << 16


@pytest.mark.parametrize("threads", [1, 2])
def test_tile_tasks_with_a_chunk_of_sparse_pairs_only(threads, monkeypatch):
    """A chunk of tiles.tile_tasks' second pass may hold no dense pair (it raised IndexError): by hand, tiles 0 and 1
    of 10 frames; pair 0 (two 1-frame tokens of tile 1) fills 1 of its 100 frame pairs, pairs 1 and 2 (two 5-frame
    tokens of tile 0, twice) 50 of 100; one pair per chunk."""
    monkeypatch.setattr(dispatch, "TILE_CHUNK", 1)
    lengths, tile_of, tile_start = np.array([5, 5, 1, 1, 8]), np.array([0, 0, 1, 1, 1]), np.array([0, 10, 20])
    tasks, dense, sparse = tiles.tile_tasks(np.array([2, 0, 0]), np.array([3, 1, 1]), lengths, tile_of,
                                                  tile_start, n_threads=threads)
    assert tasks == [("tile", 0, 0, 0, 2)] and dense.tolist() == [1, 2] and sparse.tolist() == [0]


def test_count_helpers_by_hand():
    assert counting._ceil_log2(np.array([1, 2, 3, 4, 5, 8, 9, 1024, 1025])).tolist() == [0, 1, 2, 2, 3, 3, 4, 10, 11]
    assert counting._ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    mat, ok = counting._padded_rows(np.array([7, 8, 9, 4, 5]), np.array([0, 3, 3, 5]), np.array([2, 0, 1]))
    assert mat.tolist() == [[4, 5, 0], [7, 8, 9], [0, 0, 0]]
    assert ok.tolist() == [[True, True, False], [True, True, True], [False, False, False]]


@pytest.mark.parametrize("within", [False, True])
@pytest.mark.parametrize("step", [1, 7, 1 << 22])
def test_count_cells_torch_matches_a_loop_over_triplets(within, step, monkeypatch):
    """The torch counting (CUDA's, and the torch backend's) against a loop over every (A, B, X): groups of 1-9 A
    and B tokens (buckets of several sizes, padded), 1-3 cells of X tokens each, integer distances (many ties),
    NaN entries of the table that no triplet reads; comparisons a few at a time (``step``: chunks of one X
    token, of a few) or all at once. Within speakers the triplets whose X is A are left out."""
    monkeypatch.setattr(dispatch, "COUNT_ELEMENTS", step)
    rng = np.random.default_rng(3)
    g_off, g_w, tables = [], [], []
    a_l, b_l, x_l, x_cells = [], [], [], []
    n_cells = 0
    for g in range(23):
        w = int(rng.integers(4, 12))
        m = rng.integers(0, 4, size=(w, w)).astype(float)
        m[rng.random((w, w)) < 0.1] = np.nan  # never read: no triplet uses them below
        g_off.append(sum(t.size for t in tables))
        g_w.append(w)
        a = rng.choice(w, size=int(rng.integers(1, min(w, 9) + 1)), replace=False)
        b = rng.choice(w, size=int(rng.integers(1, min(w, 9) + 1)), replace=False)
        x = rng.choice(w, size=int(rng.integers(1, min(w, 6) + 1)), replace=False)
        if within:
            x = np.unique(np.concatenate([x, a[:1]]))  # some X is an A token
        for t in x:  # the entries read are real distances
            m[a, t] = np.where(np.isnan(m[a, t]), 1.0, m[a, t])
            m[b, t] = np.where(np.isnan(m[b, t]), 2.0, m[b, t])
        cuts = np.sort(rng.choice(np.arange(1, len(x)), size=min(len(x) - 1, int(rng.integers(0, 3))), replace=False))
        cell_of = n_cells + np.searchsorted(cuts, np.arange(len(x)), side="right")
        n_cells += len(cuts) + 1
        tables.append(m.reshape(-1))
        a_l.append(a), b_l.append(b), x_l.append(x), x_cells.append(cell_of)
    dflat = np.concatenate(tables)
    wins, ties = np.zeros(n_cells, dtype=np.int64), np.zeros(n_cells, dtype=np.int64)
    for g in range(len(g_w)):
        m = dflat[g_off[g]: g_off[g] + g_w[g] ** 2].reshape(g_w[g], g_w[g])
        for x, c in zip(x_l[g], x_cells[g]):
            for a in a_l[g]:
                if within and a == x:
                    continue
                for b in b_l[g]:
                    wins[c] += m[a, x] < m[b, x]
                    ties[c] += m[a, x] == m[b, x]
    ptr = [np.concatenate([[0], np.cumsum([len(v) for v in lists])]).astype(np.int64) for lists in (a_l, b_l, x_l)]
    got = counting.count_cells_torch(torch.from_numpy(dflat), np.array(g_off), np.array(g_w), ptr[0],
                                        np.concatenate(a_l), ptr[1], np.concatenate(b_l), ptr[2],
                                        np.concatenate(x_l), np.concatenate(x_cells), within, n_cells)
    assert got[0].tolist() == wins.tolist() and got[1].tolist() == ties.tolist()
    assert ties.sum() > 0 and wins.sum() > 0


@needs_numba
@pytest.mark.parametrize("distance,kind,tile_frames", [("cosine", "cont", 24), ("kl", "pos", 24),
                                                       ("hamming", "onehot", 24), ("cosine", "cont", 3)])
def test_tiles_give_the_batched_scores(distance, kind, tile_frames, monkeypatch):
    """Pairs whose frame distances come from tiles (one matrix product per tile pair) score as the batched pairs
    do (backend torch, no tiles): the same triplet outcomes, distances within float rounding. Tiles of 3 frames:
    tokens (1-7 frames) longer than a tile, or than two."""
    feats, items = synthetic(13, kind=kind, n_spk=3, n_utt=2, dur=0.6)
    used = []
    tile_tasks = tiles.tile_tasks
    monkeypatch.setattr(dispatch, "TILE_FRAMES", tile_frames)
    monkeypatch.setattr(dispatch, "TILE_MIN_DENSITY", 0.5)  # some tile pairs below it: their pairs are batched
    monkeypatch.setattr(tiles, "tile_tasks", lambda *a, **k: used.append(tile_tasks(*a, **k)) or used[-1])
    mixed = []
    for mode in MODES:
        for convention in CONVENTIONS:
            kw = dict(mode=mode, distance=distance, convention=convention)
            a = abx_error(feats, items, backend="torch", **kw)
            b = abx_error(feats, items, backend="numba", num_threads=2, max_batch_elements=3000, **kw)
            assert (a.n_triplets, a.n_cells) == (b.n_triplets, b.n_cells)
            assert b.error == pytest.approx(a.error, abs=1e-9)
            assert [p.error for p in b.by_phone_pair] == pytest.approx([p.error for p in a.by_phone_pair], abs=1e-9)
            n_tile = len(used[-1][1]) if used[-1][1] is not None else 0
            assert n_tile > 0
            mixed.append(n_tile < b.n_dtw_pairs)
    assert any(mixed)  # within speakers, tiled and batched pairs took part in one run


@needs_numba
def test_hamming_past_its_symbol_table_takes_no_tiles(monkeypatch):
    """Hamming with more distinct frames than its symbol table holds has no tile form: every pair is batched."""
    feats, items = synthetic(13, kind="onehot", n_spk=3, n_utt=2, dur=0.6)
    monkeypatch.setattr(dispatch, "TILE_FRAMES", 24)
    ref = abx_error(feats, items, distance="hamming", backend="numba", num_threads=2)
    monkeypatch.setattr(dispatch, "HAMMING_TABLE_MAX", 2)  # 4 distinct one-hot frames
    monkeypatch.setattr(tiles, "tile_tasks", lambda *a, **k: pytest.fail("tiles without a symbol table"))
    res = abx_error(feats, items, distance="hamming", backend="numba", num_threads=2)
    assert res.error == pytest.approx(ref.error, abs=1e-9) and res.n_triplets == ref.n_triplets


@needs_numba
def test_ties_survive_tiles(monkeypatch):
    """A and B tokens with identical frames, at other places of other tiles: their distances to X are equal to the
    bit, so each such triplet stays a tie (one half), as on the batched path."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 5))
    copies = np.concatenate([x[5 * (7 - j): 5 * (7 - j) + 5] for j in range(8)])  # B token j = A token 7 - j
    feats = {"s1_u": np.concatenate([x, copies]), "s2_u": rng.normal(size=(40, 5))}
    items = []
    for k in range(8):
        items.append(Item("s1_u", k * 0.05, k * 0.05 + 0.04, "a", ("c",), "s1"))
        items.append(Item("s1_u", 0.4 + k * 0.05, 0.4 + k * 0.05 + 0.04, "b", ("c",), "s1"))
        items.append(Item("s2_u", k * 0.05, k * 0.05 + 0.04, "a", ("c",), "s2"))
    used = []
    tile_tasks = tiles.tile_tasks
    monkeypatch.setattr(dispatch, "TILE_FRAMES", 12)
    monkeypatch.setattr(tiles, "tile_tasks", lambda *a, **k: used.append(tile_tasks(*a, **k)) or used[-1])
    for convention in CONVENTIONS:
        tiled = abx_error(feats, items, mode="across", backend="numba", num_threads=2, convention=convention)
        assert used[-1][1] is not None and len(used[-1][1]) == tiled.n_dtw_pairs
        batched = abx_error(feats, items, mode="across", backend="torch", convention=convention)
        assert tiled.error == batched.error
    # (a, b) with A, B from s1 and X from s2: 8 x 8 x 8 triplets, 64 of them ties (B = a copy of A)
    assert [p.n_triplets for p in tiled.by_phone_pair] == [512]


@needs_numba
def test_kernel_warm_up_compiles_what_abx_error_calls():
    """kernels_numba.warm_up (run in the background by abx_error) loads the kernels for the argument types of the
    real calls: scoring after it adds no specialization (a mismatch would compile a second one at first use)."""
    from speechkit.scoring.abx import kernels_numba as K

    K.warm_up()
    before = (list(K.dtw_strided.signatures), list(K.count_cells.signatures))
    feats, items = synthetic(7, n_utt=2, dur=0.3)
    for mode in MODES:
        abx_error(feats, items, mode=mode, backend="numba", num_threads=2)
    assert (list(K.dtw_strided.signatures), list(K.count_cells.signatures)) == before
    assert len(before[0]) == len(before[1]) == 1


@needs_numba
@pytest.mark.parametrize("distance,kind", [("cosine", "cont"), ("kl", "pos"), ("hamming", "onehot")])
def test_numba_and_torch_backends_give_the_same_bits(distance, kind):
    feats, items = synthetic(7, kind=kind, n_utt=2, dur=0.4)
    for mode in MODES:
        for convention in CONVENTIONS:
            kw = dict(mode=mode, distance=distance, convention=convention)
            a = abx_error(feats, items, backend="torch", **kw)
            b = abx_error(feats, items, backend="numba", num_threads=2, max_batch_elements=3000, **kw)
            assert (a.error, a.n_triplets, a.n_cells) == (b.error, b.n_triplets, b.n_cells)
            assert [p.error for p in a.by_phone_pair] == [p.error for p in b.by_phone_pair]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("distance,kind", [("cosine", "cont"), ("hamming", "onehot")])
def test_zr2021_matches_its_per_triplet_bruteforce(mode, distance, kind):
    """zr2021: d(X, A) with X's frames as the DTW rows, cells averaged over contexts and X speakers together."""
    feats, items = synthetic(7, kind=kind, n_utt=2, dur=0.3)
    res = abx_error(feats, items, mode=mode, distance=distance, convention="zr2021")
    err, n = ref.ref_abx(feats, as_dicts(items), mode=mode, distance=distance, convention="zr2021")
    assert res.n_triplets == n and abs(res.error - err) < 1e-9 and res.convention == "zr2021"


def _no_context(items):
    return [Item(i.file, i.onset, i.offset, i.phone, (), i.speaker, i.line) for i in items]


# fastabx 0.9.0 zerospeech_abx(item, feats, max_size_group=None, max_x_across=None, speaker=mode, context=ctx,
# frequency="100"), ABX error rates (fractions), on the files of synthetic(5, n_spk=5, dur=0.6) (angular distance)
# and synthetic(7, kind="onehot", n_utt=2, dur=0.3) ("identical" distance on the argmax codes: 2/dim times our
# hamming on the one-hot rows, dim 4, so the same decisions). "as shipped": float32 features (fastabx fails on
# float64 ones); "float64": its GroupReducer scores and Score's cell scores made float64 instead of float32.
FASTABX_PINNED = {
    # (set, mode, context): (as shipped, float64 or None)
    ("cont", "across", "within"): (0.5033461352189382, 0.5033461474867724),
    ("cont", "across", "any"): (0.5089245786269506, 0.5089245811287478),
    ("cont", "within", "within"): (0.4840509096781413, 0.48405092592592586),
    ("cont", "within", "any"): (0.4931097825368245, 0.4931097883597884),
    ("onehot", "across", "within"): (0.5253257900476456, None),
    ("onehot", "across", "any"): (0.4814484069744746, None),
    ("onehot", "within", "within"): (0.5413965930541357, None),
    ("onehot", "within", "any"): (0.504325399796168, None),
}


@pytest.mark.parametrize("key", sorted(FASTABX_PINNED))
def test_zr2021_reproduces_fastabx(key):
    kind, mode, context = key
    shipped, float64 = FASTABX_PINNED[key]
    feats, items = synthetic(5, n_spk=5, dur=0.6) if kind == "cont" else synthetic(7, kind="onehot", n_utt=2, dur=0.3)
    if context == "any":
        items = _no_context(items)
    res = abx_error(feats, items, mode=mode, distance="cosine" if kind == "cont" else "hamming", convention="zr2021")
    assert abs(res.error / 100 - shipped) < 1e-6  # fastabx's own float32 arithmetic: ~1e-8
    if float64 is not None:
        assert abs(res.error / 100 - float64) < 1e-12
    old = abx_error(feats, items, mode=mode, distance="cosine" if kind == "cont" else "hamming")
    if key in (("cont", "across", "within"), ("onehot", "within", "within")):  # the averaging; the argument order
        assert abs(old.error / 100 - shipped) > 1e-3


def test_exact_frame_times_under_zr2021():
    """A centre on a boundary: 0.695 s is the centre of frame 69 at 10 ms; in floats it is 0.6950000000000001."""
    items = [Item("u", 0.645, 0.695, "a", (), "s")]
    assert select_frames(items, {"u": 100}, 0.01).tolist() == [[64, 69]]  # ABXpy's float comparison (zr2019)
    assert select_frames(items, {"u": 100}, 0.01, exact_times=True).tolist() == [[64, 70]]  # fastabx (zr2021)


def test_abx_argument_errors():
    feats, items = synthetic(7, dur=0.3)
    with pytest.raises(ValueError, match="unknown convention 'zr2017'"):
        abx_error(feats, items, convention="zr2017")
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        abx_error(feats, items, num_threads=0)
    with pytest.raises(ValueError, match="unknown backend"):
        abx_error(feats, items, backend="cython")


def test_abx_error_runs_without_cyclic_garbage_collection():
    """abx_error pauses Python's cyclic collector (its many small objects are freed by reference counting; a full
    collection meanwhile walked the whole process: a third of a small task's time) and restores it after."""
    import gc

    feats, items = synthetic(4, n_spk=3, n_utt=2, dur=0.5)
    seen = []
    callback = lambda phase, info: seen.append(phase)  # noqa: E731
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # a collection at every allocation, were it enabled
    gc.callbacks.append(callback)
    try:
        before = len(seen)
        abx_error(feats, items)
        inside = len(seen) - before
        assert gc.isenabled()
        gc.disable()
        abx_error(feats, items)
        assert not gc.isenabled()  # a caller's setting is kept
        gc.enable()
        n = len(seen)
        gc.collect()
        assert len(seen) > n  # the callback sees the collections there are
    finally:
        gc.enable()
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)
    assert inside == 0


def test_abx_regression_pinned_score():
    # fastabx-style: a seeded synthetic set must keep its exact score across refactorings
    feats, items = synthetic(2024, dim=6, n_spk=4, n_utt=2, dur=0.5)
    across = abx_error(feats, items, mode="across")
    within = abx_error(feats, items, mode="within")
    assert (across.n_triplets, across.n_cells, within.n_triplets, within.n_cells) == (11158, 144, 3416, 44)
    assert across.error == pytest.approx(53.669343400940626, abs=1e-9)
    assert within.error == pytest.approx(50.100859788359784, abs=1e-9)


# exact scores of synthetic(2024, kind="onehot", dim=6, n_spk=4, n_utt=2, dur=0.5) under hamming, computed by the
# single-module abx.py before its split into a package of stages (commit 783c050): (error, n_triplets, n_cells,
# n_dtw_pairs). Hamming distances are multiples of 1/dim and every later sum and mean runs in a fixed order, so the
# bits are the same on every backend and every x86 CPU: a change of the arithmetic or of its order shows here.
HAMMING_PINNED = {
    ("across", "zr2019"): (48.624228102148024, 11939, 144, 2118),
    ("across", "zr2021"): (48.64650819474063, 11939, 144, 2118),
    ("within", "zr2019"): (50.18385652872259, 3854, 46, 693),
    ("within", "zr2021"): (50.13580345332578, 3854, 46, 693),
}


@pytest.mark.parametrize("key", sorted(HAMMING_PINNED))
def test_abx_pinned_scores_are_exact(key):
    mode, convention = key
    feats, items = synthetic(2024, kind="onehot", dim=6, n_spk=4, n_utt=2, dur=0.5)
    backends = ["torch"] + (["c"] if kernels_c.available() else []) + (["numba"] if importlib.util.find_spec("numba")
                                                                       else [])
    for backend in backends:
        res = abx_error(feats, items, mode=mode, distance="hamming", convention=convention, backend=backend)
        assert (res.error, res.n_triplets, res.n_cells, res.n_dtw_pairs) == HAMMING_PINNED[key], backend


def test_abx_by_hand_across_and_within():
    # one context; speakers s1, s2; phones a, b. a-tokens point along e1, b-tokens along e2.
    f = {"s1_u": np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]]),
         "s2_u": np.array([[1.0, 0.05], [0.1, 1.0]])}
    it = lambda f_, i, ph, spk: Item(f_, i * 0.01, i * 0.01 + 0.01, ph, ("c",), spk)  # noqa: E731
    items = [it("s1_u", 0, "a", "s1"), it("s1_u", 1, "a", "s1"), it("s1_u", 2, "b", "s1"),
             it("s2_u", 0, "a", "s2"), it("s2_u", 1, "b", "s2")]
    res = abx_error(f, items, mode="across")
    # (a,b): A,B from s1 (2 A x 1 B) with X = s2's a; and A,B from s2 with X one of s1's two a: 2+2
    # (b,a): A,B from s1 (1 x 2) with X = s2's b; A,B from s2 with X = s1's b: 2 + 1 triplets
    assert res.n_triplets == 7 and res.error == 0.0
    # within: only s1 has two a tokens: (A, X) = (a0, a1) or (a1, a0), B = b: 2 triplets, both right
    res = abx_error(f, items, mode="within")
    assert res.n_triplets == 2 and res.error == 0.0 and res.n_phone_pairs == 1


def test_ties_score_one_half():
    # B identical to A: d(A,X) == d(B,X) for every triplet -> 50 %
    f = {"s1_u": np.array([[1.0, 2.0], [1.0, 2.0]]), "s2_u": np.array([[0.3, 1.0]])}
    items = [Item("s1_u", 0.0, 0.01, "a", ("c",), "s1"), Item("s1_u", 0.01, 0.02, "b", ("c",), "s1"),
             Item("s2_u", 0.0, 0.01, "a", ("c",), "s2")]
    res = abx_error(f, items, mode="across")
    assert res.n_triplets == 1 and res.error == 50.0


def test_averaging_order_contexts_then_speakers_then_pairs():
    # Unequal cell sizes: a plain triplet mean would differ from the ZeroSpeech nested means.
    feats, items = synthetic(5, n_spk=4, dur=0.6)
    res = abx_error(feats, items)
    flat_mean = sum(p.n_triplets * (100 - p.error) for p in res.by_phone_pair) / res.n_triplets
    assert res.error == pytest.approx(float(np.mean([p.error for p in res.by_phone_pair])), abs=1e-9)
    assert abs((100 - flat_mean) - res.error) > 1e-3


def test_items_without_frames_are_dropped_and_counted_with_drop(caplog):
    feats, items = synthetic(7, dur=0.3)
    # frame centres are at 5, 15, 25 ... ms: [0.016, 0.024] selects none
    items = items + [Item("s0_u0", 0.016, 0.024, "a", ("x", "z"), "s0", 999)]
    with caplog.at_level(logging.WARNING):
        res = abx_error(feats, items, empty_items="drop")
    assert res.n_items_dropped == 1 and "select no frame" in caplog.text
    assert res.error == pytest.approx(abx_error(feats, items[:-1]).error, abs=1e-12)
    res = abx_error(feats, items)  # default: it takes frames 1 and 2, which overlap it
    assert res.n_items_dropped == 0 and res.n_items_overlap == 1 and res.n_items == len(items)


def test_overlap_rule_at_40ms_frames_by_hand():
    """40 ms frames span [0, .04), [.04, .08), ...; centres .02, .06, .10, .14 ..."""
    items = [Item("u", 0.035, 0.045, "a", (), "s"),  # no centre; straddles .04 -> frames 0, 1
             Item("u", 0.045, 0.055, "a", (), "s"),  # no centre; inside frame 1
             Item("u", 0.12, 0.13, "a", (), "s"),  # no centre; .12 / .04 = 2.9999999999999996 -> frame 3 only
             Item("u", 0.08, 0.12, "a", (), "s"),  # centre .10 inside -> frame 2 (the rule is not used)
             Item("u", 0.395, 0.41, "a", (), "s")]  # past the last frame [.36, .40), within tolerance -> frame 9
    np.testing.assert_array_equal(select_frames(items, {"u": 10}, 0.04, empty_items="overlap"),
                                  [[0, 2], [1, 2], [3, 4], [2, 3], [9, 10]])
    drop = select_frames(items, {"u": 10}, 0.04, empty_items="drop")
    assert (drop[:, 1] > drop[:, 0]).tolist() == [False, False, False, True, False]


@pytest.mark.parametrize("mode", ["across", "within"])
def test_short_items_at_40ms_frames_match_bruteforce_and_keep_every_triplet(mode):
    """At 40 ms code frames, phones of 10-40 ms hold no frame centre: they are scored, not dropped,
    so the 40 ms system is scored on the triplets of a 10 ms one."""
    rng = np.random.default_rng(3)
    feats = {f"s{s}_u0": rng.normal(size=(20, 4)) for s in range(3)}
    items = []
    for s in range(3):
        t = 0.0
        while t < 0.7:
            d = float(rng.choice([0.012, 0.025, 0.037, 0.06, 0.09]))
            items.append(Item(f"s{s}_u0", round(t, 4), round(t + d, 4), str(rng.choice(["a", "b"])),
                              (str(rng.choice(["x", "y"])),), f"s{s}", len(items) + 2))
            t += d
    res = abx_error(feats, items, mode=mode, frame_shift=0.04)
    assert res.n_items_overlap > 0 and res.n_items_dropped == 0 and res.n_items == len(items)
    err, n = ref.ref_abx(feats, as_dicts(items), mode=mode, frame_shift=0.04)
    assert res.error == pytest.approx(err, abs=1e-9) and res.n_triplets == n
    fine = {f: np.repeat(m, 4, axis=0) for f, m in feats.items()}  # the same features at 10 ms
    assert abx_error(fine, items, mode=mode, frame_shift=0.01).n_triplets == res.n_triplets


def _resampled_items(items, speakers, draw):
    """Brute-force resample: copy k of a drawn speaker s is the new speaker 's#k' (its own files)."""
    out, feats_map = [], {}
    for k, si in enumerate(draw):
        s = speakers[si]
        for it in items:
            if it.speaker == s:
                out.append(Item(f"{it.file}#{k}", it.onset, it.offset, it.phone, it.context, f"{s}#{k}", it.line))
                feats_map[f"{it.file}#{k}"] = it.file
    return out, feats_map


@pytest.mark.parametrize("mode", ["within", "across"])
def test_bootstrap_matches_a_brute_force_speaker_resample(mode):
    feats, items = synthetic(11, n_spk=4, dur=0.5)
    res = abx_error(feats, items, mode=mode)
    boot = bootstrap_interval(res, n_resamples=6, seed=7, min_usable=1)
    speakers = sorted({it.speaker for it in items})
    draws = np.random.default_rng(7).integers(0, len(speakers), size=(6, len(speakers)))  # the documented draws
    brute = []
    for draw in draws:
        r_items, src = _resampled_items(items, speakers, draw)
        r_feats = {f: feats[src[f]] for f in src}
        if mode == "within":  # the library itself on the resampled set
            brute.append(abx_error(r_feats, r_items, mode="within").error)
        else:  # per-triplet reference; copies of one speaker are never an across pair
            err, _ = ref.ref_abx(r_feats, as_dicts(r_items), mode="across",
                                 same_speaker=lambda a, b: a.split("#")[0] == b.split("#")[0])
            brute.append(err)
    np.testing.assert_allclose(np.sort(boot.errors), np.sort(brute), atol=1e-9)
    assert boot.low == pytest.approx(np.percentile(brute, 2.5)) and boot.high == pytest.approx(np.percentile(brute, 97.5))
    assert boot.n_valid == 6 and boot.unit == "speaker"


def test_zr2021_bootstrap_matches_a_brute_force_speaker_resample():
    """zr2021 across averages the cells of an A/B speaker over contexts and X speakers together: a resampled
    X speaker drawn twice weighs its cells twice in that mean."""
    feats, items = synthetic(5, n_spk=5, dur=0.6)
    res = abx_error(feats, items, convention="zr2021")
    boot = bootstrap_interval(res, n_resamples=6, seed=7, min_usable=1)
    speakers = sorted({it.speaker for it in items})
    draws = np.random.default_rng(7).integers(0, len(speakers), size=(6, len(speakers)))
    brute = []
    for draw in draws:
        r_items, src = _resampled_items(items, speakers, draw)
        err, _ = ref.ref_abx({f: feats[src[f]] for f in src}, as_dicts(r_items), mode="across", convention="zr2021",
                             same_speaker=lambda a, b: a.split("#")[0] == b.split("#")[0])
        brute.append(err)
    np.testing.assert_allclose(np.sort(boot.errors), np.sort(brute), atol=1e-9)
    other = {f: m + np.random.default_rng(3).normal(scale=0.8, size=m.shape) for f, m in feats.items()}
    paired = paired_bootstrap_difference(abx_error(other, items, convention="zr2021"), res, 6, seed=7, min_usable=1)
    a = bootstrap_interval(abx_error(other, items, convention="zr2021"), 6, seed=7, min_usable=1)
    np.testing.assert_allclose(a.errors - boot.errors, paired.differences, atol=1e-9)


def test_bootstrap_interval_brackets_the_estimate_and_is_seeded():
    feats, items = synthetic(5, n_spk=5, dur=0.6)
    res = abx_error(feats, items)
    a = bootstrap_interval(res, 200, seed=1)
    assert a.low <= res.error <= a.high and a.high - a.low > 0
    assert bootstrap_interval(res, 200, seed=1).errors.tolist() == a.errors.tolist()
    assert bootstrap_interval(res, 200, seed=2).errors.tolist() != a.errors.tolist()
    assert "95 % interval (bootstrap over speakers, 200 resamples)" in a.summary()
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_interval(res, 0)


@pytest.mark.parametrize("mode", ["within", "across"])
def test_paired_difference_matches_a_brute_force_speaker_resample(mode):
    feats, items = synthetic(11, n_spk=4, dur=0.5)
    other = {f: m + np.random.default_rng(3).normal(scale=0.8, size=m.shape) for f, m in feats.items()}
    res, res_ref = abx_error(other, items, mode=mode), abx_error(feats, items, mode=mode)
    paired = paired_bootstrap_difference(res, res_ref, n_resamples=6, seed=7, min_usable=1)
    speakers = sorted({it.speaker for it in items})
    draws = np.random.default_rng(7).integers(0, len(speakers), size=(6, len(speakers)))  # the documented draws
    brute = []
    for draw in draws:  # both systems on the same resampled speaker set
        r_items, src = _resampled_items(items, speakers, draw)
        errs = []
        for f in (other, feats):
            r_feats = {u: f[src[u]] for u in src}
            if mode == "within":
                errs.append(abx_error(r_feats, r_items, mode="within").error)
            else:
                errs.append(ref.ref_abx(r_feats, as_dicts(r_items), mode="across",
                                        same_speaker=lambda a, b: a.split("#")[0] == b.split("#")[0])[0])
        brute.append(errs[0] - errs[1])
    np.testing.assert_allclose(paired.differences, brute, atol=1e-9)  # replicate by replicate, in draw order
    assert paired.difference == pytest.approx(res.error - res_ref.error)
    assert paired.low == pytest.approx(np.percentile(brute, 2.5)) and paired.high == pytest.approx(np.percentile(brute, 97.5))
    assert paired.share_better == pytest.approx(np.mean(np.asarray(brute) < 0))
    # the unpaired replicates of each system are the same draws: their difference is the paired one
    a, b = (bootstrap_interval(r, 6, seed=7, min_usable=1) for r in (res, res_ref))
    np.testing.assert_allclose(a.errors - b.errors, paired.differences, atol=1e-9)


def test_paired_difference_identical_systems_and_mismatched_triplets():
    feats, items = synthetic(5, n_spk=5, dur=0.6)
    res = abx_error(feats, items)
    same = paired_bootstrap_difference(res, abx_error(feats, items), 200, seed=1)
    assert same.difference == 0.0 and same.low == 0.0 and same.high == 0.0 and not same.significant
    assert same.share_better == 0.0 and "95 % paired interval (bootstrap over speakers, 200 resamples)" in same.summary()
    # a system that separates the phones perfectly is better beyond noise
    labels = sorted({it.phone for it in items})
    oracle = {f: np.full((len(m), len(labels)), 0.01) for f, m in feats.items()}
    ranges = select_frames(items, {f: len(m) for f, m in oracle.items()}, 0.01, empty_items="overlap")
    for it, (start, stop) in zip(items, ranges):
        oracle[it.file][start:stop] = 0.01
        oracle[it.file][start:stop, labels.index(it.phone)] = 1.0
    better = paired_bootstrap_difference(abx_error(oracle, items), res, 200, seed=1)
    assert better.difference < 0 and better.high < 0 and better.significant and better.share_better == 1.0
    with pytest.raises(ValueError, match="same triplets"):
        paired_bootstrap_difference(res, abx_error(feats, items[: len(items) // 2]), 10)
    with pytest.raises(ValueError, match="cannot pair"):
        paired_bootstrap_difference(res, abx_error(feats, items, mode="within"), 10)
    with pytest.raises(ValueError, match="cannot pair an ABX result under zr2019 with one under zr2021"):
        paired_bootstrap_difference(res, abx_error(feats, items, convention="zr2021"), 10)


def test_frame_selection_uses_frame_centres():
    items = [Item("s1_u", 0.015, 0.035, "a", (), "s1"),  # centres 0.015, 0.025, 0.035 -> frames 1..3
             Item("s1_u", 0.0, 0.005, "a", (), "s1"),  # centre 0.005 is inside
             Item("s1_u", 0.0, 0.1, "a", (), "s1")]
    np.testing.assert_array_equal(select_frames(items, {"s1_u": 10}, 0.01), [[1, 4], [0, 1], [0, 10]])


def test_bad_input_errors_name_the_culprit():
    feats, items = synthetic(7, dur=0.3)
    with pytest.raises(DataError, match=r"items\.item:5: item names 'nope'"):
        abx_error(feats, items[:3] + [Item("nope", 0, 0.1, "a", ("x",), "s0", 5)], source="items.item")
    with pytest.raises(DataError, match=r":9: item .* ends beyond 's0_u0'"):
        abx_error(feats, items + [Item("s0_u0", 0.2, 5.0, "a", ("x", "z"), "s0", 9)])
    bad = dict(feats)
    bad["s1_u0"] = feats["s1_u0"].copy()
    bad["s1_u0"][3, 1] = np.nan
    with pytest.raises(DataError, match="s1_u0.*NaN or Inf"):
        abx_error(bad, items)
    with pytest.raises(DataError, match="negative"):
        abx_error(feats, items, distance="kl")  # gaussian features are no posteriorgrams
    with pytest.raises(ValueError, match="unknown distance"):
        abx_error(feats, items, distance="euclid")
    with pytest.raises(ValueError, match="unknown mode"):
        abx_error(feats, items, mode="both")
    with pytest.raises(ValueError, match="no ABX triplet"):
        abx_error(feats, [i for i in items if i.speaker == "s0"], mode="across")


# ------------------------------------------------------------------------------ items and features
def test_make_items_from_alignments(tmp_path):
    ali = tmp_path / "phone_alignments"
    ali.write_text("spk1_u1 0.0000 0.1000 h#\nspk1_u1 0.1000 0.1500 s\nspk1_u1 0.1500 0.2500 iy\n"
                   "spk1_u1 0.2500 0.2600 t\nspk2_u9 0.0 0.05 ao\nspk2_u9 0.05 0.05 q\n")
    rows = make_abx_items(read_phone_alignments(ali), min_duration=0.02)
    # h# excluded (still a context); t too short; q zero-length; utterance edges -> SIL
    assert rows == [("spk1_u1", "0.1000", "0.1500", "s", "h#", "iy", "spk1"),
                    ("spk1_u1", "0.1500", "0.2500", "iy", "s", "t", "spk1"),
                    ("spk2_u9", "0.0", "0.05", "ao", "SIL", "q", "spk2")]
    rows = make_abx_items(read_phone_alignments(ali), utt2spk={"spk1_u1": "A", "spk2_u9": "B"}, exclude_phones=[])
    assert [r[6] for r in rows][:2] == ["A", "A"] and rows[0][3] == "h#" and rows[0][4] == "SIL"
    out = tmp_path / "x.item"
    write_item_file(out, rows)
    assert out.read_text().splitlines()[0] == ITEM_HEADER
    back = read_item_file(out)
    assert back[1] == Item("spk1_u1", 0.1, 0.15, "s", ("h#", "iy"), "A", 3)


def test_alignment_and_item_file_errors(tmp_path):
    ali = tmp_path / "ali"
    ali.write_text("u_1 0.0 0.1 a\nu_1 0.05 0.2 b\n")
    with pytest.raises(DataError, match=r"ali:2: .*overlaps line 1"):
        read_phone_alignments(ali)
    ali.write_text("u_1 0.0 x a\n")
    with pytest.raises(DataError, match=r"ali:1: times are not numbers"):
        read_phone_alignments(ali)
    with pytest.raises(DataError, match="no '_'"):
        make_abx_items({"u1": []})
    item = tmp_path / "i.item"
    item.write_text(ITEM_HEADER + "\nf 0.1 0.2 a b c s\nf 0.3 a b c s\n")
    with pytest.raises(DataError, match=r"i.item:3: 6 columns, the header has 7"):
        read_item_file(item)
    item.write_text("file onset offset phone\n")
    with pytest.raises(DataError, match=r"i.item:1: expected a header"):
        read_item_file(item)
    item.write_text(ITEM_HEADER + "\nf 0.3 0.2 a b c s\n")
    with pytest.raises(DataError, match="before onset"):
        read_item_file(item)


def test_feature_dir_text_and_scp(tmp_path):
    import kaldiio

    txt = tmp_path / "txt"
    txt.mkdir()
    (txt / "a_1.txt").write_text("1 2\n3 4\n\n5 6\n")
    np.testing.assert_array_equal(FeatureDir(txt).load("a_1"), [[1, 2], [3, 4], [5, 6]])
    (txt / "a_2.txt").write_text("1 2\n3\n")
    with pytest.raises(DataError, match=r"a_2.txt:2: 1 numbers, expected 2"):
        FeatureDir(txt).load("a_2")
    (txt / "a_2.txt").write_text("1 2\n3 nan\n")
    with pytest.raises(DataError, match=r"a_2.txt:2: NaN or Inf"):
        read_text_features(txt / "a_2.txt")
    (txt / "a_2.txt").write_text("1 2\n3 x\n")
    with pytest.raises(DataError, match=r"a_2.txt:2: not a number"):
        read_text_features(txt / "a_2.txt")
    (txt / "a_2.txt").write_text("")
    with pytest.raises(DataError, match="no frames"):
        read_text_features(txt / "a_2.txt")
    with pytest.raises(DataError, match="no features for 'zz'"):
        FeatureDir(txt).load("zz")
    scp = tmp_path / "scp"
    scp.mkdir()
    with kaldiio.WriteHelper(f"ark,scp:{scp}/feats.ark,{scp}/feats.scp") as w:
        w("b_1", np.ones((3, 2), dtype=np.float32))
        w("b_2", np.array([[1.0, np.inf]], dtype=np.float32))
    fd = FeatureDir(scp)
    assert fd.kind == "scp" and fd.utts == ["b_1", "b_2"] and fd.load("b_1").shape == (3, 2)
    with pytest.raises(DataError, match=r"feats.scp\[b_2\]: NaN or Inf"):
        fd.load("b_2")
    assert resolve_frame_shift(scp) == 0.01
    (scp / "frame_shift").write_text("0.02\n")
    assert resolve_frame_shift(scp) == 0.02 and resolve_frame_shift(scp, 0.04) == 0.04
    (scp / "frame_shift").write_text("fast\n")
    with pytest.raises(DataError, match="frame_shift:1"):
        resolve_frame_shift(scp)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no feats.scp and no <utt>.txt"):
        FeatureDir(tmp_path / "empty")


# ------------------------------------------------------------------------------ CLIs
def _write_txt_dir(d: Path, feats):
    d.mkdir()
    for utt, m in feats.items():
        np.savetxt(d / f"{utt}.txt", m, fmt="%.17g")


def test_cli_make_items_and_score(tmp_path, capsys):
    feats, items = synthetic(7, n_utt=2, dur=0.3)
    _write_txt_dir(tmp_path / "feats", feats)
    data = tmp_path / "data"
    data.mkdir()
    lines = [f"{i.file} {i.onset:.4f} {i.offset:.4f} {i.phone}" for i in items]
    (data / "phone_alignments").write_text("\n".join(lines) + "\n")
    (data / "utt2spk").write_text("".join(f"{u} {u.split('_')[0]}\n" for u in sorted(feats)))
    assert make_items_cli.main([str(data), str(tmp_path / "abx.item"), "--exclude-phones", ""]) == 0
    assert "wrote" in capsys.readouterr().out
    rc = score_abx_cli.main([str(tmp_path / "feats"), str(tmp_path / "abx.item"), "--json", str(tmp_path / "o.json")])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    got = json.loads((tmp_path / "o.json").read_text())
    assert out[-1] == f"ABX error (across speakers): {got['error']:.2f} %"
    assert got["mode"] == "across" and got["distance"] == "cosine" and got["n_triplets"] > 0
    assert got["by_phone_pair"][0].keys() >= {"phone_1", "phone_2", "error", "n_triplets"}
    # same score as the library on the same items, modulo their context (neighbours here)
    lib = abx_error(feats, read_item_file(tmp_path / "abx.item"))
    assert got["error"] == pytest.approx(lib.error, abs=1e-9)
    assert score_abx_cli.main([str(tmp_path / "feats"), str(tmp_path / "abx.item"), "--within"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ABX error (within speakers): ")
    # --bootstrap: the interval line before the figure, and in the JSON
    assert score_abx_cli.main([str(tmp_path / "feats"), str(tmp_path / "abx.item"), "--bootstrap", "50",
                               "--bootstrap-seed", "3", "--json", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    got = json.loads((tmp_path / "b.json").read_text())
    boot = bootstrap_interval(lib, 50, seed=3)
    assert out[-2] == boot.summary() and "bootstrap over speakers" in out[-2]
    assert got["bootstrap"]["low"] == pytest.approx(boot.low) and got["bootstrap"]["unit"] == "speaker"
    assert any(line.startswith("triplets: ") for line in out)
    # --paired-with: the difference from a reference on the same items, with its paired interval
    noisy = {f: m + np.random.default_rng(1).normal(scale=0.5, size=m.shape) for f, m in feats.items()}
    _write_txt_dir(tmp_path / "noisy", noisy)
    assert score_abx_cli.main([str(tmp_path / "noisy"), str(tmp_path / "abx.item"), "--bootstrap", "50",
                               "--bootstrap-seed", "3", "--paired-with", str(tmp_path / "feats"),
                               "--json", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    got = json.loads((tmp_path / "p.json").read_text())
    paired = paired_bootstrap_difference(abx_error(noisy, read_item_file(tmp_path / "abx.item")), lib, 50, seed=3)
    assert got["paired"]["difference"] == pytest.approx(paired.difference, abs=1e-9)
    assert got["paired"]["low"] == pytest.approx(paired.low) and got["paired"]["reference_error"] == pytest.approx(lib.error)
    assert out[-2].startswith(paired.summary()) and "speaker-sampling noise" in out[-2]


def test_cli_errors_exit_1_with_a_clear_message(tmp_path, capsys):
    feats, items = synthetic(7, dur=0.3)
    _write_txt_dir(tmp_path / "feats", feats)
    item = tmp_path / "abx.item"
    write_item_file(item, [(i.file, str(i.onset), str(i.offset), i.phone, *i.context, i.speaker) for i in items]
                    + [("ghost", "0", "0.1", "a", "x", "z", "s9")])
    out_json = tmp_path / "o.json"
    assert score_abx_cli.main([str(tmp_path / "feats"), str(item), "--json", str(out_json)]) == 1
    err = capsys.readouterr().err
    assert f"{item}:{len(items) + 2}: item names 'ghost'" in err and "ghost.txt" in err
    assert not out_json.exists()
    write_item_file(item, [(i.file, str(i.onset), str(i.offset), i.phone, *i.context, i.speaker) for i in items])
    (tmp_path / "feats" / "s0_u0.txt").write_text("1 2 3 4\n1 inf 3 4\n")
    assert score_abx_cli.main([str(tmp_path / "feats"), str(item)]) == 1
    assert "s0_u0.txt:2: NaN or Inf" in capsys.readouterr().err
    assert score_abx_cli.main([str(tmp_path / "nowhere"), str(item)]) == 1
    assert "feature directory not found" in capsys.readouterr().err
    assert score_abx_cli.main([str(tmp_path / "feats"), str(item), "--paired-with", str(tmp_path / "feats")]) == 1
    assert "--paired-with needs --bootstrap N" in capsys.readouterr().err


def test_cli_help_documents_options(capsys):
    with pytest.raises(SystemExit):
        score_abx_cli.main(["--help"])
    out = capsys.readouterr().out
    for opt in ("--distance", "--across", "--within", "--frame-shift", "--json", "--no-normalize", "--bootstrap",
                "--bootstrap-seed", "--empty-items", "--paired-with", "--convention", "--num-threads"):
        assert opt in out
    # which ZeroSpeech edition used which convention
    assert "ZeroSpeech 2017 (track 1), 2019 and 2020" in out and "ZeroSpeech 2021 and later" in out


def test_cli_convention_and_threads(tmp_path, capsys):
    feats, items = synthetic(5, n_spk=5, dur=0.6)
    _write_txt_dir(tmp_path / "feats", feats)
    item = tmp_path / "abx.item"
    write_item_file(item, [(i.file, repr(i.onset), repr(i.offset), i.phone, *i.context, i.speaker) for i in items])
    got = {}
    for conv in CONVENTIONS:
        out = tmp_path / f"{conv}.json"
        assert score_abx_cli.main([str(tmp_path / "feats"), str(item), "--convention", conv, "--num-threads", "2",
                                   "--json", str(out)]) == 0
        assert f"convention {conv}" in capsys.readouterr().out
        got[conv] = json.loads(out.read_text())
        assert got[conv]["convention"] == conv
        lib = abx_error(feats, read_item_file(item), convention=conv)
        assert got[conv]["error"] == pytest.approx(lib.error, abs=1e-9)
    assert abs(got["zr2021"]["error"] - 100 * FASTABX_PINNED[("cont", "across", "within")][1]) < 1e-9
    assert got["zr2019"]["error"] != got["zr2021"]["error"]
    assert score_abx_cli.main([str(tmp_path / "feats"), str(item), "--num-threads", "0"]) == 1
    assert "--num-threads must be >= 1" in capsys.readouterr().err


# ------------------------------------------------------------------------------ issue 23: resamples used
def test_bootstrap_reports_the_resamples_used_and_refuses_too_few():
    """Two speakers across: a resample drawing one speaker twice has no pair and is left out. The interval
    said '5 resamples' when it came from 2, and the paired test drew a verdict from them."""
    assert min_usable_resamples(0.95) == 40 and min_usable_resamples(0.9) == 20
    feats, items = synthetic(7, n_spk=2, dur=0.3)
    res = abx_error(feats, items)
    with pytest.raises(TooFewResamplesError, match=r"only 2 of 5 speaker resamples are usable \(3 drew a single "
                                                    r"speaker and were left out\); a 95 % interval needs at least 40"):
        bootstrap_interval(res, 5, seed=0)
    boot = bootstrap_interval(res, 200, seed=0)
    assert boot.n_valid < 200 and boot.n_distinct == 1 and boot.high == boot.low == pytest.approx(res.error)
    assert f"speakers, {boot.n_valid} of 200 resamples used, {200 - boot.n_valid} drew a single speaker)" in boot.summary()
    assert "every usable resample is the original 2 speakers, so the interval cannot vary" in boot.summary()
    # no verdict on speaker-sampling noise from two speakers, whatever the number of resamples
    other = {f: m + np.random.default_rng(3).normal(scale=0.8, size=m.shape) for f, m in feats.items()}
    with pytest.raises(TooFewResamplesError, match="only 2 of 5"):
        paired_bootstrap_difference(abx_error(other, items), res, 5, seed=0)
    with pytest.raises(ValueError, match="original 2 speakers, so a paired interval cannot vary: no verdict"):
        paired_bootstrap_difference(abx_error(other, items), res, 200, seed=0)
    # none left out, but still too few for the percentiles
    many = abx_error(*synthetic(5, n_spk=5, dur=0.6))
    with pytest.raises(TooFewResamplesError, match=r"only 10 of 10 speaker resamples are usable; a 95 % interval"):
        bootstrap_interval(many, 10)


def test_cli_bootstrap_too_few_resamples_and_device_errors(tmp_path, capsys):
    feats, items = synthetic(7, n_spk=2, dur=0.3)
    _write_txt_dir(tmp_path / "feats", feats)
    _write_txt_dir(tmp_path / "noisy", {f: m + 0.5 for f, m in feats.items()})
    item = tmp_path / "abx.item"
    write_item_file(item, [(i.file, str(i.onset), str(i.offset), i.phone, *i.context, i.speaker) for i in items])
    base = [str(tmp_path / "feats"), str(item)]
    for extra in ([], ["--paired-with", str(tmp_path / "noisy")]):
        assert score_abx_cli.main(base + ["--bootstrap", "5", "--json", str(tmp_path / "o.json"), *extra]) == 1
        cap = capsys.readouterr()
        assert "speechkit-score-abx: error: --bootstrap 5: only 2 of 5 speaker resamples are usable" in cap.err
        assert "ABX error" not in cap.out and not (tmp_path / "o.json").exists()
    assert score_abx_cli.main(base + ["--bootstrap", "200", "--paired-with", str(tmp_path / "noisy")]) == 1
    assert "--paired-with " + str(tmp_path / "noisy") + ": every usable speaker resample is the original 2 speakers" \
        in capsys.readouterr().err
    assert score_abx_cli.main(base + ["--bootstrap", "200"]) == 0  # the interval line says what it is
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("95 % interval"))
    assert " of 200 resamples used, " in line and "cannot vary" in line


def test_cli_device_errors_are_one_line_naming_the_option(tmp_path, capsys):
    """--device cuda on a CPU-only torch was 'AssertionError: Torch not compiled with CUDA enabled', --device
    bogus a RuntimeError traceback."""
    feats, items = synthetic(7, n_spk=2, dur=0.3)
    _write_txt_dir(tmp_path / "feats", feats)
    item = tmp_path / "abx.item"
    write_item_file(item, [(i.file, str(i.onset), str(i.offset), i.phone, *i.context, i.speaker) for i in items])
    base = [str(tmp_path / "feats"), str(item)]
    bad = [("bogus", "--device bogus: not a torch device"), ("mps", "--device mps: the DTW runs on cpu or cuda")]
    if not torch.cuda.is_available():
        bad.append(("cuda", "--device cuda: no CUDA device is available"))
    else:
        bad.append(("cuda:99", "--device cuda:99: there are"))
    for dev, msg in bad:
        assert score_abx_cli.main(base + ["--device", dev]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"speechkit-score-abx: error: {msg}") and "Traceback" not in err


@pytest.mark.parametrize("mode", ["across", "within"])
def test_needed_pairs_of_small_contexts_in_numpy_are_torchs(mode, monkeypatch):
    """A context under DEVICE_PAIRS_MIN_TOKENS tokens finds its pairs in numpy (pairs._needed_pairs_small): the pairs
    the torch masks find, in the same order, on random contexts (1-60 tokens, 1-4 speakers, 1-5 phones), the masks
    built whole or (across) a few rows at a time."""
    rng = np.random.default_rng(8)
    for _ in range(60):
        n = int(rng.integers(1, 61))
        phones = [f"p{k}" for k in rng.integers(0, int(rng.integers(1, 6)), size=n)]
        speakers = [f"s{k}" for k in rng.integers(0, int(rng.integers(1, 5)), size=n)]
        small = pairs.needed_pairs(phones, speakers, mode)
        with monkeypatch.context() as m:
            m.setattr(dispatch, "SMALL_PAIRS_IN_NUMPY", False)  # the torch masks of the whole context
            masks = pairs.needed_pairs(phones, speakers, mode)
            with monkeypatch.context() as m2:  # across: the masks a few rows at a time
                m2.setattr(dispatch, "PAIR_MASK_ELEMENTS", int(rng.integers(1, 3 * n + 1)))
                rows = pairs.needed_pairs(phones, speakers, mode)
            m.setattr(dispatch, "DEVICE_PAIRS_MIN_TOKENS", 1)  # within: one speaker's block at a time
            blocks = pairs.needed_pairs(phones, speakers, mode)
        assert small[0].dtype == torch.int64 and len(small[0]) == len(small[1])
        assert small[0].tolist() == masks[0].tolist() and small[1].tolist() == masks[1].tolist()
        assert small[0].tolist() == rows[0].tolist() and small[1].tolist() == rows[1].tolist()
        assert sorted(zip(*[t.tolist() for t in small])) == sorted(zip(*[t.tolist() for t in blocks]))
