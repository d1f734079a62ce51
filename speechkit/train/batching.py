"""Deterministic batch construction: length bucketing, per-epoch shuffling, rank assignment.

Batches are lists of dataset indices, computed up front for a whole epoch from ``(seed, epoch)``
only. That makes an epoch's batch order reproducible after a crash (resume regenerates it and
skips the batches already done) and gives one place where batches are assigned to ranks for
distributed training: every rank trains on its slice of every (global) training batch
(:func:`slice_batch`), and validates whole batches dealt out in turn (:func:`shard_batches`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from speechkit.utils.cli import ConfigError

__all__ = ["epoch_rng", "derive_seed", "bucket_batches", "shard_batches", "slice_batch"]


def epoch_rng(seed: int, epoch: int, purpose: int = 0) -> np.random.Generator:
    """A NumPy generator determined by ``(seed, epoch, purpose)`` alone (independent streams)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, epoch, purpose])


def derive_seed(seed: int, epoch: int, purpose: int) -> int:
    """A 63-bit integer seed determined by ``(seed, epoch, purpose)`` (e.g. a DataLoader generator)."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, epoch, purpose]).generate_state(2, np.uint64)[0] >> 1)


def bucket_batches(lengths: Sequence[int] | None, num_items: int, batch_size: int,
                   batch_frames: int = 0, rng: np.random.Generator | None = None) -> list[list[int]]:
    """Split ``range(num_items)`` into batches of similar lengths.

    Items are sorted by length (ties broken at random when ``rng`` is given, else by index) and cut
    into consecutive batches, so each batch holds utterances of similar length (little padding);
    with ``rng`` the order of the batches is then shuffled (ESPnet's "sorted"/"numel" batching).
    Without ``lengths`` the items are shuffled (or kept in order) and cut into ``batch_size`` chunks.

    Args:
        lengths: per-item length in frames (``None`` = unknown).
        num_items: dataset size.
        batch_size: utterances per batch (used when ``batch_frames == 0``); the last batch of a
            length bucket may be smaller.
        batch_frames: if > 0, each batch holds as many utterances as fit in this many *padded*
            frames (``count * longest <= batch_frames``; an utterance longer than the budget gets
            a batch of its own); ``batch_size`` is then ignored.
        rng: shuffling source; ``None`` = deterministic order (for validation).

    Returns:
        A list of non-empty index lists covering every item exactly once.

    Raises:
        ConfigError: ``batch_frames > 0`` without lengths, or no positive batch size.
    """
    if num_items == 0:
        return []
    if batch_frames > 0:
        if lengths is None:
            raise ConfigError("key 'trainer.batch_frames': needs a dataset with lengths(); "
                              "use trainer.batch_size instead")
    elif batch_size < 1:
        raise ConfigError(f"key 'trainer.batch_size': must be >= 1 (or set trainer.batch_frames), got {batch_size}")
    if lengths is not None:
        lens = np.asarray(lengths, dtype=np.int64)
        if lens.shape != (num_items,):
            raise ValueError(f"lengths() has {lens.size} entries for a dataset of {num_items} items")
        tiebreak = rng.random(num_items) if rng is not None else np.arange(num_items)
        order = np.lexsort((tiebreak, lens))
    else:
        lens = None
        order = rng.permutation(num_items) if rng is not None else np.arange(num_items)

    batches: list[list[int]] = []
    if batch_frames > 0:
        current: list[int] = []
        longest = 0
        for i in order.tolist():
            n = int(lens[i])
            new_longest = max(longest, n)
            if current and (len(current) + 1) * new_longest > batch_frames:
                batches.append(current)
                current, new_longest = [], n
            current.append(i)
            longest = new_longest
        if current:
            batches.append(current)
    else:
        ordered = order.tolist()
        batches = [ordered[i:i + batch_size] for i in range(0, num_items, batch_size)]
    if rng is not None:
        perm = rng.permutation(len(batches))
        batches = [batches[i] for i in perm]
    return batches


def shard_batches(batches: list[list[int]], rank: int = 0, world_size: int = 1,
                  even: bool = True) -> list[list[int]]:
    """The batches of ``rank`` out of ``world_size``: every ``world_size``-th batch from ``rank``.

    With ``even`` the list is first cut to a multiple of ``world_size`` so that every rank takes
    the same number of steps (which lock-step training requires); without it every batch goes to
    some rank (validation). Identity for ``world_size == 1``.
    """
    if world_size <= 1:
        return list(batches)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world_size {world_size}")
    usable = len(batches) - len(batches) % world_size if even else len(batches)
    return batches[rank:usable:world_size]


def slice_batch(batch: Sequence[int], rank: int, world_size: int) -> list[int]:
    """Rank ``rank``'s contiguous share of a global batch; shares differ in size by at most one.

    The shares of ranks ``0..world_size-1`` concatenate to ``batch`` (identity for one rank), so a
    length-bucketed or single-language batch stays so on every rank.

    Raises:
        ValueError: ``rank`` not in ``[0, world_size)``.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world_size {world_size}")
    n = len(batch)
    return list(batch[rank * n // world_size:(rank + 1) * n // world_size])
