"""speechkit.continual.evaluation / speechkit-score-continual against a hand-worked run.

The TTS model and the GE2E encoder are replaced by fakes so that the verifier's decisions are
scripted: each synthesized utterance "sounds like" a chosen speaker (its waveform carries that
speaker's index, the fake encoder maps it onto that speaker's ground-truth cluster). The accuracy
matrix, RA (eq. 1) and FG (eq. 2) are then known by hand. The real synthesis path (SALAD + WORLD +
resemblyzer) runs in test/integration/test_vctk_continual.py.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import kaldiio
import numpy as np
import pytest

import speechkit.models.speaker_encoder as se
from speechkit.bin.score_continual import main
from speechkit.continual import evaluation as ce
from speechkit.utils.fileio import DataError

ORDER = ["b", "c", "a"]          # the run's episode order
EXTRA = ["x"]                    # a pre-training speaker among the verifier's classes
ALL = ["a", "b", "c", "x"]
# SCRIPT[t][spk]: the speakers that speaker spk's 2 synthesized test utterances sound like after episode t
SCRIPT = {
    1: {"b": ["b", "b"]},
    2: {"b": ["b", "c"], "c": ["c", "c"]},
    3: {"b": ["a", "a"], "c": ["c", "a"], "a": ["a", "a"]},
}
# hand-worked: A = [[1, ., .], [.5, 1, .], [0, .5, 1]]
RA = [1.0, 0.75, 0.5]
FG = [None, 0.5, (1.0 - 0.0 + 1.0 - 0.5) / 2]   # FG_3: b max(1, .5) - 0 = 1; c: 1 - .5 = .5


def _centre(spk: str) -> np.ndarray:
    v = np.zeros(256, np.float32)
    v[ALL.index(spk) * 10] = 1.0
    return v


def _write_embed_dir(d: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True)
    utt2spk = {}
    with kaldiio.WriteHelper(f"ark,scp:{d}/embeddings.ark,{d}/embeddings.scp") as w:
        for s in ALL:
            for i in range(n):
                e = _centre(s) + 0.05 * rng.random(256).astype(np.float32)
                w(f"{s}_{seed}_{i}", e / np.linalg.norm(e))
                utt2spk[f"{s}_{seed}_{i}"] = s
    (d / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s in sorted(utt2spk.items())))


class FakeEncoder:
    def __init__(self, **kw):
        pass

    def embed_batch(self, wavs, sr, keys=None):
        out = []
        for w in wavs:
            if len(w) < 100:  # "too short"
                out.append(None)
                continue
            out.append(_centre(ALL[int(w[0])]))
        return out


class FakeSynth:
    calls = 0

    def __init__(self, ep_dir: Path):
        self.t = int(ep_dir.name.split("_")[1])
        self.next: dict[str, int] = {}
        self.sr = 16000

    def __call__(self, labels, speaker):
        FakeSynth.calls += 1
        j = self.next.get(speaker, 0)
        self.next[speaker] = j + 1
        target = SCRIPT[self.t][speaker][j]
        return np.full(16000, float(ALL.index(target)))


@pytest.fixture
def run(tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "plan.json").write_text(json.dumps({"strategy": "sa", "order": ORDER}))
    for t, s in enumerate(ORDER, 1):
        d = exp / f"episode_{t:02d}_{s}"
        d.mkdir()
        (d / "episode.json").write_text(json.dumps({"episode": t, "speaker": s}))
    test = tmp_path / "test"
    test.mkdir()
    with kaldiio.WriteHelper(f"ark,scp:{test}/labels.ark,{test}/labels.scp") as w:
        for s in ORDER:
            for i in range(3):
                w(f"{s}_t{i}", np.zeros((5, 3), np.float32))
    (test / "utt2spk").write_text("".join(f"{s}_t{i} {s}\n" for s in sorted(ORDER) for i in range(3)))
    _write_embed_dir(tmp_path / "gt_train", 6, 1)
    _write_embed_dir(tmp_path / "gt_test", 2, 2)
    monkeypatch.setattr(se, "SpeakerEncoder", FakeEncoder)
    monkeypatch.setattr(ce, "_Synthesizer", FakeSynth)
    FakeSynth.calls = 0
    return tmp_path


def _eval(root: Path, **kw):
    cfg = ce.EvalConfig(num_utts=2, extra_speakers=EXTRA, **kw)
    return ce.evaluate_continual(root / "exp", root / "test", root / "gt_train", root / "gt_test", cfg)


def test_hand_worked_accuracy_matrix_ra_fg(run):
    s = _eval(run)
    A = s["accuracy_matrix"]
    assert A[0][0] == 1.0 and A[1][:2] == [0.5, 1.0] and A[2] == [0.0, 0.5, 1.0]
    assert A[0][1] is None and A[0][2] is None and A[1][2] is None
    np.testing.assert_allclose(s["retained_accuracy"], RA)
    assert s["forgetting"][0] is None
    np.testing.assert_allclose(s["forgetting"][1:], FG[1:])
    assert s["verifier_accuracy"] == [1.0, 1.0, 1.0] and s["complete"]
    ep3 = json.loads((run / "exp" / "eval" / "episode_03.json").read_text())
    assert ep3["classes"] == ["x", "b", "c", "a"]  # the extra speaker + the seen ones in episode order
    assert ep3["verifier"]["training_utterances"] == 4 * 6
    for png in ("confusion_matrix", "embeddings_2d", "accuracy_matrix"):
        assert (run / "exp" / "eval" / f"{png}.png").stat().st_size > 1000
    assert len(list((run / "exp" / "eval" / "wav" / "episode_03").glob("*.wav"))) == 3  # one per seen speaker


def test_finished_episodes_are_not_evaluated_again_unless_changed(run):
    _eval(run)
    assert FakeSynth.calls == 2 * (1 + 2 + 3)
    _eval(run)
    assert FakeSynth.calls == 2 * (1 + 2 + 3)
    # episode 2 retrained (its episode.json changed): only it is evaluated again
    (run / "exp" / "episode_02_c" / "episode.json").write_text(json.dumps({"episode": 2, "retrained": True}))
    _eval(run)
    assert FakeSynth.calls == 2 * (1 + 2 + 3) + 2 * 2


def test_other_inputs_are_evaluated_again_same_content_reused(run, caplog):
    """Issue 23 item 3: the cache key covers the content of every input, not the episode alone."""
    first = _eval(run)
    n = FakeSynth.calls
    assert n == 2 * (1 + 2 + 3)
    # the same content under another path: reused
    import shutil
    shutil.copytree(run / "gt_test", run / "gt_test_copy")
    scp = run / "gt_test_copy" / "embeddings.scp"
    scp.write_text(scp.read_text().replace(str(run / "gt_test") + "/", str(run / "gt_test_copy") + "/"))
    shutil.rmtree(run / "gt_test")
    cfg = ce.EvalConfig(num_utts=2, extra_speakers=EXTRA, plots=False)
    ce.evaluate_continual(run / "exp", run / "test", run / "gt_train", run / "gt_test_copy", cfg)
    assert FakeSynth.calls == n
    shutil.move(str(run / "exp"), str(run / "moved_exp"))  # the run itself moved
    ce.evaluate_continual(run / "moved_exp", run / "test", run / "gt_train", run / "gt_test_copy", cfg)
    shutil.move(str(run / "moved_exp"), str(run / "exp"))
    assert FakeSynth.calls == n
    # another held-out set (one of c's utterances labelled as a): every episode with c is evaluated again
    other = run / "gt_test_other"
    shutil.copytree(run / "gt_test_copy", other)
    (other / "utt2spk").write_text((other / "utt2spk").read_text().replace("c_2_0 c", "c_2_0 a"))
    with caplog.at_level("INFO"):
        s = ce.evaluate_continual(run / "exp", run / "test", run / "gt_train", other, cfg)
    assert FakeSynth.calls == 2 * n
    assert "episode 1: evaluating again: --gt-test changed since it was evaluated" in caplog.text
    assert s["verifier_accuracy"] != first["verifier_accuracy"] and s["verifier_accuracy"][0] == 1.0
    # another verifier training set, other test labels, another --wavs-per-speaker: evaluated again
    _write_embed_dir(run / "gt_train2", 4, 3)
    ce.evaluate_continual(run / "exp", run / "test", run / "gt_train2", other, cfg)
    assert FakeSynth.calls == 3 * n
    kaldiio.save_ark(str(run / "test" / "labels.ark"), {f"{s}_t{i}": np.ones((5, 3), np.float32)
                                                        for s in ORDER for i in range(3)},
                     scp=str(run / "test" / "labels.scp"))
    caplog.clear()
    with caplog.at_level("INFO"):
        ce.evaluate_continual(run / "exp", run / "test", run / "gt_train2", other, cfg)
    assert FakeSynth.calls == 4 * n and "--test-dir changed" in caplog.text
    cfg2 = ce.EvalConfig(num_utts=2, extra_speakers=EXTRA, wavs_per_speaker=2, plots=False)
    ce.evaluate_continual(run / "exp", run / "test", run / "gt_train2", other, cfg2)
    assert FakeSynth.calls == 5 * n
    assert len(list((run / "exp" / "eval" / "wav" / "episode_03").glob("*.wav"))) == 6
    ce.evaluate_continual(run / "exp", run / "test", run / "gt_train2", other, cfg)  # back to 1 wav each
    assert len(list((run / "exp" / "eval" / "wav" / "episode_03").glob("*.wav"))) == 3


@pytest.mark.parametrize("option, value, message", [("--wavs-per-speaker", "-1", "must be >= 0, got -1"),
                                                    ("--num-utts", "0", "must be >= 1, got 0")])
def test_cli_rejects_out_of_range_counts_by_name(run, capsys, option, value, message):
    with pytest.raises(SystemExit) as e:
        main(["--test-dir", str(run / "test"), "--gt-train", str(run / "gt_train"), "--gt-test",
              str(run / "gt_test"), option, value, str(run / "exp")])
    assert e.value.code == 2 and re.search(rf"argument {option}(/\S+)?: {message}", capsys.readouterr().err)
    assert not (run / "exp" / "eval").exists()
    with pytest.raises(ValueError, match="wavs_per_speaker must be >= 0"):
        _eval(run, wavs_per_speaker=-1)


def test_unfinished_run_scores_the_finished_episodes(run):
    (run / "exp" / "episode_03_a" / "episode.json").unlink()
    s = _eval(run)
    assert s["order"] == ["b", "c"] and not s["complete"]
    np.testing.assert_allclose(s["retained_accuracy"], RA[:2])


def test_short_syntheses_are_skipped_and_counted(run, monkeypatch):
    orig = FakeSynth.__call__

    def short_for_c(self, labels, speaker):
        w = orig(self, labels, speaker)
        return w[:10] if speaker == "c" and self.next[speaker] == 1 else w

    monkeypatch.setattr(FakeSynth, "__call__", short_for_c)
    s = _eval(run)
    assert s["skipped"] == 2  # c's first utterance in episodes 2 and 3
    # episode 3: c's remaining utterance sounds like a -> a_{3,c} = 0
    assert s["accuracy_matrix"][2][1] == 0.0


def test_missing_ground_truth_of_a_seen_speaker_is_named(run):
    lines = (run / "gt_train" / "utt2spk").read_text().splitlines()
    (run / "gt_train" / "utt2spk").write_text("".join(f"{ln}\n" for ln in lines if not ln.endswith(" c")))
    scp = run / "gt_train" / "embeddings.scp"
    scp.write_text("".join(f"{ln}\n" for ln in scp.read_text().splitlines() if not ln.startswith("c_")))
    with pytest.raises(DataError, match=r"speaker\(s\) c"):
        _eval(run)


def test_cli_prints_episodes_and_final_scores(run, capsys):
    extra = run / "extra"
    extra.write_text("x\n")
    assert main(["--test-dir", str(run / "test"), "--gt-train", str(run / "gt_train"), "--gt-test",
                 str(run / "gt_test"), "--num-utts", "2", "--extra-speakers", str(extra), "--no-plots",
                 str(run / "exp")]) == 0
    out = capsys.readouterr().out
    assert "episode 3 a: RA  50.0 %  FG  75.0 %" in out
    assert "final RA 50.0 %, FG 75.0 %" in out
    assert not (run / "exp" / "eval" / "confusion_matrix.png").exists()
    assert main(["--test-dir", str(run / "test"), "--gt-train", str(run / "gt_train"), "--gt-test",
                 str(run / "nope"), str(run / "exp")]) != 0
    assert "nope/embeddings.scp: no such file" in capsys.readouterr().err
