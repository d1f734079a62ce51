#!/usr/bin/env python3
"""Run several speechkit-* command lines in this one process, in order (one interpreter and torch start
instead of one per command; each command's main() gets the same arguments, so it computes and writes
what its own process would).

Usage:
  printf '%q ' speechkit-score-wer REF HYP --json wer.json; printf '> %q\\n' wer.txt ... | utils/run_clis.py [--last-line]

stdin: one command line per line, shell-quoted (bash's printf %q), optionally ending in '> FILE': that
command's stdout goes to FILE (created or truncated first, as the shell's redirection). Without it the
command's stdout is printed; with --last-line only its last line (as `CMD | tail -n 1`). The first
command that fails (exit status not 0) ends the run with its status; its error is on stderr as usual.
"""
from __future__ import annotations

import contextlib
import io
import shlex
import sys
from importlib.metadata import entry_points


def _main_of(prog: str):
    found = list(entry_points(group="console_scripts", name=prog))
    if not prog.startswith("speechkit-") or not found:
        raise SystemExit(f"{sys.argv[0]}: not a speechkit-* command: {prog}")
    return found[0].load()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--last-line"]):
        print(__doc__, file=sys.stderr)
        return 2
    last_line = argv == ["--last-line"]
    for line in sys.stdin:
        words = shlex.split(line)
        if not words:
            continue
        out_file = None
        if len(words) >= 3 and words[-2] == ">":
            words, out_file = words[:-2], words[-1]
        cli = _main_of(words[0])
        if out_file is not None:
            with open(out_file, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
                rc = cli(words[1:])
        else:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = cli(words[1:])
            text = buf.getvalue()
            if last_line:
                text = "".join(text.splitlines(keepends=True)[-1:])
            sys.stdout.write(text)
            sys.stdout.flush()
        if rc:
            return int(rc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
