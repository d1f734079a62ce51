"""Speaker-conditioned salad / musa_rnn (data.speaker_embeddings): dims, per-frame vectors across
speaker boundaries in the streams, missing speakers, EXP/speakers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.data.speakers import read_speakers
from speechkit.tasks import get_task
from speechkit.tasks.acoustic import SpeakerTable, StreamWindows
from speechkit.train import Trainer
from speechkit.utils.config import load_config
from speechkit.utils.fileio import DataError, read_table, write_table

import tts_speaker_helpers as H  # test/unit/tasks/tts_speaker_helpers.py (test/unit/conftest.py)


@pytest.fixture
def two_speakers(tmp_path):
    train = H.write_speaker_dir(tmp_path / "train", {"spka": 5, "spkb": 5}, seed=1)
    H.write_speaker_dir(tmp_path / "valid", {"spka": 1, "spkb": 1}, seed=2, tag="v")
    scp = H.write_spk_embeddings(tmp_path / "emb", ["spka", "spkb"])
    return tmp_path, scp, train


def test_input_dim_counts_the_speaker_vector(two_speakers):
    root, scp, _ = two_speakers
    for name in ("salad", "musa_rnn"):
        cfg = load_config(get_task(name).Config, None,
                          [f"data.train_dir={root / 'train'}", f"data.speaker_embeddings={scp}"])
        assert cfg.model.input_dim == H.LABEL_DIM + H.SPK_DIM
        cfg = load_config(get_task(name).Config, None, [f"data.train_dir={root / 'train'}"])
        assert cfg.model.input_dim == H.LABEL_DIM


def test_stream_windows_carry_each_frames_speaker(two_speakers):
    """Every window frame = [its label | its own speaker's vector], also where streams cross speakers."""
    root, scp, data = two_speakers
    task = get_task("salad")
    cfg = load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", scp))
    task.build_model(cfg)
    train, valid = task.build_datasets(cfg)
    assert task.trained_speakers == ["spka", "spkb"]
    utts = sorted(data)
    ref = np.concatenate([np.concatenate([data[u][0], np.tile(H.speaker_vector(u.split("-")[0]),
                                                               (len(data[u][0]), 1))], 1) for u in utts])
    used = train.stream_len * train.num_streams
    got = torch.cat([torch.cat([train[k * train.num_streams + s]["labels"] for k in range(train.num_windows)])
                     for s in range(train.num_streams)])
    assert got.shape == (used, H.LABEL_DIM + H.SPK_DIM)
    assert np.array_equal(got.numpy(), ref[:used])
    # some stream actually crosses the speaker boundary inside a window
    assert any(len(torch.unique(train[i]["labels"][:, H.LABEL_DIM:], dim=0)) == 2 for i in range(len(train)))
    # validation utterances carry their speaker's vector on every frame
    for u, x in zip(valid.utts, valid.labels):
        assert x.shape[1] == H.LABEL_DIM + H.SPK_DIM
        assert np.array_equal(x[:, H.LABEL_DIM:].numpy(), np.tile(H.speaker_vector(u.split("-")[0]), (len(x), 1)))


def test_speaker_table_index():
    t = SpeakerTable.build(["b", "a", "b"], [2, 1, 3], {"a": np.zeros(2, np.float32), "b": np.ones(2, np.float32)})
    assert t.speakers == ["a", "b"] and t.index.tolist() == [1, 1, 0, 1, 1, 1]
    x = torch.zeros(6, 1)
    ds = StreamWindows(x, x, 2, 2, t)
    assert ds[0]["labels"][:, 1].tolist() == [1.0, 1.0] and ds[1]["labels"][:, 1].tolist() == [1.0, 1.0]
    assert ds[2]["labels"][:, 1].tolist() == [0.0]


def test_missing_speaker_and_utterance(two_speakers, tmp_path):
    root, _, _ = two_speakers
    only_a = H.write_spk_embeddings(tmp_path / "emb_a", ["spka"])
    task = get_task("salad")
    cfg = load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", only_a,
                                                           **{"model.input_dim": H.LABEL_DIM + H.SPK_DIM}))
    task.build_model(cfg)
    with pytest.raises(DataError, match=r"no vector for speaker 'spkb' \(of utterance 'spkb-u00'"):
        task.build_datasets(cfg)
    u2s = read_table(root / "train" / "utt2spk")
    del u2s["spka-u03"]
    write_table(root / "train" / "utt2spk", u2s)
    cfg = load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", root / "emb" /
                                                           "spk_embeddings.scp"))
    with pytest.raises(DataError, match=r"utt2spk: utterance 'spka-u03' has no speaker"):
        task.build_datasets(cfg)


def test_training_writes_speakers(two_speakers):
    root, scp, _ = two_speakers
    task = get_task("salad")
    cfg = load_config(task.Config, None, H.salad_overrides(root / "train", root / "valid", scp,
                                                           **{"trainer.max_epochs": 1}))
    Trainer(task, cfg, root / "exp").fit()
    assert read_speakers(root / "exp" / "speakers") == ["spka", "spkb"]
