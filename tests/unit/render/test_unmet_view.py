"""The renderers read each suggestion record (kvplan.planner.plan.Suggestion) for its text, and write an unmet
constraint's kind by its name (issue 20 item 3): the JSON contract's strings, the text and markdown lines."""

from __future__ import annotations

import json

from kvplan.planner import plan
from kvplan.render import plan_view
from tests.unit.planner.test_unmet_kinds import CASES, _scenario


def test_the_json_writes_each_kind_by_name_and_each_suggestion_as_its_text() -> None:
    p = plan(_scenario(CASES["fits"][0]))
    (u,) = p.unmet
    (written,) = json.loads(plan_view.json_text([p]))["plans"][0]["unmet"]
    assert written["constraint"] == "fits"
    assert written["suggestions"] == [s.text for s in u.suggestions] and len(u.suggestions) > 1


def test_text_and_markdown_print_each_suggestion_as_it_reads() -> None:
    p = plan(_scenario(CASES["service slos"][0]))
    texts = [s.text for u in p.unmet for s in u.suggestions]
    for out in (plan_view.text([p]), plan_view.markdown([p])):
        assert "Suggestion(" not in out
        flat = " ".join(out.split())                         # the text view wraps long lines
        assert all(f"would meet it: {' '.join(t.split())}" in flat for t in texts)
