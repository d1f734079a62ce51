"""ABX phone discriminability error, as ZeroSpeech 2017/2019/2020 (ABXpy) or 2021 and later (Libri-Light) compute it.

Definitions (Schatz et al., "Evaluating speech features with the Minimal-Pair ABX task",
Interspeech 2013; Dunbar et al., "The Zero Resource Speech Challenge 2019", Interspeech 2019;
the code of bootphon/ABXpy and zerospeech/zerospeech2020 fixes the details below; the ``zr2021``
differences are listed after them):

* **Items** are phone tokens (see :mod:`speechkit.scoring.abx_items`). An item's frames are the
  frames ``i`` of its file whose time ``(i + 0.5) * frame_shift`` lies in ``[onset, offset]``
  (ABXpy's and fastabx's convention: frame ``i`` is at ``t_i = dt/2 + i dt``).
* **Items with no frame centre inside** (a phone shorter than a frame shift: at 40 ms code frames the
  shortest phones) take, by default (``empty_items="overlap"``), the frames whose span
  ``[i dt, (i + 1) dt)`` overlaps ``(onset, offset)`` -- one frame, or two when the item straddles a
  frame boundary -- clamped to the file (an item starting past the last frame, within ``tolerance``,
  takes the last frame). Every item then has frames, so systems at different frame rates are scored
  on the same items and triplets. ABXpy has no such rule: it keeps them with an infinite distance
  to every non-empty token (their triplets become ties or errors); the official ZeroSpeech 2019/2020
  evaluation inherits that. ``empty_items="drop"`` drops them instead (counted and warned).
* **Triplets** ``(A, B, X)``: A and X carry the same phone, B another; all three share the context
  (previous and next phone). *Across* speakers (ABXpy ``on phone, by context, across speaker``):
  A and B come from one speaker, X from another. *Within* (``on phone, by context+speaker``): all
  three from one speaker, X a different token from A. Every such triplet is scored (ABXpy's
  optional per-cell sampling of large cells is not applied). Items whose context is ``()`` (all
  alike) make the "no context" task (fastabx ``context="any"``).
* **Distance** ``d(P, X)``: dynamic time warping with steps (1,0), (0,1), (1,1) over a frame
  distance; ``cost[i, j] = f(p_i, x_j) + min(cost[i-1, j], cost[i-1, j-1], cost[i, j-1])``. With
  ``normalize`` (the ZeroSpeech setting) the total cost is divided by the number of frame pairs on
  the minimal path, backtracked from the end preferring the diagonal step, then the step along X,
  on ties (ABXpy ``dtw.pyx``). P is the first (row) argument, X the second.
* Frame distances: ``cosine`` = ``arccos(cos_sim) / pi`` (a zero vector is at distance 1 from any
  other vector and 0 from another zero vector); ``kl`` = symmetrised Kullback-Leibler divergence
  ``0.5 KL(p||q) + 0.5 KL(q||p)`` after normalising each frame to sum to 1, adding machine epsilon
  to every entry and renormalising (ABXpy ``kl_divergence`` defaults; frames must be non-negative);
  ``hamming`` = fraction of coordinates that differ (for one-hot unit codes: 0 or 2/dim; any
  constant scale gives the same ABX score). ZeroSpeech 2019 scored discrete codes with the
  Levenshtein distance between frame sequences instead; that is not implemented here.
* ZeroSpeech 2019 as run by the zerospeech2020 package normalises the DTW for cosine only (for
  KL it passes ``normalized=None``, i.e. the total path cost): use ``normalize=False`` to match.
* **Score** of a triplet: 1 if ``d(A, X) < d(B, X)``, 0.5 on a tie, 0 otherwise. Scores are
  averaged over the triplets of one (context, phone pair, speaker(s)) cell (ABXpy ``analyze``),
  then over contexts, then over speakers (ordered (A/B speaker, X speaker) pairs when across),
  then over ordered phone pairs (zerospeech2020 ``_average``). Error = 100 * (1 - mean).

**Conventions** (``convention``): which ZeroSpeech edition's numbers a score compares with.

* ``zr2019`` (the default): all of the above; ABXpy, as the ZeroSpeech 2017 (track 1), 2019 and 2020
  evaluations ran it.
* ``zr2021``: Libri-Light's ABX (``eval_ABX``), which ZeroSpeech 2021 and the later editions (the
  ``abx-LS`` benchmark of the zerospeech toolkit) use, as ``fastabx.zerospeech_abx`` (bootphon/fastabx
  0.9.0) computes it: (1) ``d(X, A)``: X's frames are the DTW's rows, so the tie-break of the path
  length goes the other way; (2) per (phone pair, A/B speaker) the cells are averaged over contexts
  and X speakers together, then over A/B speakers, then over phone pairs (within speakers the same
  as ``zr2019``); (3) frame times compared in exact arithmetic (fastabx's decimal slicing; ABXpy's
  float times leave out a frame whose centre falls exactly on an item boundary but rounds past it).
  Without subsampling, as ``zerospeech_abx(..., max_size_group=None, max_x_across=None)``: the
  official 2021 protocol draws at most 10 tokens per cell and 5 X speakers per (A, B), so its
  published numbers differ from every-triplet scores by that sampling. Equal to fastabx to 1e-12
  when fastabx computes in float64, and to about 1e-8 (of a fraction) with its float32 arithmetic
  (test_abx.py pins its figures). Not reproduced: Libri-Light's dropped last frame
  (``FASTABX_WITH_LIBRILIGHT_BUG``), fastabx's angle to a zero vector (a "singularity border" instead
  of ABXpy's 1) and its ``kl_symmetric`` (epsilon 1e-6); fastabx refuses items with no frame, where
  ``empty_items`` applies here.

The result counts the items that needed the overlap rule (``n_items_overlap``) and the triplets
scored (``n_triplets``), so that two systems can be checked to rest on the same triplets.

Speed: every distinct token pair needed by some triplet gets one DTW (fastabx computes d(X, A) and
d(X, B) per cell group, so most pairs twice); one dynamic programme serves both argument orders (the
frame distances are symmetric and the cost matrix of (X, P) is the transpose of that of (P, X); only
the tie-break of the path length differs, and both lengths are carried forward with the cost). On the
compiled CPU path the tokens are laid out by context and speaker and cut into tiles of about a thousand frames;
where the pairs between two tiles cover a quarter of their frame pairs or more (within a speaker, across
two speakers, inside a large context), one matrix product gives the tile pair's frame distances and every
such pair's DTW reads its own from it in place. The other pairs
are batched by size; a batch's frame distances are one torch computation (float64), its DTW
a compiled kernel on the CPU (C, :mod:`speechkit.scoring._abx_ckernels`, built by ``tools/install.sh``: it
loads in a millisecond; else numba's, :mod:`speechkit.scoring._abx_kernels`, whose start costs 0.3-0.45 s in a
fresh process; the same bits), a Triton kernel on CUDA
(:mod:`speechkit.scoring._abx_triton`, one program per pair) or the anti-diagonal recursion as torch
vector operations (:func:`batched_dtw`: without compiled kernels or triton, or ``backend="torch"``). Each cell's
triplets are counted by the compiled kernel on the CPU, which sorts its ``d(B, X)`` once per X and places every
``d(A, X)`` among them by binary search; on CUDA (and without compiled kernels) by comparing every ``d(A, X)``
with every ``d(B, X)`` in torch, many X tokens at a time, where the distance table is (:func:`_count_cells_torch`:
on CUDA it never comes to the host). On the CPU, ``num_threads`` threads take batches and cell groups from one
queue, so a thread on a busy core takes fewer (torch's and OpenMP's static splits wait for the slowest thread at
every step). The backends give the same bits, except that a tile's matrix product may round a frame
distance differently in the last bit from the batched one (triplet outcomes alike in the tests, identical
tokens tie as before).
"""
from __future__ import annotations

import bisect
import contextlib
import importlib.util
import itertools
import logging
import math
import os
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from speechkit.scoring import _abx_ckernels, _abx_threads
from speechkit.scoring.abx_items import Item
from speechkit.utils.fileio import DataError
from speechkit.utils.perf import gc_paused

logger = logging.getLogger(__name__)

DISTANCES = ("cosine", "kl", "hamming")
EMPTY_ITEM_RULES = ("overlap", "drop")
MODES = ("across", "within")
CONVENTIONS = ("zr2019", "zr2021")
BACKENDS = ("auto", "c", "numba", "torch", "triton")
DEFAULT_TOLERANCE = 0.05  # s an item may run past the last frame (features shorter than the audio)
_HAMMING_TABLE_MAX = 4096  # distinct frame vectors up to which hamming uses a symbol table
_INF = float("inf")
# backend "auto": below both sizes, and until the kernels have been used once in the process, the torch path
_NUMBA_MIN_PAIRS = 20_000
_NUMBA_MIN_TRIPLETS = 2_000_000
_KERNELS_USED = False
# backend "auto" with a CUDA device: a task whose CPU work is estimated under _CUDA_MIN_CPU_SECONDS is scored on the
# CPU (CUDA's fixed costs in a process, context and first kernel launches, were 1.2-1.5 s on an H200), the estimate
# being frame pairs x _CPU_NS_PER_FRAME_PAIR + triplets x _CPU_NS_PER_TRIPLET, a _CPU_SERIAL_FRACTION of it on one
# thread and the rest over the threads (the compiled CPU path, every phase, one thread, fitted on the bench tasks:
# see _cpu_seconds)
_CUDA_MIN_CPU_SECONDS = 1.0
_CPU_NS_PER_FRAME_PAIR = 10.0
_CPU_NS_PER_TRIPLET = 11.0
_CPU_SERIAL_FRACTION = 0.1
# contexts of fewer tokens find their needed pairs on the CPU whatever the device, and within speakers with one
# mask over all their tokens (a larger one: one speaker's block at a time)
_DEVICE_PAIRS_MIN_TOKENS = 512
# a context of fewer tokens than _DEVICE_PAIRS_MIN_TOKENS finds its needed pairs in numpy on the CPU (the same pairs)
_SMALL_PAIRS_IN_NUMPY = True
# a needed-pair mask of fewer elements is built on one thread (_torch_threads)
_THREADED_MASK_ELEMENTS = 1 << 22
# a large context's needed-pair masks across speakers are built this many elements (rows x tokens) at a time
_PAIR_MASK_ELEMENTS = 1 << 22
_PAIR_MASK_ELEMENTS_CUDA = 1 << 26
_EXACT_EPS = 1e-9  # frames: float error allowed when placing a time on the frame grid (exact_times)


@contextlib.contextmanager
def _torch_threads(n: int):
    """Torch's intra-op pool at ``n`` threads inside the block, restored after. abx_error runs its many small torch
    operations on one thread: a parallel region waits for every pool thread to be scheduled, which on a loaded
    machine costs a time slice per operation (5 ms instead of 0.16 ms for a context's needed pairs, measured on
    2 cores with one busy) and spins the other threads meanwhile; only the large operations use ``n``."""
    prev = torch.get_num_threads()
    if n != prev:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != prev:
            torch.set_num_threads(prev)


# --------------------------------------------------------------------------------- frame distances
def _rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for an integer ``index`` of any shape, by ``torch.index_select`` on the flattened index:
    the same values; the gather alone is up to twice as fast as advanced indexing on the CPU (a (5000, 11) index
    into a (50 000, 39) float64 table, one thread: 2.8 ms instead of 6.6 ms; the within task end to end: within
    the noise of a loaded 2-core machine)."""
    return torch.index_select(table, 0, index.reshape(-1)).view(*index.shape, *table.shape[1:])


def _angle_(cos: torch.Tensor) -> torch.Tensor:
    """``arccos(clamp(cos, -1, 1)) / pi`` in place (the cosine distance from cosine similarities). On the CPU by
    numpy, whose SIMD ``arccos`` takes a third of torch's time (float64, one thread: 1.4 vs 4.6 ns per value);
    both CPU paths use it, so that they give the same bits."""
    if cos.device.type != "cpu":
        return cos.clamp_(-1.0, 1.0).arccos_().div_(math.pi)
    c = cos.numpy()
    np.clip(c, -1.0, 1.0, out=c)
    np.arccos(c, out=c)
    np.divide(c, math.pi, out=c)
    return cos


class _FrameDistance:
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
        pairs read in place (:func:`_tile_tasks`). The same formula as :meth:`batch`; the product's rounding
        can differ from the batched one's in the last bit. Only where :attr:`tileable`."""
        raise NotImplementedError


class _Cosine(_FrameDistance):
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


class _SymKL(_FrameDistance):
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


class _Hamming(_FrameDistance):
    """Fraction of differing coordinates. Up to ``_HAMMING_TABLE_MAX`` distinct frame vectors, a symbol
    table: each frame's symbol and the symbol-by-symbol distances, built with numpy on the CPU whatever
    the device, then moved there. It was built with ``torch.unique(dim=0, return_inverse=True)`` on the
    scoring device, the one step of this distance whose result can depend on the device (inverse indices
    not mapping frames to their rows of the unique array on CUDA: pytorch/pytorch#64593), and CUDA scored
    53.78 % where the CPU scored 53.39 % on the same 11 158 triplets."""

    def __init__(self, frames: torch.Tensor):
        self.dim = frames.shape[1]
        host = frames.detach().cpu().numpy()
        uniq, inv = np.unique(host, axis=0, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)  # numpy 2.0.0 returned it with the input's shape
        if uniq.shape[0] <= _HAMMING_TABLE_MAX:
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


_FRAME_DISTANCES: dict[str, Callable[[torch.Tensor], _FrameDistance]] = {
    "cosine": _Cosine,
    "kl": _SymKL,
    "hamming": _Hamming,
}


def _check_distance(distance: str) -> None:
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
    _check_distance(distance)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"frames must be (N, D) and (M, D) with one D, got {x.shape} and {y.shape}")
    flat = torch.from_numpy(np.concatenate([x, y]))
    fd = _FRAME_DISTANCES[distance](flat)
    ix = torch.arange(x.shape[0])[None]
    iy = torch.arange(x.shape[0], x.shape[0] + y.shape[0])[None]
    return fd.batch(ix, iy)[0].numpy()


# ------------------------------------------------------------------------------------------- DTW
def batched_dtw(
    dist: torch.Tensor, n_rows: torch.Tensor, n_cols: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DTW over a padded batch of frame-distance matrices, by anti-diagonals (torch: CPU or CUDA).

    Recursion (ABXpy ``dtw.pyx``): ``cost[0,0] = d[0,0]``; first row/column cumulative sums;
    ``cost[i,j] = d[i,j] + min(cost[i-1,j], cost[i-1,j-1], cost[i,j-1])``. Every cell of one
    anti-diagonal ``i + j = k`` depends only on diagonals ``k-1`` and ``k-2``, so each diagonal is
    one vector operation over the whole batch. Values outside ``[:n_rows[b], :n_cols[b]]`` are
    ignored (no valid cell depends on them).

    Path lengths are carried forward with the costs: a cell's length is one more than that of the
    predecessor ABXpy's backtrack would step to from it (the same three costs, the same tie-break),
    so the backtrack from the last cell follows exactly those predecessors and no cost matrix is kept
    (three diagonals; no host synchronisation inside the loop on CUDA).

    Args:
        dist: ``(B, N, M)`` frame distances, any padding beyond each pair's size.
        n_rows: ``(B,)`` int, rows used per pair (>= 1).
        n_cols: ``(B,)`` int, columns used per pair (>= 1).

    Returns:
        ``(cost, len_rc, len_cr)``, each ``(B,)`` on ``dist``'s device: the total cost of the minimal
        path; the number of frame pairs on the path backtracked with ties going diagonal, then
        column-1 (``j``), then row-1 (``i``) -- ABXpy's length when rows are its first argument --
        and the same with the column/row preference swapped (ABXpy's length for the transposed call).

    Raises:
        ValueError: ``dist`` is not 3-d.
    """
    if dist.ndim != 3:
        raise ValueError(f"dist must be (B, N, M), got {tuple(dist.shape)}")
    bsz, nmax, mmax = dist.shape
    dev, dt = dist.device, dist.dtype
    rows_host = n_rows.detach().cpu().long()
    cols_host = n_cols.detach().cpu().long()
    kmax = nmax + mmax - 1
    # skewed view, no copy: skew[b, k, i] = dist[b, i, k - i] (offset i*M + k - i stays inside the
    # pair's block for every k, i; entries with k - i outside [0, M) are never used)
    dist = dist.contiguous()
    skew = dist.as_strided((bsz, kmax, nmax), (nmax * mmax, 1, mmax - 1), dist.storage_offset())
    # three rolling diagonals: cost[.][b, 1 + i] = cost of cell (i, k - i); column 0 is a +inf sentinel
    # for i = -1, and one +inf is written past each diagonal's last cell (the j = -1 neighbour of the next)
    cost = torch.full((3, bsz, nmax + 2), _INF, dtype=dt, device=dev)
    lrc = torch.zeros((3, bsz, nmax + 2), dtype=torch.long, device=dev)
    lcr = torch.zeros((3, bsz, nmax + 2), dtype=torch.long, device=dev)
    cost[0, :, 1] = skew[:, 0, 0]
    lrc[0, :, 1] = 1
    lcr[0, :, 1] = 1
    total = torch.empty(bsz, dtype=dt, device=dev)
    len_rc = torch.empty(bsz, dtype=torch.long, device=dev)
    len_cr = torch.empty(bsz, dtype=torch.long, device=dev)
    ends = (rows_host + cols_host - 2).numpy()
    by_end: dict[int, np.ndarray] = {}
    for k in sorted(set(ends.tolist())):  # (np.unique's first call in a process imports numpy.ma: 10 ms)
        by_end[k] = np.nonzero(ends == k)[0]

    def collect(k: int, slot: int) -> None:
        sel = by_end.get(k)
        if sel is None:
            return
        b = torch.from_numpy(sel).to(dev)
        col = rows_host[sel].to(dev)  # slot of the last row, 1 + (n_rows - 1)
        total[b] = cost[slot, b, col]
        len_rc[b] = lrc[slot, b, col]
        len_cr[b] = lcr[slot, b, col]

    collect(0, 0)
    for k in range(1, kmax):
        cur, p1, p2 = k % 3, (k - 1) % 3, (k - 2) % 3
        lo, hi = max(0, k - mmax + 1), min(k, nmax - 1)
        up = cost[p1, :, lo : hi + 1]  # (i-1, j)
        left = cost[p1, :, lo + 1 : hi + 2]  # (i, j-1)
        if k >= 2:
            dg = cost[p2, :, lo : hi + 1]  # (i-1, j-1)
        else:
            dg = torch.full_like(up, _INF)
        is_diag = (dg <= left) & (dg <= up)
        left_first = left <= up  # column step on an up/left tie
        up_first = up <= left  # row step on an up/left tie
        best = torch.minimum(torch.minimum(up, left), dg)
        cost[cur, :, lo + 1 : hi + 2] = skew[:, k, lo : hi + 1] + best
        l_up, l_left = lrc[p1, :, lo : hi + 1], lrc[p1, :, lo + 1 : hi + 2]
        l_dg = lrc[p2, :, lo : hi + 1]
        lrc[cur, :, lo + 1 : hi + 2] = torch.where(is_diag, l_dg, torch.where(left_first, l_left, l_up)) + 1
        l_up, l_left = lcr[p1, :, lo : hi + 1], lcr[p1, :, lo + 1 : hi + 2]
        l_dg = lcr[p2, :, lo : hi + 1]
        lcr[cur, :, lo + 1 : hi + 2] = torch.where(is_diag, l_dg, torch.where(up_first, l_up, l_left)) + 1
        cost[cur, :, hi + 2] = _INF
        collect(k, cur)
    return total, len_rc, len_cr


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


# ----------------------------------------------------------------------------------------- ABX
@dataclass
class PhonePairScore:
    """The ABX figure of one ordered phone pair (A/X phone, B phone)."""

    phone_1: str
    phone_2: str
    error: float  # percent
    n_triplets: int
    n_cells: int  # (context, speaker(s)) cells averaged


@dataclass
class AbxResult:
    """Result of :func:`abx_error`; ``error`` is in percent (lower is better)."""

    error: float
    mode: str
    distance: str
    normalize: bool
    frame_shift: float
    n_items: int
    n_items_dropped: int
    n_triplets: int
    n_cells: int
    n_phone_pairs: int
    n_dtw_pairs: int
    by_phone_pair: list[PhonePairScore] = field(default_factory=list)
    n_items_overlap: int = 0  # items with no frame centre inside that took their overlapping frame(s)
    empty_items: str = "overlap"
    convention: str = "zr2019"  # the averaging: CONVENTIONS
    # (A/X phone, B phone) -> speaker key ((A/B speaker, X speaker) across, (speaker,) within) -> the
    # mean over contexts of its cells' scores (accuracies in [0, 1]); what bootstrap_interval resamples
    speaker_scores: dict[tuple[str, str], dict[tuple[str, ...], float]] = field(default_factory=dict, repr=False)
    # the same keys -> how many cells (contexts) that mean is over (zr2021 across weighs the keys by it)
    speaker_counts: dict[tuple[str, str], dict[tuple[str, ...], int]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (per-pair breakdown included, per-speaker scores left out)."""
        d = asdict(self)
        d.pop("speaker_scores")
        d.pop("speaker_counts")
        return d

    def summary(self) -> str:
        """The ZeroSpeech-style figure line, e.g. ``ABX error (across speakers): 21.34 %``."""
        what = "across speakers" if self.mode == "across" else "within speakers"
        return f"ABX error ({what}): {self.error:.2f} %"


@dataclass
class _CellGroup:
    """The cells sharing (context, A/X phone, B phone, A/B speaker): one per X speaker when across."""

    context: int
    p1: str
    p2: str
    spk: str  # speaker of A and B
    a: np.ndarray  # local indices (within the context) of the A, B and X tokens
    b: np.ndarray
    x: np.ndarray  # X tokens, grouped by speaker
    x_spk: list[str]  # speaker of each X group
    x_start: np.ndarray  # start of each X group in x


def select_frames(
    items: Sequence[Item],
    n_frames: Mapping[str, int],
    frame_shift: float,
    tolerance: float = DEFAULT_TOLERANCE,
    source: str = "items",
    empty_items: str = "drop",
    exact_times: bool = False,
) -> np.ndarray:
    """Frame range ``[start, stop)`` of every item: frames whose centre ``(i + 0.5) * frame_shift``
    lies in ``[onset, offset]``; with ``empty_items="overlap"``, an item with no such frame gets the
    frames whose span ``[i * frame_shift, (i + 1) * frame_shift)`` overlaps ``(onset, offset)``
    (at least one; clamped to ``[0, n)``).

    Args:
        items: the items.
        n_frames: frames per file.
        frame_shift: seconds.
        tolerance: seconds an item's offset may pass the end of its file (``n * frame_shift``);
            feature extractors drop the audio's last partial window.
        source: the item file's name, for messages.

        empty_items: ``drop`` (leave ``stop == start``) or ``overlap``.
        exact_times: compare in exact arithmetic (fastabx's decimal slicing: frames
            ``ceil(onset / dt - 1/2) .. floor(offset / dt - 1/2)``, a centre on a boundary inside);
            otherwise the centres ``(i + 0.5) * frame_shift`` are compared as floats, as ABXpy's time
            arrays are (a centre on a boundary is in or out as float rounding falls: 0.695 s at 10 ms
            leaves frame 69, computed at 0.6950000000000001 s, out).

    Returns:
        ``(len(items), 2)`` int64 array; ``stop == start`` for an item with no frame (``drop`` only).

    Raises:
        DataError: an item names a file with no features, or ends beyond its file
            (``offset > n * frame_shift + tolerance``); names the item file line.
    """
    out = np.empty((len(items), 2), dtype=np.int64)
    by_file: dict[str, list[int]] = defaultdict(list)
    for k, it in enumerate(items):
        by_file[it.file].append(k)
    for f, ks in by_file.items():
        n = n_frames.get(f)
        if n is None:
            raise DataError(f"{source}:{items[ks[0]].line}: item names '{f}', which has no features")
        on = np.array([items[k].onset for k in ks])
        off = np.array([items[k].offset for k in ks])
        end = n * frame_shift
        bad = np.nonzero(off > end + tolerance)[0]
        if len(bad):
            it = items[ks[bad[0]]]
            raise DataError(
                f"{source}:{it.line}: item {it.onset}-{it.offset} s ends beyond '{f}' "
                f"({n} frames x {frame_shift} s = {end:.4f} s)"
            )
        if exact_times:  # frame i inside iff i >= on / dt - 1/2 and i <= off / dt - 1/2, in exact arithmetic
            start = np.clip(np.ceil(on / frame_shift - 0.5 - _EXACT_EPS), 0, n).astype(np.int64)
            stop = np.clip(np.floor(off / frame_shift - 0.5 + _EXACT_EPS) + 1, 0, n).astype(np.int64)
            stop = np.maximum(stop, start)
        else:
            t = (np.arange(n) + 0.5) * frame_shift
            start = np.searchsorted(t, on, side="left")
            stop = np.searchsorted(t, off, side="right")
        if empty_items == "overlap":
            empty = np.nonzero(stop <= start)[0]
            if len(empty) and n > 0:
                eps = 1e-9  # a boundary hit by rounding (0.12 / 0.04 = 2.9999999999999996) is not an overlap
                first = np.floor(on[empty] / frame_shift + eps).astype(np.int64)
                last = np.ceil(off[empty] / frame_shift - eps).astype(np.int64)  # exclusive
                first = np.clip(first, 0, n - 1)
                last = np.clip(np.maximum(last, first + 1), 1, n)
                start[empty], stop[empty] = first, last
        elif empty_items != "drop":
            raise ValueError(f"unknown empty_items rule {empty_items!r}, expected one of {', '.join(EMPTY_ITEM_RULES)}")
        out[ks, 0] = start
        out[ks, 1] = stop
    return out


@gc_paused
def abx_error(
    features: Mapping[str, np.ndarray],
    items: Sequence[Item],
    mode: str = "across",
    distance: str = "cosine",
    frame_shift: float = 0.01,
    normalize: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    source: str = "items",
    max_batch_elements: int = 1 << 21,
    progress: bool = False,
    device: str | torch.device = "cpu",
    empty_items: str = "overlap",
    convention: str = "zr2019",
    num_threads: int | None = None,
    backend: str = "auto",
) -> AbxResult:
    """ZeroSpeech ABX error of frame-level ``features`` on ``items`` (see the module docstring).

    Args:
        features: ``{file: (frames, dim) array}``; every item's file must be present.
        items: ABX items (:func:`speechkit.scoring.abx_items.read_item_file`).
        mode: ``"across"`` or ``"within"`` speakers.
        distance: frame distance, one of :data:`DISTANCES`.
        frame_shift: seconds between frames; frame ``i`` lies at ``(i + 0.5) * frame_shift``.
        empty_items: an item with no frame centre inside: ``overlap`` (default) takes the frame(s)
            overlapping it, ``drop`` drops it (see the module docstring).
        normalize: divide each DTW cost by its path length (ZeroSpeech default).
        tolerance: seconds an item may run past the end of its feature file.
        source: item file name for error messages.
        max_batch_elements: bound on ``batch * (N + M - 1) * N`` per DTW batch (memory; on CUDA the
            default is raised to ``1 << 25``: fewer, larger batches).
        progress: show a tqdm bar over DTW batches.
        device: torch device for frame distances and DTW (float64 throughout). Under ``backend="auto"`` a small
            task (fewer than 20 000 DTW pairs and 2 M triplets, or whose CPU work is estimated under a second on
            ``num_threads`` threads: :func:`_cpu_seconds`) is scored on the CPU whatever the device: the same
            result, without CUDA's start and kernel compilation (1.2-1.5 s on an H200, more than the task).
        convention: ``zr2019`` (ABXpy's averaging and argument order, ZeroSpeech 2017/2019/2020) or
            ``zr2021`` (Libri-Light's, as ``fastabx.zerospeech_abx``; ZeroSpeech 2021 and later); see the
            module docstring.
        num_threads: CPU threads (default: ``torch.get_num_threads()``): the compiled kernels' threads,
            torch's intra-op pool being set to one thread meanwhile; the torch path's intra-op pool (under
            ``auto`` a small task, fewer than 20 000 DTW pairs and 2 M triplets, runs on one thread); the large
            torch operations around them (needed-pair masks of 4 M elements or more, the pair and table
            assembly). Every other torch operation runs on one thread. Torch's setting is restored after.
        backend: ``auto`` (the compiled kernels on the CPU, C's where built, else numba's when numba
            imports, except for small tasks until numba's have been loaded once (torch's path then); on CUDA
            the DTW is a Triton kernel, one program per pair, where triton imports, else :func:`batched_dtw`,
            and the triplets are counted in torch on the GPU: the distance table never leaves it), ``c``,
            ``numba``, ``triton`` (CUDA; the CPU only under Triton's interpreter, for tests) or ``torch``
            (:func:`batched_dtw` and torch's counting, :func:`_count_cells_torch`). All give the same bits but
            for the compiled path's tiles (see the module docstring: the last bit of a frame distance).

    Returns:
        :class:`AbxResult`.

    Raises:
        ValueError: unknown mode/distance/convention/backend, ``num_threads`` < 1, ``backend="numba"``
            without numba or on CUDA, ``backend="c"`` without its built library or on CUDA, or no triplet can
            be formed.
        DataError: missing feature file, item past its file's end, NaN/Inf in features, or
            (``kl``) negative / all-zero frames.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}', expected across or within")
    if empty_items not in EMPTY_ITEM_RULES:
        raise ValueError(f"unknown empty_items rule '{empty_items}', expected one of {', '.join(EMPTY_ITEM_RULES)}")
    _check_distance(distance)
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention '{convention}', expected one of {', '.join(CONVENTIONS)}")
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    dev = torch.device(device)
    use_numba, count_numba = _resolve_backend(backend, dev)
    files = sorted({it.file for it in items})
    n_frames = {}
    for f in files:
        if f not in features:
            line = next(it.line for it in items if it.file == f)
            raise DataError(f"{source}:{line}: item names '{f}', which has no features")
        n_frames[f] = len(features[f])
    exact = convention == "zr2021"
    ranges = select_frames(items, n_frames, frame_shift, tolerance, source, "drop", exact)
    n_overlap = 0
    if empty_items == "overlap":
        n_overlap = int((ranges[:, 1] <= ranges[:, 0]).sum())
        if n_overlap:
            ranges = select_frames(items, n_frames, frame_shift, tolerance, source, "overlap", exact)
            logger.info("%d of %d items hold no frame centre (frame shift %g s) and take the frame(s) "
                        "overlapping them", n_overlap, len(items), frame_shift)
    lengths = ranges[:, 1] - ranges[:, 0]
    keep = np.nonzero(lengths > 0)[0]
    n_dropped = len(items) - len(keep)
    if n_dropped:
        examples = ", ".join(f"{items[k].file} {items[k].onset}-{items[k].offset}" for k in np.nonzero(lengths == 0)[0][:3])
        logger.warning("%d of %d items select no frame (frame shift %g s) and are dropped, e.g. %s",
                       n_dropped, len(items), frame_shift, examples)
    kept = [items[k] for k in keep]
    ranges, lengths = ranges[keep], lengths[keep]

    if not kept:
        raise ValueError("no item selects any frame")
    dims = {features[f].shape[1] for f in files}
    if len(dims) != 1:
        raise DataError(f"feature files have different dimensions: {sorted(dims)}")

    n_req = num_threads if num_threads is not None else max(1, torch.get_num_threads())
    with _torch_threads(1):  # small torch operations on one thread; the large ones say otherwise (_torch_threads)
        # context -> phone -> speaker -> local token indices; cells; token pairs needed by some triplet
        tree: dict[tuple[str, ...], dict[str, dict[str, list[int]]]] = {}
        members: dict[tuple[str, ...], list[int]] = {}
        for k, it in enumerate(kept):
            mem = members.setdefault(it.context, [])
            tree.setdefault(it.context, {}).setdefault(it.phone, {}).setdefault(it.speaker, []).append(len(mem))
            mem.append(k)
        ctx_cells = []  # (context, its cell groups, its tokens per speaker), for the contexts with a cell
        for ctx, groups in tree.items():
            if len(groups) >= 2:
                new_cells = _enumerate_cells(len(ctx_cells), groups, mode)
                if new_cells:
                    ctx_cells.append((ctx, new_cells, _speaker_counts(groups)))
        if not ctx_cells:
            raise ValueError(f"no ABX triplet can be formed from these items ({mode} speakers)")
        n_upper = sum(len(c.a) * len(c.b) * len(c.x) for _, cs, _ in ctx_cells for c in cs)  # A = X ones included
        n_bound = sum(_pairs_bound(counts, mode) for _, _, counts in ctx_cells)  # >= the DTW pairs
        if backend == "auto" and dev.type == "cuda" and _on_cpu_anyway(n_bound, lengths, n_upper, n_req):
            # decided before CUDA is touched (its context costs ~0.3 s): see the same test below, on the real pairs
            dev = torch.device("cpu")
            use_numba, count_numba = _resolve_backend(backend, dev)
        # every per-pair array lives on pair_dev: the scoring device on CUDA (the host never holds an array of
        # pairs there), the CPU otherwise (numpy views of its tensors feed the numba kernels)
        # (a context of few tokens is done on the CPU and its pairs moved: cheaper than a dozen kernel launches)
        pair_dev = dev if dev.type == "cuda" else torch.device("cpu")
        cells: list[_CellGroup] = []
        pair_g: list[tuple[torch.Tensor, torch.Tensor]] = []  # per context: the pairs' tokens (indices into kept)
        pair_flat: list[tuple[torch.Tensor, torch.Tensor]] = []  # and their entries [u, v], [v, u] in dflat below
        # dflat's layout: per context a w x w matrix across speakers; within speakers one n x n matrix per speaker of
        # the context (its n tokens, in order), as a pair never joins two speakers there: sum(n^2) entries, not w^2
        blocks: list[dict[str, tuple[int, int]]] = []  # per context: speaker (within) or "" -> (offset, width)
        local: list[np.ndarray] = []  # within: per context, each token's index inside its speaker's block
        ctx_size = 0
        # every token's phone and speaker as integer codes in the labels' order, once (not per context)
        ph_rank = {p: i for i, p in enumerate(sorted({it.phone for it in kept}))}
        sp_rank = {s: i for i, s in enumerate(sorted({it.speaker for it in kept}))}
        ph_code = np.array([ph_rank[it.phone] for it in kept], dtype=np.int64)
        sp_code = np.array([sp_rank[it.speaker] for it in kept], dtype=np.int64)
        for ctx, new_cells, per_speaker in ctx_cells:
            mem = np.asarray(members[ctx], dtype=np.int64)
            cells.extend(new_cells)
            w = len(mem)
            mask_dev = pair_dev if w >= _DEVICE_PAIRS_MIN_TOKENS else torch.device("cpu")
            # one speaker's block at a time within speakers
            side = max(per_speaker.values()) if mode == "within" and w >= _DEVICE_PAIRS_MIN_TOKENS else w
            with _torch_threads(n_req if side * side >= _THREADED_MASK_ELEMENTS else 1):
                u, v = _needed_pairs(ph_code[mem], sp_code[mem], mode, mask_dev)
                if w == len(kept):  # the context holds every token, in order (members): its indices are theirs
                    pair_g.append((u, v))
                else:
                    m = torch.from_numpy(mem).to(mask_dev)
                    pair_g.append((m[u], m[v]))  # on mask_dev: moved to pair_dev together below
                if mode == "within":
                    loc, tok_off, tok_w, by_speaker, size = _speaker_blocks([kept[k].speaker for k in mem])
                    loc_t, off_t, w_t = (torch.from_numpy(a).to(mask_dev) for a in (loc, tok_off, tok_w))
                    base, width, lu, lv = ctx_size + off_t[u], w_t[u], loc_t[u], loc_t[v]
                    if not torch.equal(off_t[u], off_t[v]):
                        raise AssertionError("a within-speaker DTW pair joins two speakers")
                    pair_flat.append((base + lu * width + lv, base + lv * width + lu))
                    blocks.append({spk: (ctx_size + o, n) for spk, (o, n) in by_speaker.items()})
                    local.append(loc)
                else:
                    uv, vu = u * w, v * w  # ctx_size + u * w + v, ctx_size + v * w + u, without temporaries
                    pair_flat.append((uv.add_(v).add_(ctx_size), vu.add_(u).add_(ctx_size)))
                    blocks.append({"": (ctx_size, w)})
                    size = w * w
            ctx_size += size
        n_dtw_pairs = sum(len(g[0]) for g in pair_g)
        tiny = n_dtw_pairs < _NUMBA_MIN_PAIRS and n_upper < _NUMBA_MIN_TRIPLETS
        if backend == "auto" and dev.type == "cuda" and _on_cpu_anyway(n_dtw_pairs, lengths, n_upper, n_req):
            # a small task is scored on the CPU (the same bits but for the tiles' last bit): CUDA's start and a
            # kernel's first launch (Triton's compilation or cache load) cost more than the whole task there
            dev = pair_dev = torch.device("cpu")
            use_numba, count_numba = _resolve_backend(backend, dev)
        small = False
        if count_numba and backend == "auto" and tiny:
            # a small task runs on one thread: a pool costs more than it gives on small operations (far more on a
            # busy core); with C's kernels (by-context tasks of 976 / 1270 pairs: 0.10 -> 0.09 s, 0.055 -> 0.04 s
            # against the torch path), else on the torch path until numba's have been loaded once (their start,
            # 0.3-0.45 s, costs more than the whole task)
            small = True
            if not _KERNELS_USED and not _abx_ckernels.available():
                use_numba = count_numba = False
        kernels = _load_kernels(backend) if count_numba else None
        if kernels is None:
            use_numba = count_numba = False
        # numba's kernels load in the background while the pairs' DTW runs (on CUDA the host waits); C's are loaded
        warm = kernels.warm_up_in_background() if kernels is not None else None
        n_threads = 1 if small else n_req
        gu = _cat_onto([g[0] for g in pair_g], pair_dev)
        gv = _cat_onto([g[1] for g in pair_g], pair_dev)
        del pair_g

        # flat frame array of the tokens that take part in some triplet
        with _torch_threads(n_threads):
            mark = torch.zeros(len(kept), dtype=torch.bool, device=pair_dev)
            mark[gu] = True
            mark[gv] = True
            used_t = mark.nonzero().view(-1)  # = unique(cat([gu, gv])), without sorting tens of millions
            if use_numba:  # grouped by context and speaker, in item order inside: tiles of shared frame distances
                group_of = _token_groups(sp_code, members)
                used_t = used_t[torch.from_numpy(np.argsort(group_of[used_t.numpy()], kind="stable"))]
            used = used_t.cpu().numpy()
            pos = torch.full((len(kept),), -1, dtype=torch.long, device=pair_dev)
            pos[used_t] = torch.arange(len(used_t), device=pair_dev)
            gu, gv = pos[gu], pos[gv]
            del mark, pos, used_t
        chunks = [np.asarray(features[kept[k].file][ranges[k, 0] : ranges[k, 1]], dtype=np.float64) for k in used]
        allf = np.concatenate(chunks)
        if not np.isfinite(allf).all() or (distance == "kl" and ((allf < 0).any() or (allf.sum(1) <= 0).any())):
            for k, mat in zip(used, chunks):  # find the culprit for the message
                it, (s, e) = kept[k], ranges[k]
                where = f"features of '{it.file}' frames {s}-{e} (item at {source}:{it.line})"
                if not np.isfinite(mat).all():
                    raise DataError(f"{where}: NaN or Inf")
                if distance == "kl":
                    check_kl_frames(mat, where)
        del chunks
        used_len = lengths[used]
        offsets = np.concatenate([[0], np.cumsum(used_len)[:-1]]).astype(np.int64)
        frame_dist = _FRAME_DISTANCES[distance](torch.from_numpy(allf).to(dev))
        tiles = None
        if use_numba and frame_dist.tileable:
            g = group_of[used]
            tiles = _make_tiles(g, used_len, g if mode == "within" else g >> 32)
        if dev.type == "cuda" and max_batch_elements == 1 << 21:
            max_batch_elements = 1 << 25

        # one DTW per unordered token pair: d_uv (u as rows), d_vu (v as rows)
        dtw_fn = None if use_numba else _device_dtw(backend, dev)
        d_uv, d_vu = _pair_distances(offsets, used_len, gu, gv, frame_dist, normalize, max_batch_elements,
                                     progress, dev, use_numba, n_threads, dtw_fn, tiles, kernels)
        del gu, gv

        # per-context distance matrices, flattened: entry [p, x] = the distance of token p to X token x, the DTW
        # with p as its rows (ABXpy: d(A, X)) under zr2019, with x as its rows (fastabx: d(X, A)) under zr2021
        if convention == "zr2021":
            d_uv, d_vu = d_vu, d_uv
        with _torch_threads(n_threads):
            dflat_t = torch.full((ctx_size,), math.nan, dtype=torch.float64, device=pair_dev)
            dflat_t[_cat_onto([f[0] for f in pair_flat], pair_dev)] = d_uv
            dflat_t[_cat_onto([f[1] for f in pair_flat], pair_dev)] = d_vu
            del d_uv, d_vu, pair_flat
            # the compiled kernels count on the CPU (there the same memory, no copy); torch counts on pair_dev
            dflat = dflat_t.cpu().numpy() if kernels is not None else dflat_t
            del dflat_t

        if warm is not None:
            warm.join()
        if count_numba:
            _mark_kernels_used()
        # each cell group's matrix in dflat (its context's, or its speaker's there within speakers) and its tokens'
        # indices into it
        key = (lambda c: c.spk) if mode == "within" else (lambda c: "")
        g_block = np.array([blocks[c.context][key(c)] for c in cells], dtype=np.int64).reshape(-1, 2)
        if mode == "within":
            tok_start = np.concatenate([[0], np.cumsum([len(x) for x in local])]).astype(np.int64)
            to_block = (np.concatenate(local), tok_start)
        else:
            to_block = None
        wins, ties, cell_n, cell_group, cell_spk_x = _count_triplets(
            cells, dflat, g_block[:, 0].copy(), g_block[:, 1].copy(), to_block, mode, kernels, n_threads)
        del dflat
        score = (wins + 0.5 * ties) / cell_n
        return _average(cells, cell_group, cell_spk_x, cell_n, score, mode, convention, distance, normalize,
                        frame_shift, len(kept), n_dropped, n_overlap, empty_items, n_dtw_pairs)


def _on_cpu_anyway(n_pairs: int, lengths: np.ndarray, n_triplets: int, n_threads: int) -> bool:
    """Whether ``backend="auto"`` scores a task on the CPU although a CUDA device was asked for: a small one
    (fewer than :data:`_NUMBA_MIN_PAIRS` DTW pairs and :data:`_NUMBA_MIN_TRIPLETS` triplets) or one whose CPU work
    (:func:`_cpu_seconds`) is under :data:`_CUDA_MIN_CPU_SECONDS`. Increasing in ``n_pairs``: true of an upper
    bound of the pairs (:func:`_pairs_bound`), it is true of the pairs themselves."""
    return ((n_pairs < _NUMBA_MIN_PAIRS and n_triplets < _NUMBA_MIN_TRIPLETS)
            or _cpu_seconds(n_pairs, lengths, n_triplets, n_threads) < _CUDA_MIN_CPU_SECONDS)


def _pairs_bound(per_speaker: Mapping[str, int], mode: str) -> int:
    """An upper bound of the DTW pairs :func:`_needed_pairs` finds in one context of ``per_speaker[s]`` tokens of
    speaker ``s`` (:func:`_speaker_counts`): every pair of its tokens of one speaker (``within``: A, B and X share
    it) or of two (``across``: X is of another speaker than A and B), without looking at their phones."""
    per_speaker = per_speaker.values()
    same = sum(n * (n - 1) // 2 for n in per_speaker)
    if mode == "within":
        return same
    w = sum(per_speaker)
    return w * (w - 1) // 2 - same


def _speaker_blocks(speakers: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, tuple[int, int]],
                                                      int]:
    """The speakers' blocks of one context's within-speaker distances: its tokens (``speakers[i]``: token ``i``'s)
    grouped by speaker, in order of first appearance, each speaker's ``n`` tokens an ``n x n`` matrix after the
    previous ones. Returns ``(local, offset, width, by_speaker, size)``: per token its index in its speaker's block,
    the block's offset and width (``(W,)`` int64 each), per speaker ``(offset, width)``, and the entries in all."""
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(s, len(index)) for s in speakers], dtype=np.int64)
    counts = np.bincount(codes, minlength=len(index)).astype(np.int64)
    starts = np.cumsum(counts) - counts
    local = np.empty(len(codes), dtype=np.int64)
    local[np.argsort(codes, kind="stable")] = np.arange(len(codes), dtype=np.int64) - np.repeat(starts, counts)
    offsets = np.cumsum(counts * counts) - counts * counts
    by_speaker = {s: (int(offsets[i]), int(counts[i])) for s, i in index.items()}
    return local, offsets[codes], counts[codes], by_speaker, int((counts * counts).sum())


def _speaker_counts(groups: Mapping[str, Mapping[str, list[int]]]) -> dict[str, int]:
    """Tokens per speaker of one context (``groups``: phone -> speaker -> tokens)."""
    per_speaker: dict[str, int] = defaultdict(int)
    for by_speaker in groups.values():
        for spk, idx in by_speaker.items():
            per_speaker[spk] += len(idx)
    return per_speaker


def _cpu_seconds(n_pairs: int, lengths: np.ndarray, n_triplets: int, n_threads: int) -> float:
    """Rough wall seconds of a task on the compiled CPU path: its frame pairs (``n_pairs`` DTW pairs of tokens of
    ``lengths`` frames on average) and triplets at :data:`_CPU_NS_PER_FRAME_PAIR` and :data:`_CPU_NS_PER_TRIPLET`,
    :data:`_CPU_SERIAL_FRACTION` of that on one thread and the rest shared by ``n_threads`` (Amdahl's law).

    The constants come from one-thread runs of every phase on a 2-core machine (C kernels; Intel Xeon and AMD EPYC
    alike): 13.6 s for 14.3 M pairs of 8.9 frames on average and 191 M triplets, 2.45 s for 3.4 M pairs of 7.2 frames
    and 60.7 M triplets (bench_abx's synthetic and TIMIT tasks without context, across speakers); the serial part
    from that task's 1- and 2-thread times (1.4 of 13.5 s)."""
    mean_len = float(np.mean(lengths)) if len(lengths) else 0.0
    ns = n_pairs * mean_len * mean_len * _CPU_NS_PER_FRAME_PAIR + n_triplets * _CPU_NS_PER_TRIPLET
    return ns * 1e-9 * (_CPU_SERIAL_FRACTION + (1.0 - _CPU_SERIAL_FRACTION) / n_threads)


def _token_groups(speaker_code: np.ndarray, members: Mapping[tuple[str, ...], list[int]]) -> np.ndarray:
    """``(len(speaker_code),)`` int64: each token's context (by first appearance, high 32 bits) and speaker (by
    first appearance, low 32 bits; contexts in ``members``' order, each one's tokens in order), from each token's
    speaker code (``(N,)`` int64, equal codes for equal speakers) and ``members`` (context -> its tokens' indices)."""
    sizes = np.fromiter((len(m) for m in members.values()), dtype=np.int64, count=len(members))
    order = np.fromiter(itertools.chain.from_iterable(members.values()), dtype=np.int64, count=int(sizes.sum()))
    seq = speaker_code[order]
    codes, first = np.unique(seq, return_index=True)
    rank = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
    rank[codes[np.argsort(first, kind="stable")]] = np.arange(len(codes), dtype=np.int64)
    out = np.empty(len(speaker_code), dtype=np.int64)
    out[order] = (np.repeat(np.arange(len(sizes), dtype=np.int64), sizes) << 32) | rank[seq]
    return out


def _run_bounds(a: np.ndarray) -> np.ndarray:
    """Where the runs of equal values of ``a`` ((N,) array, e.g. sorted keys) start, with ``N`` last: run ``r`` is
    ``a[bounds[r]:bounds[r + 1]]`` (``(runs + 1,)`` int64; ``[0, 0]`` for an empty ``a``)."""
    return np.concatenate([[0], np.nonzero(a[1:] != a[:-1])[0] + 1, [len(a)]]).astype(np.int64)


def _cat_onto(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
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


def _mark_kernels_used() -> None:
    global _KERNELS_USED
    _KERNELS_USED = True


def _resolve_backend(backend: str, dev: torch.device) -> tuple[bool, bool]:
    """``(compiled DTW, compiled triplet counting)``, the kernels being C's or numba's (:func:`_load_kernels`):
    both on the CPU under ``auto``, ``c`` and ``numba``; on CUDA the DTW is torch's or Triton's
    (:func:`_device_dtw`) and the counting torch's, on the GPU (:func:`_count_cells_torch`); ``torch``: neither,
    on any device. ``triton`` on the CPU (Triton's interpreter) counts with the compiled kernels.

    Raises:
        ValueError: an unknown backend, ``c`` or ``numba`` on a non-CPU device, ``c`` without its built library,
            ``numba`` without numba, ``triton`` without triton or on the CPU outside Triton's interpreter
            (``TRITON_INTERPRET=1``).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}', expected one of {', '.join(BACKENDS)}")
    if backend == "torch":
        return False, False
    if backend in ("c", "numba") and dev.type != "cpu":
        raise ValueError(f"backend '{backend}' runs on the CPU, not on {dev}")
    if backend == "c":
        if not _abx_ckernels.available():
            raise ValueError(f"backend 'c': {_abx_ckernels.why_not()}")
        return True, True
    if backend == "triton":
        if importlib.util.find_spec("triton") is None:
            raise ValueError("backend 'triton' needs triton (shipped with CUDA builds of torch)")
        if dev.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError(f"backend 'triton' runs on CUDA (or on the CPU under TRITON_INTERPRET=1), not on {dev}")
    if importlib.util.find_spec("numba") is None and (backend == "numba" or not _abx_ckernels.available()):
        # numba is imported later, only when used (it costs about 0.5 s)
        if backend == "numba":
            raise ValueError("backend 'numba' needs numba, which is not installed")
        logger.warning("neither the C kernels (%s) nor numba: ABX uses the slower torch DTW and counting",
                       _abx_ckernels.why_not())
        return False, False
    return dev.type == "cpu" and backend != "triton", dev.type == "cpu"


def _device_dtw(backend: str, dev: torch.device) -> Callable:
    """The batch DTW of the torch path: the Triton kernel (:mod:`speechkit.scoring._abx_triton`) under ``triton``,
    and under ``auto`` on CUDA when triton imports; :func:`batched_dtw` otherwise. Under ``auto`` a kernel that
    fails to compile falls back to :func:`batched_dtw` (with a warning)."""
    if backend == "triton" or (backend == "auto" and dev.type == "cuda" and importlib.util.find_spec("triton")):
        try:
            from speechkit.scoring._abx_triton import dtw_batch
        except Exception as e:  # noqa: BLE001 - ImportError, or triton failing to initialise
            if backend == "triton":
                raise ValueError(f"backend 'triton': {type(e).__name__}: {e}") from None
            logger.warning("triton does not load (%s: %s): ABX uses the torch DTW", type(e).__name__, e)
            return batched_dtw
        if backend == "triton":
            return dtw_batch
        state = {"fn": dtw_batch}

        def guarded(d, n_rows, n_cols):
            try:
                return state["fn"](d, n_rows, n_cols)
            except Exception as e:  # noqa: BLE001 - a compilation failure; a CUDA fault would not get here
                if state["fn"] is batched_dtw:
                    raise
                logger.warning("the Triton DTW kernel failed (%s: %s): ABX uses the torch DTW", type(e).__name__, e)
                state["fn"] = batched_dtw
                return batched_dtw(d, n_rows, n_cols)

        return guarded
    return batched_dtw


def _load_kernels(backend: str):
    """The compiled CPU kernels: the C ones (:mod:`speechkit.scoring._abx_ckernels`) under ``c``, and under
    ``auto`` and ``triton`` where they are built and current; numba's (:mod:`speechkit.scoring._abx_kernels`)
    under ``numba`` and otherwise. None (with a warning) where neither loads under ``auto`` / ``triton``.

    Raises:
        ValueError: numba's kernels do not import under ``backend="numba"``.
    """
    if backend == "c" or (backend != "numba" and _abx_ckernels.available()):
        return _abx_ckernels  # under "c", _resolve_backend has checked that it loads
    try:
        from speechkit.scoring import _abx_kernels
    except Exception as e:  # noqa: BLE001 - ImportError, or numba failing to initialise
        if backend == "numba":
            raise ValueError(f"backend 'numba': the numba kernels do not load ({type(e).__name__}: {e})") from None
        logger.warning("the numba kernels do not load (%s: %s): ABX uses the slower torch DTW and counting",
                       type(e).__name__, e)
        return None
    return _abx_kernels


def _count_triplets(cells: list[_CellGroup], dflat: np.ndarray | torch.Tensor, g_off: np.ndarray, g_w: np.ndarray,
                    to_block: tuple[np.ndarray, np.ndarray] | None, mode: str, kernels, n_threads: int):
    """Wins and ties per cell ((context, phone pair, speaker(s)) cell; a cell group holds one cell per X speaker).

    Cell group ``g`` reads its distances from the ``g_w[g] x g_w[g]`` row-major matrix at ``dflat[g_off[g]:]``;
    its tokens' context-local indices index that matrix directly, or, with ``to_block = (index, start)``, through
    ``index[start[context] + i]`` (within speakers: the index of token ``i`` in its speaker's matrix).

    ``kernels`` (C's or numba's, :func:`_load_kernels`; ``dflat`` a numpy array) count on the CPU on ``n_threads``
    threads; without them :func:`_count_cells_torch` counts in torch on ``dflat``'s device (a tensor there: on
    CUDA the distance table never leaves the GPU). The same integers either way: only comparisons.

    Returns ``(wins, ties, n, group, spk_x)``, per cell: triplets won (``d(A, X) < d(B, X)``), tied,
    scored, the index of its cell group in ``cells``, and the index of its X speaker in its group's ``x_spk``.
    """
    within = mode == "within"
    n_groups = len(cells)
    na = np.array([len(c.a) for c in cells], dtype=np.int64)
    nb = np.array([len(c.b) for c in cells], dtype=np.int64)
    nx = np.array([len(c.x) for c in cells], dtype=np.int64)
    ncell = np.array([len(c.x_start) for c in cells], dtype=np.int64)
    cell_ptr = np.concatenate([[0], np.cumsum(ncell)]).astype(np.int64)
    n_cells = int(cell_ptr[-1])
    cell_group = np.repeat(np.arange(n_groups, dtype=np.int64), ncell)
    cell_spk_x = np.arange(n_cells, dtype=np.int64) - cell_ptr[:-1][cell_group]
    x_ptr = np.concatenate([[0], np.cumsum(nx)]).astype(np.int64)
    # X tokens per cell: a group's cells are its X speakers, starting at x_start within its X tokens
    x_sizes = np.diff(np.append(np.concatenate([c.x_start for c in cells]) + np.repeat(x_ptr[:-1], ncell), x_ptr[-1]))
    a_ptr = np.concatenate([[0], np.cumsum(na)]).astype(np.int64)
    b_ptr = np.concatenate([[0], np.cumsum(nb)]).astype(np.int64)
    a_pool = np.concatenate([c.a for c in cells]).astype(np.int64)
    b_pool = np.concatenate([c.b for c in cells]).astype(np.int64)
    x_pool = np.concatenate([c.x for c in cells]).astype(np.int64)
    if to_block is not None:
        index, start = to_block
        g_start = start[np.array([c.context for c in cells], dtype=np.int64)]
        a_pool = index[np.repeat(g_start, na) + a_pool]
        b_pool = index[np.repeat(g_start, nb) + b_pool]
        x_pool = index[np.repeat(g_start, nx) + x_pool]
    x_cell = np.repeat(np.arange(n_cells, dtype=np.int64), x_sizes)
    if kernels is not None:  # the compiled kernel (C's or numba's: _load_kernels)
        K = kernels
        wins = np.zeros(n_cells, dtype=np.int64)
        ties = np.zeros(n_cells, dtype=np.int64)
        # chunks of about equal work (X tokens x (A + B) tokens), many per thread so a slow thread takes fewer
        work = np.cumsum(nx * (na + nb) + 1)
        n_chunks = max(1, min(n_groups, 16 * n_threads, int(work[-1] // 20000) + 1))
        cuts = np.unique(np.searchsorted(work, np.linspace(0, work[-1], n_chunks + 1)[1:-1]))
        edges = np.concatenate([[0], cuts, [n_groups]]).astype(np.int64)
        chunks = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        K.run_tasks(lambda ch: K.count_cells(ch[0], ch[1], dflat, g_off, g_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr,
                                             x_pool, x_cell, within, wins, ties), chunks, n_threads)
    else:
        with _torch_threads(n_threads):
            wins, ties = _count_cells_torch(torch.as_tensor(dflat), g_off, g_w, a_ptr, a_pool, b_ptr, b_pool, x_ptr,
                                            x_pool, x_cell, within, n_cells)
    n = (na[cell_group] * x_sizes - (na[cell_group] if within else 0)) * nb[cell_group]
    return wins, ties, n, cell_group, cell_spk_x


_COUNT_ELEMENTS = 1 << 22  # (X token, A token, B token) comparisons per step of _count_cells_torch on the CPU
_COUNT_ELEMENTS_CUDA = 1 << 26  # and on CUDA (a few hundred MB of temporaries)


def _count_cells_torch(dflat: torch.Tensor, g_off: np.ndarray, g_w: np.ndarray, a_ptr: np.ndarray,
                       a_pool: np.ndarray, b_ptr: np.ndarray, b_pool: np.ndarray, x_ptr: np.ndarray,
                       x_pool: np.ndarray, x_cell: np.ndarray, within: bool, n_cells: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The triplet counting of :func:`_count_triplets` in torch, on ``dflat``'s device (the CPU, or CUDA: the
    distance table stays there; only ``(n_cells,)`` counts come back).

    Group ``g``'s A tokens are ``a_pool[a_ptr[g]:a_ptr[g + 1]]`` (indices into its ``g_w[g] x g_w[g]`` matrix at
    ``dflat[g_off[g]:]``), its B and X tokens likewise; X token ``k`` of the pool belongs to cell ``x_cell[k]``.
    The groups are bucketed by their A and B counts rounded up to powers of two; a bucket's X tokens are taken a
    chunk at a time (:data:`_COUNT_ELEMENTS` comparisons, :data:`_COUNT_ELEMENTS_CUDA` on CUDA), each as an
    ``(X, A, B)`` comparison of ``d(A, X)`` with ``d(B, X)`` gathered from ``dflat``, the padding NaN (a NaN is
    neither less than nor equal to anything, so it counts nowhere), and within speakers the A token that is X
    itself NaN too. Wins (``<``) and ties (``==``) are summed per X token, then per cell.

    Returns ``(wins, ties)``: ``(n_cells,)`` int64 numpy arrays.
    """
    dev = dflat.device
    na, nb, nx = np.diff(a_ptr), np.diff(b_ptr), np.diff(x_ptr)
    wins = torch.zeros(n_cells, dtype=torch.int64, device=dev)
    ties = torch.zeros(n_cells, dtype=torch.int64, device=dev)
    limit = _COUNT_ELEMENTS_CUDA if dev.type == "cuda" else _COUNT_ELEMENTS
    # buckets of groups with the same A and B counts rounded up to powers of two: at most 4x padded comparisons
    bucket = _ceil_log2(na) * 64 + _ceil_log2(nb)
    order = np.argsort(bucket, kind="stable")
    bounds = _run_bounds(bucket[order])
    nan = torch.tensor(math.nan, dtype=dflat.dtype, device=dev)
    for r in range(len(bounds) - 1):
        groups = order[bounds[r]:bounds[r + 1]]
        a_mat, a_ok = _padded_rows(a_pool, a_ptr, groups)  # (G, NA) token indices (0 where padded), mask
        b_mat, b_ok = _padded_rows(b_pool, b_ptr, groups)
        width = g_w[groups][:, None]
        a_row = torch.from_numpy(g_off[groups][:, None] + a_mat * width).to(dev)  # the row of each A token
        b_row = torch.from_numpy(g_off[groups][:, None] + b_mat * width).to(dev)
        a_ok_t, b_ok_t = torch.from_numpy(a_ok).to(dev), torch.from_numpy(b_ok).to(dev)
        a_tok = torch.from_numpy(a_mat).to(dev) if within else None
        # the bucket's X tokens: their group (in the bucket), index in their group's matrix, cell
        col = _ranges(x_ptr[groups], nx[groups])
        col_g = torch.from_numpy(np.repeat(np.arange(len(groups), dtype=np.int64), nx[groups])).to(dev)
        col_x = torch.from_numpy(x_pool[col]).to(dev)
        col_cell = torch.from_numpy(x_cell[col]).to(dev)
        n_a, n_b = a_mat.shape[1], b_mat.shape[1]
        step = max(1, limit // (n_a * n_b))
        for c0 in range(0, len(col), step):
            g, x = col_g[c0:c0 + step], col_x[c0:c0 + step, None]
            da = torch.where(a_ok_t[g], dflat[a_row[g] + x], nan)  # (C, NA): d(A, X) (entry [A, X])
            if within:
                da = torch.where(a_tok[g] == x, nan, da)  # X != A
            db = torch.where(b_ok_t[g], dflat[b_row[g] + x], nan)  # (C, NB)
            da, db = da[:, :, None], db[:, None, :]
            cell = col_cell[c0:c0 + step]
            wins.index_add_(0, cell, (da < db).sum((1, 2)))
            ties.index_add_(0, cell, (da == db).sum((1, 2)))
    return wins.cpu().numpy(), ties.cpu().numpy()


def _ceil_log2(n: np.ndarray) -> np.ndarray:
    """``ceil(log2(n))`` of positive integers ``n`` ((N,) int64, below 2^53), exactly: 0 for 1, 1 for 2, 2 for 3
    and 4; the bit length of ``n - 1``, frexp's exponent of it."""
    return np.frexp((n - 1).astype(np.float64))[1].astype(np.int64)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without the loop ((sum(counts),) int64)."""
    total = int(counts.sum())
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - first, counts)


def _padded_rows(pool: np.ndarray, ptr: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lists ``pool[ptr[g]:ptr[g + 1]]`` of ``groups`` as the rows of a ``(len(groups), longest)`` int64 matrix,
    padded with 0, and the ``(len(groups), longest)`` bool mask of the entries that are not padding."""
    counts = ptr[groups + 1] - ptr[groups]
    width = int(counts.max())
    ok = np.arange(width)[None, :] < counts[:, None]
    mat = np.zeros((len(groups), width), dtype=np.int64)
    mat[ok] = pool[_ranges(ptr[groups], counts)]
    return mat, ok


def _average(cells, cell_group, cell_spk_x, cell_n, score, mode, convention, distance, normalize, frame_shift,
             n_items, n_dropped, n_overlap, empty_items, n_dtw_pairs) -> AbxResult:
    """Average the cell scores under ``convention`` (module docstring) into an :class:`AbxResult`."""
    across = mode == "across"
    pairs = sorted({(c.p1, c.p2) for c in cells})
    pair_index = {k: i for i, k in enumerate(pairs)}
    g_pair = np.array([pair_index[(c.p1, c.p2)] for c in cells], dtype=np.int64)
    # across, cells share their X speaker lists (_enumerate_cells); within, X's speaker is A's
    x_lists = {id(c.x_spk): c.x_spk for c in cells} if across else {}
    speakers = sorted({c.spk for c in cells} | {s for xs in x_lists.values() for s in xs})
    spk_index = {s: i for i, s in enumerate(speakers)}
    g_spk = np.array([spk_index[c.spk] for c in cells], dtype=np.int64)
    c_pair, c_spk = g_pair[cell_group], g_spk[cell_group]
    if across:
        x_ids = {k: np.array([spk_index[s] for s in xs], dtype=np.int64) for k, xs in x_lists.items()}
        c_spk_x = np.concatenate([x_ids[id(c.x_spk)] for c in cells])
    else:
        c_spk_x = np.full(len(score), -1, dtype=np.int64)
    n_spk = len(speakers)

    def mean_by(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct keys in order of first appearance, the mean of the values of each (summed in order, as
        Python's ``sum``: the same bits as averaging lists built in that order), and how many values each has."""
        uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        inv = rank[inv.reshape(-1)]
        counts = np.bincount(inv)
        return uniq[np.argsort(rank)], np.bincount(inv, weights=values) / counts, counts

    # per (phone pair, speaker key): the mean over contexts of the key's cells, the key being the (A/B speaker,
    # X speaker) pair across, the speaker within (zr2019's level, and what the bootstrap resamples)
    key_x = c_spk_x + 1 if across else np.zeros_like(c_spk)
    keys, key_means, key_counts = mean_by((c_pair * n_spk + c_spk) * (n_spk + 1) + key_x, score)
    k_pair = keys // ((n_spk + 1) * n_spk)
    k_spk = (keys // (n_spk + 1)) % n_spk
    k_x = keys % (n_spk + 1) - 1
    # {phone pair: {speaker key: value}}, both levels in order of first appearance (the keys' order), one dict per
    # phone pair from its run of keys (a Python loop over the keys cost 0.8 s for bench_abx's 593 k across keys)
    names = ([(a, x) for a in speakers for x in speakers] if across else [(a,) for a in speakers])
    code = k_spk * n_spk + k_x if across else k_spk
    by_pair = np.argsort(k_pair, kind="stable")
    kp = k_pair[by_pair]
    bounds = _run_bounds(kp)
    starts, ends = bounds[:-1], bounds[1:]
    code_l, mean_l, count_l = (a[by_pair].tolist() for a in (code, key_means, key_counts))
    speaker_scores: dict[tuple[str, str], dict[tuple[str, ...], float]] = {}
    speaker_counts: dict[tuple[str, str], dict[tuple[str, ...], int]] = {}
    for g in np.argsort(by_pair[starts], kind="stable").tolist():  # phone pairs by first appearance
        a, b = int(starts[g]), int(ends[g])
        spk_keys = [names[c] for c in code_l[a:b]]
        speaker_scores[pairs[int(kp[a])]] = dict(zip(spk_keys, mean_l[a:b]))
        speaker_counts[pairs[int(kp[a])]] = dict(zip(spk_keys, count_l[a:b]))
    if across and convention == "zr2021":  # the mean over contexts and X speakers together, per A/B speaker
        keys, key_means, _ = mean_by(c_pair * n_spk + c_spk, score)
        k_pair = keys // n_spk
    p_ids, p_acc, _ = mean_by(k_pair, key_means)
    pair_acc = np.empty(len(pairs))
    pair_acc[p_ids] = p_acc
    pair_trip = np.bincount(c_pair, weights=cell_n, minlength=len(pairs))
    pair_cells = np.bincount(c_pair, minlength=len(pairs))
    per_pair = [PhonePairScore(p1, p2, float(100.0 * (1.0 - acc)), int(nt), int(nc))
                for (p1, p2), acc, nt, nc in zip(pairs, pair_acc.tolist(), pair_trip.tolist(), pair_cells.tolist())]
    error = float(100.0 * (1.0 - sum(pair_acc.tolist()) / len(pairs)))
    return AbxResult(
        error=error,
        mode=mode,
        distance=distance,
        normalize=normalize,
        frame_shift=frame_shift,
        n_items=n_items,
        n_items_dropped=n_dropped,
        n_items_overlap=n_overlap,
        empty_items=empty_items,
        speaker_scores=speaker_scores,
        speaker_counts=speaker_counts,
        n_triplets=int(cell_n.sum()),
        n_cells=len(score),
        n_phone_pairs=len(per_pair),
        n_dtw_pairs=n_dtw_pairs,
        by_phone_pair=per_pair,
        convention=convention,
    )


@dataclass
class BootstrapInterval:
    """Percentile bootstrap interval of an ABX error (:func:`bootstrap_interval`); errors in percent."""

    low: float
    high: float
    level: float  # 0.95 for a 95 % interval
    std: float  # standard deviation of the replicates
    n_resamples: int  # replicates drawn
    n_valid: int  # replicates in which some phone pair kept a speaker (the others are left out)
    seed: int
    unit: str = "speaker"
    errors: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # (n_valid,) replicates
    n_distinct: int = 0  # distinct speaker resamples among the n_valid (1: the interval cannot vary)
    n_speakers: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("errors")
        return d

    def summary(self) -> str:
        """E.g. ``95 % interval (bootstrap over speakers, 1000 resamples): [20.10, 22.45] %``; with
        replicates left out ``(..., 497 of 1000 resamples used, 503 drew a single speaker)``."""
        return (f"{100 * self.level:g} % interval (bootstrap over {self.unit}s, "
                f"{_resamples_used(self.n_valid, self.n_resamples)}): [{self.low:.2f}, {self.high:.2f}] %"
                + _no_variation(self.n_distinct, self.n_speakers, self.unit))


class TooFewResamplesError(ValueError):
    """Too few usable bootstrap replicates for the interval asked for (see :func:`min_usable_resamples`).

    Attributes: ``n_valid`` (usable), ``n_resamples`` (drawn), ``minimum``.
    """

    def __init__(self, message: str, n_valid: int, n_resamples: int, minimum: int):
        super().__init__(message)
        self.n_valid, self.n_resamples, self.minimum = n_valid, n_resamples, minimum


def min_usable_resamples(level: float = 0.95) -> int:
    """Fewest usable replicates for a percentile interval of coverage ``level``: ``2 / (1 - level)``
    (40 for 95 %), so that each tail, ``(1 - level) / 2`` of the replicates, holds at least one
    replicate. With fewer, the bounds are the most extreme replicates (the range of a handful of
    draws), not percentiles."""
    return math.ceil(round(2.0 / (1.0 - level), 6))


def _resamples_used(n_valid: int, n_resamples: int) -> str:
    if n_valid == n_resamples:
        return f"{n_resamples} resamples"
    return f"{n_valid} of {n_resamples} resamples used, {n_resamples - n_valid} drew a single speaker"


def _no_variation(n_distinct: int, n_speakers: int, unit: str) -> str:
    if n_distinct != 1:
        return ""
    return (f"; every usable resample is the original {n_speakers} {unit}s, so the interval cannot vary "
            "(too few speakers to say anything)")


def _usable(kind: str, valid: np.ndarray, n_resamples: int, level: float, min_usable: int | None) -> None:
    """Raise :class:`TooFewResamplesError` when fewer than the minimum replicates are usable."""
    minimum = min_usable_resamples(level) if min_usable is None else min_usable
    if len(valid) < minimum:
        dropped = n_resamples - len(valid)
        raise TooFewResamplesError(
            f"only {len(valid)} of {n_resamples} speaker resamples are usable"
            + (f" ({dropped} drew a single speaker and were left out)" if dropped else "")
            + f"; a {100 * level:g} % {kind} needs at least {minimum} (2 / (1 - level), so that each tail holds "
            "a replicate): ask for more resamples" + (" (with few speakers many are left out)" if dropped else ""),
            len(valid), n_resamples, minimum)


def _distinct(draws: np.ndarray, valid: np.ndarray) -> int:
    """How many different speaker multisets the usable rows of ``draws`` are."""
    rows = np.sort(draws[valid], axis=1)
    return len(np.unique(rows, axis=0)) if len(rows) else 0


def bootstrap_interval(result: AbxResult, n_resamples: int = 1000, seed: int = 0,
                       level: float = 0.95, min_usable: int | None = None) -> BootstrapInterval:
    """Speaker-level percentile bootstrap of the ABX error of ``result``.

    Speakers are the sampling unit (ABX items of one speaker are not independent; speakers are the
    population a test set samples). Procedure, exactly (so that it can be replayed):

    1. ``S`` = the speakers of ``result.speaker_scores`` in sorted order;
       ``draws = numpy.random.default_rng(seed).integers(0, S, size=(n_resamples, S))``: each row is
       one resample of ``S`` speakers with replacement; ``m_s`` = how often speaker ``s`` was drawn.
    2. A replicate recomputes the error with every speaker's scores repeated ``m_s`` times, each copy
       a distinct speaker: within speakers, speaker key ``(s,)`` gets weight ``m_s``; across, key
       ``(a, x)`` gets ``m_a * m_x`` (two copies of one speaker are never an across pair). Per phone
       pair the weighted mean over speaker keys, then the mean over the phone pairs that kept some
       weight -- the averaging of :func:`abx_error` (contexts, then speakers, then phone pairs).
    3. The interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles (numpy's linear
       interpolation) of the replicates. Replicates in which no phone pair kept a speaker key
       (across, all draws one speaker) are left out and counted: ``n_valid`` of ``n_resamples``
       are used, and the summary says so. With two speakers across, every usable replicate is the
       original pair (``n_distinct`` 1): the interval has no width, and the summary says it
       cannot vary.

    Args:
        result: an :class:`AbxResult` of :func:`abx_error` (with its ``speaker_scores``).
        n_resamples: number of replicates (>= 1; 1000 is usual).
        seed: seed of the resampling.
        level: coverage in ``(0, 1)``.
        min_usable: fewest usable replicates (default :func:`min_usable_resamples`, 40 for 95 %).

    Raises:
        ValueError: bad arguments, a result without speaker scores, or no valid replicate.
        TooFewResamplesError: fewer than ``min_usable`` usable replicates (says how many, and why).
    """
    _check_bootstrap_args(n_resamples, level)
    speakers = _result_speakers(result)
    draws = np.random.default_rng(seed).integers(0, len(speakers), size=(n_resamples, len(speakers)))
    errors = _replicate_errors(result, speakers, draws)
    ok = np.isfinite(errors)
    valid = errors[ok]
    if not len(valid):
        raise ValueError("no bootstrap replicate kept a phone pair (too few speakers to resample)")
    if len(valid) < n_resamples:
        logger.warning("%d of %d bootstrap replicates drew a single speaker and are left out",
                       n_resamples - len(valid), n_resamples)
    _usable("interval", valid, n_resamples, level, min_usable)
    low, high = np.percentile(valid, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return BootstrapInterval(low=float(low), high=float(high), level=level, std=float(valid.std()),
                             n_resamples=n_resamples, n_valid=len(valid), seed=seed, errors=valid,
                             n_distinct=_distinct(draws, ok), n_speakers=len(speakers))


@dataclass
class PairedDifference:
    """ABX error of a system minus that of a reference on the same triplets, with a paired bootstrap
    interval (:func:`paired_bootstrap_difference`); in percentage points, negative = the system is better."""

    difference: float  # result.error - reference.error
    low: float
    high: float
    level: float
    std: float
    share_better: float  # share of the replicates in which the system's error is below the reference's
    n_resamples: int
    n_valid: int
    seed: int
    unit: str = "speaker"
    differences: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # (n_valid,) replicates
    n_distinct: int = 0  # distinct speaker resamples among the n_valid
    n_speakers: int = 0

    @property
    def significant(self) -> bool:
        """True when the interval excludes 0 (a gain or a loss beyond speaker-sampling noise)."""
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("differences")
        d["significant"] = self.significant
        return d

    def summary(self) -> str:
        """E.g. ``difference -1.63 points, 95 % paired interval (bootstrap over speakers, 1000 resamples):
        [-2.71, -0.52]``."""
        return (f"difference {self.difference:+.2f} points, {100 * self.level:g} % paired interval (bootstrap over "
                f"{self.unit}s, {_resamples_used(self.n_valid, self.n_resamples)}): "
                f"[{self.low:+.2f}, {self.high:+.2f}]")


def paired_bootstrap_difference(result: AbxResult, reference: AbxResult, n_resamples: int = 1000, seed: int = 0,
                                level: float = 0.95, min_usable: int | None = None) -> PairedDifference:
    """Paired speaker-level bootstrap of ``result.error - reference.error``.

    Both results must be scored on the same triplets (the same item file, mode and empty-item rule):
    each replicate draws one speaker resample -- exactly the draws of :func:`bootstrap_interval` with
    the same ``seed`` -- and recomputes both errors on it, so the speaker sampling that moves both
    systems together cancels in their difference. The interval is the percentile interval of the
    replicate differences; a difference whose interval excludes 0 is beyond speaker-sampling noise
    (the test set's speakers as a sample of a population of speakers; the training run's own
    randomness is not in it).

    Args:
        result: the system's :class:`AbxResult` (with its ``speaker_scores``).
        reference: the reference system's result on the same items.
        n_resamples: number of replicates (>= 1; 1000 is usual).
        seed: seed of the resampling.
        level: coverage in ``(0, 1)``.
        min_usable: fewest usable replicates (default :func:`min_usable_resamples`, 40 for 95 %).

    Raises:
        ValueError: bad arguments, results without speaker scores, results that are not on the same
            triplets (mode, speakers, phone pairs or triplet count differ) or under different conventions,
            no valid replicate, or
            usable replicates that are all the same speakers (two speakers across: every one is
            the original pair, so the interval has no width and no verdict can be drawn from it).
        TooFewResamplesError: fewer than ``min_usable`` usable replicates (says how many, and why).
    """
    _check_bootstrap_args(n_resamples, level)
    for what, r in (("result", result), ("reference", reference)):
        if not r.speaker_scores:
            raise ValueError(f"the ABX {what} has no per-speaker scores to resample")
    if result.mode != reference.mode:
        raise ValueError(f"cannot pair an ABX {result.mode} result with a {reference.mode} one")
    if result.convention != reference.convention:
        raise ValueError(f"cannot pair an ABX result under {result.convention} with one under {reference.convention}")
    speakers = _result_speakers(result)
    if speakers != _result_speakers(reference) or set(result.speaker_scores) != set(reference.speaker_scores) \
            or result.n_triplets != reference.n_triplets:
        raise ValueError("the two ABX results are not on the same triplets (speakers, phone pairs or triplet counts "
                         f"differ: {result.n_triplets} vs {reference.n_triplets} triplets); score both on one item file "
                         "with one --empty-items rule")
    draws = np.random.default_rng(seed).integers(0, len(speakers), size=(n_resamples, len(speakers)))
    diff = _replicate_errors(result, speakers, draws) - _replicate_errors(reference, speakers, draws)
    ok = np.isfinite(diff)
    valid = diff[ok]
    if not len(valid):
        raise ValueError("no bootstrap replicate kept a phone pair (too few speakers to resample)")
    if len(valid) < n_resamples:
        logger.warning("%d of %d bootstrap replicates drew a single speaker and are left out",
                       n_resamples - len(valid), n_resamples)
    _usable("paired interval", valid, n_resamples, level, min_usable)
    n_distinct = _distinct(draws, ok)
    if n_distinct == 1:
        raise ValueError(f"every usable speaker resample is the original {len(speakers)} speakers, so a paired "
                         "interval cannot vary: no verdict on speaker-sampling noise can be drawn (too few speakers)")
    low, high = np.percentile(valid, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return PairedDifference(difference=float(result.error - reference.error), low=float(low), high=float(high),
                            level=level, std=float(valid.std()), share_better=float(np.mean(valid < 0)),
                            n_resamples=n_resamples, n_valid=len(valid), seed=seed, differences=valid,
                            n_distinct=n_distinct, n_speakers=len(speakers))


def _check_bootstrap_args(n_resamples: int, level: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _result_speakers(result: AbxResult) -> list[str]:
    if not result.speaker_scores:
        raise ValueError("the ABX result has no per-speaker scores to resample")
    return sorted({s for scores in result.speaker_scores.values() for key in scores for s in key})


def _replicate_errors(result: AbxResult, speakers: list[str], draws: np.ndarray) -> np.ndarray:
    """The ABX error (percent) of ``result`` on each speaker resample (rows of ``draws``, indices into
    ``speakers``); NaN where no phone pair kept a speaker key."""
    import scipy.sparse

    across = result.mode == "across"
    spk_index = {s: i for i, s in enumerate(speakers)}
    pair_id, sa, sx, score, count = [], [], [], [], []
    for p, key in enumerate(sorted(result.speaker_scores)):
        for spk, acc in result.speaker_scores[key].items():
            pair_id.append(p)
            sa.append(spk_index[spk[0]])
            sx.append(spk_index[spk[1]] if across else -1)
            score.append(acc)
            count.append(result.speaker_counts.get(key, {}).get(spk, 1))
    n_pairs = len(result.speaker_scores)
    pair_id, sa, sx, score, count = map(np.asarray, (pair_id, sa, sx, score, count))
    if across and getattr(result, "convention", "zr2019") == "zr2021":
        return _replicate_errors_zr2021(pair_id, sa, sx, score, count, n_pairs, len(speakers), draws)
    pair_sum = scipy.sparse.csr_matrix((np.ones(len(pair_id)), (pair_id, np.arange(len(pair_id)))),
                                       shape=(n_pairs, len(pair_id)))  # sums entries per phone pair
    n_spk = len(speakers)
    n_resamples = len(draws)
    errors = np.empty(n_resamples)
    chunk = max(1, (1 << 22) // max(1, len(score)))
    for start in range(0, n_resamples, chunk):
        d = draws[start:start + chunk]
        m = np.zeros((len(d), n_spk))
        np.add.at(m, (np.repeat(np.arange(len(d)), n_spk), d.ravel()), 1.0)
        w = m[:, sa] * m[:, sx] if across else m[:, sa]  # (c, E)
        num = np.asarray(pair_sum @ (w * score).T).T  # (c, n_pairs)
        den = np.asarray(pair_sum @ w.T).T
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = num / den
        kept = den > 0
        n_kept = kept.sum(1)
        errors[start:start + chunk] = np.where(
            n_kept > 0, 100.0 * (1.0 - np.where(kept, acc, 0.0).sum(1) / np.maximum(n_kept, 1)), np.nan)
    return errors


def _replicate_errors_zr2021(pair_id, sa, sx, score, count, n_pairs, n_spk, draws) -> np.ndarray:
    """:func:`_replicate_errors` for zr2021 across: per (phone pair, A/B speaker copy) the mean of the cells
    over contexts and X speakers, each X speaker's ``count`` cells (mean ``score``) weighted by its copies;
    then the mean over the A/B speaker copies, then over the phone pairs that kept some."""
    import scipy.sparse

    g_keys, g_of = np.unique(pair_id * n_spk + sa, return_inverse=True)  # (phone pair, A/B speaker) groups
    g_of = g_of.reshape(-1)
    g_pair, g_spk = g_keys // n_spk, g_keys % n_spk
    to_group = scipy.sparse.csr_matrix((np.ones(len(g_of)), (g_of, np.arange(len(g_of)))),
                                       shape=(len(g_keys), len(g_of)))
    to_pair = scipy.sparse.csr_matrix((np.ones(len(g_keys)), (g_pair, np.arange(len(g_keys)))),
                                      shape=(n_pairs, len(g_keys)))
    errors = np.empty(len(draws))
    chunk = max(1, (1 << 22) // max(1, len(score)))
    for start in range(0, len(draws), chunk):
        d = draws[start:start + chunk]
        m = np.zeros((len(d), n_spk))
        np.add.at(m, (np.repeat(np.arange(len(d)), n_spk), d.ravel()), 1.0)
        wx = m[:, sx] * count  # (c, E): cells of each entry, times the copies of its X speaker
        num = np.asarray(to_group @ (wx * score).T).T  # (c, G)
        den = np.asarray(to_group @ wx.T).T
        with np.errstate(invalid="ignore", divide="ignore"):
            val = np.where(den > 0, num / den, 0.0)
        wa = m[:, g_spk] * (den > 0)  # copies of the A/B speaker, where it kept some X
        pnum = np.asarray(to_pair @ (wa * val).T).T  # (c, P)
        pden = np.asarray(to_pair @ wa.T).T
        kept = pden > 0
        n_kept = kept.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(kept, pnum / pden, 0.0)
        errors[start:start + chunk] = np.where(n_kept > 0, 100.0 * (1.0 - acc.sum(1) / np.maximum(n_kept, 1)), np.nan)
    return errors


def _needed_pairs(phones: Sequence[str] | np.ndarray, speakers: Sequence[str] | np.ndarray, mode: str,
                  device: torch.device = torch.device("cpu")) -> tuple[torch.Tensor, torch.Tensor]:
    """Token pairs ``(u, v)``, ``u < v``, of one context whose distance some triplet needs (the pairs
    (A, X) and (B, X) of the cells of :func:`_enumerate_cells`), from the tokens' phones and speakers: labels, or
    ``(W,)`` non-negative integer codes (numpy) in the labels' order (equal codes for equal labels; within a large
    context the pairs come one speaker at a time, in that order).

    Across: (A, X) when same phone, other speaker, and A's speaker has a token of another phone (a B);
    (B, X) when other phone, other speaker, and B's speaker has a token of X's phone (an A). Within: the
    same with one speaker, A != X, and an A/X phone with at least two tokens of the speaker.

    Returns ``(u, v)``: ``(P,)`` int64 tensors on ``device`` (row-major order of the token x token mask, which
    is built there: on CUDA the ``N x N`` masks of a large context never touch the host).
    """
    ph_np, sp_np = _codes(phones), _codes(speakers)
    if device.type == "cpu" and len(ph_np) < _DEVICE_PAIRS_MIN_TOKENS and _SMALL_PAIRS_IN_NUMPY:
        u, v = _needed_pairs_small(ph_np, sp_np, mode)
        return torch.from_numpy(u), torch.from_numpy(v)
    ph, sp = torch.from_numpy(ph_np), torch.from_numpy(sp_np)
    n_ph, n_sp = int(ph.max()) + 1, int(sp.max()) + 1
    cnt = torch.bincount(sp * n_ph + ph, minlength=n_sp * n_ph).view(n_sp, n_ph).to(device)
    ph, sp = ph.to(device), sp.to(device)
    n_phones = (cnt > 0).sum(1)  # distinct phones per speaker
    has_b = (n_phones[sp] - (cnt[sp, ph] > 0).long()) > 0  # the token's speaker has another phone: B tokens exist
    if mode == "within":
        if len(ph) < _DEVICE_PAIRS_MIN_TOKENS or n_sp == 1:
            return _within_block(ph, has_b, sp=sp, cnt=cnt)
        # a large context: one speaker's block at a time (the mask across speakers would be mostly False)
        us, vs = [], []
        for s in range(n_sp):
            idx = (sp == s).nonzero().view(-1)  # ascending: u < v within the block is u < v in the context
            if len(idx) >= 2:
                u, v = _within_block(ph[idx], has_b[idx], cnt_spk=cnt[s])
                us.append(idx[u])
                vs.append(idx[v])
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return (torch.cat(us), torch.cat(vs)) if us else (empty, empty)
    # need[i, j] | need[j, i], i < j, where need[a, x] = other speakers and (same phone and a B for a, or other
    # phones and a's speaker has x's phone): (A, X) or (B, X). A block of rows at a time (against the columns
    # past its first row): a few MB of masks instead of N x N ones (bench_abx's across task: 11 k tokens, seven
    # 123 MB masks built and faulted in on one thread, 0.35 s)
    has = cnt > 0
    n = len(ph)
    step = max(1, (_PAIR_MASK_ELEMENTS if device.type == "cpu" else _PAIR_MASK_ELEMENTS_CUDA) // n)
    us, vs = [], []
    for i0 in range(0, n - 1, step):
        i1, j0 = min(i0 + step, n), i0 + 1
        pi, si, bi = ph[i0:i1, None], sp[i0:i1, None], has_b[i0:i1, None]
        pj, sj, bj = ph[None, j0:], sp[None, j0:], has_b[None, j0:]
        same_ph = pi == pj
        need = (same_ph & (bi | bj)) | (~same_ph & (has[si, pj] | has[sj, pi]))
        need &= si != sj
        r, c = torch.triu(need).nonzero(as_tuple=True)  # column c >= row r: token j0 + c > token i0 + r
        us.append(r.add_(i0))
        vs.append(c.add_(j0))
    if not us:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return empty, empty
    return _cat_onto(us, device), _cat_onto(vs, device)


def _codes(labels: Sequence[str] | np.ndarray) -> np.ndarray:
    """``(W,)`` int64 codes of ``labels``: an integer numpy array as it is (renumbered 0 .. n-1, in order, where
    its codes reach past both 255 and ``W``: the count tables are (speakers x phones)), else each distinct label's
    rank."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iu":
        if len(labels) and labels.max() >= max(256, len(labels)):
            return np.unique(labels, return_inverse=True)[1].reshape(-1).astype(np.int64)
        return labels.astype(np.int64, copy=False)
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1).astype(np.int64)


def _needed_pairs_small(ph: np.ndarray, sp: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_needed_pairs` of a small context in numpy (its many small torch operations cost ~4x more): ``ph``,
    ``sp`` (W,) int64 phone and speaker codes (0 .. n-1); the same pairs in the same order, as (P,) int64 arrays."""
    n_ph, n_sp = int(ph.max()) + 1, int(sp.max()) + 1
    cnt = np.bincount(sp * n_ph + ph, minlength=n_sp * n_ph).reshape(n_sp, n_ph)
    has_b = (cnt > 0).sum(1)[sp] - (cnt[sp, ph] > 0) > 0  # the token's speaker has another phone: B tokens exist
    same_ph = ph[:, None] == ph[None, :]
    same_sp = sp[:, None] == sp[None, :]
    if mode == "within":
        ax = same_ph & same_sp & has_b[:, None]
        np.fill_diagonal(ax, False)
        bx = ~same_ph & same_sp & (cnt >= 2)[sp[:, None], ph[None, :]]  # two tokens of X's phone: A != X
    else:
        ax = same_ph & ~same_sp & has_b[:, None]
        bx = ~same_ph & ~same_sp & (cnt > 0)[sp[:, None], ph[None, :]]  # B's speaker has X's phone
    need = ax | bx
    u, v = np.nonzero(np.triu(need | need.T, 1))
    return u.astype(np.int64), v.astype(np.int64)


def _within_block(ph: torch.Tensor, has_b: torch.Tensor, cnt_spk: torch.Tensor | None = None,
                  sp: torch.Tensor | None = None, cnt: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_needed_pairs` within speakers: the pairs ``u < v`` of one speaker's tokens (phones ``ph``, B tokens
    exist ``has_b``, the speaker's token count per phone ``cnt_spk``), or of all tokens with their speakers ``sp``
    and the (speaker, phone) counts ``cnt`` (a same-speaker mask then)."""
    same_ph = ph[:, None] == ph[None, :]
    if sp is None:
        ax = same_ph & has_b[:, None]
        bx = ~same_ph & (cnt_spk >= 2)[ph][None, :]  # two tokens of X's phone: A != X
    else:
        same_sp = sp[:, None] == sp[None, :]
        ax = same_ph & same_sp & has_b[:, None]
        bx = ~same_ph & same_sp & (cnt >= 2)[sp[:, None], ph[None, :]]
    ax.fill_diagonal_(False)
    need = ax | bx
    del ax, bx, same_ph
    return torch.triu(need | need.T, diagonal=1).nonzero(as_tuple=True)


def _enumerate_cells(context: int, groups: Mapping[str, Mapping[str, list[int]]], mode: str) -> list[_CellGroup]:
    """The cell groups of one context: per (A/X phone, B phone, A/B speaker) with a token of each, its A, B and
    X tokens (X: A's phone, every other speaker across; A's own tokens within). Cells share their arrays (one
    array per phone and speaker, one X set per A phone and speaker): read-only."""
    cells = []
    phones = sorted(groups)
    arrays: dict[tuple[str, str], np.ndarray] = {}  # (phone, speaker) -> its tokens, made when a cell needs them

    def tokens(p: str, s: str) -> np.ndarray:
        arr = arrays.get((p, s))
        if arr is None:
            arr = arrays[p, s] = np.asarray(groups[p][s], dtype=np.int64)
        return arr

    one_group = np.zeros(1, dtype=np.int64)
    for p1 in phones:
        g1 = groups[p1]
        spk1 = sorted(g1)
        # no cell with A's phone p1: across, a single speaker has it (no X); within, none has it twice
        if (len(spk1) < 2) if mode == "across" else all(len(g1[s]) < 2 for s in spk1):
            continue
        x_sets = {}  # A/B speaker -> (X speakers, X tokens grouped by speaker, start of each group): across only
        if mode == "across":
            for s in spk1:
                xs = [sx for sx in spk1 if sx != s]
                starts = np.cumsum([0] + [len(g1[sx]) for sx in xs[:-1]]).astype(np.int64)
                x_sets[s] = (xs, np.concatenate([tokens(p1, sx) for sx in xs]), starts)
        for p2 in phones:
            if p1 == p2:
                continue
            g2 = groups[p2]
            for s in spk1:
                if s not in g2:
                    continue
                if mode == "within":
                    if len(g1[s]) >= 2:
                        a = tokens(p1, s)
                        cells.append(_CellGroup(context, p1, p2, s, a, tokens(p2, s), a, [s], one_group))
                else:
                    xs, x, starts = x_sets[s]
                    cells.append(_CellGroup(context, p1, p2, s, tokens(p1, s), tokens(p2, s), x, xs, starts))
    return cells


def _pair_distances(
    offsets: np.ndarray,
    lengths: np.ndarray,
    gu: torch.Tensor,
    gv: torch.Tensor,
    frame_dist: _FrameDistance,
    normalize: bool,
    max_batch_elements: int,
    progress: bool,
    device: torch.device = torch.device("cpu"),
    use_numba: bool = False,
    n_threads: int = 1,
    dtw_fn: Callable | None = None,
    tiles: tuple[np.ndarray, np.ndarray] | None = None,
    kernels=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DTW distances ``d(u, v)`` and ``d(v, u)`` for token pairs ``(gu[k], gv[k])``, batched by size.

    ``gu``, ``gv``: ``(P,)`` int64 tensors of token indices (into ``offsets`` / ``lengths``, the tokens' first
    frame in the flat frame array and their frame counts), on the device where the per-pair work is done: the
    scoring device on CUDA, the CPU otherwise. The pairs are ordered by size there (longer token on the rows;
    rows, then cols, descending), planned into batches from the counts of each size (:func:`_plan_groups`),
    and their results stay there: on CUDA the host never touches an array of pairs. Each batch's frame
    distances are computed in torch (on ``device``), then its DTW: the numba kernel (``use_numba``, CPU; batches
    shared by ``n_threads`` threads, torch's intra-op pool set to one thread meanwhile) or ``dtw_fn``
    (:func:`batched_dtw` or the Triton kernel, one batch at a time; on the CPU with torch's pool set to
    ``n_threads`` threads).

    ``tiles`` (numba path): ``(tile_of, tile_start)`` from :func:`_make_tiles`. The pairs of a tile pair whose
    frame pairs fill at least ``_TILE_MIN_DENSITY`` of it (within a speaker, across two speakers, inside a
    large context) read their frame distances from one matrix product of the two tiles
    (:func:`_tiled_pair_distances`, :func:`_tile_tasks`) instead of gathering their frames pair by pair: about 4 ns
    per frame pair instead of 18 (float64, one thread); only the others are batched. Their distances can then
    differ from the batched ones in the last bit.

    Returns:
        ``(d_uv, d_vu)``: ``(P,)`` float64 tensors on ``gu``'s device, each DTW cost divided by the length of the
        path ABXpy backtracks with ``u`` (resp. ``v``) as the rows (``normalize``), else the cost.
    """
    if use_numba and tiles is not None and len(gu):
        out = _tiled_pair_distances(offsets, lengths, gu, gv, frame_dist, normalize, max_batch_elements, progress,
                                    n_threads, tiles, kernels)
        if out is not None:
            return out
    pdev = gu.device
    len_t = torch.from_numpy(np.ascontiguousarray(lengths, dtype=np.int64)).to(pdev)
    lu, lv = len_t[gu], len_t[gv]
    swap = lv > lu  # put the longer token on the rows (smaller skewed layout)
    nr, nc = torch.where(swap, lv, lu), torch.where(swap, lu, lv)
    base = int(nc.max()) + 1
    key = nr * base + nc
    del lu, lv, nr, nc
    # by rows, then cols, descending: on the CPU numpy's stable radix sort of a small key (twice as fast as
    # torch's sort there), on CUDA torch's
    if pdev.type == "cpu":
        k = key.numpy()
        desc = int(k.max()) - k
        order = torch.from_numpy(np.argsort(desc.astype(np.uint16) if desc.max() < 1 << 16 else desc, kind="stable"))
        del k, desc
    else:
        order = torch.sort(key, descending=True, stable=True)[1]
    sizes, counts = torch.unique_consecutive(key[order], return_counts=True)
    del key
    sizes, counts = sizes.cpu().numpy(), counts.cpu().numpy()
    rows = torch.where(swap, gv, gu)[order]  # in batch order from here on
    cols = torch.where(swap, gu, gv)[order]
    swap = swap[order]
    n = len(order)
    total = torch.empty(n, dtype=torch.float64, device=pdev)
    len_rc = torch.empty(n, dtype=torch.long, device=pdev)
    len_cr = torch.empty(n, dtype=torch.long, device=pdev)
    overhead = _BATCH_OVERHEAD_NUMBA if use_numba else _BATCH_OVERHEAD
    batches = _plan_groups(sizes // base, sizes % base, counts, max_batch_elements, frame_dist.scratch, overhead)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(batches), desc="DTW batches", unit="batch", leave=False)
    bar_lock = threading.Lock()
    last = int(offsets[-1] + lengths[-1]) - 1  # frames past a token's end are clamped, never used

    if use_numba:
        K = kernels if kernels is not None else _load_kernels("numba")
        rows_np, cols_np = rows.numpy(), cols.numpy()
        tot_np, rc_np, cr_np = total.numpy(), len_rc.numpy(), len_cr.numpy()
        len64 = np.ascontiguousarray(lengths, dtype=np.int64)

        def work(batch):
            start, stop, nmax, mmax = batch
            r, c = rows_np[start:stop], cols_np[start:stop]
            ix = torch.from_numpy(np.minimum(offsets[r][:, None] + np.arange(nmax), last))
            iy = torch.from_numpy(np.minimum(offsets[c][:, None] + np.arange(mmax), last))
            d = np.ascontiguousarray(frame_dist.batch(ix, iy).numpy())
            K.dtw_block(d, len64[r], len64[c], tot_np[start:stop], rc_np[start:stop], cr_np[start:stop])
            if bar is not None:
                with bar_lock:
                    bar.update(1)

        with _torch_threads(1):
            K.run_tasks(work, batches, n_threads)
    else:
        with _torch_threads(n_threads if device.type == "cpu" else torch.get_num_threads()):
            _torch_batches(batches, rows, cols, offsets, len_t, last, frame_dist, device, total, len_rc, len_cr, bar,
                           dtw_fn or batched_dtw)
    if bar is not None:
        bar.close()
    del rows, cols
    if normalize:
        d_rows_first = total / len_rc.to(torch.float64)  # d(rows, cols)
        d_cols_first = total / len_cr.to(torch.float64)  # d(cols, rows)
    else:
        d_rows_first = d_cols_first = total
    del len_rc, len_cr
    d_uv = torch.empty(n, dtype=torch.float64, device=pdev)
    d_vu = torch.empty(n, dtype=torch.float64, device=pdev)
    d_uv[order] = torch.where(swap, d_cols_first, d_rows_first)
    d_vu[order] = torch.where(swap, d_rows_first, d_cols_first)
    return d_uv, d_vu


def _tiled_pair_distances(offsets, lengths, gu, gv, frame_dist, normalize, max_batch_elements, progress, n_threads,
                          tiles, kernels=None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`_pair_distances` of the numba path with tiles (CPU; ``gu``, ``gv`` (P,) int64 CPU tensors): the pairs
    of dense tile pairs (:func:`_tile_tasks`), one task per tile pair (its frame distances in one matrix product,
    :meth:`_FrameDistance.block`, that every pair's DTW reads in place: ``dtw_strided``), the others through
    :func:`_pair_distances`' batches. Each pair has the longer token on the rows, as there. A task writes its
    pairs' ``d_uv``, ``d_vu`` itself (the longer token on the rows, the division by the path lengths), so that no
    pass over all pairs runs on one thread after the threaded ones. None where no tile pair is dense.
    ``kernels``: the compiled kernels (:func:`_load_kernels`; default numba's)."""
    K = kernels if kernels is not None else _load_kernels("numba")

    len64 = np.ascontiguousarray(lengths, dtype=np.int64)
    gu_np, gv_np = gu.numpy(), gv.numpy()
    tasks, dense, sparse = _tile_tasks(gu_np, gv_np, len64, *tiles, n_threads=n_threads)
    if dense is None:
        return None
    tile_of, tile_start = tiles
    d_uv, d_vu = np.empty(len(gu_np)), np.empty(len(gu_np))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="DTW tiles", unit="tile", leave=False)
    bar_lock = threading.Lock()

    def work(task):  # the pairs dense[s:e], all between tiles lo <= hi
        _, lo, hi, s, e = task
        pos = dense[s:e]
        u, v = gu_np[pos], gv_np[pos]
        lu, lv = len64[u], len64[v]
        swap = lv > lu  # the longer token on the rows
        r, c, lr, lc = np.where(swap, v, u), np.where(swap, u, v), np.where(swap, lv, lu), np.where(swap, lu, lv)
        x0, y0, w = tile_start[lo], tile_start[hi], tile_start[hi + 1] - tile_start[hi]
        flat = frame_dist.block(x0, tile_start[lo + 1], y0, tile_start[hi + 1]).reshape(-1)
        r_lo = tile_of[r] == lo  # rows in tile lo read the tile as it is, the others transposed
        base = np.where(r_lo, (offsets[r] - x0) * w + offsets[c] - y0, (offsets[c] - x0) * w + offsets[r] - y0)
        tot, rc, cr = np.empty(e - s), np.empty(e - s, dtype=np.int64), np.empty(e - s, dtype=np.int64)
        K.dtw_strided(flat, base, np.where(r_lo, w, 1), np.where(r_lo, 1, w), lr, lc, tot, rc, cr)
        if normalize:
            rows_first, cols_first = tot / rc, tot / cr  # d(rows, cols), d(cols, rows)
        else:
            rows_first = cols_first = tot
        d_uv[pos] = np.where(swap, cols_first, rows_first)
        d_vu[pos] = np.where(swap, rows_first, cols_first)
        if bar is not None:
            with bar_lock:
                bar.update(1)

    with _torch_threads(1):
        K.run_tasks(work, tasks, n_threads)
    if bar is not None:
        bar.close()
    if len(sparse):
        sparse_t = torch.from_numpy(sparse)
        s_uv, s_vu = _pair_distances(offsets, lengths, gu[sparse_t], gv[sparse_t], frame_dist, normalize,
                                     max_batch_elements, progress, torch.device("cpu"), True, n_threads, kernels=K)
        d_uv[sparse], d_vu[sparse] = s_uv.numpy(), s_vu.numpy()
    return torch.from_numpy(d_uv), torch.from_numpy(d_vu)


def _torch_batches(batches, rows, cols, offsets, len_t, last, frame_dist, device, total, len_rc, len_cr, bar,
                   dtw_fn: Callable) -> None:
    """The torch path of :func:`_pair_distances`: frame distances and ``dtw_fn`` (:func:`batched_dtw` or the
    Triton kernel), batch by batch, over ``rows`` / ``cols`` (token indices in batch order, on ``device``),
    writing ``total``, ``len_rc``, ``len_cr`` (on ``device``) in place: on CUDA no batch waits for the host."""
    off_t = torch.from_numpy(offsets).to(device)
    rows, cols, len_t = rows.to(device), cols.to(device), len_t.to(device)
    ar = torch.arange(max((max(b[2], b[3]) for b in batches), default=1), device=device)[None, :]
    for start, stop, nmax, mmax in batches:
        r, c = rows[start:stop], cols[start:stop]
        ix = (off_t[r][:, None] + ar[:, :nmax]).clamp_(max=last)
        iy = (off_t[c][:, None] + ar[:, :mmax]).clamp_(max=last)
        d = frame_dist.batch(ix, iy)
        tot, a, b = dtw_fn(d, len_t[r], len_t[c])
        total[start:stop] = tot
        len_rc[start:stop] = a
        len_cr[start:stop] = b
        if bar is not None:
            bar.update(1)


# Tiles of frame distances (numba path): a tile holds up to _TILE_FRAMES frames (consecutive tokens of one context
# and speaker, or of several small ones); a tile pair is computed in one matrix product when its pairs' frame pairs
# fill at least _TILE_MIN_DENSITY of it (a tile's frame pair costs about 4 ns, a batched pair's about 18 ns).
_TILE_FRAMES = 1024
_TILE_MIN_DENSITY = 0.25


def _make_tiles(groups: np.ndarray, lengths: np.ndarray, pair_groups: np.ndarray,
                tile_frames: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Tokens laid out consecutively (token ``k``: ``lengths[k]`` frames, sorted by ``groups``, ``(U,)`` int64,
    the (context, speaker) each belongs to), cut into tiles of about ``tile_frames`` frames: a group that fits
    stays in one tile (several small groups share one), a larger one is split at token boundaries (a tile then
    runs past ``tile_frames`` by less than one token).

    ``tile_frames``: default ``_TILE_FRAMES``. ``pair_groups`` ``(U,)``: the tokens' groups within which pairs
    are needed (the context across speakers, the (context, speaker) within). When no such group holds
    ``_TILE_MIN_DENSITY * tile_frames`` frames, no tile pair can be dense enough (the frame pairs of a tile pair
    are at most its largest group's frames times the tile's) and None is returned.

    Returns:
        ``(tile_of, tile_start)``: each token's tile (``(U,)`` int64, non-decreasing) and each tile's first frame,
        with the total frame count last (``(n_tiles + 1,)`` int64).
    """
    tile_frames = tile_frames or _TILE_FRAMES
    n = len(groups)
    if n == 0:
        return None
    lengths = np.asarray(lengths, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(lengths)])
    pb = _run_bounds(pair_groups)
    if np.diff(cum[pb]).max() < _TILE_MIN_DENSITY * tile_frames:
        return None
    gb = _run_bounds(groups)
    tile_of = np.empty(n, dtype=np.int64)
    t, fill = 0, 0
    for a, b in zip(gb[:-1].tolist(), gb[1:].tolist()):
        frames = int(cum[b] - cum[a])
        if frames > tile_frames:  # split: a token goes to the chunk where it starts
            if fill:
                t, fill = t + 1, 0
            chunk = (cum[a:b] - cum[a]) // tile_frames
            tile_of[a:b] = t + chunk
            t += int(chunk[-1]) + 1
            continue
        if fill and fill + frames > tile_frames:
            t, fill = t + 1, 0
        tile_of[a:b] = t
        fill += frames
    first = _run_bounds(tile_of)[:-1]
    # numbered densely: a token longer than a tile leaves the chunk numbers it spans unused
    tile_of = np.concatenate([[0], np.cumsum(np.diff(tile_of) != 0)]).astype(np.int64)
    return tile_of, np.concatenate([cum[first], cum[-1:]])


# _tile_tasks reads the pairs in chunks of _TILE_CHUNK, each a task for the threads: its temporaries stay a few MB
# (reused, in cache), where arrays of every pair cost a fresh allocation each (first-touch page faults: 0.1-2 ms per
# MB; 1.4 s of one thread for the 14 M pairs of bench_abx's across task, then 0.45-0.9 s on one thread, now
# 0.42-0.48 s on two); tile pairs are counted in a table up to _TILE_TABLE_MAX of them, else by sorting their keys,
# and the (chunks x dense tile pairs) counts of the second pass stay under _TILE_TABLE_MAX entries
_TILE_CHUNK = 1 << 20
_TILE_TABLE_MAX = 1 << 20


def _tile_tasks(gu: np.ndarray, gv: np.ndarray, lengths: np.ndarray, tile_of: np.ndarray,
                tile_start: np.ndarray, n_threads: int = 1) -> tuple[list[tuple], np.ndarray | None, np.ndarray | None]:
    """The token pairs (``gu[k]``, ``gv[k]``; ``(P,)`` int64, either order) of the tile pairs dense enough to
    compute whole (:data:`_TILE_MIN_DENSITY`: their pairs' frame pairs, ``lengths[gu] * lengths[gv]`` summed, fill
    that share of the tile pair).

    Returns ``(tasks, dense, sparse)``: ``dense`` the positions ``k`` of those pairs ordered by tile pair, in
    increasing order inside one (int32 below 2^31 pairs); ``tasks`` one ``("tile", lo, hi, s, e)`` per dense tile
    pair ``lo <= hi`` (its pairs: ``dense[s:e]``), the largest tile pairs first; ``sparse`` the other positions,
    increasing (int64). ``([], None, None)`` where no tile pair is dense. Three passes over the pairs in chunks
    (:data:`_TILE_CHUNK`), each chunk a task for ``n_threads`` threads (numpy releases the GIL in these
    operations; the result does not depend on the threads): each pair's tile pair (kept, 2-4 bytes a pair) and each
    tile pair's frame pairs and pair count; then each chunk's pairs per dense tile pair; then, from where each
    chunk's pairs of a tile pair start (a prefix sum over the chunks), a stable counting sort into ``dense``."""
    n_tiles = len(tile_start) - 1
    n = len(gu)
    tile_of = np.asarray(tile_of, dtype=np.int64)
    n_keys = n_tiles * n_tiles
    key_type = np.uint16 if n_keys <= 1 << 16 else np.uint32 if n_keys <= 1 << 32 else np.int64
    pair_key = np.empty(n, dtype=key_type)  # each pair's tile pair, min(tile) * n_tiles + max(tile)
    spans = [(s, min(s + _TILE_CHUNK, n)) for s in range(0, n, _TILE_CHUNK)]
    table = n_keys <= _TILE_TABLE_MAX  # tile pairs indexed directly
    lock = threading.Lock()
    sums: list[tuple[np.ndarray, np.ndarray]] = []  # table: per thread, frame pairs and pairs per tile pair
    mine = threading.local()
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * len(spans)  # no table: per chunk

    def count(c: int) -> None:
        s, e = spans[c]
        tu, tv = tile_of[gu[s:e]], tile_of[gv[s:e]]
        k = np.minimum(tu, tv)
        np.maximum(tu, tv, out=tu)
        k *= n_tiles
        k += tu
        pair_key[s:e] = k
        cells = lengths[gu[s:e]] * lengths[gv[s:e]]
        if table:
            acc = getattr(mine, "acc", None)
            if acc is None:
                acc = mine.acc = (np.zeros(n_keys), np.zeros(n_keys, dtype=np.int64))
                with lock:
                    sums.append(acc)
            filled_t, count_t = acc
            filled_t += np.bincount(k, weights=cells, minlength=n_keys)
            count_t += np.bincount(k, minlength=n_keys)
        else:
            u, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
            parts[c] = (u, np.bincount(inv.reshape(-1), weights=cells), cnt)

    _abx_threads.run_tasks(count, range(len(spans)), n_threads)
    if table:
        filled, count_all = (sum(a[i] for a in sums) for i in (0, 1)) if sums else (np.zeros(n_keys),) * 2
        keys_all = np.nonzero(count_all)[0]
        filled, count_all = filled[keys_all], count_all[keys_all].astype(np.int64)
    elif n:
        u, inv = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
        keys_all = u
        filled = np.bincount(inv.reshape(-1), weights=np.concatenate([p[1] for p in parts]), minlength=len(u))
        count_all = np.bincount(inv.reshape(-1), weights=np.concatenate([p[2] for p in parts]),
                                minlength=len(u)).astype(np.int64)
    else:
        keys_all, filled, count_all = (np.zeros(0, dtype=np.int64),) * 3
    del parts, sums
    size = np.diff(tile_start)
    is_dense = filled >= _TILE_MIN_DENSITY * size[keys_all // n_tiles] * size[keys_all % n_tiles]
    ok = keys_all[is_dense]  # the dense tile pairs, ascending: rank 0 .. len(ok) - 1
    if len(ok) == 0:
        return [], None, None
    counts = count_all[is_dense]
    ends = np.cumsum(counts)
    if table:
        rank_of = np.full(n_keys, -1, dtype=np.int64)
        rank_of[ok] = np.arange(len(ok))
    # the second and third passes in chunks few enough that a (chunks x dense tile pairs) table stays small
    step = max(_TILE_CHUNK, -(-n * len(ok) // _TILE_TABLE_MAX))
    spans = [(s, min(s + step, n)) for s in range(0, n, step)]

    def ranks(s: int, e: int) -> np.ndarray:  # each pair's dense tile pair, -1 for a sparse one
        k = pair_key[s:e]
        if table:
            return rank_of[k]
        k = k.astype(np.int64)
        rank = np.searchsorted(ok, k)
        rank[ok[np.minimum(rank, len(ok) - 1)] != k] = -1
        return rank

    per_chunk = np.zeros((len(spans), len(ok)), dtype=np.int64)  # each chunk's pairs per dense tile pair
    sparse_parts: list[np.ndarray | None] = [None] * len(spans)

    def tally(c: int) -> None:
        s, e = spans[c]
        rank = ranks(s, e)
        sparse_parts[c] = np.nonzero(rank < 0)[0] + s
        per_chunk[c] = np.bincount(rank[rank >= 0], minlength=len(ok))

    _abx_threads.run_tasks(tally, range(len(spans)), n_threads)
    # where chunk c's pairs of tile pair r start in dense: the tile pair's start, then the earlier chunks' pairs
    first_at = (ends - counts)[None, :] + np.cumsum(per_chunk, axis=0) - per_chunk
    del per_chunk
    dense = np.empty(int(ends[-1]), dtype=np.int32 if n < 1 << 31 else np.int64)  # half the memory to fault in

    def place(c: int) -> None:
        s, e = spans[c]
        rank = ranks(s, e)
        at = np.nonzero(rank >= 0)[0]
        if len(at) == 0:  # a chunk of sparse pairs only
            return
        rk = rank[at]
        order = np.argsort(rk.astype(np.uint16) if len(ok) <= 1 << 16 else rk, kind="stable")
        rk, at = rk[order], at[order]
        bounds = _run_bounds(rk)
        first, run = bounds[:-1], np.diff(bounds)
        dense[first_at[c, rk] + np.arange(len(rk)) - np.repeat(first, run)] = at + s

    _abx_threads.run_tasks(place, range(len(spans)), n_threads)
    sparse = np.concatenate(sparse_parts) if sparse_parts else np.zeros(0, dtype=np.int64)
    tasks = [("tile", int(k // n_tiles), int(k % n_tiles), int(e - c), int(e))
             for k, c, e in zip(ok.tolist(), counts.tolist(), ends.tolist())]
    tasks.sort(key=lambda t: -int(size[t[1]]) * int(size[t[2]]))  # the largest first: the threads end together
    return tasks, dense, sparse


# Cost model for batching: one batch costs ~_BATCH_OVERHEAD padded cell updates per anti-diagonal
# (Python-level loop of a few torch calls) on top of one unit per padded cell.
_BATCH_OVERHEAD = 800
# With the numba DTW a batch costs a few torch calls for its frame distances and one kernel call.
_BATCH_OVERHEAD_NUMBA = 100


def _plan_batches(
    nr: np.ndarray, nc: np.ndarray, max_elements: int, scratch: Callable[[int, int], int] = lambda n, m: 0,
    overhead: int = _BATCH_OVERHEAD,
) -> list[tuple[int, int, int, int]]:
    """Split pairs sorted by (rows, cols) descending into ``(start, stop, n_rows, n_cols)`` batches:
    :func:`_plan_groups` on the runs of equal sizes of ``nr`` / ``nc``."""
    n = len(nr)
    if n == 0:
        return []
    key = nr.astype(np.int64) * (int(nc.max()) + 1) + nc
    bounds = _run_bounds(key)
    return _plan_groups(nr[bounds[:-1]], nc[bounds[:-1]], np.diff(bounds), max_elements, scratch, overhead)


def _plan_groups(
    group_nr: np.ndarray, group_nc: np.ndarray, counts: np.ndarray, max_elements: int,
    scratch: Callable[[int, int], int] = lambda n, m: 0, overhead: int = _BATCH_OVERHEAD,
) -> list[tuple[int, int, int, int]]:
    """Batches ``(start, stop, n_rows, n_cols)`` of pairs sorted by (rows, cols) descending, given as runs:
    ``counts[g]`` pairs of ``group_nr[g]`` x ``group_nc[g]`` frames, in that order.

    A batch is padded to its first pair's rows and its largest cols and holds at most
    ``max_elements // (N * (N + M) + scratch(N, M))`` pairs (frame distances + skewed cost +
    the frame distance's temporaries). A new batch starts
    before a group of same-size pairs when padding them (and the batch so far) costs more than the
    fixed cost of another batch, ``overhead * (rows + cols - 1)``. The loop is over the runs and the
    batches, never over pairs.
    """
    group_nr = [int(x) for x in group_nr]
    group_nc = [int(x) for x in group_nc]
    if not group_nr:
        return []
    ends = np.cumsum(counts).tolist()
    starts = [0] + ends[:-1]
    n = ends[-1]
    batches = []
    cur, nmax, mmax = 0, group_nr[0], group_nc[0]
    for g, (s, e) in enumerate(zip(starts, ends)):
        r, c = group_nr[g], group_nc[g]
        if s > cur:
            m2 = max(mmax, c)
            pad_cost = (e - s) * nmax * m2 + (s - cur) * nmax * (m2 - mmax)
            new_cost = overhead * (r + c - 1) + (e - s) * r * c
            if new_cost < pad_cost:
                batches.append((cur, s, nmax, mmax))
                cur, nmax, mmax = s, r, c
        mmax = max(mmax, c)
        while e - cur > (cap := max(1, max_elements // (nmax * (nmax + mmax) + scratch(nmax, mmax)))):
            batches.append((cur, cur + cap, nmax, mmax))
            cur += cap
            g0 = bisect.bisect_right(starts, cur) - 1  # the run holding pair cur
            nmax, mmax = group_nr[g0], max(group_nc[g0: g + 1])
    batches.append((cur, n, nmax, mmax))
    return batches
