"""speechkit-make-units: layouts, OOV reporting on dev sets, skips and input errors."""
from __future__ import annotations

import json

import pytest

from speechkit.bin.make_units import main
from speechkit.text.units import MultilingualUnits, UnitInventory, load_units

TRAIN = {
    "hi_a": ("hi", "उधर बाडमेर में मतदाताओं को जागरूक"),
    "hi_b": ("hi", "वहीं भोपाल में भी मुख्य सचिव"),
    "ml_a": ("ml", "ഞാൻ ഒരു പാട്ട് പാടട്ടെ"),
    "ml_b": ("ml", "കയ്യിൽ കാശുണ്ടോ"),
}


def _write_dir(d, rows: dict[str, tuple[str, str]], with_lang: bool = True):
    d.mkdir(parents=True, exist_ok=True)
    keys = sorted(rows)
    (d / "text").write_text("".join(f"{k} {rows[k][1]}\n" if rows[k][1] else f"{k}\n" for k in keys), "utf-8")
    if with_lang:
        (d / "utt2lang").write_text("".join(f"{k} {rows[k][0]}\n" for k in keys), "utf-8")
    return d


def test_single_inventory(tmp_path):
    data = _write_dir(tmp_path / "train", TRAIN, with_lang=False)
    assert main([str(data), str(tmp_path / "units"), "--unit", "char_wb"]) == 0
    inv = load_units(tmp_path / "units")
    assert isinstance(inv, UnitInventory) and inv.unit_type == "char_wb"
    for _, t in TRAIN.values():
        assert inv.decode(inv.encode(t)) == t
    report = json.loads((tmp_path / "units" / "report.json").read_text("utf-8"))
    assert report["num_units"] == len(inv) and report["train"]["all"]["num_oov"] == 0


def test_per_language_layout_and_dev_oov_report(tmp_path, capsys):
    train = _write_dir(tmp_path / "train", TRAIN)
    dev = _write_dir(tmp_path / "dev", {
        "hi_c": ("hi", "में xyz"),          # 3 OOV characters in Hindi
        "hi_d": ("hi", ""),                 # empty transcript: skipped
        "ml_c": ("ml", "hello"),            # no Malayalam symbol at all: skipped
        "ml_d": ("ml", "ഒരു പാട്ട്"),
    })
    out = tmp_path / "units"
    rc = main([str(train), str(out), "--unit", "char", "--per-language", "--check", str(dev)])
    assert rc == 0
    for f in ["languages.txt", "hi/units.txt", "hi/to_union.int", "ml/units.txt", "ml/to_union.int",
              "union/units.txt", "report.json"]:
        assert (out / f).is_file(), f
    assert (out / "languages.txt").read_text() == "hi 0\nml 1\n"
    mu = load_units(out)
    assert isinstance(mu, MultilingualUnits)
    report = json.loads((out / "report.json").read_text("utf-8"))
    hi, ml = report["check"][str(dev)]["hi"], report["check"][str(dev)]["ml"]
    assert hi["num_oov"] == 3 and hi["oov"] == {"x": 1, "y": 1, "z": 1}
    assert hi["num_skipped"] == 1 and hi["skipped"] == {"hi_d": "empty transcript"}
    assert ml["num_skipped"] == 1 and "no in-vocabulary symbol" in ml["skipped"]["ml_c"]
    assert ml["num_oov"] == 5 and ml["num_utts"] == 2
    assert report["num_units"]["union"] == len(mu.union)
    err = capsys.readouterr().err  # OOV counts and skips are logged per language
    assert "dev/hi: 3 of 6 characters (50.00 %)" in err and "skipped 1 transcript(s): hi_d: empty" in err


def test_bpe_per_language(tmp_path, capsys):
    train = _write_dir(tmp_path / "train", {**TRAIN, **{f"{k}2": v for k, v in TRAIN.items()}})
    out = tmp_path / "units"
    assert main([str(train), str(out), "--unit", "bpe", "--vocab-size", "30", "--per-language"]) == 1
    assert "Vocabulary size is smaller than required_chars" in capsys.readouterr().err
    assert main([str(train), str(out), "--unit", "bpe", "--vocab-size", "60", "--per-language"]) == 0
    assert (out / "hi" / "bpe.model").is_file() and not (out / "union" / "bpe.model").exists()
    mu = load_units(out)
    assert mu.vocab_sizes == {"hi": 60, "ml": 60}
    assert mu.decode(mu.encode(TRAIN["ml_a"][1], "ml", target="union")) == TRAIN["ml_a"][1]


def test_rerun_switches_layout_cleanly(tmp_path):
    train = _write_dir(tmp_path / "train", TRAIN)
    out = tmp_path / "units"
    assert main([str(train), str(out), "--unit", "char", "--per-language"]) == 0
    assert main([str(train), str(out), "--unit", "char"]) == 0
    assert isinstance(load_units(out), UnitInventory)  # the stale languages.txt is gone
    # the whole earlier inventory (its per-language dirs too) is in .backup/1, none of it beside the new one
    assert sorted(p.name for p in out.iterdir()) == [".backup", "report.json", "units.txt"]
    assert isinstance(load_units(out / ".backup" / "1"), MultilingualUnits)


def test_out_dir_overlapping_an_input_is_refused(tmp_path, capsys):
    """Issue 23 sweep: OUT_DIR = DATA_DIR wrote units.txt and report.json into the data dir."""
    train = _write_dir(tmp_path / "train", TRAIN)
    dev = _write_dir(tmp_path / "dev", {"hi_c": ("hi", "भोपाल")})
    for out, msg in [(train, f"OUT_DIR {train} is DATA_DIR {train}"),
                     (dev / "lang", f"OUT_DIR {dev / 'lang'} lies inside --check {dev}"),
                     (tmp_path, "contains DATA_DIR")]:
        assert main([str(train), str(out), "--unit", "char", "--check", str(dev)]) == 1
        assert msg in capsys.readouterr().err
    assert sorted(p.name for p in train.iterdir()) == ["text", "utt2lang"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev", "train"]
    assert sorted(p.name for p in dev.iterdir()) == ["text", "utt2lang"]


def test_unknown_language_in_check_dir_names_file_and_line(tmp_path, capsys):
    train = _write_dir(tmp_path / "train", TRAIN)
    dev = _write_dir(tmp_path / "dev", {"hi_c": ("hi", "में"), "ta_a": ("ta", "வணக்கம்")})
    out = tmp_path / "units"
    rc = main([str(train), str(out), "--unit", "char", "--per-language", "--check", str(dev)])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"{dev / 'utt2lang'}:2: unknown language 'ta'" in err
    assert not out.exists()  # nothing written


def test_languages_option(tmp_path, capsys):
    train = _write_dir(tmp_path / "train", TRAIN)
    rc = main([str(train), str(tmp_path / "u"), "--unit", "char", "--per-language", "--languages", "hi"])
    assert rc == 1 and f"{train / 'utt2lang'}:3: unknown language 'ml'" in capsys.readouterr().err
    rc = main([str(train), str(tmp_path / "u"), "--unit", "char", "--per-language", "--languages", "hi,ml,ta"])
    assert rc == 1 and "no training transcript for language(s) ta" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--unit", "bpe"], "needs --vocab-size"),
    (["--unit", "char", "--vocab-size", "10"], "bpe only"),
    (["--unit", "bpe", "--vocab-size", "10", "--min-count", "2"], "char/char_wb only"),
    (["--unit", "char", "--languages", "hi"], "needs --per-language"),
])
def test_bad_options(tmp_path, capsys, extra, message):
    train = _write_dir(tmp_path / "train", TRAIN)
    assert main([str(train), str(tmp_path / "u"), *extra]) == 1
    assert message in capsys.readouterr().err


def test_missing_utt2lang_and_text_without_language(tmp_path, capsys):
    train = _write_dir(tmp_path / "train", TRAIN, with_lang=False)
    assert main([str(train), str(tmp_path / "u"), "--unit", "char", "--per-language"]) == 1
    assert "utt2lang: missing" in capsys.readouterr().err
    (train / "utt2lang").write_text("hi_a hi\nhi_b hi\nml_a ml\n", "utf-8")
    assert main([str(train), str(tmp_path / "u"), "--unit", "char", "--per-language"]) == 1
    assert f"{train / 'text'}:4: utterance 'ml_b' has no language" in capsys.readouterr().err
