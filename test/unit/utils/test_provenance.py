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


def test_out_that_is_a_config_read_is_refused_before_writing(tmp_path, monkeypatch, capsys):
    """Audit 3 d8: --out conf/train.yaml with --configs conf appended a JSON line to the YAML config."""
    monkeypatch.setattr(provenance, "environment", lambda: {})
    conf = tmp_path / "conf"
    (conf / "sub").mkdir(parents=True)
    (conf / "train.yaml").write_text("a: 1\n")
    (conf / "sub" / "b.yaml").write_text("b: 2\n")
    monkeypatch.chdir(tmp_path)
    for out, configs in [("conf/train.yaml", ["conf"]), ("conf/sub/b.yaml", ["conf"]),
                         ("conf/../conf/train.yaml", ["conf/train.yaml"])]:
        assert record_main(["--out", out, "--cmdline", "./run.sh", "--configs", *configs]) == 1
        err = capsys.readouterr().err
        assert f"--out {out} is the --configs file " in err, err
    assert (conf / "train.yaml").read_text() == "a: 1\n" and (conf / "sub" / "b.yaml").read_text() == "b: 2\n"
    # a new *.yaml below a --configs directory would be hashed as a config by the next run: refused too
    assert record_main(["--out", "conf/runs.yaml", "--cmdline", "x", "--configs", "conf"]) == 1
    assert "--out conf/runs.yaml is a *.yaml file below the --configs directory conf" in capsys.readouterr().err
    assert not (conf / "runs.yaml").exists()
    with pytest.raises(ValueError, match="^out .* is the configs file"):  # the library names its parameters
        provenance.record_run(conf / "train.yaml", "x", [conf / "train.yaml"])
    # a file beside the configs (not read) is fine
    assert record_main(["--out", "conf/runs.jsonl", "--cmdline", "x", "--configs", "conf"]) == 0
    assert provenance.read_runs(conf / "runs.jsonl")[0]["configs"] == {
        "conf/sub/b.yaml": hashlib.sha256(b"b: 2\n").hexdigest()[:12],
        "conf/train.yaml": hashlib.sha256(b"a: 1\n").hexdigest()[:12]}


def test_append_after_a_truncated_last_line_starts_a_new_line(tmp_path, monkeypatch, caplog):
    """Audit 3 d8: a runs.jsonl whose last record was cut short (no final newline) got the new record
    glued onto the broken line, losing both."""
    monkeypatch.setattr(provenance, "environment", lambda: {})
    out = tmp_path / "runs.jsonl"
    out.write_text('{"cmdline": "./run.sh --stage 1"}\n{"cmdline": "./run.sh --st')
    with caplog.at_level("WARNING", logger="speechkit.utils.provenance"):
        provenance.record_run(out, "./run.sh --stage 3", cwd=tmp_path)
    assert f"{out}:2: the last line is truncated" in caplog.text
    lines = out.read_text().splitlines()
    assert lines[:2] == ['{"cmdline": "./run.sh --stage 1"}', '{"cmdline": "./run.sh --st']
    assert len(lines) == 3 and json.loads(lines[2])["cmdline"] == "./run.sh --stage 3"
    assert out.read_text().endswith("\n")
    # a complete file (and an empty one) gets no extra line and no warning
    caplog.clear()
    for f in (out, tmp_path / "empty.jsonl"):
        if f != out:
            f.write_text("")
        with caplog.at_level("WARNING", logger="speechkit.utils.provenance"):
            provenance.record_run(f, "./run.sh --stage 4", cwd=tmp_path)
        assert "truncated" not in caplog.text and "\n\n" not in f.read_text()
    assert len(out.read_text().splitlines()) == 4 and len((tmp_path / "empty.jsonl").read_text().splitlines()) == 1
