"""kvplan.planner.layouts: the total a spec allows, which replica counts the search may use, and one replica's
scenario (its devices and a pinned count are 1/r of the total)."""

from __future__ import annotations

from kvplan.lang import check_source
from kvplan.model.scenario import Scenario
from kvplan.planner import layouts


def _scenario(devices: str = "auto", engine: str = "vllm", pin: str = "") -> Scenario:
    text = (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n  engine = {engine}\n'
            f"  devices = {devices}\n  workload {{\n    rate = 5/s\n    input = 1k\n    output = 128\n  }}\n"
            + (f"  pin {{\n    {pin}\n  }}\n" if pin else "") + "}\n")
    r = check_source(text, "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    return r.scenarios[0]


def test_the_bound_is_the_pin_the_fixed_count_the_cap_or_autos_limit() -> None:
    assert (layouts.bound_total(_scenario("12")), layouts.exact(_scenario("12"))) == (12, True)
    assert (layouts.bound_total(_scenario("<= 24")), layouts.exact(_scenario("<= 24"))) == (24, False)
    assert (layouts.bound_total(_scenario()), layouts.exact(_scenario())) == (64, False)
    pinned = _scenario(pin="devices = 16")
    assert (layouts.bound_total(pinned), layouts.exact(pinned)) == (16, True)


def test_only_an_engine_that_writes_a_data_parallel_size_gets_replicas_unless_pinned() -> None:
    assert layouts.replica_counts_allowed(_scenario(engine="vllm")) is None
    assert layouts.replica_counts_allowed(_scenario(engine="sglang")) is None
    assert layouts.replica_counts_allowed(_scenario(engine="trtllm")) == 1
    assert layouts.replica_counts_allowed(_scenario(engine="trtllm", pin="replicas = 3")) == 3


def test_one_replicas_scenario_takes_its_share_of_a_pinned_count() -> None:
    sc = _scenario(pin="devices = 16")
    one = layouts.per_replica(sc, 4, 4)
    assert (one.replicas, one.devices.mode, one.devices.n, one.pinned.devices) == (4, "fixed", 4, 4)
    assert (sc.replicas, sc.pinned.devices) == (1, 16)  # the spec's own scenario is untouched
