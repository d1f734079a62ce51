"""Label vectors checked value by value on a hand-made utterance; z-norm, frame rule, errors, storage."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from speechkit.text.labels import (
    BINARY_FEATURES, BOUNDARY, CONTEXT, REAL_FEATURES, LabelFrontend, frame_segments, make_label_input,
    read_alignments,
)
from speechkit.utils.fileio import DataError

SHIFT = 0.01  # 10 ms frames keep the hand computation simple; the code takes any shift
# "bat": one word, one syllable with primary stress; sil before and after.
BAT_TOKENS = ["b", "æ", "t"]
BAT_INFO = [(1, 0, 0)] * 3
BAT_SEGS = [(0.0, 0.02, "sil"), (0.02, 0.05, "b"), (0.05, 0.15, "æ"), (0.15, 0.18, "t"), (0.18, 0.20, "sil")]


def bat():
    return make_label_input("u1", BAT_TOKENS, BAT_INFO, BAT_SEGS)


def col(fe: LabelFrontend, name: str) -> int:
    return fe.feature_names.index(name)


def test_hand_made_utterance_value_by_value():
    x = bat()
    fe = LabelFrontend.fit([x], frame_shift=SHIFT)
    assert fe.phones == ["sil", "b", "t", "æ"]  # sil first, then code-point order
    assert fe.max_duration == pytest.approx(0.10)  # æ; sil segments are not phones
    assert fe.dim == 5 * 5 + len(BINARY_FEATURES) + len(REAL_FEATURES) + 2 == 67
    m = fe.frame_labels(x, 20, SHIFT)
    assert m.shape == (20, fe.dim) and m.dtype == np.float32
    names = fe.feature_names
    # frames 0-1 sil, 2-4 b, 5-14 æ, 15-17 t, 18-19 sil
    seg_of = [0, 0, 1, 1, 1] + [2] * 10 + [3, 3, 3, 4, 4]
    labels = [p for _, _, p in BAT_SEGS]
    for t, s in enumerate(seg_of):
        ctx = [labels[s + o] if 0 <= s + o < len(labels) else BOUNDARY for o in CONTEXT]
        on = {names[k] for k in np.flatnonzero(m[t, :25])}
        assert on == {(f"ph[{o:+d}]" if o else "ph[0]") + f"={p}" for o, p in zip(CONTEXT, ctx)}, t
    # relative position ramps (t * shift - start) / duration
    np.testing.assert_allclose(m[:, col(fe, "rel_pos")],
                               [0, .5, 0, 1 / 3, 2 / 3, *np.arange(10) / 10, 0, 1 / 3, 2 / 3, 0, .5], atol=1e-6)
    # durations / 0.10, sil (0.02) too; clipped at 1 for longer ones
    np.testing.assert_allclose(m[:, col(fe, "dur_norm")], [.2, .2, .3, .3, .3] + [1] * 10 + [.3] * 3 + [.2, .2],
                               atol=1e-6)
    b = {n: m[3, col(fe, n)] for n in BINARY_FEATURES}  # the b frame
    assert {n for n, v in b.items() if v} == {"stress=1", "class=stop", "pause_before", "syl_initial",
                                               "word_initial"}
    a = {n: m[7, col(fe, n)] for n in BINARY_FEATURES}  # æ
    assert {n for n, v in a.items() if v} == {"is_vowel", "stress=1"}
    t_ = {n: m[16, col(fe, n)] for n in BINARY_FEATURES}
    assert {n for n, v in t_.items() if v} == {"stress=1", "class=stop", "pause_after", "syl_final", "word_final"}
    s0 = {n for n in BINARY_FEATURES if m[0, col(fe, n)]}
    s4 = {n for n in BINARY_FEATURES if m[19, col(fe, n)]}
    assert s0 == {"is_sil", "sil_utt_initial"} and s4 == {"is_sil", "sil_utt_final"}
    # raw positions: b/æ/t are phones 1,2,3 of the syllable (3 phones), of the word and of the utterance
    raw = x.real
    r = {n: raw[1:4, i].tolist() for i, n in enumerate(REAL_FEATURES)}
    assert r["phone_in_syl_fwd"] == r["phone_in_word_fwd"] == r["phone_in_utt_fwd"] == [1, 2, 3]
    assert r["phone_in_syl_bwd"] == r["phone_in_word_bwd"] == r["phone_in_utt_bwd"] == [3, 2, 1]
    assert r["phones_in_syl"] == r["phones_in_word"] == r["phones_in_utt"] == [3, 3, 3]
    for n in ("syl_in_word_fwd", "syl_in_word_bwd", "syls_in_word", "word_in_utt_fwd", "word_in_utt_bwd",
              "syl_in_utt_fwd", "syl_in_utt_bwd", "words_in_utt", "syls_in_utt"):
        assert r[n] == [1, 1, 1], n
    assert np.isnan(raw[0, REAL_FEATURES.index("phone_in_syl_fwd")])  # sil: not applicable
    assert raw[0, REAL_FEATURES.index("phones_in_utt")] == 3  # utterance counts apply to sil
    # z-norm over b, æ, t: positions 1,2,3 -> mean 2, std sqrt(2/3); constants -> 0; sil -> 0
    k = col(fe, "phone_in_syl_fwd")
    sd = np.sqrt(2 / 3)
    np.testing.assert_allclose(m[[3, 7, 16, 0], k], [-1 / sd, 0, 1 / sd, 0], atol=1e-6)
    assert np.all(m[:, col(fe, "words_in_utt")] == 0)


def test_znorm_statistics_match_brute_force():
    # "hello world": h ə . l oʊ | w ɜː l d ; 3 syllables, 2 words; one pause between the words
    toks = ["h", "ə", "l", "oʊ", "w", "ɜː", "l", "d"]
    info = [(0, 0, 0), (0, 0, 0), (1, 1, 0), (1, 1, 0), (1, 2, 1), (1, 2, 1), (1, 2, 1), (1, 2, 1)]
    t = np.arange(11) * 0.05
    labels = ["sil", *toks[:4], "sil", *toks[4:]]
    hw = make_label_input("u2", toks, info, [(a, b, p) for a, b, p in zip(t[:-1], t[1:], labels)])
    fe = LabelFrontend.fit([bat(), hw])
    # brute force: phones_in_syl over the 11 phones (3 of bat, 8 of hello world)
    phones_in_syl = [3, 3, 3] + [2, 2, 2, 2, 4, 4, 4, 4]
    syl_in_utt_bwd = [1, 1, 1] + [3, 3, 2, 2, 1, 1, 1, 1]
    # utterance counts over all 5 + 10 segments
    words_in_utt = [1] * 5 + [2] * 10
    for name, vals in (("phones_in_syl", phones_in_syl), ("syl_in_utt_bwd", syl_in_utt_bwd),
                       ("words_in_utt", words_in_utt)):
        k = REAL_FEATURES.index(name)
        assert fe.mean[k] == pytest.approx(np.mean(vals)) and fe.std[k] == pytest.approx(np.std(vals)), name
    assert fe.max_duration == pytest.approx(0.10)
    seg = fe.phone_labels(hw)
    k = fe.feature_names.index("syl_in_utt_bwd")
    np.testing.assert_allclose(seg[1:5, k], (np.array([3, 3, 2, 2]) - np.mean(syl_in_utt_bwd)) / np.std(syl_in_utt_bwd),
                               rtol=1e-6)
    pb = fe.feature_names.index("pause_before")
    pa = fe.feature_names.index("pause_after")
    assert seg[:, pb].tolist() == [0, 1, 0, 0, 0, 0, 1, 0, 0, 0] and seg[:, pa].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    nxt = fe.feature_names.index("next_syl_stressed")
    prv = fe.feature_names.index("prev_syl_stressed")
    assert seg[1:5, nxt].tolist() == [1, 1, 1, 1] and seg[1:5, prv].tolist() == [0, 0, 0, 0]
    assert seg[6:, prv].tolist() == [1] * 4 and seg[6:, nxt].tolist() == [0] * 4


@pytest.mark.parametrize("T", [18, 19, 20, 21, 22])
def test_frame_count_within_two_frames_pads_or_trims(T):
    fe = LabelFrontend.fit([bat()])
    m = fe.frame_labels(bat(), T, SHIFT)
    assert m.shape[0] == T
    ref = fe.frame_labels(bat(), 20, SHIFT)
    n = min(T, 20)
    np.testing.assert_array_equal(m[:n], ref[:n])
    if T > 20:  # extra frames belong to the last segment (sil), position clipped at 1
        assert np.all(m[20:, fe.feature_names.index("ph[0]=sil")] == 1)
        assert np.all(m[20:, fe.feature_names.index("rel_pos")] == 1)


@pytest.mark.parametrize("T", [17, 23])
def test_frame_count_mismatch_is_an_error(T):
    fe = LabelFrontend.fit([bat()])
    with pytest.raises(DataError, match=rf"utterance 'u1': the alignment covers 20 frames .* features have {T}"):
        fe.frame_labels(bat(), T, SHIFT)


def test_world_frame_convention():
    # 1 s of 16 kHz audio: WORLD gives 1 + floor(1000 * 16000 / (16000 * 5)) = 201 frames at 5 ms;
    # the alignment ending at 1.0 s covers frames 0..199, so frame 200 pads the last segment
    idx, rel = frame_segments(np.array([0.0, 0.5]), np.array([0.5, 1.0]), 201, 0.005)
    assert idx.tolist() == [0] * 100 + [1] * 101
    assert rel[99] == pytest.approx(0.99) and rel[100] == 0 and rel[200] == 1


def test_unknown_phone_names_file_and_line(tmp_path):
    fe = LabelFrontend.fit([bat()])
    ali = tmp_path / "phone_alignments"
    ali.write_text("u9 0.0 0.02 sil\nu9 0.02 0.05 b\nu9 0.05 0.10 k\nu9 0.10 0.20 æ\n")
    segs = read_alignments(ali)["u9"]
    x = make_label_input("u9", ["b", "k", "æ"], [(1, 0, 0)] * 3, segs, source=str(ali))
    with pytest.raises(DataError, match=rf"{ali}:3: phone 'k' of utterance 'u9' is not in the label front end's"):
        fe.frame_labels(x, 20, SHIFT)


def test_alignment_text_mismatch_names_utterance():
    with pytest.raises(DataError, match=r"utterance 'u1': the aligned phones \(without sil\) differ from text at "
                                        r"phone 2: 'æ' where text has 'ɪ'"):
        make_label_input("u1", ["b", "ɪ", "t"], BAT_INFO, BAT_SEGS)
    with pytest.raises(DataError, match="at phone 4: the end where text has 's'"):
        make_label_input("u1", ["b", "æ", "t", "s"], BAT_INFO + [(0, 0, 0)], BAT_SEGS)


def test_read_alignments_errors(tmp_path):
    f = tmp_path / "ali"
    f.write_text("u 0.0 0.1 a\nu 0.05 0.2 b\n")
    with pytest.raises(DataError, match=rf"{f}:2: segment of 'u' starts at 0.05 before"):
        read_alignments(f)
    f.write_text("u 0.0 x a\n")
    with pytest.raises(DataError, match=rf"{f}:1: times are not numbers"):
        read_alignments(f)
    f.write_text("u 0.0 0.1 a\nv 0.0 0.1\n")
    with pytest.raises(DataError, match=rf"{f}:2: expected"):
        read_alignments(f)


def test_save_load_round_trip(tmp_path):
    fe = LabelFrontend.fit([bat()], frame_shift=SHIFT)
    fe.save(tmp_path / "fe")
    assert (tmp_path / "fe" / "phones.txt").read_text(encoding="utf-8") == "sil 0\nb 1\nt 2\næ 3\n"
    doc = yaml.safe_load((tmp_path / "fe" / "frontend.yaml").read_text(encoding="utf-8"))
    assert doc["dim"] == fe.dim == len(doc["features"])
    assert doc["features"][0] == "identity ph[-2]=sil" and doc["features"][-1] == "frame rel_pos"
    back = LabelFrontend.load(tmp_path / "fe")
    np.testing.assert_array_equal(back.frame_labels(bat(), 20, SHIFT), fe.frame_labels(bat(), 20, SHIFT))
    (tmp_path / "fe" / "phones.txt").write_text("sil 0\nb 2\n")
    with pytest.raises(DataError, match=r"phones.txt:2: expected '<phone> 1', got 'b 2'"):
        LabelFrontend.load(tmp_path / "fe")
    with pytest.raises(FileNotFoundError, match="fit the front end first"):
        LabelFrontend.load(tmp_path / "nowhere")
