"""The four recipes' thread plans (issue 40), without running any stage: each run.sh resolves --num_threads
(default auto) per stage before stage 0, prints the plan and records it in its runs.jsonl.

Each recipe runs in a temporary folder of links to its files with local/prepare_mini.sh a stub that fails
(test_recipe_options.make_work): the plan is printed before stage 0 starts."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_recipe_options import RECIPES, make_work, tree

pytestmark = pytest.mark.integration

# the plan with 8 cores and the defaults (--nj 2, --nproc 1, --train_jobs 2): every stage and its jobs at once
PLANS = {
    "zerospeech2019": "features=4x2 training=8 units=4x2 resynthesis=8 scoring=8",
    "tcstar_salad": "features=4x2 alignment=4x2 training=4x2 synthesis=4x2 scoring=8",
    "vctk_continual": "features=4x2 alignment=4x2 speakers=4x2 verifier=8 pretraining=8 continual=4x2",
    "indic_multilingual": "features=4x2 training=4x2 decoding=4x2",
}


@pytest.fixture(params=sorted(RECIPES))
def recipe(request, tmp_path):
    """(name, work dir) of each recipe (test_recipe_options.make_work)."""
    return request.param, make_work(tmp_path, request.param)


def run(work: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """./run.sh ARGS with no thread variable in the environment but ``env``."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "SPEECHKIT_CORES", "SPEECHKIT_THREADS")}
    base["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return subprocess.run(["./run.sh", *args], cwd=work, env=dict(base, **env), capture_output=True, text=True,
                          timeout=120)


def plan_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stdout.splitlines() if " threads (num_threads " in line]
    assert len(lines) == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return lines[0].split(" threads ", 1)[1]


def recorded(work: Path) -> str:
    """threads.SPEECHKIT_THREADS of the run's record (the one runs*.jsonl the run wrote)."""
    files = list(work.glob("exp/**/runs*.jsonl"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text().splitlines()[-1])["threads"]["SPEECHKIT_THREADS"]


def test_auto_spreads_the_cores_over_each_stage_s_jobs(recipe):
    """OMP_NUM_THREADS=8 exported: 8 cores; a single training gets all, --nj 2 jobs 4 each."""
    name, work = recipe
    proc = run(work, OMP_NUM_THREADS="8")
    assert proc.returncode == 3 and "STUB prepare_mini.sh" in proc.stderr, proc.stderr  # got as far as stage 0
    assert plan_line(proc) == f"(num_threads auto, 8 cores): {PLANS[name]}"
    assert recorded(work) == f"num_threads=auto cores=8 {PLANS[name]}"


def test_num_threads_1_is_the_busy_machine_setting(recipe):
    name, work = recipe
    proc = run(work, "--num_threads", "1", OMP_NUM_THREADS="8")
    expected = " ".join(f"{w.split('=')[0]}=1" + (f"x{w.split('x')[1]}" if "x" in w else "")
                        for w in PLANS[name].split())
    assert plan_line(proc) == f"(num_threads 1, 8 cores): {expected}"


def test_the_cores_default_to_nproc_and_more_jobs_get_fewer_threads(recipe):
    """No OMP_NUM_THREADS: the CPUs this process may use; --nj 4 splits them four ways (at least one each)."""
    name, work = recipe
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    line = plan_line(run(work, "--nj", "4"))
    assert line.startswith(f"(num_threads auto, {cores} cores): features={max(1, cores // 4)}x4 "), line


@pytest.mark.parametrize("value", ["0", "two", "1.5"])
def test_a_bad_num_threads_is_an_error_before_anything_is_created(recipe, value):
    name, work = recipe
    before = tree(work)
    proc = run(work, "--num_threads", value)
    assert proc.returncode == 1, proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == \
        f"./run.sh: --num_threads {value}: auto (the cores spread over the jobs that run at once) or a whole number >= 1"
    assert tree(work) == before  # no runs.jsonl, no data/, no db/
