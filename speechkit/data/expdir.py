"""The files of an experiment dir (``exp/<tag>/``) that later stages look up.

``speechkit-train`` writes, into ``EXP``::

    config.yaml         the resolved config (speechkit.utils.config.dump_config)
    checkpoints/        epoch/step checkpoints, best.pt (speechkit.train.checkpoint)
    train.log, metrics.jsonl
    feats.yaml          the front-end config of the training features (acoustic models, Tacotron 2)
    speakers            the speakers a speaker-conditioned model was trained on (speechkit.data.speakers)
    num_parameters      the model's parameter count

This module holds the look-ups that are pure file layout, each with the fallback a model trained
before the file existed needs (the training data dir its config names):

* :func:`world_conf`: ``EXP/feats.yaml``, else ``data.train_dir/feats.yaml``;
* :func:`trained_speakers`: ``EXP/speakers``, else the speakers of ``data.train_dir/utt2spk``;

and :func:`copy_feats_yaml`, which a task's ``on_train_end`` calls to write ``EXP/feats.yaml``.

Building a model from a checkpoint is the task's job (:func:`speechkit.tasks.load_model`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from speechkit.data.speakers import read_speakers
from speechkit.utils.fileio import atomic_write, read_table

__all__ = ["world_conf", "trained_speakers", "copy_feats_yaml"]


def world_conf(model_dir: Path, cfg: Any) -> tuple[dict | None, str]:
    """The front-end config of a model's training features and its source: ``EXP/feats.yaml``, else
    ``data.train_dir``'s (``(None, "")`` if neither exists); the WORLD config of an acoustic model.

    Args:
        model_dir: the experiment dir.
        cfg: the model's task config (its ``data.train_dir`` is the fallback; may be empty).
    """
    for c in (model_dir / "feats.yaml", Path(cfg.data.train_dir) / "feats.yaml" if cfg.data.train_dir else None):
        if c is not None and c.is_file():
            return yaml.safe_load(c.read_text(encoding="utf-8")) or {}, str(c)
    return None, ""


def trained_speakers(model_dir: Path, cfg: Any) -> list[str]:
    """The speakers a conditioned model was trained on: ``EXP/speakers``, else ``data.train_dir/utt2spk``.

    Args:
        model_dir: the experiment dir.
        cfg: the model's task config (its ``data.train_dir`` is the fallback; may be empty).

    Returns:
        speaker ids (as listed in ``EXP/speakers``; sorted when read from utt2spk).

    Raises:
        FileNotFoundError: neither file exists.
    """
    if (model_dir / "speakers").is_file():
        return read_speakers(model_dir / "speakers")
    utt2spk = Path(cfg.data.train_dir) / "utt2spk" if cfg.data.train_dir else None
    if utt2spk is not None and utt2spk.is_file():
        return sorted(set(read_table(utt2spk).values()))
    raise FileNotFoundError(f"{model_dir}/speakers: not found (nor the training data's utt2spk): cannot tell "
                            f"which speakers the model was trained on")


def copy_feats_yaml(train_dir: str | Path, exp_dir: Path) -> bool:
    """Copy the training features' front-end config ``train_dir/feats.yaml`` to ``exp_dir/feats.yaml``.

    The copy is written atomically, as UTF-8 text; a data dir without ``feats.yaml`` leaves
    ``exp_dir`` as it is.

    Returns:
        True if the file was copied, False if ``train_dir`` has no ``feats.yaml``.
    """
    feats_yaml = Path(train_dir) / "feats.yaml"
    if not feats_yaml.is_file():
        return False
    with atomic_write(exp_dir / "feats.yaml") as f:
        f.write(feats_yaml.read_text(encoding="utf-8"))
    return True
