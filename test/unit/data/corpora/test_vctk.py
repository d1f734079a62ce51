"""VCTK preparer on small fake trees of both layouts (0.92 FLAC per microphone, 0.80 WAV)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora.vctk import prepare_vctk, read_speaker_info
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError

SR = 48000
INFO_092 = ("ID  AGE  GENDER  ACCENTS  REGION COMMENTS \n"
            "p225  23  F    English    Southern  England\n"
            "p226  22  M    English    Surrey\n"
            "p999  oops\n")
INFO_080 = ("ID  AGE  GENDER  ACCENTS  REGION\n"
            "225  23  F    English    Southern  England\n"
            "226  22  M    English    Surrey\n")


def _audio(path, seconds, fmt):
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(SR * seconds)) / SR
    sf.write(path, (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), SR, format=fmt)


def _txt(root, spk, stem, text):
    p = root / "txt" / spk / f"{stem}.txt"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def vctk092(tmp_path):
    root = tmp_path / "VCTK-Corpus-0.92"
    w = root / "wav48_silence_trimmed"
    for spk, n in (("p225", 3), ("p226", 2)):
        for i in range(1, n + 1):
            stem = f"{spk}_{i:03d}"
            _audio(w / spk / f"{stem}_mic1.flac", 0.1 * i, "FLAC")
            _audio(w / spk / f"{stem}_mic2.flac", 0.05 * i, "FLAC")
            _txt(root, spk, stem, f"Please call Stella, number {i}.\n")
    _txt(root, "p225", "p225_004", "No audio for this one.")             # missing audio
    _audio(w / "p226" / "p226_003_mic1.flac", 0.1, "FLAC")               # no transcript
    (w / "p226" / "p226_002_mic1.flac").write_bytes(b"fLaC but not really")   # undecodable
    (root / "speaker-info.txt").write_text(INFO_092)
    return root


def test_vctk_092_layout(vctk092, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        d = prepare_vctk(vctk092, tmp_path / "data")
    assert d.utts == ["p225_001", "p225_002", "p225_003", "p226_001"]
    assert ("skipped 3 of 7 recordings: 1 missing, 0 empty, 1 undecodable, 1 no_transcript, 0 empty_transcript"
            in caplog.text)
    assert "p225_004" in caplog.text and "p226_003" in caplog.text and "p226_002" in caplog.text
    assert "p999" in caplog.text                                          # malformed speaker-info line
    loaded = DataDir.load(tmp_path / "data")
    assert loaded.text["p225_002"] == "please call stella number 2"
    assert loaded.utt2spk["p226_001"] == "p226" and set(loaded.utt2lang.values()) == {"en"}
    assert loaded.utt2dur["p225_003"] == pytest.approx(0.3)
    assert loaded.wav_scp["p225_001"] == str((vctk092 / "wav48_silence_trimmed/p225/p225_001_mic1.flac").resolve())
    assert (tmp_path / "data" / "spk2gender").read_text() == "p225 f\np226 m\n"
    assert validate(tmp_path / "data", no_feats=True) == []


def test_vctk_092_mic2_resampling_and_speaker_subset(vctk092, tmp_path):
    d = prepare_vctk(vctk092, tmp_path / "data", mic="mic2", sample_rate=16000, speakers=["p225"])
    assert d.utts == ["p225_001", "p225_002", "p225_003"]
    assert d.utt2dur["p225_002"] == pytest.approx(0.1)                     # the mic2 files
    entry = d.wav_scp["p225_001"]
    assert entry.startswith("sox ") and "p225_001_mic2.flac" in entry and entry.endswith("-r 16000 -b 16 -c 1 - |")
    with pytest.raises(ValueError, match="speaker 'p300' not in the corpus"):
        prepare_vctk(vctk092, tmp_path / "x", speakers=["p300"])
    with pytest.raises(ValueError, match="mic must be one of mic1, mic2"):
        prepare_vctk(vctk092, tmp_path / "x", mic="mic3")


def test_vctk_080_layout(tmp_path, caplog):
    root = tmp_path / "VCTK-Corpus"
    for spk in ("p225", "p226"):
        for i in (1, 2):
            _audio(root / "wav48" / spk / f"{spk}_{i:03d}.wav", 0.2, "WAV")
            _txt(root, spk, f"{spk}_{i:03d}", "Ask her to bring these things.")
    _txt(root, "p226", "p226_002", "   ")                                 # empty transcript
    (root / "wav48" / "p226" / "p226_001.wav").write_bytes(b"")           # empty audio
    (root / "speaker-info.txt").write_text(INFO_080)
    with caplog.at_level(logging.WARNING):
        d = prepare_vctk(root, tmp_path / "data", keep_punctuation=True)
    assert d.utts == ["p225_001", "p225_002"] and d.text["p225_001"] == "Ask her to bring these things."
    assert ("skipped 2 of 4 recordings: 0 missing, 1 empty, 0 undecodable, 0 no_transcript, 1 empty_transcript"
            in caplog.text)
    # spk2gender lists exactly the kept speakers (p226 lost all its utterances)
    assert (tmp_path / "data" / "spk2gender").read_text() == "p225 f\n"
    assert validate(tmp_path / "data", no_feats=True) == []
    assert read_speaker_info(root / "speaker-info.txt") == {"p225": "f", "p226": "m"}


def test_vctk_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such directory"):
        prepare_vctk(tmp_path / "nowhere", tmp_path / "data")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a VCTK corpus"):
        prepare_vctk(tmp_path / "empty", tmp_path / "data")
    root = tmp_path / "bad"
    _audio(root / "wav48" / "p225" / "p225_001.wav", 0.1, "WAV")
    (root / "txt" / "p225").mkdir(parents=True)
    (root / "txt" / "p225" / "p225_001.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(DataError, match=r"p225_001.txt:1: not valid UTF-8"):
        prepare_vctk(root, tmp_path / "data")
    (root / "txt" / "p225" / "p225_001.txt").unlink()
    with pytest.raises(DataError, match="vctk: no usable utterances"):
        prepare_vctk(root, tmp_path / "data")
    assert not (tmp_path / "data").exists()
