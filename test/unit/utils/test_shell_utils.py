"""utils/: parse_options.sh, run.pl, the perl filters and the Kaldi-named data-dir wrappers."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speechkit.data.datadir import DataDir
from speechkit.data.validate import validate

UTILS = Path(__file__).resolve().parents[3] / "utils"
VENV_BIN = Path(sys.executable).parent


def sh(cmd, cwd=None, input=None, env=None):
    """Run a bash command line; returns the CompletedProcess (text)."""
    e = dict(os.environ)
    e["PATH"] = f"{VENV_BIN}:{e.get('PATH', '')}"
    e.update(env or {})
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, input=input, capture_output=True, text=True, env=e,
                          timeout=60)


# ---------------------------------------------------------------- parse_options.sh
SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
stage=0
nj=4
use_gpu=false
foo_bar=default
help_message="Usage: demo.sh [--stage N] [--nj N] [--use-gpu true|false] <arg>"
. {utils}/parse_options.sh
echo "stage=$stage nj=$nj use_gpu=$use_gpu foo_bar=$foo_bar"
echo "args=$#:$*"
"""


@pytest.fixture
def demo(tmp_path) -> Path:
    p = tmp_path / "demo.sh"
    p.write_text(SCRIPT.format(utils=UTILS))
    p.chmod(0o755)
    return p


def test_parse_options_forms(demo):
    r = sh(f"{demo} --nj 2 --foo-bar 'a b' --use_gpu=true --stage=3 pos1 --stage 5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["stage=3 nj=2 use_gpu=true foo_bar=a b", "args=3:pos1 --stage 5"]


def test_parse_options_no_options_and_double_dash(demo):
    assert sh(f"{demo}").stdout.splitlines() == ["stage=0 nj=4 use_gpu=false foo_bar=default", "args=0:"]
    assert sh(f"{demo} -- --nj 3").stdout.splitlines()[1] == "args=2:--nj 3"


def test_parse_options_unknown_option(demo):
    r = sh(f"{demo} --foo-baz 1 x")
    assert r.returncode == 1
    assert "unknown option --foo-baz" in r.stderr and r.stdout == ""
    r = sh(f"{demo} --not/a-name=1")
    assert r.returncode == 1 and "unknown option --not/a-name" in r.stderr


def test_parse_options_boolean_and_missing_value(demo):
    r = sh(f"{demo} --use-gpu yes")
    assert r.returncode == 1 and "option --use-gpu takes true or false, got 'yes'" in r.stderr
    r = sh(f"{demo} --nj")
    assert r.returncode == 1 and "option --nj needs a value" in r.stderr


def test_parse_options_help(demo):
    r = sh(f"{demo} --help")
    assert r.returncode == 0
    assert r.stdout.strip() == "Usage: demo.sh [--stage N] [--nj N] [--use-gpu true|false] <arg>"
    assert sh(f"{demo} -h").stdout == r.stdout


def test_parse_options_config_file_command_line_wins(demo, tmp_path):
    conf = tmp_path / "my.conf"
    conf.write_text("# defaults for this run\nnj=9\nstage=7\n")
    r = sh(f"{demo} --stage 2 --config {conf} x")
    assert r.stdout.splitlines() == ["stage=2 nj=9 use_gpu=false foo_bar=default", "args=1:x"]
    r = sh(f"{demo} --config={conf}")
    assert r.stdout.splitlines()[0] == "stage=7 nj=9 use_gpu=false foo_bar=default"
    r = sh(f"{demo} --config {tmp_path}/nope.conf")
    assert r.returncode == 1 and "nope.conf: no such file" in r.stderr


def test_parse_options_leaves_no_helpers(tmp_path):
    p = tmp_path / "leak.sh"
    p.write_text(f"set -u\nx=1\n. {UTILS}/parse_options.sh\nset | grep -c '^__po_' || true\n"
                 "declare -F | grep -c __po_ || true\n")
    r = sh(f"bash {p} --x 2")
    assert r.returncode == 0 and r.stdout.split() == ["0", "0"]


# ---------------------------------------------------------------- run.pl
def _log_parts(text: str):
    lines = text.splitlines()
    return lines[0], lines[1], lines[2], lines[3:-2], lines[-2], lines[-1]


def test_run_pl_jobs_and_log_layout(tmp_path):
    r = sh(f"{UTILS}/run.pl JOB=1:3 {tmp_path}/log/echo.JOB.log echo job JOB \\| tr a-z A-Z")
    assert r.returncode == 0, r.stderr
    for j in (1, 2, 3):
        cmd, started, hash_, body, acct, ended = _log_parts((tmp_path / "log" / f"echo.{j}.log").read_text())
        assert cmd == f"# echo job {j} | tr a-z A-Z"
        assert re.fullmatch(r"# Started at \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \S+ \d{4}", started)
        assert hash_ == "#"
        assert body == [f"JOB {j}"]
        assert re.fullmatch(r"# Accounting: time=\d+ threads=1", acct)
        assert re.fullmatch(r"# Ended \(code 0\) at .*", ended)


def test_run_pl_single_job_stderr_and_quoting(tmp_path):
    log = tmp_path / "one.log"
    r = sh(f"""{UTILS}/run.pl --num-threads 4 {log} bash -c "echo 'to out'; echo to err >&2" """)
    assert r.returncode == 0
    text = log.read_text()
    assert text.splitlines()[0] == """# bash -c "echo 'to out'; echo to err >&2\""""
    assert "to out\nto err\n" in text and "threads=4" in text


def test_run_pl_failing_jobs(tmp_path):
    r = sh(f"{UTILS}/run.pl --max-jobs-run 2 JOB=1:4 {tmp_path}/f.JOB.log "
           "test JOB -ne 2 '&&' test JOB -ne 4 '||' exit 7")
    assert r.returncode == 1
    assert f"2 / 4 jobs failed (JOB=2,4), logs are in {tmp_path}/f.*.log" in r.stderr
    assert f"{tmp_path}/f.2.log (exit code 7)" in r.stderr
    assert (tmp_path / "f.2.log").read_text().splitlines()[-1].startswith("# Ended (code 7)")
    assert (tmp_path / "f.1.log").read_text().splitlines()[-1].startswith("# Ended (code 0)")
    r = sh(f"{UTILS}/run.pl {tmp_path}/g.log false")
    assert r.returncode == 1 and f"job failed with exit code 1, log is in {tmp_path}/g.log" in r.stderr


def test_run_pl_max_jobs_limits_concurrency(tmp_path):
    # each job records its start and end time; with --max-jobs-run 1 they never overlap
    cmd = "python3 -c \"import time,sys; print(time.time()); time.sleep(0.2); print(time.time())\""
    r = sh(f"{UTILS}/run.pl --max-jobs-run 1 JOB=1:3 {tmp_path}/t.JOB.log {cmd}")
    assert r.returncode == 0, r.stderr
    spans = []
    for j in (1, 2, 3):
        nums = [float(x) for x in (tmp_path / f"t.{j}.log").read_text().splitlines() if not x.startswith("#")]
        spans.append(nums)
    spans.sort()
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(2))
    # by default all jobs run at once: each waits (up to 20 s) until all three have started
    barrier = tmp_path / "barrier.sh"
    barrier.write_text(f"touch {tmp_path}/started.$1\n"
                       f"for i in $(seq 200); do [ $(ls {tmp_path}/started.* | wc -l) -ge 3 ] && exit 0; sleep 0.1; done\n"
                       "exit 1\n")
    r = sh(f"{UTILS}/run.pl JOB=1:3 {tmp_path}/p.JOB.log bash {barrier} JOB")
    assert r.returncode == 0, r.stderr


def test_run_pl_terminated_kills_jobs(tmp_path):
    pidfile = tmp_path / "child.pid"
    p = subprocess.Popen([str(UTILS / "run.pl"), str(tmp_path / "k.log"),
                          "echo", "$$", ">", str(pidfile), ";", "exec", "sleep", "60"])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    p.terminate()
    assert p.wait(timeout=10) == 128 + 15
    for _ in range(100):  # the killed child may stay a zombie for a moment on a loaded machine
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    assert "# Ended (code 0; signal 15)" in (tmp_path / "k.log").read_text()


def test_run_pl_usage_errors(tmp_path):
    r = sh(f"{UTILS}/run.pl JOB=1:2 {tmp_path}/same.log true")
    assert r.returncode == 1 and "does not contain JOB" in r.stderr
    r = sh(f"{UTILS}/run.pl JOB=3:1 {tmp_path}/x.JOB.log true")
    assert r.returncode == 1 and "invalid job range" in r.stderr
    r = sh(f"{UTILS}/run.pl {tmp_path}/x.log")
    assert r.returncode == 1 and "usage" in r.stderr
    r = sh(f"{UTILS}/run.pl --max-jobs-run 0 {tmp_path}/x.log true")
    assert r.returncode == 1


def test_run_pl_ignores_queue_options_and_other_job_names(tmp_path):
    r = sh(f"{UTILS}/run.pl --gpu 1 --mem 4G TASK=2:3 {tmp_path}/o.TASK.log echo TASK")
    assert r.returncode == 0, r.stderr
    assert "\n3\n" in (tmp_path / "o.3.log").read_text()
    assert not (tmp_path / "o.1.log").exists()


# ---------------------------------------------------------------- perl filters
def test_utt2spk_spk2utt_roundtrip(tmp_path):
    u2s = "a_1 a\na_2 a\nb_1 b\nc_1 c\n"
    r = sh(f"{UTILS}/utt2spk_to_spk2utt.pl", input=u2s)
    assert r.returncode == 0 and r.stdout == "a a_1 a_2\nb b_1\nc c_1\n"
    (tmp_path / "spk2utt").write_text(r.stdout)
    assert sh(f"{UTILS}/spk2utt_to_utt2spk.pl {tmp_path}/spk2utt").stdout == u2s
    r = sh(f"{UTILS}/utt2spk_to_spk2utt.pl", input="a_1 a extra\n")
    assert r.returncode != 0 and "-:1: expected 'utt spk'" in r.stderr


def test_filter_scp(tmp_path):
    (tmp_path / "ids").write_text("u3 anything\nu1\n")
    scp = "u1 /a.wav\nu2 /b.wav\nu3 cmd with spaces |\n"
    assert sh(f"{UTILS}/filter_scp.pl {tmp_path}/ids", input=scp).stdout == "u1 /a.wav\nu3 cmd with spaces |\n"
    assert sh(f"{UTILS}/filter_scp.pl --exclude {tmp_path}/ids", input=scp).stdout == "u2 /b.wav\n"
    (tmp_path / "in").write_text("x1 u3\nx2 u2\n")
    assert sh(f"{UTILS}/filter_scp.pl -f 2 {tmp_path}/ids {tmp_path}/in").stdout == "x1 u3\n"
    assert sh(f"{UTILS}/filter_scp.pl --exclude -f -1 {tmp_path}/ids {tmp_path}/in").stdout == "x2 u2\n"
    r = sh(f"{UTILS}/filter_scp.pl {tmp_path}/missing", input=scp)
    assert r.returncode != 0 and "cannot open id list" in r.stderr


# ---------------------------------------------------------------- data-dir wrappers
def _make(path: Path, speakers=("s1", "s2", "s3"), n=2):
    d = DataDir(wav_scp={}, text={})
    for s in speakers:
        for i in range(n):
            u = f"{s}_{i}"
            d.utt2spk[u] = s
            d.wav_scp[u] = f"/x/{u}.wav"
            d.text[u] = "hello"
    d.write(path)


def test_data_dir_wrappers_end_to_end(tmp_path):
    src = tmp_path / "data" / "train"
    _make(src)
    assert sh(f"{UTILS}/validate_data_dir.sh --no-feats {src}").stdout.strip() == \
        f"Successfully validated data-directory {src}"
    r = sh(f"{UTILS}/validate_data_dir.sh {src}")
    assert r.returncode == 1 and f"{src}/feats.scp: missing" in r.stderr

    assert sh(f"{UTILS}/subset_data_dir.sh --first 3 {src} {tmp_path}/sub").returncode == 0
    assert DataDir.load(tmp_path / "sub").utts == ["s1_0", "s1_1", "s2_0"]
    assert sh(f"{UTILS}/subset_data_dir.sh --last {src} 2 {tmp_path}/last").returncode == 0   # Kaldi order
    assert DataDir.load(tmp_path / "last").utts == ["s3_0", "s3_1"]

    assert sh(f"{UTILS}/split_data.sh {src} 3").returncode == 0
    assert [DataDir.load(src / "split3" / str(j)).utts for j in (1, 2, 3)] == \
        [["s1_0", "s1_1"], ["s2_0", "s2_1"], ["s3_0", "s3_1"]]
    assert sh(f"{UTILS}/split_data.sh --per-utt {src} 4").returncode == 0
    assert len(DataDir.load(src / "split4utt" / "4")) == 1
    r = sh(f"{UTILS}/split_data.sh {src} 4")
    assert r.returncode == 1 and "cannot split 3 speakers into 4 parts" in r.stderr

    r = sh(f"{UTILS}/copy_data_dir.sh --utt-prefix sp0.9- --spk-prefix sp0.9- {src} {tmp_path}/sp")
    assert r.returncode == 0, r.stderr
    assert validate(tmp_path / "sp", no_feats=True) == []
    assert sh(f"{UTILS}/combine_data.sh {tmp_path}/all {src} {tmp_path}/sp").returncode == 0
    assert len(DataDir.load(tmp_path / "all")) == 12
    r = sh(f"{UTILS}/combine_data.sh {tmp_path}/bad {src} {tmp_path}/sub")
    assert r.returncode == 1 and "is in both" in r.stderr

    # fix: break the sort order, then repair
    (src / "text").write_text("".join(reversed((src / "text").read_text().splitlines(True))))
    assert sh(f"{UTILS}/validate_data_dir.sh --no-feats {src}").returncode == 1
    r = sh(f"{UTILS}/fix_data_dir.sh {src}")
    assert r.returncode == 0 and "kept 6 utterances out of 6" in r.stdout
    assert sh(f"{UTILS}/validate_data_dir.sh --no-feats {src}").returncode == 0


def test_wrappers_find_the_venv_without_path_sh(tmp_path):
    """A user who has not sourced path.sh still gets the tools (through a symlinked utils/ too)."""
    _make(tmp_path / "d")
    recipe = tmp_path / "egs" / "demo"
    recipe.mkdir(parents=True)
    (recipe / "utils").symlink_to(UTILS)
    venv = UTILS.parent / "tools" / "venv" / "bin"
    if not (venv / "speechkit-validate-data-dir").exists():
        pytest.skip("toolkit venv not at tools/venv")
    r = subprocess.run(["bash", "-c", f"utils/validate_data_dir.sh --no-feats {tmp_path}/d"], cwd=recipe,
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "Successfully validated" in r.stdout
