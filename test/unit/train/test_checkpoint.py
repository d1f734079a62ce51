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


# ------------------------------------------------------------------------------ device-agnostic checkpoints
def test_every_tensor_is_saved_on_the_cpu(tmp_path, monkeypatch):
    """A GPU run saved CUDA tensors (model, optimizer state, EMA buffers...): a plain torch.load(weights_only=True)
    of its checkpoints failed in a process without CUDA. Simulated on the CPU with tensors on the 'meta' device,
    whose copy to the CPU is patched to give zeros: what was saved must load as CPU tensors, nested containers,
    their types and a state dict's metadata kept."""
    real_cpu = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self, *a, **k: torch.zeros(self.shape, dtype=self.dtype)
                        if self.is_meta else real_cpu(self, *a, **k))
    model = torch.nn.Linear(3, 2, device="meta")
    sd = model.state_dict()
    state = {"format": CHECKPOINT_FORMAT, "model": sd, "step": 3,
             "optimizer": {"state": {0: {"step": torch.tensor(5.0), "exp_avg": torch.empty(2, 3, device="meta")}},
                           "param_groups": [{"lr": 0.1, "params": [0, 1]}]},
             "ema": [torch.empty(4, device="meta"), (torch.ones(2), "name")], "cpu": torch.arange(3)}
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, state)
    loaded = torch.load(path, weights_only=True)  # no map_location
    tensors = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            tensors.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(loaded)
    assert len(tensors) == 7 and all(t.device.type == "cpu" for t in tensors)
    assert loaded["model"]["weight"].shape == (2, 3) and torch.equal(loaded["cpu"], torch.arange(3))
    assert isinstance(loaded["ema"][1], tuple) and loaded["ema"][1][1] == "name"
    assert type(loaded["model"]).__name__ == "OrderedDict" and loaded["model"]._metadata == sd._metadata
    assert state["model"]["weight"].is_meta  # the caller's state is not modified


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_trained_checkpoint_loads_in_a_cpu_only_process(tmp_path):
    import subprocess
    import sys

    from speechkit.tasks import load_model
    from speechkit.tasks.toy import ToyTask
    from speechkit.train import Trainer
    from speechkit.utils.config import load_config

    exp = tmp_path / "exp"
    cfg = load_config(ToyTask.Config, None, ["trainer.num_threads=1", "data.num_train=32", "data.num_valid=8",
                                             "trainer.batch_size=8", "trainer.max_epochs=2", "trainer.device=cuda"])
    Trainer(ToyTask(), cfg, exp, resume=True).fit()
    ckpts = [exp / "checkpoints" / "best.pt", *list_checkpoints(exp / "checkpoints")]
    for path in ckpts:  # every tensor on the CPU, optimizer state included
        state = torch.load(path, weights_only=True)
        assert all(t.device.type == "cpu" for t in state["model"].values())
    code = ("import sys, torch; assert not torch.cuda.is_available()\n"
            "from speechkit.tasks import load_model\n"
            "for p in sys.argv[1:]: torch.load(p, weights_only=True)\n"
            f"load_model({str(exp)!r})\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code, *map(str, ckpts)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    model, _ = load_model(exp)  # and here too
    assert next(model.parameters()).device.type == "cpu"
