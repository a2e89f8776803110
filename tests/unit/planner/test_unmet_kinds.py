"""What a plan misses, as typed values (issue 20 item 3): each unmet constraint's kind is a `Constraint`, and each
suggestion a `Suggestion` record carrying its text with the changes it is made of, not two tuples kept side by side."""

from __future__ import annotations

import pytest

from kvplan.base.evidence import derived
from kvplan.lang import check_source
from kvplan.model.scenario import Scenario
from kvplan.planner import plan
from kvplan.planner.plan import Change, Constraint, Suggestion, Unmet

C = Constraint


def _dep(body: str) -> str:
    return f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n  engine = vllm\n{body}}}\n'


def _batch(devices: int, batch: int, context: str, slo: str = "") -> str:
    return _dep(f"  devices = {devices}\n  workload {{\n    batch = {batch}\n    context = {context}\n  }}\n" + slo)


def _service(devices: int, rate: str, slo: str = "") -> str:
    return _dep(f"  devices = {devices}\n  workload {{\n    rate = {rate}\n    input = 4k\n    output = 512\n  }}\n"
                + slo)


#: A spec that misses each kind the planner can reach with the catalog's engines, and the kinds it misses.
CASES = {
    "fits": (_batch(1, 256, "128k"), {C.FITS}),                       # 256 × 128k tokens on one H100
    "layout": (_batch(4096, 8, "8k"), {C.LAYOUT}),                    # 32 layers × 32 heads: at most 1,024
    "batch slos": (_batch(1, 8, "8k", "  slo {\n    step_time <= 1 ms\n    ttft <= 1 ms\n"
                                      "    throughput >= 1000000 tok/s\n  }\n"), {C.STEP_TIME, C.TTFT, C.THROUGHPUT}),
    "service slos": (_service(8, "20/s", "  slo {\n    itl <= 9 ms\n    ttft <= 1 ms\n    rate >= 1000/s\n  }\n"),
                     {C.TTFT, C.ITL, C.GOODPUT}),
    "saturated": (_service(1, "100000/s"), {C.RATE}),
}


def _scenario(text: str) -> Scenario:
    r = check_source(text, "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    return r.scenarios[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_unmet_constraint_is_a_kind_with_suggestion_records(case: str) -> None:
    text, kinds = CASES[case]
    p = plan(_scenario(text))
    assert {u.constraint for u in p.unmet} == kinds
    for u in p.unmet:
        assert type(u.constraint) is Constraint
        assert u.suggestions, u.message                      # each names what would meet it, or says none does
        for s in u.suggestions:
            assert type(s) is Suggestion and s.text
            assert all(type(c) is Change for c in s.changes)


def test_a_suggestion_carries_the_changes_its_text_names() -> None:
    # the saturated service: the rate suggestion is one change, its value the one the text writes
    (u,) = plan(_scenario(_service(1, "100000/s"))).unmet
    rate = [s for s in u.suggestions if s.changes and s.changes[0].path == "workload.rate"]
    assert rate, u.suggestions
    for s in rate:
        (change,) = s.changes
        assert s.text.startswith(f"workload rate = {change.value} ")


def test_an_unmet_refuses_a_kind_that_is_not_a_constraint() -> None:
    with pytest.raises(TypeError):
        Unmet("fits", "does not fit", derived(1.0, "B", "probe"))  # type: ignore[arg-type]  # the check under test


@pytest.mark.parametrize("kind", list(Constraint))
def test_a_kind_reads_as_its_name(kind: Constraint) -> None:
    # lint points an SLO's finding at `slo.<name>` with an f-string, and the JSON writes the name
    assert f"slo.{kind}" == "slo." + kind.value and str(kind) == kind.value
