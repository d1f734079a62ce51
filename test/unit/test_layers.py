"""The layering of ``speechkit/`` (shared/DESIGN.md): no import cycles, no import into a higher layer.

Layers, low to high: ``utils < data < features = text < nn < models < decode = scoring (= align) < train
(= results) < tasks < inference < continual < bin``. A module may import modules of its own layer or
lower ones, never a higher one, and no two modules may import each other through any chain. Every
``import`` counts, wherever it is: at module level, inside a function (a lazy import is still a
dependency), and inside an ``if TYPE_CHECKING:`` block too (a type-only import still ties the lower
module to the higher one's names; there is no exemption, so the rule is one sentence).

An edge is ``(importer, imported)`` between modules of the package (``speechkit.data.datadir``);
``from speechkit.x import y`` is an edge to ``speechkit.x.y`` when that is a module, else to the
package ``speechkit.x``. A package's ``__init__`` is the module named after the package.

``KNOWN_VIOLATIONS`` lists the edges that may remain for now (none today); the test fails on any
other violation and on a listed edge that is no longer a violation, so the list only shrinks.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "speechkit"

#: Layer of each sub-package of ``speechkit`` (low to high). A new sub-package needs an entry.
LAYERS = {"utils": 0, "data": 1, "features": 2, "text": 2, "nn": 3, "models": 4, "decode": 5, "scoring": 5,
          "align": 5, "train": 6, "results": 6, "tasks": 7, "inference": 8, "continual": 9, "bin": 10}

#: Edges that may remain (upward imports, or edges inside an import cycle); only shrinks. Empty: the
#: package has no cycle and no upward import; keep it so (move code, do not list an edge here).
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` for every module under ``root`` (all imports)."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        deps: dict[str, int] = {}

        def add(name: str, line: int) -> None:
            if name in files and name != mod:
                deps.setdefault(name, line)

        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                for alias in node.names:
                    full = f"{name}.{alias.name}"
                    add(full if full in files else name, node.lineno)
        graph[mod] = deps
    return graph


def layer_of(mod: str) -> int | None:
    """The layer of ``speechkit.<pkg>...`` (``None`` for the top-level ``speechkit`` package)."""
    parts = mod.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else None


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def violations(graph: dict[str, dict[str, int]]) -> dict[tuple[str, str], str]:
    """``{(importer, imported): why}`` for every upward import and every edge inside a cycle."""
    found: dict[tuple[str, str], str] = {}
    for a, deps in graph.items():
        for b, line in deps.items():
            la, lb = layer_of(a), layer_of(b)
            if la is not None and lb is not None and lb > la:
                found[(a, b)] = f"line {line}: imports a higher layer ({b.split('.')[1]} > {a.split('.')[1]})"
    for comp in cycles(graph):
        members = set(comp)
        for a in comp:
            for b, line in graph[a].items():
                if b in members:
                    found.setdefault((a, b), f"line {line}: inside the import cycle {comp}")
    return found


def test_every_subpackage_has_a_layer():
    pkgs = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert pkgs <= set(LAYERS), f"sub-packages without a layer in LAYERS: {sorted(pkgs - set(LAYERS))}"


def test_no_cycles_and_no_upward_imports():
    found = violations(import_graph())
    new = sorted(set(found) - KNOWN_VIOLATIONS)
    gone = sorted(KNOWN_VIOLATIONS - set(found))
    msg = [f"{a} -> {b}: {found[(a, b)]}" for a, b in new]
    msg += [f"{a} -> {b}: listed in KNOWN_VIOLATIONS but no longer a violation; remove it" for a, b in gone]
    assert not msg, "layering violations:\n  " + "\n  ".join(msg)


def test_checker_finds_cycles_upward_and_lazy_imports(tmp_path):
    """The walk itself: a lazy import inside a function and a TYPE_CHECKING import both count."""
    pkg = tmp_path / "speechkit"
    for sub in ("data", "features"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "a.py").write_text("def f():\n    from speechkit.features import b\n")
    (pkg / "features" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from speechkit.data.a import f\n")
    (pkg / "features" / "c.py").write_text("from . import b\nimport speechkit.data.a\n")
    graph = import_graph(pkg)
    assert graph["speechkit.data.a"] == {"speechkit.features.b": 2}
    assert graph["speechkit.features.b"] == {"speechkit.data.a": 3}
    assert graph["speechkit.features.c"] == {"speechkit.features.b": 1, "speechkit.data.a": 2}
    assert cycles(graph) == [["speechkit.data.a", "speechkit.features.b"]]
    found = violations(graph)
    assert set(found) == {("speechkit.data.a", "speechkit.features.b"), ("speechkit.features.b", "speechkit.data.a")}
    assert "higher layer" in found[("speechkit.data.a", "speechkit.features.b")]
    assert "cycle" in found[("speechkit.features.b", "speechkit.data.a")]
