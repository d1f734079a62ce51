"""utils/run_clis.py: speechkit-* command lines run in one process give what their own processes give."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOOL = REPO / "utils" / "run_clis.py"


def _tables(tmp_path):
    (tmp_path / "ref").write_text("u1 a b c\nu2 d e\n")
    (tmp_path / "hyp").write_text("u1 a x c\nu2 d e\n")
    return tmp_path / "ref", tmp_path / "hyp"


def _own_process(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from speechkit.bin.score_wer import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def test_outputs_equal_the_commands_own_processes(tmp_path):
    ref, hyp = _tables(tmp_path)
    wer = [str(ref), str(hyp), "--json", str(tmp_path / "a" / "wer.json")]
    cer = [str(ref), str(hyp), "--cer"]
    lines = (shlex.join(["speechkit-score-wer", *wer]) + " > " + shlex.quote(str(tmp_path / "wer out.txt")) + "\n"
             + shlex.join(["speechkit-score-wer", *cer]) + "\n")
    r = subprocess.run([sys.executable, str(TOOL)], input=lines, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    own_wer = _own_process(*[w.replace("/a/", "/b/") for w in wer])
    own_cer = _own_process(*cer)
    assert (tmp_path / "wer out.txt").read_text() == own_wer.stdout and "%WER 20.00" in own_wer.stdout
    assert r.stdout == own_cer.stdout
    a, b = ((tmp_path / d / "wer.json").read_text() for d in "ab")  # they name their own folder (trn_dir)
    assert a == b.replace(str(tmp_path / "b"), str(tmp_path / "a"))
    # --last-line: what `CMD | tail -n 1` prints
    r = subprocess.run([sys.executable, str(TOOL), "--last-line"], input=shlex.join(["speechkit-score-wer", *cer]),
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == own_cer.stdout.splitlines(keepends=True)[-1]


def test_the_first_failure_ends_the_run_with_its_status(tmp_path):
    ref, hyp = _tables(tmp_path)
    lines = (shlex.join(["speechkit-score-wer", str(ref), str(tmp_path / "missing")]) + "\n"
             + shlex.join(["speechkit-score-wer", str(ref), str(hyp)]) + " > " + str(tmp_path / "never.txt") + "\n")
    r = subprocess.run([sys.executable, str(TOOL)], input=lines, capture_output=True, text=True)
    assert r.returncode == 1 and "speechkit-score-wer: error:" in r.stderr and "missing" in r.stderr
    assert not (tmp_path / "never.txt").exists()
    r = subprocess.run([sys.executable, str(TOOL)], input="ls -l\n", capture_output=True, text=True)
    assert r.returncode != 0 and "not a speechkit-* command: ls" in r.stderr
