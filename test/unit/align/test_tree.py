"""Forced aligner's triphone state tying: phone questions and the decision tree."""
import numpy as np

from speechkit.align.tree import _gauss_loglik, build_context_tree, phone_questions


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
