"""speechkit.data.speakers: embedding tables, speaker vectors, the EXP/speakers list."""
from __future__ import annotations

import inspect

import kaldiio
import numpy as np
import pytest

from speechkit.data.speakers import (
    load_embeddings, mean_embedding, read_speaker_dim, read_speaker_vectors, read_speakers, utterance_speakers,
    write_speakers,
)
from speechkit.models.speaker_encoder import EMBEDDING_DIM
from speechkit.utils.fileio import DataError, write_table


def _write_scp(path, vectors: dict) -> None:
    with kaldiio.WriteHelper(f"ark,scp:{path}.ark,{path}.scp") as w:
        for k, v in vectors.items():
            w(k, np.asarray(v, np.float32))


def test_mean_embedding_by_hand():
    e = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    np.testing.assert_allclose(mean_embedding(e, renormalize=False), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(mean_embedding(e), [2 ** -0.5, 2 ** -0.5, 0.0], rtol=1e-6)
    with pytest.raises(ValueError, match="N >= 1"):
        mean_embedding(np.zeros((0, 3)))


def test_load_embeddings_vectors_and_rows(tmp_path):
    import kaldiio

    v = np.arange(4, dtype=np.float32)
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/e.ark,{tmp_path}/e.scp") as w:
        w("a", v)
        w("b", v[None] * 2)
    got = load_embeddings(tmp_path / "e.scp", dim=4)
    np.testing.assert_array_equal(got["a"], v)
    np.testing.assert_array_equal(got["b"], 2 * v)
    with pytest.raises(DataError, match="'a'.*\\(256,\\)"):
        load_embeddings(tmp_path / "e.scp")
    (tmp_path / "bad.scp").write_text(f"x {tmp_path}/missing.ark:5\n")
    with pytest.raises(DataError, match="'x'"):
        load_embeddings(tmp_path / "bad.scp")


def test_load_embeddings_default_dim_is_the_encoders():
    assert inspect.signature(load_embeddings).parameters["dim"].default == EMBEDDING_DIM


def test_read_speaker_vectors_and_dim(tmp_path):
    _write_scp(tmp_path / "spk", {"b": [1, 2, 3], "a": [4, 5, 6]})
    got = read_speaker_vectors(tmp_path / "spk.scp")
    assert list(got) == ["b", "a"] and all(v.dtype == np.float32 and v.shape == (3,) for v in got.values())
    assert read_speaker_dim(tmp_path / "spk.scp") == 3
    with pytest.raises(FileNotFoundError, match="embed-speakers"):
        read_speaker_vectors(tmp_path / "none.scp")
    with pytest.raises(FileNotFoundError):
        read_speaker_dim(tmp_path / "none.scp")
    assert read_speaker_dim(tmp_path / "none.scp", strict=False) is None


def test_read_speaker_vectors_refusals(tmp_path):
    (tmp_path / "empty.scp").write_text("")
    with pytest.raises(DataError, match="empty"):
        read_speaker_vectors(tmp_path / "empty.scp")
    assert read_speaker_dim(tmp_path / "empty.scp", strict=False) is None
    _write_scp(tmp_path / "sizes", {"a": [1, 2], "b": [1, 2, 3]})
    with pytest.raises(DataError, match=r"'b': a \(3,\) vector, but 'a' has \(2,\)"):
        read_speaker_vectors(tmp_path / "sizes.scp")
    _write_scp(tmp_path / "nan", {"a": [1, np.nan]})
    with pytest.raises(DataError, match="'a': NaN"):
        read_speaker_vectors(tmp_path / "nan.scp")


def test_utterance_speakers(tmp_path):
    write_table(tmp_path / "utt2spk", {"a-1": "a", "b-1": "b"})
    vecs = {"a": np.zeros(2, np.float32)}
    assert utterance_speakers(tmp_path, ["b-1", "a-1"], None) == ["b", "a"]
    assert utterance_speakers(tmp_path, ["a-1"], vecs) == ["a"]
    with pytest.raises(DataError, match="no vector for speaker 'b'"):
        utterance_speakers(tmp_path, ["b-1"], vecs, "x.scp")
    with pytest.raises(DataError, match="utterance 'c-1' has no speaker"):
        utterance_speakers(tmp_path, ["c-1"], None)
    with pytest.raises(FileNotFoundError, match="utt2spk"):
        utterance_speakers(tmp_path / "none", ["a-1"], None)


def test_write_read_speakers(tmp_path):
    write_speakers(tmp_path / "speakers", ["b", "B", "a", "b"])
    assert (tmp_path / "speakers").read_text() == "B\na\nb\n"
    assert read_speakers(tmp_path / "speakers") == ["B", "a", "b"]
    with pytest.raises(FileNotFoundError):
        read_speakers(tmp_path / "none")
