"""speechkit-vocode on a log-mel feature dir: Griffin-Lim copy synthesis (the tacotron2 syntheses' vocoder),
its length, its spectral fidelity against the input log-mel, the copied tables, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import yaml

from speechkit.bin.vocode import main, vocode_feature_dir
from speechkit.features.frontends import build_frontend
from speechkit.features.io import ark_scp_writer
from speechkit.utils.fileio import DataError, read_table, write_table

CONF = {"type": "logmel", "sample_rate": 16000, "n_fft": 512, "hop_length": 128, "n_mels": 40}


def _tone(f0: float, seconds: float, sr: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))).astype(np.float32)


@pytest.fixture
def feats_dir(tmp_path):
    fe = build_frontend(dict(CONF))
    d = tmp_path / "feats"
    d.mkdir()
    wavs = {"s1-u1": _tone(150.0, 0.6), "s2-u1": _tone(230.0, 0.4)}
    mels = {u: fe(w) for u, w in wavs.items()}
    with ark_scp_writer(d / "feats.ark", d / "feats.scp") as w:
        for u in sorted(mels):
            w(u, mels[u])
    write_table(d / "utt2spk", {u: u.split("-")[0] for u in wavs})
    write_table(d / "text", {u: "a b" for u in wavs})
    (d / "feats.yaml").write_text(yaml.safe_dump(CONF))
    return d, mels, fe


def test_griffin_lim_copy_synthesis(feats_dir, tmp_path):
    d, mels, fe = feats_dir
    assert main([str(d), str(tmp_path / "out"), "--griffin-lim-iters", "32"]) == 0
    out = tmp_path / "out"
    scp = read_table(out / "wav.scp")
    assert sorted(scp) == sorted(mels)
    assert read_table(out / "utt2spk") == {"s1-u1": "s1", "s2-u1": "s2"}
    assert read_table(out / "spk2utt") == {"s1": "s1-u1", "s2": "s2-u1"}
    for u, m in mels.items():
        wav, sr = sf.read(scp[u], dtype="float32")
        assert sr == 16000 and len(wav) == CONF["hop_length"] * (len(m) - 1)  # mel_to_waveform's length
        # the vocoded audio's log-mel is close to the input's (Griffin-Lim of a harmonic tone)
        m2 = fe(wav)[: len(m)]
        mask = m > m.max() - 6  # bands within 6 nats of the peak (the partials)
        err = np.abs(m2[1:-1] - m[: len(m2)][1:-1])[mask[1:len(m2) - 1]]
        assert np.median(err) < 0.5, np.median(err)


def test_bad_input(feats_dir, tmp_path):
    d, _, _ = feats_dir
    (d / "feats.yaml").write_text(yaml.safe_dump({**CONF, "type": "mfcc"}))
    with pytest.raises(DataError, match="neither WORLD nor log-mel"):
        vocode_feature_dir(d, tmp_path / "o1")
    (d / "feats.yaml").write_text(yaml.safe_dump({**CONF, "n_mels": 20}))  # wrong width
    with pytest.raises(DataError, match="utterance 's1-u1'.*must be \\(frames, 20\\)"):
        vocode_feature_dir(d, tmp_path / "o2")
    assert main([str(d), str(tmp_path / "o3"), "--griffin-lim-iters", "0"]) == 1
