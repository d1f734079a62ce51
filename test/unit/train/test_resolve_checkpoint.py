"""resolve_checkpoint: the one rule behind --model-dir/--checkpoint (best / latest / avgN / a name / a path),
and add_model_args, the options of every CLI that loads a model."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from speechkit.train.checkpoint import CheckpointError, resolve_checkpoint, set_latest
from speechkit.utils.cli import ConfigError, add_model_args, error_message

E1 = "ckpt-e0001-s00000005.pt"
E2 = "ckpt-e0002-s00000010.pt"


@pytest.fixture
def exp(tmp_path):
    """exp/checkpoints with two epoch checkpoints, latest.pt -> the second, best.pt and avg2.pt."""
    ck = tmp_path / "exp" / "checkpoints"
    ck.mkdir(parents=True)
    for name in (E1, E2, "best.pt", "avg2.pt"):
        (ck / name).write_bytes(b"x")
    set_latest(ck, E2)
    return tmp_path / "exp"


def test_each_form(exp, tmp_path, monkeypatch):
    ck = exp / "checkpoints"
    assert resolve_checkpoint(exp) == ck / "best.pt"  # the default: best.pt ...
    assert resolve_checkpoint(exp, "best") == ck / "best.pt"
    assert resolve_checkpoint(exp, "latest") == ck / E2  # latest.pt resolved to its file
    assert resolve_checkpoint(exp, "avg2") == ck / "avg2.pt"
    assert resolve_checkpoint(exp, E1) == ck / E1  # a file name in checkpoints/
    assert resolve_checkpoint(exp, "avg2.pt") == ck / "avg2.pt"
    other = tmp_path / "elsewhere.pt"
    other.write_bytes(b"x")
    assert resolve_checkpoint(exp, str(other)) == other  # a path
    assert resolve_checkpoint(ck) == ck / "best.pt"  # the checkpoints/ directory itself
    assert resolve_checkpoint(ck / E1) == ck / E1  # a checkpoint file as the model
    assert resolve_checkpoint(ck / E1, str(other)) == other
    (ck / "best.pt").unlink()
    assert resolve_checkpoint(exp) == ck / E2  # ... else the latest
    monkeypatch.chdir(tmp_path)
    (tmp_path / E1).write_bytes(b"y")  # a path relative to the working dir comes before a name in checkpoints/
    assert resolve_checkpoint(exp, E1) == Path(E1)


def test_missing_ones_name_experiment_request_and_what_exists(exp, tmp_path):
    ck = exp / "checkpoints"
    flags = {"model_dir": "--model-dir", "checkpoint": "--checkpoint"}  # as a CLI's parser spells them
    with pytest.raises(FileNotFoundError) as e:
        resolve_checkpoint(exp, "avg5", param="model_dir")
    msg = str(e.value)  # a library caller reads the parameters' names
    assert msg.startswith("checkpoint avg5: no such file") and f"; model_dir {exp}: " in msg
    msg = error_message(e.value, flags)
    assert msg.startswith("--checkpoint avg5: no such file")
    assert f"--model-dir {exp}" in msg and f"{ck} holds avg2.pt, best.pt, {E1}, {E2}, latest.pt -> {E2}" in msg
    assert f"speechkit-average-checkpoints --last 5 {exp}" in msg
    with pytest.raises(FileNotFoundError) as e:
        resolve_checkpoint(exp, "nope.pt", param="model_dir")
    assert re.match(rf"^--checkpoint nope.pt: no such file \(not a file, nor in {ck}\)", error_message(e.value, flags))
    with pytest.raises(FileNotFoundError, match=rf"^checkpoint nope.pt: no such file .*; {exp}: {ck} holds"):
        resolve_checkpoint(exp, "nope.pt")  # no param: the path alone
    (ck / "best.pt").unlink()
    with pytest.raises(FileNotFoundError) as e:
        resolve_checkpoint(exp, "best", param="model_dir")
    assert str(e.value).endswith("training without validation writes none: use checkpoint=latest")
    assert error_message(e.value, flags).endswith("training without validation writes none: use --checkpoint latest")
    with pytest.raises(FileNotFoundError, match="no such checkpoint file, and no such experiment directory"):
        resolve_checkpoint(tmp_path / "nowhere", param="model_dir")
    with pytest.raises(FileNotFoundError) as e:
        resolve_checkpoint(tmp_path / "nowhere", "nope.pt", param="model_dir")
    assert error_message(e.value, flags).startswith("--checkpoint nope.pt: no such file")
    with pytest.raises(ConfigError, match="needs model_dir .* to be an experiment directory") as e:
        resolve_checkpoint(ck / E1, "best", param="model_dir")
    assert "needs --model-dir " in error_message(e.value, flags)


def test_empty_or_absent_checkpoints_dir(tmp_path):
    exp = tmp_path / "exp"
    (exp / "checkpoints").mkdir(parents=True)
    for asked in (None, "best", "latest", "avg3"):
        with pytest.raises(FileNotFoundError, match=f"{exp / 'checkpoints'} holds no checkpoint"):
            resolve_checkpoint(exp, asked)
    with pytest.raises(FileNotFoundError, match="train the model first"):
        resolve_checkpoint(exp)
    (exp / "checkpoints").rmdir()
    with pytest.raises(FileNotFoundError, match=f"no {exp / 'checkpoints'} directory"):
        resolve_checkpoint(exp)


def test_dangling_latest_is_named(exp):
    ck = exp / "checkpoints"
    (ck / "best.pt").unlink()
    (ck / E2).unlink()
    with pytest.raises(CheckpointError, match="latest.pt: points to missing file"):
        resolve_checkpoint(exp)


def test_add_model_args():
    p = argparse.ArgumentParser()
    add_model_args(p, help="experiment dir of speechkit-train rnnt")
    a = p.parse_args(["--model-dir", "exp/x"])
    assert a.model_dir == "exp/x" and a.checkpoint is None
    assert p.parse_args(["--model_dir", "e", "--checkpoint", "avg5"]).checkpoint == "avg5"
    with pytest.raises(SystemExit):
        p.parse_args([])  # the model is required
    q = argparse.ArgumentParser()
    add_model_args(q, option="--inverter-dir", help="inverter experiment dir", default="best", metavar="DIR")
    b = q.parse_args(["--inverter_dir", "exp/inv"])
    assert b.inverter_dir == "exp/inv" and b.checkpoint == "best"
    helps = [next(x.help for x in parser._actions if x.dest == "checkpoint") for parser in (p, q)]
    assert all("best | latest | avgN" in h for h in helps)
    assert helps[0].endswith("(default: best, else the latest)") and helps[1].endswith("(default: best)")
