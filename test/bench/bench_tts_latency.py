#!/usr/bin/env python3
"""Benchmark: CPU inference latency of SALAD vs MUSA-RNN, small and big (Pascual et al. 2018, Table 3).

  python test/bench/bench_tts_latency.py [--out-dir DIR] [any option of egs/tcstar_salad/local/measure_latency.py]

A thin wrapper around the recipe's measure_latency.py (one CPU thread, utterances of 1 to 35 s,
RANSAC line per model): prints Table 3 next to the paper's and writes latency.{json,md,png} to
--out-dir (default: a temporary directory). Not collected by pytest; takes about 2-4 minutes at the
defaults (--max-seconds 35 --repeats 2); --max-seconds 5 --repeats 1 takes seconds.
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "egs" / "tcstar_salad" / "local" / "measure_latency.py"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    spec = importlib.util.spec_from_file_location("measure_latency", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not any(a.split("=")[0] in ("--out-dir", "--out_dir") for a in argv):
        argv += ["--out-dir", tempfile.mkdtemp(prefix="bench_tts_latency.")]
    return mod.main(argv)


if __name__ == "__main__":
    sys.exit(main())
