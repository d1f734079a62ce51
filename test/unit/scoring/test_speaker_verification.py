"""Speaker verifier (multinomial logistic regression) and the RA / FG scores of Hemati & Borth (2021)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from speechkit.scoring.speaker_verification import (
    SpeakerVerifier, accuracy_matrix, aggregate_runs, continual_scores, forgetting, ra_fg_curves, retained_accuracy,
)

NAN = math.nan
#: Hand-worked case: 3 speakers, 3 episodes.
A3 = np.array([[0.9, NAN, NAN],
               [0.6, 1.0, NAN],
               [0.3, 0.8, 0.7]])


def _clusters(n_per=20, speakers=("s1", "s2", "s3"), dim=16, spread=0.3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(speakers), dim))
    x = np.concatenate([c + spread * rng.standard_normal((n_per, dim)) for c in centres])
    y = [s for s in speakers for _ in range(n_per)]
    return x, y, centres


# ----------------------------------------------------------------------------- verifier
def test_verifier_is_multinomial_logistic_regression():
    x, y, _ = _clusters()
    v = SpeakerVerifier(C=1.0, standardize=False).fit(x, y)
    lr = v._clf
    # softmax(W x + b) by hand = predict_proba (multinomial, not one-vs-rest)
    z = x @ lr.coef_.T + lr.intercept_
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(v.predict_proba(x), p, atol=1e-10)
    assert lr.coef_.shape == (3, 16) and v.speakers == ["s1", "s2", "s3"]
    assert v.accuracy(x, y) == 1.0


def test_accuracy_per_speaker_hand_case():
    x, y, c = _clusters()
    v = SpeakerVerifier().fit(x, y)
    # two "synthesized" utterances of s1 sound like s1, one like s2; s3's one sounds like s3
    test = np.stack([c[0], c[0] + 0.01, c[1], c[2]])
    acc = v.accuracy_per_speaker(test, ["s1", "s1", "s1", "s3"])
    assert acc == pytest.approx({"s1": 2 / 3, "s3": 1.0})
    assert list(v.predict(test)) == ["s1", "s1", "s2", "s3"]
    assert v.accuracy(test, ["s1", "s1", "s1", "s3"]) == 0.75


def test_unknown_speaker_and_bad_input():
    x, y, _ = _clusters()
    v = SpeakerVerifier().fit(x, y)
    with pytest.raises(ValueError, match="speaker 's9' was never seen by the verifier"):
        v.accuracy_per_speaker(x[:1], ["s9"])
    with pytest.raises(ValueError, match="3 embeddings but 2 speaker labels"):
        v.fit(x[:3], y[:2])
    with pytest.raises(ValueError, match="trained on 16"):
        v.predict(np.zeros((1, 8)))
    with pytest.raises(RuntimeError, match="fit"):
        SpeakerVerifier().predict(x)
    with pytest.raises(ValueError, match="NaN"):
        v.predict(np.full((1, 16), np.nan))


def test_single_speaker_episode():
    x, y, _ = _clusters(speakers=("only",))
    v = SpeakerVerifier().fit(x, y)
    assert list(v.predict(x[:2])) == ["only", "only"]
    assert v.accuracy_per_speaker(x, y) == {"only": 1.0}
    assert v.predict_proba(x[:2]).shape == (2, 1)


# ----------------------------------------------------------------------------- RA / FG
def test_ra_fg_hand_worked_3x3():
    # RA_1 = 0.9; RA_2 = (0.6 + 1.0) / 2; RA_3 = (0.3 + 0.8 + 0.7) / 3
    assert retained_accuracy(A3, 1) == pytest.approx(0.9)
    assert retained_accuracy(A3, 2) == pytest.approx(0.8)
    assert retained_accuracy(A3) == pytest.approx(0.6)
    # FG_2 = 0.9 - 0.6; FG_3 = ((max(0.9, 0.6) - 0.3) + (max(1.0) - 0.8)) / 2 = (0.6 + 0.2) / 2
    assert math.isnan(forgetting(A3, 1))
    assert forgetting(A3, 2) == pytest.approx(0.3)
    assert forgetting(A3) == pytest.approx(0.4)
    ra, fg = ra_fg_curves(A3)
    np.testing.assert_allclose(ra, [0.9, 0.8, 0.6])
    np.testing.assert_allclose(fg, [NAN, 0.3, 0.4])


def test_forgetting_max_only_over_episodes_since_learnt():
    # speaker 2's accuracy rises after its own episode: the max includes that later episode,
    # and nothing before it (speaker 2 was unknown in episode 1: eq. 2 as printed takes the max
    # over l in 1..T-1, which only exists from l = i on)
    A = np.array([[1.0, NAN, NAN], [1.0, 0.5, NAN], [1.0, 0.9, 0.8], [0.0, 0.6, 0.8]])
    A = np.concatenate([A, np.full((4, 1), NAN)], axis=1)
    A[3, 3] = 1.0
    # FG_4 = ((1 - 0) + (0.9 - 0.6) + (0.8 - 0.8)) / 3
    assert forgetting(A, 4) == pytest.approx(1.3 / 3)
    # backward transfer: accuracy up from 0.5 to 0.9 gives a negative term
    assert forgetting(A, 3) == pytest.approx(((1.0 - 1.0) + (0.5 - 0.9)) / 2)


def test_accuracy_matrix_from_episodes():
    per = [{"a": 0.9, "pretrain-spk": 1.0}, {"a": 0.6, "b": 1.0}, {"a": 0.3, "b": 0.8, "c": 0.7}]
    np.testing.assert_allclose(accuracy_matrix(per, ["a", "b", "c"]), A3)
    partial = accuracy_matrix(per[:2], ["a", "b", "c"])
    assert partial.shape == (3, 3) and np.isnan(partial[2]).all()
    assert retained_accuracy(partial[:2]) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="episode 2: no accuracy for speaker 'b'"):
        accuracy_matrix([{"a": 1.0}, {"a": 1.0}], ["a", "b"])
    with pytest.raises(ValueError, match="NaN on or below the diagonal"):
        retained_accuracy(np.array([[NAN]]))
    with pytest.raises(ValueError, match="T must be in 1..3"):
        forgetting(A3, 4)


def test_aggregate_runs_and_json():
    runs = [np.array([NAN, 0.2, 0.4]), np.array([NAN, 0.4, 0.4]), np.array([NAN, 0.3, 0.1])]
    agg = aggregate_runs(runs)
    assert agg["n"] == 3
    np.testing.assert_allclose(agg["mean"], [NAN, 0.3, 0.3])
    np.testing.assert_allclose(agg["std"], [NAN, 0.1, np.std([0.4, 0.4, 0.1], ddof=1)])
    np.testing.assert_allclose(agg["min"][1:], [0.2, 0.1])
    assert aggregate_runs([np.array([0.5, 0.7])])["std"].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="different lengths"):
        aggregate_runs([np.zeros(2), np.zeros(3)])
    s = continual_scores(A3, ["a", "b", "c"])
    s = json.loads(json.dumps(s))  # valid JSON: NaN written as null
    assert s["accuracy_matrix"][0] == [0.9, None, None] and s["forgetting"][0] is None
    assert s["final_ra"] == pytest.approx(0.6) and s["final_fg"] == pytest.approx(0.4)
