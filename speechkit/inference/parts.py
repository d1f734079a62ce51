"""A model applied to a data dir in parts: split, fingerprint, skip what is current, run, merge.

Every job that applies a trained model to the utterances of a data dir (decoding,
:mod:`~speechkit.inference.speech2text_dir`; unit extraction, :mod:`~speechkit.inference.speech2units`;
speaker embeddings, :mod:`~speechkit.inference.speaker_embeddings`; vocoding the synthesized features,
:mod:`~speechkit.inference.text2speech`) goes through the same steps, written here once:

1. **Split** (:func:`split_parts`): the utterance ids, C-sorted, dealt round-robin into ``nj`` parts,
   so that every part gets utterances of similar lengths (Kaldi's ``split_data.sh --per-utt`` deals
   contiguous blocks instead; the utterances a part gets do not change any result).
2. **Fingerprint** (:func:`file_states`, :func:`content_digests`): what a part's result depends on,
   by content: the size and modification time of the files it reads (an ark rewritten in place), the
   SHA-256 of small inputs (CMVN stats, a units dir).
3. **Skip what is current** (:class:`PartStore`): a part's records (``OUT_DIR/parts/results.J.jsonl``,
   one JSON object per utterance) and its summary (``OUT_DIR/parts/done.J.json``: the fingerprint and
   the digests of the inputs it read) are written atomically once it is complete; a part is current
   while both exist, the fingerprint is the same and every input digest still matches.
4. **Run** (:func:`run_parts`): each part's work in spawned worker processes (at most ``workers`` at
   once), or here, one part after the other, with one worker. The work is a library function; no
   command line is launched. Every part runs to its end; the failed ones are then named together.
5. **Merge**: the caller reads the parts back in job order (:meth:`PartStore.records`) and writes its
   output dir, as a whole where it writes a directory from scratch
   (:func:`speechkit.utils.outputs.replace_dir`).

Run under ``utils/run.pl`` / ``slurm.pl``, a CLI runs one part per job (``--job J``) and a last call
merges; the part files make both ways meet.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from speechkit.utils.errors import parameter_template, spell_parameters
from speechkit.utils.fileio import DataError, atomic_write, ensure_writable_dir, naming_write_errors
from speechkit.utils.jobs import map_jobs

# torch is imported where used: only a worker process told its thread count needs it.

__all__ = ["split_parts", "file_states", "content_digests", "digests_unchanged", "dumps", "PartStore",
           "PartFailure", "PartsFailed", "run_parts", "LOG_FORMAT"]

#: The format of a part's log lines (the CLIs' ``--job J`` logs use the same).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def split_parts(utts: Sequence[str], nj: int) -> list[list[str]]:
    """The C-sorted ``utts`` dealt round-robin into ``nj`` parts (part ``J`` holds the ``J``-th, the
    ``J + nj``-th, ... utterance; a part may be empty when ``nj > len(utts)``).

    Raises:
        ValueError: ``nj < 1``.
    """
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    ordered = sorted(utts, key=lambda u: u.encode("utf-8"))
    return [ordered[j::nj] for j in range(nj)]


def file_states(paths: Iterable[str | os.PathLike]) -> str:
    """One line per path, ``PATH SIZE MTIME_NS`` (or ``PATH missing``): a fingerprint of files too big
    to hash that changes when one is rewritten (the arks a feats.scp reads)."""
    lines = []
    for p in paths:
        try:
            st = os.stat(p)
            lines.append(f"{p} {st.st_size} {st.st_mtime_ns}\n")
        except OSError:
            lines.append(f"{p} missing\n")
    return "".join(lines)


def content_digests(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """``{resolved path: SHA-256 of its content}`` of small input files (read whole).

    Raises:
        OSError: a file that cannot be read.
    """
    return {str(Path(p).resolve()): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def digests_unchanged(digests: dict[str, str]) -> bool:
    """True while every file of ``digests`` (:func:`content_digests`) still holds that content."""
    for path, digest in digests.items():
        try:
            if hashlib.sha256(Path(path).read_bytes()).hexdigest() != digest:
                return False
        except OSError:
            return False
    return True


def dumps(obj: Any) -> str:
    """One JSON line without NaN/Infinity (not JSON; strict readers such as jq refuse them).

    Raises:
        ValueError: a NaN or infinite number in ``obj``.
    """
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


class PartStore:
    """The parts of an output dir: ``OUT_DIR/parts/results.J.jsonl`` (the part's records, one JSON
    object per line) and ``OUT_DIR/parts/done.J.json`` (its summary: ``fingerprint``, ``inputs`` =
    :func:`content_digests` of what it read, and what the job adds), ``J`` = 1 .. nj.

    Args:
        out_dir: the output dir the parts are merged into.
    """

    def __init__(self, out_dir: str | os.PathLike):
        self.out_dir = Path(out_dir)
        self.dir = self.out_dir / "parts"

    def paths(self, job: int) -> tuple[Path, Path]:
        """``(results.J.jsonl, done.J.json)`` of part ``job``."""
        return self.dir / f"results.{job}.jsonl", self.dir / f"done.{job}.json"

    def has_parts(self) -> bool:
        """True when some part was completed here (a ``done.J.json`` exists)."""
        return any(self.dir.glob("done.*.json"))

    def current(self, job: int, fingerprint: str) -> bool:
        """True if part ``job`` is complete, was made with ``fingerprint``, and the inputs it read
        (``inputs`` of its ``done.J.json``) still hold the same content."""
        res, done = self.paths(job)
        if not (res.is_file() and done.is_file()):
            return False
        try:
            rec = json.loads(done.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if rec.get("fingerprint") != fingerprint or "inputs" not in rec:
            return False
        return digests_unchanged(rec["inputs"])

    def write(self, job: int, records: Iterable[dict], summary: dict) -> None:
        """Write part ``job``: its records, then its summary (which makes it complete).

        Raises:
            ValueError: a NaN or infinite number in a record or the summary (:func:`dumps`).
        """
        res, done = self.paths(job)
        res.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(res) as f:
            for r in records:
                f.write(dumps(r) + "\n")
        with atomic_write(done) as f:
            f.write(dumps(summary) + "\n")

    def records(self, job: int) -> list[dict]:
        """The records of part ``job`` (blank lines skipped).

        Raises:
            OSError: no such part; ValueError: a line that is not JSON.
        """
        with open(self.paths(job)[0], encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def summary(self, job: int) -> dict:
        """The ``done.J.json`` of part ``job``.

        Raises:
            OSError: no such part; ValueError: not JSON.
        """
        with open(self.paths(job)[1], encoding="utf-8") as f:
            return json.load(f)


@dataclass
class PartFailure:
    """A part whose work raised: its number, its log file (or None) and the error's message (with the
    parameters it names as references, :mod:`speechkit.utils.errors`)."""

    job: int
    log: Path | None
    message: str

    def line(self) -> str:
        """``job J (see LOG): MESSAGE`` (``job J: MESSAGE`` without a log)."""
        return f"job {self.job}{f' (see {self.log})' if self.log is not None else ''}: {self.message}"


class PartsFailed(DataError):
    """Some parts of :func:`run_parts` failed (with log files); ``failures`` names each (the parameters
    their errors name are kept for a CLI to spell: :func:`~speechkit.utils.errors.parameter_template`)."""

    def __init__(self, failures: list[PartFailure]):
        self.failures = failures
        self.parameter_template = "\n".join(f.line() for f in failures)
        super().__init__(spell_parameters(self.parameter_template))


@contextlib.contextmanager
def _logging_to(log_file: Path, logger: logging.Logger | None, level: int, whole_process: bool):
    """Log to ``log_file`` (truncated) for the block: ``logger``'s records (here), or in a worker
    process every record, stdout and stderr, between ``# Started at`` / ``# Ended (code N) at`` lines
    (as ``utils/run.pl`` frames a job's log)."""
    with naming_write_errors(log_file):
        ensure_writable_dir(log_file.parent)
        fh = open(log_file, "w", encoding="utf-8")
    handler = logging.StreamHandler(fh)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    target = logging.getLogger() if whole_process or logger is None else logger
    old_level = target.level
    target.addHandler(handler)
    code = 1
    try:
        if whole_process:
            target.setLevel(level)
            fh.write(f"# Started at {time.ctime()}\n#\n")
            fh.flush()
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                yield fh
        else:
            yield fh
        code = 0
    finally:
        target.removeHandler(handler)
        target.setLevel(old_level)
        if whole_process:
            fh.write(f"# Ended (code {code}) at {time.ctime()}\n")
        fh.close()


def _run_part(work: Callable, args: tuple, kwargs: dict, log_file: Path | None, level: int, threads: int | None,
              in_worker: bool, logger: logging.Logger | None) -> tuple[bool, Any]:
    """One part: ``(True, work(*args, **kwargs))``. Here its error propagates at once; in a worker
    it comes back as ``(False, error)`` (so that the pool runs the other parts to their end), and
    its line ends the part's log."""
    try:
        if in_worker and threads is not None:
            # a worker process of its own: its BLAS / OpenMP pools and torch's intra-op threads
            os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
            import torch

            torch.set_num_threads(threads)
        if log_file is None:
            return True, work(*args, **kwargs)
        with _logging_to(log_file, logger, level, whole_process=in_worker) as fh:
            try:
                return True, work(*args, **kwargs)
            except Exception as e:
                if in_worker:
                    fh.write(f"error: {e}\n")
                raise
    except Exception as e:
        if not in_worker:
            raise
        return False, e


def run_parts(work: Callable, jobs: Sequence[tuple[int, tuple, dict]], *, workers: int = 1,
              log_of: Callable[[int], str | os.PathLike] | None = None, logger: logging.Logger | None = None,
              threads: int | None = None) -> list:
    """Run ``work(*args, **kwargs)`` for every ``(job, args, kwargs)`` of ``jobs``.

    With ``workers > 1`` and several jobs, in ``min(workers, len(jobs))`` spawned worker processes
    (``work``, its arguments, results and errors must pickle; each worker is told ``threads`` BLAS /
    torch threads when given), else here, one after the other. With ``log_of``, part ``job`` logs to
    ``log_of(job)`` (truncated): here, ``logger``'s records; in a worker, every record, stdout and
    stderr, between ``# Started at`` / ``# Ended (code N) at`` lines (and the error's line when it
    fails).

    Returns:
        The results, in the order of ``jobs``.

    Raises:
        Here: the first failing part's error, at once. In workers, once every part has run:
        PartsFailed naming each failed part with its log and error (with ``log_of``), else the
        first failed part's own error (in job order).
    """
    level = logger.getEffectiveLevel() if logger is not None else logging.INFO
    logs = [Path(log_of(job)) if log_of is not None else None for job, _, _ in jobs]
    if not (workers > 1 and len(jobs) > 1):
        return [_run_part(work, a, k, log, level, threads, False, logger)[1] for (_, a, k), log in zip(jobs, logs)]
    calls = [(work, a, k, log, level, threads, True, None) for (_, a, k), log in zip(jobs, logs)]
    outcomes = map_jobs(_run_part, calls, workers)
    failed = [(job, log, out) for (job, _, _), log, (ok, out) in zip(jobs, logs, outcomes) if not ok]
    if failed and log_of is None:
        raise failed[0][2]
    if failed:
        raise PartsFailed([PartFailure(job, log, parameter_template(e) or str(e)) for job, log, e in failed])
    return [out for _, out in outcomes]
