"""One set of numbers: the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_numbers.py,
tests/unit/model/test_numbers.py, tests/unit/planner/test_numbers.py; tests/acceptance/test_numbers.py says
what they check.
"""

from __future__ import annotations

import re

from kvplan.lang import check_source
from tests.paths import ROOT

EXAMPLES = ROOT / "examples"


def test_pinned_placement_is_not_listed_as_a_default() -> None:
    text = (EXAMPLES / "w2-batch32.kvp").read_text(encoding="utf-8")
    text = re.sub(r"\n    placement = striped[^\n]*", "", text)
    assert "placement" not in check_source(text, "w2.kvp").scenarios[0].spans
    text = text.replace("    workload {", "    pin {\n        placement = striped\n    }\n\n    workload {", 1)
    (sc,) = check_source(text, "w2.kvp").scenarios
    assert "placement" in sc.pins
    assert not [a.source for a in sc.assumptions if a.source.startswith("default: placement")]
