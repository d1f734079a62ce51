"""Array helpers shared by the ABX stages: runs of equal values, and joining tensors that lie on several devices."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def run_bounds(a: np.ndarray) -> np.ndarray:
    """Where the runs of equal values of ``a`` ((N,) array, e.g. sorted keys) start, with ``N`` last: run ``r`` is
    ``a[bounds[r]:bounds[r + 1]]`` (``(runs + 1,)`` int64; ``[0, 0]`` for an empty ``a``)."""
    return np.concatenate([[0], np.nonzero(a[1:] != a[:-1])[0] + 1, [len(a)]]).astype(np.int64)


def cat_onto(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """``torch.cat(tensors)`` on ``device``, the tensors in order but on several devices: each run of consecutive
    tensors on one device is joined there first, so that a run of small CPU tensors crosses to the GPU in one copy.
    A single tensor is returned as it is (moved to ``device``), not copied."""
    if len(tensors) == 1:
        return tensors[0].to(device)
    runs: list[torch.Tensor] = []
    cur: list[torch.Tensor] = []
    for t in tensors:
        if cur and t.device != cur[-1].device:
            runs.append(torch.cat(cur))
            cur = []
        cur.append(t)
    if cur:
        runs.append(torch.cat(cur))
    return torch.cat([r.to(device) for r in runs])
