"""speechkit.continual.evaluation with tacotron2 episode models: the synthesizer's phones -> stop token ->
Griffin-Lim path against a direct reference, its errors, and evaluate_continual reading the test dir's
phones (``text``, no labels.scp) with a fake speaker encoder (the real one runs in the integration test)."""
from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import kaldiio
import numpy as np
import pytest

import speechkit.models.speaker_encoder as se
from speechkit.decode.griffin_lim import mel_to_waveform
from speechkit.continual import evaluation as ce
from speechkit.tasks.tacotron2 import synthesize
from speechkit.continual import driver as cd
from speechkit.tasks import load_model
from speechkit.utils.fileio import DataError

_spec = importlib.util.spec_from_file_location(
    "taco_continual_helpers", Path(__file__).parent / "test_continual_driver_tacotron2.py")
H = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(H)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished sa run (2 episodes) of a tiny tacotron2 and a test dir with phones only."""
    root = H.setup.__wrapped__(tmp_path_factory)
    cd.run_continual(H.config(root, "sa"), root / "exp")
    H.write_dir(root / "test", {s: 2 for s in H.CONTINUAL}, seed=9, tag="t")
    return root


def test_synthesizer_phones_to_griffin_lim(run, caplog):
    root = run
    ep = root / "exp" / cd.episode_dir_name(2, H.order()[1])
    synth = ce._Synthesizer(ep)
    assert synth.tacotron2 and synth.sr == H.FEATS_YAML["sample_rate"]
    phones = ["a", "tʃ", "b", "oʊ"]
    synth.griffin_lim_iters = 8
    wav = synth(phones, "c1")
    # reference: the same steps by hand
    model, cfg = load_model(ep)
    mel = synthesize(model, cfg.data.token_list, phones, H.speaker_vector("c1"),
                     max_frames=synth.max_frames_per_phone * len(phones) + 20, seed=0)
    ref = mel_to_waveform(mel, H.FEATS_YAML, n_iter=8).astype(np.float64)
    peak = np.abs(ref).max()
    ref = ref * (0.99 / peak) if peak > 0.99 else ref
    # the length is the stop token's (at most the cap); the 2-epoch tiny model learns no alignment
    assert 2 <= len(mel) <= synth.max_frames_per_phone * len(phones) + 20
    assert len(wav) == H.FEATS_YAML["hop_length"] * (len(mel) - 1) > 0
    assert np.allclose(wav, ref, atol=1e-6) and np.abs(wav).max() <= 0.99 + 1e-9
    # a phone outside the vocabulary is synthesized as <unk>, with a warning
    with caplog.at_level(logging.WARNING):
        assert len(synth(["a", "zz"], "c2")) >= H.FEATS_YAML["hop_length"]  # >= 2 frames, even if it stops at 1
    assert "outside the model's vocabulary synthesized as <unk>: zz" in caplog.text
    with pytest.raises(DataError, match="speaker 'c9' was never trained"):
        synth(phones, "c9")


class FakeEncoder:
    """Every waveform long enough gets one of two embeddings by its length's parity (deterministic)."""

    def __init__(self, **kw):
        pass

    def embed_batch(self, wavs, sr, keys=None):
        return [np.eye(256, dtype=np.float32)[len(w) % 2] for w in wavs]


def _embed_dir(d: Path, speakers: list[str], n: int) -> None:
    d.mkdir(parents=True)
    with kaldiio.WriteHelper(f"ark,scp:{d}/embeddings.ark,{d}/embeddings.scp") as w:
        for i, s in enumerate(speakers):
            for j in range(n):
                w(f"{s}_{j}", np.eye(256, dtype=np.float32)[10 + i] + 0.01 * j)
    (d / "utt2spk").write_text("".join(f"{s}_{j} {s}\n" for s in speakers for j in range(n)))


def test_evaluate_continual_reads_phones(run, tmp_path, monkeypatch):
    root = run
    assert not (root / "test" / "labels.scp").exists()
    _embed_dir(tmp_path / "gt_train", ["c1", "c2", "p1"], 3)
    _embed_dir(tmp_path / "gt_test", ["c1", "c2", "p1"], 1)
    monkeypatch.setattr(se, "SpeakerEncoder", FakeEncoder)
    monkeypatch.setattr(ce._Synthesizer, "griffin_lim_iters", 4)
    scores = ce.evaluate_continual(root / "exp", root / "test", tmp_path / "gt_train", tmp_path / "gt_test",
                                   ce.EvalConfig(num_utts=2, extra_speakers=["p1"], plots=False))
    assert scores["order"] == H.order() and scores["complete"] and scores["skipped"] == 0
    res = json.loads((root / "exp" / "eval" / "episode_02.json").read_text())
    assert sorted(r["utt"] for r in res["utterances"]) == ["c1-t00", "c1-t01", "c2-t00", "c2-t01"]
    wavs = sorted(p.name for p in (root / "exp" / "eval" / "wav" / "episode_02").iterdir())
    assert wavs == ["c1__c1-t00.wav", "c2__c2-t00.wav"]
