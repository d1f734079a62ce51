"""Every relative link of the user pages resolves: the top-level README, docs/*.md, each recipe's README and
the Markdown files under test/bench/results/ (issue 37, item 5: the dated rounds of docs/gpu_checks.md moved to
test/bench/results/gpu_checks_history.md, and the pages link into it by heading).

A link is ``[text](target)`` or a reference definition ``[name]: target``, outside code blocks and code spans;
``http(s)://`` and ``mailto:`` targets are not followed. The target's path, relative to the page, must exist;
its ``#anchor``, if any, must be a heading of the target page (or of the page itself for ``#anchor`` alone)
under GitHub's rule: lower case, every character but letters, digits, ``_``, ``-`` and spaces dropped, spaces
to ``-``, a repeated heading numbered ``-1``, ``-2``, ...; or an explicit ``<a id=...>`` / ``<a name=...>``.
"""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.I)


def pages(repo: Path = REPO) -> list[Path]:
    """The pages whose links are checked, in a fixed order."""
    found = [repo / "README.md", *sorted((repo / "docs").glob("*.md")),
             *sorted((repo / "egs").glob("*/README.md")), *sorted((repo / "test/bench/results").glob("*.md"))]
    return [p for p in found if p.is_file()]


def _prose_lines(text: str):
    """(line number, line) of ``text`` outside fenced code blocks, with code spans blanked."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line.lstrip())
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, _CODE_SPAN.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text (links and emphasis markers reduced to their text)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor ``page`` defines: its headings' slugs (repeats numbered) and explicit HTML anchors."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    text = page.read_text(encoding="utf-8")
    for _, line in _prose_lines(text):
        m = _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else f"{base}-{k}")
    out.update(a.lower() for a in _HTML_ANCHOR.findall(text))
    return out


def links(page: Path):
    """(line number, target) of every relative link of ``page``."""
    for n, line in _prose_lines(page.read_text(encoding="utf-8")):
        targets = [m.group(1) for m in _INLINE.finditer(line)]
        m = _REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", t):
                yield n, t


def broken_links(page: Path, repo: Path = REPO) -> list[str]:
    """``page:line: target: why`` for every link of ``page`` that does not resolve."""
    bad = []
    cache: dict[Path, set[str]] = {}
    for n, target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(repo)}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where}: no such file")
            continue
        if anchor and dest.is_file() and dest.suffix == ".md":
            if dest not in cache:
                cache[dest] = anchors(dest)
            if anchor.lower() not in cache[dest]:
                bad.append(f"{where}: no heading with this anchor in {dest.name}")
    return bad


def test_every_relative_link_of_the_pages_resolves():
    checked = pages()
    assert REPO / "docs/gpu_checks.md" in checked and REPO / "test/bench/results/gpu_checks_history.md" in checked
    bad = [b for p in checked for b in broken_links(p)]
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/other.md").write_text("# Other page\n\n## Fifth round, 2026-11-27: on an H200 (16 cores)\n"
                                            "## Repeat\n## Repeat\n<a id=\"kept\"></a>\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Top\n"
        "[ok](docs/other.md#fifth-round-2026-11-27-on-an-h200-16-cores) [ok](docs/other.md#repeat-1)\n"
        "[ok](#top) [ok](docs/other.md#kept) [web](https://example.org/x) `[code](missing.md)`\n"
        "```\n[in a block](missing.md)\n```\n"
        "[gone](docs/missing.md) [bad anchor](docs/other.md#sixth-round)\n"
        "[ref]: docs/other.md#repeat-2\n")
    assert broken_links(page, tmp_path) == [
        "README.md:7: docs/missing.md: no such file",
        "README.md:7: docs/other.md#sixth-round: no heading with this anchor in other.md",
        "README.md:8: docs/other.md#repeat-2: no heading with this anchor in other.md",
    ]


def test_slug_follows_githubs_rule():
    assert slug("Sixth round, 2026-11-27: no GPU lent; the one-thread parts (2-core machine)") == \
        "sixth-round-2026-11-27-no-gpu-lent-the-one-thread-parts-2-core-machine"
    assert slug("EWC's λ chosen on dev") == "ewcs-λ-chosen-on-dev"
    assert slug("The `auto` [backend](x.md)") == "the-auto-backend"
