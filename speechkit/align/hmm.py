"""HMM alignment graphs and their dynamic programming, vectorised in numpy (no Python loop over states).

* :class:`AlignGraph` -- the left-to-right state graph of one utterance: each state has at most
  :data:`MAX_PRED` predecessors (itself, the previous state, a skip inside a phone, a skip over an
  optional silence block), so Viterbi's recursion is a gather + max over a ``(S, K)`` array.
* :func:`viterbi_batch` -- Viterbi forced alignment of many utterances at once: their graphs are
  concatenated into one state vector and the DP runs once over frames, ``delta_t(j) = b_j(o_t) +
  max_k [delta_{t-1}(pred_k(j)) + log a_{pred_k(j), j}]`` (Rabiner 1989, eq. 33a-b), with
  vectorised backtracking.
* :func:`forward_backward_batch` -- the Baum-Welch E-step over many utterances the same way.

Scores are natural-log; ``-inf`` marks an impossible transition or start/end state.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speechkit.align.gmm import NEG_INF

#: Predecessor slots per state: 0 self-loop, 1 previous state, 2 skip inside a phone, 3 skip over an optional block.
MAX_PRED = 4


@dataclass
class AlignGraph:
    """Left-to-right state graph of one utterance.

    Attributes:
        pdf: int ``(S,)`` pdf (GMM) index of each state.
        token: int ``(S,)`` position of the state's token in the utterance's token sequence, or
            ``-1 - k`` for the ``k``-th optional silence block.
        label: int ``(S,)`` phone id of the state.
        hmm_state: int ``(S,)`` index of the state inside its phone HMM (0-based).
        pred: int ``(S, MAX_PRED)`` predecessor state of each slot, ``-1`` if none.
        log_trans: float64 ``(S, MAX_PRED)`` log probability of the transition from ``pred`` (``-inf`` if none).
        log_init: float64 ``(S,)`` log probability of starting in the state (``-inf`` if not a start state).
        log_final: float64 ``(S,)`` log probability of ending in the state (``-inf`` if not an end state).
    """

    pdf: np.ndarray
    token: np.ndarray
    label: np.ndarray
    hmm_state: np.ndarray
    pred: np.ndarray
    log_trans: np.ndarray
    log_init: np.ndarray
    log_final: np.ndarray

    @property
    def num_states(self) -> int:
        return len(self.pdf)

    def min_frames(self) -> int:
        """Fewest frames of a path from a start to an end state (one per visited state)."""
        # shortest path in a DAG (states are topologically ordered; slot 0 is the self-loop)
        S = self.num_states
        dist = np.full(S, np.inf)
        for j in range(S):
            if np.isfinite(self.log_init[j]):
                dist[j] = 1
            for k in range(1, MAX_PRED):
                i = self.pred[j, k]
                if i >= 0 and np.isfinite(self.log_trans[j, k]):
                    dist[j] = min(dist[j], dist[i] + 1)
        fin = dist[np.isfinite(self.log_final)]
        return int(fin.min()) if len(fin) and np.isfinite(fin.min()) else 0


def viterbi_batch(graphs: list[AlignGraph], emissions: list[np.ndarray]) -> list[tuple[float, np.ndarray]]:
    """Viterbi forced alignment of several utterances in one pass over frames.

    ``delta_0(j) = log_init(j) + e_0(j)``; ``delta_t(j) = e_t(j) + max_k [delta_{t-1}(pred_k(j)) +
    log_trans(j, k)]``; the score is ``max_j delta_{T-1}(j) + log_final(j)`` (Rabiner 1989,
    eqs. 32a-35). Ties go to the lowest slot (self-loop first).

    Args:
        graphs: one :class:`AlignGraph` per utterance.
        emissions: per utterance, float ``(T_u, S_u)``: the (scaled) log-likelihood of frame ``t``
            in each graph state.

    Returns:
        Per utterance ``(score, path)``: ``path`` int ``(T_u,)`` state index per frame; ``score``
        ``-inf`` (and ``path`` all ``-1``) if no path fits in ``T_u`` frames.
    """
    if len(graphs) != len(emissions):
        raise ValueError(f"{len(graphs)} graphs but {len(emissions)} emission matrices")
    if not graphs:
        return []
    sizes = np.array([g.num_states for g in graphs])
    lens = np.array([len(e) for e in emissions])
    for g, e in zip(graphs, emissions):
        if e.ndim != 2 or e.shape[1] != g.num_states:
            raise ValueError(f"emissions of shape {e.shape} do not match a graph of {g.num_states} states")
    offs = np.concatenate([[0], np.cumsum(sizes)])
    S = int(offs[-1])
    dummy = S  # an always -inf state that "missing" predecessors point to
    pred = np.concatenate([np.where(g.pred >= 0, g.pred + o, dummy) for g, o in zip(graphs, offs[:-1])])
    ltr = np.concatenate([g.log_trans for g in graphs])
    init = np.concatenate([g.log_init for g in graphs])
    final = np.concatenate([g.log_final for g in graphs])
    T = int(lens.max())
    E = np.zeros((T, S + 1))
    E[:, S] = NEG_INF
    for e, o, n in zip(emissions, offs[:-1], lens):
        E[:n, o:o + e.shape[1]] = e
    utt_of_state = np.repeat(np.arange(len(graphs)), sizes)
    last_t = lens[utt_of_state]  # frames of each state's utterance
    bp = np.zeros((T, S), dtype=np.int8)
    delta = init + E[0, :S]
    delta = np.append(delta, NEG_INF)
    end_scores = np.full(S, NEG_INF)
    ends_now = last_t == 1
    end_scores[ends_now] = delta[:S][ends_now]
    rows = np.arange(S)
    for t in range(1, T):
        cand = delta[pred] + ltr  # (S, K)
        k = np.argmax(cand, axis=1)
        best = cand[rows, k]
        bp[t] = k
        delta[:S] = best + E[t, :S]
        ends_now = last_t == t + 1
        if ends_now.any():
            end_scores[ends_now] = delta[:S][ends_now]
    end_scores = end_scores + final
    # best end state per utterance
    results: list[tuple[float, np.ndarray]] = []
    cur = np.zeros(len(graphs), dtype=np.int64)
    scores = np.zeros(len(graphs))
    for u in range(len(graphs)):
        seg = end_scores[offs[u]:offs[u + 1]]
        j = int(np.argmax(seg))
        cur[u] = offs[u] + j
        scores[u] = seg[j]
    paths = np.full((len(graphs), T), -1, dtype=np.int64)
    ok = np.isfinite(scores)
    for t in range(T - 1, -1, -1):
        active = (lens > t) & ok
        paths[active, t] = cur[active]
        if t == 0:
            break
        c = cur[active]
        cur[active] = pred[c, bp[t, c]]
    for u in range(len(graphs)):
        if not np.isfinite(scores[u]):
            results.append((float(NEG_INF), np.full(lens[u], -1, dtype=np.int64)))
        else:
            results.append((float(scores[u]), paths[u, :lens[u]] - offs[u]))
    return results


def _lse_rows(a: np.ndarray) -> np.ndarray:
    """``logsumexp`` over axis 1 of a 2-D array (rows of all ``-inf`` give ``-inf``)."""
    m = a.max(axis=1)
    mf = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - mf[:, None]).sum(axis=1)) + mf


def forward_backward_batch(graphs: list[AlignGraph], emissions: list[np.ndarray], min_post: float = 1e-4
                           ) -> list[tuple[float, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]]:
    """Forward-backward (Baum-Welch E-step) over several utterances in one pass over frames.

    ``alpha_t(j) = e_t(j) + logsumexp_k [alpha_{t-1}(pred_k(j)) + log_trans(j, k)]``,
    ``beta_t(i) = logsumexp_{(j,k): pred_k(j)=i} [log_trans(j, k) + e_{t+1}(j) + beta_{t+1}(j)]``,
    ``gamma_t(j) = exp(alpha_t(j) + beta_t(j) - log Z)`` (Rabiner 1989, eqs. 19-27, in the log domain).

    Args:
        graphs: one :class:`AlignGraph` per utterance.
        emissions: per utterance float ``(T_u, S_u)`` (scaled) log-likelihoods.
        min_post: state posteriors below this are dropped (Kaldi's ``--min-post``).

    Returns:
        Per utterance ``(log Z, (frames, states, gammas), xi)``: ``log Z`` the total log score
        (``-inf`` when no path fits, the rest then empty/zero); the state occupation posteriors as
        sparse triplets; ``xi`` float64 ``(S_u, MAX_PRED)`` the expected count of each transition.
    """
    if not graphs:
        return []
    sizes = np.array([g.num_states for g in graphs])
    lens = np.array([len(e) for e in emissions])
    offs = np.concatenate([[0], np.cumsum(sizes)])
    S = int(offs[-1])
    dummy = S
    pred = np.concatenate([np.where(g.pred >= 0, g.pred + o, dummy) for g, o in zip(graphs, offs[:-1])])
    ltr = np.concatenate([g.log_trans for g in graphs])
    ltr = np.where(pred == dummy, NEG_INF, ltr)
    init = np.concatenate([g.log_init for g in graphs])
    final = np.concatenate([g.log_final for g in graphs])
    T = int(lens.max())
    E = np.full((T, S + 1), NEG_INF)
    for e, o, n in zip(emissions, offs[:-1], lens):
        E[:n, o:o + e.shape[1]] = e
    utt_of_state = np.repeat(np.arange(len(graphs)), sizes)
    last_t = lens[utt_of_state]
    # Each slot as (states having it, their predecessor, weight); within a slot a predecessor is
    # shared by no two states in graphs from make_graph, so the backward scatter is an assignment.
    slots = []
    for k in range(MAX_PRED):
        j = np.nonzero(pred[:, k] != dummy)[0]
        if len(j):
            i = pred[j, k]
            slots.append((k, j, i, ltr[j, k], len(np.unique(i)) == len(i)))
    # forward
    A = np.full((T, S + 1), NEG_INF)
    A[0, :S] = init + E[0, :S]
    r = np.empty(S)
    for t in range(1, T):
        prev = A[t - 1]
        r.fill(NEG_INF)
        for k, j, i, w, _ in slots:
            r[j] = np.logaddexp(r[j], prev[i] + w)
        A[t, :S] = r + E[t, :S]
    endsc = A[last_t - 1, np.arange(S)] + final
    logz = np.array([_lse_rows(endsc[None, offs[u]:offs[u + 1]])[0] for u in range(len(graphs))])
    lz_state = logz[utt_of_state]
    # backward, with transition posteriors
    B = np.full((T, S + 1), NEG_INF)
    xi = np.zeros((S, MAX_PRED))
    ends_at = [np.nonzero(last_t == t + 1)[0] for t in range(T)]
    with np.errstate(invalid="ignore"):
        for t in range(T - 1, -1, -1):
            if t + 1 < T:
                v = E[t + 1, :S] + B[t + 1, :S]  # (S,); -inf for utterances already over
                r.fill(NEG_INF)
                cur = A[t]
                for k, j, i, w, unique in slots:
                    c = w + v[j]
                    if unique:
                        r[i] = np.logaddexp(r[i], c)
                    else:
                        np.logaddexp.at(r, i, c)
                    lx = cur[i] + c - lz_state[j]
                    xi[j, k] += np.exp(np.minimum(np.nan_to_num(lx, nan=NEG_INF), 0.0))
                B[t, :S] = r
            e = ends_at[t]
            B[t, e] = final[e]
    out = []
    for u in range(len(graphs)):
        o, n, s = offs[u], lens[u], sizes[u]
        if not np.isfinite(logz[u]):
            empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
            out.append((float(NEG_INF), empty, np.zeros((s, MAX_PRED))))
            continue
        g = np.exp(A[:n, o:o + s] + B[:n, o:o + s] - logz[u])
        tt, jj = np.nonzero(g >= min_post)
        w = g[tt, jj]
        # renormalise each frame over the kept states
        tot = np.bincount(tt, weights=w, minlength=n)
        w = w / tot[tt]
        out.append((float(logz[u]), (tt, jj, w), xi[o:o + s]))
    return out
