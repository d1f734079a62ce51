"""Rendering a results page from the tracked run folders (``results/<run>/``) alone.

A recipe's ``local/make_results.py`` renders its ``RESULTS.md`` from the run folders its collect wrote
(a clean clone regenerates it without ``exp/``). What every page shares is here: the run folders in
page order (:func:`run_dirs`), the score files read (:func:`read_json_if`: absent is ``None``, a broken
one an error naming the file and line), each run's provenance header (:func:`provenance`: environment,
commands, config hashes; ESPnet's RESULTS.md convention) and the page written whole (:func:`write_page`).
The tables are the recipe's.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Sequence

from speechkit.results.collect import RUNS_FILE
from speechkit.utils.fileio import atomic_write
from speechkit.utils.jsonio import read_json
from speechkit.utils.provenance import markdown_header, read_runs

__all__ = ["run_dirs", "read_json_if", "provenance", "write_page"]


def run_dirs(results: str | os.PathLike, is_run: str | Callable[[Path], bool],
             first: Sequence[str] = ()) -> list[Path]:
    """The run folders of ``results`` in page order: the names of ``first`` in that order, then the others
    by name ([] when ``results`` is not a folder).

    Args:
        results: the results root (``results/``).
        is_run: a file every run folder holds (``"setup.json"``), or a test of a folder.
        first: run names that lead the page (``("mini",)``: the CI run first).
    """
    results = Path(results)
    if not results.is_dir():
        return []
    test = (lambda d: (d / is_run).is_file()) if isinstance(is_run, str) else is_run
    rank = {name: i for i, name in enumerate(first)}
    return sorted((d for d in results.iterdir() if d.is_dir() and test(d)),
                  key=lambda d: (rank.get(d.name, len(rank)), d.name))


def read_json_if(path: str | os.PathLike, expect: type | tuple[type, ...] | None = None):
    """The JSON in ``path``, ``None`` when there is no such file.

    Raises:
        DataError: the file is not JSON (the message names the file and line, and says when it is cut
            short), or not of the type ``expect`` (:func:`speechkit.utils.jsonio.read_json`).
    """
    path = Path(path)
    if not path.is_file():
        return None
    return read_json(path) if expect is None else read_json(path, expect=expect)


def provenance(run_dir: str | os.PathLike, level: int = 3) -> str:
    """The provenance header of one run folder (its ``runs.jsonl``; :func:`speechkit.utils.provenance.markdown_header`)
    with its sections at heading ``level`` (3: ``### Environment`` under the run's ``##`` heading); without
    run records, a line saying environment and commands are unknown. Ends with a newline.

    Raises:
        DataError: a line of ``runs.jsonl`` that is not a record (a record cut short is skipped with a warning).
    """
    return markdown_header(read_runs(Path(run_dir) / RUNS_FILE), level=level)


def write_page(page: str | os.PathLike, lines: Iterable[str]) -> str:
    """Write the page's ``lines`` (joined by newlines, trailing blank lines dropped, one final newline) to
    ``page`` atomically and return the text. Check ``page`` first
    (:func:`speechkit.utils.results_io.check_page`: a page never replaces what it is made from).

    Raises:
        WriteError: ``page`` cannot be written (its folder is created).
    """
    text = "\n".join(lines).rstrip("\n") + "\n"
    Path(page).parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(page) as f:
        f.write(text)
    return text
