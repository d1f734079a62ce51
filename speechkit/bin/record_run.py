"""speechkit-record-run: append the environment, command line and config hashes of a recipe run to a
runs.jsonl file (speechkit.utils.provenance; read by the recipes' local/make_results.py).

  speechkit-record-run --out exp/runs.jsonl --cmdline "./run.sh --stage 3" [--configs conf ...]

Called by utils/recipe_common.sh's record_run at the start of every run.sh invocation. An --out that
is one of the config files read (or a *.yaml below a --configs directory) is refused before anything
is written; a runs.jsonl whose last line was cut short gets the new record on a line of its own.
"""
from __future__ import annotations

import sys

from speechkit.utils.cli import make_parser, run_main
from speechkit.utils.provenance import record_run

PROG = "speechkit-record-run"


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("--out", required=True, metavar="FILE", help="the runs.jsonl file to append to")
    parser.add_argument("--cmdline", required=True, help="the command line, as it was typed")
    parser.add_argument("--configs", nargs="*", default=[], metavar="PATH",
                        help="config files or directories (every *.yaml below) to hash")
    args = parser.parse_args(argv)

    def body() -> int:
        record_run(args.out, args.cmdline, args.configs)
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
