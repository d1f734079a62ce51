"""FSDD preparer on ../shared/data/fsdd (2000 recordings, 4 speakers, 8 kHz)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.audio import probe_audio, read_audio
from speechkit.data.corpora.fsdd import DIGIT_WORDS, prepare_fsdd
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate


def test_real_fsdd(shared_data, tmp_path):
    out = tmp_path / "fsdd"
    prepare_fsdd(shared_data / "fsdd", out)
    d = DataDir.load(out)
    assert validate(out, no_feats=True) == []
    assert len(d) == 2000
    assert {s: len(u) for s, u in d.spk2utt.items()} == {"george": 500, "jackson": 500, "lucas": 500, "nicolas": 500}
    assert d.text["jackson_7_32"] == "seven"
    assert d.wav_scp["jackson_7_32"].endswith("/recordings/7_jackson_32.wav")
    assert {d.text[u] for u in d.utts} == set(DIGIT_WORDS)
    assert set(d.utt2lang.values()) == {"en"}
    for utt in d.utts[::250]:
        n, sr = probe_audio(d.wav_scp[utt])
        assert sr == 8000 and d.utt2dur[utt] == pytest.approx(n / 8000, abs=1e-3)
    assert not (out / "phone_alignments").exists()


def test_resampling_pipe_and_bad_files(tmp_path, caplog):
    rec = tmp_path / "fsdd" / "recordings"
    rec.mkdir(parents=True)
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(4000) / 8000)).astype(np.float32)
    sf.write(rec / "3_ann_0.wav", tone, 8000)
    sf.write(rec / "4_ann_1.wav", tone, 8000)
    (rec / "5_ann_2.wav").write_bytes(b"")          # empty
    (rec / "6_ann_3.wav").write_bytes(b"RIFFjunk")  # undecodable
    sf.write(rec / "notes.wav", tone, 8000)         # name not <digit>_<speaker>_<index>
    with caplog.at_level(logging.WARNING):
        d = prepare_fsdd(tmp_path / "fsdd", tmp_path / "out", sample_rate=16000)
    assert d.utts == ["ann_3_00", "ann_4_01"]
    assert "fsdd: skipped 3 of 5 recordings: 0 missing, 1 empty, 1 undecodable, 1 malformed" in caplog.text
    x, sr = read_audio(d.wav_scp["ann_3_00"], key="ann_3_00")
    assert sr == 16000 and len(x) == 8000
    assert d.utt2dur["ann_3_00"] == pytest.approx(0.5)
