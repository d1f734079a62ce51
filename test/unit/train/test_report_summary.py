"""speechkit.train.report.training_summary: steps/epochs/best from metrics.jsonl, wall time from train.log."""
import json

from speechkit.train.report import training_summary


def test_training_summary_sums_the_restarts(tmp_path):
    recs = [
        {"kind": "train", "epoch": 1, "step": 5, "loss": 3.0},
        {"kind": "epoch", "epoch": 1, "step": 10, "valid/mcd": 9.0, "best": True},
        {"kind": "epoch", "epoch": 2, "step": 20, "valid/mcd": 8.0, "best": True},
        {"kind": "epoch", "epoch": 3, "step": 30, "valid/mcd": 8.5, "best": False},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + "{cut short\n")
    (tmp_path / "train.log").write_text(
        "2026-01-01 10:00:00,000 INFO x: task salad: 1,000 parameters, 5 training items (2 batches/epoch)\n"
        "2026-01-01 10:00:30,000 INFO x: epoch 1\n"
        "2026-01-01 10:01:00,000 INFO x: killed here\n"          # first run: 60 s
        "2026-01-01 11:00:00,000 INFO x: task salad: 1,000 parameters, 5 training items (2 batches/epoch)\n"
        "2026-01-01 11:00:45,000 INFO x: training finished\n"    # second run: 45 s
        "2026-01-01 12:00:00,000 INFO x: training already finished\n")   # a re-run that did nothing
    s = training_summary(tmp_path, "valid/mcd")
    assert s == {"steps": 30, "epochs": 3, "best_epoch": 2, "best_value": 8.0, "train_seconds": 105.0}


def test_training_summary_of_an_empty_dir(tmp_path):
    assert training_summary(tmp_path) == {}
