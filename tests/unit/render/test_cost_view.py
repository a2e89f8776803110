"""The cost figures as advise and `kvplan devices` print them (kvplan.planner.cost): each with its unit and
evidence, the price with its own evidence and source, and one line saying how to give a price where none is known."""

from __future__ import annotations

import json

from kvplan import catalog
from kvplan.lang import check_source
from kvplan.planner import cost, plan
from kvplan.render import catalog_view, plan_view


def _plan(device: str, top: str = "", workload: str = "batch = 32\n    context = 8k"):
    text = (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = {device}\n  engine = vllm\n{top}'
            f"  workload {{\n    {workload}\n  }}\n}}\n")
    r = check_source(text, "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    return plan(r.scenarios[0])


def test_text_prints_each_cost_figure_with_its_evidence_and_the_price_source() -> None:
    p = _plan("h100-sxm", workload="rate = 2/s\n    input = 2k\n    output = 256")
    assert p.cost is not None
    out = plan_view.text([p])
    block = out.split("\ncost (docs/service.md): at the declared rate", 1)[1].split("\n\n", 1)[0]
    assert f"price per device-hour  {'6.88 USD/h':>22}  (reported)" in block
    assert f"{p.cost.per_million_output.human:>22}  (derived)" in block
    assert "$/1M input tokens" in block and "$/1M output tokens" in block
    assert "price source: catalog list price of h100-sxm, read 2026-11-09" in block
    assert max(len(line) for line in out.splitlines()) <= 100


def test_json_carries_the_cost_figures_as_contract_values() -> None:
    p = _plan("h100-sxm", top="  price = 2 USD/h\n")
    body = json.loads(plan_view.json_text([p]))["plans"][0]["cost"]
    assert body["price"] == {"value": 2, "unit": "USD/h", "evidence": "assumed",
                             "source": "price as the spec declares it (an input, per device-hour)"}
    assert body["per_million_output"]["unit"] == "USD/1M tokens"
    assert body["per_million_output"]["evidence"] == "derived"
    assert body["hourly"]["value"] == 2 * p.n_devices


def test_without_a_price_text_and_json_say_how_to_give_one() -> None:
    p = _plan("gaudi3")
    assert "cost: no price for gaudi3 (the catalog cites none): write `price = 2.50 USD/h`" in plan_view.text([p])
    body = json.loads(plan_view.json_text([p]))["plans"][0]["cost"]
    assert list(body) == ["absent"] and "price = 2.50 USD/h" in body["absent"]


def test_devices_lists_each_price_with_its_source_and_date() -> None:
    text = catalog_view.devices(list(catalog.devices().values()), "text")
    assert "  h100-sxm: 6.88 USD/h, read 2026-11-09:" in text and "  a100-80g: 3.4309 USD/h, read 2026-11-09:" in text
    assert "gaudi3:" not in text.split("prices (reported", 1)[1]
    rows = {d["id"]: d for d in json.loads(catalog_view.devices(list(catalog.devices().values()), "json"))["devices"]}
    assert rows["h100-sxm"]["price_per_hour"]["value"] == 6.88
    assert rows["h100-sxm"]["price_per_hour"]["evidence"] == "reported"
    assert rows["h100-sxm"]["price_per_hour"]["source"].startswith("https://")
    assert rows["h100-sxm"]["price_date"] == "2026-11-09"
    assert rows["gaudi3"]["price_per_hour"] is None and rows["gaudi3"]["price_date"] is None


def test_the_cost_at_goodput_is_printed_beside_the_declared_rate_s() -> None:
    """A request workload with a TTFT SLO has a goodput (kvplan.model.load.goodput); the plan carries the cost at
    it, the same figures cost.at_rate gives at that rate, and the text and JSON print them."""
    p = _plan("h100-sxm", workload="rate = 2/s\n    input = 2k\n    output = 256\n  }\n  slo {\n    ttft <= 1 s")
    assert p.load is not None and p.load.goodput is not None and p.load.goodput.value > 0
    good = p.cost_at_goodput
    assert good is not None and good == cost.at_rate(p, p.load.goodput.value, "goodput")
    assert good.rate is not None and good.rate.evidence.value == "derived"
    assert good.per_million_input is not None
    assert f"at goodput ({good.rate.human}): $/1M input tokens {good.per_million_input.human} (derived)" in \
        plan_view.text([p])
    body = json.loads(plan_view.json_text([p]))["plans"][0]["cost"]["at_goodput"]
    assert body["per_million_output"]["value"] == good.per_million_output.value


def test_without_service_slos_there_is_no_cost_at_goodput() -> None:
    p = _plan("h100-sxm", workload="rate = 2/s\n    input = 2k\n    output = 256")
    assert p.load is not None and p.load.goodput is None and p.cost_at_goodput is None
    assert "at goodput" not in plan_view.text([p])
