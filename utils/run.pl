#!/usr/bin/env python3
"""Local job runner with Kaldi's run.pl calling convention (written in Python; stdlib only).

Usage:
  utils/run.pl [options] [JOB=1:N] LOGFILE COMMAND...

  utils/run.pl JOB=1:4 exp/log/feats.JOB.log speechkit-compute-feats --nj 4 --job JOB data/train ...
  utils/run.pl exp/log/one.log echo hello \\| tr a-z A-Z

Every occurrence of the job variable (``JOB`` in ``JOB=1:N``; any name works, e.g. ``TASK=2:5``) in
LOGFILE and COMMAND is replaced by the job number. The arguments of COMMAND are joined into one
bash command line as Kaldi does: an argument without whitespace is taken as it is (so an escaped
``\\|`` becomes a pipe), one with whitespace is quoted. Each job runs ``bash -c`` with its stdout
and stderr appended to its log, between a header::

  # <command>
  # Started at <date>
  #

and a footer::

  # Accounting: time=<seconds> threads=<n>
  # Ended (code <exit status>) at <date>

Options (before or after JOB=...):
  --max-jobs-run N | -tc N   run at most N jobs at once (default: all of them)
  --num-threads N            threads per job, recorded in the footer (default: 1)
  --gpu N, --mem M, --time T, --config F, -l X, -pe A B, -V, ...
                             accepted for compatibility with queue.pl/slurm.pl and ignored

Exit status 0 if every job succeeded; otherwise 1, naming the failed jobs and their logs.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

PROG = "run.pl"
USAGE = f"usage: {PROG} [--max-jobs-run N] [JOB=1:N] LOGFILE COMMAND..."


def die(msg: str) -> "None":
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(1)


def join_command(args: list[str]) -> str:
    """Join arguments into a bash command line the way Kaldi's run.pl does."""
    out = []
    for a in args:
        if a and re.fullmatch(r"\S+", a):
            out.append(a)          # no whitespace: as it is (pipes, redirections, globs stay live)
        elif '"' in a:
            out.append(f"'{a}'")
        else:
            out.append(f'"{a}"')
    return " ".join(out)


def now() -> str:
    return time.strftime("%a %b %d %H:%M:%S %Z %Y")


def parse_job_range(arg: str, die=die, hint: str = ""):
    """``JOB=1:4`` -> ``("JOB", 1, 4)`` (``JOB=3`` -> ``("JOB", 3, 3)``); ``None`` if ``arg`` is no
    job range; ``die(message)`` for a malformed one (first job < 1, start > end)."""
    m = re.fullmatch(r"([A-Za-z_]\w*)=(\d+)(?::(\d+))?", arg)
    if m is None:
        if re.fullmatch(r".+=.*:.*", arg):
            die(f"invalid job range {arg} (expected e.g. JOB=1:4)")
        return None
    start = int(m.group(2))
    end = int(m.group(3)) if m.group(3) is not None else start
    if start < 1:
        die(f"invalid job range {arg}: the first job must be >= 1{hint}")
    if start > end:
        die(f"invalid job range {arg}")
    return m.group(1), start, end


def parse_args(argv: list[str]):
    max_jobs = 0
    threads = 1
    job = None  # (name, start, end)
    i = 0
    for _ in range(2):  # options may come before and after JOB=..., as in Kaldi
        while i < len(argv) - 1 and argv[i].startswith("-"):
            opt = argv[i]
            if opt in ("-h", "--help"):
                print(__doc__)
                sys.exit(0)
            if opt == "-V":
                i += 1
                continue
            val = argv[i + 1]
            if opt in ("--max-jobs-run", "-tc"):
                if not val.isdigit() or int(val) < 1:
                    die(f"invalid option {opt} {val} (expected a positive integer)")
                max_jobs = int(val)
            elif opt == "--num-threads":
                if not val.isdigit() or int(val) < 1:
                    die(f"invalid option {opt} {val} (expected a positive integer)")
                threads = int(val)
            elif opt == "-pe":
                i += 1  # -pe smp 4
            # every other option takes one value and is ignored (--gpu, --mem, --time, --config, -l ...)
            i += 2
        if i < len(argv):
            parsed = parse_job_range(argv[i], die)
            if parsed is not None:
                if job is not None:
                    die(f"job range given twice: {argv[i]}")
                job = parsed
                i += 1
    rest = argv[i:]
    if len(rest) < 2:
        die(USAGE)
    return max_jobs, threads, job, rest[0], rest[1:]


def main(argv: list[str]) -> int:
    max_jobs, threads, job, logfile, cmd_args = parse_args(argv)
    command = join_command(cmd_args)
    if job is None:
        name, jobs = None, [None]
    else:
        name, jobs = job[0], list(range(job[1], job[2] + 1))
        if len(jobs) > 1 and name not in logfile:
            die(f"you are running {len(jobs)} jobs ({name}={job[1]}:{job[2]}) but the log file "
                f"{logfile} does not contain {name}: the jobs would overwrite each other's log")
    if max_jobs <= 0:
        max_jobs = len(jobs)

    running: dict[int, tuple] = {}  # pid -> (job, Popen, log file object, start time)
    failed: list[tuple[int | None, str, int]] = []

    def subst(s: str, j) -> str:
        return s if j is None else s.replace(name, str(j))

    def start(j) -> None:
        log = subst(logfile, j)
        cmd = subst(command, j)
        d = os.path.dirname(log)
        if d:
            os.makedirs(d, exist_ok=True)
        f = open(log, "w", encoding="utf-8")
        f.write(f"# {cmd}\n# Started at {now()}\n#\n")
        f.flush()
        p = subprocess.Popen(["bash", "-c", cmd], stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
        running[p.pid] = (j, p, f, time.time(), log)

    def finish(pid: int, status: int) -> None:
        j, p, f, t0, log = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        text = f"code {code}" if code >= 0 else f"code 0; signal {-code}"
        f.write(f"# Accounting: time={int(round(time.time() - t0))} threads={threads}\n")
        f.write(f"# Ended ({text}) at {now()}\n")
        f.close()
        if code != 0:
            failed.append((j, log, code))

    def terminate(signum, frame) -> None:
        for _, p, *_ in running.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in list(running):
            _, st = os.waitpid(pid, 0)
            finish(pid, st)
        print(f"{PROG}: interrupted (signal {signum}); running jobs were killed", file=sys.stderr)
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, terminate)
    signal.signal(signal.SIGTERM, terminate)

    queue = list(jobs)
    while queue or running:
        while queue and len(running) < max_jobs:
            start(queue.pop(0))
        pid, status = os.wait()
        if pid in running:
            finish(pid, status)

    if failed:
        failed.sort(key=lambda x: (x[0] is None, x[0]))
        if job is None or len(jobs) == 1:
            j, log, code = failed[0]
            print(f"{PROG}: job failed with exit code {code}, log is in {log}", file=sys.stderr)
        else:
            nums = ",".join(str(j) for j, _, _ in failed)
            print(f"{PROG}: {len(failed)} / {len(jobs)} jobs failed ({name}={nums}), logs are in "
                  f"{logfile.replace(name, '*')}:", file=sys.stderr)
            for j, log, code in failed:
                print(f"  {log} (exit code {code})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
