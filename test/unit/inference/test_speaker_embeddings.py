"""speechkit.inference.speaker_embeddings: write_embeddings and embed_speakers (the library form of
speechkit-embed-speakers) with the encoder replaced by fixed vectors (no audio model needed)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import speechkit.inference.speaker_embeddings as mod
from speechkit.data.datadir import DataDir
from speechkit.data.speakers import load_embeddings
from speechkit.utils.fileio import DataError

UTT2SPK = {"a_1": "A", "a_2": "A", "b_1": "B", "c_1": "C"}


def _vecs():
    return {u: np.eye(4, 256, k=i, dtype=np.float32)[0] for i, u in enumerate(["a_1", "a_2", "b_1"])}


def test_write_embeddings(tmp_path):
    embs = _vecs()
    spk = mod.write_embeddings(tmp_path / "tmp", embs, {"c_1": 0.25}, UTT2SPK, final_dir=tmp_path / "final")
    m = (embs["a_1"] + embs["a_2"]) / 2
    np.testing.assert_allclose(spk["A"], m / np.linalg.norm(m), atol=1e-7)
    assert (tmp_path / "tmp" / "skipped").read_text() == "c_1 0.250\n"
    assert (tmp_path / "tmp" / "num_utts").read_text() == "A 2\nB 1\n"
    assert (tmp_path / "tmp" / "utt2spk").read_text() == "a_1 A\na_2 A\nb_1 B\n"
    assert (tmp_path / "tmp" / "embeddings.scp").read_text().startswith(f"a_1 {tmp_path / 'final' / 'embeddings.ark'}:")
    plain = mod.write_embeddings(tmp_path / "plain", embs, {}, UTT2SPK, renormalize=False)
    np.testing.assert_allclose(plain["A"], m, atol=1e-7)
    with pytest.raises(DataError, match=r"no utterance could be embedded \(1 too short\): c_1 have less speech"):
        mod.write_embeddings(tmp_path / "none", {}, {"c_1": 0.1}, UTT2SPK)


@pytest.fixture
def data_dir(tmp_path):
    d = DataDir(wav_scp={u: f"/nowhere/{u}.wav" for u in UTT2SPK}, utt2spk=dict(UTT2SPK))
    return d.write(tmp_path / "data")


def test_embed_speakers_writes_the_dir_and_logs_what_was_lost(data_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(mod, "embed_data_dir", lambda *a, **k: (_vecs(), {"c_1": 0.0}))
    log = logging.getLogger("test-embed")
    with caplog.at_level(logging.INFO):
        embs, spk, skipped = mod.embed_speakers(data_dir, tmp_path / "emb", log=log)
    assert sorted(embs) == ["a_1", "a_2", "b_1"] and sorted(spk) == ["A", "B"] and skipped == {"c_1": 0.0}
    assert sorted(load_embeddings(tmp_path / "emb" / "spk_embeddings.scp")) == ["A", "B"]
    msgs = [r.message for r in caplog.records if r.name == "test-embed"]
    assert msgs[0].startswith("skipped 1 of 4 utterances") and msgs[1].endswith("no speaker vector: C")
    assert msgs[2] == f"wrote 3 utterance and 2 speaker embeddings to {tmp_path / 'emb'} (1 skipped)"


def test_embed_speakers_refusals(data_dir, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="^nj must be >= 1, got 0"):
        mod.embed_speakers(data_dir, tmp_path / "e", nj=0)
    with pytest.raises(ValueError, match="^min_speech must be >= 0 seconds, got -1"):
        mod.embed_speakers(data_dir, tmp_path / "e", min_speech=-1)
    monkeypatch.setattr(mod, "embed_data_dir", lambda *a, **k: ({}, {"a_1": 0.1}))
    with pytest.raises(DataError, match="no utterance could be embedded"):
        mod.embed_speakers(data_dir, tmp_path / "e")
    assert not (tmp_path / "e").exists()
