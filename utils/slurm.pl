#!/usr/bin/env python3
"""Slurm job runner with Kaldi's slurm.pl calling convention (written in Python; stdlib only).

Usage:
  utils/slurm.pl [options] [JOB=1:N] LOGFILE COMMAND...

  utils/slurm.pl --mem 4G JOB=1:4 exp/log/feats.JOB.log speechkit-compute-feats --nj 4 --job JOB data/train ...
  utils/slurm.pl --gpu 1 --time 8:00:00 exp/train/train.log utils/train.sh --nproc 1 vqvae ...

Submits ONE Slurm array job (``sbatch --array=1-N --wait``) whose task J runs COMMAND with the job
variable (``JOB``, or any name as in ``TASK=2:5``) replaced by J, in the current directory, after
sourcing ./path.sh when there is one (Kaldi's rule: the job gets only PATH from the submitting
shell with the default ``--export=PATH``). Without ``JOB=...`` it submits a single job. The
command line is built as utils/run.pl builds it (an argument without whitespace is taken as it is,
so ``\\|`` becomes a pipe; one with whitespace is quoted), and each task's stdout+stderr goes to its
LOGFILE between the same header and footer as run.pl::

  # <command>
  # Started at <date>
  #
  ...
  # Accounting: time=<seconds> threads=<n>
  # Ended (code <exit status>) at <date>

The batch script and sbatch's own output (e.g. "CANCELLED ... DUE TO TIME LIMIT") go to
``<logdir>/q/<name>.{sh,log}`` (``.../log/q`` is shortened to ``.../q`` as in Kaldi).

Options (before or after JOB=...):
  --config FILE         sbatch options (Kaldi's conf format, below). Default: conf/slurm.conf in the
                        current directory if there is one, else the toolkit's conf/slurm.conf.
  --max-jobs-run N      at most N tasks of the array at once (--array=1-N%M); also -tc N
  --num-threads N       threads per job: recorded in the footer, and sbatch options from the
                        config's num_threads lines (default config: --cpus-per-task N)
  --mem M, --gpu N, --time T, --<name> V
                        sbatch options as the config's lines for <name> say (default config: mem ->
                        --mem-per-cpu, gpu -> --gres=gpu:N, time -> --time, partition -> -p,
                        account -> -A); an option the config does not describe is an error.
  -V                    passed to sbatch (export the whole environment)
  -pe smp N             accepted for queue.pl compatibility: --num-threads N
  -X VALUE              any other single-dash option is passed to sbatch as it is (e.g. -p gpu)

Config file (Kaldi's format; '#' starts a comment):
  command sbatch --export=PATH         the submit command and its fixed options
  option mem=* --mem-per-cpu $0        --mem V adds these options with $0 replaced by V
  option mem=0                         --mem 0 adds nothing (an exact value wins over '*')
  default gpu=0                        as if --gpu 0 were given when it is not

Exit status: 0 if every task succeeded; otherwise 1, naming the failed job numbers with their
exit codes and logs (a task killed by Slurm -- time limit, memory, scancel -- has no exit code:
see the q/ log). Interrupting slurm.pl (Ctrl-C, SIGTERM) cancels the Slurm job (scancel).
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

PROG = "slurm.pl"
USAGE = f"usage: {PROG} [--config FILE] [--mem M] [--gpu N] [--num-threads N] [--max-jobs-run N] [JOB=1:N] LOGFILE COMMAND..."
HERE = Path(os.path.realpath(__file__)).parent
TOOLKIT_CONFIG = HERE.parent / "conf" / "slurm.conf"

# Used when neither --config, ./conf/slurm.conf nor the toolkit's conf/slurm.conf exists.
DEFAULT_CONFIG = """\
command sbatch --export=PATH --ntasks-per-node=1
option time=* --time $0
option mem=* --mem-per-cpu $0
option mem=0
option num_threads=* --cpus-per-task $0
option num_threads=1 --cpus-per-task 1
default gpu=0
option gpu=0
option gpu=* --gres=gpu:$0
option partition=* -p $0
option account=* -A $0
"""


@functools.lru_cache(maxsize=None)
def _load_run_pl():
    """utils/run.pl as a module: the same command-line joining and date format as the local backend."""
    loader = importlib.machinery.SourceFileLoader("speechkit_run_pl", str(HERE / "run.pl"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def die(msg: str) -> "None":
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(1)


class SlurmConfig:
    """A parsed Kaldi-style slurm.conf.

    Attributes:
        command: the submit command, split into words (``["sbatch", "--export=PATH", ...]``).
        patterns: ``{name: options-with-$0}`` from ``option name=* ...`` lines.
        exact: ``{(name, value): options}`` from ``option name=value ...`` lines.
        defaults: ``{name: value}`` from ``default name=value`` lines.
        source: the file name (or "default config") for error messages.
    """

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.command: list[str] = []
        self.patterns: dict[str, str] = {}
        self.exact: dict[tuple[str, str], str] = {}
        self.defaults: dict[str, str] = {}
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = re.sub(r"\s*#.*", "", raw).strip()
            if not line:
                continue
            where = f"{source}:{lineno}"
            m = re.fullmatch(r"command\s+(.+)", line)
            if m:
                self.command = self._split(m.group(1), where)
                continue
            m = re.fullmatch(r"option\s+([^=\s]+)=\*(?:\s+(.*))?", line)
            if m:
                args = m.group(2) or ""
                if "$0" not in args:
                    print(f"{PROG}: warning: {where}: '{raw.strip()}' has no $0 to substitute", file=sys.stderr)
                self.patterns[m.group(1)] = args
                continue
            m = re.fullmatch(r"option\s+([^=\s]+)=(\S+)(?:\s+(.*))?", line)
            if m:
                self.exact[(m.group(1), m.group(2))] = m.group(3) or ""
                continue
            m = re.fullmatch(r"default\s+([^=\s]+)=(\S+)", line)
            if m:
                self.defaults[m.group(1)] = m.group(2)
                continue
            die(f"{where}: cannot parse '{raw.strip()}' (expected 'command ...', 'option NAME=* ...$0...', "
                f"'option NAME=VALUE ...' or 'default NAME=VALUE')")
        if not self.command:
            die(f"{source}: no 'command ...' line (e.g. 'command sbatch --export=PATH')")

    @staticmethod
    def _split(text: str, where: str) -> list[str]:
        try:
            return shlex.split(text)
        except ValueError as e:
            die(f"{where}: {e}")
            return []

    def options_for(self, name: str, value: str) -> list[str]:
        """The sbatch options for ``--name value``: an exact ``option name=value`` line, else ``name=*``."""
        where = f"{self.source} (option {name})"
        if (name, value) in self.exact:
            return self._split(self.exact[(name, value)], where)
        if name in self.patterns:
            return self._split(self.patterns[name].replace("$0", value), where)
        die(f"option --{name.replace('_', '-')} {value} is not described in {self.source} "
            f"(add a line 'option {name}=* <sbatch options with $0>')")
        return []


def find_config(explicit: str | None) -> SlurmConfig:
    """The config of --config, else ./conf/slurm.conf, else the toolkit's conf/slurm.conf, else the default."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            die(f"--config {explicit}: no such file")
    else:
        path = next((p for p in (Path("conf/slurm.conf"), TOOLKIT_CONFIG) if p.is_file()), None)
        if path is None:
            return SlurmConfig(DEFAULT_CONFIG, "the default config")
    return SlurmConfig(path.read_text(encoding="utf-8"), str(path))


def parse_args(argv: list[str]):
    """Kaldi's slurm.pl option rules: ``--name value`` -> config option ``name`` ('-' -> '_'),
    ``-V`` alone, ``-pe smp N``, other ``-x value`` straight to sbatch; up to three option blocks
    interleaved with ``JOB=a:b``."""
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        sys.exit(0)
    cli: dict[str, str] = {}
    passthrough: list[str] = []
    job = None
    i = 0
    for _ in range(3):
        while i < len(argv) - 1 and argv[i].startswith("-"):
            opt = argv[i]
            if opt in ("-h", "--help"):
                print(__doc__)
                sys.exit(0)
            if opt == "-V":
                passthrough.append(opt)
                i += 1
                continue
            val = argv[i + 1]
            if opt == "-pe":  # -pe smp N
                if i + 2 >= len(argv) or not argv[i + 2].isdigit():
                    die(f"option -pe needs two values, e.g. -pe smp 4")
                cli["num_threads"] = argv[i + 2]
                i += 3
                continue
            if opt == "-tc":
                cli["max_jobs_run"] = val
            elif opt.startswith("--"):
                cli[opt[2:].replace("-", "_")] = val
            else:
                passthrough += [opt, val]
            i += 2
        if i < len(argv):
            parsed = _load_run_pl().parse_job_range(argv[i], die, hint=" (a Slurm array limitation)")
            if parsed is not None:
                if job is not None:
                    die(f"job range given twice: {argv[i]}")
                job = parsed
                i += 1
    rest = argv[i:]
    if len(rest) < 2:
        die(USAGE)
    return cli, passthrough, job, rest[0], rest[1:]


def positive_int(name: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        die(f"invalid option --{name.replace('_', '-')} {value} (expected a positive integer)")
    return int(value)


def q_paths(logfile: str, jobname: str | None) -> tuple[Path, str]:
    """``(<logdir>/q, base)``: where the batch script and sbatch's log go (Kaldi's layout)."""
    logdir = os.path.dirname(logfile) or "."
    qdir = re.sub(r"/(log|LOG)/*q$", "/q", f"{logdir}/q")
    base = os.path.basename(logfile)
    if jobname:
        base = re.sub(r"\.?" + re.escape(jobname), "", base, count=1) or "job"
    base = re.sub(r"\.[A-Za-z]{1,5}$", "", base) or "job"
    return Path(qdir), base


def batch_script(command: str, logfile: str, job, threads: int, status_prefix: Path, submit: list[str]) -> str:
    """The bash script of every array task (the task number is ``$SLURM_ARRAY_TASK_ID``)."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# Written by utils/slurm.pl (pid {os.getpid()}) at {time.strftime('%Y-%m-%d %H:%M:%S')}; submitted with:",
        f"#   {shlex.join(submit)}",
        f"cd {q(os.getcwd())} || exit 1",
        "[ -f ./path.sh ] && . ./path.sh",
        f"cmd={q(command)}",
        f"log={q(logfile)}",
    ]
    if job is not None:
        name = job[0]
        lines += [
            "task=${SLURM_ARRAY_TASK_ID:?not run as a Slurm array task}",
            f"cmd=${{cmd//{name}/$task}}",
            f"log=${{log//{name}/$task}}",
            f"status={q(str(status_prefix))}.$task",
        ]
    else:
        lines.append(f"status={q(str(status_prefix))}")
    lines += [
        'mkdir -p "$(dirname "$log")" || exit 1',
        "stamp() { LC_ALL=C date '+%a %b %d %H:%M:%S %Z %Y'; }",
        "{ printf '# %s\\n' \"$cmd\"; echo \"# Started at $(stamp)\"; echo '#'; } > \"$log\" || exit 1",
        "trap 'signalled=1' TERM INT   # Slurm signals the whole job: let the command end, then write the footer",
        "t0=$(date +%s)",
        "bash -c \"$cmd\" < /dev/null >> \"$log\" 2>&1",
        "ret=$?",
        "t1=$(date +%s)",
        f"{{ echo \"# Accounting: time=$((t1 - t0)) threads={threads}\"; echo \"# Ended (code $ret) at $(stamp)\"; }} >> \"$log\"",
        "echo \"$ret\" > \"$status.tmp\" && mv -f \"$status.tmp\" \"$status\"",
        "[ \"$ret\" -eq 0 ]",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    run_pl = _load_run_pl()
    cli, passthrough, job, logfile, cmd_args = parse_args(argv)
    config = find_config(cli.pop("config", None))
    for name, value in config.defaults.items():
        cli.setdefault(name, value)

    threads = positive_int("num_threads", cli["num_threads"]) if "num_threads" in cli else 1
    max_jobs = positive_int("max_jobs_run", cli.pop("max_jobs_run")) if "max_jobs_run" in cli else 0
    sbatch_opts: list[str] = []
    for name in sorted(cli):
        sbatch_opts += config.options_for(name, cli[name])
    sbatch_opts += passthrough

    if job is None:
        jobs = [None]
    else:
        jobs = list(range(job[1], job[2] + 1))
        if len(jobs) > 1 and job[0] not in logfile:
            die(f"you are running {len(jobs)} jobs ({job[0]}={job[1]}:{job[2]}) but the log file "
                f"{logfile} does not contain {job[0]}: the jobs would overwrite each other's log")
    command = run_pl.join_command(cmd_args)

    qdir, base = q_paths(logfile, job[0] if job else None)
    qdir.mkdir(parents=True, exist_ok=True)
    qdir = qdir.resolve()
    script = qdir / f"{base}.sh"
    qlog = qdir / f"{base}.log"
    status_prefix = qdir / f"done.{os.getpid()}"
    status_files = {j: Path(f"{status_prefix}.{j}") if j is not None else status_prefix for j in jobs}
    for f in status_files.values():
        f.unlink(missing_ok=True)

    submit = list(config.command) + sbatch_opts + [
        "--open-mode=append", "-o", str(qlog), "-e", str(qlog), "--parsable", "--wait"]
    if job is not None:
        submit.append(f"--array={job[1]}-{job[2]}" + (f"%{max_jobs}" if max_jobs else ""))
    submit.append(str(script))
    tmp = script.with_name(script.name + ".tmp")
    tmp.write_text(batch_script(command, logfile, job, threads, status_prefix, submit), encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(script)

    with open(qlog, "a", encoding="utf-8") as f:
        f.write(f"# {shlex.join(submit)}\n# Submitted at {run_pl.now()}\n")
    job_id = None
    interrupted = []

    def cancel(signum, frame) -> None:
        interrupted.append(signum)
        if job_id:
            subprocess.run(["scancel", job_id], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    signal.signal(signal.SIGINT, cancel)
    signal.signal(signal.SIGTERM, cancel)
    try:
        with open(qlog, "a", encoding="utf-8") as err:
            proc = subprocess.Popen(submit, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)
    except FileNotFoundError:
        die(f"{config.command[0]}: command not found (is Slurm installed? command from {config.source})")
    first = proc.stdout.readline().strip()
    if re.fullmatch(r"\d+(;\S+)?", first):
        job_id = first.split(";")[0]
        if interrupted:  # a signal that came before we knew the job id
            cancel(interrupted[0], None)
    rest = proc.stdout.read()
    rc = proc.wait()

    if job_id is None:
        tail = qlog.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
        die(f"submitting the job failed (sbatch exit code {rc}): " + " | ".join(
            line for line in [first, rest.strip(), *tail] if line and not line.startswith("#")))

    failed: list[tuple] = []
    for j, f in status_files.items():
        log = logfile if j is None else logfile.replace(job[0], str(j))
        try:
            code = int(f.read_text().strip())
        except (FileNotFoundError, ValueError):
            code = None
        if code != 0:
            failed.append((j, log, code))
        f.unlink(missing_ok=True)
    if interrupted:
        print(f"{PROG}: interrupted (signal {interrupted[0]}); cancelled Slurm job {job_id}", file=sys.stderr)
        return 128 + interrupted[0]
    if not failed:
        if rc != 0:
            print(f"{PROG}: warning: every task reported success but sbatch --wait exited with {rc}; see {qlog}",
                  file=sys.stderr)
        return 0

    def why(code) -> str:
        return f"exit code {code}" if code is not None else f"no exit status: killed by Slurm? see {qlog}"

    if job is None or len(jobs) == 1:
        j, log, code = failed[0]
        print(f"{PROG}: job failed ({why(code)}), log is in {log} (Slurm job {job_id})", file=sys.stderr)
    else:
        nums = ",".join(str(j) for j, _, _ in failed)
        print(f"{PROG}: {len(failed)} / {len(jobs)} jobs failed ({job[0]}={nums}) in Slurm job {job_id}, "
              f"logs are in {logfile.replace(job[0], '*')}:", file=sys.stderr)
        for j, log, code in failed:
            print(f"  {log} ({why(code)})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
