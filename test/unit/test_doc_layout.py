"""The pages that describe the tree follow it: the README's Layout section and docs/architecture.md.

The README's Layout block lists every sub-package of ``speechkit/`` once, in the order of the layers
(``LAYERS`` of test_layers.py), and every other entry of it exists; docs/architecture.md's table of
packages has one row per sub-package, and each module its data-flow table names exists (issue 37,
item 5: the Layout section listed the aligner under ``decode/`` after it had moved to ``align/``).
"""
from __future__ import annotations

import re
from pathlib import Path

from test_layers import LAYERS

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "speechkit"


def subpackages() -> set[str]:
    """The sub-packages of ``speechkit/`` (directories holding an ``__init__.py``)."""
    return {p.parent.name for p in PKG.glob("*/__init__.py")}


def layout_block(readme: str) -> list[str]:
    """The lines of the code block under the README's ``## Layout`` heading."""
    section = readme.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1].strip("\n").split("\n")


def layout_entries(lines: list[str]) -> tuple[list[str], list[str]]:
    """``(top-level entries, speechkit/ sub-package entries)`` of the Layout block, in order (names
    without their trailing ``/``; continuation lines, which start with spaces only, are skipped)."""
    top, sub = [], []
    for line in lines:
        m = re.match(r"^(\S+)\s", line + " ")
        if m:
            top.append(m.group(1).rstrip("/"))
            continue
        m = re.match(r"^  (\S+)/\s", line)
        if m:
            sub.append(m.group(1))
    return top, sub


def test_readme_layout_lists_every_subpackage_in_layer_order():
    _, sub = layout_entries(layout_block((REPO / "README.md").read_text(encoding="utf-8")))
    assert sorted(sub) == sorted(subpackages()), "README Layout vs speechkit/: " + str(
        {"missing": sorted(subpackages() - set(sub)), "not a sub-package": sorted(set(sub) - subpackages())})
    assert len(sub) == len(set(sub)), f"listed twice: {sorted(n for n in sub if sub.count(n) > 1)}"
    layers = [LAYERS[n] for n in sub]
    assert layers == sorted(layers), f"README Layout is not in layer order (LAYERS): {list(zip(sub, layers))}"


def test_readme_layout_top_level_entries_exist():
    top, _ = layout_entries(layout_block((REPO / "README.md").read_text(encoding="utf-8")))
    assert "speechkit" in top
    assert [t for t in top if not (REPO / t).exists()] == []


def test_architecture_table_has_one_row_per_subpackage():
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_]+)/` \|", page, flags=re.M)
    assert sorted(rows) == sorted(subpackages()), "docs/architecture.md vs speechkit/: " + str(
        {"missing": sorted(subpackages() - set(rows)), "not a sub-package": sorted(set(rows) - subpackages())})
    assert len(rows) == len(set(rows))


def test_architecture_data_flow_names_existing_modules():
    """Each ``room/``: ``module.py`` of the data-flow table's library column is a file of that room."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = page.split("| stage | command | writes | library (room: modules) |", 1)[1].split("\n\n", 1)[0]
    named, missing = 0, []
    for row in table.strip().split("\n")[1:]:
        library = row.rstrip(" |").rsplit(" | ", 1)[1]
        for room, modules in re.findall(r"`([a-z_]+)/`: ((?:`[a-z_0-9/]+\.py`(?:, )?)+)", library):
            for mod in re.findall(r"`([a-z_0-9/]+\.py)`", modules):
                named += 1
                if not (PKG / room / mod).is_file():
                    missing.append(f"{room}/{mod}")
    assert named >= 10 and missing == []
