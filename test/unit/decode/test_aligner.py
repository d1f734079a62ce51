"""Forced aligner: Viterbi and forward-backward against brute force, GMM EM against sklearn, and
train-and-align on synthetic audio whose phone boundaries are known."""
import itertools
import math

import numpy as np
import pytest
import soundfile as sf

from speechkit.decode.aligner import (SIL, Aligner, AlignerConfig, estimate_lda, estimate_mllt, load_aligner_config,
                                     mllt_objective, splice, train_aligner)
from speechkit.decode.hmm import (DiagGmmSet, _gauss_loglik, build_context_tree, forward_backward_batch,
                                  phone_questions, split_targets, viterbi_batch)
from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError

SR = 16000


# ------------------------------------------------------------------------------ brute force
def _paths_and_scores(g, e):
    """Score of every state sequence of len(e) frames through graph g (log domain), by enumeration."""
    S, T = g.num_states, len(e)
    W = np.full((S, S), -np.inf)  # W[i, j]: weight of the transition i -> j
    for j in range(S):
        for k in range(g.pred.shape[1]):
            if g.pred[j, k] >= 0:
                W[g.pred[j, k], j] = max(W[g.pred[j, k], j], g.log_trans[j, k])
    seqs = np.array(list(itertools.product(range(S), repeat=T)))
    with np.errstate(invalid="ignore"):
        scores = g.log_init[seqs[:, 0]] + e[np.arange(T), seqs].sum(1) + g.log_final[seqs[:, -1]]
        scores = scores + W[seqs[:, :-1], seqs[:, 1:]].sum(1)
    return [tuple(q) for q in seqs], np.where(np.isnan(scores), -np.inf, scores)


def _toy_graphs():
    rng = np.random.default_rng(3)
    cases = [
        (AlignerConfig(num_states=2, sil_num_states=1), ["a", "b"], [0, 1]),  # optional sil start/middle/end
        (AlignerConfig(num_states=3, sil_num_states=1, skip=True, optional_silence=False), ["a", "b"], None),
        (AlignerConfig(num_states=1, sil_num_states=2), ["b", "a", "b"], [0, 0, 1]),
    ]
    for cfg, toks, words in cases:
        al = Aligner(cfg, ["a", "b", SIL])
        al.trans = al.trans * rng.uniform(0.3, 1.0, al.trans.shape)  # unequal probabilities
        al.trans /= al.trans.sum(-1, keepdims=True)
        yield al.make_graph(toks, words)


@pytest.mark.parametrize("g", list(_toy_graphs()))
def test_viterbi_matches_brute_force(g):
    rng = np.random.default_rng(0)
    T_min = g.min_frames()
    es = [rng.normal(size=(T, g.num_states)) for T in (T_min, T_min + 1, 5)]
    es.append(rng.normal(size=(T_min - 1, g.num_states)))  # too short: no path
    res = viterbi_batch([g] * len(es), es)
    for e, (score, path) in zip(es, res):
        seqs, scores = _paths_and_scores(g, e)
        best = scores.max()
        if not np.isfinite(best):
            assert score == -np.inf and (path == -1).all()
            continue
        assert score == pytest.approx(best, abs=1e-9)
        assert tuple(path) == seqs[int(np.argmax(scores))]


@pytest.mark.parametrize("g", list(_toy_graphs()))
def test_forward_backward_matches_brute_force(g):
    rng = np.random.default_rng(1)
    es = [rng.normal(size=(T, g.num_states)) for T in (g.min_frames(), 5)]
    for e, (logz, (tt, jj, w), xi) in zip(es, forward_backward_batch([g] * len(es), es, min_post=0.0)):
        seqs, scores = _paths_and_scores(g, e)
        ref_z = np.logaddexp.reduce(scores)
        assert logz == pytest.approx(ref_z, abs=1e-9)
        p = np.exp(scores - ref_z)
        gamma = np.zeros((len(e), g.num_states))
        arr = np.array(seqs)
        for t in range(len(e)):
            np.add.at(gamma[t], arr[:, t], p)
        ours = np.zeros_like(gamma)
        ours[tt, jj] = w
        assert np.allclose(ours, gamma, atol=1e-9)
        assert xi.sum() == pytest.approx(len(e) - 1)  # one transition per frame step


def test_min_frames_of_topologies():
    al = Aligner(AlignerConfig(num_states=3, skip=True, optional_silence=False), ["a", "b"])
    assert al.make_graph(["a", "b"]).min_frames() == 4
    al = Aligner(AlignerConfig(num_states=3), ["a", SIL])
    assert al.make_graph(["a", "a"]).min_frames() == 6  # optional silences cost nothing


# ------------------------------------------------------------------------------ GMMs
def test_gmm_log_likelihood_and_em_step_match_sklearn():
    mixture = pytest.importorskip("sklearn.mixture")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-2, 0.5, (300, 3)), rng.normal(1.5, 1.2, (200, 3))])
    means = np.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]])
    vars_ = np.array([[1.0, 2.0, 1.0], [0.5, 1.0, 1.5]])
    weights = np.array([0.3, 0.7])
    gmm = DiagGmmSet(means[None], vars_[None], np.log(weights)[None])
    from scipy.stats import multivariate_normal as mvn
    direct = np.logaddexp(math.log(0.3) + mvn.logpdf(x, means[0], np.diag(vars_[0])),
                          math.log(0.7) + mvn.logpdf(x, means[1], np.diag(vars_[1])))
    assert np.allclose(gmm.log_likelihood(x)[:, 0], direct, atol=2e-3)  # float32 product
    ref = mixture.GaussianMixture(2, covariance_type="diag", max_iter=1, reg_covar=1e-12, tol=0.0,
                                  weights_init=weights, means_init=means, precisions_init=1 / vars_)
    # one EM step (sklearn: E-step with the init parameters, then M-step)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "did not converge" after one iteration
        ref.fit(x)
    occ = gmm.em_update([x], var_floor=np.full(3, 1e-6), min_count=1.0)
    assert occ[0] == len(x)
    order = np.argsort(gmm.means[0, :, 0])
    assert np.allclose(np.exp(gmm.log_weights[0, order]), ref.weights_, atol=1e-6)
    assert np.allclose(gmm.means[0, order], ref.means_, atol=1e-6)
    assert np.allclose(gmm.vars[0, order], ref.covariances_, atol=1e-6)


def test_weighted_single_gaussian_update_is_the_weighted_moments():
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(50, 2)), rng.uniform(0.1, 1.0, 50)
    gmm = DiagGmmSet.single(2, np.zeros(2), np.ones(2))
    occ = gmm.em_update([(x, w), None], var_floor=np.full(2, 1e-6))
    mean = (w[:, None] * x).sum(0) / w.sum()
    assert occ[0] == pytest.approx(w.sum()) and occ[1] == 0
    assert np.allclose(gmm.means[0, 0], mean)
    assert np.allclose(gmm.vars[0, 0], (w[:, None] * (x - mean) ** 2).sum(0) / w.sum())
    assert np.allclose(gmm.means[1, 0], 0.0)  # no data: unchanged
    # variance floor, split, and component removal by min_count
    gmm.split(np.array([3, 1]))
    assert list(gmm.num_components()) == [3, 1]
    assert np.exp(gmm.log_weights[0, :3]).sum() == pytest.approx(1.0)
    gmm.em_update([(x[:4], w[:4]), None], var_floor=np.full(2, 10.0), min_count=3.0)
    assert gmm.num_components()[0] == 1 and np.allclose(gmm.vars[0, 0], 10.0)


def test_split_targets():
    t = split_targets(np.array([1000.0, 100.0, 10.0, 0.0]), total=20, power=0.2, min_count=20)
    assert t[0] >= t[1] >= t[2] == 1 and t[3] == 1
    assert t[1] <= 5  # at most occ / min_count


def test_config_errors():
    with pytest.raises(ConfigError, match="sil_prob"):
        load_aligner_config(None, ["sil_prob=1.5"])
    with pytest.raises(ConfigError, match="num_stats"):
        load_aligner_config(None, ["num_stats=2"])


# ------------------------------------------------------------------------------ synthetic audio
#: 'phones' with distinct spectra: harmonic tones, high- and low-pass noise.
def _phone(kind: str, n: int, rng) -> np.ndarray:
    t = np.arange(n) / SR
    if kind == "a":
        y = sum(np.sin(2 * np.pi * 220 * h * t) / h for h in (1, 2, 3))
    elif kind == "i":
        y = np.sin(2 * np.pi * 2300 * t) + 0.5 * np.sin(2 * np.pi * 300 * t)
    elif kind == "s":
        y = np.diff(rng.normal(size=n + 1))
    elif kind == "m":
        y = np.cumsum(rng.normal(size=n))
        y = (y - np.convolve(y, np.ones(64) / 64, "same")) * 0.2
    else:  # silence
        return rng.normal(0, 1e-3, n)
    return 0.1 * y / (np.sqrt(np.mean(y ** 2)) + 1e-9)  # equal RMS: no phone masks its neighbour


def make_synthetic(root, n_utts=16, seed=0):
    """Data dir of concatenated synthetic phones; words separated by silence in some utterances.

    Returns (data_dir, reference) with reference utt -> [(start, end, label)] incl. 'sil'.
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    wav, text, info, u2s, ref = {}, {}, {}, {}, {}
    for k in range(n_utts):
        spk = f"spk{k % 2}"
        utt = f"{spk}_u{k:02d}"
        words = [list(rng.choice(list("aism"), size=rng.integers(2, 4))) for _ in range(rng.integers(2, 4))]
        # no two equal phones in a row (their boundary would be invisible)
        flat = [p for w in words for p in w]
        for i in range(1, len(flat)):
            while flat[i] == flat[i - 1]:
                flat[i] = rng.choice(list("aism"))
        it = iter(flat)
        words = [[next(it) for _ in w] for w in words]
        segs, pieces, pos = [], [], 0

        def add(label, dur):
            nonlocal pos
            n = int(dur * SR)
            pieces.append(_phone(label, n, rng))
            segs.append((pos / SR, (pos + n) / SR, label))
            pos += n
        add(SIL, rng.uniform(0.1, 0.25))
        for wi, w in enumerate(words):
            if wi > 0 and rng.random() < 0.5:
                add(SIL, rng.uniform(0.08, 0.2))
            for ph in w:
                add(ph, rng.uniform(0.06, 0.16))
        add(SIL, rng.uniform(0.1, 0.25))
        path = root / f"{utt}.wav"
        sf.write(path, np.concatenate(pieces).astype(np.float32), SR)
        wav[utt] = str(path)
        toks = [p for w in words for p in w]
        text[utt] = " ".join(toks)
        info[utt] = " ".join(f"0:{wi}:{wi}" for wi, w in enumerate(words) for _ in w)
        u2s[utt] = spk
        ref[utt] = segs
    for name, table in (("wav.scp", wav), ("text", text), ("phone_info", info), ("utt2spk", u2s)):
        (root / name).write_text("".join(f"{u} {table[u]}\n" for u in sorted(table)))
    spk2utt = {}
    for u in sorted(u2s):
        spk2utt.setdefault(u2s[u], []).append(u)
    (root / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in spk2utt.items()))
    return root, ref


FAST = ["num_iters=12", "baum_welch_iters=6", "realign_iters=[7,9,11]", "max_iter_inc=8", "total_gauss=60"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("align")
    data, ref = make_synthetic(root / "data")
    config = load_aligner_config(None, FAST)
    aligner, result = train_aligner(data, root / "exp", config)
    return root, data, ref, aligner, result


def test_train_and_align_synthetic_reaches_boundary_accuracy(trained):
    root, data, ref, aligner, result = trained
    assert not result.unaligned and set(result.alignments) == set(ref)
    errs, sil_ok = [], 0
    for utt, segs in result.alignments.items():
        # contiguous from 0 to the end of the audio; the non-sil labels are the text
        assert segs[0][0] == 0.0 and segs[-1][1] == pytest.approx(ref[utt][-1][1])
        assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
        assert [p for _, _, p in segs if p != SIL] == [p for _, _, p in ref[utt] if p != SIL]
        sil_ok += [p for _, _, p in segs] == [p for _, _, p in ref[utt]]
        hyp = [s for s in segs if s[2] != SIL]
        want = [s for s in ref[utt] if s[2] != SIL]
        errs += [abs(h[0] - r[0]) for h, r in zip(hyp, want)] + [abs(h[1] - r[1]) for h, r in zip(hyp, want)]
    errs = np.array(errs)
    assert np.mean(errs <= 0.02) >= 0.85 and np.mean(errs <= 0.04) >= 0.98, f"within 20 ms: {np.mean(errs <= 0.02):.3f}"
    assert sil_ok >= 0.9 * len(ref)  # optional silences found where they are
    # the saved model files
    exp = root / "exp"
    for name in ("final.mdl", "phones.txt", "config.yaml", "log/train.log"):
        assert (exp / name).is_file()
    assert (exp / "phones.txt").read_text().split("\n")[0] == "a 0"


def test_load_round_trip_gives_the_same_alignments(trained):
    root, data, ref, aligner, result = trained
    again = Aligner.load(root / "exp").align(data)
    assert again.alignments == result.alignments


def test_skips_are_counted_with_reasons(trained, tmp_path):
    root, data, ref, aligner, result = trained
    d = tmp_path / "d"
    d.mkdir()
    utts = sorted(ref)[:4]
    wav = dict(line.split(" ", 1) for line in (data / "wav.scp").read_text().splitlines())
    text = dict(line.split(" ", 1) for line in (data / "text").read_text().splitlines())
    wav[utts[1]] = str(tmp_path / "missing.wav\n")
    text[utts[2]] = "a z a\n"  # unknown token
    text[utts[3]] = "\n"  # empty
    (d / "wav.scp").write_text("".join(f"{u} {wav[u].strip()}\n" for u in utts))
    (d / "text").write_text("".join(f"{u} {text[u].strip()}\n".replace(" \n", "\n") for u in utts))
    (d / "utt2spk").write_text("".join(f"{u} {u.split('_')[0]}\n" for u in utts))
    res = aligner.align(d)
    assert list(res.alignments) == [utts[0]]
    assert res.unaligned[utts[1]].startswith("unreadable audio")
    assert res.unaligned[utts[2]] == "unknown tokens: z"
    assert res.unaligned[utts[3]] == "empty text"
    # too few frames: 40 tokens in a 0.5 s utterance (needs 3 frames each)
    short = tmp_path / "short"
    short.mkdir()
    sf.write(short / "x.wav", np.zeros(SR // 2, np.float32) + 0.01, SR)
    (short / "wav.scp").write_text(f"s_x {short / 'x.wav'}\n")
    (short / "text").write_text("s_x " + " ".join(["a", "i"] * 20) + "\n")
    (short / "utt2spk").write_text("s_x s\n")
    res = aligner.align(short)
    assert res.unaligned["s_x"].startswith("too few frames")


def test_bad_phone_info_is_a_data_error(trained, tmp_path):
    root, data, ref, aligner, result = trained
    import shutil
    d = tmp_path / "d"
    shutil.copytree(data, d)
    lines = (d / "phone_info").read_text().splitlines()
    lines[1] = lines[1] + " 0:0:9"
    (d / "phone_info").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"phone_info:2: .* fields but text has"):
        aligner.align(d)


def test_splice_matches_a_loop():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = splice(x, 2)
    for t in range(4):
        want = np.concatenate([x[min(max(t + k, 0), 3)] for k in range(-2, 3)])
        assert np.array_equal(out[t], want)


def test_hybrid_refinement_is_saved_and_reloaded(tmp_path):
    data, ref = make_synthetic(tmp_path / "data", n_utts=8, seed=2)
    cfg = load_aligner_config(None, FAST + ["refine_iters=1", "mlp_epochs=2", "mlp_hidden=32"])
    aligner, result = train_aligner(data, tmp_path / "exp", cfg)
    assert aligner.mlp is not None and not result.unaligned
    again = Aligner.load(tmp_path / "exp")
    assert again.mlp is not None and again.mlp.context == cfg.mlp_context
    assert again.align(data).alignments == result.alignments


def test_segments_and_command_pipes_give_the_same_alignments(trained, tmp_path):
    root, data, ref, aligner, result = trained
    utts = [u for u in sorted(ref) if u.startswith("spk0")][:3]
    wav = dict(line.split(" ", 1) for line in (data / "wav.scp").read_text().splitlines())
    text = dict(line.split(" ", 1) for line in (data / "text").read_text().splitlines())
    plain, seg = tmp_path / "plain", tmp_path / "seg"
    plain.mkdir()
    seg.mkdir()
    pieces, segments, pos = [], [], 0.0
    for u in utts:
        x, _ = sf.read(wav[u], dtype="float32")
        pieces.append(x)
        segments.append(f"{u} spk0_rec {pos} {pos + len(x) / SR}\n")
        pos += len(x) / SR
    sf.write(tmp_path / "rec.wav", np.concatenate(pieces), SR, subtype="FLOAT")
    (seg / "wav.scp").write_text(f"spk0_rec cat {tmp_path / 'rec.wav'} |\n")
    (seg / "segments").write_text("".join(segments))
    (plain / "wav.scp").write_text("".join(f"{u} {wav[u]}\n" for u in utts))
    for d in (plain, seg):
        (d / "text").write_text("".join(f"{u} {text[u]}\n" for u in utts))
        (d / "utt2spk").write_text("".join(f"{u} spk0\n" for u in utts))
    a, b = aligner.align(plain), aligner.align(seg)
    assert not a.unaligned and not b.unaligned
    assert a.alignments.keys() == b.alignments.keys()
    for u in utts:
        for (s1, e1, p1), (s2, e2, p2) in zip(a.alignments[u], b.alignments[u]):
            assert p1 == p2 and s1 == pytest.approx(s2, abs=1e-6) and e1 == pytest.approx(e2, abs=1e-3)


# ------------------------------------------------------------------------------ LDA, MLLT, state tying
def test_lda_matches_sklearn():
    lda_mod = pytest.importorskip("sklearn.discriminant_analysis")
    rng = np.random.default_rng(0)
    means = rng.normal(0, 2, (5, 6))
    y = rng.integers(0, 5, 600)
    mix = rng.normal(size=(6, 6))
    x = (means[y] + rng.normal(size=(600, 6))) @ mix
    ours = estimate_lda(x, y, 3)
    ref = lda_mod.LinearDiscriminantAnalysis(solver="eigen", n_components=3).fit(x, y)
    a, b = x @ ours.T, ref.transform(x)
    for k in range(3):  # the same directions, up to sign; unit within-class variance
        assert abs(np.corrcoef(a[:, k], b[:, k])[0, 1]) > 1 - 1e-6
        assert np.allclose(np.abs(a[:, k] - a[:, k].mean()), np.abs(b[:, k] - b[:, k].mean()), atol=1e-3)
    within = sum(np.cov(a[y == c], rowvar=False, bias=True) * np.mean(y == c) for c in range(5))
    assert np.allclose(within, np.eye(3), atol=1e-4)
    with pytest.raises(ValueError, match="dimension"):
        estimate_lda(x, y, 7)


def test_mllt_finds_the_shared_rotation():
    rng = np.random.default_rng(0)
    R = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    covs = np.stack([R @ np.diag(rng.uniform(0.2, 3.0, 4)) @ R.T for _ in range(6)])
    counts = rng.uniform(50, 200, 6)
    A = estimate_mllt(covs, counts, num_iters=50)
    best = mllt_objective(R.T, covs, counts)  # the semi-tied optimum: every A S A^T diagonal
    assert mllt_objective(A, covs, counts) == pytest.approx(best, abs=1e-4)
    assert mllt_objective(A, covs, counts) > mllt_objective(np.eye(4), covs, counts)
    for S in covs:
        T = A @ S @ A.T
        assert np.abs(T - np.diag(np.diag(T))).max() < 1e-3 * np.abs(T).max()
    # a class with no frames is ignored
    A0 = estimate_mllt(np.concatenate([covs, np.zeros((1, 4, 4))]), np.append(counts, 0.0), num_iters=50)
    assert np.allclose(np.abs(A0), np.abs(A), atol=1e-6)


def test_phone_questions_are_nested_clusters():
    qs = phone_questions(np.array([[0.0], [0.1], [5.0], [5.2]]))
    sets = [tuple(np.nonzero(q)[0]) for q in qs]
    assert (0, 1) in sets and (2, 3) in sets and (4,) in sets  # 4 = the utterance edge
    assert all((i,) in sets for i in range(4)) and (0, 1, 2, 3) not in sets


def test_context_tree_takes_the_best_split_and_covers_unseen_contexts():
    rng = np.random.default_rng(0)
    N, D = 4, 2
    num_states = np.array([1, 1, 1, 1])
    qs = phone_questions(rng.normal(size=(N, 3)))
    # phone 0 (state 0): its right context {1, 2} (a question) shifts the mean; phone 3: no effect
    ctx, n, sx, sxx = [], [], [], []
    for c in (0, 3):
        for left in range(N + 1):
            for right in range(N + 1):
                x = rng.normal(size=(40, D)) + (4.0 if c == 0 and right in (1, 2) else 0.0)
                ctx.append((left, c, right, 0))
                n.append(len(x))
                sx.append(x.sum(0))
                sxx.append((x * x).sum(0))
    ctx, n, sx, sxx = np.array(ctx), np.array(n, float), np.array(sx), np.array(sxx)
    qs.append(np.isin(np.arange(N + 1), [1, 2]))
    floor = np.full(D, 1e-3)
    out = build_context_tree(ctx, n, sx, sxx, N, num_states, qs, max_leaves=N + 1, min_count=100, var_floor=floor)
    assert out.shape == (N + 1, N, N + 1, 1) and out.max() == N  # one split besides the 4 roots
    yes, no = out[:, 0, 1, 0], out[:, 0, 0, 0]
    assert len(set(yes)) == 1 and len(set(no)) == 1 and yes[0] != no[0]
    assert (out[:, 0, 2, 0] == yes[0]).all() and (out[:, 0, [0, 3, 4], 0] == no[0]).all()
    assert len(np.unique(out[:, 3, :, 0])) == 1  # not split
    # brute force: no question on phone 0 beats the chosen one
    rows = np.nonzero(ctx[:, 1] == 0)[0]

    def gain(mask):
        y, m = rows[mask], rows[~mask]
        return sum(_gauss_loglik(n[r].sum(), sx[r].sum(0), sxx[r].sum(0), floor) for r in (y, m))
    chosen = gain(np.isin(ctx[rows, 2], [1, 2]))
    for q in qs:
        for pos in (0, 2):
            mask = q[ctx[rows, pos]]
            if n[rows[mask]].sum() >= 100 and n[rows[~mask]].sum() >= 100:
                assert gain(mask) <= chosen + 1e-6
    # min_count: no leaf with fewer frames
    out = build_context_tree(ctx, n, sx, sxx, N, num_states, qs, max_leaves=1000, min_count=200, var_floor=floor)
    leaf_of_row = out[ctx[:, 0], ctx[:, 1], ctx[:, 2], ctx[:, 3]]
    occ = np.bincount(leaf_of_row, weights=n, minlength=out.max() + 1)
    assert occ[occ > 0].min() >= 200 and (occ == 0).sum() == 2  # phones 1 and 2: roots without data


def test_triphone_lda_mllt_and_sat_stages_train_save_and_reload(tmp_path):
    data, ref = make_synthetic(tmp_path / "data", n_utts=12, seed=4)
    cfg = load_aligner_config(None, FAST + ["tri_leaves=40", "tri_min_count=20", "tri_iters=4", "tri_realign_iters=[2]",
                                            "tri_total_gauss=80", "lda_dim=20", "lda_iters=4", "lda_realign_iters=[2]",
                                            "mllt_iters=[1,3]", "sat_iters=3", "sat_fmllr_iters=[1]",
                                            "sat_realign_iters=[2]", "fmllr_min_frames=100"])
    aligner, result = train_aligner(data, tmp_path / "exp", cfg)
    assert not result.unaligned
    assert aligner.ctx_pdf is not None and aligner.num_pdfs == aligner.gmm.num_pdfs > 4 * 3 + 3
    assert aligner.transform.shape == (20, cfg.n_mfcc * (2 * cfg.lda_context + 1)) and aligner.gmm.dim == 20
    errs = []
    for utt, segs in result.alignments.items():
        hyp = [s for s in segs if s[2] != SIL]
        want = [s for s in ref[utt] if s[2] != SIL]
        assert [p for _, _, p in hyp] == [p for _, _, p in want]
        errs += [abs(h[0] - r[0]) for h, r in zip(hyp, want)]
    assert np.mean(np.array(errs) <= 0.02) >= 0.85
    again = Aligner.load(tmp_path / "exp")
    assert np.array_equal(again.ctx_pdf, aligner.ctx_pdf) and np.allclose(again.transform, aligner.transform)
    assert again.align(data).alignments == result.alignments


def test_fmllr_undoes_a_speaker_transform():
    from speechkit.decode.aligner import estimate_fmllr, fmllr_objective

    rng = np.random.default_rng(0)
    D, C = 3, 6
    mus, vars_ = rng.normal(0, 2, (C, D)), rng.uniform(0.3, 2.0, (C, D))
    y = rng.integers(0, C, 4000)
    canon = mus[y] + rng.normal(size=(4000, D)) * np.sqrt(vars_[y])
    M = np.eye(D) + 0.3 * rng.normal(size=(D, D))
    b = rng.normal(size=D)
    x = (canon - b) @ np.linalg.inv(M).T  # the speaker's frames: canon = M x + b
    xi = np.hstack([x, np.ones((len(x), 1))])
    K = ((mus[y] / vars_[y]).T @ xi)
    G = np.einsum("ti,tj,tk->ijk", 1.0 / vars_[y], xi, xi)
    W = estimate_fmllr(len(x), K, G, num_iters=20)
    assert np.allclose(W[:, :D], M, atol=0.05) and np.allclose(W[:, D], b, atol=0.05)
    ident = np.hstack([np.eye(D), np.zeros((D, 1))])
    assert fmllr_objective(W, len(x), K, G) > fmllr_objective(ident, len(x), K, G)
    # the optimum: no coordinate perturbation improves the auxiliary function
    best = fmllr_objective(W, len(x), K, G)
    for _ in range(20):
        assert fmllr_objective(W + 1e-3 * rng.normal(size=W.shape), len(x), K, G) <= best + 1e-9


def test_duration_outliers_are_left_out_of_the_statistics():
    from speechkit.decode.aligner import _accumulate, _duration_inliers

    al = Aligner(AlignerConfig(num_states=1, optional_silence=False, duration_outlier_k=2.0), ["a", "b"])
    # 'a' lasts 4 frames in nine tokens and 40 in one (|log 10| / 0.25 > 2: an outlier); 'b' always 3
    toks = ["a", "b"] * 10
    durs = [4, 3] * 10
    durs[0] = 40
    g = al.make_graph(toks)
    path = np.repeat(np.arange(len(toks)), durs)
    keep = _duration_inliers(al, [g], [path], 2.0)[0]
    assert keep.shape == path.shape and (~keep).sum() == 40 and not keep[:40].any()
    x = np.arange(len(path), dtype=np.float64)[:, None]
    frames, counts = _accumulate(al, [g], [x], [path])
    assert len(frames[0]) == 9 * 4 and len(frames[1]) == 10 * 3
    al.config.duration_outlier_k = 0.0
    frames, _ = _accumulate(al, [g], [x], [path])
    assert len(frames[0]) == 40 + 9 * 4
