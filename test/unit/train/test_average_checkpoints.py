"""Checkpoint averaging (speechkit-average-checkpoints): the mean against NumPy, integer tensors,
mismatches named, the CLI's --last N on a real training run, and load_model on the result."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.bin import average_checkpoints as cli
from speechkit.tasks.toy import ToyTask
from speechkit.tasks import load_model
from speechkit.train import Trainer
from speechkit.train.checkpoint import (CHECKPOINT_FORMAT, CheckpointError, average_checkpoints,
                                        list_checkpoints, load_checkpoint, save_checkpoint)
from speechkit.utils.config import load_config

torch.set_num_threads(1)


def _write(path, model: dict, task="toy", config=None, step=None, **extra):
    epoch = extra.pop("epoch", 1)
    save_checkpoint(path, {"format": CHECKPOINT_FORMAT, "kind": "train", "task": task,
                           "config": config if config is not None else {"a": 1}, "model": model,
                           "state": {"epoch": epoch, "step": step if step is not None else 10 * epoch}, **extra})
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
    b = _write(tmp_path / "b.pt", {"w": torch.zeros(3, 2)}, epoch=2)
    with pytest.raises(CheckpointError, match=r"b\.pt: model tensor 'w' has shape \(3, 2\)"):
        average_checkpoints([a, b])
    c = _write(tmp_path / "c.pt", {"w": torch.zeros(2, 3), "extra": torch.zeros(1)}, epoch=2)
    with pytest.raises(CheckpointError, match=r"c\.pt: model tensors differ.*'extra'"):
        average_checkpoints([a, c])
    d = _write(tmp_path / "d.pt", {"w": torch.zeros(2, 3)}, task="rnnt", epoch=2)
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


RUN = {"model": {"dim": 4}, "data": {"train_dir": "data/train"}, "trainer": {"seed": 1, "max_epochs": 4, "lr": 0.1}}


def _run_config(**changes):
    cfg = {k: dict(v) for k, v in RUN.items()}
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        cfg[section][key] = value
    return cfg


def test_checkpoints_of_different_runs_are_refused_naming_both_files_and_the_key(tmp_path):
    w = lambda x: {"w": torch.full((2, 2), float(x))}  # noqa: E731
    a = _write(tmp_path / "a" / "ckpt-e1.pt", w(1), config=_run_config(), epoch=1)
    # another seed, another data dir, another model: another run
    for i, (change, key) in enumerate([({"trainer__seed": 2}, "trainer.seed"),
                                       ({"data__train_dir": "data/train_sp"}, "data.train_dir"),
                                       ({"model__dim": 8}, "model.dim")]):
        b = _write(tmp_path / f"b{i}" / "ckpt-e2.pt", w(2), config=_run_config(**change), epoch=2)
        with pytest.raises(CheckpointError) as e:
            average_checkpoints([a, b])
        assert f"{b} and {a} are checkpoints of different runs: config key '{key}' differs" in str(e.value)
    # what a resumed run may change (max_epochs raised, lr, a newer field) is one run
    c = _write(tmp_path / "a" / "ckpt-e2.pt", w(3),
               config={**_run_config(trainer__max_epochs=8, trainer__lr=0.05), "new": {"x": 1}}, epoch=2)
    assert average_checkpoints([a, c])["model"]["w"][0, 0].item() == 2.0


def test_the_same_weights_twice_are_refused(tmp_path):
    import shutil

    a = _write(tmp_path / "ckpt-e0001-s00000010.pt", {"w": torch.ones(2)}, epoch=1)
    b = _write(tmp_path / "ckpt-e0002-s00000020.pt", {"w": torch.zeros(2)}, epoch=2)
    with pytest.raises(CheckpointError, match=f"{a} and {a} are the same file"):
        average_checkpoints([a, b, a])
    (tmp_path / "link.pt").symlink_to(a.name)
    with pytest.raises(CheckpointError, match="are the same file"):
        average_checkpoints([a, tmp_path / "link.pt"])
    shutil.copy(a, tmp_path / "copy.pt")
    with pytest.raises(CheckpointError, match=f"{tmp_path / 'copy.pt'} has the same content as {a}"):
        average_checkpoints([a, tmp_path / "copy.pt"])
    # best.pt is the epoch-2 weights saved at step 20: with ckpt-e2 that is the same weights twice
    best = tmp_path / "best.pt"
    save_checkpoint(best, {"format": CHECKPOINT_FORMAT, "kind": "best", "task": "toy", "config": {"a": 1},
                           "model": {"w": torch.zeros(2)}, "epoch": 2, "step": 20, "metric": "valid/loss",
                           "value": 0.5})
    with pytest.raises(CheckpointError) as e:
        average_checkpoints([a, b, best])
    assert f"{best} and {b} both hold the weights after update step 20" in str(e.value)


def test_inputs_are_ordered_by_step_whatever_the_argument_order(tmp_path):
    paths = [_write(tmp_path / f"c{i}.pt", {"w": torch.full((3,), 0.1 * (i + 1)), "n": torch.tensor(i + 1)},
                    epoch=i + 1) for i in range(3)]
    forward, backward = average_checkpoints(paths), average_checkpoints(paths[::-1])
    for out in (forward, backward):
        assert (out["epoch"], out["step"]) == (3, 30)           # the newest checkpoint's progress
        assert out["model"]["n"].item() == 3                    # and its integer tensors
        assert out["averaged_from"] == ["c0.pt", "c1.pt", "c2.pt"]
    torch.testing.assert_close(forward["model"]["w"], backward["model"]["w"], rtol=0, atol=0)


def test_checkpoints_trained_on_different_data_are_refused(tmp_path):
    from speechkit.data import fingerprint as fp

    for name, spk in (("d1", "s1"), ("d2", "s2")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "utt2spk").write_text(f"{spk}_u1 {spk}\n")
    prints = [fp.fingerprint_inputs({"data.train_dir": fp.DataInput(str(tmp_path / d), tables=("utt2spk",))})
              for d in ("d1", "d2")]
    a = _write(tmp_path / "a.pt", {"w": torch.ones(2)}, epoch=1, data_fingerprint=prints[0])
    b = _write(tmp_path / "b.pt", {"w": torch.zeros(2)}, epoch=2, data_fingerprint=prints[1])
    with pytest.raises(CheckpointError, match=f"{b} and {a} are checkpoints of different runs: trained on different "
                                              r"data \(key 'data.train_dir'"):
        average_checkpoints([a, b])
    c = _write(tmp_path / "c.pt", {"w": torch.zeros(2)}, epoch=2, data_fingerprint=prints[0])
    assert average_checkpoints([a, c])["data_fingerprint"] == prints[0]


def test_cli_refuses_by_name_and_writes_nothing(tmp_path, capsys):
    a = _write(tmp_path / "a.pt", {"w": torch.ones(2)}, epoch=1)
    b = _write(tmp_path / "b.pt", {"w": torch.zeros(2)}, epoch=1)  # same step
    assert cli.main(["--out", str(tmp_path / "avg.pt"), str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("speechkit-average-checkpoints: error: ") and f"{b} and {a} both hold" in err
    assert not (tmp_path / "avg.pt").exists()


def test_cli_refuses_an_out_that_is_a_training_runs_own_file(tmp_path, capsys):
    """--out exp/checkpoints/latest.pt (or best.pt, or a ckpt-*.pt there) replaced the trainer's file:
    latest.pt (a symlink) became an averaged file and the run could no longer resume ("not a
    training checkpoint"). Now refused before any work, naming the option and the file."""
    import os

    from speechkit.train.checkpoint import checkpoint_name, latest_checkpoint, set_latest

    ckpt = tmp_path / "exp" / "checkpoints"
    a = _write(ckpt / checkpoint_name(1, 10), {"w": torch.ones(2)}, epoch=1, step=10)
    b = _write(ckpt / checkpoint_name(2, 20), {"w": torch.zeros(2)}, epoch=2, step=20)
    set_latest(ckpt, b.name)
    _write(ckpt / "best.pt", {"w": torch.zeros(2)}, epoch=2, step=20, kind="best")
    (tmp_path / "ln").symlink_to(ckpt)
    (tmp_path / "mine.pt").symlink_to(a)
    before = {p.name: (os.readlink(p) if p.is_symlink() else p.read_bytes()) for p in ckpt.iterdir()}
    outs = [ckpt / "latest.pt", ckpt / "best.pt", ckpt / checkpoint_name(3, 30), tmp_path / "ln" / "best.pt",
            ckpt / ".." / "checkpoints" / "latest.pt", tmp_path / "mine.pt"]
    for out in outs:
        assert cli.main(["--out", str(out), str(a), str(b)]) == 1, out
        err = capsys.readouterr().err
        assert f"--out {out}: is " in err, err
    for out in outs[1:3]:
        assert cli.main(["--last", "2", "--out", str(out), str(tmp_path / "exp")]) == 1
        assert f"--out {out}: is the training run's own {out.name} in {ckpt}" in capsys.readouterr().err
    assert {p.name: (os.readlink(p) if p.is_symlink() else p.read_bytes()) for p in ckpt.iterdir()} == before
    assert (tmp_path / "mine.pt").is_symlink()
    assert load_checkpoint(latest_checkpoint(ckpt))["kind"] == "train"
    # any other name, in the run's directory or elsewhere, is still written
    assert cli.main(["--out", str(ckpt / "avg.pt"), str(a), str(b)]) == 0
    assert cli.main(["--out", str(tmp_path / "best.pt"), str(a), str(b)]) == 0
    assert load_checkpoint(tmp_path / "best.pt")["kind"] == "averaged"


def test_cli_refuses_an_out_it_did_not_write(tmp_path, capsys):
    """Issue 38 case 4: --out EXP/config.yaml (or a data dir's feats.scp) was replaced by a torch zip, exit 0.
    Only an earlier average is replaced; a data dir's table is refused even where no such file exists yet."""
    a = _write(tmp_path / "exp" / "a.pt", {"w": torch.ones(2)}, epoch=1)
    b = _write(tmp_path / "exp" / "b.pt", {"w": torch.zeros(2)}, epoch=2)
    (tmp_path / "exp" / "config.yaml").write_text("model: {dim: 4}\n")
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    (data / "feats.scp").write_text("u1 raw.ark:8\n")
    (data / "utt2spk").write_text("u1 u\n")
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    for out, msg in ((tmp_path / "exp" / "config.yaml", "exists and is not an earlier average of checkpoints"),
                     (data / "feats.scp", f"would replace feats.scp of the data dir {data}"),
                     (data / "cmvn.scp", f"would replace cmvn.scp of the data dir {data}"),
                     (_write(tmp_path / "exp" / "c.pt", {"w": torch.ones(2)}, epoch=3), "not an earlier average")):
        before.setdefault(out, out.read_bytes()) if out.exists() else None
        assert cli.main(["--out", str(out), str(a), str(b)]) == 1, out
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"speechkit-average-checkpoints: error: --out {out}") and msg in err, err
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == before
    # its own earlier output is replaced
    assert cli.main(["--out", str(tmp_path / "exp" / "avg.pt"), str(a), str(b)]) == 0
    assert cli.main(["--out", str(tmp_path / "exp" / "avg.pt"), str(a), str(b)]) == 0
    assert load_checkpoint(tmp_path / "exp" / "avg.pt")["kind"] == "averaged"
