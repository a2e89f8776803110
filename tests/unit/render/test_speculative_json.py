"""advise's JSON carries `speculative_speedup` (time per token without over with speculation, derived, x) for a
spec with a speculative block, and no key for any other (docs/speculative.md)."""

from __future__ import annotations

from kvplan.lang import check_source
from kvplan.planner import plan
from kvplan.render.plan_view import plan_payload


def _payload(block: str) -> dict[str, object]:
    source = ('deployment "d" {\n  model = llama-3.1-8b\n  device = h100\n  devices = 1\n  engine = sglang\n'
              f"  workload {{\n    batch = 1\n    context = 1k\n  }}\n{block}\n}}\n")
    return plan_payload(plan(check_source(source, "t.kvp").scenarios[0]))


def test_the_speedup_is_a_derived_figure_in_x() -> None:
    payload = _payload("  speculative {\n    method = eagle3\n  }")
    s = payload["speculative_speedup"]
    figures = payload["speculative"]
    assert isinstance(figures, dict) and figures["method"] == "eagle3" and figures["adopted"] is True
    assert s is figures["speedup"]
    assert (s.unit, s.evidence.value) == ("x", "derived")  # type: ignore[attr-defined]
    assert s.value == figures["time_per_token_plain"].value / figures["time_per_token"].value  # type: ignore[attr-defined]


def test_no_block_no_key() -> None:
    payload = _payload("")
    assert "speculative_speedup" not in payload and "speculative" not in payload
