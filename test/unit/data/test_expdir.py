"""speechkit.data.expdir: look-ups in an experiment dir, with the training data dir as fallback."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from speechkit.data.expdir import copy_feats_yaml, trained_speakers, world_conf
from speechkit.data.speakers import write_speakers
from speechkit.utils.fileio import write_table


def _cfg(train_dir) -> SimpleNamespace:
    return SimpleNamespace(data=SimpleNamespace(train_dir=str(train_dir) if train_dir else ""))


def test_world_conf_exp_then_train_dir(tmp_path):
    exp, train = tmp_path / "exp", tmp_path / "train"
    exp.mkdir()
    train.mkdir()
    assert world_conf(exp, _cfg(train)) == (None, "")
    assert world_conf(exp, _cfg(None)) == (None, "")
    (train / "feats.yaml").write_text(yaml.safe_dump({"type": "world", "mcep_dim": 30}))
    assert world_conf(exp, _cfg(train)) == ({"type": "world", "mcep_dim": 30}, str(train / "feats.yaml"))
    (exp / "feats.yaml").write_text("")  # an empty file is an empty config
    assert world_conf(exp, _cfg(train)) == ({}, str(exp / "feats.yaml"))


def test_trained_speakers_exp_then_utt2spk(tmp_path):
    exp, train = tmp_path / "exp", tmp_path / "train"
    exp.mkdir()
    train.mkdir()
    with pytest.raises(FileNotFoundError, match="cannot tell which speakers"):
        trained_speakers(exp, _cfg(train))
    with pytest.raises(FileNotFoundError, match="cannot tell which speakers"):
        trained_speakers(exp, _cfg(None))
    write_table(train / "utt2spk", {"b-1": "b", "a-1": "a", "a-2": "a"})
    assert trained_speakers(exp, _cfg(train)) == ["a", "b"]
    write_speakers(exp / "speakers", ["c"])
    assert trained_speakers(exp, _cfg(train)) == ["c"]


def test_copy_feats_yaml(tmp_path):
    exp, train = tmp_path / "exp", tmp_path / "train"
    exp.mkdir()
    train.mkdir()
    assert copy_feats_yaml(train, exp) is False and not (exp / "feats.yaml").exists()
    text = "# written by speechkit-compute-feats\ntype: logmel\nn_mels: 80\n"
    (train / "feats.yaml").write_text(text, encoding="utf-8")
    assert copy_feats_yaml(str(train), exp) is True
    assert (exp / "feats.yaml").read_text(encoding="utf-8") == text
    assert world_conf(exp, _cfg(None)) == ({"type": "logmel", "n_mels": 80}, str(exp / "feats.yaml"))
