"""Collecting one run's score files from ``exp/`` into the tracked results (``results/<run>/``).

Every recipe's ``local/make_results.py --collect`` writes its run folder through :func:`run_folder`,
which holds what they share: the output rule of :mod:`speechkit.utils.results_io` (checked before
anything is written: a collect writes only its own run's folder, never ``exp/``, the results root or
a folder it did not make), the hand-written files a person keeps in a run folder
(:data:`~speechkit.utils.results_io.KEPT_FILES`: ``NOTES.md``) carried over, and the run records of
``run.sh`` (``runs.jsonl``, :mod:`speechkit.utils.provenance`) copied beside the score files, where
the page's provenance header reads them. The files themselves are the recipe's choice; it copies
them with :func:`copy_file` / :func:`copy_files` and writes summaries with :func:`write_json`.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from speechkit.utils.fileio import atomic_write
from speechkit.utils.outputs import Named
from speechkit.utils.results_io import KEPT_FILES, check_collect_dir, collect_dir, mark_collect_dir

__all__ = ["RUNS_FILE", "run_folder", "copy_file", "copy_files", "write_json"]

logger = logging.getLogger(__name__)

#: The run records' name in a run folder (speechkit.utils.provenance.read_runs reads it).
RUNS_FILE = "runs.jsonl"


@contextlib.contextmanager
def run_folder(out: str | os.PathLike, *, owner: str, signature: Iterable[str], reads: Named | None = None,
               option: str = "`out`", runs: str | os.PathLike | None = None,
               merge: bool = False) -> Iterator[Path]:
    """The folder to collect one run into; ``out`` is checked before anything is written.

    Without ``merge``, the run folder is written whole: the block writes into a fresh temporary folder
    that replaces ``out`` when it succeeds (a failed collect leaves ``out`` as it was), and the files a
    person keeps there (``NOTES.md``) are carried over. With ``merge``, the block writes into ``out``
    itself (created if need be), over what an earlier collect put there: a recipe whose runs are
    collected in several steps (the big models after the small ones).

    Args:
        out: the run folder, ``results/<run>``.
        owner: the collect's name as its marker records it (``egs/<recipe>/local/make_results.py --collect``).
        signature: files only this collect writes into a run folder (names or glob patterns), by which a
            folder collected before markers existed is recognised.
        reads: ``{label: path}`` of what the collect reads (the experiments, data folders, files).
        option: how ``out`` is named in messages: the caller's flag (``--collect``, ``--run``), or by default
            the parameter (a reference, :mod:`speechkit.utils.errors`).
        runs: the run records of ``run.sh`` (a ``runs.jsonl``), copied to ``<out>/runs.jsonl``; a missing
            one is said (warning), and the page says environment and commands unknown.
        merge: write into ``out`` rather than replace it.

    Yields:
        The folder to write the run's files into.

    Raises:
        OutputOverlapError (a ValueError): ``out`` is, holds or lies inside what is read, lies inside
            another run folder, holds another run's folder, or exists holding files no collect of
            ``owner`` made (a user's folder is never replaced).
        WriteError: ``out`` cannot be written, or is an existing file.
    """
    out = Path(out)
    if merge:
        check_collect_dir(out, owner=owner, signature=signature, reads=reads, option=option)
        out.mkdir(parents=True, exist_ok=True)
        mark_collect_dir(out, owner)
        _copy_runs(runs, out)
        yield out
        return
    with collect_dir(out, owner=owner, signature=signature, reads=reads, option=option) as tmp:
        for name in KEPT_FILES:  # written by hand, not collected: kept
            copy_file(out / name, tmp / name)
        _copy_runs(runs, tmp)
        yield tmp


def _copy_runs(runs: str | os.PathLike | None, dst: Path) -> None:
    if runs is None:
        return
    if not copy_file(runs, dst / RUNS_FILE):
        logger.warning("%s: no run records: the page will say environment and commands unknown", runs)


def copy_file(src: str | os.PathLike, dst: str | os.PathLike) -> bool:
    """Copy ``src`` to ``dst`` (its folder created) when ``src`` is a file; returns whether it was."""
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return True


def copy_files(src: str | os.PathLike, dst: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Copy each of ``names`` (paths relative to ``src``, e.g. ``scoring/wer.json``) that exists in ``src``
    to the same place in ``dst``; returns the names copied."""
    return [n for n in names if copy_file(Path(src) / n, Path(dst) / n)]


def _plain(o):
    """A numpy scalar as the Python number it holds (``json``'s ``default``)."""
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def write_json(path: str | os.PathLike, obj, *, indent: int | None = 1, allow_nan: bool = False,
               ensure_ascii: bool = True) -> None:
    """Write ``obj`` as JSON (a final newline) to ``path`` atomically, its folder created; numpy scalars
    are written as the Python numbers they hold. ``indent=None``: one line without spaces (a bulky table).

    Raises:
        ValueError: ``obj`` holds NaN or an infinity and ``allow_nan`` is false (strict JSON); the
            message names ``path``. ``path`` is left as it was.
        TypeError: ``obj`` holds something JSON cannot hold (named by ``json``).
    """
    path = Path(path)
    try:
        text = json.dumps(obj, indent=indent, allow_nan=allow_nan, ensure_ascii=ensure_ascii, default=_plain,
                          separators=(",", ":") if indent is None else None)
    except ValueError as e:
        raise ValueError(f"{path}: {e} (a NaN or infinity among the figures to write)") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        f.write(text + "\n")
