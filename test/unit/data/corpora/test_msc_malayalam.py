"""Malayalam Speech Corpus preparer on ../shared/data/msc_malayalam and on a synthetic copy."""
from __future__ import annotations

import logging
import unicodedata

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora.msc_malayalam import prepare_msc_malayalam
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


def _vote_counts(speech_tsv):
    rows = [ln.rstrip("\r").split("\t") for ln in speech_tsv.read_text(encoding="utf-8").splitlines()[1:]]
    votes = [0 if r[5] == "default" else int(r[5]) for r in rows]
    return len(rows), sum(v >= 0 for v in votes)


def test_crowd_default_vote_filter(shared_data, tmp_path, caplog):
    root = shared_data / "msc_malayalam"
    n_rows, n_kept = _vote_counts(root / "speech.tsv")
    assert (n_rows, n_kept) == (2098, 1628)       # 1518 voted >= 0 plus 110 not voted yet ('default')
    with caplog.at_level(logging.INFO):
        d = prepare_msc_malayalam(root, tmp_path / "crowd")
    assert "msc_malayalam: skipped 1 of 1628 recordings: 1 missing, 0 empty, 0 undecodable" in caplog.text
    assert len(d) == 1627 and len(d.spk2utt) == 78
    assert validate(tmp_path / "crowd", no_feats=True) == []
    loaded = DataDir.load(tmp_path / "crowd")
    assert set(loaded.utt2lang.values()) == {"ml"}
    assert all(unicodedata.is_normalized("NFC", t) and not any(unicodedata.category(c).startswith("P") for c in t)
               for t in loaded.text.values())
    utt = "2dEDqqeI3PZx0m2D9EBHUn7noTM2_022Bgg06giNtYdeKfvOs"          # first row of speech.tsv, vote 11
    assert loaded.utt2spk[utt] == "2dEDqqeI3PZx0m2D9EBHUn7noTM2"
    assert loaded.wav_scp[utt].endswith("audio/cd7ec9d9-adb4-45d8-a299-a631e3252991.ogg")
    assert not (tmp_path / "crowd" / "spk2gender").exists()          # users.tsv knows only some genders


def test_crowd_without_vote_filter_reports_the_11_absent_files(shared_data, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        d = prepare_msc_malayalam(shared_data / "msc_malayalam", tmp_path / "all", min_vote=None)
    assert len(d) == 2087
    assert "msc_malayalam: skipped 11 of 2098 recordings: 11 missing, 0 empty, 0 undecodable" in caplog.text


def test_story(shared_data, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        d = prepare_msc_malayalam(shared_data / "msc_malayalam", tmp_path / "story", subset="story", sample_rate=16000)
    assert len(d) == 112 and list(d.spk2utt) == ["storyreader"]
    assert "skipped 12 of 124 recordings: 12 missing" in caplog.text   # lines 113-124 have no audio
    assert d.text["storyreader_001"] == "വാസനാവികൃതി"
    assert d.wav_scp["storyreader_002"].startswith("sox ") and "Vasanavikruthi-2.flac" in d.wav_scp["storyreader_002"]
    assert (tmp_path / "story" / "spk2gender").read_text() == "storyreader f\n"
    assert validate(tmp_path / "story", no_feats=True) == []


@pytest.fixture
def fake_msc(tmp_path):
    root = tmp_path / "msc"
    (root / "audio").mkdir(parents=True)
    sf.write(root / "audio" / "a.ogg", (0.1 * np.random.default_rng(0).standard_normal(8000)).astype(np.float32),
             16000, format="OGG", subtype="VORBIS")
    (root / "audio" / "empty.ogg").write_bytes(b"")
    (root / "audio" / "bad.ogg").write_bytes(b"OggS not really")
    (root / "sentences.tsv").write_text("id\tsentence\tcategory\r\ns1\tകയ്യിൽ കാശുണ്ടോ?\tconversation\r\n",
                                        encoding="utf-8")
    header = "id\tsentence\tuser\tfileName\ttime\tvote\r\n"
    rows = ["r1\ts1\tU1\taudio/a.ogg\t1\t3", "r2\ts1\tU1\taudio/empty.ogg\t1\t0", "r3\ts1\tU2\taudio/bad.ogg\t1\tdefault",
            "r4\ts1\tU2\taudio/gone.ogg\t1\t5", "r5\ts1\tU3\taudio/a.ogg\t1\t-2", "r6\ts1\tU3\taudio/a.ogg",
            "r7\tnope\tU3\taudio/a.ogg\t1\t1"]
    (root / "speech.tsv").write_text(header + "\r\n".join(rows) + "\r\n", encoding="utf-8")
    return root


def test_synthetic_crowd_bad_rows_and_audio(fake_msc, tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        d = prepare_msc_malayalam(fake_msc, tmp_path / "out")
    assert d.utts == ["U1_r1"] and d.text["U1_r1"] == "കയ്യിൽ കാശുണ്ടോ"
    assert "skipped 2 of 7 rows of speech.tsv: 2 malformed" in caplog.text       # r6 short, r7 unknown sentence
    assert "speech.tsv:7: 4 fields, header has 6" in caplog.text
    assert "speech.tsv:8: sentence id 'nope' not in sentences.tsv" in caplog.text
    assert "kept 4 of 5 usable rows with vote >= 0" in caplog.text                 # r5 voted down
    assert "'U2_r3': " in caplog.text and "bad.ogg: not a readable audio file" in caplog.text
    assert "skipped 3 of 4 recordings: 1 missing, 1 empty, 1 undecodable" in caplog.text
    with pytest.raises(DataError, match="no usable utterances"):
        prepare_msc_malayalam(fake_msc, tmp_path / "out2", min_vote=10)


def test_non_utf8_metadata_is_an_error(fake_msc, tmp_path):
    raw = (fake_msc / "speech.tsv").read_bytes().replace(b"U2\taudio/bad", b"U\xe92\taudio/bad")
    (fake_msc / "speech.tsv").write_bytes(raw)
    with pytest.raises(DataError, match=r"speech.tsv:4: not valid UTF-8"):
        prepare_msc_malayalam(fake_msc, tmp_path / "out")
