"""utils/slurm.pl: against a real single-node Slurm on loopback, and its option/config logic against a fake sbatch.

The real-Slurm tests share one cluster per session (test/slurm/start_slurm.sh, stopped at the
end); they are skipped, saying why, where it cannot start (not root, slurm-wlm/munge missing).
Set SPEECHKIT_REQUIRE_SLURM=1 (CI) to make that a failure instead.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UTILS = REPO / "utils"
START, STOP = REPO / "test" / "slurm" / "start_slurm.sh", REPO / "test" / "slurm" / "stop_slurm.sh"
VENV_BIN = Path(sys.executable).parent


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}", LC_ALL="C", **extra)


@pytest.fixture(scope="session")
def slurm_env():
    """Environment (SLURM_CONF) of a private single-node Slurm started for this test session."""
    # Under /tmp with a short name: munged's socket path must stay short, and its directory
    # must be reachable by everyone (pytest's tmp dirs sit under a 0700 directory).
    cluster = tempfile.mkdtemp(prefix="sk-slurm-", dir="/tmp")
    try:
        r = subprocess.run([str(START), cluster], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess([], 1, "", "start_slurm.sh timed out after 120 s")
    if r.returncode != 0:
        subprocess.run([str(STOP), cluster], capture_output=True, timeout=60)
        shutil.rmtree(cluster, ignore_errors=True)
        why = " ".join(r.stderr.split())[-600:] or f"exit status {r.returncode}"
        if os.environ.get("SPEECHKIT_REQUIRE_SLURM") == "1":
            pytest.fail(f"could not start the single-node Slurm: {why}")
        pytest.skip(f"could not start a single-node Slurm here: {why}")
    try:
        yield _env(SLURM_CONF=f"{cluster}/slurm.conf")
    finally:
        subprocess.run([str(STOP), cluster], capture_output=True, timeout=120)
        shutil.rmtree(cluster, ignore_errors=True)


def _make_feats(work: Path, cmd: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["utils/make_feats.sh", "--nj", "4", "--cmd", cmd, "--config", str(REPO / "conf" / "mfcc.yaml"),
                           "data/train", "exp/make_mfcc/train", "mfcc"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)


def _outputs(work: Path) -> dict[str, bytes]:
    files = sorted((work / "mfcc").iterdir())
    files += [work / "data" / "train" / n for n in ("feats.scp", "utt2num_frames", "frame_shift", "feats.yaml")]
    return {str(p.relative_to(work)): p.read_bytes() for p in files}


@pytest.mark.slurm
def test_make_feats_through_slurm_equals_local(slurm_env, shared_data, tmp_path):
    """The feature-extraction stage with --nj 4 gives the same bytes via slurm.pl as via run.pl."""
    from speechkit.data.corpora.timit import prepare_timit

    work = tmp_path / "recipe"  # laid out like egs/<recipe>: utils/, path.sh, data/
    work.mkdir()
    (work / "utils").symlink_to(UTILS)
    (work / "path.sh").write_text(f". {REPO}/egs/TEMPLATE/path.sh\n")
    prepare_timit(shared_data / "timit_sample", work / "data" / "all")
    r = subprocess.run(["utils/subset_data_dir.sh", "--first", "16", "data/all", "data/train"], cwd=work,
                       env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    r = _make_feats(work, "utils/run.pl", slurm_env)
    assert r.returncode == 0, r.stdout + r.stderr
    local = _outputs(work)
    assert len(local) == 4 * 3 + 4  # ark, scp, json per job; feats.scp, utt2num_frames, frame_shift, feats.yaml
    for p in ("mfcc", "exp", "data/train/feats.scp", "data/train/utt2num_frames"):
        (shutil.rmtree if (work / p).is_dir() else os.remove)(work / p)

    r = _make_feats(work, f"utils/slurm.pl --config {REPO}/conf/slurm.conf", slurm_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _outputs(work) == local  # byte for byte (paths too: same directory)

    logdir = work / "exp" / "make_mfcc" / "train"
    for j in range(1, 5):
        log = (logdir / f"compute_feats.{j}.log").read_text()
        assert log.startswith(f"# speechkit-compute-feats --config {REPO}/conf/mfcc.yaml --nj 4 --job {j} ")
        assert f"part {j}/4: 4 utterances" in log
        assert "# Ended (code 0) at " in log.splitlines()[-1]
    qlog = (logdir / "q" / "compute_feats.log").read_text()
    assert "--array=1-4 " in qlog and "sbatch --export=PATH --ntasks-per-node=1 " in qlog
    assert not list((logdir / "q").glob("done.*"))  # status files cleaned up


@pytest.mark.slurm
def test_failing_jobs_are_named_with_their_logs(slurm_env, tmp_path):
    r = subprocess.run([str(UTILS / "slurm.pl"), "JOB=1:3", "log/f.JOB.log", "echo", "job", "JOB", ";",
                        "[", "JOB", "-ne", "2", "]", "||", "exit", "3"],
                       cwd=tmp_path, env=slurm_env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "1 / 3 jobs failed (JOB=2)" in r.stderr
    assert "log/f.2.log (exit code 3)" in r.stderr
    log2 = (tmp_path / "log" / "f.2.log").read_text().splitlines()
    assert log2[0] == "# echo job 2 ; [ 2 -ne 2 ] || exit 3"
    assert log2[3] == "job 2" and log2[-1].startswith("# Ended (code 3) at ")
    assert (tmp_path / "log" / "f.3.log").read_text().splitlines()[-1].startswith("# Ended (code 0) at ")

    r = subprocess.run([str(UTILS / "slurm.pl"), "one.log", "false"], cwd=tmp_path, env=slurm_env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "job failed (exit code 1), log is in one.log" in r.stderr


# ------------------------------------------------------------------ without Slurm: a fake sbatch

FAKE_SBATCH = """#!/usr/bin/env bash
# Records its arguments, then runs the array tasks one after another like sbatch --wait would.
printf '%s\\n' "$@" > "$FAKE_DIR/args"
array= ; script=${@: -1}
for a in "$@"; do case $a in --array=*) array=${a#--array=} ;; esac; done
echo 4242
rc=0
if [ -z "$array" ]; then bash "$script" || rc=$?; exit $rc; fi
range=${array%%%*}
for t in $(seq ${range%-*} ${range#*-}); do
  [ "$t" = "${FAKE_SKIP:-}" ] && continue   # as if Slurm had killed that task (no status written)
  SLURM_ARRAY_TASK_ID=$t bash "$script" || rc=1
done
exit $rc
"""


@pytest.fixture()
def fake(tmp_path):
    sbatch = tmp_path / "sbatch"
    sbatch.write_text(FAKE_SBATCH)
    sbatch.chmod(0o755)
    conf = tmp_path / "slurm.conf"
    conf.write_text((REPO / "conf" / "slurm.conf").read_text().replace("command sbatch", f"command {sbatch}"))
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(UTILS / "slurm.pl"), *args], cwd=work, capture_output=True, text=True,
                              env=_env(FAKE_DIR=str(tmp_path), **env), timeout=60)

    run.conf, run.work, run.args = conf, work, lambda: (tmp_path / "args").read_text().splitlines()
    return run


def test_options_become_sbatch_options(fake):
    r = fake("--config", str(fake.conf), "--mem", "2G", "--num-threads", "2", "--gpu", "1", "--time", "1:00:00",
             "JOB=2:4", "--max-jobs-run", "2", "-p", "big", "exp/log/x.JOB.log", "echo", "JOB", "|", "tr", "0-9", "a-j")
    assert r.returncode == 0, r.stderr
    args = fake.args()
    assert args[:2] == ["--export=PATH", "--ntasks-per-node=1"]
    joined = " ".join(args)
    for want in ("--gres=gpu:1", "--mem-per-cpu 2G", "--cpus-per-task 2", "--time 1:00:00", "-p big",
                 "--array=2-4%2", "--parsable --wait"):
        assert want in joined, (want, joined)
    assert args[-1] == str(fake.work / "exp" / "q" / "x.sh")
    assert [(fake.work / f"exp/log/x.{j}.log").read_text().splitlines()[3] for j in (2, 3, 4)] == ["c", "d", "e"]
    log = (fake.work / "exp/log/x.3.log").read_text().splitlines()
    assert log[:3] == ["# echo 3 | tr 0-9 a-j", log[1], "#"] and log[1].startswith("# Started at ")
    assert log[4] == "# Accounting: time=0 threads=2"
    # --gpu 0 (the default) and --mem 0 add nothing
    r = fake("--config", str(fake.conf), "--mem", "0", "one.log", "true")
    assert r.returncode == 0, r.stderr
    assert not any(a.startswith(("--gres", "--mem")) for a in fake.args())


def test_task_killed_by_slurm_has_no_exit_code(fake):
    r = fake("--config", str(fake.conf), "JOB=1:3", "k.JOB.log", "true", FAKE_SKIP="2")
    assert r.returncode == 1
    assert "1 / 3 jobs failed (JOB=2)" in r.stderr and "k.2.log (no exit status: killed by Slurm?" in r.stderr


def test_config_and_usage_errors(fake, tmp_path):
    r = fake("--config", str(fake.conf), "--colour", "red", "x.log", "true")
    assert r.returncode == 1 and f"option --colour red is not described in {fake.conf}" in r.stderr
    bad = tmp_path / "bad.conf"
    bad.write_text("command sbatch\noption mem=* --mem $0\nthis is not a line\n")
    r = fake("--config", str(bad), "x.log", "true")
    assert r.returncode == 1 and f"{bad}:3: cannot parse 'this is not a line'" in r.stderr
    bad.write_text("option mem=* --mem $0\n")
    r = fake("--config", str(bad), "x.log", "true")
    assert r.returncode == 1 and "no 'command ...' line" in r.stderr
    r = fake("--config", str(tmp_path / "missing.conf"), "x.log", "true")
    assert r.returncode == 1 and "no such file" in r.stderr
    r = fake("--config", str(fake.conf), "JOB=1:2", "same.log", "true")
    assert r.returncode == 1 and "does not contain JOB" in r.stderr
    r = fake("--config", str(fake.conf), "JOB=0:2", "x.JOB.log", "true")
    assert r.returncode == 1 and "must be >= 1" in r.stderr
    r = fake("--config", str(fake.conf), "x.log")
    assert r.returncode == 1 and "usage:" in r.stderr
    # a submission that sbatch rejects: its message is shown
    reject = tmp_path / "reject.conf"
    reject.write_text("command bash -c 'echo sbatch: error: invalid partition >&2; exit 1' --\n")
    r = fake("--config", str(reject), "x.log", "true")
    assert r.returncode == 1 and "submitting the job failed" in r.stderr and "invalid partition" in r.stderr


def test_config_found_in_the_recipe_dir(fake):
    (fake.work / "conf").mkdir()
    shutil.copy(fake.conf, fake.work / "conf" / "slurm.conf")
    with open(fake.work / "conf" / "slurm.conf", "a") as f:
        f.write("default partition=recipe\n")
    r = fake("x.log", "true")
    assert r.returncode == 0, r.stderr
    assert "-p recipe" in " ".join(fake.args())


def test_cmd_sh_backends():
    def source(backend: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", '. egs/TEMPLATE/cmd.sh && echo "$train_cmd|$decode_cmd|$cuda_cmd"'],
                              cwd=REPO, env=dict(os.environ, cmd_backend=backend), capture_output=True, text=True)

    assert source("local").stdout.strip() == "utils/run.pl|utils/run.pl|utils/run.pl"
    assert source("slurm").stdout.strip() == "utils/slurm.pl|utils/slurm.pl --mem 4G|utils/slurm.pl --gpu 1"
    r = source("sge")
    assert r.returncode != 0 and "unknown cmd_backend 'sge' (known: local, slurm)" in r.stderr
