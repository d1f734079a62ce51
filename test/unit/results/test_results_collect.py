"""speechkit.results.collect and .page: a collect never loses a file a person wrote, and writes a run folder
whole or not at all; a page is read from the run folders alone."""
from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

from speechkit.results.collect import copy_files, run_folder, write_json
from speechkit.results.page import provenance, read_json_if, run_dirs, write_page
from speechkit.utils.fileio import DataError
from speechkit.utils.outputs import OWNER_FILE, OutputOverlapError
from speechkit.utils.provenance import record_run

OWNER = "egs/x/local/make_results.py --collect"
SIG = ("setup.json",)


def _collect(out, runs=None, **kw):
    with run_folder(out, owner=OWNER, signature=SIG, runs=runs, **kw) as d:
        (d / "setup.json").write_text("{}")
        return d


def test_a_collect_replaces_its_folder_whole_and_keeps_the_notes(tmp_path):
    out = tmp_path / "results" / "mini"
    record_run(tmp_path / "runs.jsonl", "./run.sh --stage 8", cwd=tmp_path)
    with run_folder(out, owner=OWNER, signature=SIG, runs=tmp_path / "runs.jsonl") as d:
        assert d != out  # a temporary folder, swapped in at the end
        (d / "setup.json").write_text("{}")
        (d / "old_system.json").write_text("{}")
    assert (out / OWNER_FILE).read_text().strip() == OWNER and (out / "runs.jsonl").is_file()
    (out / "NOTES.md").write_text("how this run was made\n")
    _collect(out)
    assert (out / "NOTES.md").read_text() == "how this run was made\n"  # hand-written: kept
    assert not (out / "old_system.json").exists()                       # the rest is this collect's: replaced
    assert not list(out.parent.glob("*.tmp*")) and not (out / ".backup").exists()


def test_a_collect_refuses_a_folder_it_did_not_make(tmp_path):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("a user's file\n")
    with pytest.raises(OutputOverlapError, match="exists and is not a results run folder this collect made"):
        _collect(mine)
    assert sorted(p.name for p in mine.iterdir()) == ["chapter1.tex"]  # nothing written, nothing lost
    # nor a folder of what it reads, nor the results root holding runs
    (tmp_path / "exp").mkdir()
    with pytest.raises(OutputOverlapError, match="lies inside --expdir"):
        _collect(tmp_path / "exp" / "run", reads={"--expdir": tmp_path / "exp"})
    _collect(tmp_path / "results" / "a")
    with pytest.raises(OutputOverlapError, match="holds the results run folder"):
        _collect(tmp_path / "results")
    assert (tmp_path / "results" / "a" / "setup.json").is_file()


def test_a_failed_collect_leaves_the_previous_folder(tmp_path):
    out = tmp_path / "mini"
    _collect(out)
    (out / "NOTES.md").write_text("notes\n")
    with pytest.raises(RuntimeError):
        with run_folder(out, owner=OWNER, signature=SIG) as d:
            (d / "setup.json").write_text('{"half": ')
            raise RuntimeError("killed")
    assert (out / "setup.json").read_text() == "{}" and (out / "NOTES.md").read_text() == "notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mini"]  # no temporary left


def test_a_merging_collect_keeps_what_earlier_collects_wrote(tmp_path, caplog):
    out = tmp_path / "mini"
    with run_folder(out, owner=OWNER, signature=SIG, merge=True) as d:
        assert d == out
        (d / "setup.json").write_text("{}")
        (d / "small").mkdir()
    with caplog.at_level(logging.WARNING), run_folder(out, owner=OWNER, signature=SIG, merge=True,
                                                      runs=tmp_path / "runs_mini.jsonl") as d:
        (d / "big").mkdir()
    assert (out / "small").is_dir() and (out / "big").is_dir() and (out / OWNER_FILE).is_file()
    assert any("runs_mini.jsonl: no run records" in r.getMessage() for r in caplog.records)  # said, not silent


def test_copy_files_and_write_json(tmp_path):
    (tmp_path / "sys" / "scoring").mkdir(parents=True)
    (tmp_path / "sys" / "scoring" / "wer.json").write_text("{}")
    assert copy_files(tmp_path / "sys", tmp_path / "out", ["scoring/wer.json", "scoring/cer.json"]) == \
        ["scoring/wer.json"]
    assert (tmp_path / "out" / "scoring" / "wer.json").is_file()
    write_json(tmp_path / "a" / "x.json", {"n": np.int64(3), "v": np.float32(0.5)})
    assert (tmp_path / "a" / "x.json").read_text() == '{\n "n": 3,\n "v": 0.5\n}\n'
    write_json(tmp_path / "c.json", {"a": [1, 2]}, indent=None)
    assert (tmp_path / "c.json").read_text() == '{"a":[1,2]}\n'
    with pytest.raises(ValueError, match=r"y\.json: .*NaN"):
        write_json(tmp_path / "y.json", {"mcd": math.nan})
    assert not (tmp_path / "y.json").exists()
    write_json(tmp_path / "y.json", {"mcd": math.nan}, allow_nan=True)
    assert math.isnan(json.loads((tmp_path / "y.json").read_text())["mcd"])


def test_page_helpers(tmp_path):
    res = tmp_path / "results"
    for name in ("zeta", "alpha", "mini", "local"):
        (res / name).mkdir(parents=True)
        (res / name / "setup.json").write_text("{}")
    (res / "notes").mkdir()
    assert [d.name for d in run_dirs(res, "setup.json", first=("mini", "local"))] == ["mini", "local", "alpha", "zeta"]
    assert [d.name for d in run_dirs(res, lambda d: any(d.iterdir()))] == ["alpha", "local", "mini", "zeta"]
    assert run_dirs(tmp_path / "none", "setup.json") == []
    assert read_json_if(res / "mini" / "setup.json") == {} and read_json_if(res / "mini" / "no.json") is None
    (res / "mini" / "torn.json").write_text('{"a": ')
    with pytest.raises(DataError, match=r"torn\.json:1:"):
        read_json_if(res / "mini" / "torn.json")
    assert provenance(res / "mini").startswith("No run records")
    record_run(res / "mini" / "runs.jsonl", "./run.sh", cwd=tmp_path)
    head = provenance(res / "mini")
    assert head.startswith("### Environment") and "### Commands" in head and "\n## " not in head
    assert write_page(tmp_path / "p" / "RESULTS.md", ["# t", "", "x", "", ""]) == "# t\n\nx\n"
    assert (tmp_path / "p" / "RESULTS.md").read_text() == "# t\n\nx\n"
