"""What the analysis scripts of egs/tcstar_salad share: reading a test set, writing results.

Each analysis (local/windowed_inference.py, local/fixed_batch_fit.py, local/f0_errors.py,
local/dev_tuning.py, local/learning_curves.py) writes
``OUT/<name>.json`` (its figures, the command line, the date and git commit) and ``OUT/<name>.md``
(a small table that ``local/make_results.py`` puts into RESULTS.md as it is), OUT being
``results/<run>/analysis``.
"""
from __future__ import annotations

import datetime as _dt
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from speechkit.train.report import read_metrics
from speechkit.utils.fileio import atomic_write
from speechkit.utils.provenance import git_state


def command_line() -> str:
    """This script's command line as it would be typed in the recipe directory."""
    here = Path(sys.argv[0])
    script = f"local/{here.name}" if here.parent.name == "local" else sys.argv[0]
    return " ".join(["python", script, *map(shlex.quote, sys.argv[1:])])


def write_outputs(out_dir: str | Path, name: str, record: dict, markdown: str) -> None:
    """``OUT/name.json`` (record + command, date, commit) and ``OUT/name.md`` (``markdown`` + the command)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    commit, dirty = git_state()
    cmd = command_line()
    meta = {"command": cmd, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "git_commit": commit, "git_dirty": dirty}
    with atomic_write(out / f"{name}.json") as f:
        json.dump({**meta, **record}, f, indent=1, allow_nan=False, default=float)
        f.write("\n")
    with atomic_write(out / f"{name}.md") as f:
        f.write(markdown.rstrip() + f"\n\nRegenerate: `{cmd}` ({meta['date']}, commit "
                f"{(commit or 'unknown')[:10]}{' + uncommitted changes' if dirty else ''}).\n")


def read_valid_curve(exp_dir: str | Path) -> dict:
    """``{"valid_mcd": [dB per epoch], "updates": int}`` of a training run (``EXP/metrics.jsonl``).

    Raises:
        ValueError: no epoch record with ``valid/mcd`` (names the file).
    """
    path = Path(exp_dir) / "metrics.jsonl"
    rows = list(read_metrics(path))
    mcd = [float(r["valid/mcd"]) for r in rows if "valid/mcd" in r]
    if not mcd:
        raise ValueError(f"{path}: no epoch record with valid/mcd")
    return {"valid_mcd": mcd, "updates": int(max(r.get("step", 0) for r in rows))}


def load_test_set(dump_spk_dir: str | Path) -> tuple[dict, dict, dict]:
    """``(labels, feats, alignments)`` of ``dump/<spk>/test``: utt -> (T, D) / (T, O) arrays, segments."""
    import kaldiio

    from speechkit.data.corpora._common import read_phone_alignments

    d = Path(dump_spk_dir)
    labels = {u: np.asarray(m, np.float32) for u, m in kaldiio.load_scp_sequential(str(d / "labels.scp"))}
    feats = {u: np.asarray(m, np.float32) for u, m in kaldiio.load_scp_sequential(str(d / "feats.scp"))}
    return labels, feats, read_phone_alignments(d / "phone_alignments")
