"""Checkpoint files: weights_only round trip, RNG restore, atomic pointer, pruning, corrupt files."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from speechkit.train.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    checkpoint_name,
    get_rng_state,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    parse_checkpoint_name,
    prune_checkpoints,
    save_checkpoint,
    set_latest,
    set_rng_state,
)

torch.set_num_threads(1)


def _draw():
    return (random.random(), random.gauss(0, 1), float(np.random.rand()), float(np.random.randn()),
            torch.rand(3).tolist(), torch.randn(2).tolist())


def test_round_trip_weights_only_with_rng(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    random.gauss(0, 1)  # leaves a cached gaussian in Python's state
    np.random.randn()   # and in NumPy's
    state = {"format": CHECKPOINT_FORMAT, "model": model.state_dict(), "optimizer": opt.state_dict(),
             "rng": get_rng_state(), "config": {"a": [1, 2], "b": None}, "step": 7}
    expected = _draw()
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, state)
    assert os.listdir(tmp_path) == ["ckpt.pt"]

    loaded = torch.load(path, weights_only=True)  # plain torch.load(weights_only=True) accepts it
    assert loaded["step"] == 7 and loaded["config"] == {"a": [1, 2], "b": None}
    for k, v in model.state_dict().items():
        assert torch.equal(loaded["model"][k], v)
    opt2 = torch.optim.Adam(torch.nn.Linear(3, 2).parameters())
    opt2.load_state_dict(loaded["optimizer"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])

    _draw()
    set_rng_state(load_checkpoint(path)["rng"])
    assert _draw() == expected


def test_truncated_checkpoint_error_names_file(tmp_path):
    path = tmp_path / checkpoint_name(1, 10)
    save_checkpoint(path, {"format": CHECKPOINT_FORMAT, "w": torch.randn(1000)})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"^{path}: cannot load checkpoint, file is truncated or corrupt"):
        load_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match=str(path)):
        load_checkpoint(path)


def test_foreign_objects_and_formats_rejected(tmp_path):
    p = tmp_path / "x.pt"
    torch.save({"format": "other", "w": torch.ones(1)}, p)
    with pytest.raises(CheckpointError, match="not a speechkit checkpoint"):
        load_checkpoint(p)
    torch.save({"obj": torch.nn.Linear(1, 1)}, p)  # a pickled module: refused by weights_only
    with pytest.raises(CheckpointError, match="weights_only=True"):
        load_checkpoint(p)


def test_latest_pointer_and_pruning(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    names = [checkpoint_name(e, s) for e, s in [(1, 5), (1, 10), (2, 15), (2, 20), (3, 25)]]
    assert parse_checkpoint_name(names[2]) == (2, 15) and parse_checkpoint_name("best.pt") is None
    for name in names:
        save_checkpoint(tmp_path / name, {"format": CHECKPOINT_FORMAT})
        set_latest(tmp_path, name)
        assert latest_checkpoint(tmp_path) == tmp_path / name
        assert os.readlink(tmp_path / "latest.pt") == name  # relative: the exp dir can move
    save_checkpoint(tmp_path / "best.pt", {"format": CHECKPOINT_FORMAT})
    assert [p.name for p in list_checkpoints(tmp_path)] == names

    deleted = prune_checkpoints(tmp_path, keep_last=2)
    assert [p.name for p in deleted] == names[:3]
    assert sorted(os.listdir(tmp_path)) == sorted(["best.pt", "latest.pt", names[3], names[4]])
    assert prune_checkpoints(tmp_path, keep_last=0) == []


def test_pruning_never_deletes_latest(tmp_path):
    names = [checkpoint_name(1, s) for s in (1, 2, 3)]
    for name in names:
        save_checkpoint(tmp_path / name, {"format": CHECKPOINT_FORMAT})
    set_latest(tmp_path, names[0])
    prune_checkpoints(tmp_path, keep_last=1)
    assert sorted(p.name for p in list_checkpoints(tmp_path)) == [names[0], names[2]]


def test_dangling_latest_is_an_error(tmp_path):
    set_latest(tmp_path, "ckpt-e0001-s00000001.pt")
    with pytest.raises(CheckpointError, match="points to missing file"):
        latest_checkpoint(tmp_path)
