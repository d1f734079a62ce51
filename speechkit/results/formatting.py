"""How the results pages write numbers: one formatter per meaning, the same on every recipe's page.

- :func:`number`: a measured figure with a fixed number of decimals (``-`` when missing or not finite);
- :func:`percent`: a share in [0, 1] written in percent (``0.853`` -> ``85.3``);
- :func:`duration`: a wall-clock time in seconds (``45 s`` below two minutes, ``12.3 min`` from there);
- :func:`signed_interval`: a difference with its interval (``+0.12 [-0.30, +0.54]``).
"""
from __future__ import annotations

import math
import numbers

__all__ = ["MISSING", "number", "percent", "duration", "signed", "signed_interval"]

#: What a cell holds when the figure is missing (not measured, not recorded, not finite).
MISSING = "-"


def _finite(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def number(x, nd: int = 2, missing: str = MISSING) -> str:
    """``x`` with ``nd`` decimals; ``missing`` when ``x`` is None or not a finite number (NaN, inf: a page
    never prints ``nan``).

    Raises:
        ValueError: ``x`` is neither None nor a number (a string where a figure was expected).
    """
    if x is None or (isinstance(x, numbers.Real) and not _finite(x)):
        return missing
    return f"{x:.{nd}f}"


def percent(share, nd: int = 1, missing: str = MISSING) -> str:
    """A share in [0, 1] as percent with ``nd`` decimals (``0.853`` -> ``'85.3'``; ``-0.0001`` -> ``'0.0'``,
    never ``'-0.0'``); ``missing`` when None or not finite."""
    if share is None or not _finite(share):
        return missing
    return f"{round(100 * share, nd) + 0.0:.{nd}f}"


def duration(seconds, missing: str = MISSING) -> str:
    """A wall-clock time: ``'45 s'`` below 120 s, else minutes with one decimal (``'12.3 min'``, also past
    an hour, so that a column of them reads in one unit); ``missing`` when None or not finite."""
    if seconds is None or not _finite(seconds):
        return missing
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def signed(x, nd: int = 2, scale: float = 1.0) -> str:
    """``scale * x`` with its sign and ``nd`` decimals (``'+0.12'``, ``'-3.0'``)."""
    return f"{scale * x:+.{nd}f}"


def signed_interval(delta: float, interval: tuple[float, float], nd: int = 2, scale: float = 1.0) -> str:
    """A difference and its interval, signed, times ``scale`` (100: shares as points): ``'+0.12 [-0.30, +0.54]'``."""
    lo, hi = interval
    return f"{signed(delta, nd, scale)} [{signed(lo, nd, scale)}, {signed(hi, nd, scale)}]"
