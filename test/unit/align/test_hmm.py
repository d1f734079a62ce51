"""Forced aligner's HMM graphs: Viterbi and forward-backward against brute force, minimum durations."""
import itertools

import numpy as np
import pytest

from speechkit.align.aligner import Aligner
from speechkit.align.config import SIL, AlignerConfig
from speechkit.align.hmm import forward_backward_batch, viterbi_batch


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
