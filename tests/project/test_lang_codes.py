"""The .kvp front end's codes, checked against the repository: each has its page under docs/rules/,
and each code the front end's source names is in the code table.

Split from tests/unit/lang/test_lang.py, which with tests/unit/render/test_lang_goldens.py holds the
front end's unit tests.
"""

from __future__ import annotations

import re

from kvplan.base import codes
from kvplan.base.codes import CODES
from tests.paths import ROOT

# ------------------------------------------------------------------------------- codes

def test_every_front_end_code_has_a_rule_page() -> None:
    ours = [c for c in CODES if c[:3] in ("KV0", "KV1", "KV9")]
    assert len(ours) >= 40
    for code in ours:
        rule = CODES[code]
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name), rule.name
        page = ROOT / "docs" / "rules" / f"{code}.md"
        text = page.read_text(encoding="utf-8")
        assert text.startswith(f"# {code} {rule.name}\n"), page
        for section in ("## What it finds", "## Why it matters", "## Example", "## Instead"):
            assert section in text, (page, section)


def test_codes_used_by_the_front_end_are_registered() -> None:
    used = set(re.findall(r"codes\.([A-Z_0-9]+)", "".join(
        p.read_text(encoding="utf-8")
        for p in [*(ROOT / "kvplan" / "lang").glob("*.py"), *(ROOT / "kvplan").glob("*.py")])))
    for name in used:
        assert getattr(codes, name) in CODES
