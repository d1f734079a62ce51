"""speechkit.inference.text2speech.Synthesizer on a tiny speaker-conditioned SALAD: features, waveform,
speakers, checkpoint choice and the refusals (a model of another input, no vocoder config, an unknown speaker)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.features.world import world_synthesize
from speechkit.inference.text2speech import Synthesizer
from speechkit.tasks import get_task, load_model
from speechkit.tasks.acoustic import predict_features
from speechkit.tasks.toy import ToyTask
from speechkit.train import Trainer
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError

import tts_speaker_helpers as H  # test/unit/tasks/tts_speaker_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    H.write_speaker_dir(root / "train", {"spka": 4, "spkb": 4}, seed=1)
    H.write_speaker_dir(root / "valid", {"spka": 1, "spkb": 1}, seed=2, tag="v")
    test = H.write_speaker_dir(root / "test", {"spka": 1, "spkb": 1}, seed=3, tag="t")
    scp = H.write_spk_embeddings(root / "emb", ["spka", "spkb", "spkc"])  # spkc: a vector, never trained
    task = get_task("salad")
    Trainer(task, load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", scp,
                                                                    **{"trainer.max_epochs": 2})), root / "exp").fit()
    return root, test


def test_features_and_waveform(trained):
    root, test = trained
    synth = Synthesizer(root / "exp")
    model, _ = load_model(root / "exp")
    assert synth.input == "labels" and not synth.tacotron2 and synth.conditioned
    assert synth.checkpoint == root / "exp" / "checkpoints" / "best.pt"
    assert synth.sr == 16000 and synth.vuv_index == 41 and synth.conf_src == str(root / "exp" / "feats.yaml")
    utt = sorted(test)[0]
    labels = test[utt][0]
    vec = synth.speaker_vector("spka")
    np.testing.assert_array_equal(vec, H.speaker_vector("spka"))
    feats = synth.features(labels, vec)
    assert feats.dtype == np.float32 and feats.shape == (len(labels), 43)
    np.testing.assert_array_equal(feats, predict_features(model, labels, vec, 41))
    assert set(np.unique(feats[:, 41]).tolist()) <= {0.0, 1.0}
    raw = world_synthesize(feats, 16000, H.WORLD_CONF)
    np.testing.assert_array_equal(synth.vocode(feats), raw)
    wav = synth(labels, "spka")
    peak = float(np.abs(raw).max())  # the limit as the CLIs compute it (a float64 factor)
    np.testing.assert_array_equal(wav, raw * (0.99 / peak) if peak > 0.99 else raw)
    assert np.abs(wav).max() <= 0.99 + 1e-6 and abs(len(wav) - 80 * len(labels)) <= 80


def test_speaker_vectors(trained):
    root, test = trained
    synth = Synthesizer(root / "exp")
    utts = sorted(test)
    own = synth.speaker_vectors(utts, root / "test")
    assert [v.tolist() for v in own] == [H.speaker_vector(u.split("-")[0]).tolist() for u in utts]
    forced = synth.speaker_vectors(utts, speaker="spkb")
    assert all(np.array_equal(v, H.speaker_vector("spkb")) for v in forced)
    with pytest.raises(DataError, match=r"speaker 'spkc' was never trained by the model in .*\(trained: spka, spkb\)"):
        synth.speaker_vector("spkc")
    with pytest.raises(DataError, match="speaker 'spkc' was never trained"):
        synth(test[utts[0]][0], "spkc")
    with pytest.raises(FileNotFoundError, match="utt2spk: not found"):
        synth.speaker_vectors(utts, root / "emb")
    only_a = H.write_spk_embeddings(root / "emb_a", ["spka"])
    other = Synthesizer(root / "exp", speaker_embeddings=only_a)
    assert other.speaker_embeddings == only_a
    with pytest.raises(DataError, match="no vector for speaker 'spkb'"):
        other.speaker_vectors(utts, root / "test")


def test_checkpoint_choice_and_refusals(trained, tmp_path):
    root, _ = trained
    latest = Synthesizer(root / "exp", "latest")
    assert latest.checkpoint.name.startswith("ckpt-")
    with pytest.raises(FileNotFoundError, match=f"^checkpoint nope.pt: no such file .*; model_dir {root / 'exp'}: "):
        Synthesizer(root / "exp", "nope.pt")
    with pytest.raises(ValueError, match=r"not a model of tacotron2 \(a 'salad' model"):
        Synthesizer(root / "exp", input="phones")
    # no feats.yaml beside the checkpoint, nor in the training dir: features yes, waveform no
    exp = tmp_path / "exp"
    (exp / "checkpoints").mkdir(parents=True)
    ckpt = torch.load(root / "exp" / "checkpoints" / "best.pt", weights_only=False)
    ckpt["config"]["data"]["train_dir"] = str(tmp_path / "gone")
    torch.save(ckpt, exp / "checkpoints" / "best.pt")
    (exp / "speakers").write_text((root / "exp" / "speakers").read_text())
    bare = Synthesizer(exp)
    assert bare.conf is None and bare.conf_src == "" and bare.vuv_index == 41
    x = np.zeros((3, H.LABEL_DIM), np.float32)
    assert bare.features(x, bare.speaker_vector("spka")).shape == (3, 43)
    with pytest.raises(FileNotFoundError, match=r"no WORLD config \(feats.yaml\) to vocode with"):
        bare(x, "spka")


def test_not_an_acoustic_model(tmp_path):
    cfg = load_config(ToyTask.Config, None, ["trainer.num_threads=1", "data.num_train=16", "data.num_valid=8",
                                             "trainer.batch_size=8", "trainer.max_epochs=1"])
    Trainer(ToyTask(), cfg, tmp_path / "exp").fit()
    # refused before the model is built (an rnnt model needed its units dir first: a misleading error)
    with pytest.raises(ValueError, match=r"not a model of salad \| musa_rnn \| tacotron2 \(a 'toy' model"):
        Synthesizer(tmp_path / "exp")
    with pytest.raises(ValueError, match=r"not a model of salad \| musa_rnn \(a 'toy' model"):
        Synthesizer(tmp_path / "exp", input="labels")
