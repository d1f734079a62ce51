"""The shape of the ABX package (speechkit/scoring/abx/): one stage per module, none over 600 lines, and no
mutable module-level state (a cache is an ``functools.lru_cache`` of its inputs, a setting a constant or an
argument)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "speechkit" / "scoring" / "abx"
MODULES = sorted(PACKAGE.glob("*.py"))
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "bytearray"}


def test_the_package_is_there():
    assert {p.stem for p in MODULES} >= {"__init__", "frames", "cells", "pairs", "distances", "dtw", "dispatch",
                                         "tiles", "batches", "counting", "averaging", "bootstrap", "score"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_module_over_600_lines(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 600


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_mutable_module_state(path):
    """No ``global`` statement anywhere, and no module-level name bound to a dict, list or set (``__all__`` aside):
    the module-level cache and flag of abx.py (``_KERNELS_USED``, the C library's ``_STATE``, the thread pools)
    are gone."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [f"line {n.lineno}: global {', '.join(n.names)}" for n in ast.walk(tree) if isinstance(n, ast.Global)]
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = node.value
            mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
                isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None))
                in MUTABLE_CALLS)
            if mutable and names != ["__all__"]:
                found.append(f"line {node.lineno}: {', '.join(names)} is a mutable module global")
    assert not found, f"{path.name}: " + "; ".join(found)
