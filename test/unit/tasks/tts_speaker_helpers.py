"""Tiny multi-speaker label/WORLD-feature data dirs for the speaker-conditioned acoustic model tests
(task, speechkit-tts-synthesize, the continual driver).

Not a test module: test/unit/conftest.py registers it (``import tts_speaker_helpers as H``). Each speaker shifts
the targets of every phone by its own offset (mcep c1..c4 and lf0), so a model can only fit the
data if it uses the speaker vector.
"""
from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import yaml

from speechkit.features.io import ark_scp_writer
from speechkit.utils.fileio import write_table

NUM_PHONES = 6
LABEL_DIM = NUM_PHONES + 2  # one-hot phone, relative position in the phone, a constant
SPK_DIM = 5
WORLD_CONF = {"type": "world", "sample_rate": 16000, "frame_period": 5.0, "mcep_dim": 40, "f0_floor": 71.0,
              "f0_ceil": 800.0}


def phone_table(seed: int = 0) -> np.ndarray:
    """``(NUM_PHONES, 43)`` mean WORLD vector per phone."""
    rng = np.random.default_rng(seed)
    table = np.zeros((NUM_PHONES, 43), np.float32)
    table[:, :40] = rng.normal(scale=[2.0] + [0.5] * 39, size=(NUM_PHONES, 40))
    table[:, 40] = np.log(rng.uniform(100, 200, NUM_PHONES))
    table[:, 41] = np.array([1, 1, 0, 1, 0, 1], np.float32)
    table[:, 42] = rng.uniform(-3, 0, NUM_PHONES)
    return table


def speaker_vector(speaker: str) -> np.ndarray:
    """A unit ``(SPK_DIM,)`` vector determined by the speaker id."""
    v = np.random.default_rng(sum(speaker.encode())).normal(size=SPK_DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def utterance(rng: np.random.Generator, table: np.ndarray, speaker: str, n_phones: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``(T, LABEL_DIM)`` and speaker-dependent targets ``(T, 43)``."""
    shift = np.zeros(43, np.float32)
    shift[1:5] = 1.5 * speaker_vector(speaker)[:4]
    shift[40] = 0.3 * speaker_vector(speaker)[4]
    labs, feats = [], []
    for _ in range(n_phones):
        p = int(rng.integers(NUM_PHONES))
        dur = int(rng.integers(4, 10))
        rel = (np.arange(dur) + 0.5) / dur
        x = np.zeros((dur, LABEL_DIM), np.float32)
        x[:, p], x[:, NUM_PHONES], x[:, NUM_PHONES + 1] = 1.0, rel, 1.0
        y = np.repeat((table[p] + shift)[None], dur, axis=0)
        y[:, 1] += 0.5 * rel
        labs.append(x)
        feats.append(y)
    return np.concatenate(labs), np.concatenate(feats).astype(np.float32)


def write_speaker_dir(path: Path, speakers: dict[str, int], seed: int, table: np.ndarray | None = None,
                      tag: str = "u") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A data dir of ``speakers`` (id -> number of utterances, ids ``<spk>-<tag><nn>``): labels.scp,
    feats.scp, feats.yaml, utt2spk, utt2num_frames, frame_shift. Returns utt -> (labels, feats)."""
    table = phone_table() if table is None else table
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    data = {f"{spk}-{tag}{i:02d}": utterance(rng, table, spk, 3 + i % 3)
            for spk, n in speakers.items() for i in range(n)}
    keys = sorted(data, key=lambda u: u.encode())
    with ark_scp_writer(path / "labels.ark", path / "labels.scp") as w:
        for u in keys:
            w(u, data[u][0])
    with ark_scp_writer(path / "feats.ark", path / "feats.scp") as w:
        for u in keys:
            w(u, data[u][1])
    write_table(path / "utt2spk", {u: u.split("-")[0] for u in keys})
    write_table(path / "utt2num_frames", {u: len(v[1]) for u, v in data.items()})
    (path / "frame_shift").write_text("0.005\n")
    (path / "feats.yaml").write_text(yaml.safe_dump(WORLD_CONF))
    return data


def write_spk_embeddings(path: Path, speakers: list[str]) -> Path:
    """``path/spk_embeddings.scp`` (+ .ark) with :func:`speaker_vector` of each speaker (Kaldi vectors)."""
    path.mkdir(parents=True, exist_ok=True)
    kaldiio.save_ark(str(path / "spk_embeddings.ark"), {s: speaker_vector(s) for s in speakers},
                     scp=str(path / "spk_embeddings.scp"))
    return path / "spk_embeddings.scp"


def salad_overrides(train: Path, valid: Path, scp: Path | str, **extra) -> list[str]:
    """A tiny SALAD (embed 16, one block) trained a few epochs on CPU."""
    o = {"data.train_dir": str(train), "data.valid_dir": str(valid), "data.speaker_embeddings": str(scp),
         "data.num_streams": 4, "data.window": 20, "trainer.max_epochs": 3, "trainer.num_threads": 1,
         "trainer.device": "cpu", "trainer.log_interval": 5, "trainer.patience": 0, "model.embed_dim": 16,
         "model.num_blocks": 1, "model.num_heads": 2, "model.ff_dim": 32, "trainer.scheduler": "none",
         "trainer.model_dim": 0, "trainer.lr": 3e-3, "model.ff_dropout": 0.0, "model.position_dropout": 0.0,
         "model.attention_dropout": 0.0}
    o.update(extra)
    return [f"{k}={v}" for k, v in o.items()]
