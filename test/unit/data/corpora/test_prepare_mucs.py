"""MUCS 2021 preparer (speechkit.data.corpora.mucs) on a small fake tree: ids, speakers, dev draw, skips."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora.mucs import draw_dev, language_code, prepare_mucs
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


def fake_tree(root, langs=("Hindi", "mr"), n_train=4, dev=False):
    """Per language: train/ with ``n_train`` utterances (ids s<k>_<i>) + one without text + one
    without audio, test/ with one; 8 kHz WAVs of 0.25 s."""
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(2000) / 8000)).astype(np.float32)
    for lang in langs:
        splits = {"train": [f"s{i % 2}_{i:03d}" for i in range(n_train)], "test": ["s9_900"]}
        if dev:
            splits["Dev"] = ["s8_800"]
        for split, ids in splits.items():
            d = root / lang / split
            (d / "audio").mkdir(parents=True)
            for uid in ids:
                sf.write(d / "audio" / f"{uid}.wav", tone, 8000, subtype="PCM_16")
            lines = [f"{uid} शब्द {uid}!" for uid in ids]
            if split == "train":
                lines += ["s0_998", "s0_999 कोई ऑडियो नहीं"]  # no text / no audio: skipped
            (d / "transcription.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def table(path):
    return dict(line.split(" ", 1) for line in path.read_text(encoding="utf-8").splitlines())


def test_language_code():
    assert language_code("Hindi") == "hi" and language_code("ODIA") == "or" and language_code("mr") == "mr"
    assert language_code("docs") is None and language_code("union") is None


def test_pseudo_speakers_drawn_dev_and_skips(tmp_path, caplog):
    fake_tree(tmp_path / "db")
    with caplog.at_level(logging.WARNING):
        counts = prepare_mucs(tmp_path / "db", tmp_path / "out")
    assert counts == {"hi": {"train": 3, "dev": 1, "test": 1}, "mr": {"train": 3, "dev": 1, "test": 1}}
    assert "mucs hi/train: skipped 2 of 6 lines: 0 malformed, 1 no-text, 1 missing" in caplog.text
    for lang in ("hi", "mr"):
        for split in ("train", "dev", "test"):
            out = tmp_path / "out" / lang / split
            assert validate(out, no_feats=True) == []
            d = DataDir.load(out)
            assert all(d.utt2spk[u] == u and u.startswith(f"{lang}-s") for u in d.utts)  # one per utterance
            assert set(d.utt2lang.values()) == {lang}
            assert all(v.startswith("sox -R ") and v.endswith(" -r 16000 -b 16 -c 1 - |") for v in d.wav_scp.values())
    assert table(tmp_path / "out/hi/test/text") == {"hi-s9-900": "शब्द s9 900"}
    assert table(tmp_path / "out/hi/test/utt2dur") == {"hi-s9-900": "0.250"}


def test_speaker_from_id_corpus_dev_and_native_rate(tmp_path):
    fake_tree(tmp_path / "db", langs=("Marathi",), dev=True)
    counts = prepare_mucs(tmp_path / "db", tmp_path / "out", speaker_from_id=True, sample_rate=8000)
    assert counts == {"mr": {"train": 4, "dev": 1, "test": 1}}  # Dev/ found case-insensitively
    d = DataDir.load(tmp_path / "out/mr/train")
    assert d.utt2spk == {"mr-s0_000": "mr-s0", "mr-s0_002": "mr-s0", "mr-s1_001": "mr-s1", "mr-s1_003": "mr-s1"}
    assert all(v.endswith(".wav") and not v.startswith("sox") for v in d.wav_scp.values())


def test_draw_dev_whole_speakers_seeded():
    d = DataDir(utt2spk={f"s{i}_{j}": f"s{i}" for i in range(4) for j in range(3)})
    train, dev = draw_dev(d, 0.3, seed=0)
    assert draw_dev(d, 0.3, seed=0) == (train, dev)
    assert sorted(train + dev) == d.utts and len(dev) >= 4 and len({u.split("_")[0] for u in dev}) == 2
    assert not {u.split("_")[0] for u in dev} & {u.split("_")[0] for u in train}
    with pytest.raises(ValueError, match="fraction"):
        draw_dev(d, 1.0, seed=0)
    with pytest.raises(DataError, match="1 speaker"):
        draw_dev(DataDir(utt2spk={"a_1": "a", "a_2": "a"}), 0.5, seed=0)


def test_layout_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such directory"):
        prepare_mucs(tmp_path / "nothing", tmp_path / "out")
    (tmp_path / "db" / "docs").mkdir(parents=True)
    with pytest.raises(DataError, match="no language folder"):
        prepare_mucs(tmp_path / "db", tmp_path / "out")
    fake_tree(tmp_path / "db", langs=("Hindi",))
    with pytest.raises(DataError, match="^languages: 'ta' is not under"):
        prepare_mucs(tmp_path / "db", tmp_path / "out", languages=["ta"])
    (tmp_path / "db" / "hi").mkdir()
    with pytest.raises(DataError, match="Hindi/ and hi/ are both language 'hi'"):
        prepare_mucs(tmp_path / "db", tmp_path / "out")


def test_registered_form_writes_one_data_dir(tmp_path):
    """`speechkit-prepare-corpus mucs` (issue 39): every language's official parts in one data dir, no dev
    drawn, the rate as asked, punctuation kept on request; a recipe's --corpus mucs splits it itself."""
    from speechkit.bin.prepare_corpus import main
    from speechkit.data.corpora.mucs import prepare_mucs_corpus

    fake_tree(tmp_path / "db", langs=("Hindi", "Marathi"), dev=True)
    assert main(["mucs", str(tmp_path / "db"), str(tmp_path / "all"), "--sample-rate", "16000"]) == 0
    d = DataDir.load(tmp_path / "all")
    assert len(d) == 12 and sorted(set(d.utt2lang.values())) == ["hi", "mr"]  # 4 train + 1 dev + 1 test each
    assert all(v.startswith("sox -R ") for v in d.wav_scp.values()) and validate(tmp_path / "all", no_feats=True) == []
    part = prepare_mucs_corpus(tmp_path / "db", tmp_path / "test_hi", languages=["hi"], parts=["test"],
                               keep_punctuation=True)
    assert part.text == {"hi-s9-900": "शब्द s9_900!"} and part.wav_scp["hi-s9-900"].endswith("s9_900.wav")
    with pytest.raises(ValueError, match="^parts: 'eval' is not one of train, dev, test"):
        prepare_mucs_corpus(tmp_path / "db", tmp_path / "x", parts=["eval"])
