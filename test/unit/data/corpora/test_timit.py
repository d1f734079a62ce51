"""TIMIT preparer on the real NLTK sample (../shared/data/timit_sample) and on synthetic layouts."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import soundfile as sf

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.data.corpora.timit import prepare_timit
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


@pytest.fixture(scope="module")
def timit_dir(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("timit") / "data"
    prepare_timit(shared_data / "timit_sample", out)
    return out


def test_sample_counts_and_tables(timit_dir, shared_data):
    d = DataDir.load(timit_dir)
    assert validate(timit_dir, no_feats=True) == []
    assert len(d) == 80 and len(d.spk2utt) == 8
    assert sorted(d.spk2utt) == ["faem0", "falk0", "falr0", "fvmh0", "madc0", "maeb0", "marc0", "mcpm0"]
    assert all(len(u) == 10 for u in d.spk2utt.values())
    assert d.text["fvmh0_sa1"] == "she had your dark suit in greasy wash water all year"
    assert d.text["fvmh0_sa2"] == "dont ask me to carry an oily rag like that"
    wav = Path(d.wav_scp["fvmh0_sa1"])   # absolute; the same file whether or not shared/ is a symlink
    assert wav.is_absolute() and wav.resolve() == (shared_data / "timit_sample/dr1-fvmh0/sa1.wav").resolve()
    assert set(d.utt2lang.values()) == {"en"}
    assert d.utt2dur["fvmh0_sa1"] == pytest.approx(54682 / 16000, abs=1e-3)  # .txt says 0..54682 samples
    genders = dict(line.split() for line in (timit_dir / "spk2gender").read_text().splitlines())
    assert genders == {s: s[0] for s in d.spk2utt}                           # 4 f, 4 m (spkrinfo.txt agrees)


def test_phone_alignments_against_the_phn_file(timit_dir):
    # dr1-fvmh0/sa1.phn starts:  0 7812 h# / 7812 9507 sh / 9507 10610 iy / 10610 11697 hv
    lines = [ln for ln in (timit_dir / "phone_alignments").read_text().splitlines() if ln.startswith("fvmh0_sa1 ")]
    assert lines[:4] == ["fvmh0_sa1 0.0000 0.4883 h#", "fvmh0_sa1 0.4883 0.5942 sh",
                         "fvmh0_sa1 0.5942 0.6631 iy", "fvmh0_sa1 0.6631 0.7311 hv"]
    ali = read_phone_alignments(timit_dir / "phone_alignments")
    assert len(ali) == 80 and ali["fvmh0_sa1"][-1][2] == "h#"
    assert all(all(b1 <= b2 for (b1, *_), (b2, *_) in zip(s, s[1:])) for s in ali.values())


def test_without_sa_and_parts(shared_data, tmp_path):
    d = prepare_timit(shared_data / "timit_sample", tmp_path / "nosa", include_sa=False)
    assert len(d) == 64 and not any(u.endswith(("_sa1", "_sa2")) for u in d.utts)
    assert len(prepare_timit(shared_data / "timit_sample", tmp_path / "tr", part="train")) == 80  # all TRN
    with pytest.raises(DataError, match="no utterances of part 'test'"):
        prepare_timit(shared_data / "timit_sample", tmp_path / "te", part="test")


def test_original_ldc_layout_and_bad_files(shared_data, tmp_path, caplog):
    # TRAIN/DR1/FVMH0/SA1.WAV ... upper-case names; then break a few files on purpose
    src = shared_data / "timit_sample" / "dr1-fvmh0"
    spk = tmp_path / "TIMIT" / "TRAIN" / "DR1" / "FVMH0"
    spk.mkdir(parents=True)
    for f in src.iterdir():
        shutil.copy(f, spk / f.name.upper())
    x, sr = sf.read(src / "sa1.wav", dtype="int16")             # the LDC WAVs are NIST SPHERE
    (spk / "SA1.WAV").unlink()
    sf.write(spk / "SA1.WAV", x, sr, format="NIST", subtype="PCM_16")
    assert (spk / "SA1.WAV").read_bytes()[:7] == b"NIST_1A"
    (spk / "SA2.WAV").unlink()                                   # missing audio
    (spk / "SI1466.WAV").write_bytes(b"")                        # empty audio
    (spk / "SX116.PHN").write_text("0 100 h#\n100 oops\n")      # malformed label file
    with caplog.at_level(logging.WARNING):
        d = prepare_timit(tmp_path / "TIMIT", tmp_path / "out")
    assert len(d) == 7 and d.utts[0] == "fvmh0_sa1" and d.utt2dur["fvmh0_sa1"] == pytest.approx(len(x) / sr)
    assert "timit: skipped 3 of 10 recordings: 1 missing, 1 empty, 0 undecodable, 1 malformed" in caplog.text
    assert "SX116.PHN:2" in caplog.text
    assert validate(tmp_path / "out", no_feats=True) == []
    (spk / "SA1.TXT").write_bytes(b"0 100 caf\xe9\n")            # Latin-1, not UTF-8: an error
    with pytest.raises(DataError, match=r"SA1.TXT:1: not valid UTF-8"):
        prepare_timit(tmp_path / "TIMIT", tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
