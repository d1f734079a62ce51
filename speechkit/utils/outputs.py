"""Output directories that never overlap their inputs and are replaced only as a whole.

Every ``speechkit-*`` tool that writes a directory does two things through this module:

1. :func:`check_output_dir` before any work: the output must not be, contain or lie inside an
   input (a data dir, a front-end dir, a file the tool reads), must not be or contain an
   experiment dir it reads a model from (an output *inside* one is ESPnet's layout,
   ``exp/<model>/decode_test``, and allowed), and must not be an existing non-directory.
2. :func:`replace_dir` around the writing: the tool writes into a fresh hidden directory next to
   the output, which is swapped into place only when the tool succeeds. A killed or failed run
   therefore leaves the previous complete output (or nothing), never a mixture; the previous
   output is kept as ``OUT/.backup/N/`` (Kaldi's ``fix_data_dir.sh`` habit) when it held files.
   A tool whose output is a re-derivable cache (``backup=False``) names itself (``owner``): its
   output carries a marker file (:data:`OWNER_FILE`), and a previous output is deleted only when it
   carries the same marker; any other directory found there is kept as a backup, never deleted.

The swap is one ``renameat2(RENAME_EXCHANGE)`` on Linux (atomic: the output path always names a
complete directory); elsewhere two renames with a window of microseconds where it names nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Union

from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import WRITE_ERRNOS, WriteError, ensure_writable_dir

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]
Named = Union[Mapping[str, Union[PathLike, None]], Iterable[tuple[str, Union[PathLike, None]]]]

BACKUP_DIR = ".backup"
OWNER_FILE = ".speechkit-output"  # in an output written with backup=False: the tool that wrote it


class OutputOverlapError(ValueError):
    """An output that is, contains or lies inside an input; the message names both and the option."""


def _overlap(message: str) -> OutputOverlapError:
    """An :class:`OutputOverlapError` whose labels may name parameters (```out_dir```, ```model_dir```:
    :mod:`speechkit.utils.errors`), for a CLI to spell as its flags."""
    return naming_parameters(OutputOverlapError(message))


def _named(items: Named | None) -> list[tuple[str, Path]]:
    if items is None:
        return []
    pairs = items.items() if isinstance(items, Mapping) else items
    return [(str(name), Path(p)) for name, p in pairs if p is not None and str(p) != ""]


def _real(p: Path) -> Path:
    return Path(os.path.realpath(p))


def _within(inner: Path, outer: Path) -> bool:
    """``inner`` is ``outer`` or lies below it (both resolved)."""
    return inner == outer or outer in inner.parents


def check_output_dir(out: PathLike, *, inputs: Named | None = None, experiment_dirs: Named | None = None,
                     option: str = "output dir", contains_ok: bool = False) -> Path:
    """Refuse an output directory that would overwrite or mix with what the tool reads.

    Paths are compared after resolving symlinks and ``..``, so ``data/train/../train`` is
    ``data/train``.

    Args:
        out: the output directory (need not exist).
        inputs: ``{label: path}`` (or ``(label, path)`` pairs; ``None`` values skipped) of what the
            tool reads: data dirs, front-end dirs, checkpoint and config files. ``out`` may not be,
            contain, or lie inside any of them, nor contain a file that the ``*.scp`` tables of an input
            dir read (:func:`files_read_by_tables`: a ``cmvn.scp``'s ark in ``cmvnX/``, a ``feats.scp``'s
            arks, ``wav.scp``'s audio), wherever that file lies.
        experiment_dirs: ``{label: path}`` of experiment dirs the tool reads a model from. ``out``
            may not be or contain one, but may lie inside one (``exp/vq/units/test``); list the files
            it reads from there (checkpoint, config) under ``inputs`` too.
        option: how the output is named in messages: a CLI's name (``OUT_DIR``, ``--out-dir``), or in the
            library the parameter's (```out_dir```, which a CLI spells as its own; as the labels of
            ``inputs`` and ``experiment_dirs`` may: :mod:`speechkit.utils.errors`).
        contains_ok: an output written file by file and never replaced as a whole (a training exp
            dir) may contain inputs (a recipe may keep the codes an inverter trains on in its exp
            dir); it still may not be one or lie inside one.

    Returns:
        ``Path(out)``.

    Raises:
        OutputOverlapError: ``out`` is, contains or lies inside an input; the message names the
            option, the output and the input with its label, e.g.
            ``OUT_DIR data/train is the data dir (DATA_DIR data/train): choose another output dir``.
        WriteError: ``out`` exists and is not a directory (``cannot write PATH: Not a directory``).
    """
    out_p = Path(out)
    real_out = _real(out_p)
    named_inputs = _named(inputs)
    read = [pair for _, p in named_inputs if p.is_dir() for pair in files_read_by_tables(p)]
    checks = [(label, p, True) for label, p in _named(experiment_dirs)] + \
             [(label, p, False) for label, p in named_inputs + read]
    for label, p, inside_ok in checks:
        real_in = _real(p)
        if real_out == real_in:
            why = "is"
        elif real_out in real_in.parents and not contains_ok:
            why = "contains"
        elif not inside_ok and real_in in real_out.parents:
            why = "lies inside"
        else:
            continue
        raise _overlap(
            f"{option} {out_p} {why} {label} {p}: outputs never overlap inputs "
            "(replacing it would delete or mix with what is read); choose another output dir")
    if out_p.exists() and not out_p.is_dir():
        raise WriteError(errno.ENOTDIR, f"{os.strerror(errno.ENOTDIR)} (an existing file; remove it or choose "
                                        "another output dir)", str(out_p))
    return out_p


_DIR_FILE_SUFFIXES = (".scp", ".ark", ".yaml", ".yml")
#: Files a data or feature dir holds for the tools (utils sits below speechkit.data, so the names are listed
#: here; test_outputs checks that speechkit.data.datadir's TABLES, EXTRA_FILES and PHONE_ALIGNMENTS are among them)
DATA_DIR_FILES = frozenset({"wav.scp", "segments", "text", "utt2spk", "spk2utt", "utt2lang", "utt2dur", "feats.scp",
                            "utt2num_frames", "cmvn.scp", "spk2gender", "reco2file_and_channel", "phone_alignments",
                            "frame_shift", "feats.yaml", "cmvn_global.ark", "label_dim"})
#: Files whose presence makes a directory a data or feature dir, whether or not the tool reads it.
DATA_DIR_MARKERS = ("utt2spk", "wav.scp", "feats.scp")
_SCP_ENTRY = re.compile(r"(.*?)(?::\d+)?(?:\[[^\]]*\])?")


def scp_entry_file(value: str) -> str:
    """The file one scp value reads: ``PATH:OFFSET[slice]``, ``PATH:OFFSET`` or ``PATH`` -> ``PATH``."""
    m = _SCP_ENTRY.fullmatch(value.strip())
    return m.group(1) if m else value


def _table_name(p: Path) -> bool:
    return p.name in DATA_DIR_FILES or p.suffix in _DIR_FILE_SUFFIXES


def is_data_dir(d: PathLike) -> bool:
    """``d`` holds one of :data:`DATA_DIR_MARKERS` (a Kaldi data dir or a feature dir)."""
    return any((Path(d) / name).is_file() for name in DATA_DIR_MARKERS)


def files_read_by_tables(d: PathLike) -> list[tuple[str, Path]]:
    """``(label, file)`` of every file the ``*.scp`` tables of directory ``d`` read: ``wav.scp``'s audio (each
    word of a ``cmd ... |`` entry that names an existing file), ``feats.scp``'s and ``cmvn.scp``'s arks
    (``PATH:OFFSET[slice]`` -> ``PATH``). Relative paths are taken from the working directory, as Kaldi's
    readers do. Unreadable tables give nothing (the tool reports them when it reads them).
    """
    out: dict[Path, str] = {}
    d = Path(d)
    try:
        scps = sorted(p for p in d.iterdir() if p.suffix == ".scp" and p.is_file())
    except OSError:
        return []
    for scp in scps:
        try:
            lines = scp.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            parts = line.split(maxsplit=1)
            if len(parts) < 2:
                continue
            value = parts[1].strip()
            if value.endswith("|"):
                files = [Path(w) for w in value[:-1].split() if "/" in w or "." in w]
                files = [f for f in files if f.is_file()]
            else:
                files = [Path(scp_entry_file(value))]
            for f in files:
                out.setdefault(f, f"a file {scp} reads")
    return [(label, f) for f, label in out.items()]


def check_output_files(outputs: Named, *, inputs: Named | None = None, input_dirs: Named | None = None,
                       output_dirs: Named | None = None, output_data_dirs: Named | None = None) -> None:
    """Refuse, before any work, output files that would overwrite what the tool reads or each other.

    The one rule for every file a tool writes or appends to (``--json``, ``--per-utt``, ``--log-file``, an
    item file, a checkpoint, a page): it is never

    - one of ``inputs``, nor another of ``outputs``;
    - a file that the ``*.scp`` tables of one of ``input_dirs`` read (:func:`files_read_by_tables`: the
      audio of ``wav.scp``, the arks of ``feats.scp``/``cmvn.scp``);
    - one of ``input_dirs`` itself, nor a file of the kind such a directory holds for the tools (a Kaldi
      table such as ``wav.scp`` or ``utt2spk``, ``phone_alignments``, ``feats.yaml``, ``frame_shift``, any
      ``*.scp``, ``*.ark`` or ``*.yaml``) there, whether or not it exists yet;
    - such a file of *any* data or feature dir (a directory holding ``utt2spk``, ``wav.scp`` or
      ``feats.scp``), read by the tool or not: only the data-dir tools write a data dir's tables;
    - inside one of ``output_dirs`` (written whole and swapped in by :func:`replace_dir`: a file there
      would be moved into the backup with the previous output, or deleted with it), nor such a table
      inside one of ``output_data_dirs`` (the data dirs the tool writes, existing yet or not: ``--log-file
      OUT/train/text`` had the log replaced by the transcripts);
    - an existing directory.

    Paths are compared after resolving symlinks and ``..``.

    Args:
        outputs: ``{option: path}`` (or pairs; ``None`` values skipped) of the files the tool writes,
            e.g. ``{"--json": args.json, "--log-file": args.log_file}``; side files written next to one may
            be listed under their own label (``"--json's ref.trn"``).
        inputs: ``{label: path}`` of the files the tool reads: no output may be one of them.
        input_dirs: ``{label: path}`` of the directories whose files the tool reads (a data dir, a
            feature dir); an output may be a new file there (``data/test/abx.json``). A path that is a
            file (an scp given instead of its dir) stands for the directory holding it, whose
            ``feats.yaml``/``frame_shift`` the tools read.
        output_dirs: ``{label: path}`` of the directories the tool writes whole (:func:`replace_dir`).
        output_data_dirs: ``{label: path}`` of the data dirs the tool writes tables into; an output may be
            another file there (``data/train/log/prep.log``, Kaldi's habit).

    Raises:
        OutputOverlapError: an output that is an input, one of an input dir's files, a file an input
            dir's tables read, a data dir's table, or another output; the message names the option, the
            output and the input with its label.
        WriteError: an output that is an existing directory.
    """
    outs = _named(outputs)
    if not outs:
        return
    dirs, read = [], []
    for label, p in _named(input_dirs):
        if p.is_file():  # an scp given for its dir: the file and its dir are read
            read.append((label, p))
            dirs.append((f"the dir of {label}", p.parent, _real(p.parent)))
        else:
            dirs.append((label, p, _real(p)))
    read += [(label, f) for _, d, _ in dirs for label, f in files_read_by_tables(d)]
    seen: list[tuple[str, Path]] = [(label, _real(p)) for label, p in _named(inputs) + read]
    for option, p in outs:
        real = _real(p)
        for label, other in seen:
            if real == other:
                raise _overlap(f"{option} {p} is {label}: outputs never overwrite inputs or each other; "
                                         "choose another file")
        for label, d, real_d in dirs:
            if real == real_d:
                raise _overlap(f"{option} {p} is {label} {d}: choose a file")
            if real.parent == real_d and _table_name(real):
                raise _overlap(f"{option} {p} would replace {real.name} of {label} {d}, which is read: "
                                         "outputs never overwrite inputs; choose another file name or folder")
        if _table_name(real) and is_data_dir(real.parent):
            raise _overlap(f"{option} {p} would replace {real.name} of the data dir {real.parent}: only the "
                                     "data-dir tools write a data dir's tables; choose another file name or folder")
        for label, d in _named(output_dirs):
            if _within(real, _real(d)):
                raise _overlap(f"{option} {p} lies inside {label} {d}, which is written whole (the previous "
                                         "one moved to its backup or deleted, with whatever lies in it): choose a file "
                                         "outside it")
        for label, d in _named(output_data_dirs):
            if _table_name(real) and _within(real, _real(d)):
                raise _overlap(f"{option} {p} would be replaced by the {real.name} written into {label} {d}: "
                                         "choose another file name or folder")
        if p.is_dir():
            raise WriteError(errno.EISDIR, os.strerror(errno.EISDIR), str(p))
        seen.append((option, real))


# --------------------------------------------------------------------------------- the swap
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def exchange_paths(a: PathLike, b: PathLike) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2(RENAME_EXCHANGE)``).

    Returns:
        ``True`` if swapped; ``False`` where the system or file system cannot (the caller falls
        back to two renames).
    """
    if _RENAMEAT2 is None:
        return False
    rc = _RENAMEAT2(_AT_FDCWD, os.fsencode(str(a)), _AT_FDCWD, os.fsencode(str(b)), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temps(out: Path) -> None:
    """Delete ``.OUT.tmp-PID-*`` / ``.OUT.old-PID-*`` left next to ``out`` by a killed run."""
    pat = re.compile(rf"^\.{re.escape(out.name)}\.(tmp|old)-(\d+)-")
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return
    for p in entries:
        m = pat.match(p.name)
        if m and int(m.group(2)) != os.getpid() and not _pid_alive(int(m.group(2))):
            log.info("removing %s, left by a killed run", p)
            shutil.rmtree(p, ignore_errors=True)


def _holds_files(d: Path) -> bool:
    return any(p.name != BACKUP_DIR for p in d.iterdir())


def next_backup(out: PathLike) -> Path:
    """``OUT/.backup/N``, N one more than the largest there (1 if none)."""
    root = Path(out) / BACKUP_DIR
    nums = [int(p.name) for p in root.iterdir() if p.name.isdigit()] if root.is_dir() else []
    return root / str(max(nums, default=0) + 1)


def _owned_by(d: Path, owner: str | None) -> bool:
    """``d`` carries ``owner``'s marker (:data:`OWNER_FILE`): an earlier output of the same tool."""
    try:
        return owner is not None and (d / OWNER_FILE).read_text(encoding="utf-8").strip() == owner
    except (OSError, UnicodeDecodeError):
        return False


def _repoint_scps(kept: Path, out: Path) -> None:
    """The ``*.scp`` files of a kept output named the files beside them by their paths under ``out``
    (``OUT/feats.ark:8``, ``OUT/wav/a.wav``), where the new output now is: point them at ``kept``."""
    olds = {os.path.abspath(out) + os.sep, os.path.realpath(out) + os.sep}
    dest = os.path.abspath(kept) + os.sep
    for scp in kept.rglob("*.scp"):
        if BACKUP_DIR in scp.relative_to(kept).parts:
            continue
        try:
            text = scp.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new_text = text
        for prefix in olds:
            new_text = new_text.replace(prefix, dest)
        if new_text != text:
            tmp = scp.with_name(f".{scp.name}.tmp-{os.getpid()}")
            tmp.write_text(new_text, encoding="utf-8")
            os.replace(tmp, scp)


def _keep_old(old: Path, new: Path, backup: bool) -> Path | None:
    """Move the previous output ``old`` to ``new/.backup/N`` (its own backups first), or delete it (its own
    backups, which hold what earlier runs kept, are moved to ``new/.backup`` first either way)."""
    kept = None
    old_backups = old / BACKUP_DIR
    if old_backups.is_dir():
        numbered = sorted((q for q in old_backups.iterdir() if q.name.isdigit()), key=lambda q: int(q.name))
        if numbered:
            (new / BACKUP_DIR).mkdir(exist_ok=True)
        for p in numbered:
            os.replace(p, next_backup(new))
        shutil.rmtree(old_backups, ignore_errors=True)
    if backup and _holds_files(old):
        kept = next_backup(new)
        kept.parent.mkdir(exist_ok=True)
        os.replace(old, kept)
        _repoint_scps(kept, new)
    else:
        shutil.rmtree(old, ignore_errors=True)
    return kept


@contextlib.contextmanager
def replace_dir(out: PathLike, *, backup: bool = True, owner: str | None = None) -> Iterator[Path]:
    """Write a directory as a whole: yield a fresh temporary dir, swap it in for ``out`` on success.

    Inside the ``with`` block write every output file into the yielded directory. If the block
    raises (or the process is killed), ``out`` keeps its previous complete content (or stays
    absent) and the temporary dir is removed (after a kill, by the next run into ``out``). On
    success the yielded dir becomes ``out``; the previous ``out``, if it held files, is kept as
    ``out/.backup/N/`` (its own backups renumbered after it; its ``*.scp`` files, which named the
    files beside them under ``out``, repointed there), unless ``backup`` is false and it is
    an earlier output of ``owner`` (it carries ``owner``'s :data:`OWNER_FILE`): then it is deleted
    (its own backups still move into ``out/.backup``). A directory that no run of ``owner`` wrote
    (a user's folder named by mistake, an output of an older version) is therefore never deleted.
    With ``backup=False`` and no ``owner`` the previous output is deleted whatever it holds: only for
    a path the caller chooses itself, never one a user names (a recipe's tracked ``results/<name>``,
    an evaluation's ``wav/episode_NN`` inside its own run dir). Call :func:`check_output_dir` first.

    Args:
        out: the output directory.
        backup: keep the previous output (set ``False`` for caches whose content is re-derivable).
        owner: the tool's name (``"speechkit-vocode"``), written to ``OWNER_FILE`` in the new
            output; with ``backup=False`` every tool writing to a path a user names passes one.

    Yields:
        The temporary directory (``.OUT.tmp-PID-XXXX`` next to ``out``).

    Raises:
        WriteError: the parent of ``out`` cannot be created or written, or ``out`` is a file.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise WriteError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(out))
    ensure_writable_dir(out.parent if str(out.parent) else ".")
    _remove_stale_temps(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        if owner:
            (tmp / OWNER_FILE).write_text(f"{owner}\n", encoding="utf-8")
        yield tmp
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        named = _named_outside(e, tmp, out)
        if named is e:
            raise
        raise named from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.is_dir():
        keep = backup or (owner is not None and not _owned_by(out, owner))
        old = _swap_in(tmp, out)
        if not backup and keep and _holds_files(old):
            log.warning("%s holds files that no earlier %s run wrote: kept in %s/%s/ instead of deleted",
                        out, owner, out, BACKUP_DIR)
        kept = _keep_old(old, out, keep)
        if old.parent.name.startswith(f".{out.name}.old-"):
            shutil.rmtree(old.parent, ignore_errors=True)
        if kept is not None:
            log.info("replaced %s (the previous content is in %s)", out, kept)
    else:
        try:
            os.replace(tmp, out)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise WriteError(e.errno or 0, e.strerror or str(e), str(out)) from None


def _named_outside(e: OSError, tmp: Path, out: Path) -> OSError:
    """``e`` naming the file it names under the temporary dir ``tmp`` by where it was to be, under ``out``
    (``cannot write OUT/wav/a.wav``, not ``.OUT.tmp-123-x/wav/a.wav``); an error that names no file but says
    the bytes could not be stored (:data:`~speechkit.utils.fileio.WRITE_ERRNOS`: a full disk, raised by
    ``write()``/``close()``) names ``out`` (``cannot write OUT: No space left on device``); else ``e`` itself."""
    if e.filename is None and e.filename2 is None and e.errno in WRITE_ERRNOS:
        return WriteError(e.errno, e.strerror or os.strerror(e.errno), str(out))
    def moved(name):
        if not isinstance(name, str):
            return name
        for prefix in {str(tmp), os.path.abspath(tmp)}:
            if name == prefix or name.startswith(prefix + os.sep):
                return str(out) + name[len(prefix):]
        return name

    if e.strerror is None or (moved(e.filename) == e.filename and moved(e.filename2) == e.filename2):
        return e
    if isinstance(e, WriteError):
        return WriteError(e.errno or 0, e.strerror, moved(e.filename))
    return type(e)(e.errno, e.strerror, moved(e.filename), None, moved(e.filename2))


def _swap_in(tmp: Path, out: Path) -> Path:
    """Put the complete output ``tmp`` in place of the existing directory ``out``; return where the previous
    output now is. On failure (``out`` or its parent not writable, immutable) nothing is left behind: ``tmp``
    is removed, ``out`` keeps its previous content, and the error names ``out``.

    Raises:
        WriteError: ``cannot write OUT: Operation not permitted`` and the like.
    """
    parked = None
    try:
        if exchange_paths(tmp, out):
            return tmp  # the exchange left the previous output at the temporary name
        parked = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
        old = parked / "x"
        os.replace(out, old)
        try:
            os.replace(tmp, out)
        except OSError:
            os.replace(old, out)  # the previous output back where it was
            raise
        return old
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if parked is not None:
            shutil.rmtree(parked, ignore_errors=True)
        raise WriteError(e.errno or 0, e.strerror or str(e), str(out)) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
