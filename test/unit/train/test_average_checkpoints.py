"""Checkpoint averaging (speechkit-average-checkpoints): the mean against NumPy, integer tensors,
mismatches named, the CLI's --last N on a real training run, and load_model on the result."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.bin import average_checkpoints as cli
from speechkit.tasks.toy import ToyTask
from speechkit.train import Trainer, load_model
from speechkit.train.checkpoint import (CHECKPOINT_FORMAT, CheckpointError, average_checkpoints,
                                        list_checkpoints, load_checkpoint, save_checkpoint)
from speechkit.utils.config import load_config

torch.set_num_threads(1)


def _write(path, model: dict, task="toy", **extra):
    save_checkpoint(path, {"format": CHECKPOINT_FORMAT, "kind": "train", "task": task, "config": {"a": 1},
                           "model": model, "state": {"epoch": extra.pop("epoch", 1), "step": 10}, **extra})
    return path


def test_mean_of_float_tensors_last_of_integer_ones(tmp_path):
    rng = np.random.default_rng(0)
    ws = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(3)]
    hs = [rng.normal(size=5).astype(np.float64) for _ in range(3)]
    paths = [_write(tmp_path / f"c{i}.pt", {"w": torch.from_numpy(ws[i]), "h": torch.from_numpy(hs[i]),
                                            "n": torch.tensor(10 * (i + 1))}, epoch=i + 1)
             for i in range(3)]
    out = average_checkpoints(paths)
    np.testing.assert_allclose(out["model"]["w"].numpy(), np.mean(np.stack(ws).astype(np.float64), 0), rtol=1e-6)
    assert out["model"]["w"].dtype == torch.float32 and out["model"]["h"].dtype == torch.float64
    np.testing.assert_allclose(out["model"]["h"].numpy(), np.mean(np.stack(hs), 0), rtol=1e-12)
    assert out["model"]["n"].item() == 30                      # integer: the newest checkpoint's
    assert out["averaged_from"] == ["c0.pt", "c1.pt", "c2.pt"]
    assert out["epoch"] == 3 and out["kind"] == "averaged" and out["task"] == "toy"


def test_mismatches_are_errors_naming_file_and_key(tmp_path):
    a = _write(tmp_path / "a.pt", {"w": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match="at least 2"):
        average_checkpoints([a])
    b = _write(tmp_path / "b.pt", {"w": torch.zeros(3, 2)})
    with pytest.raises(CheckpointError, match=r"b\.pt: model tensor 'w' has shape \(3, 2\)"):
        average_checkpoints([a, b])
    c = _write(tmp_path / "c.pt", {"w": torch.zeros(2, 3), "extra": torch.zeros(1)})
    with pytest.raises(CheckpointError, match=r"c\.pt: model tensors differ.*'extra'"):
        average_checkpoints([a, c])
    d = _write(tmp_path / "d.pt", {"w": torch.zeros(2, 3)}, task="rnnt")
    with pytest.raises(CheckpointError, match=r"d\.pt: task 'rnnt' differs"):
        average_checkpoints([a, d])


def test_cli_last_n_on_a_training_run_loads_and_averages(tmp_path, capsys):
    exp = tmp_path / "exp"
    cfg = load_config(ToyTask.Config, None, ["trainer.num_threads=1", "data.num_train=32", "data.num_valid=8",
                                             "trainer.batch_size=8", "trainer.max_epochs=4", "trainer.keep_last=3"])
    Trainer(ToyTask(), cfg, exp).fit()
    kept = list_checkpoints(exp / "checkpoints")
    assert len(kept) == 3
    assert cli.main(["--last", "4", str(exp)]) == 1            # only 3 kept: a clear error
    assert "only 3 full checkpoint(s) kept" in capsys.readouterr().err
    assert cli.main(["--last", "2", str(exp)]) == 0
    out = exp / "checkpoints" / "avg2.pt"
    model, _ = load_model(out)
    w1, w2 = (load_checkpoint(p)["model"] for p in kept[-2:])
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, (w1[key].double() + w2[key].double()).div(2).to(value.dtype))
    assert load_checkpoint(out)["averaged_from"] == [p.name for p in kept[-2:]]
    # listed files need --out, and --out must not overwrite an input
    assert cli.main([str(kept[0]), str(kept[1])]) == 1
    assert cli.main(["--out", str(kept[1]), str(kept[0]), str(kept[1])]) == 1
    assert "is one of the inputs" in capsys.readouterr().err
    assert kept[1].exists() and load_checkpoint(kept[1])["kind"] == "train"
