"""Tests for speechkit.utils.config: strict typed YAML configs with dotted overrides."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

import pytest
import yaml

from speechkit.utils.config import (
    ConfigError,
    FieldError,
    apply_overrides,
    config_diff,
    dump_config,
    field_docs,
    format_config,
    from_dict,
    load_config,
    parse_override,
    to_dict,
)


@dataclass
class ModelCfg:
    """Model section.

    Attributes:
        codebook_size: number of VQ codes.
        encoder: encoder type.
        channels: channels per conv layer; a long description that goes on
            over a second line.
        dropout: dropout probability or none.
        extra: free-form options.
    """

    codebook_size: int = 512
    encoder: Literal["conv", "transformer"] = "conv"
    channels: list[int] = field(default_factory=lambda: [64, 128])
    dropout: Optional[float] = None
    extra: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.codebook_size < 2:
            raise FieldError("codebook_size", f"must be >= 2, got {self.codebook_size}")


@dataclass
class OptimCfg:
    """Optimizer section.

    Attributes:
        lr: learning rate.
        betas: Adam betas.
        max_epochs: epochs.
        use_amp: mixed precision.
        name: run name.
    """

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    max_epochs: int = 10
    use_amp: bool = False
    name: str = "run"


def _optim_defaults() -> OptimCfg:
    return OptimCfg(max_epochs=3, name="custom")


@dataclass
class TopCfg:
    """Top.

    Attributes:
        model: the model.
        optim: the optimizer (with task-specific defaults).
    """

    model: ModelCfg = field(default_factory=ModelCfg)
    optim: OptimCfg = field(default_factory=_optim_defaults)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "train.yaml"
    p.write_text(text)
    return p


def _err(tmp_path: Path, text: str, overrides=()) -> str:
    with pytest.raises(ConfigError) as ei:
        load_config(TopCfg, _write(tmp_path, text), list(overrides))
    return str(ei.value)


# ---------------------------------------------------------------------------------------------- loading


def test_defaults_without_file():
    cfg = load_config(TopCfg, None, [])
    assert cfg == TopCfg()
    assert cfg.optim.max_epochs == 3 and cfg.optim.name == "custom"


def test_empty_file_is_defaults(tmp_path):
    assert load_config(TopCfg, _write(tmp_path, ""), []) == TopCfg()


def test_values_from_file_and_partial_section_keeps_field_default(tmp_path):
    cfg = load_config(TopCfg, _write(tmp_path, "model:\n  codebook_size: 64\noptim:\n  lr: 0.1\n"), [])
    assert cfg.model.codebook_size == 64
    assert cfg.model.channels == [64, 128]
    # Not OptimCfg's class defaults (10, 'run'): the field's own default instance is updated.
    assert (cfg.optim.lr, cfg.optim.max_epochs, cfg.optim.name) == (0.1, 3, "custom")


def test_unknown_key_names_file_dotted_key_and_suggestion(tmp_path):
    p = _write(tmp_path, "model:\n  codebok_size: 3\n")
    msg = _err(tmp_path, "model:\n  codebok_size: 3\n")
    assert msg == f"{p}: unknown key 'model.codebok_size' (did you mean 'model.codebook_size'?)"


def test_unknown_key_at_wrong_level_suggests_full_path(tmp_path):
    msg = _err(tmp_path, "lr: 0.1\n")
    assert "unknown key 'lr'" in msg and "did you mean 'optim.lr'?" in msg


def test_unknown_key_without_close_match_lists_known_keys(tmp_path):
    msg = _err(tmp_path, "optim:\n  zzzz: 1\n")
    assert "unknown key 'optim.zzzz'" in msg and "known keys under 'optim': lr, betas" in msg


@pytest.mark.parametrize("text, expected", [
    ("optim:\n  max_epochs: ten\n", "key 'optim.max_epochs': expected int, got str ('ten')"),
    ("optim:\n  max_epochs: 2.5\n", "key 'optim.max_epochs': expected int, got float (2.5)"),
    ("optim:\n  max_epochs: true\n", "key 'optim.max_epochs': expected int, got bool (True)"),
    ("optim:\n  max_epochs: [1, 2]\n", "key 'optim.max_epochs': expected int, got list"),
    ("optim:\n  lr: fast\n", "key 'optim.lr': expected float, got str ('fast')"),
    ("optim:\n  use_amp: 1\n", "key 'optim.use_amp': expected bool, got int (1)"),
    ("optim:\n  name: 2019\n", "key 'optim.name': expected str, got int (2019) (quote it"),
    ("model:\n  channels: 64\n", "key 'model.channels': expected list[int], got int (64)"),
    ("model:\n  channels: [64, x]\n", "key 'model.channels[1]': expected int, got str ('x')"),
    ("model:\n  dropout: high\n", "key 'model.dropout': expected float or null, got str ('high')"),
    ("model:\n  extra: {a: b}\n", "key 'model.extra.a': expected int, got str ('b')"),
    ("model: 3\n", "key 'model': expected mapping (ModelCfg), got int (3)"),
    ("optim:\n  betas: [0.9]\n", "key 'optim.betas': expected a list of 2 items (tuple[float, float]), got 1 items"),
])
def test_wrong_type_names_key_expected_and_given(tmp_path, text, expected):
    msg = _err(tmp_path, text)
    assert msg.startswith(str(tmp_path / "train.yaml") + ": ")
    assert expected in msg


def test_bad_literal_lists_choices(tmp_path):
    msg = _err(tmp_path, "model:\n  encoder: transfomer\n")
    assert "key 'model.encoder': invalid value 'transfomer'; choose from: 'conv', 'transformer'" in msg
    assert "did you mean 'transformer'?" in msg


def test_lossless_conversions(tmp_path):
    cfg = load_config(TopCfg, _write(tmp_path, "optim:\n  lr: 1\n  max_epochs: 4.0\n  betas: [0.8, 0.9]\n"
                                               "model:\n  dropout: null\n"), [])
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float)
    assert cfg.optim.max_epochs == 4 and isinstance(cfg.optim.max_epochs, int)
    assert cfg.optim.betas == (0.8, 0.9)
    assert cfg.model.dropout is None


def test_yaml11_scientific_string_accepted_for_float(tmp_path):
    # PyYAML reads '1e-3' as a str (YAML 1.1 needs a dot); float fields take it anyway.
    assert yaml.safe_load("lr: 1e-3")["lr"] == "1e-3"
    cfg = load_config(TopCfg, _write(tmp_path, "optim:\n  lr: 1e-3\n"), [])
    assert cfg.optim.lr == 0.001


def test_post_init_field_error_gets_file_and_dotted_key(tmp_path):
    p = _write(tmp_path, "model:\n  codebook_size: 1\n")
    msg = _err(tmp_path, "model:\n  codebook_size: 1\n")
    assert msg == f"{p}: key 'model.codebook_size': must be >= 2, got 1"


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    p = _write(tmp_path, "model:\n  codebook_size: 3\n optim: [\n")
    with pytest.raises(ConfigError, match=rf"^{p}:3:\d+: invalid YAML"):
        load_config(TopCfg, p, [])


def test_top_level_not_a_mapping(tmp_path):
    assert "top level must be a mapping" in _err(tmp_path, "- a\n- b\n")


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        load_config(TopCfg, "/nonexistent/train.yaml", [])


def test_missing_required_key():
    @dataclass
    class Req:
        """Attributes:
            n: required.
        """

        n: int

    with pytest.raises(ConfigError, match="missing required key 'n'"):
        from_dict(Req, {}, source="x.yaml")


# ---------------------------------------------------------------------------------------------- overrides


@pytest.mark.parametrize("text, key, value", [
    ("a.b=3", "a.b", 3),
    ("a.b=3.5", "a.b", 3.5),
    ("a.b=[1, 2]", "a.b", [1, 2]),
    ("a.b=null", "a.b", None),
    ("a.b=", "a.b", None),
    ("a.b='3'", "a.b", "3"),
    ("a.b=x=y", "a.b", "x=y"),
    ("a.b=true", "a.b", True),
])
def test_parse_override(text, key, value):
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["a.b", "=3", "a..b=3"])
def test_malformed_override(text):
    with pytest.raises(ConfigError, match="command line"):
        parse_override(text)


def test_overrides_apply_after_file(tmp_path):
    p = _write(tmp_path, "model:\n  codebook_size: 64\n")
    cfg = load_config(TopCfg, p, ["model.codebook_size=256", "optim.betas=[0.9, 0.98]",
                                  "model.extra.depth=2", "model.encoder=transformer"])
    assert cfg.model.codebook_size == 256
    assert cfg.optim.betas == (0.9, 0.98)
    assert cfg.model.extra == {"depth": 2}
    assert cfg.model.encoder == "transformer"
    assert cfg.optim.name == "custom"  # untouched sibling keeps the field default


def test_section_override_with_mapping_updates_keys():
    cfg = load_config(TopCfg, None, ["optim={lr: 0.5}"])
    assert (cfg.optim.lr, cfg.optim.max_epochs, cfg.optim.name) == (0.5, 3, "custom")


def test_override_errors_blame_the_command_line(tmp_path):
    p = _write(tmp_path, "model:\n  codebook_size: 64\n")
    with pytest.raises(ConfigError) as ei:
        load_config(TopCfg, p, ["model.codebok_size=3"])
    assert str(ei.value) == "command line: unknown key 'model.codebok_size' (did you mean 'model.codebook_size'?)"
    with pytest.raises(ConfigError, match=r"^command line: key 'optim.max_epochs': expected int, got str \('x'\)"):
        load_config(TopCfg, p, ["optim.max_epochs=x"])
    with pytest.raises(ConfigError, match="'optim.lr' is a float, not a mapping"):
        load_config(TopCfg, p, ["optim.lr.x=1"])


def test_apply_overrides_does_not_mutate_input():
    data = {"model": {"codebook_size": 3}}
    out = apply_overrides(TopCfg, data, ["model.codebook_size=4"])
    assert data == {"model": {"codebook_size": 3}} and out["model"]["codebook_size"] == 4


# ---------------------------------------------------------------------------------------------- writing


def test_dump_and_reload_round_trip(tmp_path):
    cfg = load_config(TopCfg, None, ["model.dropout=0.25", "model.extra={a: 1}", "optim.lr=2e-4"])
    out = tmp_path / "exp" / "config.yaml"
    dump_config(cfg, out)
    assert load_config(TopCfg, out, []) == cfg
    assert sorted(os.listdir(out.parent)) == ["config.yaml"]  # no temp file left behind
    assert list(yaml.safe_load(out.read_text())) == ["model", "optim"]  # field order


def test_format_config_has_doc_comments_and_loads_back():
    cfg = TopCfg()
    text = format_config(cfg)
    assert yaml.safe_load(text) == to_dict(cfg)
    assert "  # number of VQ codes.\n  codebook_size: 512\n" in text
    assert "# encoder type. Choices: conv, transformer." in text
    assert "# channels per conv layer; a long description that goes on over a second line." in text
    assert "betas: [0.9, 0.999]" in text


def test_field_docs_parses_attributes_section():
    docs = field_docs(ModelCfg)
    assert set(docs) == {"codebook_size", "encoder", "channels", "dropout", "extra"}
    assert docs["channels"].endswith("goes on over a second line.")


def test_config_diff():
    a = to_dict(TopCfg())
    b = to_dict(load_config(TopCfg, None, ["model.codebook_size=3", "optim.lr=1"]))
    assert config_diff(a, b) == [("model.codebook_size", 512, 3), ("optim.lr", 0.001, 1.0)]
    assert config_diff(a, a) == []
    assert config_diff({"x": 1}, {"x": 1.0}) == []
    assert config_diff({"x": 1}, {"x": True}) == [("x", 1, True)]


@dataclass
class _EmptyCfg:
    """Fields of every kind, for empty command-line values.

    Attributes:
        valid_dir: '' = none.
        opt_dir: null = none.
        path: a path.
        n: a number.
        opt_n: a number or none.
        mode: a choice.
    """

    valid_dir: str = "v"
    opt_dir: Optional[str] = "o"
    path: Path = Path("p")
    n: int = 1
    opt_n: Optional[int] = 2
    mode: Literal["a", "b"] = "a"


def test_empty_command_line_value_is_the_fields_nothing():
    """Issue 23 item 18: '--data.valid_dir ''' was refused as 'got null' although '' means no
    validation set; an empty value is '' for a str field, None for an optional one, and for any
    other type an error that says the value is empty (not 'got null')."""
    cfg = load_config(_EmptyCfg, None, ["valid_dir=", "opt_dir=  ", "opt_n="])
    assert (cfg.valid_dir, cfg.opt_dir, cfg.opt_n) == ("", None, None)
    for key, expected in (("n", "expected int"), ("path", "expected Path"), ("mode", "expected one of 'a', 'b'")):
        with pytest.raises(ConfigError, match=rf"^command line: key '{key}': empty value; {expected}"):
            load_config(_EmptyCfg, None, [f"{key}="])
    # an explicit null stays null (and is refused where null is not allowed)
    with pytest.raises(ConfigError, match="key 'valid_dir': expected str, got null"):
        load_config(_EmptyCfg, None, ["valid_dir=null"])
    assert load_config(_EmptyCfg, None, ["valid_dir=''"]).valid_dir == ""


def test_speechkit_train_takes_an_empty_valid_dir(capsys):
    from speechkit.bin import train
    assert train.main(["salad", "--print-config", "--data.valid_dir", ""]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["data"]["valid_dir"] == ""
