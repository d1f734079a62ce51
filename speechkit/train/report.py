"""Training metrics on disk: ``metrics.jsonl`` (one JSON object per line) and the ``loss.png`` plot.

Record kinds written by the trainer:

- ``{"kind": "train", "epoch": e, "step": s, "lr": ..., "loss": ..., <task stats>, "grad_norm": ...,
  "time": unix_seconds}``: means over the last ``log_interval`` updates;
- ``{"kind": "epoch", "epoch": e, "step": s, "train/loss": ..., "valid/loss": ..., "best": bool, ...}``:
  end-of-epoch means (and a final ``"partial": true`` one when ``max_steps`` stops mid-epoch).
"""
from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from speechkit.utils.fileio import atomic_write
from speechkit.utils.jsonio import read_jsonl

# matplotlib is imported where used (heavy): only the loss figure needs it.

__all__ = ["MetricsLog", "read_metrics", "plot_losses", "training_summary", "last_and_best_epochs"]


class MetricsLog:
    """Append-only ``metrics.jsonl`` writer (each record flushed at once)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record (NaN/inf written as ``NaN``/``Infinity``, which ``json`` reads back)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=False) + "\n")
            f.flush()

    def truncate_after(self, step: int) -> int:
        """Atomically drop records with ``step > step`` (from a run killed after its last checkpoint)
        and unreadable lines (a line cut short by the kill); return how many were dropped."""
        if not self.path.exists():
            return 0
        kept, dropped = [], 0
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                ok = isinstance(rec, dict) and int(rec.get("step", 0)) <= step
            except (ValueError, TypeError):
                ok = False
            if ok:
                kept.append(line)
            else:
                dropped += 1
        if dropped:
            with atomic_write(self.path) as f:
                f.write("".join(ln + "\n" for ln in kept))
        return dropped


def read_metrics(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Yield the records of a ``metrics.jsonl`` file (none if it does not exist).

    A line that is not a JSON object (a record cut short by a killed run) is skipped with a warning
    naming the file and line (:func:`speechkit.utils.jsonio.read_jsonl`; :meth:`MetricsLog.truncate_after`
    drops such lines on resume).
    """
    yield from read_jsonl(path, expect=dict, skip_bad=True)


def plot_losses(metrics_path: str | os.PathLike, out_png: str | os.PathLike, title: str = "") -> bool:
    """Plot train (per log interval) and valid/train epoch losses vs update step, and the learning rate.

    Writes ``out_png`` atomically; returns ``False`` (writing nothing) when there is nothing to plot.
    """
    train_x, train_y, lr_x, lr_y = [], [], [], []
    ep_x, ep_train, ep_valid_x, ep_valid = [], [], [], []
    for rec in read_metrics(metrics_path):
        kind, step = rec.get("kind"), rec.get("step")
        if kind == "train" and _finite(rec.get("loss")):
            train_x.append(step)
            train_y.append(rec["loss"])
            if _finite(rec.get("lr")):
                lr_x.append(step)
                lr_y.append(rec["lr"])
        elif kind == "epoch":
            if _finite(rec.get("train/loss")):
                ep_x.append(step)
                ep_train.append(rec["train/loss"])
            if _finite(rec.get("valid/loss")):
                ep_valid_x.append(step)
                ep_valid.append(rec["valid/loss"])
    if not (train_x or ep_x or ep_valid_x):
        return False
    fig = _loss_figure(train_x, train_y, lr_x, lr_y, ep_x, ep_train, ep_valid_x, ep_valid, title)
    with atomic_write(out_png, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
    return True


#: the loss figure's margins (figure fractions): room for the tick labels, the axis labels and a title.
#: Fixed, not constrained_layout: its solver cost ~0.2 s at the end of every training (a few
#: seconds of every test run), for the same picture.
LOSS_FIGURE_MARGINS = {"left": 0.1, "right": 0.97, "bottom": 0.08, "top": 0.94, "hspace": 0.1}


def _loss_figure(train_x, train_y, lr_x, lr_y, ep_x, ep_train, ep_valid_x, ep_valid, title: str = ""):
    """The figure :func:`plot_losses` saves."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    fig = Figure(figsize=(8, 6.5))
    fig.subplots_adjust(**LOSS_FIGURE_MARGINS)
    ax, ax_lr = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    if train_x:
        ax.plot(train_x, train_y, color="tab:blue", alpha=0.35, lw=1, label="train (log interval)")
    if ep_x:
        ax.plot(ep_x, ep_train, "o-", color="tab:blue", label="train (epoch mean)")
    if ep_valid_x:
        ax.plot(ep_valid_x, ep_valid, "s-", color="tab:orange", label="valid")
    all_y = train_y + ep_train + ep_valid
    if all_y and min(all_y) > 0 and max(all_y) / min(all_y) > 50:
        ax.set_yscale("log")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    if lr_x:
        ax_lr.plot(lr_x, lr_y, color="tab:green")
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_xlabel("update step")
    ax_lr.grid(alpha=0.3)
    return fig


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


_LOG_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ ")
# the training loop's own progress lines (Trainer: "epoch 3 step 120: ...", "epoch 3 done ...",
# "epoch 3, step 7: gradient norm ...", "training finished: ..."): a run's span ends at its last one
_LOG_PROGRESS = re.compile(r": (epoch \d+[ ,]|training finished)")


def last_and_best_epochs(exp_dir: str | Path) -> tuple[dict | None, dict | None]:
    """The last epoch record of ``exp_dir/metrics.jsonl`` and the last one marked ``best``
    (``(None, None)`` without the file; either ``None`` when no such record).

    Raises:
        DataError: a line that is not a record and not cut short (:func:`read_metrics`).
    """
    last = best = None
    path = Path(exp_dir) / "metrics.jsonl"
    if path.is_file():
        for r in read_metrics(path):
            if r.get("kind") == "epoch":
                last = r
                if r.get("best"):
                    best = r
    return last, best


def training_summary(exp_dir: str | os.PathLike, metric: str = "valid/loss") -> dict[str, Any]:
    """What a results table says about one training run of ``speechkit-train``.

    Read from ``exp_dir/metrics.jsonl`` (the last and the best end-of-epoch records) and
    ``exp_dir/train.log`` (wall-clock time).

    Args:
        exp_dir: the experiment directory.
        metric: the record key reported as ``best_value`` (e.g. ``valid/mcd``).

    Returns:
        a dict with, where known, ``steps`` and ``epochs`` (of the last epoch record),
        ``best_epoch`` and ``best_value`` (of the last record marked best) and ``train_seconds``:
        the wall-clock training time in seconds, summed over the (re)starts of the run (each
        span from the start line ``... parameters, ... training items`` to that run's last
        progress line, ``epoch N step M: ...`` / ``epoch N done ...`` / ``training finished: ...``;
        so neither the time between a killed run and its restart nor the setup lines the next
        invocation logs before its start line count, and a re-run that found training finished
        adds nothing; a run killed before its first progress line counts 0 s). Empty when nothing
        is there.
    """
    exp_dir = Path(exp_dir)
    info: dict[str, Any] = {}
    last, best = last_and_best_epochs(exp_dir)
    if last:
        info["steps"], info["epochs"] = last["step"], last["epoch"]
    if best:
        info["best_epoch"] = best["epoch"]
        info["best_value"] = best.get(metric)
    log = exp_dir / "train.log"
    if log.is_file():
        total, start, prev = 0.0, None, None
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            m = _LOG_STAMP.match(line)
            if not m or "training already finished" in line:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
            if "parameters," in line and "training items" in line:  # a (re)start
                if start is not None and prev is not None:
                    total += (prev - start).total_seconds()
                start = prev = t
            elif start is not None and _LOG_PROGRESS.search(line):
                prev = t
        if start is not None and prev is not None:
            total += (prev - start).total_seconds()
        info["train_seconds"] = total
    return info
