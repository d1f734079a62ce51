"""gc_paused: no cyclic collection inside, the caller's setting restored (also on an error); read_item_file and
score_abx_dir use it."""
from __future__ import annotations

import gc

import pytest

from speechkit.scoring.abx_items import read_item_file
from speechkit.utils.perf import gc_paused


@pytest.fixture
def collections():
    """The cyclic collections that start while the test runs, with a collection due at every allocation."""
    seen = []
    callback = lambda phase, info: seen.append(phase) if phase == "start" else None  # noqa: E731
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)
        gc.enable()


def _allocate(seen):
    """Allocates (a collection due at each allocation, were the collector on); the collections it saw started."""
    before = len(seen)
    kept = [[i] for i in range(1000)]
    return len(seen) - before, len(kept)


def test_no_collection_inside_and_setting_restored(collections):
    assert _allocate(collections)[0] > 0  # the callback does see the collections there are
    assert gc_paused(_allocate)(collections) == (0, 1000)
    assert gc.isenabled()
    gc.disable()
    gc_paused(_allocate)(collections)
    assert not gc.isenabled()  # a caller's disabled collector stays disabled
    gc.enable()

    def fail():
        raise KeyError("x")

    with pytest.raises(KeyError):
        gc_paused(fail)()
    assert gc.isenabled()


def test_read_item_file_runs_without_collections(tmp_path, collections):
    path = tmp_path / "a.item"
    path.write_text("#file onset offset #phone prev next speaker\n"
                    + "".join(f"u{k} 0.{k % 9} 0.9 p{k % 5} a b s{k % 3}\n" for k in range(500)))
    n = len(collections)
    items = read_item_file(path)
    inside = len(collections) - n  # (counted before anything else allocates: a collection is due at once)
    assert inside == 0 and len(items) == 500 and gc.isenabled()
    assert items[7].file == "u7" and items[7].context == ("a", "b") and items[7].line == 9


def test_score_abx_dir_is_paused():
    from speechkit.scoring.abx_report import score_abx_dir

    assert score_abx_dir.__wrapped__ is not None  # the whole command: items, features (text files), scoring
