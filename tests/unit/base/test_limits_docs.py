"""The scenario caps the docs quote are kvplan.base.limits' own: docs/language.md and KV118's page name the
figures `MAX_SCENARIOS` and `MAX_FILE_SCENARIOS` hold, so a changed limit fails here until the docs follow."""

from __future__ import annotations

import re

from kvplan.base import limits
from tests.paths import ROOT


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_language_doc_quotes_the_scenario_limits() -> None:
    text = " ".join((ROOT / "docs" / "language.md").read_text(encoding="utf-8").split())
    m = re.search(r"at most ([\d,]+) scenarios per deployment and ([\d,]+) per file \(KV118", text)
    assert m, "docs/language.md no longer states the scenario caps"
    assert (_number(m[1]), _number(m[2])) == (limits.MAX_SCENARIOS, limits.MAX_FILE_SCENARIOS)


def test_kv118_page_quotes_the_scenario_limits() -> None:
    text = " ".join((ROOT / "docs" / "rules" / "KV118.md").read_text(encoding="utf-8").split())
    m = re.search(r"more than ([\d,]+) scenarios in one deployment, or into more than ([\d,]+) in one file", text)
    assert m, "docs/rules/KV118.md no longer states the scenario caps"
    assert (_number(m[1]), _number(m[2])) == (limits.MAX_SCENARIOS, limits.MAX_FILE_SCENARIOS)
