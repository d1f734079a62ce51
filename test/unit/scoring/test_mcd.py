"""MCD / F0 RMSE / V-UV scoring: hand-worked cases, an independent per-frame reference, masking, errors."""
from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from speechkit.features.world import WorldLayout
from speechkit.scoring.mcd import (
    MCD_CONSTANT, frame_mcd_db, mcd_db, score_utterance, score_world, silence_keep_mask, voiced_f0_hz, vuv_line,
)
from speechkit.scoring.plots import plot_f0_histograms
from speechkit.utils.fileio import DataError

LAY = WorldLayout(mcep_dim=4, num_bap=1)  # columns: c0 c1 c2 c3 | lf0 | vuv | bap -> 7


def world(mcep, f0, vuv, bap=None):
    """A (T, 7) WORLD matrix from mcep (T, 4), F0 in Hz (T,) and vuv (T,)."""
    mcep = np.asarray(mcep, float)
    t = len(mcep)
    bap = np.zeros(t) if bap is None else np.asarray(bap, float)
    return np.column_stack([mcep, np.log(np.asarray(f0, float)), np.asarray(vuv, float), bap])


def random_pair(rng, t):
    ref = world(rng.normal(size=(t, 4)), rng.uniform(80, 300, t), rng.integers(0, 2, t), rng.normal(size=t))
    hyp = world(rng.normal(size=(t, 4)), rng.uniform(80, 300, t), rng.integers(0, 2, t), rng.normal(size=t))
    return ref, hyp


def reference_mcd(ref, hyp, include_c0):
    """Written independently: a loop over frames and coefficients (as musa_tts' eval.MCD)."""
    total = 0.0
    for t in range(ref.shape[0]):
        acc = 0.0
        for d in range(0 if include_c0 else 1, ref.shape[1]):
            acc += (ref[t, d] - hyp[t, d]) ** 2
        total += math.sqrt(acc)
    return 10.0 / math.log(10.0) * math.sqrt(2.0) * total / ref.shape[0]


def test_constant():
    assert MCD_CONSTANT == pytest.approx(6.141851463713754, rel=1e-15)
    assert MCD_CONSTANT == pytest.approx(10 * 2 ** 0.5 / math.log(10), rel=1e-15)


def test_two_frames_known_distance():
    ref = np.zeros((2, 3))
    hyp = np.array([[12.0, 3.0, 4.0],   # distance 5 without c0, 13 with c0
                    [0.0, 0.0, 0.0]])   # identical
    assert mcd_db(ref, hyp) == pytest.approx(MCD_CONSTANT * 5 / 2, rel=1e-14)  # 15.3546... dB
    assert mcd_db(ref, hyp, include_c0=True) == pytest.approx(MCD_CONSTANT * 13 / 2, rel=1e-14)
    np.testing.assert_allclose(frame_mcd_db(ref, hyp), [MCD_CONSTANT * 5, 0.0], rtol=1e-14)
    assert mcd_db(ref, ref) == 0.0


def test_mcd_matches_per_frame_loop():
    rng = np.random.default_rng(0)
    ref, hyp = rng.normal(size=(37, 25)), rng.normal(size=(37, 25))
    for c0 in (False, True):
        assert mcd_db(ref, hyp, include_c0=c0) == pytest.approx(reference_mcd(ref, hyp, c0), rel=1e-12)
    with pytest.raises(ValueError, match="one shape"):
        mcd_db(ref, hyp[:-1])
    with pytest.raises(ValueError, match="no frames"):
        mcd_db(ref[:0], hyp[:0])


def test_f0_rmse_and_vuv_by_hand():
    mcep = np.zeros((4, 4))
    ref = world(mcep, [100, 200, 150, 200], [1, 1, 0, 1])
    hyp = world(mcep, [110, 300, 150, 180], [1, 0, 0, 1])
    s = score_utterance(ref, hyp, LAY, utt="u")
    # voiced in both: frames 0 and 3, errors 10 and 20 Hz; frame 1 (200 vs 300) is not counted
    assert s.n_voiced_both == 2
    assert s.f0_rmse_hz == pytest.approx(math.sqrt((10 ** 2 + 20 ** 2) / 2), rel=1e-12)
    assert s.vuv_accuracy == pytest.approx(75.0)  # 3 of 4 decisions agree
    assert s.mcd_db == 0.0
    # vuv thresholded at 0.5 (e.g. a network's sigmoid output)
    soft = hyp.copy()
    soft[:, LAY.vuv] = [0.9, 0.4, 0.1, 0.51]
    assert score_utterance(ref, soft, LAY).vuv_accuracy == pytest.approx(75.0)


def test_corpus_pools_frames_and_matches_reference():
    rng = np.random.default_rng(1)
    ref, hyp = {}, {}
    for k, t in enumerate([5, 40, 13]):
        ref[f"u{k}"], hyp[f"u{k}"] = random_pair(rng, t)
    res = score_world(ref, hyp, LAY)
    r = np.concatenate(list(ref.values()))
    h = np.concatenate([hyp[u] for u in ref])
    assert res.n_frames == 58 and len(res.utts) == 3
    assert res.mcd_db == pytest.approx(reference_mcd(r[:, :4], h[:, :4], False), rel=1e-12)
    assert res.mcd_with_c0_db == pytest.approx(reference_mcd(r[:, :4], h[:, :4], True), rel=1e-12)
    per_utt = [reference_mcd(ref[u][:, :4], hyp[u][:, :4], False) for u in ref]
    assert res.mcd_db_utt_mean == pytest.approx(np.mean(per_utt), rel=1e-12)
    assert res.mcd_db_utt_mean != pytest.approx(res.mcd_db)  # pooled != mean of utterances
    both = (r[:, 5] > 0.5) & (h[:, 5] > 0.5)
    errs = [math.exp(r[i, 4]) - math.exp(h[i, 4]) for i in range(len(r)) if both[i]]
    assert res.n_voiced_both == len(errs)
    assert res.f0_rmse_hz == pytest.approx(math.sqrt(sum(e * e for e in errs) / len(errs)), rel=1e-12)
    assert res.vuv_accuracy == pytest.approx(100 * np.mean((r[:, 5] > 0.5) == (h[:, 5] > 0.5)))
    d = res.to_dict()
    assert d["mcd_db"] == res.mcd_db and d["n_frames"] == 58 and len(d["utterances"]) == 3
    assert res.summary() == (f"MCD {res.mcd_db:.2f} dB (with c0 {res.mcd_with_c0_db:.2f})  "
                             f"F0 RMSE {res.f0_rmse_hz:.2f} Hz  V/UV {res.vuv_accuracy:.1f} %")


def test_silence_keep_mask_by_hand():
    segs = [(0.0, 0.03, "sil"), (0.03, 0.05, "a"), (0.05, 0.07, "sil"), (0.07, 0.1, "b")]
    # frames at 0, .01, ..., .10 s (the last one sits on the end: it belongs to the last segment)
    keep = silence_keep_mask(segs, 11, 0.01)
    assert keep.tolist() == [False] * 3 + [True] * 2 + [False] * 2 + [True] * 4
    assert silence_keep_mask(segs, 11, 0.01, silence_phones=("sil", "b")).sum() == 2
    with pytest.raises(DataError, match="u7: phone alignment ends at 0.100 s"):
        silence_keep_mask(segs, 40, 0.01, utt="u7")
    with pytest.raises(DataError, match="not in time order"):
        silence_keep_mask(segs[::-1], 11, 0.01)


def test_masking_leaves_frames_out_not_zeroes_them():
    rng = np.random.default_rng(2)
    ref, hyp = random_pair(rng, 21)
    shift = 0.005
    ali = {"u": [(0.0, 0.02, "sil"), (0.02, 0.06, "a"), (0.06, 0.075, "sp"), (0.075, 0.1, "b")]}
    keep = np.ones(21, bool)
    keep[0:4] = False      # t * 5 ms in [0, 20) ms
    keep[12:15] = False    # [60, 75) ms
    res = score_world({"u": ref}, {"u": hyp}, LAY, alignments=ali, frame_shift=shift, silence_phones=("sil", "sp"))
    sliced = score_world({"u": ref[keep]}, {"u": hyp[keep]}, LAY)
    assert res.n_frames == 14 and res.n_masked == 7
    for attr in ("mcd_db", "mcd_with_c0_db", "f0_rmse_hz", "vuv_accuracy", "n_voiced_both"):
        assert getattr(res, attr) == pytest.approx(getattr(sliced, attr), rel=1e-12)
    # zeroing (musa_tts) would count the 7 silent frames as perfect and lower the MCD
    zeroed = score_world({"u": ref * keep[:, None]}, {"u": hyp * keep[:, None]}, LAY)
    assert zeroed.mcd_db == pytest.approx(res.mcd_db * 14 / 21, rel=1e-12)
    with pytest.raises(DataError, match="no phone alignment for 'u' \\(1 of the 1"):
        score_world({"u": ref}, {"u": hyp}, LAY, alignments={"v": ali["u"]}, frame_shift=shift)
    with pytest.raises(DataError, match="no frame left to score"):
        score_world({"u": ref}, {"u": hyp}, LAY, alignments=ali, frame_shift=shift,
                    silence_phones=("sil", "sp", "a", "b"))


def test_conventions_by_hand():
    """Four frames worked by hand: frame 0 is silence; speechkit leaves it out, the authors zero it."""
    ref = world(np.zeros((4, 4)), [100, 100, 200, 150], [0, 1, 1, 0])
    hyp = world([[1, 2, 2, 0],      # silence: c0..c3 distance 3, F0 error 200 Hz, both unvoiced
                 [4, 0, 3, 0],      # distance 3 without c0, 5 with c0; voiced in both, F0 error 10 Hz
                 [12, 3, 4, 0],     # 5 without c0, 13 with c0; voiced in REF only, F0 error 30 Hz
                 [0, 0, 0, 0]],     # identical cepstra; unvoiced in both, F0 error 30 Hz
                [300, 110, 170, 180], [0, 1, 0, 0])
    ali = {"u": [(0.0, 0.005, "sil"), (0.005, 0.02, "a")]}   # 5 ms frames at 0, 5, 10, 15 ms
    k = MCD_CONSTANT
    ours = score_world({"u": ref}, {"u": hyp}, LAY, alignments=ali, frame_shift=0.005)
    assert (ours.convention, ours.n_frames, ours.n_masked) == ("speechkit", 3, 1)
    assert ours.mcd_db == pytest.approx(k * (3 + 5 + 0) / 3, rel=1e-12)           # 8.19 dB
    assert ours.mcd_with_c0_db == pytest.approx(k * (5 + 13 + 0) / 3, rel=1e-12)   # 36.85 dB
    assert ours.f0_rmse_hz == pytest.approx(10.0, rel=1e-12)                        # frame 1 only
    assert ours.vuv_accuracy == pytest.approx(200 / 3, rel=1e-12)                   # frames 1 and 3 agree
    auth = score_world({"u": ref}, {"u": hyp}, LAY, alignments=ali, frame_shift=0.005, convention="authors")
    assert auth.convention == "authors" and (auth.n_frames, auth.n_masked) == (3, 1)
    assert auth.mcd_db == pytest.approx(k * (0 + 5 + 13 + 0) / 4, rel=1e-12)       # 27.64 dB: c0 in, 4 frames
    assert auth.mcd_with_c0_db == pytest.approx(ours.mcd_with_c0_db, rel=1e-12)
    assert auth.f0_rmse_hz == pytest.approx(math.sqrt((0 + 10 ** 2 + 30 ** 2 + 30 ** 2) / 4), rel=1e-12)  # 21.79
    assert auth.vuv_accuracy == pytest.approx(75.0, rel=1e-12)                       # silence counts as agreeing
    assert auth.utts[0].mcd_db == pytest.approx(auth.mcd_db, rel=1e-12) == auth.mcd_db_utt_mean
    assert auth.summary() == (f"MCD {k * 4.5:.2f} dB  F0 RMSE 21.79 Hz  V/UV 75.0 %  (authors' convention: "
                              "c0 included, F0 over all frames, silence zeroed)")
    d = auth.to_dict()
    assert d["convention"] == "authors" and "zeroed" in d["convention_definition"]
    assert d["mcd_db"] == auth.mcd_db and ours.to_dict()["convention"] == "speechkit"
    # without masking the silent frame is scored like the others
    plain = score_world({"u": ref}, {"u": hyp}, LAY, convention="authors")
    assert plain.mcd_db == pytest.approx(k * (3 + 5 + 13 + 0) / 4, rel=1e-12)
    assert plain.f0_rmse_hz == pytest.approx(math.sqrt((200 ** 2 + 10 ** 2 + 30 ** 2 + 30 ** 2) / 4), rel=1e-12)
    assert plain.vuv_accuracy == pytest.approx(75.0)
    with pytest.raises(ValueError, match="unknown scoring convention 'paper' \\(known: speechkit, authors\\)"):
        score_world({"u": ref}, {"u": hyp}, LAY, convention="paper")


def test_vuv_figures_by_hand():
    """The four frames of test_conventions_by_hand: REF V/UV 0 1 1 0, HYP 0 1 0 0, frame 0 silence."""
    ref = world(np.zeros((4, 4)), [100, 100, 200, 150], [0, 1, 1, 0])
    hyp = world(np.zeros((4, 4)), [300, 110, 170, 180], [0, 1, 0, 0])
    ali = {"u": [(0.0, 0.005, "sil"), (0.005, 0.02, "a")]}
    ours = score_world({"u": ref}, {"u": hyp}, LAY, alignments=ali, frame_shift=0.005)
    # frames 1-3: REF V V U, HYP V U U -> unvoiced recall 1/1, precision 1/2, voiced recall 1/2
    assert ours.vuv_counts() == {"n": 3, "ref_unvoiced": 1, "ref_voiced": 2, "hyp_unvoiced": 2,
                                 "unvoiced_both": 1, "voiced_both": 1}
    v = ours.vuv_figures()
    assert v["vuv_unvoiced_recall"] == 100.0 and v["vuv_unvoiced_precision"] == 50.0
    assert v["vuv_voiced_recall"] == 50.0 and v["vuv_balanced_accuracy"] == 75.0
    assert v["vuv_majority_baseline"] == pytest.approx(200 / 3) and v["vuv_majority_class"] == "voiced"
    # authors: the zeroed silent frame is unvoiced in both -> 2/2, 2/3, voiced 1/2; 2 V vs 2 U: a tie
    auth = score_world({"u": ref}, {"u": hyp}, LAY, alignments=ali, frame_shift=0.005, convention="authors")
    a = auth.vuv_figures()
    assert auth.vuv_counts()["n"] == 4 and a["vuv_unvoiced_recall"] == 100.0
    assert a["vuv_unvoiced_precision"] == pytest.approx(200 / 3) and a["vuv_balanced_accuracy"] == 75.0
    assert a["vuv_majority_baseline"] == 50.0 and a["vuv_majority_class"] == "voiced"
    d = auth.to_dict()
    assert d["vuv_unvoiced_recall"] == 100.0 and d["vuv_counts"]["hyp_unvoiced"] == 3
    assert d["vuv_accuracy"] == auth.vuv_accuracy == 75.0   # the old figure is unchanged
    line = vuv_line(ours)
    assert line == ("V/UV: unvoiced recall 100.0 % (1 / 1 frames), precision 50.0 % (2 predicted unvoiced), "
                    'balanced accuracy 75.0 %; majority baseline 66.7 % (constant "voiced")')
    # a model that calls every frame voiced: recall 0, precision undefined (null in JSON), balanced 50
    allv = score_world({"u": ref}, {"u": world(np.zeros((4, 4)), [100] * 4, [1] * 4)}, LAY,
                       alignments=ali, frame_shift=0.005)
    f = allv.to_dict()
    assert f["vuv_unvoiced_recall"] == 0.0 and f["vuv_unvoiced_precision"] is None
    assert f["vuv_balanced_accuracy"] == 50.0 and f["vuv_accuracy"] == pytest.approx(f["vuv_majority_baseline"])


@pytest.mark.parametrize("convention", ["speechkit", "authors"])
def test_vuv_figures_brute_force(convention):
    """Recall, precision, balanced accuracy and majority baseline against a frame-by-frame count."""
    rng = np.random.default_rng(11)
    ref, hyp, ali = {}, {}, {}
    for k, t in enumerate([30, 17, 44]):
        r, h = random_pair(rng, t)
        r[:, 5] = rng.random(t) < 0.8          # imbalanced, as outside silence
        h[:, 5] = rng.random(t) < 0.6
        ref[f"u{k}"], hyp[f"u{k}"] = r, h
        cut = 0.005 * rng.integers(1, t - 1)
        ali[f"u{k}"] = [(0.0, cut, "sil"), (cut, 0.005 * t, "a")]
    res = score_world(ref, hyp, LAY, alignments=ali, frame_shift=0.005, convention=convention)
    tp = fp = fn = tn = 0                     # unvoiced = positive
    for u in ref:
        for i in range(len(ref[u])):
            silent = 0.005 * i < ali[u][0][1]
            if silent and convention == "speechkit":
                continue
            ru = silent or not ref[u][i, 5] > 0.5
            hu = silent or not hyp[u][i, 5] > 0.5
            tp += ru and hu
            fp += hu and not ru
            fn += ru and not hu
            tn += not ru and not hu
    n = tp + fp + fn + tn
    v = res.vuv_figures()
    assert v["vuv_unvoiced_recall"] == pytest.approx(100 * tp / (tp + fn), rel=1e-12)
    assert v["vuv_unvoiced_precision"] == pytest.approx(100 * tp / (tp + fp), rel=1e-12)
    assert v["vuv_voiced_recall"] == pytest.approx(100 * tn / (tn + fp), rel=1e-12)
    assert v["vuv_balanced_accuracy"] == pytest.approx(50 * (tp / (tp + fn) + tn / (tn + fp)), rel=1e-12)
    assert v["vuv_majority_baseline"] == pytest.approx(100 * max(tp + fn, tn + fp) / n, rel=1e-12)
    assert res.vuv_accuracy == pytest.approx(100 * (tp + tn) / n, rel=1e-12)
    # the baseline is what a constant decision of the majority class scores under the same convention
    const = {u: hyp[u].copy() for u in hyp}
    for u in const:
        const[u][:, 5] = 1.0 if v["vuv_majority_class"] == "voiced" else 0.0
    base = score_world(ref, const, LAY, alignments=ali, frame_shift=0.005, convention=convention)
    assert base.vuv_accuracy == pytest.approx(v["vuv_majority_baseline"], rel=1e-12)


def test_no_voiced_frame_in_both(caplog):
    mcep = np.zeros((3, 4))
    ref = {"a": world(mcep, [100] * 3, [1, 1, 0]), "b": world(mcep, [100] * 3, [1, 1, 1])}
    hyp = {"a": world(mcep, [120] * 3, [0, 0, 0]), "b": world(mcep, [130] * 3, [1, 0, 0])}
    with caplog.at_level(logging.WARNING):
        res = score_world(ref, hyp, LAY)
    assert res.utts_no_voiced_both == ["a"] and res.f0_rmse_hz == pytest.approx(30.0)
    assert "1 utterances have no frame voiced in both" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        res = score_world({"a": ref["a"]}, {"a": hyp["a"]}, LAY)
    assert math.isnan(res.f0_rmse_hz) and "F0 RMSE is nan" in caplog.text
    assert res.to_dict()["f0_rmse_hz"] is None and "F0 RMSE nan Hz" in res.summary()


def test_errors(caplog):
    rng = np.random.default_rng(3)
    ref, hyp = random_pair(rng, 10)
    with pytest.raises(DataError, match=r"u1: 10 frames in REF but 9 in HYP"):
        score_world({"u1": ref}, {"u1": hyp[:9]}, LAY)
    with pytest.raises(DataError, match=r"no prediction for 'u1' \(2 of the 3 utterances"):
        score_world({"u0": ref, "u1": ref, "u2": ref}, {"u0": hyp}, LAY)
    bad = hyp.copy()
    bad[4, 2] = np.nan
    with pytest.raises(DataError, match=r"HYP\[u1\]: NaN or Inf in frame 4"):
        score_world({"u1": ref}, {"u1": bad}, LAY)
    with pytest.raises(DataError, match=r"REF\[u1\]: shape \(10, 7\), expected \(frames, 43\)"):
        score_world({"u1": ref}, {"u1": hyp})  # default layout: 40 + 2 + 1
    with pytest.raises(DataError, match="no utterances"):
        score_world({}, {}, LAY)
    with caplog.at_level(logging.WARNING):
        res = score_world({"u1": ref}, {"u1": hyp, "x9": hyp}, LAY)
    assert res.ignored_hyp == ["x9"] and "1 utterances of HYP are not in REF and are ignored: x9" in caplog.text


def test_layout_from_config():
    assert WorldLayout.from_conf(None) == WorldLayout(40, 1)
    assert WorldLayout.from_conf({"type": "world", "sample_rate": 22050, "mcep_dim": 60}) == WorldLayout(60, 2)
    assert WorldLayout.from_conf({"sample_rate": 48000}).dim == 40 + 2 + 5
    x = world(np.zeros((3, 4)), [100, 200, 300], [1, 0, 1])
    np.testing.assert_allclose(voiced_f0_hz(x, LAY), [100, 300])


def test_plot_f0_histograms(tmp_path):
    rng = np.random.default_rng(4)
    out = tmp_path / "f0.png"
    plot_f0_histograms({"ground truth": rng.normal(120, 20, 500).clip(60), "RNN big": rng.normal(118, 10, 400),
                        "SALAD big": rng.normal(121, 12, 450)}, out, title="F0")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    with pytest.raises(ValueError, match="'b' has no voiced frame"):
        plot_f0_histograms({"a": [100.0], "b": []}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="non-positive"):
        plot_f0_histograms({"a": [100.0, 0.0]}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_plot_spectrograms_writes_one_png_per_call(tmp_path):
    from speechkit.scoring.plots import plot_spectrograms

    mag = np.abs(np.random.default_rng(0).normal(size=(50, 201)))
    plot_spectrograms(tmp_path / "s.png", [("a", mag), ("b", mag * 2)], 16000, 80)
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["s.png"]   # no temporary left behind
