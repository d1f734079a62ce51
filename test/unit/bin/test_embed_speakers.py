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
from speechkit.data.speakers import load_embeddings
from speechkit.models.speaker_encoder import SpeakerEncoder

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


def test_everything_skipped_names_them_and_points_at_no_file(data_dir, tmp_path, capsys):
    """Issue 23 item 18: the warning pointed at OUT_DIR/skipped, which was never written when no
    utterance could be embedded. Now the error names the utterances and no file is mentioned."""
    out = tmp_path / "emb"
    assert main([str(data_dir), str(out), "--min-speech", "100"]) == 1
    err = capsys.readouterr().err
    assert "(5 too short): spkA_0, spkA_1, spkB_0, spkB_1, spkB_silent have less speech than --min-speech" in err
    assert str(out / "skipped") not in err and not out.exists()


def _fake_embeddings(monkeypatch, utts):
    import speechkit.inference.speaker_embeddings as mod

    vecs = {u: np.eye(256, dtype=np.float32)[i] for i, u in enumerate(utts)}
    monkeypatch.setattr(mod, "embed_data_dir", lambda *a, **k: (dict(vecs), {"spkB_silent": 0.0}))


def test_a_rerun_replaces_the_output_whole(data_dir, tmp_path, monkeypatch):
    """The scps name the arks where they are after the swap; nothing of the previous output is
    left (derived data: no backup); the skipped file the warning names exists."""
    _fake_embeddings(monkeypatch, ["spkA_0", "spkA_1", "spkB_0", "spkB_1"])
    out = tmp_path / "emb"
    assert main([str(data_dir), str(out)]) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "stale").write_text("x\n")
    assert main([str(data_dir), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(first)
    assert (out / "embeddings.scp").read_text().startswith(f"spkA_0 {out / 'embeddings.ark'}:")
    assert sorted(load_embeddings(out / "spk_embeddings.scp")) == ["spkA", "spkB"]
    assert (out / "skipped").read_text() == "spkB_silent 0.000\n"


def test_a_folder_no_embed_run_wrote_is_kept_not_deleted(data_dir, tmp_path, monkeypatch):
    _fake_embeddings(monkeypatch, ["spkA_0", "spkA_1", "spkB_0", "spkB_1"])
    out = tmp_path / "mywork"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    assert main([str(data_dir), str(out)]) == 0
    assert (out / ".backup" / "1" / "notes.txt").read_text() == "precious"
    assert sorted(load_embeddings(out / "spk_embeddings.scp")) == ["spkA", "spkB"]


def test_out_dir_overlapping_the_data_dir_and_bad_options_are_refused(data_dir, tmp_path, capsys):
    before = sorted(p.name for p in data_dir.iterdir())
    assert main([str(data_dir), str(data_dir)]) == 1
    assert f"OUT_DIR {data_dir} is DATA_DIR {data_dir}" in capsys.readouterr().err
    assert main([str(data_dir), str(data_dir / "emb")]) == 1
    assert "lies inside DATA_DIR" in capsys.readouterr().err
    assert sorted(p.name for p in data_dir.iterdir()) == before
    assert main([str(data_dir), str(tmp_path / "e"), "--min-speech", "-1"]) == 1
    assert "--min-speech must be >= 0 seconds, got -1.0" in capsys.readouterr().err
    assert main([str(data_dir), str(tmp_path / "e"), "--nj", "0"]) == 1
    assert "--nj must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()
