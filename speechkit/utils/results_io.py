"""The output rule of the recipes' results scripts (``egs/*/local/make_results.py``).

A *collect* copies the small score files of one run from ``exp/`` into a run folder of the tracked
results (``results/<run>/``); a *render* writes a Markdown page from those folders. Both go through
this module, before anything is written:

- :func:`check_collect_dir` / :func:`collect_dir`: a collect writes only its own run's folder. It
  refuses a folder that is, holds or lies inside what the collect reads (``exp/``, ``data/``, a file
  it reads: :func:`speechkit.utils.outputs.check_output_dir`), one that lies inside a results run
  folder, one that holds another run's folder (the results root itself), and an existing folder that
  is not a results run folder this collect made. A collected folder carries a marker
  (:data:`speechkit.utils.outputs.OWNER_FILE` naming the collect), so a later collect replaces only a
  folder it made; a folder written before the marker existed is recognised by the files only a
  collect writes there (its *signature*, e.g. ``test_set.json``) and by holding nothing a collect does
  not write (:data:`COLLECTED_SUFFIXES`). A folder holding nothing, or only a hand-written ``NOTES.md``,
  may be collected into.
- :func:`check_page`: a page never replaces a file the render (or the report) reads: not the results
  root nor anything below one of its run folders, not a file or below a folder it reads, not another
  of the command's outputs.
- :func:`check_run_name`: a run name given apart from its folder (``--run NAME``) is one path
  component (``results/.`` is the results root, ``results/../exp`` the experiments).

Reading the JSON files is :mod:`speechkit.utils.jsonio`'s (file and line named on failure).
"""
from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
from pathlib import Path
from typing import Iterable, Iterator

from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import WriteError
from speechkit.utils.outputs import BACKUP_DIR, OWNER_FILE, Named, OutputOverlapError, check_output_dir, replace_dir

__all__ = ["check_collect_dir", "collect_dir", "mark_collect_dir", "check_page", "check_run_name",
           "KEPT_FILES"]

#: Files a person writes into a run folder by hand; a folder holding only these may be collected into.
KEPT_FILES = ("NOTES.md",)


def _named(items: Named | None) -> list[tuple[str, Path]]:
    if items is None:
        return []
    pairs = items.items() if hasattr(items, "items") else items
    return [(str(label), Path(p)) for label, p in pairs if p is not None and str(p) != ""]


def _real(p: Path) -> Path:
    return Path(os.path.realpath(p))


def _within(inner: Path, outer: Path) -> bool:
    """``inner`` is ``outer`` or lies below it (both resolved)."""
    return inner == outer or outer in inner.parents


def _marker(d: Path) -> str | None:
    """The owner named by ``d``'s :data:`OWNER_FILE`, or None."""
    try:
        return (d / OWNER_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _has_signature(d: Path, signature: Iterable[str]) -> bool:
    """``d`` holds one of the ``signature`` files (names or glob patterns relative to ``d``)."""
    for pat in signature:
        if any(ch in pat for ch in "*?["):
            if next(iter(d.glob(pat)), None) is not None:
                return True
        elif (d / pat).is_file():
            return True
    return False


#: What the recipes' collects write into a run folder (suffixes, and names without one): a folder without a
#: marker is taken for one collected before markers existed only if it holds nothing else.
COLLECTED_SUFFIXES = (".json", ".jsonl", ".md", ".png", ".yaml", ".flac")
COLLECTED_NAMES = ("wallclock",)


def _not_collected(d: Path) -> list[Path]:
    """Files below ``d`` (its backups left out) that no collect writes (:data:`COLLECTED_SUFFIXES`), sorted."""
    return sorted(p for p in d.rglob("*") if p.is_file() and BACKUP_DIR not in p.relative_to(d).parts
                  and p.suffix not in COLLECTED_SUFFIXES and p.name not in COLLECTED_NAMES)


def _is_run(d: Path, owner: str, signature: Iterable[str]) -> bool:
    """``d`` is a results run folder of ``owner``: its marker, or (made before markers) its signature and
    nothing a collect does not write (a user's folder holding a ``setup.json`` beside a thesis was deleted
    whole by vctk's collect)."""
    m = _marker(d)
    if m is not None:
        return m == owner
    return _has_signature(d, signature) and not _not_collected(d)


def _overlap(message: str) -> OutputOverlapError:
    """An :class:`OutputOverlapError` whose labels may name parameters (:mod:`speechkit.utils.errors`)."""
    return naming_parameters(OutputOverlapError(message))


def check_collect_dir(out: str | os.PathLike, *, owner: str, signature: Iterable[str], reads: Named | None = None,
                      option: str = "`out`") -> Path:
    """Refuse, before anything is written, a run folder a collect may not write (see the module doc).

    Args:
        out: the run folder (``results/<run>``), existing or not.
        owner: the collect's name (``egs/zerospeech2019/local/make_results.py --collect``), as its marker
            records it.
        signature: files only this collect writes into a run folder (names or glob patterns relative to
            it, e.g. ``("test_set.json",)``): how a folder collected before the marker existed is known.
        reads: ``{label: path}`` of what the collect reads (the experiments and data folders, files).
        option: how the output is named in messages: the caller's flag (``--collect``), or by default the
            parameter ``out`` (a reference, :mod:`speechkit.utils.errors`).

    Returns:
        ``Path(out)``.

    Raises:
        OutputOverlapError (a ValueError): ``out`` is, holds or lies inside what the collect reads, lies
            inside a results run folder, holds another run's folder, or exists holding files that no
            collect of ``owner`` made.
        WriteError: ``out`` is an existing file.
    """
    signature = tuple(signature)
    out_p = check_output_dir(out, inputs=reads, option=option)
    real = _real(out_p)
    for parent in real.parents:
        m = _marker(parent)
        if (m is not None and m.endswith("--collect")) or \
                _has_signature(parent, [s for s in signature if not any(ch in s for ch in "*?[")]):
            raise _overlap(f"{option} {out_p} lies inside the results run folder {parent}: a collect "
                                     "writes one run's folder; choose RESULTS/NAME beside it")
    if not out_p.is_dir():
        return out_p
    if _is_run(out_p, owner, signature):
        return out_p
    entries = [p for p in out_p.iterdir() if p.name not in (BACKUP_DIR, *KEPT_FILES)]
    if not entries:
        return out_p
    runs = sorted(p.name for p in entries if p.is_dir() and (_marker(p) is not None or _has_signature(p, signature)))
    if runs:
        raise _overlap(
            f"{option} {out_p} holds the results run folder(s) {', '.join(runs[:3])}: a collect writes one run's "
            f"folder and never replaces another run; choose {out_p}/NAME")
    who = _marker(out_p)
    foreign = _not_collected(out_p) if who is None and _has_signature(out_p, signature) else []
    made = f"it was made by {who}" if who else \
        f"it holds {foreign[0].relative_to(out_p)}, which no collect writes" if foreign else \
        f"it holds no {OWNER_FILE} of a collect and none of {', '.join(signature)}"
    raise _overlap(
        f"{option} {out_p} exists and is not a results run folder this collect made ({made}): a collect "
        "replaces its run folder whole; choose another folder (results/NAME) or move this one away")


def mark_collect_dir(d: str | os.PathLike, owner: str) -> None:
    """Write the collect's marker (:data:`~speechkit.utils.outputs.OWNER_FILE` naming ``owner``) into ``d``."""
    (Path(d) / OWNER_FILE).write_text(f"{owner}\n", encoding="utf-8")


@contextlib.contextmanager
def collect_dir(out: str | os.PathLike, *, owner: str, signature: Iterable[str], reads: Named | None = None,
                option: str = "`out`") -> Iterator[Path]:
    """Check ``out`` (:func:`check_collect_dir`), then write it whole: yield a fresh temporary folder that
    carries the collect's marker and replaces ``out`` when the block succeeds (the previous run folder,
    which this collect made, is deleted; a failed collect leaves it as it was).

    Args: as :func:`check_collect_dir`.

    Yields:
        The temporary folder to write the run's files into (copy a kept ``NOTES.md`` yourself).

    Raises:
        as :func:`check_collect_dir`; WriteError when the folder cannot be written.
    """
    out = check_collect_dir(out, owner=owner, signature=signature, reads=reads, option=option)
    # backup=False without an owner deletes the previous folder: checked above to be this collect's run folder
    with replace_dir(out, backup=False) as tmp:
        mark_collect_dir(tmp, owner)
        yield tmp


def check_page(page: str | os.PathLike, *, option: str, roots: Named | None = None, inputs: Named | None = None,
               outputs: Named | None = None) -> Path:
    """Refuse, before anything is written, a page (a Markdown file) that would replace what is read.

    Args:
        page: the page to write.
        option: how the page is named in messages (``--render``, ``--out``).
        roots: ``{label: folder}`` whose subfolders are read whole (the results root: its run folders;
            an experiments folder): the page may be a new file directly in one (``exp/RESULTS.md``), but
            neither the folder itself nor any file below one of its subfolders.
        inputs: ``{label: path}`` of other files and folders read: the page may not be one or lie inside one.
        outputs: ``{label: path}`` of the command's other outputs: the page may not be one.

    Returns:
        ``Path(page)``.

    Raises:
        OutputOverlapError: the page is or lies where it may not; the message names the option, the page
            and what it would replace.
        WriteError: the page is an existing directory.
    """
    page_p = Path(page)
    real = _real(page_p)
    for label, root in _named(roots):
        r = _real(root)
        if real == r or (r in real.parents and real.parent != r):
            where = "is" if real == r else "lies inside a subfolder of"
            raise _overlap(f"{option} {page_p} {where} {label} {root}, whose folders are read: a page never "
                                     "replaces what it is made from; write it next to that folder")
    for label, p in _named(inputs):
        if _within(real, _real(p)):
            raise _overlap(f"{option} {page_p} {'is' if real == _real(p) else 'lies inside'} {label} {p}, "
                                     "which is read: outputs never overwrite inputs; choose another file")
    for label, p in _named(outputs):
        if real == _real(p):
            raise _overlap(f"{option} {page_p} is {label}, also written: choose another file")
    if page_p.is_dir():
        raise WriteError(errno.EISDIR, os.strerror(errno.EISDIR), str(page_p))
    return page_p


def check_run_name(name: str, option: str = "`name`") -> str:
    """Refuse a run name that is not one path component (``results/<name>`` must be a new folder of the
    results root): empty, ``.``, ``..``, or holding a ``/``.

    Args:
        name: the run name.
        option: how ``name`` is named in the message: the caller's flag (``--run``), or by default the
            parameter (a reference, :mod:`speechkit.utils.errors`).

    Raises:
        ValueError: the message names the option and the name.
    """
    if not name or name in (".", "..") or "/" in name or os.sep in name or "\0" in name:
        raise naming_parameters(ValueError(f"{option} {name!r}: a run name is one folder name (results/NAME), "
                                           "not a path"))
    if fnmatch.fnmatch(name, ".*"):
        raise naming_parameters(ValueError(f"{option} {name!r}: a run name does not start with '.' (hidden folders "
                                           "are not runs)"))
    return name
