"""Distributed data parallel training: two gloo processes train like one process on the same global batches.

Equivalence tests run the real :class:`~speechkit.train.Trainer` in two spawned CPU processes (gloo)
and in this process, same config and seed, and compare every logged loss and the final weights.
Stated tolerance: relative 1e-5 on losses and 1e-5 absolute on parameters (gradient all-reduce only
reorders float sums; measured differences are ~1e-7). Exactness needs what the test data give:
no dropout/jitter (per-rank random streams) and, for frame-normalized losses (toy, VQ-VAE),
utterances of equal length; the RNN-T loss is a mean over utterances, so its utterances vary.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from speechkit.train.distributed import num_processes
from speechkit.train.distributed import strip_launch_options as _strip_launch_options
from speechkit.train import Task, Trainer, TrainerConfig
from speechkit.train.batching import shard_batches, slice_batch
from speechkit.train.distributed import combine_weighted_stats, end_distributed_session
from speechkit.utils.cli import ConfigError

RTOL, ATOL = 1e-5, 1e-5


# ------------------------------------------------------------------------------- pure functions


def test_slice_batch_partitions_contiguously():
    for n in (2, 5, 16, 17):
        batch = list(range(100, 100 + n))
        for world in (1, 2, 3):
            if n < world:
                continue
            parts = [slice_batch(batch, r, world) for r in range(world)]
            assert sum(parts, []) == batch
            assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert slice_batch([7, 8, 9], 0, 2) == [7] and slice_batch([7, 8, 9], 1, 2) == [8, 9]
    with pytest.raises(ValueError, match="rank 2 out of range"):
        slice_batch([1, 2], 2, 2)


def test_shard_batches_without_dropping():
    batches = [[i] for i in range(5)]
    assert shard_batches(batches, 1, 2) == [[1], [3]]
    assert shard_batches(batches, 0, 2, even=False) == [[0], [2], [4]]
    assert shard_batches(batches, 1, 2, even=False) == [[1], [3]]


def test_combine_weighted_stats():
    stats, total = combine_weighted_stats([({"loss": 1.0, "a": 2.0}, 1), ({"loss": 4.0}, 3), ({}, 0)])
    assert total == 4 and stats == {"loss": (1.0 + 12.0) / 4, "a": 2.0}


def test_launch_options():
    assert num_processes(1, None) == 1 and num_processes(3, 0) == 3 and num_processes(1, 2) == 2
    with pytest.raises(ConfigError, match="disagree"):
        num_processes(3, 2)
    with pytest.raises(ConfigError, match="^nproc must be >= 1"):
        num_processes(0, None)
    assert _strip_launch_options(["--nproc", "2", "toy", "--ngpu=1", "--exp-dir", "x", "--trainer.lr", "1"]) == \
        ["toy", "--exp-dir", "x", "--trainer.lr", "1"]


# ------------------------------------------------------------------------------- tiny data on disk

def _write_feats(path: Path, mats: dict[str, np.ndarray]) -> None:
    from speechkit.features.io import ark_scp_writer
    from speechkit.utils.fileio import write_table

    path.mkdir(parents=True, exist_ok=True)
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in sorted(mats):
            w(u, mats[u])
    write_table(path / "utt2spk", {u: u.split("_")[0] for u in mats})
    write_table(path / "utt2num_frames", {u: len(m) for u, m in mats.items()})


def _make_data(root: Path) -> None:
    """VQ-VAE: 30 + 8 utterances of 24 frames x 6 dims, 3 speakers. RNN-T: two languages with
    disjoint alphabets, 12 + 4 utterances each of 40-70 frames x 16 dims (stacked 8 x 3)."""
    from speechkit.features.cmvn import accumulate_stats
    from speechkit.features.io import ark_scp_writer
    from speechkit.text.units import MultilingualUnits
    from speechkit.utils.fileio import write_table

    rng = np.random.default_rng(7)
    for name, n in (("train", 30), ("dev", 8)):
        _write_feats(root / "vq" / name, {f"s{i % 3}_{name}{i:02d}": (rng.normal(size=(24, 6)) * 2 + 1).astype(np.float32)
                                          for i in range(n)})
    texts: dict[str, list[str]] = {}
    for name, n in (("train", 12), ("dev", 4)):
        mats, text, utt2lang = {}, {}, {}
        for lang, alphabet, shift in (("aa", "abcde", 1.0), ("bb", "vwxyz", -1.0)):
            for i in range(n):
                u = f"s{i % 2}_{lang}_{name}{i:02d}"
                mats[u] = (rng.normal(size=(int(rng.integers(40, 71)), 16)) + shift).astype(np.float32)
                text[u] = " ".join("".join(rng.choice(list(alphabet), 3)) for _ in range(1 + i % 2))
                utt2lang[u] = lang
                texts.setdefault(lang, []).append(text[u]) if name == "train" else None
        d = root / "asr" / name
        _write_feats(d, mats)
        write_table(d / "text", text)
        write_table(d / "utt2lang", utt2lang)
        if name == "train":
            with ark_scp_writer(d / "cmvn.ark", d / "cmvn.scp") as w:
                w("global", accumulate_stats(mats.values()))
    MultilingualUnits.build(texts, "char_wb").save(root / "asr" / "lang")


def _vqvae(data: Path):
    """The vqvae task (Transformer encoder, EMA codebook, speaker-conditioned decoder, its own validate).

    SGD, not Adam: the attention key biases get gradients that are zero in exact arithmetic (softmax
    ignores them) but ~1e-9 in floats, which Adam's normalisation turns into lr-sized steps of random
    sign; the losses agree either way, the weights only while float noise stays noise.
    """
    from speechkit.tasks.vqvae import VQVAETask
    from speechkit.utils.config import load_config

    task = VQVAETask()
    return task, load_config(task.Config, None, [
        f"data.train_dir={data}/vq/train", f"data.valid_dir={data}/vq/dev", "data.cmvn=none", "data.crop_frames=0",
        "model.input_dim=6", "model.num_speakers=3", "model.speaker_dim=4", "model.stride=4", "model.encoder_dim=16",
        "model.encoder_blocks_per_stage=1", "model.attention_heads=2", "model.ff_dim=16", "model.codebook_size=16",
        "model.codebook_dim=8", "model.decoder_dim=16", "model.decoder_layers_per_stage=1", "model.dropout=0.0",
        "model.jitter_prob=0.0", "model.smoothing_weight=0.1",
        "trainer.max_epochs=2", "trainer.batch_size=9", "trainer.optimizer=sgd", "trainer.lr=0.01",
        "trainer.momentum=0.9", "trainer.log_interval=1", "trainer.seed=3", "trainer.device=cpu"])


def _rnnt(data: Path):
    """The rnnt task, multi-softmax over two languages, one language per batch, unequal lengths."""
    from speechkit.tasks.rnnt import RNNTTask
    from speechkit.utils.config import load_config

    task = RNNTTask()
    return task, load_config(task.Config, None, [
        f"data.train_dir={data}/asr/train", f"data.valid_dir={data}/asr/dev", f"data.units_dir={data}/asr/lang",
        "model.variant=multisoftmax", "model.input_dim=128", "model.encoder_layers=2", "model.encoder_hidden=24",
        "model.encoder_proj=0", "model.pred_layers=1", "model.pred_hidden=16", "model.pred_proj=0",
        "model.embed_dim=8", "model.joint_dim=16", "model.dropout=0.0",
        "trainer.max_epochs=2", "trainer.batch_frames=280", "trainer.lr=3e-3", "trainer.grad_clip=5.0",
        "trainer.scheduler=none", "trainer.warmup_steps=0", "trainer.log_interval=1", "trainer.seed=5",
        "trainer.device=cpu"])


def _toy_cfg(**trainer):
    from speechkit.tasks.toy import ToyConfig, ToyDataConfig, ToyModelConfig

    # Equal lengths (the toy loss is a mean over frames); batch_size 15 gives slices of 7 and 8.
    tc = dict(max_epochs=2, batch_size=15, lr=3e-3, log_interval=1, seed=2, device="cpu")
    tc.update(trainer)
    return ToyConfig(trainer=TrainerConfig(**tc), model=ToyModelConfig(dropout=0.0),
                     data=ToyDataConfig(num_train=96, num_valid=20, min_len=12, max_len=12))


def _toy_dropout_cfg(**trainer):
    from dataclasses import replace

    cfg = _toy_cfg(**trainer)
    return replace(cfg, model=replace(cfg.model, dropout=0.2), data=replace(cfg.data, min_len=4, max_len=20))


def _run(task: Task, cfg, exp_dir: Path) -> None:
    Trainer(task, cfg, exp_dir).fit()


def _scenarios(root: Path, data: Path, distributed: bool) -> None:
    """What each side trains; with ``distributed`` also the resume scenario (two processes only)."""
    from speechkit.tasks.toy import ToyTask

    _run(ToyTask(), _toy_cfg(accum_grad=2), root / "toy")  # DDP's no_sync on the first batch of each group
    _run(*_vqvae(data), root / "vqvae")
    _run(*_rnnt(data), root / "rnnt")
    if distributed:  # with dropout: every rank's random stream must come back on resume
        _run(ToyTask(), _toy_dropout_cfg(), root / "straight")
        _run(ToyTask(), _toy_dropout_cfg(max_steps=9), root / "resumed")  # stops inside epoch 2
        _run(ToyTask(), _toy_dropout_cfg(), root / "resumed")
        _run(ToyTask(), _toy_dropout_cfg(max_steps=9), root / "handover")  # finished by one process below


def _worker(rank: int, world: int, init_file: str, root: str, data: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        _scenarios(Path(root), Path(data), distributed=True)
    finally:
        end_distributed_session()


def _metrics(exp: Path) -> list[dict]:
    return [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]


def _weights(exp: Path) -> dict[str, torch.Tensor]:
    return torch.load(exp / "checkpoints" / "latest.pt", weights_only=True)["model"]


def _assert_same_training(one: Path, two: Path) -> None:
    m1, m2 = _metrics(one), _metrics(two)
    assert [(r["kind"], r["step"]) for r in m1] == [(r["kind"], r["step"]) for r in m2]
    for r1, r2 in zip(m1, m2):
        for k in r1:
            if k not in ("time", "lr", "kind", "epoch", "step", "best") and isinstance(r1[k], float):
                assert r2[k] == pytest.approx(r1[k], rel=RTOL, abs=1e-7), (one.name, r1["step"], k, r1[k], r2[k])
    w1, w2 = _weights(one), _weights(two)
    assert w1.keys() == w2.keys()
    for k in w1:
        assert torch.allclose(w1[k].double(), w2[k].double(), rtol=0, atol=ATOL), (one.name, k)


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    """``(one, two)``: experiment roots of the single-process and the two-process (gloo) runs."""
    import torch.multiprocessing as mp

    root = tmp_path_factory.mktemp("ddp")
    _make_data(root / "data")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(r, 2, str(root / "init"), str(root / "two"), str(root / "data")))
             for r in range(2)]
    for p in procs:
        p.start()
    _scenarios(root / "one", root / "data", distributed=False)  # meanwhile, the single-process reference here
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0, 0]
    return root / "one", root / "two"


@pytest.mark.parametrize("name", ["toy", "vqvae", "rnnt"])
def test_two_processes_train_like_one(ddp_runs, name):
    one, two = ddp_runs
    _assert_same_training(one / name, two / name)
    ckpt = torch.load(two / name / "checkpoints" / "latest.pt", weights_only=True)
    assert ckpt["world_size"] == 2 and len(ckpt["rng_ranks"]) == 2
    assert "world_size" not in torch.load(one / name / "checkpoints" / "latest.pt", weights_only=True)


def test_vqvae_codebook_validation_and_rnnt_batches(ddp_runs):
    one, two = ddp_runs
    cb1, cb2 = _weights(one / "vqvae")["quantizer.codebook"], _weights(two / "vqvae")["quantizer.codebook"]
    assert torch.allclose(cb1, cb2, atol=ATOL)
    # the vqvae task's own validate (code histogram of the whole set) ran on rank 0 alone
    v1, v2 = ([r["valid/codes_used"] for r in _metrics(d / "vqvae") if r["kind"] == "epoch"] for d in (one, two))
    assert v1 == v2 and (two / "vqvae" / "speakers").is_file()  # on_train_end on rank 0
    s1, s2 = ([r["step"] for r in _metrics(d / "rnnt") if r["kind"] == "train"] for d in (one, two))
    assert s1 == s2 and len(s1) >= 8  # no batch skipped for being too small to split


def test_resume_under_ddp_is_exact(ddp_runs):
    _, two = ddp_runs
    straight, resumed = _weights(two / "straight"), _weights(two / "resumed")
    for k in straight:
        assert torch.equal(straight[k], resumed[k]), k
    assert "resuming from" in (two / "resumed" / "train.log").read_text()

    def untimed(exp: Path) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("time", "partial")} for r in _metrics(exp)
                if not r.get("partial")]

    assert untimed(two / "straight") == untimed(two / "resumed")


def test_two_process_run_resumes_in_one(ddp_runs):
    """A checkpoint of two processes continues in one (same batches; rank 0's random streams)."""
    from speechkit.tasks.toy import ToyTask

    _, two = ddp_runs
    _run(ToyTask(), _toy_dropout_cfg(), two / "handover")
    assert "resuming a run of 2 process(es) with 1" in (two / "handover" / "train.log").read_text()
    steps = [(r["kind"], r["step"]) for r in _metrics(two / "handover") if not r.get("partial")]
    assert steps == [(r["kind"], r["step"]) for r in _metrics(two / "straight")]
    assert "world_size" not in torch.load(two / "handover" / "checkpoints" / "latest.pt", weights_only=True)


def test_speechkit_train_nproc_launches_torchrun(tmp_path):
    """End to end: `speechkit-train --nproc 2 toy` (torchrun, gloo): rank 0 alone writes, same training as one process."""
    args = ["--trainer.max_epochs", "1", "--trainer.batch_size", "15", "--trainer.lr", "3e-3", "--trainer.seed", "2",
            "--trainer.log_interval", "1", "--model.dropout", "0", "--data.num_train", "96", "--data.num_valid", "20",
            "--data.min_len", "12", "--data.max_len", "12", "--trainer.device", "cpu"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None)
    r = subprocess.run([sys.executable, "-m", "speechkit.bin.train", "--nproc", "2", "toy", "--exp-dir",
                        str(tmp_path / "two"), *args], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.count("joined the gloo process group") == 1  # rank 1 logs warnings only
    assert r.stderr.count("training finished") == 1
    log = (tmp_path / "two" / "train.log").read_text()
    assert log.count("epoch 1 done") == 1 and "2 processes" in log
    _run(__import__("speechkit.tasks.toy", fromlist=["ToyTask"]).ToyTask(), _toy_cfg(max_epochs=1), tmp_path / "one")
    _assert_same_training(tmp_path / "one", tmp_path / "two")


def test_batches_too_small_to_split_are_skipped(tmp_path, caplog):
    from speechkit.tasks.toy import ToyTask

    cfg = _toy_cfg(batch_size=8)
    task = ToyTask()
    train, _ = task.build_datasets(cfg)
    trainer = Trainer(task, cfg, tmp_path)
    full = trainer.epoch_batches(train, 1)
    trainer.rank, trainer.world_size = 0, 3
    train.xs = train.xs[:17]  # batches of 8, 8 and 1
    kept = trainer.epoch_batches(train, 1)
    assert sorted(map(len, kept)) == [8, 8] and len(full) == 12
    assert "skipping 1 of 3 batches that hold fewer utterances than the 3 processes" in caplog.text


def test_end_distributed_session(tmp_path):
    """No-op without a process group; destroys a (one-process gloo) group, which can then be re-created."""
    import torch.distributed as dist

    end_distributed_session()
    assert not dist.is_initialized()
    for i in range(2):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path}/init{i}", rank=0, world_size=1)
        assert dist.is_initialized()
        end_distributed_session()
        assert not dist.is_initialized()
