"""Small helpers for the speed of pure-Python loops."""
from __future__ import annotations

import functools
import gc
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def gc_paused(fn: F) -> F:
    """``fn`` with Python's cyclic garbage collector off while it runs (restored after; a caller's disabled
    collector stays disabled). For functions that build many small objects which outlive the loop (items, cells,
    per-context dicts): the collections their allocation triggers free none of them, and a full one walks every
    object of the process, torch's and numba's included. Measured: abx_error on a 567-triplet task spent 0.095 of
    0.28 s in them; read_item_file on 11 029 items 0.11 s instead of 0.03 s (Python 3.12, torch imported)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper  # type: ignore[return-value]
