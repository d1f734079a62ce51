"""utils/config as the toolkit's one config mechanism: str2bool for command-line booleans (the words
the three former copies accepted, together), strict mode (the feature front ends' exact scalars), and
YAML 1.1 boolean words that reach a bool field from YAML but never leak into str/Any values."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import pytest
import yaml

from speechkit.utils.config import (
    ConfigError, apply_overrides, from_dict, load_config, parse_override, read_yaml, str2bool, to_dict,
)


@pytest.mark.parametrize("word, value", [
    ("true", True), ("True", True), ("YES", True), ("on", True), ("1", True), (" yes ", True),
    ("false", False), ("FALSE", False), ("no", False), ("Off", False), ("0", False),
])
def test_str2bool_accepts_the_union_of_the_former_copies(word, value):
    assert str2bool(word) is value


def test_str2bool_errors():
    with pytest.raises(ConfigError, match=r"^command line: --optional-silence must be true or false, got 'maybe'$"):
        str2bool("maybe", "--optional-silence")
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--compress", type=str2bool, default=False)
    assert p.parse_args(["--compress", "on"]).compress is True
    with pytest.raises(SystemExit):
        p.parse_args(["--compress", "2"])


@dataclass
class Fe:
    n: int = 3
    x: float = 1.0
    flag: bool = False
    name: str = "a"
    window: Literal["hann", "hamming"] = "hann"
    fmax: Optional[float] = None
    extra: Any = None
    names: list = field(default_factory=list)


def test_strict_takes_scalars_exactly_with_the_front_ends_wording():
    cases = [
        ({"n": 80.0}, "x.yaml: key 'n' must be an integer, got float (80.0)"),
        ({"n": "80"}, "x.yaml: key 'n' must be an integer, got str ('80')"),
        ({"flag": "yes"}, "x.yaml: key 'flag' must be true or false, got str ('yes')"),
        ({"flag": 1}, "x.yaml: key 'flag' must be true or false, got int (1)"),
        ({"x": "fast"}, "x.yaml: key 'x' must be a number, got str ('fast')"),
        ({"name": 5}, "x.yaml: key 'name' must be a string, got int (5)"),
        ({"window": "hanning"}, "x.yaml: key 'window' must be one of 'hann', 'hamming', got 'hanning'"),
        ({"fmax": "high"}, "x.yaml: key 'fmax' must be a number or null, got str ('high')"),
        ({"nn": 1}, "x.yaml: unknown key 'nn' (did you mean 'n'?)"),
    ]
    for data, msg in cases:
        with pytest.raises(ConfigError) as e:
            from_dict(Fe, data, source="x.yaml", strict=True)
        assert str(e.value).startswith(msg), (str(e.value), msg)
    cfg = from_dict(Fe, {"x": "1e-3", "fmax": 8000, "n": 4}, source="x.yaml", strict=True)
    assert cfg.x == 1e-3 and cfg.fmax == 8000.0 and isinstance(cfg.fmax, float) and cfg.n == 4
    # the default (train configs) is unchanged: integral floats and "yes" strings are taken
    assert from_dict(Fe, {"n": 80.0, "flag": "yes"}).n == 80
    with pytest.raises(ConfigError, match=r"key 'n': expected int, got float \(2.5\)"):
        from_dict(Fe, {"n": 2.5})


def test_yaml_boolean_words_reach_bool_fields_in_strict_mode_and_stay_strings_elsewhere(tmp_path):
    f = tmp_path / "fe.yaml"
    f.write_text("flag: yes\nname: no\nextra: {a: off, b: [on, 'x']}\nnames: [no, hi]\n")
    data = read_yaml(f)
    cfg = from_dict(Fe, data, source=str(f), strict=True)
    assert cfg.flag is True and cfg.name == "no" and type(cfg.name) is str
    assert cfg.extra == {"a": "off", "b": ["on", "x"]} and type(cfg.extra["a"]) is str
    assert type(cfg.extra["b"][0]) is str and all(type(v) is str for v in cfg.names)
    assert yaml.safe_load(yaml.safe_dump(to_dict(cfg))) == to_dict(cfg)  # dumps as plain strings
    # an override is YAML too: --set flag=off
    key, value = parse_override("flag=off")
    assert from_dict(Fe, {key: value}, strict=True).flag is False
    merged = apply_overrides(Fe, data, ["name=yes"])
    assert merged["name"] == "yes" and type(merged["name"]) is str
    g = tmp_path / "train.yaml"
    g.write_text("flag: on\nwindow: hamming\n")
    assert load_config(Fe, g, ["extra=no"]).extra == "no"
