"""Trainer: experiment files, determinism, resume == uninterrupted (incl. SIGKILL), early stopping, errors."""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from speechkit.data.fingerprint import DataInput
from speechkit.tasks import get_task, load_model
from speechkit.tasks.toy import ToyTask
from speechkit.train import Trainer, TrainerConfig
from speechkit.train.checkpoint import CheckpointError, latest_checkpoint, list_checkpoints, parse_checkpoint_name
from speechkit.train.report import read_metrics
from speechkit.train.trainer import ExperimentBusyError, move_to_device
from speechkit.utils.config import ConfigError, dotted_keys, field_docs, load_config, to_dict

torch.set_num_threads(1)

# 64 items / 8 per batch = 8 batches per epoch; dropout 0.1 makes training consume the torch RNG.
SMALL = ["trainer.num_threads=1", "data.num_train=64", "data.num_valid=16", "trainer.batch_size=8",
         "trainer.log_interval=2"]


def toy_cfg(*overrides: str):
    return load_config(ToyTask.Config, None, SMALL + list(overrides))


def fit(exp: Path, *overrides: str, task=None, resume: bool = True) -> Path:
    return Trainer(task or ToyTask(), toy_cfg(*overrides), exp, resume=resume).fit()


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def train_losses(exp: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in read_metrics(exp / "metrics.jsonl") if r["kind"] == "train"]


class Crash(Exception):
    """Simulated failure in the middle of training."""


class CrashingToy(ToyTask):
    """The toy task, raising :class:`Crash` at the ``after + 1``-th training batch."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls = after, 0

    def forward_loss(self, model, batch):
        if model.training:
            self.calls += 1
            if self.calls > self.after:
                raise Crash
        return super().forward_loss(model, batch)


class ScriptedToy(ToyTask):
    """The toy task whose validation returns a scripted metric sequence, one value per epoch."""

    def __init__(self, values: list[float]) -> None:
        super().__init__()
        self.values, self.epoch = values, 0

    def validate(self, model, loader):
        self.epoch += 1
        return {"loss": self.values[self.epoch - 1], "acc": -self.values[self.epoch - 1]}


# ------------------------------------------------------------------------------------------------


def test_trainer_config_fields_all_documented():
    docs = field_docs(TrainerConfig)
    missing = [k for k in dotted_keys(TrainerConfig) if not docs.get(k)]
    assert missing == []


def test_fit_writes_experiment_files(tmp_path):
    exp = tmp_path / "exp"
    best = fit(exp, "trainer.max_epochs=3")
    assert best == exp / "checkpoints" / "best.pt"
    assert load_config(ToyTask.Config, exp / "config.yaml", []) == toy_cfg("trainer.max_epochs=3")
    log = (exp / "train.log").read_text()
    assert "epoch 3 done (step 24)" in log and "training finished: reached max_epochs=3" in log

    records = list(read_metrics(exp / "metrics.jsonl"))
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(2, 25, 2))
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert [r["epoch"] for r in epochs] == [1, 2, 3]
    assert epochs[-1]["valid/loss"] < 0.8 * epochs[0]["valid/loss"]  # it learns
    assert (exp / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # keep_last=2 (the toy default); latest.pt -> newest; best.pt holds the best epoch's weights
    assert [p.name for p in list_checkpoints(exp / "checkpoints")] == ["ckpt-e0002-s00000016.pt",
                                                                       "ckpt-e0003-s00000024.pt"]
    assert latest_checkpoint(exp / "checkpoints").name == "ckpt-e0003-s00000024.pt"
    best_epoch = min(epochs, key=lambda r: r["valid/loss"])["epoch"]
    assert torch.load(best, weights_only=True)["epoch"] == best_epoch
    assert sorted(os.listdir(exp / "checkpoints")) == ["best.pt", "ckpt-e0002-s00000016.pt",
                                                        "ckpt-e0003-s00000024.pt", "latest.pt"]


def test_same_seed_same_weights_other_seed_differs(tmp_path):
    fit(tmp_path / "a", "trainer.max_epochs=1")
    fit(tmp_path / "b", "trainer.max_epochs=1")
    fit(tmp_path / "c", "trainer.max_epochs=1", "trainer.seed=1")
    wa, wb, wc = (weights(tmp_path / x / "checkpoints" / "latest.pt") for x in "abc")
    assert same_weights(wa, wb)
    assert not same_weights(wa, wc)


def test_crash_mid_epoch_then_resume_equals_uninterrupted(tmp_path):
    # accum_grad=2: 4 updates/epoch; checkpoints every 3 updates (mid-epoch) and at epoch ends;
    # a decaying schedule so that the scheduler step must be restored too.
    ov = ["trainer.max_epochs=4", "trainer.accum_grad=2", "trainer.save_interval_steps=3",
          "trainer.scheduler=warmup_linear", "trainer.warmup_steps=3", "trainer.log_interval=1",
          "trainer.keep_last=0"]
    fit(tmp_path / "ref", *ov)

    exp = tmp_path / "crashed"
    with pytest.raises(Crash):
        fit(exp, *ov, task=CrashingToy(after=21))  # batch 21 = 3rd batch of epoch 3, step 10
    latest = torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["state"]
    assert (latest["step"], latest["epoch"], latest["batches_done"]) == (9, 2, 2)  # mid-epoch
    assert max(s for s, _ in train_losses(exp)) == 10  # a record past the checkpoint...

    stale = exp / "checkpoints" / ".ckpt-e0003-s00000012.pt.x1y2.tmp"  # as if killed while saving
    stale.write_bytes(b"partial")
    fit(exp, *ov)
    assert "resuming from" in (exp / "train.log").read_text()
    assert not stale.exists()
    for name in ("latest.pt", "best.pt"):
        assert same_weights(weights(exp / "checkpoints" / name), weights(tmp_path / "ref" / "checkpoints" / name))
    ref_opt = torch.load(tmp_path / "ref" / "checkpoints" / "latest.pt", weights_only=True)["optimizer"]
    got_opt = torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["optimizer"]
    assert all(torch.equal(got_opt["state"][i]["exp_avg_sq"], ref_opt["state"][i]["exp_avg_sq"])
               for i in ref_opt["state"])
    assert train_losses(exp) == train_losses(tmp_path / "ref")  # ...dropped, then redone identically
    assert [p.name for p in list_checkpoints(exp / "checkpoints")] == \
        [p.name for p in list_checkpoints(tmp_path / "ref" / "checkpoints")]


def test_sigkill_then_rerun_equals_uninterrupted(tmp_path, capsys):
    """Really kill -9 `speechkit-train toy` after a mid-epoch checkpoint appears, re-run, compare.

    The re-run goes through the same CLI entry point in-process (saves a second interpreter start).
    """
    args = ["--trainer.max_epochs", "3", "--trainer.save_interval_steps", "2", "--trainer.num_threads", "1",
            "--data.num_train", "96", "--data.num_valid", "16", "--trainer.batch_size", "8",
            "--trainer.log-interval=1"]
    exp = tmp_path / "killed"
    cmd = [sys.executable, "-m", "speechkit.bin.train", "toy", "--exp-dir", str(exp), *args,
           "--data.step_delay", "0.02"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    # 12 batches/epoch: wait for a checkpoint in the middle of epoch 2 or 3, then kill.
    link = exp / "checkpoints" / "latest.pt"
    deadline = time.monotonic() + 120
    killed_at = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            parsed = parse_checkpoint_name(os.readlink(link))
        except OSError:
            parsed = None
        if parsed and parsed[1] > 12 and parsed[1] % 12:
            proc.send_signal(signal.SIGKILL)
            killed_at = parsed
            break
        time.sleep(0.005)
    proc.wait(timeout=60)
    assert killed_at is not None and proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]

    from speechkit.bin.train import main

    assert main(cmd[3:]) == 0
    resumed_from = exp / "checkpoints" / f"ckpt-e{killed_at[0]:04d}-s{killed_at[1]:08d}.pt"
    assert f"resuming from {resumed_from}: step {killed_at[1]}, " in (exp / "train.log").read_text()

    # Reference: the same training uninterrupted (step_delay only slows the run down).
    ref = tmp_path / "ref"
    cfg = load_config(ToyTask.Config, None, [f"{a[2:]}={b}" for a, b in zip(args[0::2], args[1::2])
                                             if "=" not in a] + ["trainer.log_interval=1"])
    Trainer(ToyTask(), cfg, ref).fit()
    for name in ("latest.pt", "best.pt"):
        assert same_weights(weights(exp / "checkpoints" / name), weights(ref / "checkpoints" / name))
    assert torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["state"]["step"] == 36
    assert train_losses(exp) == train_losses(ref)


def test_early_stopping_on_scripted_metric(tmp_path):
    # best at epochs 1, 2, 4; epochs 5, 6, 7 do not improve -> stop after 7 with patience 3
    values = [5.0, 4.0, 4.5, 3.0, 3.5, 3.2, 3.1, 1.0, 0.5, 0.1]
    exp = tmp_path / "es"
    best = fit(exp, "trainer.max_epochs=10", "trainer.patience=3", task=ScriptedToy(values))
    state = torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["state"]
    assert (state["epoch"], state["best_epoch"], state["best_value"], state["bad_epochs"]) == (7, 4, 3.0, 3)
    assert torch.load(best, weights_only=True)["epoch"] == 4
    epochs = [r for r in read_metrics(exp / "metrics.jsonl") if r["kind"] == "epoch"]
    assert [r["best"] for r in epochs] == [True, True, False, True, False, False, False]
    assert "early stopping: valid/loss did not improve for 3 epochs" in (exp / "train.log").read_text()

    # Re-running is a no-op; raising the patience continues from where it stopped.
    assert fit(exp, "trainer.max_epochs=10", "trainer.patience=3", task=ScriptedToy(values)) == best
    assert "training already finished (early stopping" in (exp / "train.log").read_text()

    # best_mode=max on valid/acc (= -loss): same choices
    exp2 = tmp_path / "es_max"
    fit(exp2, "trainer.max_epochs=10", "trainer.patience=3", "trainer.best_metric=valid/acc",
        "trainer.best_mode=max", task=ScriptedToy(values))
    assert torch.load(exp2 / "checkpoints" / "best.pt", weights_only=True)["epoch"] == 4

    # no early stopping with patience 0
    exp3 = tmp_path / "no_es"
    fit(exp3, "trainer.max_epochs=9", task=ScriptedToy(values))
    assert torch.load(exp3 / "checkpoints" / "best.pt", weights_only=True)["epoch"] == 9


def test_finished_run_returns_at_once_and_can_be_extended(tmp_path):
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=2")
    before = {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()}
    fit(exp, "trainer.max_epochs=2")
    assert {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()} == before
    assert "training already finished (reached max_epochs=2)" in (exp / "train.log").read_text()

    fit(exp, "trainer.max_epochs=4")  # constant lr: continuing == training 4 epochs at once
    fit(tmp_path / "direct", "trainer.max_epochs=4")
    assert same_weights(weights(exp / "checkpoints" / "latest.pt"),
                        weights(tmp_path / "direct" / "checkpoints" / "latest.pt"))
    assert "resuming with trainer.max_epochs changed: 2 -> 4" in (exp / "train.log").read_text()


def test_finished_run_with_other_training_settings_is_an_error(tmp_path):
    """A finished run asked for another lr would return the old model as if trained with the new one."""
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=2")
    before = {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()}
    with pytest.raises(ConfigError, match=r"key 'trainer.lr': the run saved in .* finished \(reached max_epochs=2\) "
                                          r"with 0.003, now 0.05: nothing would be trained with it"):
        fit(exp, "trainer.max_epochs=2", "trainer.lr=0.05")
    assert {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()} == before
    fit(exp, "trainer.max_epochs=2", "trainer.num_threads=2", "trainer.patience=3")  # safe keys: nothing to do
    assert {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()} == before
    fit(exp, "trainer.max_epochs=3", "trainer.lr=0.05")  # not finished at 3 epochs: the third one uses 0.05
    assert "resuming with trainer.lr changed: 0.003 -> 0.05" in (exp / "train.log").read_text()
    fit(exp, "trainer.max_epochs=2", "trainer.lr=0.05", resume=False)  # starts over, the old run kept aside
    assert len(list(exp.glob("prev-*"))) == 1


def test_changed_model_config_is_an_error_naming_the_key(tmp_path):
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1")
    with pytest.raises(ConfigError, match=r"key 'model.hidden_dim': differs from the run saved in .*"
                                          r"\(saved 32, now 16\); to start over use resume=false"):
        fit(exp, "trainer.max_epochs=2", "model.hidden_dim=16")
    with pytest.raises(ConfigError, match="key 'trainer.optimizer'"):
        fit(exp, "trainer.max_epochs=2", "trainer.optimizer=sgd")

    # A field added to the schema after the run was saved does not block resuming.
    ckpt_path = latest_checkpoint(exp / "checkpoints")
    ckpt = torch.load(ckpt_path, weights_only=True)
    del ckpt["config"]["model"]["dropout"]
    torch.save(ckpt, ckpt_path)
    fit(exp, "trainer.max_epochs=2")
    assert "model.dropout is not in the saved config" in (exp / "train.log").read_text()


class DirToy(ToyTask):
    """The toy task, declaring that it reads ``feats.scp`` and ``utt2spk`` of ``data_dir`` (data.train_dir)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__()
        self.data_dir = data_dir

    def data_inputs(self, cfg):
        return {"data.train_dir": DataInput(str(self.data_dir), ("feats.scp", "utt2spk"))}


def make_data_dir(d: Path, utts: int = 3, ark: Path | None = None) -> Path:
    """A data dir whose feats.scp points (absolute paths) into ``ark`` (default ``d/data/feats.ark``)."""
    ark = ark or d / "data" / "feats.ark"
    ark.parent.mkdir(parents=True, exist_ok=True)
    if not ark.exists():
        ark.write_bytes(bytes(range(256)) * 4)
    (d / "feats.scp").write_text("".join(f"u{i} {ark}:{10 * i}\n" for i in range(utts)))
    (d / "utt2spk").write_text("".join(f"u{i} s\n" for i in range(utts)))
    return d


def test_changed_data_is_refused_naming_key_path_and_change(tmp_path):
    data, exp = make_data_dir(tmp_path / "train"), tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    ckpts = {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()}
    # the same data: "already finished", nothing touched
    fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    assert "training already finished" in (exp / "train.log").read_text()

    # another split under the same path (issue 23 item 2): the finished run is not reused
    make_data_dir(data, utts=4)
    with pytest.raises(ConfigError, match=rf"^key 'data.train_dir' \({re.escape(str(data))}\): its feats.scp changed "
                                          rf"\(3 -> 4 utterances\) since the run in {re.escape(str(exp))} was trained "
                                          r"on it \(saved in .*ckpt-e0001.*\); to train on these data use a new "
                                          r"exp_dir, or resume=false"):
        fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    # ... nor resumed
    with pytest.raises(ConfigError, match="its feats.scp changed"):
        fit(exp, "trainer.max_epochs=2", task=DirToy(data))
    make_data_dir(data, utts=3)
    (data / "utt2spk").write_text("u0 s\nu1 s\nu2 t\n")
    with pytest.raises(ConfigError, match=r"its utt2spk changed \(other content, 3 utterances as before\)"):
        fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    # same tables, other features in the ark they point to
    make_data_dir(data, utts=3)
    (data / "data" / "feats.ark").write_bytes(bytes(range(255, -1, -1)) * 4)
    with pytest.raises(ConfigError, match="the data its feats.scp points to changed"):
        fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    assert {p.name: p.stat().st_mtime_ns for p in (exp / "checkpoints").iterdir()} == ckpts


def test_moved_data_dir_is_not_a_change(tmp_path):
    data, exp = make_data_dir(tmp_path / "a" / "train"), tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    # the dir and its ark moved elsewhere, feats.scp rewritten to the new (absolute) ark path
    moved = tmp_path / "b" / "train"
    moved.mkdir(parents=True)
    (moved / "data").mkdir()
    shutil.move(str(data / "data" / "feats.ark"), str(moved / "data" / "feats.ark"))
    make_data_dir(moved)
    shutil.rmtree(tmp_path / "a")
    fit(exp, "trainer.max_epochs=2", task=DirToy(moved))
    log = (exp / "train.log").read_text()
    assert "resuming from" in log and "epoch 2 done" in log and "WARNING" not in log


def test_checkpoint_without_data_fingerprint_resumes_with_a_warning(tmp_path):
    data, exp = make_data_dir(tmp_path / "train"), tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1", task=DirToy(data))
    ckpt_path = latest_checkpoint(exp / "checkpoints")
    ckpt = torch.load(ckpt_path, weights_only=True)
    assert ckpt["data_fingerprint"]["data.train_dir"]["files"]["utt2spk"]["keys"] == 3
    del ckpt["data_fingerprint"]
    torch.save(ckpt, ckpt_path)
    make_data_dir(data, utts=4)
    fit(exp, "trainer.max_epochs=2", task=DirToy(data))
    assert re.search(r"saved without a fingerprint of its data .*: cannot check that data.train_dir still hold",
                     (exp / "train.log").read_text())
    # the new checkpoints record the data they were trained on
    assert torch.load(latest_checkpoint(exp / "checkpoints"), weights_only=True)[
        "data_fingerprint"]["data.train_dir"]["files"]["utt2spk"]["keys"] == 4


def test_default_data_inputs_are_the_configs_data_dirs():
    from speechkit.train.task import KALDI_TABLES, Task

    @dataclasses.dataclass
    class Data:
        train_dir: str = "dump/train"
        valid_dir: str = ""
        window: int = 3

    @dataclasses.dataclass
    class Cfg:
        data: Data = dataclasses.field(default_factory=Data)

    assert Task().data_inputs(Cfg()) == {"data.train_dir": DataInput("dump/train", KALDI_TABLES)}
    assert ToyTask().data_inputs(toy_cfg()) == {}


def test_resume_false_starts_over_keeping_the_old_run(tmp_path):
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1")
    old = weights(exp / "checkpoints" / "latest.pt")
    fit(exp, "trainer.max_epochs=1", "model.hidden_dim=16", resume=False)
    prev = [p for p in exp.iterdir() if p.name.startswith("prev-")]
    assert len(prev) == 1
    assert same_weights(weights(prev[0] / "checkpoints" / "latest.pt"), old)
    assert weights(exp / "checkpoints" / "latest.pt")["conv.weight"].shape[0] == 16
    assert len([r for r in read_metrics(exp / "metrics.jsonl") if r["kind"] == "epoch"]) == 1


def test_truncated_latest_checkpoint_is_a_clear_error(tmp_path, capsys):
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1")
    target = latest_checkpoint(exp / "checkpoints")
    data = target.read_bytes()
    target.write_bytes(data[: len(data) - 100])
    with pytest.raises(CheckpointError, match=f"^{target}: cannot load checkpoint, file is truncated or corrupt"):
        fit(exp, "trainer.max_epochs=2")

    from speechkit.bin.train import main
    rc = main(["toy", "--exp-dir", str(exp), *[f"--{o}" for o in SMALL], "--trainer.max_epochs", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert err[-1].startswith("speechkit-train: error: ") and target.name in err[-1] and "truncated" in err[-1]


def test_second_trainer_in_same_exp_dir_is_refused(tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
        "f.write('4242\\n'); f.flush(); print('locked', flush=True); time.sleep(60)"), str(exp / ".lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ExperimentBusyError, match=r"another training process \(pid 4242\)"):
            fit(exp, "trainer.max_epochs=1")
    finally:
        holder.kill()
        holder.wait()
    fit(exp, "trainer.max_epochs=1")  # the lock died with its holder


def test_max_steps_stops_mid_epoch(tmp_path):
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=5", "trainer.max_steps=11")
    state = torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["state"]
    assert (state["step"], state["epoch"], state["batches_done"]) == (11, 1, 3)
    last = [r for r in read_metrics(exp / "metrics.jsonl") if r["kind"] == "epoch"][-1]
    assert last["partial"] is True and last["step"] == 11 and "valid/loss" in last


def test_best_metric_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="'valid/wer' is not among the metrics of task 'toy': train/loss, valid/loss"):
        fit(tmp_path / "a", "trainer.max_epochs=1", "trainer.best_metric=valid/wer")
    with pytest.raises(ConfigError, match="needs a validation set"):
        fit(tmp_path / "b", "trainer.max_epochs=1", "data.num_valid=0")
    fit(tmp_path / "c", "trainer.max_epochs=1", "data.num_valid=0", "trainer.best_metric=train/loss")
    assert (tmp_path / "c" / "checkpoints" / "best.pt").exists()


def test_non_finite_gradients_skip_the_update(tmp_path):
    class NanOnce(ToyTask):
        calls = 0

        def forward_loss(self, model, batch):
            loss, stats = super().forward_loss(model, batch)
            if model.training:
                NanOnce.calls += 1
                if NanOnce.calls == 3:
                    loss = loss * float("nan")
            return loss, stats

    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1", task=NanOnce())
    ckpt = torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["state"]["skipped_updates"] == 1 and ckpt["state"]["step"] == 8
    assert all(torch.isfinite(v).all() for v in ckpt["model"].values())


def test_logged_stats_are_means_over_their_interval_and_epoch(tmp_path):
    class Counting(ToyTask):
        calls = 0

        def forward_loss(self, model, batch):
            loss, stats = super().forward_loss(model, batch)
            if model.training:
                Counting.calls += 1
                stats["call"] = Counting.calls
            return loss, stats

    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=2", "trainer.log_interval=2", task=Counting())  # 8 equal batches/epoch
    records = list(read_metrics(exp / "metrics.jsonl"))
    assert [r["call"] for r in records if r["kind"] == "train"] == [2 * k - 0.5 for k in range(1, 9)]
    assert [r["train/call"] for r in records if r["kind"] == "epoch"] == [4.5, 12.5]


def test_load_model_rebuilds_best(tmp_path):
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=2", "model.hidden_dim=12")
    model, cfg = load_model(exp)
    assert cfg == toy_cfg("trainer.max_epochs=2", "model.hidden_dim=12")
    assert not model.training
    assert same_weights(model.state_dict(), weights(exp / "checkpoints" / "best.pt"))
    first = list_checkpoints(exp / "checkpoints")[0]
    model1, _ = load_model(first, task="toy")
    assert same_weights(model1.state_dict(), weights(first))
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "nothing_here")


def test_task_builds_model_from_file(tmp_path):
    """The task itself rebuilds its model (ESPnet2's Task.build_model_from_file), as load_model does."""
    exp = tmp_path / "exp"
    fit(exp, "trainer.max_epochs=1", "model.hidden_dim=12")
    model, cfg = ToyTask().build_model_from_file(exp)
    assert cfg == toy_cfg("trainer.max_epochs=1", "model.hidden_dim=12") and not model.training
    assert same_weights(model.state_dict(), weights(exp / "checkpoints" / "best.pt"))
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        ToyTask().build_model_from_file(tmp_path / "nothing_here")


def test_move_to_device_nested():
    @dataclasses.dataclass
    class B:
        x: torch.Tensor
        n: int

    batch = {"a": [torch.ones(1), (torch.zeros(2), "s")], "b": B(torch.ones(3), 4)}
    moved = move_to_device(batch, "cpu")
    assert torch.equal(moved["a"][1][0], torch.zeros(2)) and moved["a"][1][1] == "s" and moved["b"].n == 4


# ------------------------------------------------------------------------------------------------ CLI


def test_cli_print_config_help_and_errors(tmp_path, capsys):
    from speechkit.bin.train import main, split_overrides

    assert split_overrides(["toy", "--trainer.max-epochs", "3", "--model.hidden_dim=7", "--exp-dir", "x",
                            "--trainer.lr", "-0.5"]) == \
        (["toy", "--exp-dir", "x"], ["trainer.max_epochs=3", "model.hidden_dim=7", "trainer.lr=-0.5"])

    assert main(["toy", "--print-config", "--model.hidden-dim", "7"]) == 0
    out = capsys.readouterr().out
    data = yaml.safe_load(out)
    assert data == to_dict(load_config(ToyTask.Config, None, ["model.hidden_dim=7"]))
    assert "# units of the hidden layer.\n  hidden_dim: 7" in out
    assert "# adam | adamw (decoupled weight decay" in out

    with pytest.raises(SystemExit):
        main(["--help"])
    assert re.search(r"tasks: (\w+, )*toy", capsys.readouterr().out)

    conf = tmp_path / "train.yaml"
    conf.write_text("trainer:\n  max_epoch: 3\n")
    assert main(["toy", "--config", str(conf), "--exp-dir", str(tmp_path / "e")]) == 1
    assert capsys.readouterr().err.strip() == (f"speechkit-train: error: {conf}: unknown key 'trainer.max_epoch' "
                                               f"(did you mean 'trainer.max_epochs'?)")
    assert main(["toy", "--exp-dir", str(tmp_path / "e"), "--trainer.optimizer", "adagrad"]) == 1
    assert "choose from: 'adam', 'adamw', 'sgd'" in capsys.readouterr().err
    assert main(["toyy", "--exp-dir", str(tmp_path / "e")]) == 1
    assert re.search(r"unknown task 'toyy' \(did you mean 'toy'\?\); known tasks: (\w+, )*toy", capsys.readouterr().err)
    assert main(["toy", "--trainer.lr"]) == 1
    assert "needs a value" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_registry():
    task = get_task("toy")
    assert isinstance(task, ToyTask) and task.name == "toy"
    with pytest.raises(ConfigError, match=r"known tasks: (\w+, )*toy"):
        get_task("nope")


def test_warmup_longer_than_the_planned_updates_is_capped(tmp_path, caplog):
    # 8 updates planned (1 epoch of 8 batches) with 50 warm-up steps: warm up over 8 // 10 = 0 updates
    # (a constant start, then the cosine decay) instead of "needs total_steps > warmup_steps"
    fit(tmp_path / "e", "trainer.max_epochs=1", "trainer.scheduler=warmup_cosine", "trainer.warmup_steps=50",
        "trainer.lr=0.1")
    assert "warming up over 0" in caplog.text
    import math

    recs = [r for r in read_metrics(tmp_path / "e" / "metrics.jsonl") if r["kind"] == "train"]
    assert recs and all(r["lr"] == pytest.approx(0.05 * (1 + math.cos(math.pi * r["step"] / 8))) for r in recs)
