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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset

from speechkit.bin.train import _strip_launch_options, num_processes
from speechkit.train import Task, Trainer, TrainerConfig
from speechkit.train.batching import shard_batches, slice_batch
from speechkit.train.distributed import combine_weighted_stats
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
    with pytest.raises(ConfigError, match="--nproc must be >= 1"):
        num_processes(0, None)
    assert _strip_launch_options(["--nproc", "2", "toy", "--ngpu=1", "--exp-dir", "x", "--trainer.lr", "1"]) == \
        ["toy", "--exp-dir", "x", "--trainer.lr", "1"]


# ------------------------------------------------------------------------------- tiny tasks

class ListDataset(Dataset):
    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]

    def lengths(self) -> list[int]:
        return [len(it["feats"]) for it in self.items]


def _pad(items: list[dict]) -> dict:
    feats = [it["feats"] for it in items]
    return {"feats": torch.nn.utils.rnn.pad_sequence(feats, batch_first=True),
            "lengths": torch.tensor([len(x) for x in feats])}


def _vqvae_trainer() -> TrainerConfig:
    # SGD, not Adam: the attention key biases get gradients that are zero in exact arithmetic (softmax
    # ignores them) but ~1e-9 in floats, which Adam's normalisation turns into lr-sized steps of
    # random sign; the losses agree either way, the weights only when float noise stays noise.
    return TrainerConfig(max_epochs=2, batch_size=9, optimizer="sgd", lr=0.01, momentum=0.9, log_interval=1,
                         seed=3, device="cpu", best_metric="valid/loss")


@dataclass
class TinyVQVAEConfig:
    """Attributes:
        trainer: training loop.
    """

    trainer: TrainerConfig = field(default_factory=_vqvae_trainer)


class TinyVQVAETask(Task):
    """The Transformer VQ-VAE (EMA codebook, speaker-conditioned decoder) on 30 equal-length random utterances."""

    name = "tiny_vqvae"
    Config = TinyVQVAEConfig

    def build_model(self, cfg):
        from speechkit.models.vqvae import VQVAE, VQVAEConfig

        return VQVAE(VQVAEConfig.small(input_dim=6, num_speakers=3, dropout=0.0, codebook_size=16,
                                       codebook_dim=8, jitter_prob=0.0, smoothing_weight=0.1))

    def build_datasets(self, cfg):
        g = torch.Generator().manual_seed(11)
        items = [{"feats": torch.randn(24, 6, generator=g), "speaker": i % 3} for i in range(38)]
        return ListDataset(items[:30]), ListDataset(items[30:])

    def collate(self, items):
        batch = _pad(items)
        batch["speakers"] = torch.tensor([it["speaker"] for it in items])
        return batch

    def forward_loss(self, model, batch):
        out = model(batch["feats"], batch["lengths"], batch["speakers"])
        return out.losses["total"], {"recon": float(out.losses["recon"].detach()),
                                     "perplexity": float(out.stats["perplexity"])}


def _rnnt_trainer() -> TrainerConfig:
    return TrainerConfig(max_epochs=2, batch_frames=120, lr=3e-3, grad_clip=5.0, log_interval=1, seed=5,
                         device="cpu", best_metric="valid/loss")


@dataclass
class TinyRNNTConfig:
    """Attributes:
        trainer: training loop.
    """

    trainer: TrainerConfig = field(default_factory=_rnnt_trainer)


class TinyRNNTTask(Task):
    """A multi-softmax RNN-T over two languages; one language per batch (language_batches), uneven lengths."""

    name = "tiny_rnnt"
    Config = TinyRNNTConfig
    find_unused_parameters = True  # the other language's embedding/joint get no gradient
    VOCAB = {"aa": 7, "bb": 5}

    def build_model(self, cfg):
        from speechkit.models.rnnt import RNNT, RNNTConfig

        return RNNT(RNNTConfig(vocab_sizes=dict(self.VOCAB), variant="multisoftmax", input_dim=10,
                               encoder_layers=2, encoder_hidden=24, encoder_proj=0, pred_layers=1, pred_hidden=16,
                               pred_proj=0, embed_dim=8, joint_dim=16, dropout=0.0))

    def build_datasets(self, cfg):
        rng = np.random.default_rng(4)
        items = []
        for i in range(32):
            lang = "aa" if i % 2 == 0 else "bb"
            t, u = int(rng.integers(20, 31)), int(rng.integers(2, 7))
            items.append({"utt": f"u{i:02d}", "lang": lang, "feats": torch.tensor(rng.normal(size=(t, 10)), dtype=torch.float32),
                          "targets": torch.tensor(rng.integers(1, self.VOCAB[lang], size=u))})
        return ListDataset(items[:24]), ListDataset(items[24:])

    def make_batches(self, dataset, cfg, epoch, seed):
        from speechkit.models.rnnt import language_batches

        index = {it["utt"]: i for i, it in enumerate(dataset.items)}
        schedule = language_batches({it["utt"]: it["lang"] for it in dataset.items},
                                    {it["utt"]: len(it["feats"]) for it in dataset.items},
                                    cfg.trainer.batch_frames, seed=seed, epoch=epoch)
        return [[index[u] for u in utts] for _, utts in schedule]

    def collate(self, items):
        batch = _pad(items)
        batch["targets"] = torch.nn.utils.rnn.pad_sequence([it["targets"] for it in items], batch_first=True)
        batch["target_lengths"] = torch.tensor([len(it["targets"]) for it in items])
        batch["lang"] = [it["lang"] for it in items]
        return batch

    def forward_loss(self, model, batch):
        out = model(batch["feats"], batch["lengths"], batch["targets"], batch["target_lengths"], batch["lang"])
        return out["total"], {"rnnt": float(out["rnnt"].detach())}


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


def _scenarios(root: Path, distributed: bool) -> None:
    """What each side trains; with ``distributed`` also the resume scenario (two processes only)."""
    from speechkit.tasks.toy import ToyTask

    _run(ToyTask(), _toy_cfg(accum_grad=2), root / "toy")  # DDP's no_sync on the first batch of each group
    _run(TinyVQVAETask(), TinyVQVAETask.Config(), root / "vqvae")
    _run(TinyRNNTTask(), TinyRNNTTask.Config(), root / "rnnt")
    if distributed:  # with dropout: every rank's random stream must come back on resume
        _run(ToyTask(), _toy_dropout_cfg(), root / "straight")
        _run(ToyTask(), _toy_dropout_cfg(max_steps=9), root / "resumed")  # stops inside epoch 2
        _run(ToyTask(), _toy_dropout_cfg(), root / "resumed")


def _worker(rank: int, world: int, init_file: str, root: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        _scenarios(Path(root), distributed=True)
    finally:
        dist.destroy_process_group()


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
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(r, 2, str(root / "init"), str(root / "two"))) for r in range(2)]
    for p in procs:
        p.start()
    _scenarios(root / "one", distributed=False)  # meanwhile, the single-process reference here
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


def test_vqvae_codebook_and_rnnt_batches(ddp_runs):
    one, two = ddp_runs
    cb1, cb2 = _weights(one / "vqvae")["quantizer.codebook"], _weights(two / "vqvae")["quantizer.codebook"]
    assert not torch.equal(cb1, _initial_codebook()) and torch.allclose(cb1, cb2, atol=ATOL)
    steps = [r["step"] for r in _metrics(one / "rnnt") if r["kind"] == "train"]
    assert steps == list(range(1, 13))  # 2 epochs x 6 single-language batches, none skipped


def _initial_codebook() -> torch.Tensor:
    from speechkit.train.trainer import seed_everything

    seed_everything(_vqvae_trainer().seed)
    return TinyVQVAETask().build_model(None).quantizer.codebook.clone()


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
