"""Resuming a training run: where from, whether it may, and putting its random streams back.

A run in ``exp_dir`` resumes from ``checkpoints/latest.pt`` (:func:`find_resume_point`; with
``resume=False`` an earlier run is moved to ``exp_dir/prev-<time>/`` instead, nothing deleted).
Before it does, :func:`check_resume_config` compares the saved config with the current one: a
changed key outside ``trainer.``, or one of :data:`FROZEN_ON_RESUME`, is refused; the trainer keys
of :data:`SAFE_TO_CHANGE` are logged, any other trainer key is warned about (and refused when the
run has finished: :func:`refuse_changes_to_finished_run`); and
:func:`check_data_fingerprint` refuses data whose content changed since the checkpoint was
written (:mod:`speechkit.data.fingerprint`). :func:`restore_rng` puts this rank's RNG states back,
re-seeding ranks > 0 when the number of processes changed.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from speechkit.data.fingerprint import diff_fingerprints
from speechkit.train.checkpoint import (
    BEST,
    CheckpointError,
    latest_checkpoint,
    list_checkpoints,
    remove_stale_temp_files,
    set_rng_state,
)
from speechkit.train.distributed import barrier
from speechkit.train.runtime import rank_seed, seed_everything
from speechkit.utils.config import ConfigError, config_diff, to_dict
from speechkit.utils.errors import naming_parameters

# the trainer's logger: these lines are part of the run's train.log and keep the name they always had there
log = logging.getLogger("speechkit.train.trainer")

#: Trainer fields that may change between a run and its resumption without changing what the
#: remaining updates compute (other trainer fields may change too, with a warning).
SAFE_TO_CHANGE = {"max_epochs", "max_steps", "patience", "log_interval", "save_interval_steps",
                  "keep_last", "num_threads", "device", "num_workers"}
#: Trainer fields that cannot change on resume.
FROZEN_ON_RESUME = {"optimizer", "best_metric", "best_mode"}


def find_resume_point(exp_dir: Path, ckpt_dir: Path, resume: bool, is_main: bool) -> Path | None:
    """The checkpoint to resume from (``latest.pt``, else the newest listed), or None.

    Every rank calls it (it waits for rank 0 to remove the temporary files an interrupted write left).
    With ``resume=False``, rank 0 moves an earlier run aside (:func:`move_previous_run`) and None is returned.
    """
    if is_main:
        for p in remove_stale_temp_files(ckpt_dir):
            log.info("removed %s (left by an interrupted write)", p)
    barrier()  # rank 0 has cleaned up before any rank looks
    latest = latest_checkpoint(ckpt_dir)
    listed = list_checkpoints(ckpt_dir)
    if not resume:
        if (latest is not None or listed or (ckpt_dir / BEST).exists()) and is_main:
            move_previous_run(exp_dir)
        return None
    if latest is None and listed:
        log.warning("%s: no latest.pt pointer; using the newest checkpoint %s", ckpt_dir, listed[-1].name)
        latest = listed[-1]
    return latest


def move_previous_run(exp_dir: Path) -> None:
    """Move ``checkpoints/``, ``metrics.jsonl``, ``config.yaml`` and ``loss.png`` of ``exp_dir`` into a new
    ``exp_dir/prev-<YYYYmmdd-HHMMSS>[.k]/``."""
    dest = exp_dir / time.strftime("prev-%Y%m%d-%H%M%S")
    k = 1
    while dest.exists():
        dest = exp_dir / f"{time.strftime('prev-%Y%m%d-%H%M%S')}.{k}"
        k += 1
    dest.mkdir()
    for name in ("checkpoints", "metrics.jsonl", "config.yaml", "loss.png"):
        if (exp_dir / name).exists():
            shutil.move(str(exp_dir / name), str(dest / name))
    log.info("resume=false: moved the previous run's checkpoints, metrics and config to %s; starting over", dest)


def check_resume_config(ckpt: dict, path: Path, task_name: str, cfg: Any) -> list[tuple[str, Any, Any]]:
    """Refuse to resume from the training checkpoint ``ckpt`` (read from ``path``) with another task or
    config; log the trainer keys that changed.

    Returns:
        ``[(key, saved, now)]``: the changed trainer keys outside :data:`SAFE_TO_CHANGE` (the ones that
        change what the remaining updates compute; see :func:`refuse_changes_to_finished_run`).

    Raises:
        CheckpointError: ``ckpt`` is not a training checkpoint.
        ConfigError: it is from another task, or a key outside ``trainer.`` or in
            :data:`FROZEN_ON_RESUME` differs (names the first key, both values and how many more).
    """
    if ckpt.get("kind", "train") != "train" or "state" not in ckpt:
        raise CheckpointError(f"{path}: not a training checkpoint (no optimizer/progress state)")
    if ckpt.get("task") != task_name:
        raise naming_parameters(ConfigError(f"{path}: checkpoint is from task {ckpt.get('task')!r}, not "
                                            f"{task_name!r}; use a new `exp_dir` or `resume=false`"))
    diffs = config_diff(ckpt["config"], to_dict(cfg))
    show = lambda v: "(absent)" if v is dataclasses.MISSING else repr(v)  # noqa: E731
    # A key absent from the saved config is a field added to the schema since; its default is
    # assumed to keep the old behaviour (warned below), so old experiments stay resumable.
    fixed = [d for d in diffs if d[1] is not dataclasses.MISSING and (
        not d[0].startswith("trainer.") or d[0][len("trainer."):] in FROZEN_ON_RESUME)]
    if fixed:
        key, old, new = fixed[0]
        raise naming_parameters(ConfigError(
            f"key '{key}': differs from the run saved in {path} (saved {show(old)}, now {show(new)}){_more(fixed)}; "
            "to start over use `resume=false` or a new `exp_dir`"))
    for key, old, new in diffs:
        name = key[len("trainer."):]
        if old is dataclasses.MISSING:
            log.warning("resuming: %s is not in the saved config (a newer field); using %s", key, show(new))
        elif name in SAFE_TO_CHANGE:
            log.info("resuming with %s changed: %s -> %s", key, show(old), show(new))
        else:
            log.warning("resuming with %s changed: %s -> %s; the rest of the run will differ from one "
                        "trained with either value throughout", key, show(old), show(new))
    return [(key, old, new) for key, old, new in diffs
            if old is not dataclasses.MISSING and key[len("trainer."):] not in SAFE_TO_CHANGE]


def _more(diffs: list[tuple[str, Any, Any]]) -> str:
    """`` (and N more: k1, k2, k3...)`` after the first of ``diffs`` (empty for one)."""
    if len(diffs) < 2:
        return ""
    return f" (and {len(diffs) - 1} more: {', '.join(d[0] for d in diffs[1:4])}{'...' if len(diffs) > 4 else ''})"


def refuse_changes_to_finished_run(changes: list[tuple[str, Any, Any]], path: Path, reason: str) -> None:
    """Refuse a finished run asked to train with other settings: nothing would be trained with them.

    Resuming an unfinished run with e.g. another ``trainer.lr`` trains its remaining updates with it
    (warned); a finished run has no remaining updates, so returning its model would silently stand
    for a model trained with the new settings.

    Args:
        changes: what :func:`check_resume_config` returned.
        path: the checkpoint the run was read from.
        reason: why the saved run stopped (e.g. ``reached max_epochs=40``).

    Raises:
        ConfigError: ``changes`` is not empty (names the first key, both values and how many more).
    """
    if not changes:
        return
    key, old, new = changes[0]
    raise naming_parameters(ConfigError(
        f"key '{key}': the run saved in {path} finished ({reason}) with {old!r}, now {new!r}{_more(changes)}: nothing would "
        "be trained with it; to train with it use `resume=false` (moves the old run aside) or a new `exp_dir`, "
        "or raise trainer.max_epochs to continue"))


def check_data_fingerprint(saved: dict | None, current: dict, exp_dir: str | os.PathLike,
                           saved_in: str | os.PathLike, remedy: str | None = None) -> None:
    """Refuse a run whose data changed since ``exp_dir`` was trained on them (see :meth:`~speechkit.train.trainer.Trainer.fit`).

    Args:
        saved: the fingerprint recorded in the checkpoint ``saved_in`` (``None``: an older
            checkpoint without one; warned, not checked).
        current: :func:`~speechkit.data.fingerprint.fingerprint_inputs` of the task's
            :meth:`~speechkit.train.Task.data_inputs` now.
        exp_dir: the experiment dir (named in the message).
        saved_in: the checkpoint file (named in the message).
        remedy: what the message tells the user to do (default: a new --exp-dir or --resume false).

    Raises:
        ConfigError: the content of an input changed (names the key, its path now and what
            changed); keys read by only one of the two runs are warned about.
    """
    exp_dir = Path(exp_dir)
    if saved is None:
        if current:
            log.warning("%s: saved without a fingerprint of its data (an older checkpoint): cannot check that "
                        "%s still hold the data it was trained on", saved_in, ", ".join(current))
        return
    changes, unmatched = diff_fingerprints(saved, current)
    if changes:
        c = changes[0]
        more = f" (and {len(changes) - 1} more: {', '.join(d.key for d in changes[1:4])})" if len(changes) > 1 else ""
        remedy = remedy or (f"to train on these data use a new `exp_dir`, or `resume=false` to start over (the old "
                            f"run is moved to {exp_dir}/prev-<time>)")
        raise naming_parameters(ConfigError(f"key '{c.key}' ({c.path}): {c.what} since the run in {exp_dir} was "
                                            f"trained on it (saved in {saved_in}){more}; {remedy}"))
    for key in unmatched:
        if key in current:
            log.warning("resuming: %s (%s) was not read by the saved run (a newer input); cannot check it",
                        key, current[key]["path"])
        else:
            log.warning("resuming: the saved run also read %s (%s), which is not read any more", key,
                        saved[key].get("path", ""))


def restore_rng(ckpt: dict, rank: int, world_size: int, seed: int, step: int) -> None:
    """Put back rank ``rank``'s RNG states saved in ``ckpt``; when the run was saved with another number of
    processes, rank 0 continues rank 0's streams and the others are re-seeded (:func:`rank_seed` at ``step``)."""
    saved_world = int(ckpt.get("world_size", 1))
    if saved_world == world_size:
        set_rng_state(ckpt["rng_ranks"][rank] if world_size > 1 else ckpt["rng"])
        return
    log.info("resuming a run of %d process(es) with %d: rank 0 continues rank 0's random streams, "
             "the others are re-seeded", saved_world, world_size)
    if rank == 0:
        set_rng_state(ckpt["rng"])
    else:
        seed_everything(rank_seed(seed, rank, step))
