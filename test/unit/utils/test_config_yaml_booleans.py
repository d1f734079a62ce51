"""YAML 1.2 booleans in configs: language ids such as 'no' (Norwegian), 'on', 'yes' stay strings in
a list[str] field (file and command line); a bool field still takes yes/no/on/off."""
from dataclasses import dataclass, field

import pytest

from speechkit.utils.config import ConfigError, from_dict, load_config, parse_override


@dataclass
class _Cfg:
    """Attributes:
        languages: language ids.
        name: a string.
        shuffle: a flag.
        extra: anything.
    """

    languages: list[str] | None = None
    name: str = "x"
    shuffle: bool = False
    extra: dict = field(default_factory=dict)


def test_override_keeps_language_ids_that_yaml_1_1_reads_as_booleans():
    assert parse_override("data.languages=[no,on,yes,off,hi]")[1] == ["no", "on", "yes", "off", "hi"]
    cfg = load_config(_Cfg, None, ["languages=[no,hi]", "name=no"])
    assert cfg.languages == ["no", "hi"] and cfg.name == "no"


def test_yaml_file_keeps_them_too(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("languages: [no, On, YES]\nname: off\nshuffle: yes\n", encoding="utf-8")
    cfg = load_config(_Cfg, f)
    assert cfg.languages == ["no", "On", "YES"] and cfg.name == "off" and cfg.shuffle is True


@pytest.mark.parametrize("text,want", [("true", True), ("False", False), ("yes", True), ("No", False),
                                       ("ON", True), ("off", False)])
def test_bool_field_accepts_yaml_1_1_spellings(text, want):
    assert load_config(_Cfg, None, [f"shuffle={text}"]).shuffle is want


def test_true_false_are_still_booleans_and_not_strings():
    assert parse_override("a=[true, False]")[1] == [True, False]
    with pytest.raises(ConfigError, match=r"key 'languages\[0\]': expected str, got bool"):
        load_config(_Cfg, None, ["languages=[true]"])
    with pytest.raises(ConfigError, match="key 'shuffle': expected bool"):
        from_dict(_Cfg, {"shuffle": "maybe"})


def test_rnnt_task_languages_override():
    from speechkit.tasks.rnnt import RNNTTaskConfig

    cfg = load_config(RNNTTaskConfig, None, ["data.languages=[no]"])
    assert cfg.data.languages == ["no"]
