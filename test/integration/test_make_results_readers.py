"""Issue 38 cases 15 and 16 on the four recipes' local/make_results.py (fake results/ and exp/ trees, no training):
a results/<run>/runs.jsonl cut short renders with a warning naming its line (indic, tcstar and vctk crashed with a
traceback, and every later render failed on the torn line record-run appends after), and a score JSON cut short is
one error line naming the file and line (it was the JSON parser's message without a file, or silently no table)."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from speechkit.utils.provenance import record_run
from test_make_results_outputs import _cli, _load

TORN = '{"date": "2026-01-02T00:00:00Z", "cmdline": "./run.sh --sta'


@pytest.fixture(scope="module")
def mods():
    return {r: _load(r) for r in ("zerospeech2019", "vctk_continual", "indic_multilingual", "tcstar_salad")}


def _runs(run: Path, root: Path) -> None:
    """runs.jsonl: a record, one cut short (a killed record-run), and the record the next record-run appended."""
    record_run(run / "runs.jsonl", "./run.sh --stage 1", cwd=root)
    with open(run / "runs.jsonl", "a") as f:
        f.write(TORN)
    record_run(run / "runs.jsonl", "./run.sh --stage 2", cwd=root)


def _zs_run(run: Path) -> None:
    (run / "vq" / "scores").mkdir(parents=True)
    (run / "test_set.json").write_text(json.dumps({"corpus": "mini", "tag": "vq", "speakers": 2}))
    (run / "vq" / "scores" / "abx_across.json").write_text(json.dumps({"error": 30.0, "n_triplets": 5}))


def _vctk_run(run: Path) -> None:
    (run / "sa" / "order1").mkdir(parents=True)
    (run / "setup.json").write_text(json.dumps({"corpus": "mini", "continual_speakers": ["s3", "s4"]}))
    (run / "sa" / "order1" / "scores.json").write_text(json.dumps(
        {"order": ["s3", "s4"], "retained_accuracy": [1.0, 0.5], "forgetting": [None, 0.5],
         "verifier_accuracy": [1.0, 0.9], "final_ra": 0.5, "final_fg": 0.5, "complete": True}))


def _indic_run(run: Path) -> None:
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"test_sets": ["test"], "languages": ["aa"]}))


def _tcstar_run(run: Path) -> None:
    (run / "sp01" / "salad_small").mkdir(parents=True)
    (run / "sp01" / "speaker.json").write_text(json.dumps({"n_train": 4, "n_dev": 1, "n_test": 2}))
    (run / "sp01" / "salad_small" / "test.json").write_text(json.dumps({"mcd_db": 5.0, "utterances": []}))


RECIPES = {"zerospeech2019": (_zs_run, lambda r: ["--render", "RESULTS.md", "--results", str(r)]),
           "vctk_continual": (_vctk_run, lambda r: ["--render", "RESULTS.md", "--results", str(r)]),
           "indic_multilingual": (_indic_run, lambda r: ["--results-dir", str(r), "--out", "RESULTS.md"]),
           "tcstar_salad": (_tcstar_run, lambda r: ["--results-dir", str(r), "--results-md", "RESULTS.md"])}


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_a_torn_runs_jsonl_renders_with_a_warning(recipe, mods, tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.chdir(tmp_path)
    make, argv = RECIPES[recipe]
    make(tmp_path / "results" / "mini")
    _runs(tmp_path / "results" / "mini", tmp_path)
    with caplog.at_level(logging.WARNING):
        rc, err = _cli(mods[recipe], argv(tmp_path / "results"), capsys)
    assert rc == 0, err  # no traceback: an uncaught error would leave _cli
    page = (tmp_path / "RESULTS.md").read_text()
    assert "./run.sh --stage 1" in page and "./run.sh --stage 2" in page and "--sta\n" not in page
    assert any("runs.jsonl:2: a record cut short" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("recipe, score_file", [("zerospeech2019", "vq/scores/abx_across.json"),
                                                ("vctk_continual", "sa/order1/scores.json"),
                                                ("tcstar_salad", "sp01/salad_small/test.json")])
def test_a_torn_score_file_is_named_when_rendering(recipe, score_file, mods, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    make, argv = RECIPES[recipe]
    make(tmp_path / "results" / "mini")
    f = tmp_path / "results" / "mini" / score_file
    f.write_text(f.read_text()[:-9])
    rc, err = _cli(mods[recipe], argv(tmp_path / "results"), capsys)
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert f"{score_file}:1:" in err and "not valid JSON" in err and "cut short" in err
    assert not (tmp_path / "RESULTS.md").exists()


def test_indic_a_torn_utt_counts_is_named_not_a_silently_missing_table(mods, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _indic_run(tmp_path / "results" / "mini")
    (tmp_path / "results" / "mini" / "utt_counts.json").write_text('{"test": {"utts": ["u1", "u2"], "words": [3')
    rc, err = _cli(mods["indic_multilingual"], ["--results-dir", "results", "--out", "RESULTS.md"], capsys)
    assert rc == 1 and "results/mini/utt_counts.json:1:" in err and "cut short" in err, err


def test_zerospeech_collect_names_a_torn_score_file_and_keeps_the_run(mods, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scores = tmp_path / "exp" / "vq" / "scores"
    scores.mkdir(parents=True)
    (scores / "abx_across.json").write_text(json.dumps({"error": 30.0, "n_triplets": 5}))
    (scores / "abx_within.json").write_text('{"error": 20.0, "n_tri')
    (tmp_path / "data").mkdir()
    _zs_run(tmp_path / "results" / "mini")
    rc, err = _cli(mods["zerospeech2019"], ["--collect", "results/mini", "--expdir", "exp", "--datadir", "data",
                                            "--tag", "vq"], capsys)
    assert rc == 1 and "exp/vq/scores/abx_within.json:1:" in err and "cut short" in err, err
    assert json.loads((tmp_path / "results" / "mini" / "test_set.json").read_text())["tag"] == "vq"
