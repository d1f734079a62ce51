"""docs/adding_a_corpus.md's code runs as printed (issue 39, item 4): its module (section 2) and its test
(section 5), the test against both the page's module and the shipped commonvoice module."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[4] / "docs" / "adding_a_corpus.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_pages_module_and_test_run(tmp_path, caplog):
    module, registration, test = blocks("python")
    assert "def prepare_commonvoice(" in module and "CORPORA[\"commonvoice\"]" in registration
    page: dict = {"__name__": "docs_commonvoice"}
    exec(compile(module, f"{DOC}:module", "exec"), page)
    checks: dict = {"__name__": "docs_test"}
    exec(compile(test, f"{DOC}:test", "exec"), checks)
    checks["test_prepare_commonvoice"](tmp_path / "shipped", caplog)      # the shipped module
    caplog.clear()
    checks["prepare_commonvoice"] = page["prepare_commonvoice"]
    checks["test_prepare_commonvoice"](tmp_path / "page", caplog)         # the page's
    with pytest.raises(NotImplementedError, match="commonvoice.mozilla.org"):
        page["download_commonvoice"](tmp_path)


def test_the_registration_names_what_the_registry_holds():
    from speechkit.data.corpora import CORPORA

    _, registration, _ = blocks("python")
    assert CORPORA["commonvoice"].options[0].name == "table" and '"table", str, "validated.tsv"' in registration
