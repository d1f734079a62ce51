"""Typed YAML configs: dataclass schemas, strict validation, dotted command-line overrides.

A config schema is a (possibly nested) dataclass whose fields carry type annotations and
defaults. Every field is documented in the class docstring under ``Attributes:`` (Google style);
:func:`format_config` turns those docs into comments (``speechkit-train TASK --print-config``).

Supported field types: ``bool``, ``int``, ``float`` (an int is accepted), ``str``,
``pathlib.Path``, ``Optional[X]`` / ``X | None``, ``Literal[...]``, ``list[X]``,
``tuple[X, ...]`` / ``tuple[X, Y]`` (a YAML list), ``dict`` / ``dict[K, V]``, ``Any``, unions
of these, and nested dataclasses.

Rules (an unknown key or a wrong type is never silently ignored):

- an unknown key is a :class:`~speechkit.utils.cli.ConfigError` naming the dotted key and the
  file, with a suggestion: ``conf/train.yaml: unknown key 'model.codebok_size' (did you mean
  'model.codebook_size'?)``;
- a wrong type names the key, the expected and the given type: ``conf/train.yaml: key
  'trainer.max_epochs': expected int, got str ('ten')``. A float is accepted for an int only if it
  is integral (``10.0``); ``true``/``false`` are never numbers;
- PyYAML reads ``1e-3`` (no dot) as a *string* (YAML 1.1); a float field accepts such a string if
  it is a plain decimal/scientific number, so ``lr: 1e-3`` works as users expect;
- a ``Literal`` value outside its choices is an error listing them;
- booleans are YAML 1.2's: only ``true``/``false`` (any case: ``True``, ``FALSE``). PyYAML follows
  YAML 1.1, where ``yes``/``no``/``on``/``off`` are booleans too, which turned language ids such as
  Norwegian ``no`` into ``False`` (``data.languages: [no, hi]``); here they stay strings, so a
  ``str`` or ``list[str]`` field keeps them as written, and a ``bool`` field still accepts them
  (``shuffle: yes`` is ``True``);
- ``strict=True`` (:func:`from_dict`; the feature front ends' configs, ``conf/mfcc.yaml`` and
  ``speechkit-compute-feats --set``) takes scalars exactly: an ``int`` field refuses ``80.0``, a
  ``bool`` field refuses a Python string (``"yes"``) while still taking ``yes``/``no``/``on``/``off``
  written in YAML, and a wrong type reads ``key 'n_mels' must be an integer, got float (80.0)``.

Command-line boolean options (``--compress``, ``--resume``, ``--optional-silence``) take
:func:`str2bool`'s words: those of YAML plus ``1``/``0``.

Overrides are ``dotted.key=value`` strings; the value is parsed by YAML (``a.b=3`` is an int,
``a.b=[1,2]`` a list, ``a.b=null`` None, ``a.b='3'`` the string ``"3"``); an empty value (``a.b=``,
``--a.b ''``) is ``None`` for an optional field and ``""`` for a ``str`` field, an error otherwise.

Example::

    @dataclass
    class ModelConfig:
        \"\"\"Attributes:
            codebook_size: number of VQ codes.
        \"\"\"
        codebook_size: int = 512

    cfg = load_config(MyConfig, "conf/train.yaml", ["model.codebook_size=256"])
    dump_config(cfg, "exp/tag/config.yaml")
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import os
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Union, get_args, get_origin, get_type_hints

import yaml

from speechkit.utils.cli import ConfigError
from speechkit.utils.fileio import atomic_write

__all__ = [
    "ConfigError",
    "FieldError",
    "load_config",
    "from_dict",
    "to_dict",
    "dump_config",
    "format_config",
    "parse_override",
    "apply_overrides",
    "field_docs",
    "config_diff",
    "dotted_keys",
    "read_yaml",
    "str2bool",
]

# A plain decimal or scientific number as PyYAML leaves it a string (e.g. "1e-3", "5E4", "-2e+1").
_FLOAT_STR = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
# YAML 1.1 booleans that YAML 1.2 reads as strings; a bool field accepts them (see the module docstring).
_YAML11_BOOLS = {v: b for b, words in ((True, ("yes", "on")), (False, ("no", "off")))
                 for w in words for v in (w, w.capitalize(), w.upper())}
_BOOL_TAG = "tag:yaml.org,2002:bool"
_WORD_TAG = "tag:speechkit,2026:yaml11-bool-word"


class _YamlWord(str):
    """A YAML 1.1 boolean word (``yes``/``no``/``on``/``off``) as YAML text wrote it, unquoted: a
    string for a ``str`` field, the boolean for a ``bool`` field, also in strict mode (where a
    Python string ``"yes"`` is refused). :func:`from_dict` and :func:`to_dict` turn it into a plain
    ``str``."""

    __slots__ = ()


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 booleans: ``true``/``false`` only, ``no``/``on``/... stay strings
    (marked as :class:`_YamlWord`)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(_WORD_TAG, re.compile("^(?:" + "|".join(_YAML11_BOOLS) + ")$"), list("yYnNoO"))
_Loader.add_constructor(_WORD_TAG, lambda loader, node: _YamlWord(loader.construct_scalar(node)))


def _load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with YAML 1.2 booleans (:class:`_Loader`)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def str2bool(text: str, option: str | None = None) -> bool:
    """A command-line boolean option's value: ``true``/``yes``/``on``/``1`` or ``false``/``no``/``off``/``0``,
    any case (the YAML words of a ``bool`` config field, plus Kaldi's ``1``/``0``).

    Usable as an argparse ``type=`` (the error then reads ``argument --compress: expected true or
    false, got 'maybe'``) or called on a value with ``option`` naming it.

    Raises:
        ConfigError: (also an ``argparse.ArgumentTypeError``) any other word; names ``option`` if given.
    """
    v = text.strip().lower()
    if v in ("true", "yes", "on", "1"):
        return True
    if v in ("false", "no", "off", "0"):
        return False
    if option:
        raise _BoolError(f"command line: {option} must be true or false, got {text!r}")
    raise _BoolError(f"expected true or false, got {text!r}")


class _BoolError(ConfigError, argparse.ArgumentTypeError):
    """:func:`str2bool`'s error: a ConfigError that argparse shows as it is."""


class FieldError(ConfigError):
    """Raised by a schema's ``__post_init__`` for a bad value of one field.

    :func:`from_dict` rewrites it to name the file and the full dotted key, e.g.
    ``raise FieldError("max_epochs", "must be >= 1, got 0")`` inside ``TrainerConfig`` becomes
    ``conf/train.yaml: key 'trainer.max_epochs': must be >= 1, got 0``.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"key '{key}': {message}")
        self.key = key
        self.message = message


# ----------------------------------------------------------------------------------------------
# loading


def load_config(schema: type, yaml_path: str | os.PathLike | None = None,
                overrides: Iterable[str] = ()) -> Any:
    """Build a ``schema`` instance from defaults, an optional YAML file and ``key=value`` overrides.

    Args:
        schema: a dataclass type (fields may be nested dataclasses).
        yaml_path: YAML file with (a subset of) the fields; ``None`` = defaults only. An empty file
            is the same as ``{}``.
        overrides: ``"dotted.key=value"`` strings applied after the file, in order.

    Returns:
        A validated ``schema`` instance.

    Raises:
        FileNotFoundError: ``yaml_path`` does not exist.
        ConfigError: YAML syntax error, top level not a mapping, unknown key, wrong type, bad
            ``Literal`` value, missing required key; the message names the file (or
            ``command line``) and the dotted key.
    """
    _check_schema(schema)
    data: dict = {}
    source = "<defaults>"
    if yaml_path is not None:
        source = str(yaml_path)
        data = read_yaml(yaml_path)
    # Validate the file alone first, so that its errors are attributed to the file.
    from_dict(schema, data, source=source)
    merged = apply_overrides(schema, data, overrides)
    return from_dict(schema, merged, source=source if not overrides else f"{source} + command line")


def read_yaml(path: str | os.PathLike) -> dict:
    """Read a YAML mapping (safe loader, YAML 1.2 booleans); an empty file is ``{}``.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: syntax error (with line/column) or the top level is not a mapping.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = _load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys to values, "
                          f"got {_value_type(data)}")
    return data


def from_dict(schema: type, data: Mapping, source: str = "<config>", _prefix: str = "",
              _root: type | None = None, *, strict: bool = False) -> Any:
    """Validate a plain mapping (e.g. parsed YAML) against ``schema`` and build the dataclass.

    Missing keys take the field defaults; a partial nested section updates that field's default
    instance (so a task's own trainer defaults survive ``trainer: {lr: 0.1}``). Values are
    converted where lossless (int -> float, integral float -> int, list -> tuple, str -> Path).
    With ``strict`` scalars are taken exactly (see the module docstring: no ``80.0`` for an int,
    no Python string for a bool) and a wrong type reads ``key 'x' must be an integer, got ...``.

    Raises:
        ConfigError: unknown key, wrong type, bad ``Literal`` value, missing required key, or a
            ``ValueError``/``TypeError`` from the dataclass's ``__post_init__``; the message starts
            with ``source`` and names the dotted key.
    """
    root = _root or schema
    if not isinstance(data, Mapping):
        where = f"key '{_prefix[:-1]}'" if _prefix else "top level"
        raise ConfigError(f"{source}: {where}: expected a mapping, got {_value_type(data)}")
    fields = _init_fields(schema)
    hints = _hints(schema)
    for k in data:
        if not isinstance(k, str):
            raise ConfigError(f"{source}: key {_prefix}{k!r} is not a string")
        if k not in fields:
            raise ConfigError(f"{source}: unknown key '{_prefix}{k}'{_suggest(root, _prefix, k, fields)}")
    kwargs = {}
    for name, f in fields.items():
        key = _prefix + name
        if name in data:
            value = data[name]
            default = _field_default(f)
            if isinstance(value, Mapping) and dataclasses.is_dataclass(default):
                # A partial section updates the field's own default (which may differ from the
                # section class's defaults, e.g. a task's trainer defaults), not the class defaults.
                value = _merge_section(default, value)
            kwargs[name] = _convert(hints[name], value, key, source, root, strict)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{source}: missing required key '{key}'")
    try:
        return schema(**kwargs)
    except FieldError as e:
        raise ConfigError(f"{source}: key '{_prefix}{e.key}': {e.message}") from None
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    except (TypeError, ValueError) as e:
        where = f"'{_prefix[:-1]}'" if _prefix else schema.__name__
        raise ConfigError(f"{source}: {where}: {e}") from None


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``"a.b.c=value"`` into ``("a.b.c", parsed value)``; the value is parsed by YAML
    (YAML 1.2 booleans: ``a.langs=[no,hi]`` is ``["no", "hi"]``).

    Raises:
        ConfigError: no ``=``, an empty key, or a value that is not valid YAML.
    """
    if "=" not in text:
        raise ConfigError(f"command line: override {text!r} must look like key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"command line: override {text!r} has an empty key")
    try:
        value = _load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"command line: key '{key}': value {raw!r} is not valid YAML: {problem}") from None
    return key, value


def apply_overrides(schema: type, data: Mapping, overrides: Iterable[str]) -> dict:
    """Return a copy of ``data`` with each ``key=value`` override set at its dotted path.

    Each override is checked on its own (key exists in ``schema``, value has the field's type), so
    errors say ``command line`` rather than blaming the file.

    An empty value (``--data.valid_dir ''`` in a shell) is the field's "nothing": ``None`` for an
    optional field, the empty string for a ``str`` field (``valid_dir: str = ""`` = no validation
    set); for any other type it is an error that says the value is empty.

    Raises:
        ConfigError: malformed override, unknown key (with suggestion) or wrong type.
    """
    out = _deepcopy_mapping(data)
    pending = [(*parse_override(text), not text.split("=", 1)[1].strip()) for text in overrides]
    while pending:
        key, value, empty = pending.pop(0)
        tp = _resolve_key_type(schema, key)
        section = _section_type(tp)
        if section is not None and isinstance(value, Mapping) and value:
            # 'model={a: 1, b: 2}' updates keys of the section like 'model.a=1 model.b=2'.
            pending[:0] = [(f"{key}.{k}", v, False) for k, v in value.items()]
            continue
        if empty:
            value = _empty_value(tp, key)
        value = _convert(tp, value, key, "command line", schema)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = _plain(value)
    return out


# ----------------------------------------------------------------------------------------------
# writing


def to_dict(obj: Any) -> Any:
    """A dataclass instance as plain YAML-safe data (dicts in field order, tuples -> lists, Path -> str)."""
    return _plain(obj)


def dump_config(obj: Any, path: str | os.PathLike) -> None:
    """Write the resolved config ``obj`` to ``path`` as YAML (atomically, keys in field order)."""
    with atomic_write(path) as f:
        yaml.safe_dump(to_dict(obj), f, sort_keys=False, default_flow_style=False, allow_unicode=True)


def format_config(obj: Any, comments: bool = True, width: int = 100) -> str:
    """Render a config as YAML, each field preceded by ``# `` comments from its docstring entry.

    The output loads back (``yaml.safe_load``) to ``to_dict(obj)``. ``Literal`` fields list their
    choices. Used by ``speechkit-train TASK --print-config``.
    """
    lines: list[str] = []
    _format_into(obj, lines, indent="", comments=comments, width=width)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# introspection helpers


def field_docs(schema: type) -> dict[str, str]:
    """Per-field documentation parsed from the ``Attributes:`` section of ``schema``'s docstring.

    Entries look like ``name: text`` or ``name (type): text``, continuation lines indented deeper.
    A field may instead carry ``metadata={"doc": ...}``. Returns ``{field_name: text}`` for the
    documented fields.
    """
    docs: dict[str, str] = {}
    doc = inspect.cleandoc(schema.__doc__ or "")
    lines = doc.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() in ("Attributes:", "Args:", "Fields:"))
    except StopIteration:
        start = None
    if start is not None:
        # cleandoc strips the first line, so a header there sits at the entries' indentation.
        head_indent = -1 if start == 0 else len(lines[start]) - len(lines[start].lstrip())
        entry_indent = None
        current = None
        for ln in lines[start + 1:]:
            if not ln.strip():
                continue
            ind = len(ln) - len(ln.lstrip())
            if ind <= head_indent:
                break
            if entry_indent is None:
                entry_indent = ind
            m = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", ln.strip())
            if ind == entry_indent and m:
                current = m.group(1)
                docs[current] = m.group(3).strip()
            elif current is not None:
                docs[current] = (docs[current] + " " + ln.strip()).strip()
    if dataclasses.is_dataclass(schema):
        for f in dataclasses.fields(schema):
            if "doc" in f.metadata:
                docs[f.name] = str(f.metadata["doc"])
    return docs


def dotted_keys(schema: type, _prefix: str = "") -> list[str]:
    """All dotted leaf keys of a (nested) dataclass schema, in field order."""
    out = []
    hints = _hints(schema)
    for name in _init_fields(schema):
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            out.extend(dotted_keys(tp, f"{_prefix}{name}."))
        else:
            out.append(_prefix + name)
    return out


def config_diff(a: Mapping, b: Mapping, _prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Differences between two plain config dicts as ``[(dotted_key, value_in_a, value_in_b)]``.

    A key missing on one side shows as ``dataclasses.MISSING`` there.
    """
    diffs = []
    for k in list(a) + [k for k in b if k not in a]:
        va = a.get(k, dataclasses.MISSING)
        vb = b.get(k, dataclasses.MISSING)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            diffs.extend(config_diff(va, vb, f"{_prefix}{k}."))
        elif va != vb or type(va) is not type(vb) and not (_is_num(va) and _is_num(vb)):
            diffs.append((_prefix + str(k), va, vb))
    return diffs


# ----------------------------------------------------------------------------------------------
# internals


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_schema(schema: type) -> None:
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        raise TypeError(f"config schema must be a dataclass type, got {schema!r}")


def _init_fields(schema: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(schema) if f.init}


_HINT_CACHE: dict[type, dict[str, Any]] = {}


def _hints(schema: type) -> dict[str, Any]:
    if schema not in _HINT_CACHE:
        _HINT_CACHE[schema] = get_type_hints(schema)
    return _HINT_CACHE[schema]


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _merge_section(default: Any, update: Mapping) -> dict:
    """The dataclass instance ``default`` as a dict, updated by ``update``.

    Nested dataclass sections merge recursively; any other value (including ``dict`` fields) is
    replaced as a whole.
    """
    out = {f.name: getattr(default, f.name) for f in dataclasses.fields(default)}
    for k, v in update.items():
        cur = out.get(k)
        if isinstance(v, Mapping) and dataclasses.is_dataclass(cur) and not isinstance(cur, type):
            out[k] = _merge_section(cur, v)
        else:
            out[k] = v
    return {k: (to_dict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v) for k, v in out.items()}


def _deepcopy_mapping(data: Mapping) -> dict:
    return {k: _deepcopy_mapping(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def _plain(obj: Any) -> Any:
    if isinstance(obj, _YamlWord):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _value_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "str"
    if isinstance(v, Mapping):
        return "mapping"
    if isinstance(v, (list, tuple)):
        return "list"
    return type(v).__name__


def _describe(v: Any) -> str:
    t = _value_type(v)
    if isinstance(v, (Mapping, list, tuple)) or v is None:
        return t
    r = repr(v)
    return f"{t} ({r if len(r) <= 40 else r[:37] + '...'})"


def _is_union(tp: Any) -> bool:
    return get_origin(tp) is Union or isinstance(tp, types.UnionType)


def _type_name(tp: Any) -> str:
    if tp is Any:
        return "any"
    if tp is type(None):
        return "null"
    if _is_union(tp):
        return " or ".join(_type_name(a) for a in get_args(tp))
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (list, tuple, dict):
        args = get_args(tp)
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]" if args else origin.__name__
    if dataclasses.is_dataclass(tp):
        return f"mapping ({tp.__name__})"
    return getattr(tp, "__name__", str(tp))


def _must_be(tp: Any) -> str:
    """What a value of annotation ``tp`` must be, in strict mode's words (``an integer``)."""
    if _is_union(tp):
        return " or ".join(_must_be(a) for a in get_args(tp))
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    return words.get(tp, _type_name(tp))


def _convert(tp: Any, value: Any, key: str, source: str, root: type, strict: bool = False) -> Any:
    """Check ``value`` against annotation ``tp``; return it (losslessly converted; exactly with ``strict``)."""
    def bad(extra: str = "") -> ConfigError:
        if strict:
            return ConfigError(f"{source}: key '{key}' must be {_must_be(tp)}, got {_describe(value)}")
        return ConfigError(f"{source}: key '{key}': expected {_type_name(tp)}, got {_describe(value)}{extra}")

    if tp is Any or tp is object:
        return _unmark(value)
    if _is_union(tp):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise bad()
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, key, source, root, strict)
            except ConfigError as e:
                errors.append(e)
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1 and not strict:
            # One real alternative (Optional[X]): its own message is the most precise one.
            msg = str(errors[0])
            if type(None) in args and "expected" in msg:
                msg = msg.replace(f"expected {_type_name(non_none[0])}", f"expected {_type_name(tp)}", 1)
            raise ConfigError(msg) from None
        raise bad()
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        for c in choices:
            if value == c and (type(value) is type(c) or isinstance(value, str) and type(c) is str):
                return c
        hint = ""
        if isinstance(value, str):
            close = difflib.get_close_matches(value, [c for c in choices if isinstance(c, str)], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        if strict:
            raise ConfigError(f"{source}: key '{key}' must be {_must_be(tp)}, got {_plain(value)!r}{hint}")
        raise ConfigError(f"{source}: key '{key}': invalid value {value!r}; choose from: "
                          f"{', '.join(repr(c) for c in choices)}{hint}")
    if dataclasses.is_dataclass(tp):
        if dataclasses.is_dataclass(value) and isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise bad()
        return from_dict(tp, value, source=source, _prefix=key + ".", _root=root, strict=strict)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value in _YAML11_BOOLS and (isinstance(value, _YamlWord) or not strict):
            return _YAML11_BOOLS[value]
        raise bad()
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer() and not strict:
            return int(value)
        raise bad(" (a float is accepted only if integral)" if isinstance(value, float) else "")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and _FLOAT_STR.match(value.strip()):
            return float(value)
        raise bad()
    if tp is str:
        if isinstance(value, str):
            return str(value)
        raise bad(" (quote it in YAML to make it a string)" if _is_num(value) or isinstance(value, bool) else "")
    if tp is Path or tp is os.PathLike:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise bad()
    if origin in (list, typing.Sequence, Iterable) or tp in (list,):
        if not isinstance(value, (list, tuple)):
            raise bad()
        (item_tp,) = get_args(tp) or (Any,)
        return [_convert(item_tp, v, f"{key}[{i}]", source, root, strict) for i, v in enumerate(value)]
    if origin is tuple or tp is tuple:
        if not isinstance(value, (list, tuple)):
            raise bad()
        args = get_args(tp)
        if not args:
            return tuple(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{key}[{i}]", source, root, strict) for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{source}: key '{key}': expected a list of {len(args)} items "
                              f"({_type_name(tp)}), got {len(value)} items")
        return tuple(_convert(a, v, f"{key}[{i}]", source, root, strict) for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, typing.Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise bad()
        args = get_args(tp)
        ktp, vtp = args if args else (Any, Any)
        return {_convert(ktp, k, f"{key} (a key)", source, root, strict):
                _convert(vtp, v, f"{key}.{k}", source, root, strict) for k, v in value.items()}
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise bad()
    return _unmark(value)


def _unmark(value: Any) -> Any:
    """``value`` with every :class:`_YamlWord` inside (dicts, lists, tuples) a plain ``str``; other
    values are returned as they are (the same objects when nothing is marked)."""
    if isinstance(value, _YamlWord):
        return str(value)
    if isinstance(value, Mapping):
        items = [(_unmark(k), _unmark(v)) for k, v in value.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(items, value.items())):
            return value
        return type(value)(items) if isinstance(value, dict) else dict(items)
    if isinstance(value, (list, tuple)):
        items = [_unmark(v) for v in value]
        if all(a is v for a, v in zip(items, value)):
            return value
        return type(value)(items) if type(value) in (list, tuple) else list(items)
    return value


def _empty_value(tp: Any, key: str) -> Any:
    """What an empty command-line value means for a field of type ``tp`` (see :func:`apply_overrides`)."""
    args = get_args(tp) if _is_union(tp) else (tp,)
    if tp is Any or type(None) in args:
        return None
    if str in args or (get_origin(tp) is Literal and "" in get_args(tp)):
        return ""
    raise ConfigError(f"command line: key '{key}': empty value; expected {_type_name(tp)}")


def _section_type(tp: Any) -> type | None:
    """The dataclass behind ``tp`` (``X`` or ``Optional[X]``), else None."""
    if dataclasses.is_dataclass(tp):
        return tp
    if _is_union(tp):
        dcs = [a for a in get_args(tp) if dataclasses.is_dataclass(a)]
        if len(dcs) == 1:
            return dcs[0]
    return None


def _resolve_key_type(schema: type, key: str) -> Any:
    """The annotation at dotted ``key`` (which may go into a ``dict`` field)."""
    tp: Any = schema
    parts = key.split(".")
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        prefix = prefix + "." if prefix else ""
        # unwrap Optional[Dataclass]
        if _is_union(tp):
            dcs = [a for a in get_args(tp) if dataclasses.is_dataclass(a)]
            if len(dcs) == 1:
                tp = dcs[0]
        if dataclasses.is_dataclass(tp):
            fields = _init_fields(tp)
            if part not in fields:
                raise ConfigError(f"command line: unknown key '{key}'"
                                  f"{_suggest(schema, prefix, part, fields)}")
            tp = _hints(tp)[part]
        elif get_origin(tp) in (dict, typing.Mapping) or tp is dict or tp is Any:
            args = get_args(tp)
            tp = args[1] if args else Any
        else:
            raise ConfigError(f"command line: key '{key}': '{prefix[:-1]}' is a {_type_name(tp)}, "
                              f"not a mapping with sub-keys")
    return tp


def _suggest(root: type, prefix: str, name: str, fields: Iterable[str]) -> str:
    """``" (did you mean 'x.y'?)"`` for an unknown key, or ``""``."""
    fields = list(fields)
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    if close:
        return f" (did you mean '{prefix}{close[0]}'?)"
    # Same name at another level (e.g. 'lr' at the top instead of 'trainer.lr')?
    everywhere = dotted_keys(root)
    same_leaf = [k for k in everywhere if k.rsplit(".", 1)[-1] == name]
    if same_leaf:
        return f" (did you mean '{same_leaf[0]}'?)"
    close = difflib.get_close_matches(prefix + name, everywhere, n=1, cutoff=0.75)
    if close:
        return f" (did you mean '{close[0]}'?)"
    if fields:
        shown = ", ".join(fields[:12]) + (", ..." if len(fields) > 12 else "")
        return f" (known keys{' under ' + repr(prefix[:-1]) if prefix else ''}: {shown})"
    return ""


def _format_into(obj: Any, lines: list[str], indent: str, comments: bool, width: int) -> None:
    schema = type(obj)
    docs = field_docs(schema)
    hints = _hints(schema)
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        tp = hints[f.name]
        if comments:
            doc = docs.get(f.name, "")
            choices = [str(c) for c in get_args(tp)] if get_origin(tp) is Literal else []
            if choices and not all(re.search(rf"\b{re.escape(c)}\b", doc) for c in choices):
                doc = (doc + " " if doc else "") + "Choices: " + ", ".join(choices) + "."
            for ln in textwrap.wrap(doc, width=max(40, width - len(indent) - 2)):
                lines.append(f"{indent}# {ln}")
        if dataclasses.is_dataclass(value):
            lines.append(f"{indent}{f.name}:")
            _format_into(value, lines, indent + "  ", comments, width)
            continue
        dumped = yaml.safe_dump(_plain(value), default_flow_style=True, width=10 ** 9,
                                allow_unicode=True).rstrip("\n")
        if dumped.endswith("\n..."):  # document-end marker after a bare scalar
            dumped = dumped[: -len("\n...")]
        lines.append(f"{indent}{f.name}: {dumped}")
