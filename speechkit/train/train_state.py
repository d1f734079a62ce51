"""The progress of a training run, as every checkpoint saves it and a resumed run restores it.

:class:`TrainState` holds the counters (updates, epochs, the position inside an epoch), the best
value of ``best_metric`` with its epoch and step, the early-stopping counter, and the running
means of the training statistics (:class:`RunningMeans`: weighted sums, so a run resumed inside
an epoch or a log interval reports exactly what an uninterrupted one would). ``to_dict`` /
``from_dict`` are its checkpoint form (plain Python values; unknown keys are ignored on load).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class RunningMeans:
    """Weighted sums of named statistics (restorable from a checkpoint)."""

    def __init__(self, state: dict | None = None) -> None:
        self.sums: dict[str, float] = dict((state or {}).get("sums", {}))
        self.weights: dict[str, float] = dict((state or {}).get("weights", {}))

    def add(self, stats: dict[str, float], weight: float = 1.0) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v) * weight
            self.weights[k] = self.weights.get(k, 0.0) + weight

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}

    def reset(self) -> None:
        self.sums.clear()
        self.weights.clear()

    def state(self) -> dict:
        return {"sums": dict(self.sums), "weights": dict(self.weights)}


@dataclass
class TrainState:
    """Progress counters saved in every checkpoint.

    Attributes:
        step: optimizer updates done.
        epoch: epochs completed.
        batches_done: batches of epoch ``epoch + 1`` already trained (0 between epochs).
        best_value: best value of ``best_metric`` so far (None before the first validation).
        best_epoch: epoch of ``best_value``.
        best_step: update step of ``best_value``.
        bad_epochs: consecutive epochs without improvement (early stopping counter).
        skipped_updates: updates skipped for a non-finite gradient norm.
    """

    step: int = 0
    epoch: int = 0
    batches_done: int = 0
    best_value: float | None = None
    best_epoch: int = 0
    best_step: int = 0
    bad_epochs: int = 0
    skipped_updates: int = 0
    epoch_stats: RunningMeans = field(default_factory=RunningMeans)
    interval_stats: RunningMeans = field(default_factory=RunningMeans)

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["epoch_stats"] = self.epoch_stats.state()
        d["interval_stats"] = self.interval_stats.state()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainState":
        d = dict(d)
        epoch_stats = RunningMeans(d.pop("epoch_stats", None))
        interval_stats = RunningMeans(d.pop("interval_stats", None))
        known = {f.name for f in dataclasses.fields(cls)}
        st = cls(**{k: v for k, v in d.items() if k in known})
        st.epoch_stats, st.interval_stats = epoch_stats, interval_stats
        return st
