"""speechkit.text.build_units: the library form of speechkit-make-units (make_units, read_text_and_langs,
encode_report)."""
from __future__ import annotations

import json
import logging

import pytest

from speechkit.bin.make_units import main
from speechkit.text.build_units import encode_report, make_units, read_text_and_langs
from speechkit.text.units import MultilingualUnits, UnitInventory, load_units
from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import DataError


def _data(d, rows, with_lang=True):
    d.mkdir(parents=True)
    (d / "text").write_text("".join(f"{u} {t}\n" for u, (_, t) in sorted(rows.items())), "utf-8")
    if with_lang:
        (d / "utt2lang").write_text("".join(f"{u} {lang}\n" for u, (lang, _) in sorted(rows.items())), "utf-8")
    return d


ROWS = {"a_1": ("en", "a cab"), "a_2": ("en", "bad"), "b_1": ("fr", "été"), "b_2": ("fr", "tête")}


def test_make_units_returns_the_report_it_writes(tmp_path, caplog):
    data = _data(tmp_path / "train", ROWS, with_lang=False)
    dev = _data(tmp_path / "dev", {"d_1": ("en", "cabx")}, with_lang=False)
    log = logging.getLogger("test-build-units")
    with caplog.at_level(logging.INFO):
        report = make_units(data, tmp_path / "units", "char", check=[str(dev)], log=log)
    assert report == json.loads((tmp_path / "units" / "report.json").read_text("utf-8"))
    inv = load_units(tmp_path / "units")
    assert isinstance(inv, UnitInventory) and report["num_units"] == len(inv)
    assert report["check"][str(dev)]["all"]["num_oov"] == 1  # the 'x'
    assert any(r.name == "test-build-units" and r.message == f"wrote {tmp_path / 'units'}" for r in caplog.records)


def test_per_language(tmp_path):
    data = _data(tmp_path / "train", ROWS)
    report = make_units(data, tmp_path / "units", "char", per_language=True, languages="en,fr")
    assert isinstance(load_units(tmp_path / "units"), MultilingualUnits)
    assert report["languages"] == ["en", "fr"] and set(report["train"]) == {"en", "fr"}


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(unit="bpe"), ConfigError, "^unit=bpe needs vocab_size"),  # the parameters (--unit bpe from the CLI)
    (dict(unit="char", vocab_size=10), ConfigError, "^vocab_size applies to unit=bpe only"),
    (dict(unit="char", languages="en"), ConfigError, "^languages needs per_language"),
    (dict(unit="char", per_language=True, languages="en,x.y"), DataError, "^languages: language id 'x.y' must"),
    (dict(unit="char", per_language=True, languages="en"), DataError, "unknown language 'fr'"),
])
def test_refusals(tmp_path, kwargs, error, message):
    data = _data(tmp_path / "train", ROWS)
    with pytest.raises(error, match=message):
        make_units(data, tmp_path / "units", **kwargs)
    assert not (tmp_path / "units").exists()


def test_read_text_and_langs_and_encode_report(tmp_path):
    data = _data(tmp_path / "train", ROWS)
    text, u2l = read_text_and_langs(data, True, None)
    assert text["a_2"] == "bad" and u2l["b_1"] == "fr"
    assert read_text_and_langs(data, False, None)[1] is None
    (data / "utt2lang").write_text("a_1 en\n", "utf-8")
    with pytest.raises(DataError, match=r"text:2: utterance 'a_2' has no language"):
        read_text_and_langs(data, True, None)
    inv = UnitInventory.build(text.values(), "char")
    stats = encode_report({"x": "cab", "y": "zz"}, inv, None, "t")
    assert stats["all"]["num_utts"] >= 1 and stats["all"]["num_oov"] >= 2


@pytest.mark.parametrize("argv, line", [
    (["--unit", "bpe"], "--unit bpe needs --vocab-size"),
    (["--unit", "char", "--vocab-size", "10"], "--vocab-size applies to --unit bpe only"),
    (["--unit", "char", "--languages", "en"], "--languages needs --per-language"),
    (["--unit", "char", "--per-language", "--languages", "en,x.y"], "--languages: language id 'x.y' must"),
])
def test_speechkit_make_units_names_its_flags(tmp_path, capsys, argv, line):
    """The library names its parameters; speechkit-make-units prints them as its flags."""
    data = _data(tmp_path / "train", ROWS)
    assert main([*argv, str(data), str(tmp_path / "units")]) == 1
    assert capsys.readouterr().err.startswith(f"speechkit-make-units: error: {line}")
