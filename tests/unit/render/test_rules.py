"""Design rules as modules: the unit tests that need the render layer.

Split by layer from the tests of the same subject in tests/unit/planner/test_rules.py;
tests/unit/planner/test_rules.py says what they check.
"""

from __future__ import annotations

import pytest

from kvplan.planner import plan
from kvplan.planner.plan import Rejection
from kvplan.planner.rules import Rule, with_rules
from kvplan.render.plan_view import reason_text
from tests.unit.planner import test_rules as unit_rules
from tests.unit.planner.test_planner import KAPPA, WL, W, scenario, spec
from tests.unit.planner.test_rules import MODERATE

toy = unit_rules.toy  # the fixture of tests/unit/planner/test_rules.py; pytest finds it here by name


def test_r3_rejection_is_typed_with_its_numbers() -> None:
    # W1: Llama-3-70B, one B200, batch 1, 128k: fp8 is removed by R3, and the record says so by
    # its rule, with KV bytes read at 16-bit (κ·s) and the weight bytes read (P·w_p), computed here
    p = plan(scenario(spec(WL.format(b=1, s="128k"), extra=MODERATE)))
    q = next(d for d in p.decisions if d.domain == "quantization")
    fp8 = next(o for o in q.options if o.choice == "fp8")
    assert isinstance(fp8.reason, Rejection) and fp8.reason.rule == "R3" and fp8.reason.cause == "rule"
    nums = dict(fp8.reason.numbers)
    assert nums["kv_bytes_read"].value == pytest.approx(KAPPA * 128_000)
    assert nums["weight_bytes_read"].value == pytest.approx(W)
    assert nums["kv_bytes_read"].unit == "B" and nums["kv_bytes_read"].evidence.value == "derived"
    # the renderer formats the record: the rule's id leads the words
    assert reason_text(fp8.reason) == "R3: " + fp8.reason.reason
    assert not fp8.reason.reason.startswith("R3")


def test_rejections_name_their_rule_only_when_a_rule_removed_them() -> None:
    assert reason_text(Rejection(None, "slower: step 2 ms vs 1 ms", cause="objective")) == "slower: step 2 ms vs 1 ms"
    with pytest.raises(ValueError):
        Rejection("R4", "x", cause="fit")
    with pytest.raises(ValueError):
        Rejection(None, "x")


def test_toy_rule_filters_the_search(toy: Rule) -> None:
    sc = scenario(spec(WL.format(b=8, s="128k"), extra=MODERATE))
    assert plan(sc).kv_dtype.id == "int2"  # without the toy rule: 2-bit KV is fastest on 2 devices
    p = plan(sc, rules=with_rules(toy))
    assert p.kv_dtype.id == "int4"
    q = next(d for d in p.decisions if d.domain == "quantization")
    int2 = next(o for o in q.options if o.choice == "int2")
    assert isinstance(int2.reason, Rejection) and int2.reason.rule == "R9"
    assert reason_text(int2.reason) == "R9: 2-bit KV is not certified on this fleet"
