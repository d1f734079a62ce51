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
        "2026-01-01 09:59:58,000 INFO speechkit.tasks.salad: salad model: 1,000 parameters\n"
        "2026-01-01 10:00:00,000 INFO x: task salad: 1,000 parameters, 5 training items (2 batches/epoch)\n"
        "2026-01-01 10:00:30,000 INFO x: epoch 1 step 3: loss=1.0 lr=0.001\n"
        "2026-01-01 10:01:00,000 INFO x: epoch 1 done (step 5): valid/mcd=9.0 (best)\n"   # killed: 60 s
        # the restart's setup lines, an hour later, are not the first run's time
        "2026-01-01 11:00:00,000 WARNING x: resuming: model.x is not in the saved config (a newer field)\n"
        "2026-01-01 11:00:01,000 INFO x: resuming from ckpt-e0001.pt: step 5, after epoch 1\n"
        "2026-01-01 11:00:02,000 INFO x: task salad: 1,000 parameters, 5 training items (2 batches/epoch)\n"
        "2026-01-01 11:00:20,000 WARNING x: epoch 2, step 7: gradient norm is nan; update skipped\n"
        "2026-01-01 11:00:45,000 INFO x: training finished: reached max_epochs=3 (epoch 3, step 30)\n"  # 43 s
        "2026-01-01 11:00:46,000 INFO x: wrote loss.png\n"
        # a re-run that found training finished adds nothing, its warning included
        "2026-01-01 12:00:00,000 WARNING x: resuming: model.y is not in the saved config (a newer field)\n"
        "2026-01-01 12:00:00,000 INFO x: exp: training already finished (reached max_epochs=3) at epoch 3\n")
    s = training_summary(tmp_path, "valid/mcd")
    assert s == {"steps": 30, "epochs": 3, "best_epoch": 2, "best_value": 8.0, "train_seconds": 103.0}


def test_training_summary_of_an_empty_dir(tmp_path):
    assert training_summary(tmp_path) == {}
