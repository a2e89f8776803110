"""What a plan costs (kvplan.planner.cost, docs/service.md "Cost"): the price (the spec's, assumed, over the
catalog's, reported), the deployment's $/hour, $/1M tokens split by the load model's time shares, and
`objective = cheapest`. Every figure is checked against arithmetic on the plan's own numbers."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest

from kvplan import catalog
from kvplan.lang import check_source
from kvplan.planner import cost, plan, search
from kvplan.planner.service import solve


def _spec(device: str = "h100-sxm", workload: str = "batch = 32\n    context = 8k", top: str = "",
          extra: str = "") -> str:
    return (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = {device}\n  engine = vllm\n{top}'
            f"  workload {{\n    {workload}\n  }}\n{extra}}}\n")


def _scenario(device: str = "h100-sxm", workload: str = "batch = 32\n    context = 8k", top: str = "",
              extra: str = ""):
    r = check_source(_spec(device, workload, top, extra), "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    return r.scenarios[0]


def _errors(text: str) -> list[str]:
    r = check_source(text, "t.kvp")
    return [f"{d.code} {d.span.line}:{d.span.column} {d.message}" for d in r.diagnostics
            if d.severity.value == "error"]


RATE = "rate = 2/s\n    input = 2k\n    output = 256"


# ---------------------------------------------------------------- the price

def test_the_catalog_price_is_reported_with_its_source_and_date() -> None:
    d = catalog.get_device("h100-sxm")
    assert d.price_per_hour == 6.88 and d.price_date == "2026-11-09" and d.price_source.startswith("https://")
    pr = cost.price(_scenario())
    assert pr is not None and pr.value == 6.88 and pr.unit == "USD/h" and pr.evidence.value == "reported"
    assert "2026-11-09" in pr.source and d.price_source in pr.source


def test_the_spec_price_beats_the_catalog_and_is_assumed() -> None:
    pr = cost.price(_scenario(top="  price = 2.50 USD/h\n"))
    assert pr is not None and pr.value == 2.5 and pr.evidence.value == "assumed"
    p = plan(_scenario(top="  price = 2.50 USD/h\n"))
    assert p.cost is not None and p.cost.price.value == 2.5 and p.cost.hourly.value == pytest.approx(2.5 * p.n_devices)


def test_no_price_anywhere_gives_no_cost_figures_and_says_how_to_give_one() -> None:
    sc = _scenario(device="gaudi3")
    assert catalog.get_device("gaudi3").price_per_hour is None and cost.price(sc) is None
    p = plan(sc)
    assert p.cost is None and cost.cost_per_million_output(p) is None
    line = cost.no_price(sc)
    assert "gaudi3" in line and "price = 2.50 USD/h" in line


def test_a_device_block_is_said_to_have_no_price() -> None:
    block = ('device "gpu" {\n  memory = 80 GB\n  bandwidth = 3.35 TB/s\n  compute = 989 TFLOPS\n}\n')
    r = check_source(_spec(device="gpu") + block, "t.kvp")
    assert r.ok
    assert "a device block has none" in cost.no_price(r.scenarios[0])


@pytest.mark.parametrize("price, code", [("0 USD/h", "KV108"), ("20000 USD/h", "KV108"), ("2.5", "KV106"),
                                         ("2.5 USD", "KV107"), ("cheap", "KV113")])
def test_a_wrong_price_is_a_located_error(price: str, code: str) -> None:
    errors = _errors(_spec(top=f"  price = {price}\n"))
    assert len(errors) == 1 and errors[0].startswith(f"{code} 6:"), errors


@pytest.mark.parametrize("unit", ["USD/h", "USD/hr", "USD/hour"])
def test_each_price_unit_reads_as_dollars_per_device_hour(unit: str) -> None:
    assert _scenario(top=f"  price = 3 {unit}\n").price == 3.0


def test_a_catalog_price_needs_its_source_and_date() -> None:
    with pytest.raises(catalog.CatalogError, match="price_source, price_date missing"):
        catalog._price({"price_per_hour": 2.0}, "x")
    with pytest.raises(catalog.CatalogError, match="YYYY-MM-DD"):
        catalog._price({"price_per_hour": 2.0, "price_source": "https://x", "price_date": "May 2026"}, "x")
    with pytest.raises(catalog.CatalogError, match="above 0"):
        catalog._price({"price_per_hour": 0, "price_source": "https://x", "price_date": "2026-05-01"}, "x")
    assert catalog._price({}, "x") == (None, "", "")


# -------------------------------------------------------------- the figures

def test_the_batch_form_costs_its_hour_over_its_expected_output_tokens() -> None:
    # devices = 4 is the total: 2 replicas of 2
    p = plan(_scenario(top="  price = 3 USD/h\n  devices = 4\n", extra="  pin {\n    replicas = 2\n  }\n"))
    c = p.cost
    assert c is not None and p.n_devices == 2
    assert c.devices.value == 4 and c.hourly.value == pytest.approx(12.0)  # 3 USD/h × 2 devices × 2 replicas
    thr = p.metrics.throughput_expected.value                             # tok/s of both replicas
    assert c.per_million_output.value == pytest.approx(12.0 / (thr * 3600) * 1e6)
    assert c.per_million_input is None and c.rate is None and c.prefill_share is None
    assert [v.evidence.value for _, v in c.items()] == ["assumed", "derived", "derived", "derived"]
    assert cost.cost_per_million_output(p) == c.per_million_output


def test_a_rate_is_costed_by_the_engines_time_shares_at_the_declared_rate() -> None:
    p = plan(_scenario(workload=RATE))
    c, ld = p.cost, p.load
    assert c is not None and ld is not None and not ld.saturated
    again, _, _, _ = solve(p)  # P, the load model's own, on the plan's layout
    f = 2.0 * again.chunk_time
    h = 6.88 * p.n_devices
    assert c.hourly.value == pytest.approx(h) and c.prefill_share.value == pytest.approx(f)
    assert c.per_million_input.value == pytest.approx(h * f / (2.0 * 2000 * 3600) * 1e6)
    assert c.per_million_output.value == pytest.approx(h * (1 - f) / (2.0 * 256 * 3600) * 1e6)
    # the split spends the hour once: input and output tokens of an hour at their prices add up to it
    spent = (c.per_million_input.value * 2.0 * 2000 * 3600 + c.per_million_output.value * 2.0 * 256 * 3600) / 1e6
    assert spent == pytest.approx(h)
    assert c.price.evidence.value == "reported" and c.rate.value == 2.0
    assert all(v.evidence.value == "derived" for v in (c.hourly, c.prefill_share, c.per_million_input,
                                                       c.per_million_output))
    assert "λ = 2/s" in c.per_million_output.source and "n_out = 256" in c.per_million_output.source


def test_at_any_rate_the_prefill_share_grows_with_the_rate_and_past_saturation_the_figures_are_absent() -> None:
    p = plan(_scenario(workload=RATE))
    assert p.load is not None
    low, high = cost.at_rate(p, 0.5), cost.at_rate(p, 1.0)
    assert low is not None and high is not None
    assert high.prefill_share.value == pytest.approx(2 * low.prefill_share.value)
    assert high.hourly == low.hourly  # the devices are paid for whatever the rate
    # at twice the rate the hour's decode share is spread over twice the output: under half the $/1M output
    assert high.per_million_output.value < low.per_million_output.value / 2
    past = cost.at_rate(p, p.load.saturation_rate.value * 1.5)
    assert past is not None and past.per_million_output.absent and past.per_million_input.absent
    assert past.per_million_output.to_json()["value"] is None
    assert cost.at_rate(plan(_scenario()), 1.0) is None  # the batch form has no rate to cost


def test_replicas_share_the_rate_and_each_is_paid_for() -> None:
    one = plan(_scenario(workload=RATE, top="  devices = 1\n"))
    two = plan(_scenario(workload=RATE, top="  devices = 2\n", extra="  pin {\n    replicas = 2\n  }\n"))
    assert (two.scenario.replicas, two.n_devices) == (2, 1)  # the devices are the total: 2 replicas of 1
    assert one.cost is not None and two.cost is not None
    assert two.cost.hourly.value == pytest.approx(2 * one.cost.hourly.value)
    again, _, _, _ = solve(two)  # each replica prefills at λ/2
    assert two.cost.prefill_share.value == pytest.approx(1.0 * again.chunk_time)


def test_goodput_has_a_hook_and_no_figures_until_the_load_figures_carry_goodput() -> None:
    p = plan(_scenario(workload=RATE))
    assert cost.at_goodput(p) is None or hasattr(p.load, "goodput")
    assert cost.at_goodput(plan(_scenario())) is None


def test_the_price_is_not_in_the_digest() -> None:
    # the digest guards the engine configuration, which no price changes
    assert plan(_scenario()).digest == plan(_scenario(top="  price = 1 USD/h\n")).digest


# --------------------------------------------------------- objective = cheapest

def test_cheapest_without_a_price_is_an_error_at_the_objective() -> None:
    errors = _errors(_spec(device="gaudi3", top="  objective = cheapest\n"))
    assert len(errors) == 1 and errors[0].startswith("KV104 6:15 objective = cheapest needs a price"), errors
    [d] = check_source(_spec(device="gaudi3", top="  objective = cheapest\n"), "t.kvp").diagnostics
    assert [f.title for f in d.fixes] == ["objective = fewest-devices"]  # no price is invented for the user
    assert _errors(_spec(device="gaudi3", top="  objective = cheapest\n  price = 5 USD/h\n")) == []
    assert _errors(_spec(device="h100-sxm", top="  objective = cheapest\n")) == []  # the catalog's


def test_cheap_suggests_cheapest_and_no_longer_fewest_devices() -> None:
    r = check_source(_spec(top="  objective = cheap\n"), "t.kvp")
    [d] = [d for d in r.diagnostics if d.code == "KV110"]
    assert "cheapest" in (d.help or "") and "fewest-devices" not in (d.help or "")


def _evaluated():
    sc = _scenario()
    space = search.Space(dtypes=("bf16",), retentions=(1.0,), counts=(1, 2), placements=("striped",))
    ev = search.evaluate(sc.model, sc.device, batch=32, context=8000, w_p=2.0, sharing=1.0, frag=0.0, reserved=0.0,
                         space=space, pipeline=False, engine="vllm")
    assert list(ev.n) == [1, 2]
    return ev


def test_cheapest_takes_the_least_devices_times_step_where_fewest_devices_takes_one_device() -> None:
    # constructed: two devices step 2.5x faster than one (as a price per token makes it pay), so cheaper per token
    ev = attrs.evolve(_evaluated(), step_exp=np.array([0.010, 0.004]))
    assert search.objective_order(ev, [0, 1], "fewest-devices")[0] == 0
    assert search.objective_order(ev, [0, 1], "cheapest")[0] == 1  # 2 × 4 ms < 1 × 10 ms
    why = search.compare_reason(ev, 0, 1, "cheapest")
    assert why.cause == "objective" and "1.25x the cost per output token" in why.reason


def test_cheapest_keeps_one_device_where_two_are_not_more_than_twice_as_fast() -> None:
    ev = _evaluated()
    assert ev.n[1] * ev.step_exp[1] > ev.n[0] * ev.step_exp[0]  # the model's own: fixed costs and all-reduce
    assert search.objective_order(ev, [0, 1], "cheapest")[0] == 0


def test_cheapest_differs_from_fastest_and_its_plan_is_the_cheapest_per_output_token() -> None:
    top = "  devices = <= 8\n  price = 2 USD/h\n"
    cheap = plan(_scenario(top=top + "  objective = cheapest\n"))
    fast = plan(_scenario(top=top + "  objective = fastest\n"))
    assert cheap.n_devices < fast.n_devices
    assert cheap.cost is not None and fast.cost is not None
    assert cheap.cost.per_million_output.value < fast.cost.per_million_output.value
    assert math.isfinite(cheap.cost.per_million_output.value)


def test_cheapest_at_a_declared_rate_is_the_least_dollars_per_hour_as_fewest_devices_ranks() -> None:
    top = "  devices = <= 8\n"
    cheap = plan(_scenario(workload=RATE, top=top + "  objective = cheapest\n"))
    fewest = plan(_scenario(workload=RATE, top=top))
    assert cheap.choices == fewest.choices
    assert cheap.cost is not None and fewest.cost is not None and cheap.cost.hourly == fewest.cost.hourly
