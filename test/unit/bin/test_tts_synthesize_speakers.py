"""speechkit-tts-synthesize with a speaker-conditioned SALAD: --speaker, --speaker-embeddings, errors."""
from __future__ import annotations

import kaldiio
import numpy as np
import pytest
import torch

from speechkit.bin.tts_synthesize import main
from speechkit.tasks import get_task, load_model
from speechkit.train import Trainer
from speechkit.utils.config import load_config

import tts_speaker_helpers as H  # test/unit/tasks/tts_speaker_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("tts_spk")
    H.write_speaker_dir(root / "train", {"spka": 5, "spkb": 5}, seed=1)
    H.write_speaker_dir(root / "valid", {"spka": 1, "spkb": 1}, seed=2, tag="v")
    test = H.write_speaker_dir(root / "test", {"spka": 1, "spkb": 1}, seed=3, tag="t")
    scp = H.write_spk_embeddings(root / "emb", ["spka", "spkb", "spkc"])  # spkc: a vector, never trained
    task = get_task("salad")
    Trainer(task, load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", scp)),
            root / "exp").fit()
    return root, test


def _reference(model, labels: np.ndarray, speaker: str) -> np.ndarray:
    x = np.concatenate([labels, np.tile(H.speaker_vector(speaker), (len(labels), 1))], 1)
    with torch.no_grad():
        return model.normalizer.denormalize(model.infer(torch.from_numpy(x)[None]))[0].numpy()


def test_own_speaker_and_forced_speaker(trained, tmp_path):
    root, test = trained
    model, _ = load_model(root / "exp")
    assert main(["--model-dir", str(root / "exp"), str(root / "test"), str(tmp_path / "own")]) == 0
    assert main(["--model-dir", str(root / "exp"), "--speaker", "spkb", str(root / "test"), str(tmp_path / "b")]) == 0
    own = dict(kaldiio.load_scp(str(tmp_path / "own" / "feats.scp")))
    as_b = dict(kaldiio.load_scp(str(tmp_path / "b" / "feats.scp")))
    for utt, (labels, _) in test.items():
        for got, spk in ((own[utt], utt.split("-")[0]), (as_b[utt], "spkb")):
            ref = _reference(model, labels, spk)
            assert got.shape == (len(labels), 43)
            assert np.allclose(got[:, :41], ref[:, :41], atol=1e-5)
    # the same labels in two voices: different outputs (the speaker vector matters)
    a_utt = next(u for u in test if u.startswith("spka"))
    assert np.abs(own[a_utt][:, 1:5] - as_b[a_utt][:, 1:5]).mean() > 0.1
    assert np.allclose(own[next(u for u in test if u.startswith("spkb"))],
                       as_b[next(u for u in test if u.startswith("spkb"))])


def test_never_trained_and_missing(trained, tmp_path, capsys):
    root, _ = trained
    exp = str(root / "exp")
    assert main(["--model-dir", exp, "--speaker", "spkc", str(root / "test"), str(tmp_path / "o")]) == 1
    assert "speaker 'spkc' was never trained by the model" in capsys.readouterr().err
    assert not (tmp_path / "o" / "feats.scp").exists()
    only_a = H.write_spk_embeddings(tmp_path / "emb_a", ["spka"])
    assert main(["--model-dir", exp, "--speaker-embeddings", str(only_a), str(root / "test"), str(tmp_path / "o")]) == 1
    assert "no vector for speaker 'spkb'" in capsys.readouterr().err
    nospk = tmp_path / "nospk"
    nospk.mkdir()
    (nospk / "labels.scp").write_text((root / "test" / "labels.scp").read_text())
    assert main(["--model-dir", exp, str(nospk), str(tmp_path / "o")]) == 1
    assert "utt2spk: not found" in capsys.readouterr().err
    assert main(["--model-dir", exp, "--speaker", "spka", str(nospk), str(tmp_path / "o")]) == 0


def test_unconditioned_model_rejects_speaker(tmp_path, capsys):
    H.write_speaker_dir(tmp_path / "train", {"spka": 3}, seed=1)
    H.write_speaker_dir(tmp_path / "valid", {"spka": 1}, seed=2, tag="v")
    task = get_task("salad")
    o = H.salad_overrides(tmp_path / "train", tmp_path / "valid", "''", **{"trainer.max_epochs": 1})
    Trainer(task, load_config(task.Config, None, o), tmp_path / "exp").fit()
    assert main(["--model-dir", str(tmp_path / "exp"), "--speaker", "spka", str(tmp_path / "valid"),
                 str(tmp_path / "o")]) == 1
    assert "not speaker-conditioned" in capsys.readouterr().err
