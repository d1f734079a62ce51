"""Where a result came from: the environment, the command line and the config files of a recipe run.

ESPnet's RESULTS.md convention: every results page starts with the environment the numbers were
measured in (date, git commit, Python, torch, CPU/GPU, threads), the exact ``./run.sh`` command
lines and the hashes of the config files. A recipe records one JSON line per ``run.sh`` invocation
(:func:`record_run`, called through ``speechkit-record-run`` by ``utils/recipe_common.sh``'s
``record_run``), and its ``local/make_results.py`` copies those records next to its score files and
renders them (:func:`markdown_header`).

A record (one line of ``runs.jsonl``)::

    {"date": "2026-11-26T16:20:03Z", "cmdline": "./run.sh --stage 3", "cwd": "egs/indic_multilingual",
     "git_commit": "eef4fc0...", "git_dirty": false, "python": "3.11.7", "torch": "2.13.0+cpu",
     "platform": "Linux-...", "cpu": "AMD EPYC ...", "cpu_count": 2, "gpu": null,
     "threads": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                 "SPEECHKIT_THREADS": "num_threads=auto cores=2 features=1x2 training=1x2 decoding=1x2"},
     "configs": {"conf/train_mini.yaml": "3f2a..."}}

``SPEECHKIT_THREADS`` is what a recipe resolved for its stages (``utils/recipe_common.sh``'s ``threads``:
``WHAT=N`` for one job of N threads, ``WHAT=NxJ`` for J jobs at once of N threads each).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import platform
import subprocess
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from speechkit.utils.errors import naming_parameters
from speechkit.utils.fileio import ensure_writable_dir, naming_write_errors
from speechkit.utils.jsonio import read_jsonl
from speechkit.utils.outputs import OutputOverlapError, check_output_files

# torch is imported where used: optional, and heavy where only its version is recorded.

logger = logging.getLogger(__name__)

#: Environment variables that set thread counts (recorded as they were); SPEECHKIT_THREADS: the threads a
#: recipe's stages were given (utils/recipe_common.sh's record_run).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "SPEECHKIT_THREADS")


def repo_root() -> Path:
    """The source tree this ``speechkit`` package was imported from (the git work tree, if any)."""
    return Path(__file__).resolve().parents[2]


def git_state(root: str | os.PathLike | None = None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git work tree at ``root`` (default :func:`repo_root`).

    ``dirty`` is true when a tracked file differs from the commit (untracked files do not count).
    ``(None, None)`` without git or outside a work tree.
    """
    root = str(root or repo_root())
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=20)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return commit.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpu_name() -> str | None:
    """The first CUDA device's name when torch sees one, else None."""
    try:
        import torch
        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} (x{torch.cuda.device_count()})"
    except Exception:  # a broken CUDA install must not stop a results page
        return None
    return None


def environment() -> dict:
    """The environment a run measures in: date (UTC), git commit and dirty flag, Python, torch,
    platform, CPU model and logical cores, GPU, thread variables (see the module docstring)."""
    commit, dirty = git_state()
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": commit, "git_dirty": dirty,
        "python": platform.python_version(), "torch": torch_version, "platform": platform.platform(),
        "cpu": cpu_model(), "cpu_count": os.cpu_count(), "gpu": gpu_name(),
        "threads": {k: os.environ[k] for k in THREAD_VARS if k in os.environ},
    }


def file_sha256(path: str | os.PathLike, length: int = 12) -> str:
    """The first ``length`` hex digits of the SHA-256 of a file's bytes.

    Raises:
        FileNotFoundError: no such file.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:length]


def _config_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The files :func:`config_hashes` reads for ``paths`` (a directory: every ``*.yaml`` below)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.rglob("*.yaml")))
        elif p.exists():
            files.append(p)
        else:
            raise FileNotFoundError(2, "no such file or directory", str(p))
    return files


def _check_out(out: Path, configs: Sequence[str | os.PathLike], files: Sequence[Path]) -> None:
    """Refuse an ``out`` that is one of the config files read (``files``, :func:`_config_files` of
    ``configs``), or a ``*.yaml`` file below a config directory (which the next run would hash as a
    config), before anything is written."""
    configs = [Path(c) for c in configs]
    check_output_files(outputs={"`out`": out}, inputs=[(f"the `configs` file {f}", f) for f in files])
    if out.suffix == ".yaml":
        real = out.resolve()
        for c in configs:
            if c.is_dir() and real.is_relative_to(c.resolve()):
                raise naming_parameters(OutputOverlapError(
                    f"`out` {out} is a *.yaml file below the `configs` directory {c}, whose *.yaml files are read as "
                    "configs: choose another file"))


def config_hashes(paths: Iterable[str | os.PathLike], base: str | os.PathLike | None = None) -> dict[str, str]:
    """``{path: sha256 prefix}`` of the YAML files among ``paths`` (directories: every ``*.yaml`` below),
    paths written relative to ``base`` when under it, sorted.

    Raises:
        FileNotFoundError: a path that does not exist.
    """
    out = {}
    for f in _config_files(paths):
        name = os.path.relpath(f, base) if base is not None else str(f)
        out[name] = file_sha256(f)
    return dict(sorted(out.items()))


def record_run(out: str | os.PathLike, cmdline: str, configs: Sequence[str | os.PathLike] = (),
               cwd: str | os.PathLike | None = None) -> dict:
    """Append one record (the environment, ``cmdline``, the working directory relative to the
    source tree, the hashes of ``configs``) to the JSON-lines file ``out`` and return it.

    When ``out`` does not end with a newline (a record cut short, e.g. by a full disk or a killed
    run), the new record starts on a new line, so that it is not glued to the broken one, and a
    warning names the file and the truncated line.

    Raises:
        OutputOverlapError (a ValueError): ``out`` is one of the config files (or a ``*.yaml`` below a
            config directory), checked before anything is written.
        WriteError: ``out``'s directory cannot be created or written; ``out`` is a directory.
        FileNotFoundError: a config path that does not exist.
    """
    out = Path(out)
    files = _config_files(configs)
    _check_out(out, configs, files)
    cwd = Path(cwd or os.getcwd()).resolve()
    try:
        where = str(cwd.relative_to(repo_root()))
    except ValueError:
        where = str(cwd)
    rec = {**environment(), "cmdline": cmdline, "cwd": where, "configs": config_hashes(files, base=cwd)}
    line = (json.dumps(rec, sort_keys=False, allow_nan=False) + "\n").encode("utf-8")
    ensure_writable_dir(out.parent)
    with naming_write_errors(out), open(out, "a+b") as f:  # one short line per run: appends do not interleave
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.seek(0)
                lineno = f.read().count(b"\n") + 1
                logger.warning("%s:%d: the last line is truncated (no final newline); appending the new "
                               "record on a line of its own", out, lineno)
                line = b"\n" + line
        f.write(line)  # append mode: at the end, whatever the position read from
    return rec


def read_runs(path: str | os.PathLike) -> list[dict]:
    """The records of a ``runs.jsonl`` file, in order ([] if it does not exist).

    A record cut short (a run killed while :func:`record_run` wrote it, a full disk: the last line
    without its newline, or such a line that a later record was appended after) is skipped with a
    warning naming the file and line (:func:`speechkit.utils.jsonio.read_jsonl`).

    Raises:
        DataError: a line that is not a JSON object and not cut short (names file and line).
    """
    return read_jsonl(path, expect=dict)


def _short(commit: str | None, dirty: bool | None) -> str:
    if not commit:
        return "unknown (no git)"
    return commit[:10] + (" + uncommitted changes" if dirty else "")


def markdown_header(runs: Sequence[Mapping], regenerate: str | None = None, level: int = 2) -> str:
    """The provenance part of a RESULTS.md: environment(s), commands, config hashes.

    Args:
        runs: records as :func:`record_run` writes them, oldest first.
        regenerate: the command that regenerates the page (printed first), if any.
        level: the Markdown heading level of its sections (2: ``## Environment``).

    Returns:
        Markdown (ends with a blank line). Records with the same environment (machine, versions,
        commit) are grouped; every command line is listed with its date and commit; config hashes
        are those of the last record that lists the file.
    """
    lines: list[str] = []
    if regenerate:
        lines += [f"Regenerate this page from the tracked score files: `{regenerate}`", ""]
    if not runs:
        return "\n".join(lines + ["No run records (`runs.jsonl`): environment and commands unknown.", ""])
    h = "#" * level
    lines += [f"{h} Environment", ""]
    lines += ["| date (UTC) | git commit | Python | torch | CPU (logical cores) | GPU | threads |",
              "|---|---|---|---|---|---|---|"]
    seen = set()
    for r in runs:
        key = (r.get("git_commit"), r.get("git_dirty"), r.get("python"), r.get("torch"), r.get("cpu"),
               r.get("cpu_count"), r.get("gpu"), json.dumps(r.get("threads", {}), sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        threads = ", ".join(f"{k}={v}" for k, v in (r.get("threads") or {}).items()) or "-"
        lines.append(f"| {r.get('date', '?')} | {_short(r.get('git_commit'), r.get('git_dirty'))} | "
                     f"{r.get('python', '?')} | {r.get('torch', '?')} | {r.get('cpu') or '?'} "
                     f"({r.get('cpu_count', '?')}) | {r.get('gpu') or 'none'} | {threads} |")
    lines += ["", f"{h} Commands", "", "In the order they ran (each in the recipe directory):", "", "```"]
    for r in runs:
        lines.append(f"# {r.get('date', '?')}  {_short(r.get('git_commit'), r.get('git_dirty'))}")
        lines.append(r.get("cmdline", "?"))
    lines += ["```", ""]
    configs: dict[str, str] = {}
    for r in runs:
        configs.update(r.get("configs") or {})
    if configs:
        lines += [f"{h} Configs (SHA-256, first 12 hex digits, as last run)", "", "| file | sha256 |", "|---|---|"]
        lines += [f"| `{k}` | `{v}` |" for k, v in sorted(configs.items())]
        lines.append("")
    return "\n".join(lines) + "\n"
