"""A request workload's plan (kvplan.planner.service, docs/service.md): planned at the batch the load model derives
from the rate, on the fewest devices with a steady state, its figures derived and naming λ, n_in and n_out; past
saturation an unmet `rate` naming the saturation rate."""

from __future__ import annotations

import math

import pytest

from kvplan.lang import check_source
from kvplan.planner import plan
from kvplan.planner.service import MAX_ROUNDS, solve


def _scenario(rate: str, devices: str = "auto", extra: str = ""):
    text = (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n  devices = {devices}\n'
            f"  engine = vllm\n  workload {{\n    rate = {rate}\n    input = 4k\n    output = 512\n  }}\n{extra}}}\n")
    r = check_source(text, "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    return r.scenarios[0]


def test_the_plan_is_made_at_the_running_sequences_the_load_model_gives_on_its_layout() -> None:
    p = plan(_scenario("1/s"))
    assert p.load is not None and not p.load.saturated
    assert p.scenario.batch == math.ceil(p.load.running.value)
    again, _, _, _ = solve(p)  # the load on the plan's own layout gives back its batch: settled
    assert math.ceil(again.running) == p.scenario.batch


def test_every_service_figure_is_derived_and_names_its_inputs() -> None:
    p = plan(_scenario("1/s"))
    assert p.load is not None
    for key in ("concurrency", "itl", "ttft", "saturation_rate"):
        v = getattr(p.load, key)
        assert v.evidence.value == "derived"
        assert "λ = 1/s" in v.source and "n_in = 4,000" in v.source and "n_out = 512" in v.source
    assert p.load.chunk.evidence.value == "assumed" and p.load.chunk in p.assumptions
    assert p.load.rate.value < p.load.saturation_rate.value


def test_auto_devices_take_the_fewest_on_which_the_rate_has_a_steady_state() -> None:
    one = plan(_scenario("5/s", devices="1"))
    assert one.load is not None and one.load.saturated and not one.feasible
    auto = plan(_scenario("5/s"))
    assert auto.load is not None and not auto.load.saturated and auto.n_devices == 2
    assert auto.scenario.devices == _scenario("5/s").devices  # the spec's `devices = auto`, as written


def test_past_saturation_the_plan_says_so_and_names_the_rate() -> None:
    p = plan(_scenario("50/s", devices="1"))
    assert p.load is not None and p.load.saturated and p.load.itl is None
    (u,) = [u for u in p.unmet if u.constraint == "rate"]
    assert p.load.saturation_rate.human in u.message and "past the saturation rate" in u.message
    assert u.shortfall.value == pytest.approx(50 - p.load.saturation_rate.value)


def test_a_pinned_chunk_is_the_load_model_s_and_not_an_assumption() -> None:
    p = plan(_scenario("1/s", extra="  pin {\n    max_batched_tokens = 1024\n  }\n"))
    assert p.load is not None and p.load.chunk.value == 1024 and p.load.chunk.evidence.value == "derived"
    assert p.load.chunk not in p.assumptions


def test_the_rounds_are_bounded() -> None:
    assert 1 <= MAX_ROUNDS <= 16


def test_the_digest_covers_the_service_figures() -> None:
    a, b = plan(_scenario("1/s")), plan(_scenario("2/s"))
    assert a.digest != b.digest and "load" in a.canonical()


def test_a_request_workload_that_does_not_fit_is_not_told_to_change_a_batch_or_context_it_has_none_of() -> None:
    # the fp8 weights fit one H100, one sequence of 100k tokens beside them does not
    text = ('kvplan 1\ndeployment "d" {\n  model = llama-3.1-70b\n  device = h100-sxm\n  devices = 1\n'
            "  weights = fp8\n  workload {\n    rate = 1/s\n    input = 100k\n    output = 512\n  }\n"
            "  quality {\n    budget = lossless\n  }\n}\n")
    (sc,) = check_source(text, "t.kvp").scenarios
    p = plan(sc)
    fits = [u for u in p.unmet if u.constraint == "fits"]
    assert fits, p.unmet
    keys = {c.path for u in fits for s in u.suggestions for c in s.changes}
    assert not keys & {"workload.batch", "workload.context"}


def test_the_batch_is_a_derived_figure_naming_the_rate_and_lengths() -> None:
    p = plan(_scenario("1/s"))
    assert p.load is not None
    b = p.load.batch
    assert b.value == p.scenario.batch and b.evidence.value == "derived"
    assert "λ = 1/s" in b.source and "n_in = 4,000" in b.source and "n_out = 512" in b.source
