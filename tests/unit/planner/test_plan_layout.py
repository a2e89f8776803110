"""Review findings on the planner and the memory model (issue 9): the unit tests that need the planner layer.

Split by layer from the tests of the same subject in tests/acceptance/test_plan_layout.py;
tests/acceptance/test_plan_layout.py says what they check.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.catalog import get_model
from kvplan.lang import check_source
from kvplan.planner import plan
from kvplan.planner.plan import Rejection
from tests.paths import ROOT


def scenario(text: str) -> Any:
    res = check_source(text, "t.kvp")
    assert res.ok, [f"{d.code} {d.message}" for d in res.diagnostics]
    return res.scenarios[0]


def llama8b(devices: str, *, pin: str = "", context: str = "128Ki") -> str:
    return f"""kvplan 1
deployment "t" {{
    model  = llama-3-8b
    device = h100-sxm
    engine = vllm
    {devices}
    workload {{
        batch   = 8
        context = {context}
    }}
    {pin}
    expect {{ regime == capacity-bound }}
}}
"""


# 1 ---------------------------------------------------------------- layouts the model cannot take

@pytest.mark.parametrize("text", [llama8b("devices = 4096"), llama8b("", pin="pin { devices = 2048 }")])
def test_a_count_with_no_split_is_unmet_with_a_verified_suggestion(text: str) -> None:
    m = get_model("llama-3-8b")  # 32 layers, 32 query heads: at most 32 × 32 = 1,024 devices split
    sc = scenario(text)
    p = plan(sc)
    assert not p.feasible
    gap = [u for u in p.unmet if u.constraint == "layout"]
    assert len(gap) == 1, [u.message for u in p.unmet]
    assert "no layout" in gap[0].message and "1,024" in gap[0].message
    # the suggestion is applied to the spec and planned again: it splits and meets everything
    assert gap[0].suggestions[0].changes, gap[0].suggestions
    change, = gap[0].suggestions[0].changes
    path, n = change.path, int(str(change.value))
    key = "pin { devices = " if "pin.devices" == path else "devices = "
    fixed = text.replace(f"{key}{int(p.n_devices)}", f"{key}{n}")
    assert fixed != text
    p2 = plan(scenario(fixed))
    assert not p2.unmet and p2.feasible
    assert p2.tp * p2.pp == n and p2.pp <= m.n_layers and m.n_q % p2.tp == 0


def test_no_plan_has_more_pipeline_stages_than_layers() -> None:
    m = get_model("llama-3-8b")
    for n in (64, 96, 1024, 2048, 4096):
        p = plan(scenario(llama8b(f"devices = {n}")))
        assert p.pp <= m.n_layers or any(u.constraint == "layout" for u in p.unmet), (n, p.tp, p.pp)


def test_r1_map_even_split_uses_the_printed_formula() -> None:
    text = (ROOT / "examples" / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8")
    res = check_source(text, "d.kvp")
    sc = next(s for s in res.scenarios if s.batch == 16)
    mb = dict(plan(sc).map_before.items())
    m = get_model("deepseek-v3")
    n, C = 4, 192e9
    rho = 4.0  # an MLA latent is held by every one of the 4 tensor-parallel ranks
    kappa = mb["kappa"].value
    # the FP8 checkpoint's bytes, by hand from its quantization_config: 1 B a weight + a float32 scale per
    # 128 × 128 block, the embedding and the untied head (129,280 × 7,168 each) bf16
    embed = 129_280 * 7_168
    weights = (m.params - 2 * embed) * (1 + 4 / 16_384) + 2 * embed * 2
    want = (n * C - weights) / (16 * kappa * rho)
    assert "(N·C − P·w_p)/(b·κ·ρ)" in mb["s_cap"].source and "ρ = 4" in mb["s_cap"].source
    assert mb["s_cap"].value == pytest.approx(want, rel=1e-9)


# 5 ---------------------------------------------------------------- the records behind the reasons

def test_fit_and_layout_rejections_are_typed_records() -> None:
    # fit takes precedence over a rule's rejection, as a Rejection with no rule and cause "fit";
    # a count with no split is rejected with cause "layout" (rulemods' typed records, issue 9's order)
    res = check_source((ROOT / "examples" / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8"),
                       "deepseek-v3-mi300x.kvp")
    sc = next(s for s in res.scenarios if s.name == "deepseek-v3[batch=16]")
    devices = next(d for d in plan(sc).decisions if d.domain == "devices")
    tight = [o for o in devices.options if int(o.choice.split(" × ")[0].split(",")[0]) * 192e9 < 671e9]
    assert len(tight) >= 2
    for o in tight:
        assert isinstance(o.reason, Rejection) and o.reason.rule is None and o.reason.cause == "fit", o
    p = plan(scenario(llama8b("", pin="pin { devices = 2048 }\n    quality { budget = moderate }")))
    assert any(u.constraint == "layout" for u in p.unmet)
    opts = [o for d in p.decisions for o in d.options if isinstance(o.reason, Rejection)]
    assert opts and all(o.reason.cause == "layout" and o.reason.rule is None for o in opts)
