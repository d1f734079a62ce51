"""speechkit.train.task.data_paths: the inputs and experiment dirs a config's data section names
(what speechkit-train checks --exp-dir against)."""
from __future__ import annotations

from dataclasses import dataclass, field

from speechkit.train.task import data_paths


@dataclass
class _Data:
    train_dir: str = "data/train"
    valid_dir: str = ""
    codes: str = "exp/vq/units/codes"
    cmvn_stats: str | None = None
    vqvae_dir: str = "exp/vq"
    num_stack: int = 8
    name: str = "not a path"


@dataclass
class _Cfg:
    data: _Data = field(default_factory=_Data)


def test_data_paths():
    inputs, experiments = data_paths(_Cfg())
    assert inputs == [("data.train_dir", "data/train"), ("data.codes", "exp/vq/units/codes")]
    assert experiments == [("data.vqvae_dir", "exp/vq")]
    assert data_paths(object()) == ([], [])  # no data section
    assert data_paths(type("C", (), {"data": {"train_dir": "x"}})()) == ([], [])  # not a dataclass
