"""speechkit.scoring.significance: per_utt counts round trip through speechkit-score-wer's writer,
and the paired bootstrap against an exact enumeration of every resample of a 4-utterance set."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from speechkit.scoring.significance import paired_bootstrap, read_per_utt_counts
from speechkit.scoring.wer import score, write_per_utt


def test_per_utt_counts_round_trip(tmp_path):
    refs = {"u1": "a b c d", "u2": "e f", "u3": "g h i"}
    hyps = {"u1": "a x c", "u2": "e f y", "u3": ""}
    scored = score(refs, hyps, mode="all")
    write_per_utt(tmp_path / "per_utt", scored)
    counts = read_per_utt_counts(tmp_path / "per_utt")
    # hand-worked: u1 one sub + one del, u2 one ins, u3 three dels
    assert counts == {"u1": (2, 4), "u2": (1, 2), "u3": (3, 3)}
    assert sum(e for e, _ in counts.values()) == scored.total.errors
    assert sum(n for _, n in counts.values()) == scored.total.num_words


def test_malformed_line_is_named(tmp_path):
    p = tmp_path / "per_utt"
    p.write_text("u1 ref a b\nu1 #csid 1 0 0 x\n")
    with pytest.raises(ValueError, match=r"per_utt:2: expected"):
        read_per_utt_counts(p)
    p.write_text("u1 #csid 1 0 0 0\nu1 #csid 1 0 0 0\n")
    with pytest.raises(ValueError, match=r"per_utt:2: utterance 'u1' listed twice"):
        read_per_utt_counts(p)


def test_against_exact_enumeration():
    # 4 utterances: every one of the 4^4 ordered resamples is equally likely
    a = {"u1": (2, 10), "u2": (0, 5), "u3": (4, 8), "u4": (1, 7)}
    b = {"u1": (1, 10), "u2": (1, 5), "u3": (2, 8), "u4": (1, 7)}
    utts = sorted(a)
    deltas, better = [], 0
    for draw in itertools.product(utts, repeat=4):
        r = sum(a[u][1] for u in draw)
        sa, sb = sum(a[u][0] for u in draw), sum(b[u][0] for u in draw)
        deltas.append(100.0 * (sb - sa) / r)
        better += sb < sa
    exact_p = better / 4 ** 4
    res = paired_bootstrap(a, b, n_resamples=40000, seed=1)
    assert res.rate_a == pytest.approx(100 * 7 / 30) and res.rate_b == pytest.approx(100 * 5 / 30)
    assert res.delta == pytest.approx(res.rate_b - res.rate_a)
    assert res.prob_b_better == pytest.approx(exact_p, abs=0.01)
    # the percentile interval against the exact distribution's quantiles (a discrete distribution:
    # compare the coverage of the reported interval under the exact distribution)
    d = np.array(deltas)
    lo, hi = res.interval
    assert np.mean((d >= lo - 1e-9) & (d <= hi + 1e-9)) >= 0.95
    assert np.mean(d < lo - 1e-9) <= 0.025 + 0.01 and np.mean(d > hi + 1e-9) <= 0.025 + 0.01
    # the same seed, the same answer; the chunking does not change it
    assert paired_bootstrap(a, b, n_resamples=500, seed=3) == paired_bootstrap(a, b, n_resamples=500, seed=3,
                                                                               chunk=7)


def test_identical_systems_and_clear_differences():
    a = {f"u{i}": (i % 3, 10) for i in range(50)}
    same = paired_bootstrap(a, dict(a), n_resamples=200)
    assert same.delta == 0.0 and same.interval == (0.0, 0.0) and same.prob_b_better == 0.0
    assert same.verdict() == "within noise"
    worse = paired_bootstrap(a, {u: (e + 2, n) for u, (e, n) in a.items()}, n_resamples=200)
    assert worse.delta == pytest.approx(20.0) and worse.interval == pytest.approx((20.0, 20.0))
    assert worse.verdict() == "A better"
    better = paired_bootstrap(a, {u: (0, n) for u, (e, n) in a.items()}, n_resamples=200)
    assert better.verdict() == "B better" and better.prob_b_better == pytest.approx(1.0)


def test_mismatched_inputs_are_refused():
    a = {"u1": (1, 5), "u2": (0, 3)}
    with pytest.raises(ValueError, match=r"different utterances: 1 only in A \(e\.g\. u2\)"):
        paired_bootstrap(a, {"u1": (0, 5)})
    with pytest.raises(ValueError, match=r"different reference lengths.*'u2': 3 vs 4"):
        paired_bootstrap(a, {"u1": (0, 5), "u2": (0, 4)})
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap(a, a, level=1.0)
    with pytest.raises(ValueError, match="no utterance"):
        paired_bootstrap({}, {})
