"""speechkit.inference.parts: the one runner of a model over a data dir in parts (split, fingerprint,
skip what is current, worker processes, merge)."""
from __future__ import annotations

import json
import logging
import operator
import os

import pytest

from speechkit.inference.parts import (
    PartsFailed, PartStore, content_digests, digests_unchanged, dumps, file_states, run_parts, split_parts,
)


def test_split_parts_deals_the_c_sorted_utterances_round_robin():
    utts = ["b", "a", "B", "c", "é", "d"]
    assert split_parts(utts, 2) == [["B", "b", "d"], ["a", "c", "é"]]  # C order: upper case first, é last
    assert split_parts(utts, 1) == [["B", "a", "b", "c", "d", "é"]]
    assert split_parts(["a"], 3) == [["a"], [], []]
    with pytest.raises(ValueError, match="nj must be >= 1, got 0"):
        split_parts(utts, 0)


def test_fingerprints_follow_the_files(tmp_path):
    a = tmp_path / "a.ark"
    a.write_bytes(b"12345")
    st = a.stat()
    assert file_states([a, tmp_path / "none"]) == f"{a} 5 {st.st_mtime_ns}\n{tmp_path / 'none'} missing\n"
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # rewritten in place: another state
    assert file_states([a]) != f"{a} 5 {st.st_mtime_ns}\n"
    digests = content_digests([a])
    assert list(digests) == [str(a.resolve())] and digests_unchanged(digests)
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same content at another time: unchanged
    assert digests_unchanged(digests)
    a.write_bytes(b"54321")
    assert not digests_unchanged(digests)
    a.unlink()
    assert not digests_unchanged(digests)


def test_part_store_current_only_while_complete_and_inputs_unchanged(tmp_path):
    stats = tmp_path / "stats"
    stats.write_bytes(b"x")
    store = PartStore(tmp_path / "out")
    assert not store.has_parts() and not store.current(1, "fp")
    store.write(1, [{"utt": "a", "n": 1}, {"utt": "b", "n": 2}],
                {"fingerprint": "fp", "inputs": content_digests([stats])})
    assert store.has_parts() and store.current(1, "fp") and not store.current(1, "other") and not store.current(2, "fp")
    assert store.records(1) == [{"utt": "a", "n": 1}, {"utt": "b", "n": 2}] and store.summary(1)["fingerprint"] == "fp"
    stats.write_bytes(b"y")  # an input read by the part changed in place
    assert not store.current(1, "fp")
    store.paths(1)[1].write_text(json.dumps({"fingerprint": "fp"}) + "\n")  # no inputs recorded: not current
    assert not store.current(1, "fp")
    store.paths(1)[1].write_text("{cut short")
    assert not store.current(1, "fp")
    with pytest.raises(ValueError):  # no NaN in a part (not JSON)
        store.write(2, [{"utt": "a", "score": float("nan")}], {"fingerprint": "fp", "inputs": {}})
    assert dumps({"é": 1}) == '{"é": 1}'


def test_run_parts_here_and_in_workers_keeps_the_job_order():
    jobs = [(j, (j, 10), {}) for j in (1, 2, 3)]
    assert run_parts(operator.mul, jobs) == [10, 20, 30]
    assert run_parts(operator.mul, jobs, workers=2, threads=1) == [10, 20, 30]  # spawned processes
    assert run_parts(operator.mul, [], workers=3) == []


def test_run_parts_errors(tmp_path):
    jobs = [(1, ("1",), {}), (2, ("x",), {}), (3, ("y",), {})]
    with pytest.raises(ValueError, match="'x'"):  # here: the first failure, at once
        run_parts(int, jobs)
    with pytest.raises(ValueError, match="'x'"):  # in workers without logs: the first failed part's own error
        run_parts(int, jobs, workers=2)
    # in workers with logs: every part runs; each failed one is named with its log and error
    with pytest.raises(PartsFailed) as e:
        run_parts(int, jobs, workers=2, log_of=lambda j: tmp_path / "log" / f"p.{j}.log")
    assert [(f.job, f.log.name) for f in e.value.failures] == [(2, "p.2.log"), (3, "p.3.log")]
    assert str(e.value).splitlines()[0] == (f"job 2 (see {tmp_path / 'log/p.2.log'}): invalid literal for int() with "
                                            "base 10: 'x'")
    log2 = (tmp_path / "log/p.2.log").read_text().splitlines()
    assert log2[0].startswith("# Started at") and log2[-2] == "error: invalid literal for int() with base 10: 'x'"
    assert log2[-1].startswith("# Ended (code 1) at")
    assert (tmp_path / "log/p.1.log").read_text().splitlines()[-1].startswith("# Ended (code 0) at")


def test_run_parts_logs(tmp_path, caplog):
    """In a worker every record, stdout and stderr of the part go to its log; here the logger's records."""
    logs = lambda j: tmp_path / f"w.{j}.log"  # noqa: E731
    run_parts(print, [(1, ("printed in 1",), {}), (2, ("printed in 2",), {})], workers=2, log_of=logs)
    assert "printed in 2" in (tmp_path / "w.2.log").read_text()
    run_parts(logging.warning, [(1, ("warned in %d", 1), {}), (2, ("warned in %d", 2), {})], workers=2, log_of=logs)
    assert "WARNING root: warned in 2" in (tmp_path / "w.2.log").read_text()
    logger = logging.getLogger("test-parts")
    caplog.set_level("INFO")
    run_parts(logger.info, [(1, ("here %s", "one"), {})], log_of=lambda j: tmp_path / "here.log", logger=logger)
    assert (tmp_path / "here.log").read_text().rstrip().endswith("INFO test-parts: here one")
    assert "here one" in caplog.text  # and to the caller's handlers too
