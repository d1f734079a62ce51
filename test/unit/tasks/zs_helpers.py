"""Tiny on-disk data for the vqvae / inverter task tests and the extract-units / resynthesize CLI tests.

Not a test module: test/unit/conftest.py registers it, the tests say ``import zs_helpers as zs``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from speechkit.features.cmvn_stats import compute_cmvn_stats
from speechkit.features.io import ark_scp_writer
from speechkit.utils.fileio import write_table

DIM = 6
STRIDE = 4

# a linear magnitude spectrogram front end with few bins (n_fft 16 -> 9 bins), 5 ms hop at 1.6 kHz
SPEC_CONF = {"type": "spectrogram", "sample_rate": 1600, "n_fft": 16, "hop_length": 8, "win_length": 16,
             "window": "hann", "center": True, "pad_mode": "constant", "log": False, "log_floor": 1e-5}
SPEC_BINS = 9


def write_feats_dir(path: Path, lengths: dict[str, int], dim: int = DIM, seed: int = 0, cmvn: bool = True,
                    feats: dict[str, np.ndarray] | None = None, conf: dict | None = None) -> Path:
    """A data dir with random (or given) features: feats.scp/ark, utt2spk (speaker = id before '_'),
    utt2num_frames, frame_shift (0.01), optional feats.yaml, per-speaker cmvn.scp."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    mats = {}
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in sorted(lengths):
            m = feats[u] if feats is not None else (rng.normal(size=(lengths[u], dim)) * 2 + 1).astype(np.float32)
            mats[u] = m
            w(u, m)
    write_table(path / "utt2spk", {u: u.split("_")[0] for u in lengths})
    spk2utt: dict[str, list[str]] = {}
    for u in sorted(lengths):
        spk2utt.setdefault(u.split("_")[0], []).append(u)
    write_table(path / "spk2utt", spk2utt)
    write_table(path / "utt2num_frames", {u: len(m) for u, m in mats.items()})
    (path / "frame_shift").write_text("0.01\n")
    if conf is not None:
        (path / "feats.yaml").write_text(yaml.safe_dump(conf))
    if cmvn:
        compute_cmvn_stats(path, per_speaker=True)
    return path


def vqvae_overrides(train_dir: Path, valid_dir: Path | None, **extra) -> list[str]:
    """Overrides of a tiny VQ-VAE (DIM inputs, stride 4, K = 8) trained for 2 epochs on one thread."""
    o = {
        "data.train_dir": str(train_dir), "data.valid_dir": str(valid_dir) if valid_dir else "''", "data.cmvn": "speaker",
        "model.input_dim": DIM, "model.num_speakers": 2, "model.speaker_dim": 4, "model.stride": STRIDE,
        "model.encoder_dim": 16, "model.encoder_blocks_per_stage": 1, "model.attention_heads": 2, "model.ff_dim": 16,
        "model.codebook_size": 8, "model.codebook_dim": 4, "model.decoder_dim": 16,
        "model.decoder_layers_per_stage": 1, "model.dropout": 0.0,
        "trainer.max_epochs": 2, "trainer.batch_size": 4, "trainer.num_threads": 1, "trainer.device": "cpu",
        "trainer.log_interval": 1, "trainer.lr": 3e-3,
    }
    o.update(extra)
    return [f"{k}={v}" for k, v in o.items()]


def train(task_name: str, overrides: list[str], exp_dir: Path):
    """Train ``task_name`` with ``overrides`` into ``exp_dir``; returns (task, cfg, best checkpoint)."""
    from speechkit.tasks import get_task
    from speechkit.train import Trainer
    from speechkit.utils.config import load_config

    task = get_task(task_name)
    cfg = load_config(task.Config, None, overrides)
    best = Trainer(task, cfg, exp_dir).fit()
    return task, cfg, best


def two_speaker_lengths(n_per_spk: int = 6, base: int = 20) -> dict[str, int]:
    return {f"s{s}_u{i:02d}": base + 3 * i + s for s in (1, 2) for i in range(n_per_spk)}
