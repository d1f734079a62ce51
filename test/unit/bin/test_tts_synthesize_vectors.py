"""Issue 38 case 11: tts-synthesize after speechkit-embed-speakers rewrote the speaker vectors conditioned
the model on vectors it was never trained with, without a word (train-continual refuses the same change).
The vectors read are now checked by content against the fingerprint the checkpoint recorded at training."""
from __future__ import annotations

import shutil

import kaldiio
import pytest

from speechkit.bin.tts_synthesize import main
from speechkit.tasks import get_task
from speechkit.train import Trainer
from speechkit.utils.config import load_config

import tts_speaker_helpers as H  # test/unit/tasks/tts_speaker_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("tts_vec")
    H.write_speaker_dir(root / "train", {"spka": 3, "spkb": 3}, seed=1)
    H.write_speaker_dir(root / "valid", {"spka": 1, "spkb": 1}, seed=2, tag="v")
    H.write_speaker_dir(root / "test", {"spka": 1, "spkb": 1}, seed=3, tag="t")
    scp = H.write_spk_embeddings(root / "emb", ["spka", "spkb"])
    task = get_task("salad")
    o = H.salad_overrides(root / "train", root / "valid", scp, **{"trainer.max_epochs": 1})
    Trainer(task, load_config(task.Config, None, o), root / "exp").fit()
    return root


def test_vectors_rewritten_since_training_are_refused(trained, tmp_path, capsys):
    root = trained
    emb = root / "emb"
    original = (emb / "spk_embeddings.ark").read_bytes()
    argv = ["--model-dir", str(root / "exp"), "--speaker", "spka", str(root / "test")]
    try:
        # embed-speakers run again (other utterances, another encoder): same scp, other vectors
        kaldiio.save_ark(str(emb / "spk_embeddings.ark"), {s: -H.speaker_vector(s) for s in ("spka", "spkb")},
                         scp=str(emb / "spk_embeddings.scp"))
        assert main(argv + [str(tmp_path / "o")]) == 1
        err = capsys.readouterr().err
        assert f"{emb / 'spk_embeddings.scp'}: " in err and "speaker 'spka'" in err and "not trained with" in err
        assert not (tmp_path / "o").exists()
    finally:
        (emb / "spk_embeddings.ark").write_bytes(original)
    assert main(argv + [str(tmp_path / "o")]) == 0                       # the vectors it was trained with
    copy = tmp_path / "copy"                                              # the same vectors elsewhere
    H.write_spk_embeddings(copy, ["spka", "spkb"])
    assert main(argv[:2] + ["--speaker-embeddings", str(copy / "spk_embeddings.scp")] + argv[2:]
                + [str(tmp_path / "o2")]) == 0
    other = tmp_path / "other"                                            # another scp, other vectors
    shutil.copytree(copy, other)
    kaldiio.save_ark(str(other / "spk_embeddings.ark"), {s: 2 * H.speaker_vector(s) for s in ("spka", "spkb")},
                     scp=str(other / "spk_embeddings.scp"))
    assert main(argv[:2] + ["--speaker-embeddings", str(other / "spk_embeddings.scp")] + argv[2:]
                + [str(tmp_path / "o3")]) == 1
    err = capsys.readouterr().err
    assert f"{other / 'spk_embeddings.scp'}: " in err and f"trained with {emb / 'spk_embeddings.scp'}" in err
