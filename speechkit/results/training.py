"""What a results table says about one training run: one reader for every recipe.

:func:`summarize` reads a ``speechkit-train`` experiment folder (or the copy a collect made of it:
``metrics.jsonl``'s epoch records, ``wallclock``): updates, epochs, the best epoch and its metric, the
wall-clock training time from ``train.log`` (:func:`speechkit.train.report.training_summary`), and with
``detail`` the validation figures of the best and last epochs and the time ``run.sh`` measured around
the stage (``wallclock``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from speechkit.train.report import last_and_best_epochs, training_summary
from speechkit.utils.fileio import DataError

__all__ = ["summarize", "read_wallclock", "WALLCLOCK_FILE"]

#: Seconds ``run.sh`` measured around a training stage, one line per (re)start: ``<seconds> [what]``.
WALLCLOCK_FILE = "wallclock"


def read_wallclock(path: str | os.PathLike) -> int:
    """The seconds of a ``wallclock`` file summed over its lines (each starts with whole seconds).

    Raises:
        DataError: a line that does not start with whole seconds (names the file and line).
        OSError: the file cannot be read.
    """
    total = 0
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            total += int(line.split()[0])
        except ValueError:
            raise DataError(f"{path}:{n}: expected '<seconds> ...', got {line.strip()!r}") from None
    return total


def summarize(exp_dir: str | os.PathLike, metric: str = "valid/loss", detail: bool = False) -> dict[str, Any]:
    """One training run as the results tables show it.

    Args:
        exp_dir: the experiment folder of ``speechkit-train`` (or a collected copy of its files).
        metric: the epoch record's key reported as ``best_value`` (``valid/mcd``).
        detail: also the validation figures and ``run.sh``'s wall clock (below).

    Returns:
        where known: ``steps`` and ``epochs`` (the last epoch record), ``best_epoch`` and ``best_value``
        (the last record marked best), ``train_seconds`` (wall-clock training time from ``train.log``,
        summed over restarts); with ``detail`` also ``best_valid`` / ``last_valid`` (the ``valid/*``
        figures of the best / the last epoch record) and ``wallclock_seconds`` (:func:`read_wallclock`
        of ``exp_dir/wallclock``). Empty when the folder holds none of these files.

    Raises:
        DataError: a ``metrics.jsonl`` line that is not a record and not cut short, a malformed ``wallclock``.
    """
    exp_dir = Path(exp_dir)
    info = training_summary(exp_dir, metric)
    if not detail:
        return info
    last, best = last_and_best_epochs(exp_dir)
    for key, rec in (("best_valid", best), ("last_valid", last)):
        if rec is not None:
            info[key] = {k: v for k, v in rec.items() if k.startswith("valid/")}
    if (exp_dir / WALLCLOCK_FILE).is_file():
        info["wallclock_seconds"] = read_wallclock(exp_dir / WALLCLOCK_FILE)
    return info
