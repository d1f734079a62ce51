"""speechkit.results.training.summarize: the one training-summary reader of the results tables."""
from __future__ import annotations

import json

import pytest

from speechkit.results.training import read_wallclock, summarize
from speechkit.utils.fileio import DataError


def _exp(d, with_log=True):
    d.mkdir(parents=True, exist_ok=True)
    recs = [{"kind": "train", "epoch": 1, "step": 5, "loss": 9.0},
            {"kind": "epoch", "epoch": 1, "step": 10, "valid/loss": 5.0, "valid/recon": 4.0, "train/loss": 6.0,
             "best": True},
            {"kind": "epoch", "epoch": 2, "step": 20, "valid/loss": 6.0, "valid/recon": 4.5, "best": False}]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    if with_log:
        (d / "train.log").write_text(
            "2026-01-01 10:00:00,000 INFO speechkit.train.trainer: task x: 1,000 parameters, 8 training items\n"
            "2026-01-01 10:02:30,000 INFO speechkit.train.trainer: epoch 2 done\n")
    (d / "wallclock").write_text("100 2026-01-01\n\n36 2026-01-02\n")
    return d


def test_summarize(tmp_path):
    e = _exp(tmp_path / "e")
    s = summarize(e, "valid/recon")
    assert s == {"steps": 20, "epochs": 2, "best_epoch": 1, "best_value": 4.0, "train_seconds": 150.0}
    d = summarize(e, detail=True)
    assert d["best_value"] == 5.0 and d["wallclock_seconds"] == 136
    assert d["best_valid"] == {"valid/loss": 5.0, "valid/recon": 4.0}  # valid/* only, of the best epoch
    assert d["last_valid"] == {"valid/loss": 6.0, "valid/recon": 4.5}
    # a collected copy (epoch lines and wallclock, no train.log): no train_seconds
    c = _exp(tmp_path / "c", with_log=False)
    assert "train_seconds" not in summarize(c, detail=True) and summarize(c, detail=True)["wallclock_seconds"] == 136
    assert summarize(tmp_path / "nothing", detail=True) == {}


def test_a_bad_wallclock_line_is_named(tmp_path):
    (tmp_path / "wallclock").write_text("100 a\n1h20 b\n")
    with pytest.raises(DataError, match=r"wallclock:2: expected '<seconds> \.\.\.', got '1h20 b'"):
        read_wallclock(tmp_path / "wallclock")
