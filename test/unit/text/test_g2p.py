"""G2P with espeak-ng: tokenisation, stress and syllables on hand-worked words, phone_info, data dirs."""
from __future__ import annotations

from pathlib import Path

import pytest

from speechkit.bin.g2p import main
from speechkit.data.validate import validate
from speechkit.text.g2p import (
    Pronunciation, espeak_voice, g2p_data_dir, is_vowel, parse_phonemized, phonemize, read_phone_info, sonority,
    syllabify, write_phone_info,
)
from speechkit.utils.fileio import DataError, read_table, write_table

pytest.importorskip("phonemizer")


def _espeak_ok() -> bool:
    try:
        espeak_voice("en")
        return True
    except Exception:
        return False


needs_espeak = pytest.mark.skipif(not _espeak_ok(), reason="espeak-ng (phonemizer backend) not installed")


def triples(p: Pronunciation) -> list[tuple[str, int, int, int]]:
    return list(zip(p.phones, p.stress, p.syllable, p.word))


# ------------------------------------------------------------------ hand-worked words (espeak-ng as installed)
@needs_espeak
def test_banana_stress_and_syllables():
    # espeak-ng: b ɐ n ˈæ n ə  ->  b ɐ . n ˈæ . n ə (V.CV), primary stress on the 2nd syllable
    (p,) = phonemize(["banana"], "en-us")
    assert triples(p) == [("b", 0, 0, 0), ("ɐ", 0, 0, 0), ("n", 1, 1, 0), ("æ", 1, 1, 0), ("n", 0, 2, 0), ("ə", 0, 2, 0)]


@needs_espeak
def test_hello_world_words_and_diphthong():
    (p,) = phonemize(["hello world"], "en-us")
    assert p.phones == ["h", "ə", "l", "oʊ", "w", "ɜː", "l", "d"]  # diphthong and long vowel are one token
    assert p.info_items() == ["0:0:0", "0:0:0", "1:1:0", "1:1:0", "1:2:1", "1:2:1", "1:2:1", "1:2:1"]
    assert (p.num_words, p.num_syllables) == (2, 3)


@needs_espeak
def test_secondary_stress_international():
    # ˌɪ n t ɚ n ˈæ ʃ ə n əl -> ˌɪn . tɚ . nˈæ . ʃə . nəl ("n t": falling sonority, onset t)
    (p,) = phonemize(["international"], "en-us")
    assert p.phones == ["ɪ", "n", "t", "ɚ", "n", "æ", "ʃ", "ə", "n", "əl"]
    assert p.stress == [2, 2, 0, 0, 1, 1, 0, 0, 0, 0]
    assert p.syllable == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


@needs_espeak
def test_punctuation_and_empty_output():
    a, b, c, d = phonemize(["hello, world!", "hello world", "...", ""], "en-us")
    assert a.phones == b.phones and a.info_items() == b.info_items()
    assert len(c) == 0 and len(d) == 0


@needs_espeak
def test_other_languages_and_voice_map():
    assert espeak_voice("en") == "en-us"
    assert espeak_voice("hi") == "hi"
    with pytest.raises(ValueError, match="no language 'xx'"):
        espeak_voice("xx")
    (p,) = phonemize(["नमस्ते दुनिया"], "hi")
    # n ə m ˈʌ s t eː | d ˈʊ n ɪ j ˌaː ; no English s+stop onset: nə.mʌs.teː
    assert p.phones == ["n", "ə", "m", "ʌ", "s", "t", "eː", "d", "ʊ", "n", "ɪ", "j", "aː"]
    assert p.syllable == [0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert p.stress == [0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 2, 2]
    assert p.word == [0] * 7 + [1] * 6


@needs_espeak
def test_language_switch_is_counted_and_reported(caplog):
    a, b = phonemize(["तीन लाल", "hello दुनिया"], "hi", ids=["u1", "u2"])
    assert len(a) == 6 and b.num_words == 2  # the English word keeps English phones, no "(en)" flag token
    assert not any("(" in p for p in b.phones)
    assert "voice hi: 1 utterances contain words read with another language's phones" in caplog.text
    assert "first: u2" in caplog.text


# ------------------------------------------------------------------ rules, independent of espeak
def test_parse_stress_marks_before_vowel_or_onset_agree():
    new = parse_phonemized(["h ə l ˈoʊ", "w ˈɜː l d"], "en-us")
    old = parse_phonemized(["h ə ˈl oʊ", "ˈw ɜː l d"], "en-us")  # older espeak: mark before the onset
    assert triples(new) == triples(old)
    assert new.stress == [0, 0, 1, 1, 1, 1, 1, 1]


def test_parse_drops_empty_words_and_mark_only_tokens():
    p = parse_phonemized(["", "ˈ", "ˌ b ˈa", "  "], "xx")
    assert triples(p) == [("b", 1, 0, 0), ("a", 1, 0, 0)]  # the later mark wins; words without phones vanish


def test_parse_word_without_vowel_is_one_syllable():
    p = parse_phonemized(["ʃ", "a b", "s t"], "")
    assert p.syllable == [0, 1, 1, 2, 2] and p.word == [0, 1, 1, 2, 2] and p.stress == [0] * 5


def test_syllabify_maximal_onset_with_sonority():
    # e k s t ɹ ə: English s+stop onset -> ɛk.stɹə ; elsewhere falling s->t stops the onset
    assert syllabify(["ɛ", "k", "s", "t", "ɹ", "ə"], "en-us") == [0, 0, 1, 1, 1, 1]
    assert syllabify(["ɛ", "k", "s", "t", "ɹ", "ə"], "hi") == [0, 0, 0, 1, 1, 1]
    # stop + liquid rises by 3 -> onset "ɡ ɹ"; nasal + stop falls -> n.t ; s + n rises by only 1 -> s.n
    assert syllabify(["ə", "ɡ", "ɹ", "iː"]) == [0, 1, 1, 1]
    assert syllabify(["a", "n", "t", "a"]) == [0, 0, 1, 1]
    assert syllabify(["a", "s", "n", "a"]) == [0, 0, 1, 1]
    # geminate: t.t ; a single consonant is always an onset (V.CV); leading/trailing consonants stay
    assert syllabify(["p", "a", "t", "t", "u", "m"]) == [0, 0, 0, 1, 1, 1]
    assert syllabify(["s", "t", "a", "n", "d"]) == [0] * 5


def test_phone_classes():
    for v in ("a", "oʊ", "iː", "əl", "ɚ", "r̩", "ã"):
        assert is_vowel(v), v
    for c in ("tʃ", "pʰ", "ʲ", "r.", "kː"):
        assert not is_vowel(c), c
    assert [sonority(x) for x in ("tʃ", "pʰ", "s", "m", "ɹ", "r.", "j", "ʲ", "oʊ", "?")] == [1, 1, 2, 3, 4, 4, 5, 5, 6, 1]


# ------------------------------------------------------------------ phone_info
def test_phone_info_round_trip(tmp_path):
    info = {"u2": Pronunciation(["a"], [1], [0], [0]),
            "u1": Pronunciation(["b", "a", "t", "ə"], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0])}
    write_phone_info(tmp_path / "phone_info", info)
    assert (tmp_path / "phone_info").read_text() == "u1 1:0:0 1:0:0 0:1:0 0:1:0\nu2 1:0:0\n"
    back = read_phone_info(tmp_path / "phone_info")
    assert back == {"u1": (1, [(1, 0, 0), (1, 0, 0), (0, 1, 0), (0, 1, 0)]), "u2": (2, [(1, 0, 0)])}


@pytest.mark.parametrize("line,msg", [
    ("u1 1:0:0 x:0:0", "item 2 of 'u1'"),
    ("u1 1:0", "item 1 of 'u1'"),
    ("u1 3:0:0", "stress must be 0, 1 or 2"),
    ("u1 0:1:0 0:0:0", "must not decrease"),
    ("u1 0:0:0 0:0:1", "spans two words"),
])
def test_phone_info_errors_name_file_and_line(tmp_path, line, msg):
    f = tmp_path / "phone_info"
    f.write_text("u0 0:0:0\n" + line + "\n")
    with pytest.raises(DataError, match=msg) as e:
        read_phone_info(f)
    assert f"{f}:2:" in str(e.value)


# ------------------------------------------------------------------ data dirs and CLI
def word_dir(root: Path, texts: dict[str, str], langs: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True)
    write_table(root / "text", texts)
    write_table(root / "utt2spk", {u: "spk" for u in texts})
    write_table(root / "spk2utt", {"spk": " ".join(sorted(texts))})
    write_table(root / "wav.scp", {u: f"/nonexistent/{u}.wav" for u in texts})
    if langs is not None:
        write_table(root / "utt2lang", langs)
    (root / "frame_shift").write_text("0.005\n")
    return root


@needs_espeak
def test_g2p_data_dir_writes_a_valid_phone_dir(tmp_path, caplog):
    src = word_dir(tmp_path / "src", {"spk_a": "hello world", "spk_b": "...", "spk_c": "नमस्ते"},
                   {"spk_a": "en", "spk_b": "en", "spk_c": "hi"})
    res = g2p_data_dir(src, tmp_path / "out")
    out = tmp_path / "out"
    assert (res.num_in, res.num_out, res.empty, res.languages) == (3, 2, ["spk_b"], {"en": 2, "hi": 1})
    assert "1 utterances with no phones" in caplog.text and "spk_b" in caplog.text
    assert validate(out, no_feats=True) == []
    text = read_table(out / "text")
    assert text == {"spk_a": "h ə l oʊ w ɜː l d", "spk_c": "n ə m ʌ s t eː"}
    assert read_table(out / "text.words") == {"spk_a": "hello world", "spk_c": "नमस्ते"}
    info = read_phone_info(out / "phone_info")
    assert {u: len(r) for u, (_, r) in info.items()} == {u: len(t.split()) for u, t in text.items()}
    assert (out / "frame_shift").read_text() == "0.005\n"


@needs_espeak
def test_g2p_language_errors(tmp_path, capsys):
    src = word_dir(tmp_path / "src", {"spk_a": "hello", "spk_b": "world"}, {"spk_a": "en", "spk_b": "klingon"})
    with pytest.raises(DataError, match=r"utt2lang:2: utterance 'spk_b': espeak-ng has no language 'klingon'"):
        g2p_data_dir(src, tmp_path / "out")
    nolang = word_dir(tmp_path / "nolang", {"spk_a": "hello"})
    with pytest.raises(DataError, match="no utt2lang and no lang was given"):  # the parameter ...
        g2p_data_dir(nolang, tmp_path / "out")
    assert main([str(nolang), str(tmp_path / "out")]) == 1  # ... which speechkit-g2p spells as its flag
    assert capsys.readouterr().err.endswith(" has no utt2lang and no --lang was given\n")
    g2p_data_dir(nolang, tmp_path / "out", lang="en-gb")
    assert read_table(tmp_path / "out" / "text")["spk_a"].split()[0] == "h"
    with pytest.raises(ValueError, match=f"OUT_DIR {nolang} is DATA_DIR {nolang}"):
        g2p_data_dir(nolang, nolang, lang="en")


@needs_espeak
def test_cli(tmp_path, capsys):
    src = word_dir(tmp_path / "src", {"spk_a": "banana"}, {"spk_a": "en"})
    assert main([str(src), str(tmp_path / "out")]) == 0
    assert "1 of 1 utterances (en 1), 6 phones" in capsys.readouterr().out
    write_table(src / "utt2lang", {"spk_a": "zz"})
    assert main([str(src), str(tmp_path / "out2")]) == 1
    err = capsys.readouterr().err
    assert "speechkit-g2p: error:" in err and "utt2lang:1" in err and "'zz'" in err
    assert not (tmp_path / "out2").exists()


@needs_espeak
def test_text_lines_not_in_utt2spk_are_counted_and_named(tmp_path, caplog, capsys):
    """Issue 23: text lines whose id is not in utt2spk were dropped without a message."""
    src = word_dir(tmp_path / "src", {"spk_a": "hello", "spk_b": "world"}, {"spk_a": "en", "spk_b": "en"})
    write_table(src / "text", {"spk_a": "hello", "spk_b": "world", "other_1": "banana", "other_2": "apple"})
    res = g2p_data_dir(src, tmp_path / "out")
    assert res.no_speaker == ["other_1", "other_2"] and res.num_out == 2
    assert f"{src}/text: 2 line(s) whose utterance is not in {src}/utt2spk are left out (first: other_1, " \
           "other_2)" in caplog.text
    assert validate(tmp_path / "out", no_feats=True) == []
    assert main([str(src), str(tmp_path / "out2")]) == 0
    assert "; 2 text line(s) not in utt2spk left out" in capsys.readouterr().out


def test_out_dir_never_overlaps_the_data_dir(tmp_path, capsys):
    src = word_dir(tmp_path / "src", {"spk_a": "hello"}, {"spk_a": "en"})
    before = sorted(p.name for p in src.iterdir())
    for out, why in ((src / "phn", "lies inside"), (tmp_path, "contains")):
        assert main([str(src), str(out)]) == 1
        assert f"speechkit-g2p: error: OUT_DIR {out} {why} DATA_DIR {src}" in capsys.readouterr().err
    assert sorted(p.name for p in src.iterdir()) == before
