"""Small file helpers shared by every module: atomic writes and Kaldi-style ``key value`` tables.

Kaldi tables (``wav.scp``, ``text``, ``utt2spk`` ...) are UTF-8 text, one entry per line,
``<key><space><value>``. Errors always name the file and the 1-based line number.

A UTF-8 byte-order mark (U+FEFF, what Windows editors put first) at the start of a file is an
encoding signature, not text: :func:`read_lines` (so :func:`read_table`, every Kaldi table) drops
it with a warning naming the file, instead of reading the first id as ``\ufeffu1``. One at the
start of a later line (files concatenated with ``cat``) is an error naming the line.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import tempfile
from pathlib import Path
from typing import Iterator, Mapping

logger = logging.getLogger(__name__)

#: The UTF-8 byte-order mark, as decoded text.
BOM = "\ufeff"
_bom_warned: set[str] = set()  # files already warned about (once per process, not per read)


class DataError(ValueError):
    """Malformed input data. The message names the file (and line or key) at fault."""


class WriteError(OSError):
    """An output that cannot be written; ``str()`` is ``cannot write PATH: <reason>``.

    An ``OSError`` (``errno``, ``strerror`` and ``filename`` kept), so callers catching ``OSError``
    still do; :func:`speechkit.utils.cli.run_main` prints it as one line.
    """

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _write_error(path: str | os.PathLike, e: OSError) -> WriteError:
    """``e`` as a :class:`WriteError` naming the path the OS complained about (or ``path``)."""
    if isinstance(e, WriteError):
        return e
    where = e.filename if e.filename is not None else path
    return WriteError(e.errno or 0, e.strerror or str(e), str(where))


#: ``errno`` values that mean the bytes could not be stored: a full disk or quota, a file too large, a read-only
#: file system, an I/O error. Raised by ``write()``/``flush()``/``close()``, they name no file.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


@contextlib.contextmanager
def naming_write_errors(path: str | os.PathLike) -> Iterator[None]:
    """Around code writing ``path``: an ``OSError`` that names no file and whose ``errno`` is one of
    :data:`WRITE_ERRNOS` (``write()`` on a full disk: ``[Errno 28] No space left on device``) becomes a
    :class:`WriteError` naming ``path`` (``cannot write PATH: No space left on device``). Other errors (a
    missing input read inside the block, an error naming its own file) pass unchanged.

    Raises:
        WriteError: as above.
    """
    try:
        yield
    except WriteError:
        raise
    except OSError as e:
        if e.filename is None and e.errno in WRITE_ERRNOS:
            raise WriteError(e.errno, e.strerror or os.strerror(e.errno), str(path)) from None
        raise


def id_file(directory: str | os.PathLike, key: str, suffix: str, what: str = "utterance id") -> Path:
    """``directory/<key><suffix>``: the file an id (utterance, speaker) names inside ``directory``.

    Kaldi ids may hold any character but whitespace; as a file name an id must stay one name inside
    ``directory``, so an id that is empty, ``.`` or ``..``, or holds a ``/`` or a NUL is refused (an
    absolute or ``../`` id would write over a file outside the output, e.g. the input audio).

    Raises:
        DataError: such an id (names it).
    """
    if not key or key in (".", "..") or "/" in key or "\0" in key or (os.altsep and os.altsep in key):
        raise DataError(f"{what} {key!r} cannot be a file name of the output: ids used as file names may not be "
                        "empty, '.' or '..', nor hold a '/' (rename it in the data's tables)")
    return Path(directory) / f"{key}{suffix}"


def ensure_writable_dir(path: str | os.PathLike) -> Path:
    """Create directory ``path`` (and its parents) if needed and check that files can be created in it.

    Call it before work whose result would be lost if the output could not be written.

    Returns:
        ``Path(path)``.

    Raises:
        WriteError: ``path`` (or a parent) is a file, cannot be created, or is not writable,
            e.g. ``cannot write exp/run1: Not a directory``.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise WriteError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno == errno.EEXIST:  # a parent is a file
            raise WriteError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(e.filename or path)) from None
        raise _write_error(path, e) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise WriteError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    return path


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator:
    """Open a temporary file next to ``path`` and rename it onto ``path`` only on success.

    A crash or exception inside the ``with`` block leaves ``path`` untouched (either absent or
    its previous complete content), so a later stage never mistakes a half-written file for
    a finished one.

    Args:
        path: destination file.
        mode: ``"w"`` (text) or ``"wb"`` (binary).
        encoding: text encoding; ignored for binary modes.

    Raises:
        WriteError: the directory cannot be created or written, the data cannot be stored (a full disk:
            :func:`naming_write_errors`), or the rename fails (``cannot write PATH: <reason>``).
    """
    path = Path(path)
    if path.is_dir():
        raise WriteError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        ensure_writable_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except WriteError:
        raise
    except OSError as e:
        raise _write_error(path, e) from None
    # mkstemp creates 0600; give the file the permissions a plain open() would (0666 & ~umask).
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    try:
        with naming_write_errors(path):  # a full disk names the destination, not nothing
            with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
        try:
            os.replace(tmp, path)
        except OSError as e:
            raise _write_error(path, e) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a UTF-8 text file into lines (without ``\\n``).

    A byte-order mark at the start of the file is dropped, with a warning naming the file (once
    per file and process): it is not part of the first line. Kaldi's shell tools (``sort``,
    ``join`` in ``utils/fix_data_dir.sh``) do read it as part of the first id, hence the warning.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        DataError: the file is not valid UTF-8 (names the file and line).
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    if text.startswith(BOM):
        text = text[1:]
        if str(path) not in _bom_warned:
            _bom_warned.add(str(path))
            logger.warning("%s: starts with a UTF-8 byte-order mark (U+FEFF); ignored (Kaldi's shell tools would "
                           "read it as part of the first id; remove it with: sed -i '1s/^\\xEF\\xBB\\xBF//' %s)",
                           path, path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_table(path: str | os.PathLike, allow_empty_value: bool = False) -> dict[str, str]:
    """Read a Kaldi ``key value...`` table into an insertion-ordered dict.

    The value is everything after the first run of whitespace (so ``text`` keeps its spaces).
    A byte-order mark starting the file is dropped (:func:`read_lines`).

    Raises:
        DataError: empty line, missing value, duplicate key, or a key that starts with a
            byte-order mark (a later line: files concatenated with their marks); the message
            names file and line.
    """
    table: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(read_lines(path), 1):
        parts = line.strip().split(maxsplit=1)
        if not parts:
            raise DataError(f"{path}:{lineno}: empty line")
        key = parts[0]
        if key.startswith(BOM):
            raise DataError(f"{path}:{lineno}: key {key!r} starts with a UTF-8 byte-order mark (U+FEFF; "
                            "files concatenated with their marks?); remove it")
        if len(parts) < 2 and not allow_empty_value:
            raise DataError(f"{path}:{lineno}: key '{key}' has no value")
        if key in table:
            raise DataError(f"{path}:{lineno}: duplicate key '{key}' (first on line {first_line[key]})")
        table[key] = parts[1] if len(parts) > 1 else ""
        first_line[key] = lineno
    return table


def write_table(path: str | os.PathLike, table: Mapping[str, object], sort: bool = True) -> None:
    """Write ``key value`` lines atomically, sorted by key in C-locale (byte) order by default."""
    keys = sorted(table, key=lambda k: k.encode("utf-8")) if sort else list(table)
    with atomic_write(path) as f:
        for k in keys:
            v = table[k]
            if isinstance(v, (list, tuple)):
                v = " ".join(str(x) for x in v)
            f.write(f"{k} {v}\n" if str(v) != "" else f"{k}\n")
