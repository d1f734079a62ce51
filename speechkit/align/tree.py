"""Decision-tree state tying of triphones (Kaldi's ``cluster-phones`` + ``build-tree``): context
questions from a clustering of the phones, one tree per (phone, HMM state) grown by likelihood gain."""
from __future__ import annotations

import heapq

import numpy as np

from speechkit.align.gmm import _LOG_2PI

# scipy is imported where used (heavy): only training's phone clustering needs it.


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
