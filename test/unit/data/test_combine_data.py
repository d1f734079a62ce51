"""speechkit.data.combine_data and speechkit-combine-data-dirs (Kaldi's combine_data.sh)."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from test_datadir import make_dir

from speechkit.bin import combine_data_dirs as combine_cli
from speechkit.data.combine_data import combine, combine_data_dirs
from speechkit.data.datadir import DataDir, Segment
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


def test_combine(tmp_path):
    a = make_dir(tmp_path / "a", speakers={"spkA": 2, "spkB": 1})
    make_dir(tmp_path / "b", speakers={"spkC": 2})
    (tmp_path / "a" / "utt2lang").write_text("".join(f"{u} en\n" for u in a.utts))
    out = combine_data_dirs(tmp_path / "ab", [tmp_path / "a", tmp_path / "b"])
    assert len(out) == 5 and out.utt2lang is None      # only one source has utt2lang
    assert validate(tmp_path / "ab", no_feats=True) == []
    assert not (tmp_path / "ab" / "utt2lang").exists()


def test_combine_duplicate_ids_name_both_dirs(tmp_path):
    make_dir(tmp_path / "a", speakers={"spkA": 2})
    make_dir(tmp_path / "b", speakers={"spkA": 1})
    with pytest.raises(DataError, match=rf"utterance 'spkA_u00' is in both {tmp_path}/a and {tmp_path}/b"):
        combine([tmp_path / "a", tmp_path / "b"])
    assert combine_cli.main([str(tmp_path / "c"), str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert not (tmp_path / "c").exists()
    assert combine_cli.main([str(tmp_path / "a"), str(tmp_path / "a")]) == 1


def test_combine_mixed_segments(tmp_path):
    make_dir(tmp_path / "a", speakers={"spkA": 2}, segments=True)
    # b has no segments and no utt2dur: durations come from the audio headers
    b = tmp_path / "b"
    b.mkdir()
    sf.write(b / "x.wav", np.zeros(8000, dtype=np.float32), 16000)
    DataDir(wav_scp={"spkB_u00": str(b / "x.wav")}, utt2spk={"spkB_u00": "spkB"}, text={"spkB_u00": "hi"}).write(b)
    assert combine_cli.main([str(tmp_path / "ab"), str(tmp_path / "a"), str(b)]) == 0
    d = DataDir.load(tmp_path / "ab")
    assert d.segments["spkB_u00"] == Segment("spkB_u00", 0.0, 0.5)
    assert d.utt2dur is None
    assert validate(tmp_path / "ab", no_feats=True) == []
