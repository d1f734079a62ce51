"""speechkit.data.corpora.commonvoice: the Common Voice layout (a locale folder or a release root),
speakers from client ids, locales, genders, skips, MP3 clips."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import soundfile as sf

from speechkit.bin.prepare_corpus import main
from speechkit.data.corpora.commonvoice import prepare_commonvoice
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError

HEADER = "client_id\tpath\tsentence_id\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\tsegment"
A, B = "a" * 64 + "1" * 64, "b" * 128


def clip(path, sr=48000, fmt=None, seconds=0.5):
    path.parent.mkdir(parents=True, exist_ok=True)
    x = 0.3 * np.sin(2 * np.pi * 220 * np.arange(int(sr * seconds)) / sr).astype(np.float32)
    sf.write(path, x, sr, **({"format": fmt} if fmt else {}))


def row(client, path, sentence, gender="", locale="en"):
    return f"{client}\t{path}\t{len(path)}\t{sentence}\t2\t0\ttwenties\t{gender}\t\t{locale}\t"


def locale_folder(root, rows, clips):
    root.mkdir(parents=True, exist_ok=True)
    (root / "validated.tsv").write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    for name, kw in clips.items():
        clip(root / "clips" / name, **kw)


def test_a_locale_folder(tmp_path, caplog):
    cv = tmp_path / "en"
    locale_folder(cv, [
        row(A, "common_voice_en_1.mp3", "Don't stop, now!", "female_feminine"),
        row(A, "common_voice_en_2.wav", "Hello   world.", "female_feminine"),
        row(B, "common_voice_en_3.mp3", "A second voice", "male"),
        row(B, "common_voice_en_4.mp3", "", "male"),                    # no sentence
        row(B, "common_voice_en_5.mp3", "no clip", "male"),             # missing clip
        row(A, "common_voice_en_1.mp3", "listed twice"),                # duplicate
        f"{B}\tcommon_voice_en_6.mp3",                                  # malformed
    ], {"common_voice_en_1.mp3": {"fmt": "MP3"}, "common_voice_en_2.wav": {"sr": 22050},
        "common_voice_en_3.mp3": {"fmt": "MP3"}, "common_voice_en_4.mp3": {"fmt": "MP3"}})
    with caplog.at_level(logging.INFO):
        d = prepare_commonvoice(cv, tmp_path / "data", sample_rate=16000)
    a, b = A[:12], B[:12]
    assert d.utts == [f"{a}_common_voice_en_1", f"{a}_common_voice_en_2", f"{b}_common_voice_en_3"]
    assert d.text[f"{a}_common_voice_en_1"] == "dont stop now"   # the normalisation: "don't" -> "dont"
    assert d.text[f"{a}_common_voice_en_2"] == "hello world"
    assert set(d.utt2lang.values()) == {"en"} and d.utt2spk[f"{b}_common_voice_en_3"] == b
    assert d.wav_scp[f"{a}_common_voice_en_1"] == f"speechkit-resample --rate 16000 {cv}/clips/common_voice_en_1.mp3 |"
    assert d.wav_scp[f"{a}_common_voice_en_2"].startswith("sox -R ")
    assert abs(d.utt2dur[f"{a}_common_voice_en_2"] - 0.5) < 1e-6
    assert (tmp_path / "data" / "spk2gender").read_text() == f"{a} f\n{b} m\n"
    assert ("commonvoice: skipped 4 of 7 rows: 1 missing, 0 empty, 0 undecodable, 1 malformed, 1 no-text, "
            "1 duplicate") in caplog.text
    assert validate(tmp_path / "data", no_feats=True) == []


def test_a_release_root_of_locales_and_clients_sharing_a_prefix(tmp_path):
    c1, c2 = "c" * 12 + "0" * 116, "c" * 12 + "1" * 116  # the same first 12 characters: whole ids
    locale_folder(tmp_path / "cv" / "hi", [row(c1, "common_voice_hi_1.mp3", "नमस्ते", locale="hi")],
                  {"common_voice_hi_1.mp3": {"fmt": "MP3"}})
    locale_folder(tmp_path / "cv" / "zh-CN", [row(c2, "common_voice_zh-CN_1.mp3", "你好", locale="zh-CN")],
                  {"common_voice_zh-CN_1.mp3": {"fmt": "MP3"}})
    d = prepare_commonvoice(tmp_path / "cv", tmp_path / "data")
    assert d.utt2spk == {f"{c1}_common_voice_hi_1": c1, f"{c2}_common_voice_zh-CN_1": c2}
    assert sorted(d.utt2lang.values()) == ["hi", "zh"]
    assert not (tmp_path / "data" / "spk2gender").exists()   # gender unknown
    assert d.wav_scp[f"{c1}_common_voice_hi_1"] == str(tmp_path / "cv" / "hi" / "clips" / "common_voice_hi_1.mp3")
    only = prepare_commonvoice(tmp_path / "cv", tmp_path / "only_hi", locales=["hi"])
    assert list(only.utt2lang.values()) == ["hi"]
    with pytest.raises(DataError, match="^locales: 'ta' has no validated.tsv"):
        prepare_commonvoice(tmp_path / "cv", tmp_path / "x", locales=["ta"])


def test_no_locale_column_takes_lang_or_the_folder_name(tmp_path):
    cv = tmp_path / "de"
    cv.mkdir()
    (cv / "validated.tsv").write_text(f"client_id\tpath\tsentence\n{A}\tx.mp3\tGuten Tag\n", encoding="utf-8")
    clip(cv / "clips" / "x.mp3", fmt="MP3")
    assert set(prepare_commonvoice(cv, tmp_path / "d1").utt2lang.values()) == {"de"}
    assert set(prepare_commonvoice(cv, tmp_path / "d2", lang="gsw").utt2lang.values()) == {"gsw"}
    other = tmp_path / "mycorpus"
    cv.rename(other)
    assert prepare_commonvoice(other, tmp_path / "d3").utt2lang is None
    assert not (tmp_path / "d3" / "utt2lang").exists()


def test_bad_tables_are_errors_naming_the_file(tmp_path):
    (tmp_path / "cv").mkdir()
    (tmp_path / "cv" / "validated.tsv").write_text("path\tsentence\nx.mp3\thi\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"validated.tsv:1: the header names no client_id column"):
        prepare_commonvoice(tmp_path / "cv", tmp_path / "d")
    with pytest.raises(FileNotFoundError, match="no validated.tsv"):
        prepare_commonvoice(tmp_path / "empty", tmp_path / "d")


def test_via_the_cli_with_its_options(tmp_path, capsys):
    cv = tmp_path / "en"
    locale_folder(cv, [row(A, "common_voice_en_1.mp3", "one")], {"common_voice_en_1.mp3": {"fmt": "MP3"}})
    (cv / "train.tsv").write_text("\n".join([HEADER, row(B, "common_voice_en_1.mp3", "two")]) + "\n")
    assert main(["commonvoice", str(cv), str(tmp_path / "d"), "--table", "train.tsv", "--keep-punctuation"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert DataDir.load(tmp_path / "d").utt2spk == {f"{B[:12]}_common_voice_en_1": B[:12]}
