"""speechkit.utils.provenance and speechkit-record-run: the records behind every RESULTS.md header."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from speechkit.bin.record_run import main as record_main
from speechkit.utils import provenance
from speechkit.utils.fileio import DataError

ROOT = Path(__file__).resolve().parents[3]


def test_record_run_appends_environment_command_and_config_hashes(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "tuning").mkdir(parents=True)
    (conf / "a.yaml").write_text("x: 1\n")
    (conf / "tuning" / "b.yaml").write_text("y: 2\n")
    (conf / "notes.txt").write_text("not a config\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "exp" / "runs.jsonl"
    assert record_main(["--out", str(out), "--cmdline", "./run.sh --stage 3", "--configs", "conf"]) == 0
    assert record_main(["--out", str(out), "--cmdline", "./run.sh --stage 4"]) == 0
    runs = provenance.read_runs(out)
    assert [r["cmdline"] for r in runs] == ["./run.sh --stage 3", "./run.sh --stage 4"]
    r = runs[0]
    assert r["configs"] == {"conf/a.yaml": hashlib.sha256(b"x: 1\n").hexdigest()[:12],
                            "conf/tuning/b.yaml": hashlib.sha256(b"y: 2\n").hexdigest()[:12]}
    assert r["threads"]["OMP_NUM_THREADS"] == "1"
    assert r["python"].count(".") == 2 and r["torch"] and r["cpu_count"] == os.cpu_count()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if commit.returncode == 0:
        assert r["git_commit"] == commit.stdout.strip() and isinstance(r["git_dirty"], bool)
    assert r["date"].endswith("Z") and r["cwd"] == str(tmp_path.resolve())


def test_markdown_header_lists_environment_commands_and_configs():
    runs = [
        {"date": "2026-01-01T00:00:00Z", "git_commit": "a" * 40, "git_dirty": False, "python": "3.11.7",
         "torch": "2.13.0+cpu", "cpu": "Some CPU", "cpu_count": 2, "gpu": None, "threads": {"OMP_NUM_THREADS": "1"},
         "cmdline": "./run.sh --stop_stage 2", "configs": {"conf/a.yaml": "111111111111"}},
        {"date": "2026-01-01T01:00:00Z", "git_commit": "a" * 40, "git_dirty": False, "python": "3.11.7",
         "torch": "2.13.0+cpu", "cpu": "Some CPU", "cpu_count": 2, "gpu": None, "threads": {"OMP_NUM_THREADS": "1"},
         "cmdline": "./run.sh --stage 3", "configs": {"conf/a.yaml": "222222222222"}},
        {"date": "2026-01-02T00:00:00Z", "git_commit": "b" * 40, "git_dirty": True, "python": "3.11.7",
         "torch": "2.13.0+cpu", "cpu": "Some CPU", "cpu_count": 2, "gpu": None, "threads": {},
         "cmdline": "./run.sh --stage 6", "configs": {}},
    ]
    md = provenance.markdown_header(runs, regenerate="local/make_results.py")
    assert md.startswith("Regenerate this page from the tracked score files: `local/make_results.py`")
    env_rows = [ln for ln in md.splitlines() if ln.startswith("| 2026")]
    assert len(env_rows) == 2  # the first two runs share one environment
    assert "| aaaaaaaaaa |" in env_rows[0] and "| bbbbbbbbbb + uncommitted changes |" in env_rows[1]
    assert "| Some CPU (2) | none | OMP_NUM_THREADS=1 |" in env_rows[0]
    commands = md.split("```")[1].strip().splitlines()
    assert commands[1::2] == ["./run.sh --stop_stage 2", "./run.sh --stage 3", "./run.sh --stage 6"]
    assert "| `conf/a.yaml` | `222222222222` |" in md  # the last record's hash
    assert "No run records" in provenance.markdown_header([])


def test_read_runs_names_a_bad_line(tmp_path):
    p = tmp_path / "runs.jsonl"
    p.write_text('{"cmdline": "x"}\nnot json\n')
    with pytest.raises(DataError, match=r"runs.jsonl:2: not JSON"):
        provenance.read_runs(p)
    assert provenance.read_runs(tmp_path / "absent.jsonl") == []


def test_missing_config_is_a_one_line_error(tmp_path, capsys):
    assert record_main(["--out", str(tmp_path / "r.jsonl"), "--cmdline", "x", "--configs", str(tmp_path / "nope")]) == 1
    assert "nope: no such file or directory" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()


def test_parse_options_keeps_the_command_line_as_typed(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(f"""#!/usr/bin/env bash
stage=0
train_args=
. {ROOT}/utils/parse_options.sh
echo "$cmdline_args"
""")
    script.chmod(0o755)
    proc = subprocess.run([str(script), "--stage", "3", "--train_args", "--model.x 1 --y 'a b'"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # shell-quoted: the shell reads it back into the same words
    words = subprocess.run(["bash", "-c", 'eval "set -- $1"; for w in "$@"; do echo "[$w]"; done', "_",
                            proc.stdout.strip()], capture_output=True, text=True).stdout.splitlines()
    assert words == [f"[{script}]", "[--stage]", "[3]", "[--train_args]", "[--model.x 1 --y 'a b']"]
    bad = subprocess.run([str(script), "--cmdline_args", "x"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 1 and "internal variable" in bad.stderr
