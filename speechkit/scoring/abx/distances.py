"""Frame distances of ABX, as ABXpy defines them, and the DTW distance of two tokens.

* ``cosine`` = ``arccos(cos_sim) / pi`` (a zero vector is at distance 1 from any other vector and 0 from another
  zero vector);
* ``kl`` = symmetrised Kullback-Leibler divergence ``0.5 KL(p||q) + 0.5 KL(q||p)`` after normalising each frame
  to sum to 1, adding machine epsilon to every entry and renormalising (ABXpy ``kl_divergence`` defaults; frames
  must be non-negative: :func:`check_kl_frames`);
* ``hamming`` = fraction of coordinates that differ (for one-hot unit codes: 0 or 2/dim).

Each is a :class:`FrameDistance` over the flat ``(T, D)`` array of every token's frames: a per-frame
precomputation, then batched look-ups (:meth:`FrameDistance.batch`, padded batches of token pairs) and tiles
(:meth:`FrameDistance.block`, one matrix product shared by many pairs).
"""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np
import torch

from speechkit.scoring.abx import dispatch
from speechkit.scoring.abx.dtw import batched_dtw
from speechkit.utils.fileio import DataError

DISTANCES = ("cosine", "kl", "hamming")


def _rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for an integer ``index`` of any shape, by ``torch.index_select`` on the flattened index:
    the same values; the gather is faster than advanced indexing on the CPU."""
    return torch.index_select(table, 0, index.reshape(-1)).view(*index.shape, *table.shape[1:])


def _angle_(cos: torch.Tensor) -> torch.Tensor:
    """``arccos(clamp(cos, -1, 1)) / pi`` in place (the cosine distance from cosine similarities). On the CPU by
    numpy, whose SIMD ``arccos`` is faster than torch's;
    both CPU paths use it, so that they give the same bits."""
    if cos.device.type != "cpu":
        return cos.clamp_(-1.0, 1.0).arccos_().div_(math.pi)
    c = cos.numpy()
    np.clip(c, -1.0, 1.0, out=c)
    np.arccos(c, out=c)
    np.divide(c, math.pi, out=c)
    return cos


class FrameDistance:
    """Per-frame precomputation over a flat ``(T, D)`` frame array, then batched look-ups."""

    def __init__(self, frames: torch.Tensor):
        raise NotImplementedError

    def batch(self, ix: torch.Tensor, iy: torch.Tensor) -> torch.Tensor:
        """``(B, N, M)`` distances between frames ``ix`` (B, N) and ``iy`` (B, M) of the flat array."""
        raise NotImplementedError

    def scratch(self, n: int, m: int) -> int:
        """Temporary tensor elements :meth:`batch` needs per pair of ``n`` x ``m`` frames."""
        return 0

    tileable = True  # :meth:`block` gives tiles

    def block(self, x0: int, x1: int, y0: int, y1: int) -> np.ndarray | None:
        """``(x1 - x0, y1 - y0)`` float64 C-contiguous numpy array (CPU) of the distances between frames
        ``x0 .. x1-1`` and ``y0 .. y1-1`` of the flat array, in one matrix product: a tile that many token
        pairs read in place (:func:`speechkit.scoring.abx.tiles.tile_tasks`). The same formula as :meth:`batch`;
        the product's rounding can differ from the batched one's in the last bit. Only where :attr:`tileable`."""
        raise NotImplementedError


class _Cosine(FrameDistance):
    def __init__(self, frames: torch.Tensor):
        norm = frames.pow(2).sum(1).sqrt()
        self.zero = norm == 0
        self.any_zero = bool(self.zero.any())
        self.unit = frames / torch.where(self.zero, 1.0, norm)[:, None]

    def scratch(self, n, m):
        return (n + m) * self.unit.shape[1]

    def batch(self, ix, iy):
        cos = torch.bmm(_rows(self.unit, ix), _rows(self.unit, iy).transpose(1, 2))
        d = _angle_(cos)
        if self.any_zero:  # ABXpy: 1 between a zero and a non-zero frame, 0 between two zero frames
            zx, zy = _rows(self.zero, ix)[:, :, None], _rows(self.zero, iy)[:, None, :]
            d = torch.where(zx | zy, (zx ^ zy).to(d.dtype), d)
        return d

    def block(self, x0, x1, y0, y1):
        d = _angle_(torch.mm(self.unit[x0:x1], self.unit[y0:y1].T)).numpy()
        if self.any_zero:
            zx, zy = self.zero[x0:x1, None].numpy(), self.zero[None, y0:y1].numpy()
            d = np.where(zx | zy, (zx ^ zy).astype(d.dtype), d)
        return d


class _SymKL(FrameDistance):
    def __init__(self, frames: torch.Tensor):
        eps = torch.finfo(frames.dtype).eps
        p = frames / frames.sum(1, keepdim=True)
        p = p + eps
        p = p / p.sum(1, keepdim=True)
        self.p = p
        self.logp = p.log()
        self.ent = (p * self.logp).sum(1)  # sum p log p

    def scratch(self, n, m):
        return 2 * (n + m) * self.p.shape[1]

    def batch(self, ix, iy):
        px, py = _rows(self.p, ix), _rows(self.p, iy)
        lx, ly = _rows(self.logp, ix), _rows(self.logp, iy)
        kl_xy = _rows(self.ent, ix)[:, :, None] - torch.bmm(px, ly.transpose(1, 2))
        kl_yx = _rows(self.ent, iy)[:, None, :] - torch.bmm(lx, py.transpose(1, 2))
        return 0.5 * kl_xy + 0.5 * kl_yx

    def block(self, x0, x1, y0, y1):
        kl_xy = self.ent[x0:x1, None] - torch.mm(self.p[x0:x1], self.logp[y0:y1].T)
        kl_yx = self.ent[None, y0:y1] - torch.mm(self.logp[x0:x1], self.p[y0:y1].T)
        return (0.5 * kl_xy + 0.5 * kl_yx).numpy()


class _Hamming(FrameDistance):
    """Fraction of differing coordinates. Up to ``dispatch.HAMMING_TABLE_MAX`` distinct frame vectors, a symbol
    table: each frame's symbol and the symbol-by-symbol distances, built with numpy on the CPU whatever
    the device, then moved there: ``torch.unique(dim=0, return_inverse=True)`` on CUDA may return inverse
    indices that do not map frames to their rows of the unique array (pytorch/pytorch#64593), so the table is
    built where its result cannot depend on the device."""

    def __init__(self, frames: torch.Tensor):
        self.dim = frames.shape[1]
        host = frames.detach().cpu().numpy()
        uniq, inv = np.unique(host, axis=0, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)  # numpy 2.0.0 returned it with the input's shape
        if uniq.shape[0] <= dispatch.HAMMING_TABLE_MAX:
            s = uniq.shape[0]
            table = np.empty((s, s), dtype=host.dtype)
            step = max(1, (1 << 22) // max(1, s * self.dim))
            for a in range(0, s, step):
                table[a : a + step] = (uniq[a : a + step, None, :] != uniq[None, :, :]).sum(-1)
            self.table = torch.from_numpy(table / self.dim).to(frames.device)
            self.sym = torch.from_numpy(inv.astype(np.int64)).to(frames.device)
            self.x = None
        else:
            self.table = None
            self.x = frames

    def scratch(self, n, m):
        return 0 if self.table is not None else n * m * self.dim

    def batch(self, ix, iy):
        if self.table is not None:
            sx, sy = _rows(self.sym, ix), _rows(self.sym, iy)
            return _rows(self.table.view(-1), sx[:, :, None] * self.table.shape[0] + sy[:, None, :])
        x, y = _rows(self.x, ix), _rows(self.x, iy)
        return (x[:, :, None, :] != y[:, None, :, :]).sum(-1).to(x.dtype) / self.dim

    @property
    def tileable(self):
        return self.table is not None

    def block(self, x0, x1, y0, y1):
        s = self.table.shape[0]
        return self.table.view(-1)[self.sym[x0:x1, None] * s + self.sym[None, y0:y1]].numpy()


#: distance name -> its :class:`FrameDistance` (read-only)
FRAME_DISTANCES: Mapping[str, Callable[[torch.Tensor], FrameDistance]] = MappingProxyType({
    "cosine": _Cosine,
    "kl": _SymKL,
    "hamming": _Hamming,
})


def check_distance(distance: str) -> None:
    """Raise ``ValueError`` unless ``distance`` is one of :data:`DISTANCES`."""
    if distance not in DISTANCES:
        raise ValueError(f"unknown distance '{distance}', expected one of {', '.join(DISTANCES)}")


def check_kl_frames(frames: np.ndarray, where: str = "features") -> None:
    """Raise :class:`DataError` unless every frame is non-negative with a positive sum (KL needs it)."""
    neg = frames < 0
    if neg.any():
        r = int(np.argwhere(neg)[0, 0])
        raise DataError(f"{where}: frame {r} has negative values; the kl distance needs posteriorgram-like frames")
    zero = frames.sum(1) <= 0
    if zero.any():
        raise DataError(f"{where}: frame {int(np.argmax(zero))} sums to 0; the kl distance needs non-zero frames")


def frame_distance(x: np.ndarray, y: np.ndarray, distance: str = "cosine") -> np.ndarray:
    """Frame-by-frame distance matrix as ABXpy defines it.

    Args:
        x: ``(N, D)`` frames.
        y: ``(M, D)`` frames.
        distance: ``cosine`` (arccos of cosine similarity / pi), ``kl`` (symmetrised KL, frames
            normalised and epsilon-smoothed), or ``hamming`` (fraction of differing coordinates).

    Returns:
        ``(N, M)`` float64 array.

    Raises:
        ValueError: unknown distance or mismatched dimensions.
    """
    check_distance(distance)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"frames must be (N, D) and (M, D) with one D, got {x.shape} and {y.shape}")
    flat = torch.from_numpy(np.concatenate([x, y]))
    fd = FRAME_DISTANCES[distance](flat)
    ix = torch.arange(x.shape[0])[None]
    iy = torch.arange(x.shape[0], x.shape[0] + y.shape[0])[None]
    return fd.batch(ix, iy)[0].numpy()


def dtw_distance(x: np.ndarray, y: np.ndarray, distance: str = "cosine", normalize: bool = True) -> float:
    """ABXpy's DTW distance between two token matrices ``x`` (N, D) and ``y`` (M, D).

    Returns:
        the minimal path cost, divided by the path's number of frame pairs when ``normalize``.

    Raises:
        ValueError: an empty token, unknown distance, mismatched dimensions.
    """
    if len(x) == 0 or len(y) == 0:
        raise ValueError("cannot compute a distance between empty representations")
    d = torch.from_numpy(frame_distance(x, y, distance))[None]
    total, len_rc, _ = batched_dtw(d, torch.tensor([len(x)]), torch.tensor([len(y)]))
    return float(total[0] / len_rc[0]) if normalize else float(total[0])
