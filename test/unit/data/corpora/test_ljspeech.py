import logging

import numpy as np
import soundfile as sf

from speechkit.data.corpora.ljspeech import prepare_ljspeech
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate


def test_prepare_ljspeech(tmp_path, caplog):
    root = tmp_path / "LJSpeech-1.1"
    (root / "wavs").mkdir(parents=True)
    sf.write(root / "wavs" / "LJ001-0001.wav", np.zeros(22050, np.float32), 22050)
    (root / "wavs" / "LJ001-0002.wav").write_bytes(b"")                      # empty file
    (root / "metadata.csv").write_text(
        "LJ001-0001|Printing, in 1 sense.|Printing, in one sense.\n"
        "LJ001-0002|Empty.|Empty.\n"
        "LJ001-0003|no audio|no audio\n"                                       # missing file
        "broken line\n")                                                       # malformed
    with caplog.at_level(logging.WARNING):
        prepare_ljspeech(root, tmp_path / "data")
    d = DataDir.load(tmp_path / "data")
    assert d.utts == ["lj_LJ001-0001"] and d.text["lj_LJ001-0001"] == "printing in one sense"
    assert d.utt2dur["lj_LJ001-0001"] == 1.0
    assert "skipped 3 of 4 recordings: 1 missing, 1 empty, 0 undecodable, 1 malformed" in caplog.text
    assert validate(tmp_path / "data", no_feats=True) == []
