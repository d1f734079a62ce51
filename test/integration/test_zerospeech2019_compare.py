"""egs/zerospeech2019/local/compare_abx.py on a hand-made experiment tree: systems scored by speechkit-score-abx
(as stage 6 does), compared with the paired bootstrap of the library, and its errors."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from speechkit.bin import score_abx
from speechkit.scoring.abx import abx_error, paired_bootstrap_difference
from speechkit.scoring.abx_items import read_item_file, write_item_file

SCRIPT = Path(__file__).resolve().parents[2] / "egs/zerospeech2019/local/compare_abx.py"


@pytest.fixture(scope="module")
def compare_abx():
    spec = importlib.util.spec_from_file_location("compare_abx", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(tmp: Path):
    """Four speakers, phones a/b/c; 'good' separates the phones, 'bad' is noise; both scored as stage 6."""
    rng = np.random.default_rng(0)
    centres = {p: rng.normal(size=6) for p in "abc"}
    rows, feats = [], {"good": {}, "bad": {}}
    for s in range(4):
        utt = f"s{s}_u0"
        frames, t = [], 0.0
        for k in range(24):
            p = "abc"[k % 3]
            n = int(rng.integers(3, 7))
            frames.append([centres[p] + rng.normal(scale=0.9, size=6) for _ in range(n)])
            rows.append((utt, f"{t:.2f}", f"{t + n * 0.01:.2f}", p, "x", "x", f"s{s}"))  # one context: no-context ABX
            t += n * 0.01
        good = np.concatenate([np.stack(f) for f in frames])
        feats["good"][utt] = good
        feats["bad"][utt] = rng.normal(size=good.shape)
    item = tmp / "data" / "test" / "abx_nocontext.item"
    item.parent.mkdir(parents=True)
    write_item_file(item, rows)
    for name, fs in feats.items():
        d = tmp / "exp" / name / "units" / "test"
        d.mkdir(parents=True)
        for utt, m in fs.items():
            np.savetxt(d / f"{utt}.txt", m)
        assert score_abx.main([str(d), str(item), "--json", str(tmp / "exp" / name / "scores" / "abx_nocontext_across.json")]) == 0
    return item, feats


def test_paired_comparison_table(tmp_path, compare_abx, capsys):
    item, feats = _tree(tmp_path)
    out = tmp_path / "exp" / "COMPARISONS.md"
    assert compare_abx.main(["--expdir", str(tmp_path / "exp"), "--out", str(out), "--bootstrap", "200",
                             "--seed", "3", "good=bad", "bad=bad"]) == 0
    rows = json.loads(out.with_suffix(".json").read_text())
    items = read_item_file(item)
    want = paired_bootstrap_difference(abx_error(feats["good"], items), abx_error(feats["bad"], items), 200, seed=3)
    assert rows[0]["difference"] == pytest.approx(want.difference) and rows[0]["low"] == pytest.approx(want.low)
    assert rows[0]["verdict"] == "better beyond noise" and rows[0]["difference"] < -10
    assert rows[1]["difference"] == 0.0 and rows[1]["verdict"] == "within noise"
    table = out.read_text()
    assert "| good | bad |" in table and f"{want.difference:+.2f} [{want.low:+.2f}, {want.high:+.2f}]" in table


def test_errors_name_the_system(tmp_path, compare_abx, capsys):
    _tree(tmp_path)
    out = tmp_path / "exp" / "C.md"
    assert compare_abx.main(["--expdir", str(tmp_path / "exp"), "--out", str(out), "good=nothing"]) == 1
    assert "nothing: no " in capsys.readouterr().err and not out.exists()
    assert compare_abx.main(["--expdir", str(tmp_path / "exp"), "--out", str(out), "good"]) == 1
    assert "not SYSTEM=REFERENCE" in capsys.readouterr().err
    # features changed after stage 6 scored them: the rescore disagrees with the JSON
    np.savetxt(tmp_path / "exp" / "bad" / "units" / "test" / "s0_u0.txt",
               np.random.default_rng(9).normal(size=(200, 6)))
    assert compare_abx.main(["--expdir", str(tmp_path / "exp"), "--out", str(out), "good=bad"]) == 1
    assert "features changed since stage 6" in capsys.readouterr().err and not out.exists()
