"""speechkit.utils.jsonio (issue 38 cases 15, 16): every JSON / JSON-lines read names the file and line on failure;
a record cut short (a killed run, a full disk) is skipped with a warning, never a traceback, and a cache cut short
is computed again instead of failing on every later run."""
from __future__ import annotations

import json
import logging

import pytest

from speechkit.utils import provenance
from speechkit.utils.fileio import DataError
from speechkit.utils.jsonio import read_json, read_json_cache, read_jsonl

REC = {"cmdline": "./run.sh --stage 3", "date": "2026-01-01T00:00:00Z"}


def test_read_json_names_file_line_and_column(tmp_path):
    p = tmp_path / "scores" / "abx_across.json"
    p.parent.mkdir()
    p.write_text('{\n  "error": 27.5,\n  "n_triplets": 12')  # cut short
    with pytest.raises(DataError, match=r"abx_across\.json:3:\d+: not valid JSON \(.*\); the file is cut short"):
        read_json(p)
    p.write_text('{\n  "error": 27.5,,\n}')  # written wrong, not cut short
    with pytest.raises(DataError, match=r"abx_across\.json:2:\d+: not valid JSON") as e:
        read_json(p)
    assert "cut short" not in str(e.value)
    p.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DataError, match="abx_across.json: not UTF-8"):
        read_json(p)
    p.write_text("[1, 2]")
    assert read_json(p) == [1, 2]
    with pytest.raises(DataError, match="abx_across.json: expected a JSON object, found a JSON list"):
        read_json(p, expect=dict)
    p.write_text('{"mcd_db": NaN}')
    assert read_json(p)["mcd_db"] != read_json(p)["mcd_db"]  # NaN, as Python's json writes it
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")


def test_a_cache_cut_short_is_none_with_a_warning(tmp_path, caplog):
    p = tmp_path / "episode_01.json"
    assert read_json_cache(p) is None  # absent: no warning
    p.write_text('{"episode": 1, "accuracy": {"a": 0.5')
    with caplog.at_level(logging.WARNING):
        assert read_json_cache(p) is None
    assert any("episode_01.json:1:" in r.getMessage() and "computed again" in r.getMessage() for r in caplog.records)
    p.write_text('["not", "a", "dict"]')
    assert read_json_cache(p) is None
    p.write_text('{"episode": 1}')
    assert read_json_cache(p) == {"episode": 1}


@pytest.mark.parametrize("torn", ['{"cmdline": "./run.sh", "dat', '{"cmdline": "./run.sh", "cpu_count": 1',
                                  '{"cmdline": "./run.sh", "gpu": nu', '{"cmdline": "./run.sh", "x": 1.', "{"])
def test_a_torn_record_is_skipped_with_a_warning_last_or_followed_by_more(tmp_path, caplog, torn):
    p = tmp_path / "runs.jsonl"
    p.write_text(json.dumps(REC) + "\n" + torn)  # the last line, no newline
    with caplog.at_level(logging.WARNING):
        assert read_jsonl(p) == [REC]
    assert any("runs.jsonl:2: a record cut short" in r.getMessage() for r in caplog.records)
    # record_run appends the next record on a line of its own: the torn one stays, inside the file
    p.write_text(json.dumps(REC) + "\n" + torn + "\n" + json.dumps(REC) + "\n")
    assert read_jsonl(p) == [REC, REC]


def test_other_bad_lines_are_errors_naming_file_and_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"a": 1}\nnot json at all\n{"a": 2}\n')
    with pytest.raises(DataError, match=r"metrics\.jsonl:2: not JSON"):
        read_jsonl(p)
    p.write_text('{"a": 1}\n{"a": 1}}\n')
    with pytest.raises(DataError, match=r"metrics\.jsonl:2: not JSON"):
        read_jsonl(p)
    p.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(DataError, match=r"metrics\.jsonl:2: not a JSON object"):
        read_jsonl(p)
    assert read_jsonl(p, expect=None) == [{"a": 1}, [1, 2]]
    assert read_jsonl(tmp_path / "absent.jsonl") == []
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "absent.jsonl", missing_ok=False)


def test_read_runs_after_a_torn_record_and_a_later_record_run(tmp_path, caplog):
    """Case 15: record-run starts its record after a torn line on a new line; every later read skips the torn one."""
    p = tmp_path / "runs.jsonl"
    provenance.record_run(p, "./run.sh --stage 1", cwd=tmp_path)
    with open(p, "a") as f:
        f.write('{"date": "2026-01-01T00:00:00Z", "cmdline": "./run.sh --st')  # killed while writing
    with caplog.at_level(logging.WARNING):
        assert [r["cmdline"] for r in provenance.read_runs(p)] == ["./run.sh --stage 1"]
        provenance.record_run(p, "./run.sh --stage 2", cwd=tmp_path)
        assert [r["cmdline"] for r in provenance.read_runs(p)] == ["./run.sh --stage 1", "./run.sh --stage 2"]
    assert sum("runs.jsonl:2: a record cut short" in r.getMessage() for r in caplog.records) == 2
    assert "./run.sh --stage 2" in provenance.markdown_header(provenance.read_runs(p))


def test_skip_bad_warns_for_every_line_it_skips(tmp_path, caplog):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1}\n{cut short\n[2]\n{"step": 3}\n')
    with caplog.at_level(logging.WARNING):
        assert read_jsonl(p, skip_bad=True) == [{"step": 1}, {"step": 3}]
    msgs = [r.getMessage() for r in caplog.records]
    assert any("metrics.jsonl:2: not JSON" in m for m in msgs) and any("metrics.jsonl:3: not a JSON object" in m
                                                                       for m in msgs)
