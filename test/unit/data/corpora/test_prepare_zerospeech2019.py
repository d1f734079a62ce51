"""ZeroSpeech 2019 preparer (speechkit.data.corpora.zerospeech2019) on a small fake official tree."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora.zerospeech2019 import prepare_zerospeech2019
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError


def fake_db(db, n_unit=3):
    rng = np.random.default_rng(0)
    names = {"train/unit": [f"S015_{i:04d}" for i in range(n_unit)], "train/voice": ["V001_0001"],
             "test": ["S002_0001", "S003_0001"]}
    for sub, utts in names.items():
        (db / sub).mkdir(parents=True)
        for u in utts:
            sf.write(db / sub / f"{u}.wav", rng.normal(0, 0.1, 1600).astype(np.float32), 16000)
    (db / "train" / "unit" / "nospeaker.wav").write_bytes(b"")


def test_sets_dev_and_side_files(tmp_path, caplog):
    db = tmp_path / "english"
    fake_db(db, n_unit=101)
    (db / "a.item").write_text("#file onset offset #phone prev-phone next-phone speaker\n")
    (db / "synthesis.txt").write_text("S002_0001.wav V001\n\nS003_0001\n")
    dirs = prepare_zerospeech2019(db, tmp_path / "data")
    assert "skipping 'nospeaker'" in caplog.text
    assert dirs["dev"].utts == ["S015_0049", "S015_0099"]  # every 50th unit utterance
    train = DataDir.load(tmp_path / "data/train")
    assert len(train) == 100 and "V001_0001" in train.utt2spk and not set(dirs["dev"].utts) & set(train.utts)
    assert DataDir.load(tmp_path / "data/test").utt2dur == {"S002_0001": 0.1, "S003_0001": 0.1}
    assert (tmp_path / "data/test/abx.item").read_text().startswith("#file")
    assert not (tmp_path / "data/test/bitrate_filelist.txt").exists()
    assert (tmp_path / "data/test/synthesis_list").read_text() == "S002_0001 V001\nS003_0001\n"


def test_small_unit_set_still_has_a_dev_utterance(tmp_path, caplog):
    fake_db(tmp_path / "db", n_unit=3)
    dirs = prepare_zerospeech2019(tmp_path / "db", tmp_path / "data")
    assert dirs["dev"].utts == ["S015_0002"] and dirs["train"].utts == ["S015_0000", "S015_0001", "V001_0001"]
    assert "no ABX item file" in caplog.text


def test_errors(tmp_path):
    fake_db(tmp_path / "db")
    (tmp_path / "db/synthesis.txt").write_text("S009_0001 V001\n")
    with pytest.raises(DataError, match=r"synthesis.txt:1: 'S009_0001' is not a test utterance"):
        prepare_zerospeech2019(tmp_path / "db", tmp_path / "data")
    sf.write(tmp_path / "db/train/voice/S015_0000.wav", np.zeros(160, np.float32), 16000)
    with pytest.raises(DataError, match="in both train/unit and train/voice, e.g. 'S015_0000'"):
        prepare_zerospeech2019(tmp_path / "db", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match="expected the ZeroSpeech 2019 layout"):
        prepare_zerospeech2019(tmp_path / "nothing", tmp_path / "data")


def test_registered_form_writes_one_data_dir(tmp_path):
    """`speechkit-prepare-corpus zerospeech2019` (issue 39): the audio of the chosen parts in one data dir,
    no text; an id in two parts is an error naming both."""
    from speechkit.bin.prepare_corpus import main
    from speechkit.data.corpora.zerospeech2019 import prepare_zerospeech2019_corpus

    db = tmp_path / "english"
    fake_db(db, n_unit=3)
    assert main(["zerospeech2019", str(db), str(tmp_path / "all")]) == 0
    d = DataDir.load(tmp_path / "all")
    assert d.utts == ["S002_0001", "S003_0001", "S015_0000", "S015_0001", "S015_0002", "V001_0001"]
    assert d.text is None and d.utt2spk["V001_0001"] == "V001"
    assert prepare_zerospeech2019_corpus(db, tmp_path / "voice", parts=["voice"]).utts == ["V001_0001"]
    sf.write(db / "test" / "V001_0001.wav", np.zeros(1600, np.float32), 16000)
    with pytest.raises(DataError, match="'V001_0001' is in train/voice and in test"):
        prepare_zerospeech2019_corpus(db, tmp_path / "x")
