"""The espeak-ng-synthesized mini corpus: determinism, layout, alignments that match the audio."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import soundfile as sf

from speechkit.data.corpora._common import read_phone_alignments
from speechkit.data.corpora.mini import (
    LEXICON, MARKER, compose_sentences, download_mini, phone_segments, prepare_mini,
)
from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate
from speechkit.utils.fileio import DataError


# ------------------------------------------------------------------ pure parts (no espeak needed)
def test_phone_segments_hand_worked():
    # 100 samples at 100 Hz: leading gap, two phones, an espeak pause '_:', a phone, final '_' at the end.
    events = [(10, "b"), (30, "a:"), (60, "_:"), (70, "_"), (80, "t"), (100, "_")]
    assert phone_segments(events, 100, 100) == [
        (0.0, 0.1, "sil"), (0.1, 0.3, "b"), (0.3, 0.6, "a:"), (0.6, 0.8, "sil"), (0.8, 1.0, "t")]
    # clipping to a shorter (resampled) duration drops what falls outside
    assert phone_segments(events, 100, 100, max_end=0.75)[-1] == (0.6, 0.75, "sil")
    with pytest.raises(ValueError, match="out of order"):
        phone_segments([(50, "a"), (40, "b")], 100, 100)


def test_sentences_are_deterministic_and_use_the_lexicon():
    a = compose_sentences("hi", 30, seed=3, speaker="sp01")
    assert a == compose_sentences("hi", 30, seed=3, speaker="sp01")
    assert a != compose_sentences("hi", 30, seed=4, speaker="sp01")
    vocab = {w for key in ("numbers", "colours", "verbs") for w in LEXICON["hi"][key]}
    vocab |= {w for pair in LEXICON["hi"]["nouns"] for w in pair} | {"है"}
    assert all(set(s.split()) <= vocab for s in a)
    en = compose_sentences("en", 200, seed=0, speaker="sp02")
    assert len(set(en)) > 150                      # a real variety, not a handful of prompts
    assert any(s.startswith("the ") for s in en) and any(len(s.split()) >= 3 and s.split()[0] in
                                                         LEXICON["en"]["numbers"] for s in en)


def test_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match="not empty and not a mini corpus"):
        download_mini(tmp_path, num_speakers=1, sentences_per_language=1, languages=["en"])
    assert (tmp_path / "thesis.tex").read_text() == "precious" and not (tmp_path / "wav").exists()


def test_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match="num_speakers"):
        download_mini(tmp_path, num_speakers=9)
    with pytest.raises(ValueError, match="languages"):
        download_mini(tmp_path, languages=["en", "fr"])
    with pytest.raises(DataError, match="no finished mini corpus"):
        prepare_mini(tmp_path, tmp_path / "out")


# ------------------------------------------------------------------ synthesized
def test_same_parameters_give_the_same_bytes(mini_corpus, mini_params, tmp_path):
    other = download_mini(tmp_path / "again", nj=1, **mini_params)   # other nj, fresh directory
    files = sorted(p.relative_to(mini_corpus) for p in mini_corpus.rglob("*") if p.is_file())
    assert len([f for f in files if f.suffix == ".wav"]) == 80
    assert files == sorted(p.relative_to(other) for p in other.rglob("*") if p.is_file())
    for f in files:
        assert (mini_corpus / f).read_bytes() == (other / f).read_bytes(), f


def test_marker_semantics(require_espeak, tmp_path):
    params = dict(seed=2, num_speakers=1, sentences_per_language=2, languages=["en"])
    target = download_mini(tmp_path / "db", **params)
    marker = target / MARKER
    assert json.loads(marker.read_text())["params"]["seed"] == 2
    stamp = marker.stat().st_mtime_ns
    wav = next((target / "wav").rglob("*.wav"))
    wav_bytes = wav.read_bytes()
    download_mini(target, **params)                                   # complete: nothing to do
    assert marker.stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match=r"seed=2 \(asked 3\)"):
        download_mini(target, **{**params, "seed": 3})
    assert wav.read_bytes() == wav_bytes                              # the error touched nothing
    download_mini(target, **{**params, "seed": 3}, overwrite=True)
    assert json.loads(marker.read_text())["params"]["seed"] == 3
    marker.unlink()                                                   # an interrupted run ...
    download_mini(target, **params)                                   # ... is simply redone
    assert marker.is_file()


def test_prepared_mini_data_dir(mini_data, mini_corpus):
    d = DataDir.load(mini_data)
    assert validate(mini_data, no_feats=True) == []
    assert len(d) == 80 and len(d.spk2utt) == 4
    assert {d.utt2lang[u] for u in d.utts} == {"en", "hi"}
    assert all(u.startswith(d.utt2spk[u] + "_") for u in d.utts)
    assert (mini_data / "spk2gender").read_text().split() == ["sp01", "m", "sp02", "f", "sp03", "m", "sp04", "f"]
    # each speaker speaks every language
    assert all({d.utt2lang[u] for u in us} == {"en", "hi"} for us in d.spk2utt.values())
    for utt in d.utts[::10]:
        info = sf.info(d.wav_scp[utt])
        assert info.samplerate == 16000 and info.channels == 1 and info.subtype == "PCM_16"
        assert abs(info.frames / 16000 - d.utt2dur[utt]) < 1e-3
    en = [d.text[u] for u in d.utts if d.utt2lang[u] == "en"]
    assert all(t == t.lower() for t in en)


def test_alignments_match_the_audio(mini_data):
    d = DataDir.load(mini_data)
    ali = read_phone_alignments(mini_data / "phone_alignments")
    assert set(ali) == set(d.utts)
    energy = {"sil": [], "phone": []}
    for utt in d.utts:
        segs, dur = ali[utt], d.utt2dur[utt]
        assert segs[0][0] == 0.0 and abs(segs[-1][1] - dur) < 2e-4           # covers the whole file
        assert all(b < e for b, e, _ in segs)                                   # non-empty, inside
        assert all(abs(e1 - b2) < 1e-9 for (_, e1, _), (b2, _, _) in zip(segs, segs[1:]))  # contiguous
        speech = sum(e - b for b, e, p in segs if p != "sil")
        assert speech > 0.8 * dur and len([p for *_, p in segs if p != "sil"]) >= 5
        x, sr = sf.read(d.wav_scp[utt])
        for b, e, p in segs:
            seg = x[int(b * sr):int(e * sr)]
            if len(seg) >= 160:
                energy["sil" if p == "sil" else "phone"].append(float(np.sqrt(np.mean(seg ** 2))))
    # independent check that the labels sit on the audio: silences are near-digital-silence,
    # phones are not (median RMS differs by orders of magnitude)
    assert np.median(energy["sil"]) < 0.01 * np.median(energy["phone"])


def test_sample_rate_option_uses_sox(mini_corpus, tmp_path):
    from speechkit.data.audio import read_audio

    d = prepare_mini(mini_corpus, tmp_path / "d8k", sample_rate=8000)
    utt = random.Random(0).choice(d.utts)
    assert d.wav_scp[utt].startswith("sox ") and d.wav_scp[utt].endswith(" -t wav -r 8000 -b 16 -c 1 - |")
    x, sr = read_audio(d.wav_scp[utt], key=utt)
    assert sr == 8000 and abs(len(x) / sr - d.utt2dur[utt]) < 1e-3
