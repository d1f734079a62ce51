"""What every recipe's ``local/make_results.py`` does, written once (ESPnet's RESULTS.md convention).

A recipe's results script has two modes. *Collect* copies the small score files of one run from ``exp/``
into a tracked run folder ``results/<run>/`` (:mod:`.collect`: the output rule, hand-written notes kept,
the run records of ``run.sh`` copied); *render* writes ``RESULTS.md`` from those folders alone
(:mod:`.page`: run order, score files read, the provenance header of each run, the page written whole).
Between them: one training-summary reader (:mod:`.training`), one set of number formats (:mod:`.formatting`)
and one paired-comparison API (:mod:`.compare`: the paired bootstrap over utterances and the t interval
over runs). The recipe keeps only its own tables.

The output rule itself (what a collect may replace, what a page may not overwrite) is
:mod:`speechkit.utils.results_io`'s; :func:`check_page` and :func:`check_run_name` are re-exported here.
"""
from speechkit.results.collect import RUNS_FILE, copy_file, copy_files, run_folder, write_json
from speechkit.results.compare import NotComparable, PairedComparison, compare, t_interval
from speechkit.results.formatting import MISSING, duration, number, percent, signed, signed_interval
from speechkit.results.page import provenance, read_json_if, run_dirs, write_page
from speechkit.results.training import read_wallclock, summarize
from speechkit.utils.results_io import check_page, check_run_name

__all__ = ["RUNS_FILE", "copy_file", "copy_files", "run_folder", "write_json", "NotComparable", "PairedComparison",
           "compare", "t_interval", "MISSING", "duration", "number", "percent", "signed", "signed_interval",
           "provenance", "read_json_if", "run_dirs", "write_page", "read_wallclock", "summarize", "check_page",
           "check_run_name"]
