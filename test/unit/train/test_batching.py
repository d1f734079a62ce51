"""Deterministic length-bucketed batching and rank sharding."""
from __future__ import annotations

import numpy as np
import pytest

from speechkit.train.batching import bucket_batches, epoch_rng, shard_batches
from speechkit.utils.cli import ConfigError

LENGTHS = [int(x) for x in np.random.default_rng(0).integers(5, 200, size=103)]


def _flat(batches):
    return sorted(i for b in batches for i in b)


def test_every_item_once_and_batch_size():
    batches = bucket_batches(LENGTHS, len(LENGTHS), 8, rng=epoch_rng(1, 1))
    assert _flat(batches) == list(range(103))
    assert sorted(len(b) for b in batches) == [7] + [8] * 12


def test_same_seed_epoch_same_batches_and_epochs_differ():
    a = bucket_batches(LENGTHS, 103, 8, rng=epoch_rng(1, 3))
    assert a == bucket_batches(LENGTHS, 103, 8, rng=epoch_rng(1, 3))
    assert a != bucket_batches(LENGTHS, 103, 8, rng=epoch_rng(1, 4))
    assert a != bucket_batches(LENGTHS, 103, 8, rng=epoch_rng(2, 3))


def test_batches_hold_similar_lengths():
    # Batches are runs of the length-sorted order: their length ranges never interleave.
    batches = bucket_batches(LENGTHS, 103, 8, rng=epoch_rng(0, 1))
    ranges = [(min(LENGTHS[i] for i in b), max(LENGTHS[i] for i in b)) for b in batches]
    for a in ranges:
        for b in ranges:
            assert a == b or a[1] <= b[0] or b[1] <= a[0]


def test_batch_frames_budget_counts_padding():
    budget = 600
    batches = bucket_batches(LENGTHS, 103, 0, batch_frames=budget, rng=epoch_rng(0, 1))
    assert _flat(batches) == list(range(103))
    for b in batches:
        assert len(b) * max(LENGTHS[i] for i in b) <= budget or len(b) == 1
    # greedy: adding the next-longer item would break the budget
    sorted_batches = sorted(batches, key=lambda b: max(LENGTHS[i] for i in b))
    for b, nxt in zip(sorted_batches, sorted_batches[1:]):
        assert (len(b) + 1) * max(LENGTHS[i] for i in b + nxt[:1]) > budget


def test_long_item_gets_own_batch():
    assert bucket_batches([10, 500, 20], 3, 0, batch_frames=100) == [[0, 2], [1]]


def test_no_lengths_and_no_rng_is_ordered():
    assert bucket_batches(None, 5, 2) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ConfigError, match="batch_frames"):
        bucket_batches(None, 5, 2, batch_frames=10)


def test_shard_batches():
    batches = [[i] for i in range(7)]
    assert shard_batches(batches, 0, 1) == batches
    assert shard_batches(batches, 0, 3) == [[0], [3]]
    assert shard_batches(batches, 2, 3) == [[2], [5]]  # [6] dropped so that ranks take equal steps
