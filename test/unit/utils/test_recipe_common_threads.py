"""The recipes' thread counts (issue 40): path.sh's SPEECHKIT_CORES, recipe_common.sh's check_num_threads,
threads, show_threads, with_threads and record_run's SPEECHKIT_THREADS, and make_feats.sh --num-threads.

Kaldi's habit: a stage that runs J jobs at once gives each cores / J threads (--num_threads auto), a single job
every core; --num_threads N gives every job N. The cores: an OMP_NUM_THREADS the user exported before path.sh,
else nproc (the CPUs this process may run on)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
UTILS = REPO / "utils"
PATH_SH = REPO / "egs" / "TEMPLATE" / "path.sh"

PREAMBLE = f"""set -euo pipefail
num_threads=auto
help_message="Usage: demo"
. {UTILS}/parse_options.sh
. {UTILS}/recipe_common.sh
"""


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without the thread variables, the venv's bin first, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "SPEECHKIT_CORES", "SPEECHKIT_THREADS")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env.update(extra)
    return env


def bash(script: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
         ) -> subprocess.CompletedProcess:
    """bash -c PREAMBLE+script with args as the options ($0 is 'demo')."""
    return subprocess.run(["bash", "-c", PREAMBLE + script, "demo", *args], capture_output=True, text=True,
                          timeout=60, env=env if env is not None else clean_env(SPEECHKIT_CORES="8"), cwd=cwd)


def affinity() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ------------------------------------------------------------------------------------------- path.sh
def cores_after_path_sh(env: dict[str, str], before: str = "") -> str:
    """SPEECHKIT_CORES, OMP_NUM_THREADS and MKL_NUM_THREADS after sourcing path.sh (``before`` runs first)."""
    r = subprocess.run(["bash", "-c", f'{before}. "{PATH_SH}"; echo "$SPEECHKIT_CORES $OMP_NUM_THREADS $MKL_NUM_THREADS"'],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_path_sh_takes_the_cores_from_nproc_and_gives_the_rest_one_thread():
    assert cores_after_path_sh(clean_env()) == f"{affinity()} 1 1"


def test_path_sh_takes_an_exported_omp_num_threads_as_the_cores():
    """`OMP_NUM_THREADS=3 ./run.sh`: the recipe's budget is 3 cores; what gets no thread count runs on one."""
    assert cores_after_path_sh(clean_env(OMP_NUM_THREADS="3", MKL_NUM_THREADS="3")) == "3 1 1"


def test_a_second_path_sh_keeps_the_cores_of_the_first():
    """A script that sources path.sh (OMP_NUM_THREADS=1 from then on) and starts run.sh: the run keeps the cores."""
    before = f'. "{PATH_SH}"; '
    assert cores_after_path_sh(clean_env(OMP_NUM_THREADS="5"), before) == "5 1 1"
    assert cores_after_path_sh(clean_env(), before) == f"{affinity()} 1 1"


# --------------------------------------------------------------------------------- recipe_common.sh
PLAN = 'check_num_threads; threads a features 2; threads b training 1; threads c training 3; echo "$a $b $c|$threads_plan"'


@pytest.mark.parametrize("cores,args,expected", [
    ("8", [], "4 8 2|features=4x2 training=8 training=2x3"),
    ("2", [], "1 2 1|features=1x2 training=2 training=1x3"),   # never below one thread
    ("1", [], "1 1 1|features=1x2 training=1 training=1x3"),
    ("8", ["--num_threads", "1"], "1 1 1|features=1x2 training=1 training=1x3"),  # the busy-machine setting
    ("8", ["--num_threads", "3"], "3 3 3|features=3x2 training=3 training=3x3"),  # N each, whatever the jobs
])
def test_threads_spreads_the_cores_over_the_jobs_at_once(cores, args, expected):
    r = bash(PLAN, *args, env=clean_env(SPEECHKIT_CORES=cores))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "", "2x"])
def test_a_bad_num_threads_is_an_error_naming_the_option(value):
    r = bash(PLAN, "--num_threads", value)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == f"demo: --num_threads {value}: auto (the cores spread over the jobs that run at once) " \
                               "or a whole number >= 1", r.stderr


@pytest.mark.parametrize("cores", ["0", "x", ""])
def test_bad_cores_are_an_error_naming_their_source(cores):
    r = bash(PLAN, env=clean_env(SPEECHKIT_CORES=cores) if cores else clean_env())
    if not cores:  # unset (path.sh not sourced): one core, not an error
        assert r.returncode == 0 and r.stdout.strip() == "1 1 1|features=1x2 training=1 training=1x3", r.stderr
        return
    assert r.returncode == 1 and f"SPEECHKIT_CORES={cores}" in r.stderr and "OMP_NUM_THREADS" in r.stderr, r.stderr


@pytest.mark.parametrize("jobs", ["0", "abc"])
def test_threads_refuses_a_job_count_that_is_no_whole_number(jobs):
    r = bash(f"check_num_threads; threads a features {jobs}; echo ran")
    assert r.returncode == 1 and "ran" not in r.stdout
    assert f"features: {jobs} jobs at once: not a whole number >= 1" in r.stderr, r.stderr


def test_show_threads_prints_the_plan_with_the_setting_and_the_cores():
    r = bash("check_num_threads; threads a features 2; threads b training 1; show_threads")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith(" threads (num_threads auto, 8 cores): features=4x2 training=8"), r.stdout


def test_with_threads_sets_the_thread_variables_of_one_command_only():
    r = bash('with_threads 3 bash -c \'echo "$OMP_NUM_THREADS $MKL_NUM_THREADS"\'; echo "${OMP_NUM_THREADS:-unset}"',
             env=clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["3 3", "unset"]
    # a shell function too (the recipes' score(), train_one)
    r = bash('f() { python -c "import os; print(os.environ[\'OMP_NUM_THREADS\'])"; }; with_threads 2 f')
    assert r.stdout.strip() == "2", r.stderr


def test_record_run_records_the_plan_in_runs_jsonl(tmp_path):
    script = 'check_num_threads; threads a features 2; threads b training 1; record_run exp/runs.jsonl conf'
    (tmp_path / "conf").mkdir()
    r = bash(script, "--num_threads", "auto", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "exp" / "runs.jsonl").read_text().splitlines()[-1])
    assert rec["threads"]["SPEECHKIT_THREADS"] == "num_threads=auto cores=8 features=4x2 training=8"
    # a recipe without the threads plan records no SPEECHKIT_THREADS (not an empty one)
    r = bash("record_run exp/runs.jsonl conf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "SPEECHKIT_THREADS" not in json.loads((tmp_path / "exp" / "runs.jsonl").read_text().splitlines()[-1])["threads"]


# ------------------------------------------------------------------------------------ make_feats.sh
def test_make_feats_sh_hands_num_threads_to_each_job(tmp_path):
    """--num-threads T reaches every speechkit-compute-feats job (its command line, torch's threads) and run.pl."""
    import numpy as np
    import soundfile as sf

    data = tmp_path / "data"
    (data / "wav").mkdir(parents=True)
    rng = np.random.default_rng(0)
    utts = sorted(f"s{i % 2}_u{i}" for i in range(4))
    for u in utts:
        sf.write(data / "wav" / f"{u}.wav", (rng.normal(size=4000) * 0.1).astype(np.float32), 16000)
    (data / "wav.scp").write_text("".join(f"{u} {data}/wav/{u}.wav\n" for u in utts))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('_')[0]}\n" for u in utts))
    (data / "spk2utt").write_text("s0 s0_u0 s0_u2\ns1 s1_u1 s1_u3\n")
    env = clean_env()
    r = subprocess.run(["bash", str(UTILS / "make_feats.sh"), "--nj", "2", "--num-threads", "2", "--config",
                        str(REPO / "conf" / "mfcc.yaml"), str(data), str(tmp_path / "log"), str(tmp_path / "mfcc")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    for j in (1, 2):
        log = (tmp_path / "log" / f"compute_feats.{j}.log").read_text()
        assert "--num-threads 2" in log.splitlines()[0], log  # the job's command line
    bad = subprocess.run(["bash", str(UTILS / "make_feats.sh"), "--num-threads", "0", "--config",
                          str(REPO / "conf" / "mfcc.yaml"), str(data)], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "--num-threads 0: not a whole number >= 1" in bad.stderr, bad.stderr
