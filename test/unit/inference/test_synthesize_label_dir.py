"""speechkit.inference.text2speech.synthesize_label_dir (the library form of speechkit-tts-synthesize) on a tiny
speaker-conditioned SALAD: the feature dir it writes equals Synthesizer.features, wavs through the vocoder
given, the logger given, and its refusals."""
from __future__ import annotations

import logging

import kaldiio
import numpy as np
import pytest

from speechkit.decode.vocode import world_vocode
from speechkit.tasks import get_task
from speechkit.inference.text2speech import Synthesizer, synthesize_label_dir
from speechkit.train import Trainer
from speechkit.utils.config import load_config
from speechkit.utils.fileio import read_table

import tts_speaker_helpers as H  # test/unit/tasks/tts_speaker_helpers.py (test/unit/conftest.py)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth_dir")
    H.write_speaker_dir(root / "train", {"spka": 3, "spkb": 3}, seed=1)
    H.write_speaker_dir(root / "valid", {"spka": 1, "spkb": 1}, seed=2, tag="v")
    test = H.write_speaker_dir(root / "test", {"spka": 1, "spkb": 1}, seed=3, tag="t")
    scp = H.write_spk_embeddings(root / "emb", ["spka", "spkb"])
    task = get_task("salad")
    Trainer(task, load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", scp,
                                                                    **{"trainer.max_epochs": 1})), root / "exp").fit()
    return root, test


def test_the_dir_holds_the_synthesizers_features(trained, tmp_path, caplog):
    root, test = trained
    calls = []

    def vocoder(*a, **k):
        calls.append(a[0])
        return world_vocode(*a, **k)

    with caplog.at_level(logging.INFO):
        frames = synthesize_label_dir(root / "exp", root / "test", tmp_path / "out", speaker="spkb", num_wavs=1,
                                      vocoder=vocoder, log=logging.getLogger("test-synth-dir"))
    utts = sorted(test)
    assert frames == {u: len(test[u][0]) for u in utts}
    synth = Synthesizer(root / "exp")
    got = dict(kaldiio.load_scp(str(tmp_path / "out" / "feats.scp")))
    for u in utts:
        np.testing.assert_array_equal(got[u], synth.features(test[u][0], synth.speaker_vector("spkb")))
    assert calls == [utts[0]] and list(read_table(tmp_path / "out" / "wav" / "wav.scp")) == [utts[0]]
    assert (tmp_path / "out" / "frame_shift").read_text() == "0.005\n"
    assert [r.message for r in caplog.records if r.name == "test-synth-dir"][-1] == \
        f"wrote {tmp_path / 'out'} (feats.scp, wav/)"


def test_refusals(trained, tmp_path):
    root, _ = trained
    with pytest.raises(ValueError, match="^num_wavs must be >= 0, got -1"):
        synthesize_label_dir(root / "exp", root / "test", tmp_path / "o", num_wavs=-1)
    with pytest.raises(ValueError, match="^nj must be >= 1, got 0"):
        synthesize_label_dir(root / "exp", root / "test", tmp_path / "o", nj=0)
    with pytest.raises(FileNotFoundError, match="labels.scp: no label vectors"):
        synthesize_label_dir(root / "exp", root / "valid" / "nowhere", tmp_path / "o")
    assert not (tmp_path / "o").exists()
