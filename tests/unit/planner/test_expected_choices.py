"""The planner on the expected figures (issue 12, build 5): a lossier KV dtype buys its minimum gain on the
expected step, its kernel's dequantization cost included; SLOs are checked on the expected figures unless
`slo_on = "bound"`; the plan and the baseline carry both figures."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kvplan import catalog
from kvplan.base.evidence import Evidence
from kvplan.lang import check_source
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.profile import Fit, Profile
from kvplan.planner import DEFAULT_MIN_GAIN, factors_for, plan


def scenario(body: str, device: str = "b200", model: str = "llama-3-70b") -> Any:
    text = f'deployment "t" {{\n    model = {model}\n    device = {device}\n{body}\n}}\n'
    res = check_source(text, "t.kvp")
    assert res.ok, [f"{d.code} {d.message}" for d in res.diagnostics]
    return res.scenarios[0]


MODERATE = "    devices = 2\n    quality { budget = moderate }\n    workload { batch = 16\n context = 32k }"


def _option(p: Any, domain: str, choice: str) -> Any:
    d = next(d for d in p.decisions if d.domain == domain)
    return next(o for o in d.options if o.choice == choice)


def test_a_slow_dequantizing_kernel_loses_what_the_bound_would_give_it() -> None:
    sc = scenario(MODERATE)
    assert plan(sc).kv_dtype.id == "int2"  # the narrowest admitted: on default factors it buys its gain
    # a profile whose int2 kernel reaches 20% of the weight stream's bandwidth (int4 40%)
    slow = Profile("cal.toml", "cal", (), (Fit("b200", "any", kv_efficiency=(("int4", 0.4), ("int2", 0.2))),))
    p = plan(attrs.evolve(sc, calibration=slow))
    assert p.kv_dtype.id not in ("int2", "int4")
    opt = dict(_option(p, "quantization", "int2").numbers)
    chosen = p.metrics
    # on the bound int2 would have bought its gain over the chosen dtype; on the expected step it does not
    assert opt["step_time"].value * DEFAULT_MIN_GAIN <= chosen.step_time.value
    assert opt["step_time_expected"].value * DEFAULT_MIN_GAIN > chosen.step_time_expected.value
    reason = str(_option(p, "quantization", "int2").reason)
    assert "expected step" in reason and "bound" in reason  # the rejected option shows both figures


def test_the_expected_step_of_the_int2_option_is_the_formula() -> None:
    sc = scenario(MODERATE)
    slow = Profile("cal.toml", "cal", (), (Fit("b200", "any", kv_efficiency=(("int2", 0.2),)),))
    sc = attrs.evolve(sc, calibration=slow)
    p = plan(sc)
    m, d = sc.model, sc.device
    cfg = rf.Config(m, d, n_devices=2, w_p=2.0, w_kv=catalog.engines.kv_width("any", "int2", m))
    t = rf.step_time(cfg, 16, 32_000)
    f = factors_for(sc, "int2")
    eta_w = ex.performance.factor("eta_w", device="b200").value
    assert f.eta_kv.value == pytest.approx(eta_w * 0.2)
    comm = float(ex.all_reduce_time(m, 16, 2, ex.link_bandwidth(d), f.collective_latency.value))
    want = f.t_fixed.value + float(t.weights) / eta_w + float(t.kv) / (eta_w * 0.2) + comm
    got = dict(_option(p, "quantization", "int2").numbers)["step_time_expected"].value
    assert got == pytest.approx(want, rel=1e-9)


def test_a_large_fixed_cost_leaves_the_lossless_dtype() -> None:
    sc = scenario(MODERATE)
    fixed = Profile("cal.toml", "cal", (), (Fit("b200", "any", t_fixed=0.2),))
    p = plan(attrs.evolve(sc, calibration=fixed))
    # 200 ms per step dwarfs what any KV width saves: no lossier dtype buys 1.1x on the expected step
    assert p.kv_dtype.id == "bf16"
    assert p.metrics.step_time_expected.value >= 0.2


def test_plan_and_baseline_carry_both_figures() -> None:
    p = plan(scenario(MODERATE))
    for m in (p.metrics, p.baseline):
        assert m.step_time_expected.value >= m.step_time.value
        assert m.ttft_expected.value >= m.ttft.value > 0
        assert m.throughput_expected.value <= m.throughput.value
        for v in (m.step_time_expected, m.ttft_expected, m.throughput_expected):
            assert v.evidence is Evidence.DERIVED
            assert all(name in v.source for name in ("eta_w", "eta_kv", "t_fixed")) or v.unit == "tok/s"
    assert [k for k, _ in p.expected_factors] == ["eta_w", "eta_kv", "eta_compute", "t_fixed", "collective_latency",
                                                  "t_layer", "t_moe"]


SLO = "    devices = 1\n    pin {{ kv_dtype = bf16 }}\n    workload {{ batch = 8\n context = 4k }}\n    slo {{ {slo} }}"


def _midway(sc: Any) -> float:
    p = plan(sc)
    return (p.metrics.step_time.value + p.metrics.step_time_expected.value) / 2


def test_an_slo_the_bound_meets_and_the_expected_step_misses() -> None:
    base = scenario(SLO.format(slo="step_time <= 3600 s"), device="h100", model="llama-3-8b")
    limit = _midway(base)  # between the bound and the expected step: computed, not a constant
    sc = attrs.evolve(base, slo_step_time=limit)
    p = plan(sc)
    (u,) = [u for u in p.unmet if u.constraint == "step_time"]
    assert u.shortfall.value == pytest.approx(p.metrics.step_time_expected.value - limit)
    assert "expected" in u.message and "bound" in u.message
    assert not plan(attrs.evolve(sc, slo_on="bound")).unmet


def test_a_ttft_slo_is_checked_on_the_expected_ttft() -> None:
    base = scenario(SLO.format(slo="ttft <= 3600 s"), device="h100", model="llama-3-8b")
    assert base.slo_ttft == 3600.0
    q = plan(base)
    limit = (q.metrics.ttft.value + q.metrics.ttft_expected.value) / 2
    p = plan(attrs.evolve(base, slo_ttft=limit))
    (u,) = [u for u in p.unmet if u.constraint == "ttft"]
    assert u.shortfall.value == pytest.approx(p.metrics.ttft_expected.value - limit)
    assert not plan(attrs.evolve(base, slo_ttft=limit, slo_on="bound")).unmet
