"""JSON and JSON-lines files read with the file and line named on failure.

Every JSON file a tool or a results script reads (score files, caches, run records) goes through
:func:`read_json` (or :func:`read_json_cache` for a cache the caller can compute again), every
JSON-lines file through :func:`read_jsonl`. Their rules:

- A file that is not valid JSON is a :class:`~speechkit.utils.fileio.DataError` whose message
  starts with ``PATH:LINE:COLUMN`` (``PATH:LINE`` for a JSON-lines file) and says when the text
  is cut short (a killed run, a full disk), never the parser's bare message.
- A JSON-lines record cut short (a torn line: the last line without its final newline, or a line
  whose JSON stops before it is complete, as ``speechkit-record-run`` leaves one when it appends
  after a torn line) is skipped with a warning naming the file and line; any other malformed line
  is an error naming them.
- A cache that cannot be read is not an error: the warning names the file and the caller computes
  it again (it kept failing until the user found the file).
"""
from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from speechkit.utils.fileio import DataError

log = logging.getLogger(__name__)

__all__ = ["read_json", "read_json_cache", "read_jsonl", "cut_short"]

_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER_PREFIX = re.compile(r"-?[0-9]*(\.[0-9]*)?([eE][+-]?[0-9]*)?")


def cut_short(text: str, err: json.JSONDecodeError) -> bool:
    """True when ``text`` failed to parse only because it stops early: what is left from the error's
    position is nothing, the start of a literal or number, or an unterminated string (a record cut
    by a killed run or a full disk, not one written wrong)."""
    if err.msg.startswith("Unterminated string"):
        return True
    rest = text[err.pos:].strip()
    if not rest:
        return True
    return any(lit.startswith(rest) for lit in _LITERALS) or _NUMBER_PREFIX.fullmatch(rest) is not None


def _type_name(expect: type | tuple[type, ...]) -> str:
    types = expect if isinstance(expect, tuple) else (expect,)
    names = {dict: "a JSON object", list: "a JSON array", str: "a JSON string"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start}): not a JSON file") from None


def read_json(path: str | os.PathLike, *, expect: type | tuple[type, ...] | None = None) -> Any:
    """The JSON value in ``path``.

    Args:
        path: a JSON file (UTF-8; ``NaN`` / ``Infinity`` accepted, as Python's ``json`` writes them).
        expect: the type the top-level value must have (``dict``, ``list``), or None for any.

    Returns:
        The decoded value.

    Raises:
        DataError: not UTF-8, not valid JSON (``PATH:LINE:COLUMN: not valid JSON (reason)``, saying
            when the file is cut short), or a top-level value not of type ``expect``.
        OSError: the file cannot be read (``FileNotFoundError`` names it).
    """
    path = Path(path)
    text = _decode(path, path.read_bytes())
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        why = ("; the file is cut short (written by a killed run or on a full disk?): write it again"
               if cut_short(text, e) else "")
        raise DataError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg}){why}") from None
    if expect is not None and not isinstance(value, expect):
        raise DataError(f"{path}: expected {_type_name(expect)}, found a JSON {type(value).__name__}")
    return value


def read_json_cache(path: str | os.PathLike, *, expect: type | tuple[type, ...] | None = dict) -> Any | None:
    """A cached result the caller can compute again: the JSON value in ``path``, or None when the file is
    absent, unreadable or not valid JSON (a warning names the file and line; the caller recomputes it and
    writes it again).

    Args:
        path: the cache file.
        expect: the type the top-level value must have (default ``dict``); another is treated as unreadable.

    Returns:
        The decoded value, or None.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return read_json(path, expect=expect)
    except (DataError, OSError) as e:
        log.warning("%s; computed again", e)
        return None


def read_jsonl(path: str | os.PathLike, *, expect: type | tuple[type, ...] | None = dict,
               missing_ok: bool = True, skip_bad: bool = False) -> list:
    """The records of a JSON-lines file, in order, torn records skipped with a warning.

    Args:
        path: the file (one JSON value per line; blank lines ignored).
        expect: the type every record must have (default ``dict``; None: any).
        missing_ok: an absent file gives ``[]`` (else ``FileNotFoundError``).
        skip_bad: skip every line that is not valid JSON or not of type ``expect``, with a warning naming
            the file and line, instead of raising (a log whose writer drops such lines itself on resume:
            ``metrics.jsonl``).

    Returns:
        The records, without the torn ones.

    Raises:
        DataError: a line that is not valid JSON and not torn (``PATH:LINE: not JSON (reason)``), or a
            record not of type ``expect`` (``PATH:LINE: not a JSON object``), or a file that is not UTF-8.
        OSError: the file cannot be read.
    """
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    text = _decode(path, path.read_bytes())
    lines = text.split("\n")  # the last element is "" when the file ends with a newline
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            last = i == len(lines)  # no newline after it
            if last or cut_short(line, e):
                log.warning("%s:%d: a record cut short (a run killed while writing it, or a full disk): skipped",
                            path, i)
                continue
            if skip_bad:
                log.warning("%s:%d: not JSON (%s at column %d): skipped", path, i, e.msg, e.colno)
                continue
            raise DataError(f"{path}:{i}: not JSON ({e.msg} at column {e.colno})") from None
        if expect is not None and not isinstance(rec, expect):
            if skip_bad:
                log.warning("%s:%d: not %s: skipped", path, i, _type_name(expect))
                continue
            raise DataError(f"{path}:{i}: not {_type_name(expect)}")
        out.append(rec)
    return out
