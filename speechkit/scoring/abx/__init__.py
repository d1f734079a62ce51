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

The package, one stage per module (as bootphon/fastabx lays out dataset, task, cell, distance, score, pooling):

* :mod:`.frames` -- items and frames: which frames each item takes; the frames of the tokens scored.
* :mod:`.cells` -- the task: cell groups by context and speaker(s), across or within speakers.
* :mod:`.pairs` -- the token pairs the cells need a DTW of, and the table of their distances.
* :mod:`.distances` -- frame distances (cosine, kl, hamming) and the DTW distance of two tokens.
* :mod:`.dtw` -- the DTW as torch vector operations; :mod:`.kernels_c`, :mod:`.kernels_numba`,
  :mod:`.kernels_triton` the same in C, numba and Triton (:mod:`.kernel_threads`: their thread pool).
* :mod:`.dispatch` -- which backend, device and threads a call uses, and every tuning constant.
* :mod:`.tiles`, :mod:`.batches` -- the DTW of every needed pair, by shared tiles of frame distances or in
  padded batches.
* :mod:`.counting` -- wins and ties per cell; :mod:`.averaging` -- the two conventions' means, the result.
* :mod:`.bootstrap` -- the speaker bootstrap interval and the paired comparison of two systems.
* :mod:`.score` -- :func:`abx_error`, the stages in order.
"""
from __future__ import annotations

from speechkit.scoring.abx.averaging import CONVENTIONS, AbxResult, PhonePairScore
from speechkit.scoring.abx.bootstrap import (
    BootstrapInterval,
    PairedDifference,
    TooFewResamplesError,
    bootstrap_interval,
    min_usable_resamples,
    paired_bootstrap_difference,
)
from speechkit.scoring.abx.cells import MODES
from speechkit.scoring.abx.dispatch import BACKENDS
from speechkit.scoring.abx.distances import DISTANCES, check_kl_frames, dtw_distance, frame_distance
from speechkit.scoring.abx.dtw import batched_dtw
from speechkit.scoring.abx.frames import DEFAULT_TOLERANCE, EMPTY_ITEM_RULES, select_frames
from speechkit.scoring.abx.score import abx_error
from speechkit.scoring.abx_items import Item

__all__ = [
    "BACKENDS", "CONVENTIONS", "DEFAULT_TOLERANCE", "DISTANCES", "EMPTY_ITEM_RULES", "MODES", "AbxResult",
    "BootstrapInterval", "Item", "PairedDifference", "PhonePairScore", "TooFewResamplesError", "abx_error",
    "batched_dtw", "bootstrap_interval", "check_kl_frames", "dtw_distance", "frame_distance", "min_usable_resamples",
    "paired_bootstrap_difference", "select_frames",
]
