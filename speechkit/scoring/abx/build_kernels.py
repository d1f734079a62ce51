"""Build (or check) ABX's C kernels (:mod:`speechkit.scoring.abx.kernels_c`) next to their source::

    python -m speechkit.scoring.abx.build_kernels           # says whether the library is built and current
    python -m speechkit.scoring.abx.build_kernels --build   # compiles it (tools/install.sh runs this)

Exit status 0 when the library is usable, 1 otherwise (the reason on stderr).
"""
from __future__ import annotations

import argparse
import sys

from speechkit.scoring.abx import kernels_c


def main(argv=None) -> int:
    """The command line above; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m speechkit.scoring.abx.build_kernels",
                                 description="Build (or check) the ABX C kernels next to their source.")
    ap.add_argument("--build", action="store_true", help="compile the library (else: say whether it is usable)")
    ap.add_argument("--cc", default=None, help="C compiler (default: $CC, cc, gcc or clang)")
    args = ap.parse_args(argv)
    if args.build:
        try:
            print(f"built {kernels_c.build(args.cc)}")
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    if not kernels_c.available():
        print(f"not usable: {kernels_c.why_not()}", file=sys.stderr)
        return 1
    print(f"usable: {kernels_c.LIBRARY} (source sha256 {kernels_c.source_hash()[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
