"""speechkit-embed-speakers: per-utterance and per-speaker embeddings, skips, --nj, bad audio."""
from __future__ import annotations

import shutil
import subprocess

import kaldiio
import numpy as np
import pytest
import soundfile as sf

from speechkit.bin.embed_speakers import main
from speechkit.data.datadir import DataDir
from speechkit.models.speaker_encoder import SpeakerEncoder, load_embeddings

TEXTS = ["The quick brown fox jumps over the lazy dog.", "She sells sea shells by the sea shore."]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Two espeak-ng 'speakers' x 2 sentences (22.05 kHz), plus one silent utterance of spkB."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng not installed")
    root = tmp_path_factory.mktemp("embed")
    d = DataDir(wav_scp={}, utt2spk={})
    for spk, voice in (("spkA", "en"), ("spkB", "en+f4")):
        for i, text in enumerate(TEXTS):
            utt = f"{spk}_{i}"
            subprocess.run(["espeak-ng", "-w", str(root / f"{utt}.wav"), "-v", voice, text], check=True)
            d.wav_scp[utt], d.utt2spk[utt] = str(root / f"{utt}.wav"), spk
    sf.write(root / "spkB_silent.wav", np.zeros(16000, np.float32), 16000)
    d.wav_scp["spkB_silent"], d.utt2spk["spkB_silent"] = str(root / "spkB_silent.wav"), "spkB"
    return d.write(root / "data")


def test_embed_speakers(data_dir, tmp_path, capsys):
    out = tmp_path / "emb"
    assert main([str(data_dir), str(out)]) == 0
    err = capsys.readouterr().err  # the CLI logs to stderr
    assert "skipped 1 of 5 utterances" in err and "spkB_silent" in err
    utt = load_embeddings(out / "embeddings.scp")
    spk = load_embeddings(out / "spk_embeddings.scp")
    assert sorted(utt) == ["spkA_0", "spkA_1", "spkB_0", "spkB_1"] and sorted(spk) == ["spkA", "spkB"]
    # stored as Kaldi float vectors
    assert kaldiio.load_scp(str(out / "embeddings.scp"))["spkA_0"].shape == (256,)
    enc = SpeakerEncoder()
    x, sr = sf.read(data_dir.parent / "spkA_0.wav", dtype="float32")
    np.testing.assert_allclose(utt["spkA_0"], enc.embed(x, sr), atol=1e-6)
    m = (utt["spkB_0"] + utt["spkB_1"]) / 2
    np.testing.assert_allclose(spk["spkB"], m / np.linalg.norm(m), atol=1e-6)
    assert (out / "skipped").read_text().split() == ["spkB_silent", "0.000"]
    assert (out / "num_utts").read_text() == "spkA 2\nspkB 2\n"
    # plain mean without re-normalisation; --nj 2 gives the same vectors
    out2 = tmp_path / "emb2"
    assert main([str(data_dir), str(out2), "--no-renormalize", "--nj", "2"]) == 0
    np.testing.assert_allclose(load_embeddings(out2 / "spk_embeddings.scp")["spkB"], m, atol=1e-6)
    utt2 = load_embeddings(out2 / "embeddings.scp")
    for k in utt:
        np.testing.assert_allclose(utt2[k], utt[k], atol=1e-6)
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))


def test_unreadable_audio_is_an_error_naming_it(data_dir, tmp_path, capsys):
    d = DataDir.load(data_dir)
    d.wav_scp["spkA_0"] = str(tmp_path / "gone.wav")
    bad = d.write(tmp_path / "bad")
    out = tmp_path / "emb"
    assert main([str(bad), str(out)]) == 1
    err = capsys.readouterr().err
    assert "speechkit-embed-speakers: error:" in err and "spkA_0" in err
    assert not (out / "spk_embeddings.scp").exists()


def test_everything_skipped_writes_nothing(data_dir, tmp_path, capsys):
    out = tmp_path / "emb"
    assert main([str(data_dir), str(out), "--min-speech", "100"]) == 1
    assert "no utterance could be embedded (5 too short)" in capsys.readouterr().err
    assert not (out / "embeddings.scp").exists()
    assert main([str(tmp_path / "nowhere"), str(out)]) == 1
