"""The rnnt task's batching: which utterances can be trained on (length_problem) and the
single-language batches drawn in proportion to each language's hours (language_batches)."""
import pytest

from speechkit.tasks.rnnt import language_batches, length_problem


def test_length_problem_reports_untrainable_utterances():
    assert length_problem(7, 0).startswith("no encoder frames")
    assert length_problem(8, 1) is None  # one encoder frame, one label
    assert "2 labels > 1 per frame x 1 encoder frames" in length_problem(10, 2)
    assert length_problem(10, 2, max_symbols_per_frame=2) is None
    assert length_problem(300, 500, max_symbols_per_frame=None) is None  # 98 frames, no cap


def test_language_batches_single_language_proportional_to_hours():
    utt2lang, utt2frames = {}, {}
    for i in range(300):  # "hi": 3x the frames of "ta"
        utt2lang[f"hi{i:03d}"], utt2frames[f"hi{i:03d}"] = "hi", 100 + i % 50
    for i in range(100):
        utt2lang[f"ta{i:03d}"], utt2frames[f"ta{i:03d}"] = "ta", 100 + i % 50
    utt2frames["ta_long"], utt2lang["ta_long"] = 5000, "ta"
    counts = {"hi": 0, "ta": 0}
    for epoch in range(20):
        sched = language_batches(utt2lang, utt2frames, batch_frames=1000, seed=1, epoch=epoch)
        for lang, utts in sched:
            assert {utt2lang[u] for u in utts} == {lang}
            assert max(utt2frames[u] for u in utts) * len(utts) <= 1000 or utts == ["ta_long"]
            counts[lang] += 1
    frac = counts["hi"] / (counts["hi"] + counts["ta"])
    hi_frames = sum(f for u, f in utt2frames.items() if utt2lang[u] == "hi")
    assert frac == pytest.approx(hi_frames / sum(utt2frames.values()), abs=0.03)
    a = language_batches(utt2lang, utt2frames, 1000, seed=1, epoch=3)
    assert a == language_batches(utt2lang, utt2frames, 1000, seed=1, epoch=3)
    assert a != language_batches(utt2lang, utt2frames, 1000, seed=1, epoch=4)
    with pytest.raises(ValueError, match="xx"):
        language_batches({"xx": "hi"}, {}, 1000)
