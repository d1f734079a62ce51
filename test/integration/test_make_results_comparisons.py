"""Issue 38 case 12: a results page never drops a paired comparison without a word. The indic page (utt_counts.json
with one null entry: the two systems' utterance sets differ) and the tcstar page (test.json missing an utterance; a
NaN per-utterance MCD, which printed "+nan dB") say why the comparison is not given. Fake results/ trees, no
training."""
from __future__ import annotations

import json
import math
from pathlib import Path

from test_make_results_outputs import _cli, recipe_fixture

indic = recipe_fixture("indic_multilingual")
tcstar = recipe_fixture("tcstar_salad")


def _indic_results(root: Path, mono_wer: list, ms_wer: list) -> Path:
    run = root / "results" / "mini"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"test_sets": ["test"], "languages": ["aa"]}))
    utts = ["u1", "u2", "u3"]
    (run / "utt_counts.json").write_text(json.dumps({"test": {
        "utts": utts, "words": [4, 5, 6], "chars": [20, 25, 30],
        "decodes": {"mono/decode_test_oracle": {"wer": mono_wer, "cer": [4, 5, 6]},
                    "multisoftmax/decode_test_oracle": {"wer": ms_wer, "cer": [2, 3, 4]}}}}))
    return run


def _indic_page(indic, root, capsys) -> str:
    rc, err = _cli(indic, ["--results-dir", "results", "--out", "RESULTS.md"], capsys)
    assert rc == 0, err
    return (root / "RESULTS.md").read_text()


def test_indic_a_pair_with_different_utterances_says_why(indic, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _indic_results(tmp_path, [1, 2, 3], [0, None, 1])  # multi-softmax did not cover u2
    page = _indic_page(indic, tmp_path, capsys)
    row = next((ln for ln in page.splitlines() if ln.startswith("| multi-softmax vs monolingual |")), None)
    assert row is not None, page  # the comparison was dropped without a word
    assert "not compared: WER: the two systems were scored on different utterances: 1 only in A (e.g. u2)" in row
    assert row.count("|") == 9  # as many cells as the table's header


def test_indic_a_compared_pair_is_still_a_row(indic, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _indic_results(tmp_path, [1, 2, 3], [0, 1, 1])
    page = _indic_page(indic, tmp_path, capsys)
    row = next(ln for ln in page.splitlines() if ln.startswith("| multi-softmax vs monolingual |"))
    assert "| 40.00 -> 13.33 |" in row and "not compared" not in row


def _utts(mcd: list, frames=(40, 25, 60)) -> dict:
    utts = [{"utt": f"u{i}", "n_frames": n, "mcd_db": m} for i, (m, n) in enumerate(zip(mcd, frames))]
    return {"mcd_db": 5.0, "utterances": utts}


def _tcstar_page(tcstar, root: Path, musa: dict, salad: dict, capsys) -> str:
    sdir = root / "results" / "mini" / "sp01"
    for m, sc in (("musa_rnn_small", musa), ("salad_small", salad)):
        (sdir / m).mkdir(parents=True, exist_ok=True)
        (sdir / m / "test.json").write_text(json.dumps(sc))
    (sdir / "speaker.json").write_text(json.dumps({"n_train": 4, "n_dev": 1, "n_test": 3}))
    rc, err = _cli(tcstar, ["--results-dir", "results", "--results-md", "RESULTS.md"], capsys)
    assert rc == 0, err
    return (root / "RESULTS.md").read_text()


def test_tcstar_a_nan_mcd_is_said_not_printed(tcstar, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    page = _tcstar_page(tcstar, tmp_path, _utts([6.0, 7.0, 5.5]), _utts([5.0, math.nan, 5.1]), capsys)
    assert "nan dB" not in page.replace("MCD is nan dB", "")
    assert ("SALAD small minus MUSA-RNN small, MCD (speechkit convention): not compared (utterance 'u1': "
            "salad_small's MCD is nan dB, not a finite number).") in page


def test_tcstar_a_missing_utterance_is_said(tcstar, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    salad = _utts([5.0, 5.2, 5.1])
    salad["utterances"].pop(1)
    page = _tcstar_page(tcstar, tmp_path, _utts([6.0, 7.0, 5.5]), salad, capsys)
    assert ("SALAD small minus MUSA-RNN small, MCD (speechkit convention): not compared (the two systems were "
            "scored on different utterances: 1 only in A (e.g. u1)).") in page
    # the same utterances: the difference with its interval, as before
    page = _tcstar_page(tcstar, tmp_path, _utts([6.0, 7.0, 5.5]), _utts([5.0, 5.2, 5.1]), capsys)
    assert "SALAD small minus MUSA-RNN small, MCD (speechkit convention): **-" in page and "95 % interval" in page
