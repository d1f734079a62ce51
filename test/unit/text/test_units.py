"""Unit inventories: round trips on real Hindi/Malayalam text, <unk> counting, B- spaces, I/O."""
from __future__ import annotations

import csv
import unicodedata

import pytest

from speechkit.text.units import (
    BLANK, SPACE, UNK, WB_UNK, MultilingualUnits, UnitInventory, encode_transcripts, load_units,
    canonical_text,
)
from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError

HI = ["उधर बाडमेर में मतदाताओं को जागरूक करने के उद्देश्य से", "वहीं भोपाल में भी मुख्य सचिव"]
ML = ["ഞാൻ ഒരു പാട്ട് പാടട്ടെ", "എന്നാൽ എന്നെപ്പോലെ വിഡ്\u200cഢിത്തം"]


def _strip_punct(s: str) -> str:
    return "".join(c for c in s if not unicodedata.category(c).startswith("P"))


@pytest.fixture(scope="module")
def real_text(shared_data):
    """Real transcripts: Hindi news (hindi_noa), Malayalam crowd sentences and story (msc_malayalam)."""
    hi = [line.strip() for line in (shared_data / "hindi_noa/manifest/train.wrd").read_text("utf-8").splitlines()]
    with open(shared_data / "msc_malayalam/sentences.tsv", encoding="utf-8") as f:
        ml = [_strip_punct(r["sentence"]) for r in csv.DictReader(f, delimiter="\t")]
    ml += [_strip_punct(x) for x in (shared_data / "msc_malayalam/story/Vasanavikruthi.txt").read_text("utf-8").splitlines()]
    return {"hi": [x for x in hi if x], "ml": [canonical_text(x) for x in ml if x.strip()]}


# ----------------------------------------------------------------------------- real text
@pytest.mark.parametrize("unit_type", ["char", "char_wb", "bpe"])
def test_round_trip_real_indic_text(real_text, unit_type):
    for lang, texts in real_text.items():
        inv = UnitInventory.build(texts, unit_type, vocab_size=300 if unit_type == "bpe" else None)
        for t in texts:
            ids = inv.encode(t)
            assert 0 not in ids
            assert inv.decode(ids) == canonical_text(t), (lang, t)
        assert inv.stats.num_oov == 0 and inv.stats.num_utts == len(texts)
        assert inv.stats.num_chars == sum(len(t.replace(" ", "")) for t in texts)


def test_char_units_equal_fairseq_letters(shared_data):
    """Independent reference: hindi_noa's train.ltr (fairseq letters, '|' = word boundary) lists
    exactly the code points our char units produce, nukta and vowel signs as separate letters."""
    wrd = (shared_data / "hindi_noa/manifest/train.wrd").read_text("utf-8").splitlines()
    ltr = (shared_data / "hindi_noa/manifest/train.ltr").read_text("utf-8").splitlines()
    assert len(wrd) == len(ltr) == 523
    inv = UnitInventory.build(wrd, "char")
    for w, letters in zip(wrd, ltr):
        ours = ["|" if t == SPACE else t for t in inv.tokenize(w)]
        assert ours == letters.split()[1:-1]  # ltr lines start and end with '|'


def test_real_inventory_sizes(real_text):
    """Code points keep the inventories small (grapheme clusters would give several hundred)."""
    hi = UnitInventory.build(real_text["hi"], "char")
    ml = UnitInventory.build(real_text["ml"], "char")
    assert 60 < len(hi) < 90 and 60 < len(ml) < 90
    assert "\u093c" in hi.token_to_id  # nukta is its own unit
    assert "\u0d4d" in ml.token_to_id and "\u200c" in ml.token_to_id  # virama and ZWNJ


def test_combining_marks_and_word_begin():
    inv = UnitInventory.build(ML + HI, "char_wb")
    assert inv.tokenize("ഞാൻ ഒരു") == ["B-ഞ", "ാ", "ൻ", "B-ഒ", "ര", "ു"]
    # the ZWNJ inside a word is a unit and survives the round trip
    assert "\u200c" in inv.tokenize(ML[1])
    assert inv.decode(inv.encode(ML[1])) == ML[1]
    # Hindi: nukta form U+095C is NFC-decomposed to U+0921 U+093C (composition exclusion)
    assert canonical_text("\u095c") == "\u0921\u093c"
    char = UnitInventory.build(["ड़"], "char")
    assert char.tokenize("\u095c") == ["\u0921", "\u093c"]


# ----------------------------------------------------------------------------- ids and specials
def test_reserved_ids():
    for ut, third in [("char", SPACE), ("char_wb", WB_UNK)]:
        inv = UnitInventory.build(["ab c"], ut)
        assert inv.tokens[:3] == [BLANK, UNK, third]
        assert inv.blank_id == 0 and inv.unk_id == 1
        assert inv.tokens[3:] == sorted(inv.tokens[3:], key=lambda s: s.encode())
    assert UnitInventory.build(["ab c"], "char").tokens == [BLANK, UNK, SPACE, "a", "b", "c"]
    assert UnitInventory.build(["ab c"], "char_wb").tokens == [BLANK, UNK, WB_UNK, "B-a", "B-c", "b"]
    bpe = UnitInventory.build(HI * 3, "bpe", vocab_size=40)
    assert bpe.tokens[:2] == [BLANK, UNK] and len(bpe) == 40


def test_char_and_char_wb_encoding_by_hand():
    inv = UnitInventory.build(["ab c"], "char")
    assert inv.encode("ab c") == [3, 4, 2, 5]
    assert inv.decode([0, 3, 0, 4, 2, 2, 5, 0]) == "ab c"  # blanks dropped, repeated spaces collapsed
    assert inv.decode([2, 3, 2]) == "a"
    wb = UnitInventory.build(["ab c"], "char_wb")
    assert wb.encode("ab c") == [3, 5, 4]
    assert wb.decode([5, 3, 5, 4]) == "b ab c"  # a hypothesis may start mid-word
    with pytest.raises(ValueError, match="out of range"):
        wb.decode([6])


def test_whitespace_and_nfc_normalisation():
    inv = UnitInventory.build(["ab c"], "char_wb")
    assert inv.encode("  ab \t c \n") == inv.encode("ab c")
    assert inv.decode(inv.encode("  ab \t c ")) == "ab c"


# ----------------------------------------------------------------------------- <unk>
def test_unk_counting_char():
    inv = UnitInventory.build(["abc"], "char")
    ids = inv.encode("axbyy c")
    assert ids == [3, 1, 4, 1, 1, 2, 5]
    st = inv.stats
    assert (st.num_utts, st.num_chars, st.num_oov) == (1, 6, 3)
    assert dict(st.oov) == {"x": 1, "y": 2}
    assert inv.decode(ids) == "a<unk>b<unk><unk> c"
    assert "3 of 6 characters" in st.summary()
    old = inv.reset_stats()
    assert old.num_oov == 3 and inv.stats.num_oov == 0


def test_char_wb_unknown_word_start_keeps_the_space():
    inv = UnitInventory.build(["ab ba"], "char_wb")
    ids = inv.encode("ab xa ab")
    assert inv.tokens[ids[2]] == WB_UNK
    assert inv.decode(ids) == "ab <unk>a ab"  # three words: the boundary survived
    assert inv.stats.num_oov == 1 and dict(inv.stats.oov) == {"x": 1}
    # a known character in a position never seen in training is <unk> too
    inv = UnitInventory.build(["ab bb"], "char_wb")
    ids = inv.encode("aa ba")  # 'a' was only ever word-initial
    assert [inv.tokens[i] for i in ids] == ["B-a", UNK, "B-b", UNK]
    assert inv.decode(ids) == "a<unk> b<unk>"


def test_encode_checked_skips():
    inv = UnitInventory.build(["abc"], "char_wb")
    assert inv.encode_checked("ab", key="u1") == ([inv.token_to_id["B-a"], inv.token_to_id["b"]], None)
    ids, reason = inv.encode_checked("xyz q", key="u2")
    assert ids is None and "no in-vocabulary symbol" in reason and "4 characters" in reason
    ids, reason = inv.encode_checked("   ", key="u3")
    assert ids is None and reason == "empty transcript"
    assert inv.stats.num_skipped == 2 and set(inv.stats.skipped) == {"u2", "u3"}
    bpe = UnitInventory.build(HI * 3, "bpe", vocab_size=40)
    assert bpe.encode_checked("xyz")[0] is None
    assert bpe.stats.num_oov == 3


def test_bpe_unk():
    inv = UnitInventory.build(HI * 3, "bpe", vocab_size=60)
    ids = inv.encode("उधर xyz")
    assert 1 in ids and inv.stats.num_oov == 3 and dict(inv.stats.oov) == {"x": 1, "y": 1, "z": 1}
    assert inv.decode(ids) == "उधर <unk>"


def test_min_count():
    inv = UnitInventory.build(["aab", "ac"], "char", min_count=2)
    assert inv.tokens == [BLANK, UNK, SPACE, "a"]
    with pytest.raises(ConfigError, match="min_count"):
        UnitInventory.build(["ab"], "bpe", vocab_size=10, min_count=2)
    with pytest.raises(ConfigError, match="vocab_size"):
        UnitInventory.build(["ab"], "char", vocab_size=10)
    with pytest.raises(ConfigError, match="no non-empty transcript"):
        UnitInventory.build(["", "  "], "char")


# ----------------------------------------------------------------------------- I/O
@pytest.mark.parametrize("unit_type", ["char", "char_wb", "bpe"])
def test_save_load_round_trip(tmp_path, unit_type):
    inv = UnitInventory.build(HI + ML, unit_type, vocab_size=80 if unit_type == "bpe" else None)
    path = inv.save(tmp_path / "u")
    lines = path.read_text("utf-8").splitlines()
    assert lines[0] == "<blank> 0" and lines[1] == "<unk> 1" and len(lines) == len(inv)
    back = load_units(tmp_path / "u")
    assert back == inv and back.unit_type == unit_type
    for t in HI + ML:
        assert back.encode(t) == inv.encode(t)
    assert (tmp_path / "u" / "bpe.model").exists() == (unit_type == "bpe")


def test_bpe_is_deterministic():
    a = UnitInventory.build(HI * 5 + ML * 5, "bpe", vocab_size=70)
    b = UnitInventory.build(HI * 5 + ML * 5, "bpe", vocab_size=70)
    assert a.sp_model == b.sp_model and a.tokens == b.tokens


def test_load_errors_name_file_and_line(tmp_path):
    f = tmp_path / "units.txt"
    f.write_text("<blank> 0\n<unk> 1\n<space> 2\na x\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"units.txt:4: id 'x' is not an integer"):
        UnitInventory.load(f)
    f.write_text("<blank> 0\n<unk> 1\n<space> 2\na 4\n", encoding="utf-8")
    with pytest.raises(DataError, match="id 3 is missing"):
        UnitInventory.load(f)
    f.write_text("<blank> 0\n<unk> 1\n<space> 2\na 2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"units.txt:4: id 2 already used"):
        UnitInventory.load(f)
    f.write_text("<blank> 0\n<unk> 1\n<space> 2\nab 3\n", encoding="utf-8")
    with pytest.raises(DataError, match="not one code point"):
        UnitInventory.load(f)


# ----------------------------------------------------------------------------- multilingual
@pytest.mark.parametrize("unit_type", ["char", "char_wb", "bpe"])
def test_multilingual_union_mapping(tmp_path, unit_type):
    mu = MultilingualUnits.build({"ml": ML * 4, "hi": HI * 4}, unit_type,
                                 vocab_size=50 if unit_type == "bpe" else None)
    assert mu.languages == ["hi", "ml"] and mu.lang_index("ml") == 1
    union_units = set(mu.union.tokens)
    for lang, texts in (("hi", HI), ("ml", ML)):
        inv = mu[lang]
        assert set(inv.tokens) <= union_units
        assert mu.to_union[lang][:2] == [0, 1]
        for t in texts:
            ids = mu.encode(t, lang)
            uids = mu.encode(t, lang, target="union")
            assert mu.decode(ids, lang) == mu.decode(uids) == t
            if unit_type != "bpe":
                assert mu.union.encode(t) == uids
    # the union is exactly the per-language units together
    expect = set(mu["hi"].tokens) | set(mu["ml"].tokens)
    assert union_units == expect
    if unit_type == "bpe":
        with pytest.raises(ConfigError, match="union"):
            mu.union.encode(HI[0])
    mu.save(tmp_path / "units")
    back = load_units(tmp_path / "units")
    assert isinstance(back, MultilingualUnits)
    assert back.languages == mu.languages and back.to_union == mu.to_union and back.union == mu.union
    assert back.vocab_sizes == mu.vocab_sizes
    with pytest.raises(KeyError, match="unknown language 'ta'"):
        back.encode("x", "ta")
    # a corrupted map is caught
    (tmp_path / "units" / "hi" / "to_union.int").write_text("0 0\n1 2\n", encoding="utf-8")
    with pytest.raises(DataError, match="to_union.int"):
        load_units(tmp_path / "units")


def test_encode_transcripts():
    mu = MultilingualUnits.build({"hi": HI, "ml": ML}, "char_wb")
    text = {"a": HI[0], "b": ML[0], "c": "qqq", "d": ""}
    u2l = {"a": "hi", "b": "ml", "c": "ml", "d": "hi"}
    ids, skipped = encode_transcripts(text, mu, u2l, target="union")
    assert set(ids) == {"a", "b"} and set(skipped) == {"c", "d"}
    assert mu.decode(ids["b"]) == ML[0] and ids["b"] == mu.union.encode(ML[0])
    assert mu["ml"].stats.num_oov == 3 and mu["ml"].stats.num_skipped == 1
    with pytest.raises(ValueError, match="utterance 'x': unknown language 'ta'"):
        encode_transcripts({"x": "a"}, mu, {"x": "ta"})
    with pytest.raises(ValueError, match="has no language"):
        encode_transcripts({"x": "a"}, mu)
    single = UnitInventory.build(HI, "char")
    ids, skipped = encode_transcripts({"a": HI[1], "b": "zz"}, single)
    assert single.decode(ids["a"]) == HI[1] and "b" in skipped
