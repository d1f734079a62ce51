"""Shared preparer helpers: text normalisation, skip reports, wav.scp entries, phone alignment files."""
from __future__ import annotations

import logging
import wave

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora._common import (
    SkipLog, add_probed, check_parts, normalize_text, probe_or_skip, read_metadata_lines, read_phone_alignments, wav_entry,
    write_phone_alignments,
)
from speechkit.data.datadir import DataDir
from speechkit.utils.fileio import DataError


@pytest.mark.parametrize("raw, expected", [
    ("She had your dark suit in greasy wash water all year.", "she had your dark suit in greasy wash water all year"),
    ("Don't ask me to carry an oily rag like that.", "dont ask me to carry an oily rag like that"),
    ("'quoted'  words, well-known\tfact!", "quoted words well known fact"),
    ("राम घर गया। फिर?", "राम घर गया फिर"),                       # danda is punctuation (Po)
    ("E\u0301TE\u0301", "\u00e9t\u00e9"),                         # NFC first, then Latin lowercase
    ("Ab \u0393\u0394", "ab \u0393\u0394"),                       # only Latin is lowercased
    ("ശ്രുതിസ്\u200cമൃതി", "ശ്രുതിസ്\u200cമൃതി"),                    # ZWNJ inside a word is kept
    ("എല്ലാരും\u200c തേങ്ങ.", "എല്ലാരും തേങ്ങ"),                      # ... and dropped at a word edge
    ("  ...  ", ""),
])
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected


def test_normalize_text_keep_punctuation():
    assert normalize_text("Hello,   World!\u00a0Don't", keep_punctuation=True) == "Hello, World! Don't"
    assert normalize_text("E\u0301", keep_punctuation=True) == "\u00c9"


def test_read_metadata_lines_strips_crlf_and_rejects_non_utf8(tmp_path):
    f = tmp_path / "m.tsv"
    f.write_bytes(b"a\tb\r\nc\td\r\n")
    assert read_metadata_lines(f) == ["a\tb", "c\td"]
    f.write_bytes(b"ok\nbad \xff\n")
    with pytest.raises(DataError, match=r"m.tsv:2: not valid UTF-8"):
        read_metadata_lines(f)


def test_skiplog_counts_and_summary(caplog):
    log = SkipLog("recordings", corpus="demo")
    with caplog.at_level(logging.WARNING):
        for i in range(12):
            log.skip("missing" if i % 3 else "empty", f"file{i}")
        msg = log.summary(40, ("missing", "empty", "undecodable"))
    assert msg == "demo: skipped 12 of 40 recordings: 8 missing, 4 empty, 0 undecodable"
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("skipping file" in w for w in warnings) == 10          # only the first 10 one by one
    assert any("only counted" in w for w in warnings)
    assert warnings[-1] == msg


def test_probe_or_skip_classifies(tmp_path):
    good = tmp_path / "good.wav"
    sf.write(good, np.zeros(800, dtype=np.float32), 8000)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    header_only = tmp_path / "header.wav"
    with wave.open(str(header_only), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
    garbage = tmp_path / "garbage.wav"
    garbage.write_bytes(b"this is not audio at all" * 10)
    log = SkipLog()
    assert probe_or_skip(good, "g", log) == (800, 8000)
    for path in (tmp_path / "absent.wav", empty, header_only, garbage):
        assert probe_or_skip(path, path.stem, log) is None
    assert dict(log.counts) == {"missing": 1, "empty": 2, "undecodable": 1}


def test_wav_entry(tmp_path):
    p = tmp_path / "a b.flac"
    assert wav_entry(p, 16000) == str(p)
    assert wav_entry(p, 16000, 16000) == str(p)
    assert wav_entry(p, 22050, 16000) == f"sox -R '{p}' -t wav -r 16000 -b 16 -c 1 - |"  # -R: repeatable dither


def test_phone_alignments_round_trip_sorted(tmp_path):
    f = tmp_path / "phone_alignments"
    rows = [("u2", 0.5, 0.75, "b"), ("u1", 0.1, 0.2, "h#"), ("u2", 0.0, 0.5, "a"), ("u1", 0.0, 0.1, "sil")]
    assert write_phone_alignments(f, rows) == 4
    assert f.read_text().splitlines() == ["u1 0.0000 0.1000 sil", "u1 0.1000 0.2000 h#",
                                          "u2 0.0000 0.5000 a", "u2 0.5000 0.7500 b"]
    assert read_phone_alignments(f) == {"u1": [(0.0, 0.1, "sil"), (0.1, 0.2, "h#")],
                                        "u2": [(0.0, 0.5, "a"), (0.5, 0.75, "b")]}
    with pytest.raises(ValueError, match="bad phone label"):
        write_phone_alignments(f, [("u1", 0.0, 0.1, "a b")])
    f.write_text("u1 0.0 x sil\n")
    with pytest.raises(DataError, match="phone_alignments:1"):
        read_phone_alignments(f)


def test_check_parts_defaults_to_all_and_names_an_unknown_part():
    """mucs and zerospeech2019's --parts rule: none given is every known part in order (a dict's keys)."""
    known = {"unit": ("train", "unit"), "voice": ("train", "voice"), "test": ("test",)}
    assert check_parts(None, known) == ["unit", "voice", "test"]
    assert check_parts([], ("train", "dev")) == ["train", "dev"]
    assert check_parts(("test", "unit"), known) == ["test", "unit"]
    with pytest.raises(ValueError, match="^parts: 'dev' is not one of unit, voice, test$"):
        check_parts(["unit", "dev"], known)


def test_add_probed_adds_a_readable_file_and_skips_a_missing_one(tmp_path, caplog):
    good = tmp_path / "good.wav"
    sf.write(good, np.zeros(800, dtype=np.float32), 8000)
    d, skips = DataDir(wav_scp={}, text={}, utt2spk={}, utt2dur={}), SkipLog()
    assert add_probed(d, "s_u1", good, "a b", "s", skips, None)
    assert (d.wav_scp, d.text, d.utt2spk, d.utt2dur) == ({"s_u1": str(good)}, {"s_u1": "a b"}, {"s_u1": "s"},
                                                         {"s_u1": 0.1})
    assert not add_probed(d, "s_u2", tmp_path / "gone.wav", "c", "s", skips, None, key="u2")
    assert list(d.wav_scp) == list(d.text) == list(d.utt2spk) == list(d.utt2dur) == ["s_u1"]
    assert dict(skips.counts) == {"missing": 1}
    assert f"'u2': {tmp_path / 'gone.wav'}: no such file" in caplog.text
