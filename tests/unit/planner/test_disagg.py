"""The planner's disaggregated serving (kvplan.planner.disagg, SPEC §14): the pools' scenarios, the end-to-end
figures recomputed by hand from each pool's, x:y as the least workers that carry the rate, and `auto`'s rule with
both sides' numbers in its decision."""

from __future__ import annotations

import pytest

from kvplan.lang import check_source
from kvplan.model.scenario import Scenario
from kvplan.planner import plan
from kvplan.planner.disagg import choose, decode_scenario


def _scenario(serving: str, slo: str = "", rate: str = "20/s") -> Scenario:
    text = (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n  engine = vllm\n'
            f"  serving = {serving}\n  workload {{\n    rate = {rate}\n    input = 2k\n    output = 256\n  }}\n"
            + (f"  slo {{\n{slo}\n  }}\n" if slo else "") + "}\n")
    r = check_source(text, "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    (sc,) = r.scenarios
    return sc


@pytest.mark.parametrize("agg, pooled, won", [
    ((True, 8, 1.0), (False, 4, 9.0), "aggregated"),        # only it meets
    ((False, 4, 9.0), (True, 8, 1.0), "disaggregated"),
    ((True, 8, 1.0), (True, 4, 0.5), "disaggregated"),      # both meet: fewer devices in all
    ((True, 4, 1.0), (True, 8, 9.0), "aggregated"),
    ((True, 4, 1.0), (True, 4, 2.0), "disaggregated"),      # as many devices: more goodput per device
    ((False, 4, 3.0), (False, 16, 1.0), "aggregated"),      # neither: more goodput per device
    ((True, 4, 1.0), (True, 4, 1.0), "aggregated"),         # a tie: one engine, no KV transfer
])
def test_the_auto_rule(agg: tuple[bool, int, float], pooled: tuple[bool, int, float], won: str) -> None:
    assert choose(agg, pooled)[0] == won


def test_the_decode_pool_has_no_ttft_slo_of_its_own() -> None:
    sc = _scenario("disaggregated", "    ttft <= 1 s\n    itl <= 40 ms")
    d = decode_scenario(sc)
    assert (d.pool, d.slo_ttft, d.slo_itl) == ("decode", None, sc.slo_itl)


def test_the_pools_add_up_by_hand() -> None:
    p = plan(_scenario("disaggregated"))
    pools = p.pools
    assert pools is not None
    f, pre, dec = pools.figures, pools.prefill, pools.decode
    assert (pre.scenario.pool, dec.scenario.pool) == ("prefill", "decode")
    assert pre.scenario.output_tokens == 1 and pre.scenario.input_tokens == 2000
    x, y = pools.prefill_workers, pools.decode_workers
    assert (x, y) == (pre.scenario.replicas, dec.scenario.replicas)
    total = x * pre.n_devices + y * dec.n_devices
    assert f.devices.value == total
    # κ = 2 · 32 · 8 · 128 · 2 B (bf16) for 2,000 tokens; inside one 8-GPU node over NVLink 4 (450 GB/s a way)
    assert pre.kv_dtype.id == dec.kv_dtype.id == "bf16"
    assert f.transfer_bytes.value == pytest.approx(2000 * 131_072)
    assert pools.link == ("nvlink4" if total <= 8 else "ib-ndr")
    bw = 450e9 if total <= 8 else 50e9
    assert f.transfer_time.value == pytest.approx(2000 * 131_072 / bw)
    assert pre.load is not None and dec.load is not None and f.ttft is not None
    assert f.ttft.value == pytest.approx(pre.load.ttft.value + f.transfer_time.value + dec.load.ttft.value)
    assert p.load is not None and p.load.ttft is not None and p.load.ttft.value == f.ttft.value
    # no latency SLO: each worker carries its saturation rate, and x, y are the least that carry 20/s
    mu_p = pre.load.saturation_rate.value / x
    mu_d = dec.load.saturation_rate.value / y
    assert f.prefill_worker_rate.value == pytest.approx(mu_p)
    assert (x - 1) * mu_p < 20.0 < x * mu_p and (y - 1) * mu_d < 20.0 < y * mu_d
    assert f.goodput.value == pytest.approx(min(x * mu_p, y * mu_d))
    assert f.goodput_per_device.value == pytest.approx(f.goodput.value / total)
    assert p.feasible and not p.unmet
    assert any(d.domain == "pools" for d in p.decisions)


def test_auto_decides_with_both_sides_numbers() -> None:
    p = plan(_scenario("auto", "    ttft <= 2 s\n    itl <= 40 ms"))
    (d,) = [d for d in p.decisions if d.domain == "serving"]
    names = dict(d.numbers)
    for side in ("aggregated", "disaggregated"):
        for k in ("devices", "goodput", "goodput_per_device", "ttft", "itl"):
            assert f"{side}_{k}" in names, (side, k)
    a = (True, int(names["aggregated_devices"].value), names["aggregated_goodput_per_device"].value)
    s = (True, int(names["disaggregated_devices"].value), names["disaggregated_goodput_per_device"].value)
    assert d.choice in ("aggregated", "disaggregated")
    assert d.decision.startswith(f"We will serve {d.choice}")
    assert (p.pools is not None) == (d.choice == "disaggregated")
    assert len(d.options) == 1 and d.options[0].choice.startswith(
        "disaggregated" if d.choice == "aggregated" else "aggregated")
    if p.feasible:  # both sides' verdicts are the figures': the rule on them gives the choice made
        assert d.choice == choose(a, s)[0] or "only it meets" in d.decision


def test_aggregated_plans_stay_as_they_were() -> None:
    a = plan(_scenario("aggregated"))
    assert a.pools is None and "pools" not in a.canonical()
    assert not any(d.domain in ("serving", "pools") for d in a.decisions)
