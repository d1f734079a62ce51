"""speechkit.results.compare: the paired comparison of two systems, checked against cases worked by hand.

Two utterances give four equally likely resamples ({u1, u1}, {u1, u2}, {u2, u1}, {u2, u2}), so the bootstrap
distribution of system minus reference is known exactly: its 2.5 % and 97.5 % quantiles are its two extreme
atoms (each of probability 1/4) and the share of resamples on which the system is better is 3/4."""
from __future__ import annotations

import pytest

from speechkit.results.compare import NotComparable, PairedComparison, compare, t_interval
from speechkit.scoring.significance import paired_t_interval, t_quantile


def test_error_rate_bootstrap_by_hand():
    # reference: 2 + 0 errors over 20 words = 10 %; system: 1 + 0 = 5 %
    ref, sys_ = {"u1": (2, 10), "u2": (0, 10)}, {"u1": (1, 10), "u2": (0, 10)}
    r = compare(ref, sys_, statistic="error_rate", n_resamples=4000, seed=0)
    assert (r.method, r.reference, r.system, r.delta, r.n) == ("bootstrap", 10.0, 5.0, -5.0, 2)
    # resamples: {u1,u1} 20 % vs 10 % (-10 points), mixed -5, {u2,u2} 0 vs 0 (0 points)
    assert r.interval == (-10.0, 0.0)
    assert r.prob_system_better == pytest.approx(0.75, abs=0.02)  # every resample holding u1
    assert r.direction() == 0 and r.n_resamples == 4000 and r.level == 0.95  # the interval holds 0: within noise
    assert compare(ref, sys_, statistic="error_rate", n_resamples=4000, seed=0) == r  # the seed fixes it


def test_pooled_ratio_bootstrap_by_hand():
    # MCD as (dB summed over frames, frames): reference (10 + 30) / 4 = 10 dB, system (8 + 30) / 4 = 9.5 dB
    ref, sys_ = {"u1": (10.0, 2), "u2": (30.0, 2)}, {"u1": (8.0, 2), "u2": (30.0, 2)}
    r = compare(ref, sys_, statistic="pooled_ratio", n_resamples=4000, seed=1)
    assert (r.reference, r.system, r.delta, r.prob_system_better) == (10.0, 9.5, -0.5, None)
    assert r.interval == pytest.approx((-1.0, 0.0))  # {u1,u1}: 5 vs 4 dB; {u2,u2}: 15 vs 15


def test_t_interval_by_hand():
    # mean 0.025, sd 0.15 / sqrt(2) (n - 1 in the denominator), t(1) = 12.706: half-width 12.706 * 0.15 / 2
    r = t_interval([0.1, -0.05])
    assert r.method == "t" and r.n == 2 and r.delta == pytest.approx(0.025)
    assert r.interval == pytest.approx((0.025 - 0.95295, 0.025 + 0.95295), abs=1e-9)
    # three: mean 0.26667, sd 0.076376, t(2) = 4.303
    lo, hi = t_interval([0.2, 0.35, 0.25]).interval
    assert lo == pytest.approx(0.266667 - 4.303 * 0.0763763 / 3 ** 0.5, abs=1e-6) and hi > lo
    assert t_interval([0.6, 0.6]).interval == (0.6, 0.6) and t_interval([0.6, 0.6]).direction() == 1
    one = t_interval([-0.3])
    assert one.interval is None and one.delta == -0.3 and one.direction() == 0  # no spread to estimate


def test_t_quantiles_are_the_printed_tables():
    """The recipes' pages were computed with a table of t(0.975) for 1..10 degrees of freedom; past 10 it used
    1.96, the normal quantile (too narrow an interval): the quantiles are now t's at every df."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
    assert {df: t_quantile(df) for df in table} == table
    assert t_quantile(11) == 2.201 and t_quantile(30) == 2.042 and t_quantile(4, 0.9) == 2.132
    d = [0.1 * k for k in range(12)]  # df 11
    half = paired_t_interval(d).interval[1] - paired_t_interval(d).mean
    assert half == pytest.approx(2.201 * 0.360555 / 12 ** 0.5, rel=1e-5)


def test_refusals_say_why():
    with pytest.raises(NotComparable, match="different utterances: 1 only in B"):
        compare({"u1": (1, 5), "u2": (0, 5)}, {"u1": (1, 5), "u2": (0, 5), "u3": (0, 5)}, statistic="error_rate")
    with pytest.raises(NotComparable, match="at least 2"):
        compare({"u1": (1.0, 5)}, {"u1": (2.0, 5)}, statistic="pooled_ratio")
    with pytest.raises(ValueError, match="statistic must be one of error_rate, pooled_ratio, got 'wer'"):
        compare({}, {}, statistic="wer")
    with pytest.raises(NotComparable, match="no paired difference"):
        t_interval([])
    with pytest.raises(NotComparable, match="difference 2 of 2 is nan, not a finite number"):
        t_interval([0.1, float("nan")])
    with pytest.raises(ValueError, match="level must be in"):
        t_interval([0.1, 0.2], level=1.5)


def test_direction():
    c = PairedComparison("bootstrap", -1.0, (-2.0, -0.5), 0.95, 10)
    assert c.direction() == -1
    assert PairedComparison("t", 1.0, (0.5, 2.0), 0.95, 3).direction() == 1
    assert PairedComparison("t", 0.0, (0.0, 0.0), 0.95, 3).direction() == 0
