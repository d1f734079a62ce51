"""Issue 38 case 14: the paired bootstraps of speechkit.scoring.significance refuse what they cannot support
(NotComparable, a ValueError saying why): fewer than 2 paired utterances gives no verdict (one gave a zero-width
interval read as 'beyond noise'); counts must be finite non-negative integers, naming the utterance (0.5 was
truncated to 0, -5 gave a rate of -166.7 %, NaN a numpy error naming nothing); and the pooled-ratio bootstrap
(MCD) refuses a non-finite value naming the utterance, and reproduces tcstar's former arithmetic exactly."""
from __future__ import annotations

import math

import numpy as np
import pytest

from speechkit.scoring.significance import (MIN_PAIRED_UTTS, NotComparable, paired_bootstrap,
                                            paired_ratio_bootstrap)


def test_one_utterance_gives_no_verdict():
    assert MIN_PAIRED_UTTS == 2
    with pytest.raises(NotComparable, match=r"1 paired utterance \(u1\): a bootstrap needs at least 2"):
        paired_bootstrap({"u1": (0, 10)}, {"u1": (5, 10)})
    with pytest.raises(NotComparable, match="at least 2"):
        paired_ratio_bootstrap({"u1": (50.0, 10)}, {"u1": (60.0, 10)})
    r = paired_bootstrap({"u1": (0, 10), "u2": (1, 10)}, {"u1": (5, 10), "u2": (6, 10)}, n_resamples=50)
    assert r.num_utts == 2


@pytest.mark.parametrize("bad, what", [((0.5, 10), "error count 0.5"), ((-5, 3), "error count -5"),
                                       ((math.nan, 3), "error count nan"), ((1, math.inf), "reference length inf"),
                                       ((True, 3), "error count True"), ((1, "3"), "reference length '3'"),
                                       (None, "counts None"), ((1, 2, 3), "counts \\(1, 2, 3\\)")])
def test_counts_must_be_finite_non_negative_integers_naming_the_utterance(bad, what):
    a = {"u1": (1, 3), "u2": (0, 4), "u3": (2, 5)}
    b = {**a, "u2": bad}
    with pytest.raises(NotComparable, match=f"utterance 'u2': B's {what}"):
        paired_bootstrap(a, b)
    with pytest.raises(NotComparable, match=f"utterance 'u2': A's {what}"):
        paired_bootstrap(b, a)


def test_whole_floats_are_counts():
    a = {"u1": (1, 3), "u2": (0, 4)}
    assert paired_bootstrap(a, {"u1": (2.0, 3.0), "u2": (0.0, 4)}, n_resamples=50).rate_b == pytest.approx(2 / 7 * 100)


def test_ratio_bootstrap_refusals_name_the_utterance():
    a = {"u1": (40.0, 8), "u2": (30.0, 6), "u3": (0.0, 0)}
    with pytest.raises(NotComparable, match=r"utterance 'u2': B's value nan is not a finite number"):
        paired_ratio_bootstrap(a, {**a, "u2": (math.nan, 6)})
    with pytest.raises(NotComparable, match=r"scored on different numbers of frames .* 'u1': 8 vs 7"):
        paired_ratio_bootstrap(a, {**a, "u1": (40.0, 7)})
    with pytest.raises(NotComparable, match=r"different utterances: 1 only in A \(e\.g\. u3\)"):
        paired_ratio_bootstrap(a, {"u1": a["u1"], "u2": a["u2"]})
    with pytest.raises(NotComparable, match="weight \\(frames\\) 2.5"):
        paired_ratio_bootstrap(a, {**a, "u3": (0.0, 2.5)})
    with pytest.raises(NotComparable, match="no frame"):
        paired_ratio_bootstrap({"u1": (0.0, 0), "u2": (0.0, 0)}, {"u1": (0.0, 0), "u2": (0.0, 0)})


def test_ratio_bootstrap_is_the_pooled_difference_and_tcstar_former_arithmetic():
    rng = np.random.default_rng(3)
    n = rng.integers(1, 300, size=17).astype(float)
    ma, mb = rng.uniform(4, 8, 17) * n, rng.uniform(4, 8, 17) * n
    a = {f"u{i:02d}": (ma[i], int(n[i])) for i in range(17)}
    b = {f"u{i:02d}": (mb[i], int(n[i])) for i in range(17)}
    res = paired_ratio_bootstrap(a, b, n_resamples=2000, seed=0)
    # the computation make_results.py of egs/tcstar_salad did before it moved here
    idx = np.random.default_rng(0).integers(0, 17, size=(2000, 17))
    d = mb[idx].sum(1) / n[idx].sum(1) - ma[idx].sum(1) / n[idx].sum(1)
    lo, hi = np.percentile(d, [2.5, 97.5])
    assert (res.delta, *res.interval) == (mb.sum() / n.sum() - ma.sum() / n.sum(), lo, hi)
    assert res.ratio_a == pytest.approx(ma.sum() / n.sum()) and res.interval[0] <= res.delta <= res.interval[1]
