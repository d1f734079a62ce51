"""speechkit.inference.units2speech: the Resynthesizer class (codes -> magnitude -> Griffin-Lim) and
resynthesize (the library form of speechkit-resynthesize), on the tiny inverter of the CLI's tests."""
from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from speechkit.decode.griffin_lim import griffin_lim
from speechkit.features.codes import read_codes
from speechkit.inference.units2speech import Resynthesizer, frontend_conf, resynthesize
from speechkit.tasks import get_task, load_model
from speechkit.utils.fileio import DataError, read_table

_spec = importlib.util.spec_from_file_location(
    "test_resynthesize_cli", Path(__file__).parents[1] / "bin" / "test_resynthesize.py")
cli_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cli_tests)
R = cli_tests.R


@pytest.fixture(scope="module")
def inv(tmp_path_factory):
    root = tmp_path_factory.mktemp("resynthesizer")
    codes, feats = cli_tests.voice_data(root)
    return codes, feats, cli_tests.train_inverter(root, codes, feats)


def test_call_is_the_inverter_then_griffin_lim(inv):
    codes_file, _, exp = inv
    r = Resynthesizer(exp)
    assert r.sample_rate == cli_tests.zs.SPEC_CONF["sample_rate"] and r.upsample_ratio == R
    assert r.speaker_index is None and r.stft["hop_length"] == 8
    c = read_codes(codes_file)["v1_u1"]
    wav, mag = r(c, n_iter=4, seed=1)
    t = get_task("inverter")
    t.init_from_vqvae = False
    model, _ = load_model(exp, t)
    with torch.no_grad():
        m, _ = model(torch.from_numpy(c)[None], torch.tensor([len(c)]))
    np.testing.assert_array_equal(mag, m[0].float().numpy())
    expect = griffin_lim(m[0].float().T.contiguous(), n_fft=16, hop_length=8, win_length=16, n_iter=4, seed=1)
    np.testing.assert_array_equal(wav, expect.numpy())
    assert len(r(c, target_frames=len(c) * R + 1, n_iter=1)[1]) == len(c) * R + 1


def test_speaker_and_front_end_refusals(inv, tmp_path, caplog):
    _, _, exp = inv
    with caplog.at_level(logging.INFO):
        Resynthesizer(exp, speaker="v9", log=logging.getLogger("test-resynth"))
    assert any(r.name == "test-resynth" and "only labels the output" in r.message for r in caplog.records)
    (tmp_path / "mfcc.yaml").write_text("type: mfcc\n")
    with pytest.raises(DataError, match="expected a linear magnitude spectrogram front end"):
        Resynthesizer(exp, stft_config=str(tmp_path / "mfcc.yaml"))

    class Cfg:
        class data:
            feats_dir = None
    with pytest.raises(FileNotFoundError, match="pass stft_config=conf/spectrogram.yaml"):
        frontend_conf(tmp_path / "nowhere", Cfg, None)


def test_resynthesize_writes_the_dir(inv, tmp_path):
    codes_file, feats, exp = inv
    wavs = resynthesize(exp, codes_file, tmp_path / "out", reference_dir=feats, max_utts=2, n_iter=2, png=False)
    assert wavs == read_table(tmp_path / "out" / "wav.scp") and sorted(wavs) == ["v1_u0", "v1_u1"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["v1_u0.wav", "v1_u1.wav", "wav.scp"]
    with pytest.raises(ValueError, match="^n_iter must be >= 0, got -1"):
        resynthesize(exp, codes_file, tmp_path / "o2", n_iter=-1)
    with pytest.raises(ValueError, match="^max_utts must be >= 0, got -1"):
        resynthesize(exp, codes_file, tmp_path / "o3", max_utts=-1)
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()
