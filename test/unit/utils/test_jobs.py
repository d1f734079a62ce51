"""speechkit.utils.jobs: the local process pool behind --nj of compute-feats and asr-decode."""

import sys

import pytest

from speechkit.utils.jobs import describe_failures, run_local_jobs


def test_runs_every_job_logs_and_reports_failures(tmp_path):
    code = "import os, sys; j = int(sys.argv[1]); print('job', j, os.environ['OMP_NUM_THREADS']); sys.exit(j % 2)"
    failed = run_local_jobs([1, 2, 3, 4], lambda j: [sys.executable, "-c", code, str(j)],
                            lambda j: tmp_path / "log" / f"x.{j}.log", max_jobs=2, num_threads=3)
    assert failed == [(1, tmp_path / "log" / "x.1.log"), (3, tmp_path / "log" / "x.3.log")]
    for j in range(1, 5):
        lines = (tmp_path / "log" / f"x.{j}.log").read_text().splitlines()
        assert lines[0].startswith("# ") and lines[1].startswith("# Started at")
        assert f"job {j} 3" in lines
        assert lines[-1].startswith(f"# Ended (code {j % 2}) at")
    msgs = describe_failures(failed)
    assert msgs[0] == f"job 1 (see {tmp_path / 'log' / 'x.1.log'}): job 1 3"


def test_last_output_line_names_the_error(tmp_path):
    failed = run_local_jobs([7], lambda j: [sys.executable, "-c", "raise SystemExit('bad input in a.scp line 3')"],
                            lambda j: tmp_path / f"{j}.log", max_jobs=1)
    assert describe_failures(failed) == [f"job 7 (see {tmp_path / '7.log'}): bad input in a.scp line 3"]


def test_max_jobs_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="max_jobs"):
        run_local_jobs([1], lambda j: ["true"], lambda j: tmp_path / "x.log", max_jobs=0)


def test_a_job_log_that_cannot_be_written_names_it(tmp_path):
    """Issue 38 case 18: compute-feats with LOG_DIR on a full disk said 'error: No space left on device' (the
    flush of the job's log names no file). /dev/full: every write fails with ENOSPC."""
    import os
    import sys

    import pytest

    from speechkit.utils.fileio import WriteError
    from speechkit.utils.jobs import run_local_jobs

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(WriteError) as e:
        run_local_jobs([1], lambda j: [sys.executable, "-c", "pass"], lambda j: "/dev/full", max_jobs=1)
    assert str(e.value) == "cannot write /dev/full: No space left on device"
