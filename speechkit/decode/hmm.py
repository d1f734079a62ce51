"""HMM building blocks of the forced aligner: diagonal-covariance GMMs, alignment graphs, Viterbi.

Three pieces, all vectorised in numpy (no Python loop over Gaussians or states):

* :class:`DiagGmmSet` -- one diagonal-covariance Gaussian mixture per HMM state ("pdf"), stored as
  padded arrays ``(P, M, D)``; log-likelihoods of many frames against many pdfs in one matrix
  product; one EM step per pdf from Viterbi-aligned frames (the ``gmm-acc-stats-ali`` +
  ``gmm-est`` step of Kaldi's ``train_mono.sh``); Gaussian splitting ("mixing up") towards a
  total count shared out by occupancy (Kaldi's ``GetSplitTargets``, power 0.2).
* :class:`AlignGraph` -- the left-to-right state graph of one utterance: each state has at most
  :data:`MAX_PRED` predecessors (itself, the previous state, a skip inside a phone, a skip over an
  optional silence block), so Viterbi's recursion is a gather + max over a ``(S, K)`` array.
* :func:`viterbi_batch` -- Viterbi forced alignment of many utterances at once: their graphs are
  concatenated into one state vector and the DP runs once over frames, ``delta_t(j) = b_j(o_t) +
  max_k [delta_{t-1}(pred_k(j)) + log a_{pred_k(j), j}]`` (Rabiner 1989, eq. 33a-b), with
  vectorised backtracking.

Scores are natural-log; ``-inf`` marks an impossible transition or start/end state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

#: Predecessor slots per state: 0 self-loop, 1 previous state, 2 skip inside a phone, 3 skip over an optional block.
MAX_PRED = 4
NEG_INF = -np.inf
_LOG_2PI = math.log(2.0 * math.pi)
#: log-likelihood offset of padding components (finite, so that the matrix product has no inf - inf).
_PAD_LOGLIK = -1e30


# ============================================================================================ GMMs
class DiagGmmSet:
    """``P`` diagonal-covariance GMMs of up to ``M`` components each over ``D``-dim features.

    Attributes:
        means: float64 ``(P, M, D)``.
        vars: float64 ``(P, M, D)`` (variances, already floored).
        log_weights: float64 ``(P, M)``; ``-inf`` for unused (padding) components.

    ``log p(x | pdf p) = logsumexp_m [log w_pm + log N(x; mu_pm, diag(var_pm))]``.
    """

    def __init__(self, means: np.ndarray, vars: np.ndarray, log_weights: np.ndarray):
        self.means = np.asarray(means, dtype=np.float64)
        self.vars = np.asarray(vars, dtype=np.float64)
        self.log_weights = np.asarray(log_weights, dtype=np.float64)
        if self.means.ndim != 3 or self.vars.shape != self.means.shape or \
                self.log_weights.shape != self.means.shape[:2]:
            raise ValueError(f"GMM arrays disagree: means {self.means.shape}, vars {self.vars.shape}, "
                             f"log_weights {self.log_weights.shape}")
        self._cache: dict | None = None

    @classmethod
    def single(cls, num_pdfs: int, mean: np.ndarray, var: np.ndarray) -> "DiagGmmSet":
        """``num_pdfs`` one-component GMMs all equal to ``N(mean, diag(var))`` (Kaldi's ``gmm-init-mono``)."""
        mean = np.asarray(mean, dtype=np.float64)
        var = np.asarray(var, dtype=np.float64)
        return cls(np.tile(mean, (num_pdfs, 1, 1)), np.tile(var, (num_pdfs, 1, 1)), np.zeros((num_pdfs, 1)))

    @property
    def num_pdfs(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[2]

    def num_components(self) -> np.ndarray:
        """Used components per pdf, int ``(P,)``."""
        return np.isfinite(self.log_weights).sum(axis=1)

    def _precompute(self) -> dict:
        if self._cache is None:
            used = np.isfinite(self.log_weights)
            inv = 1.0 / self.vars
            const = self.log_weights - 0.5 * (self.dim * _LOG_2PI + np.log(self.vars).sum(-1)
                                              + (self.means ** 2 * inv).sum(-1))
            const = np.where(used, const, _PAD_LOGLIK)
            # log N(x) + log w = [x^2, x, 1] . [-0.5 / var, mu / var, const]: one matrix product
            w = np.concatenate([-0.5 * inv, self.means * inv, const[..., None]], axis=-1)
            self._cache = {"w": torch.from_numpy(w.astype(np.float32))}
        return self._cache

    def log_likelihood(self, x: np.ndarray, pdfs: np.ndarray | None = None,
                       block: int = 8192) -> np.ndarray:
        """Per-frame log-likelihoods under the GMMs ``pdfs``.

        Computed in float32 (torch), ``block`` frames at a time.

        Args:
            x: ``(T, D)`` features.
            pdfs: int ``(Q,)`` pdf indices; ``None`` = all ``P``.

        Returns:
            float32 ``(T, Q)``: ``log p(x_t | pdf q)``.
        """
        w = self._precompute()["w"]
        if pdfs is not None:
            w = w[torch.from_numpy(np.asarray(pdfs, dtype=np.int64))]
        q, m = w.shape[0], w.shape[1]
        wt = w.reshape(q * m, -1).T.contiguous()
        xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        out = torch.empty(len(xt), q)
        for b in range(0, len(xt), block):
            xb = xt[b:b + block]
            xa = torch.cat([xb * xb, xb, torch.ones(len(xb), 1)], dim=1)
            out[b:b + block] = torch.logsumexp((xa @ wt).view(len(xb), q, m), dim=2)
        return out.numpy()

    def component_log_likelihood(self, x: np.ndarray, pdf: int) -> np.ndarray:
        """float64 ``(T, M)``: ``log w_m + log N(x_t; mu_m, var_m)`` of pdf ``pdf``'s components
        (``-inf`` for unused ones)."""
        x = np.asarray(x, dtype=np.float64)
        used = np.isfinite(self.log_weights[pdf])
        inv = 1.0 / self.vars[pdf]
        const = self.log_weights[pdf] - 0.5 * (self.dim * _LOG_2PI + np.log(self.vars[pdf]).sum(-1)
                                               + (self.means[pdf] ** 2 * inv).sum(-1))
        ll = (x * x) @ (-0.5 * inv).T + x @ (self.means[pdf] * inv).T + np.where(used, const, 0.0)[None]
        return np.where(used[None], ll, NEG_INF)

    # ------------------------------------------------------------------ estimation
    def em_update(self, frames_of_pdf: list, var_floor: np.ndarray,
                  min_count: float = 3.0) -> np.ndarray:
        """One EM step of every GMM from the frames aligned to it (Viterbi training).

        Per pdf, the component posteriors ``gamma_tm`` under the current parameters give
        ``N_m = sum_t gamma_tm``, ``w_m = N_m / sum N``, ``mu_m = sum_t gamma_tm x_t / N_m``,
        ``var_m = sum_t gamma_tm x_t^2 / N_m - mu_m^2`` floored at ``var_floor`` (Bishop 2006,
        eqs. 9.24-9.26). A component with ``N_m < min_count`` is removed (unless it is the pdf's
        last one); a pdf with no frames keeps its parameters.

        Args:
            frames_of_pdf: for each pdf, ``(n_p, D)`` frames, or a pair ``(frames, weights)`` with
                ``weights`` ``(n_p,)`` the state posteriors (Baum-Welch), or ``None``.
            var_floor: ``(D,)`` variance floor (e.g. 0.01 x the global variance, as Kaldi).
            min_count: minimum occupancy of a component, in frames.

        Returns:
            float64 ``(P,)``: the occupancy (frame count) of each pdf.
        """
        P, M, D = self.means.shape
        occ = np.zeros(P)
        for p, x in enumerate(frames_of_pdf):
            if x is None:
                continue
            x, wt = x if isinstance(x, tuple) else (x, None)
            if len(x) == 0:
                continue
            x = np.asarray(x, dtype=np.float64)
            occ[p] = len(x) if wt is None else float(np.sum(wt))
            lc = self.component_log_likelihood(x, p)
            gamma = np.exp(lc - _logsumexp(lc, axis=1)[:, None])  # (n, M); 0 for unused comps
            if wt is not None:
                gamma *= np.asarray(wt, dtype=np.float64)[:, None]
            n_m = gamma.sum(0)
            used = np.isfinite(self.log_weights[p])
            keep = used & (n_m >= min_count)
            if not keep.any():  # keep the most occupied component
                keep = np.zeros(M, dtype=bool)
                keep[int(np.argmax(np.where(used, n_m, -1.0)))] = True
            sx = gamma.T @ x
            sxx = gamma.T @ (x * x)
            with np.errstate(divide="ignore", invalid="ignore"):
                mu = sx / n_m[:, None]
                var = sxx / n_m[:, None] - mu ** 2
            # re-normalise over the kept components
            tot = n_m[keep].sum()
            self.means[p, keep] = mu[keep]
            self.vars[p, keep] = np.maximum(var[keep], var_floor[None])
            self.log_weights[p] = np.where(keep, np.log(np.maximum(n_m, 1e-300) / tot), NEG_INF)
        self._compact()
        self._cache = None
        return occ

    def split(self, targets: np.ndarray, perturb: float = 0.2, rng: np.random.Generator | None = None) -> None:
        """Split components until pdf ``p`` has ``targets[p]`` of them (never fewer than now).

        The component of largest weight is split into two of half its weight, with means
        ``mu +/- perturb * sigma * r`` (``r`` a random direction per dimension, as Kaldi's
        ``DiagGmm::Split``) and the same variance.
        """
        rng = rng or np.random.default_rng(0)
        cur = self.num_components()
        targets = np.maximum(np.asarray(targets, dtype=int), cur)
        new_m = int(targets.max())
        if new_m > self.means.shape[1]:
            pad = new_m - self.means.shape[1]
            self.means = np.concatenate([self.means, np.zeros((self.num_pdfs, pad, self.dim))], 1)
            self.vars = np.concatenate([self.vars, np.ones((self.num_pdfs, pad, self.dim))], 1)
            self.log_weights = np.concatenate([self.log_weights, np.full((self.num_pdfs, pad), NEG_INF)], 1)
        for p in np.nonzero(targets > cur)[0]:
            for _ in range(int(targets[p] - cur[p])):
                lw = self.log_weights[p]
                big = int(np.argmax(lw))
                slot = int(np.nonzero(~np.isfinite(lw))[0][0])
                r = rng.standard_normal(self.dim) * perturb * np.sqrt(self.vars[p, big])
                self.means[p, slot] = self.means[p, big] + r
                self.means[p, big] = self.means[p, big] - r
                self.vars[p, slot] = self.vars[p, big]
                lw[big] -= math.log(2.0)
                lw[slot] = lw[big]
        self._cache = None

    def _compact(self) -> None:
        """Move used components first and drop all-unused trailing columns."""
        order = np.argsort(~np.isfinite(self.log_weights), axis=1, kind="stable")
        self.means = np.take_along_axis(self.means, order[..., None], 1)
        self.vars = np.take_along_axis(self.vars, order[..., None], 1)
        self.log_weights = np.take_along_axis(self.log_weights, order, 1)
        m = max(1, int(self.num_components().max()))
        self.means, self.vars, self.log_weights = self.means[:, :m], self.vars[:, :m], self.log_weights[:, :m]


def split_targets(occ: np.ndarray, total: int, power: float = 0.2, min_count: float = 20.0) -> np.ndarray:
    """Components per pdf for a total of about ``total``: proportional to ``occ ** power``, at most
    ``occ / min_count`` and at least 1 (Kaldi's ``GetSplitTargets`` in ``gmm-est --mix-up``).

    Args:
        occ: ``(P,)`` occupancies (frames per pdf).
        total: wanted total number of Gaussians.
        power: occupancy exponent.
        min_count: minimum frames per Gaussian.

    Returns:
        int ``(P,)``.
    """
    occ = np.asarray(occ, dtype=np.float64)
    share = occ ** power
    if share.sum() <= 0:
        return np.ones(len(occ), dtype=int)
    t = np.floor(total * share / share.sum() + 0.5)
    t = np.minimum(t, np.floor(occ / min_count))
    return np.maximum(t, 1).astype(int)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


# =========================================================================================== graphs
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


# ================================================================================ state tying
def _gauss_loglik(n: np.ndarray, sx: np.ndarray, sxx: np.ndarray, var_floor: np.ndarray) -> np.ndarray:
    """Log-likelihood of the frames behind statistics ``(n, sum x, sum x^2)`` under their own
    ML diagonal Gaussian: ``-n/2 (D (1 + log 2 pi) + sum_d log var_d)``; ``(...,)`` from ``(...,)``,
    ``(..., D)``, ``(..., D)``."""
    nn = np.maximum(n, 1e-10)[..., None]
    var = np.maximum(sxx / nn - (sx / nn) ** 2, var_floor)
    return -0.5 * n * (sx.shape[-1] * (1.0 + _LOG_2PI) + np.log(var).sum(-1))


def phone_questions(phone_means: np.ndarray) -> list[np.ndarray]:
    """Context questions from a top-down-built phone hierarchy, as Kaldi's ``cluster-phones``: every
    node of an agglomerative (Ward) clustering of the phones' mean vectors is a set.

    Args:
        phone_means: ``(N, D)`` one vector per phone (e.g. its monophone state means, concatenated).

    Returns:
        boolean ``(N + 1,)`` masks over the phones plus the utterance edge (index ``N``): every cluster,
        every single phone and the edge alone.
    """
    from scipy.cluster.hierarchy import linkage

    N = len(phone_means)
    sets: list[set[int]] = [{i} for i in range(N)]
    if N > 1:
        Z = linkage(np.asarray(phone_means, dtype=np.float64), method="ward")
        members = [{i} for i in range(N)]
        for a, b, _, _ in Z:
            members.append(members[int(a)] | members[int(b)])
        sets += members[N:-1]
    sets.append({N})
    out = []
    for s in sets:
        m = np.zeros(N + 1, dtype=bool)
        m[list(s)] = True
        out.append(m)
    return out


def build_context_tree(ctx: np.ndarray, n: np.ndarray, sx: np.ndarray, sxx: np.ndarray,
                       num_phones: int, num_states: np.ndarray, questions: list[np.ndarray],
                       max_leaves: int, min_count: float, var_floor: np.ndarray) -> np.ndarray:
    """Decision-tree state tying of triphone states (Young, Odell & Woodland 1994; Kaldi's
    ``build-tree``): one tree per (central phone, HMM state), split greedily, best gain first, by
    the question about the left or right phone that most increases the likelihood of single
    diagonal Gaussians, until ``max_leaves`` leaves in all or no split leaves both sides with
    ``min_count`` frames.

    Args:
        ctx: int ``(K, 4)`` observed contexts ``(left, central, right, state)``; ``left``/``right``
            are phone ids or ``num_phones`` for the utterance edge.
        n: ``(K,)`` frames of each context; ``sx``, ``sxx``: ``(K, D)`` their sums of ``x`` and ``x^2``.
        num_phones: ``N``.
        num_states: int ``(N,)`` HMM states of each phone.
        questions: boolean ``(N + 1,)`` phone sets (:func:`phone_questions`).
        max_leaves: most leaves (pdfs) in total; at least one per (phone, state).
        min_count: fewest frames in a leaf.
        var_floor: ``(D,)`` variance floor of the Gaussians.

    Returns:
        int ``(N + 1, N, N + 1, max(num_states))`` pdf of every context (seen or not), leaves
        numbered ``0..L-1``; ``-1`` for states a phone does not have.
    """
    import heapq

    N, E = num_phones, num_phones + 1
    S = int(np.max(num_states))
    Q = np.array(questions, dtype=bool)  # (nq, E)
    out = np.full((E, N, E, S), -1, dtype=np.int64)
    ctx = np.asarray(ctx, dtype=np.int64)
    # a leaf: (phone, state, mask (E, E) over (left, right), rows of ctx inside)
    leaves: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    heap: list = []

    def best_split(rows: np.ndarray):
        if len(rows) < 2 or n[rows].sum() < 2 * min_count:
            return None
        base = _gauss_loglik(n[rows].sum(), sx[rows].sum(0), sxx[rows].sum(0), var_floor)
        best = None
        for pos in (0, 2):
            Y = Q[:, ctx[rows, pos]].astype(np.float64)  # (nq, m)
            ny, nt = Y @ n[rows], n[rows].sum()
            ok = (ny >= min_count) & (nt - ny >= min_count)
            if not ok.any():
                continue
            sxy, sxxy = Y @ sx[rows], Y @ sxx[rows]
            gain = (_gauss_loglik(ny, sxy, sxxy, var_floor)
                    + _gauss_loglik(nt - ny, sx[rows].sum(0) - sxy, sxx[rows].sum(0) - sxxy, var_floor) - base)
            gain = np.where(ok, gain, -np.inf)
            q = int(np.argmax(gain))
            if best is None or gain[q] > best[0]:
                best = (float(gain[q]), pos, q)
        return best

    def push(leaf_id: int):
        b = best_split(leaves[leaf_id][3])
        if b is not None and b[0] > 0:
            heapq.heappush(heap, (-b[0], leaf_id, b[1], b[2]))

    for p in range(N):
        for s in range(int(num_states[p])):
            rows = np.nonzero((ctx[:, 1] == p) & (ctx[:, 3] == s))[0]
            leaves.append((p, s, np.ones((E, E), dtype=bool), rows))
            push(len(leaves) - 1)
    alive = [True] * len(leaves)
    num_leaves = len(leaves)
    while heap and num_leaves < max_leaves:
        _, lid, pos, q = heapq.heappop(heap)
        p, s, mask, rows = leaves[lid]
        yes_rows = Q[q, ctx[rows, pos]]
        yes_mask = mask & (Q[q][:, None] if pos == 0 else Q[q][None, :])
        alive[lid] = False
        for m, r in ((yes_mask, rows[yes_rows]), (mask & ~yes_mask, rows[~yes_rows])):
            leaves.append((p, s, m, r))
            alive.append(True)
            push(len(leaves) - 1)
        num_leaves += 1
    pdf = 0
    for lid, (p, s, mask, _) in enumerate(leaves):
        if alive[lid]:
            out[:, p, :, s][mask] = pdf
            pdf += 1
    return out
