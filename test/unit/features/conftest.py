"""Fixtures for the feature tests: a tiny data dir of synthetic 16 kHz audio."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from speechkit.data.audio import write_wav
from speechkit.data.datadir import DataDir

SR = 16000


def make_data_dir(root: Path, n_per_spk: int = 3, speakers=("spkA", "spkB"), sr: int = SR,
                  name: str = "train") -> Path:
    """``root/<name>`` with wav.scp/utt2spk/spk2utt; utterance i of a speaker lasts 0.2 + 0.15 i s."""
    rng = np.random.default_rng(0)
    wav_dir = root / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    d = DataDir(wav_scp={}, utt2spk={})
    for s, spk in enumerate(speakers):
        for i in range(n_per_spk):
            utt = f"{spk}-utt{i}"
            t = np.arange(int(sr * (0.2 + 0.15 * i))) / sr
            x = 0.3 * np.sin(2 * np.pi * (150 + 40 * s) * t) + 0.05 * rng.standard_normal(len(t))
            write_wav(wav_dir / f"{utt}.wav", x.astype(np.float32), sr)
            d.wav_scp[utt] = str(wav_dir / f"{utt}.wav")
            d.utt2spk[utt] = spk
    return d.write(root / name)


@pytest.fixture
def make_data():
    """The :func:`make_data_dir` factory (test modules are not a package, so no direct import)."""
    return make_data_dir


@pytest.fixture
def data_dir(tmp_path) -> Path:
    return make_data_dir(tmp_path)
