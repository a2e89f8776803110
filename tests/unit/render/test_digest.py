"""The plan digest covers every input that changes the plan: the unit tests that need the render layer.

Split by layer from the tests of the same subject in tests/acceptance/test_digest.py,
tests/unit/planner/test_digest.py; tests/acceptance/test_digest.py says what they check.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.render.plan_view import json_text
from tests.unit.planner.test_digest import BASE, FIELDS, plan_or_none, spec_text

#: The planner's overrides (CLI options): each is an input of the plan too.
OVERRIDES: dict[str, tuple[Optional[float], ...]] = {
    "reserve": (None, 0.1, 0.3),
    "min_gain": (None, 1.3, 3.0),
    "eta": (None, 0.5),
    "activation_reserve": (None, 20e9),
    "runtime_reserve": (None, 4 * 2**30, 60e9),
}


_PROSE = {"name", "source", "note", "confidence", "aliases"}


def what_the_plan_is(p: Any) -> Any:
    """The plan by its full JSON (`kvplan advise --format json`), less what explains a choice without
    being one: rationale text, options turned down, which choices were pinned, the candidate count,
    value sources (wording), and the spec's and scenario's names; plus the catalog records it was
    made from. Written here independently of Plan.canonical."""
    j = json.loads(json_text([p]))["plans"][0]

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            if {"value", "unit", "evidence", "source"} <= x.keys():
                return [x["value"], x["unit"], x["evidence"]]
            return {k: strip(v) for k, v in x.items()}
        if isinstance(x, list):
            return [strip(v) for v in x]
        if isinstance(x, float):
            return float(f"{x:.12g}")
        return x

    for k in ("digest", "candidates_evaluated", "scenario", "deployment"):
        j.pop(k)
    j["decisions"] = [{"domain": d["domain"], "choice": d["choice"], "numbers": d["numbers"],
                       "evidence": [[e["value"], e["unit"], e["source"]] for e in d["evidence"]],
                       "reported_text": d["reported_text"]} for d in j["decisions"]]
    j["unmet"] = [{"constraint": u["constraint"], "shortfall": u["shortfall"]} for u in j["unmet"]]
    sc = p.scenario
    records = {name: {k: v for k, v in attrs.asdict(rec, recurse=False).items() if k not in _PROSE}
               for name, rec in (("model", sc.model), ("device", sc.device))}
    return strip(j), repr(records)


def check_pair(a: dict[str, str], b: dict[str, str], oa: dict[str, Any], ob: dict[str, Any]) -> Optional[bool]:
    """Plan both; the digest differs exactly when the plan does. None when either spec is invalid."""
    pa, pb = plan_or_none(spec_text(a), **oa), plan_or_none(spec_text(b), **ob)
    if pa is None or pb is None:
        return None
    changed = bool(what_the_plan_is(pa) != what_the_plan_is(pb))
    assert (pa.digest != pb.digest) == changed, (a, b, oa, ob)
    return changed


#: Eviction matters only where the budget admits it and the cache is large enough to want it.
FIELD_BASES: dict[str, dict[str, str]] = {
    "eviction": {"budget": "moderate", "context": "128k", "batch": "102", "devices": "<= 8"},
    "min_retention": {"budget": "moderate", "context": "128k", "batch": "102", "devices": "<= 8",
                      "eviction": "allowed"},
}


@pytest.mark.parametrize("field", list(FIELDS))
def test_changing_each_spec_field_changes_the_digest_exactly_when_the_plan_changes(field: str) -> None:
    seen_change = False
    base = {**BASE, **FIELD_BASES.get(field, {})}
    for value in FIELDS[field]:
        changed = check_pair(base, {**base, field: value}, {}, {})
        seen_change = seen_change or bool(changed)
    # every field can change this plan, and then the digest does (the test cannot pass vacuously)
    assert seen_change, field


@pytest.mark.parametrize("name", list(OVERRIDES))
def test_each_override_changes_the_digest_exactly_when_the_plan_changes(name: str) -> None:
    base = {**BASE, "reuse": "60%", "devices": "<= 8", "budget": "aggressive", "eviction": "allowed"}
    seen_change = False
    for value in OVERRIDES[name][1:]:
        changed = check_pair(base, base, {}, {name: value})
        seen_change = seen_change or bool(changed)
    assert seen_change, name


field_values = st.fixed_dictionaries({k: st.sampled_from(v) for k, v in FIELDS.items()})


@pytest.mark.slow
@settings(max_examples=100, deadline=None, derandomize=True)
@given(base=field_values, field=st.sampled_from(list(FIELDS)), data=st.data())
def test_digest_tracks_the_plan_from_any_base(base: dict[str, str], field: str, data: Any) -> None:
    value = data.draw(st.sampled_from(FIELDS[field]))
    over = data.draw(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in OVERRIDES.items()}))
    check_pair(base, {**base, field: value}, over, over)
