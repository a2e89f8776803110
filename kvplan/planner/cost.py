"""What a plan costs (docs/service.md, "Cost"): the price of a device-hour, the deployment's $/hour, and $/1M tokens.

The price is the spec's `price = 2.50 USD/h` (an input: assumed) or else the device's catalog price (a cited public
list price: reported, with its source and date; docs/catalog.md). No price: no cost figures, and advise says how to
give one; kvplan never invents a price.

    $/hour           H = price × devices × replicas
    request workload, at a rate λ (split evenly over the R replicas, λ_r = λ/R per replica):
      prefill share  f = λ_r · P   (per second the prefill chunks take λ_r·P of each engine's time, P the prompt's
                                    expected prefill less t_fixed, kvplan.model.load; decode takes the rest, 1 − f)
      $/1M input     H · f / (λ · n_in · 3600) · 10^6
      $/1M output    H · (1 − f) / (λ · n_out · 3600) · 10^6
    the batch form:
      $/1M output    H / (expected throughput · 3600) · 10^6   (the throughput of all replicas, tok/s)

Past the saturation rate no steady state serves the rate: the $/1M figures are absent there.
"""

from __future__ import annotations

from typing import Optional

import attrs

from kvplan import catalog
from kvplan.base.evidence import Evidence, Value, derived
from kvplan.model.scenario import Scenario
from kvplan.planner.plan import CostFigures, Plan

#: Seconds per hour, and tokens per "1M tokens".
HOUR = 3600.0
MILLION = 1e6
#: The unit of a price and of the deployment's cost per hour, and of a cost per million tokens.
PER_HOUR = "USD/h"
PER_MILLION = "USD/1M tokens"


def price(sc: Scenario) -> Optional[Value]:
    """The price of one device-hour: the spec's `price` (assumed: an input), else the device's catalog price
    (reported: its source and the date it was read), else None."""
    if sc.price is not None:
        return Value(sc.price, PER_HOUR, Evidence.ASSUMED, "price as the spec declares it (an input, per device-hour)")
    d = sc.device
    if d.price_per_hour is None:
        return None
    return Value(d.price_per_hour, PER_HOUR, Evidence.REPORTED,
                 f"catalog list price of {d.id}, read {d.price_date}: {d.price_source}")


def no_price(sc: Scenario) -> str:
    """The one line advise prints where no price is known: what is missing and how to give it."""
    why = "the catalog cites none" if catalog.devices().get(sc.device.id) == sc.device else "a device block has none"
    return (f"no price for {sc.device.id} ({why}): write `price = 2.50 USD/h` (per device-hour) in the deployment "
            "for $/hour and $/1M tokens (docs/service.md)")


def _base(p: Plan, pr: Value) -> tuple[Value, Value]:
    """(devices paid for, $/hour of the deployment)."""
    sc = p.scenario
    n = p.n_devices * sc.replicas
    devices = derived(float(n), "1", f"{p.n_devices} devices × {sc.replicas} replicas" if sc.replicas > 1 else
                      f"the plan's {p.n_devices} devices")
    hourly = derived(pr.value * n, PER_HOUR, f"price × devices × replicas = {pr.value:g} USD/h ({pr.evidence.value}) "
                                             f"× {p.n_devices} × {sc.replicas}")
    return devices, hourly


def at_rate(p: Plan, rate: float, what: str = "") -> Optional[CostFigures]:
    """A request workload's cost figures at `rate` requests per second (all replicas together): the declared rate,
    goodput, or any other below the saturation rate; None for the batch form or without a price. `what` names the
    rate in the sources ("the declared rate", "goodput")."""
    ld, sc, pr = p.load, p.scenario, price(p.scenario)
    if ld is None or pr is None or sc.inputs is None or sc.outputs is None or not rate > 0:
        return None
    devices, hourly = _base(p, pr)
    # tokens per request: the means of the lengths (a fixed length is its own mean)
    n_in, n_out, at = sc.inputs.mean, sc.outputs.mean, what or f"{rate:g} req/s"
    share = rate / sc.replicas * ld.prefill_time
    past = "" if rate <= ld.saturation_rate.value and share < 1 else (
        f"past saturation ({ld.saturation_rate.human}): no steady state serves {at}")
    frac = derived(share, "%", f"f = λ/R · P = {rate:g}/{sc.replicas} × {ld.prefill_time:.4g} s: the engine's time "
                               f"prefilling at {at} (docs/service.md)")
    per_in = derived(hourly.value * share / (rate * n_in * HOUR) * MILLION, PER_MILLION,
                     f"H · f / (λ · n_in · 3600) · 10^6, H = {hourly.value:g} USD/h, λ = {rate:g}/s ({at}), "
                     f"n_in = {sc.inputs.text()}")
    per_out = derived(hourly.value * (1 - share) / (rate * n_out * HOUR) * MILLION, PER_MILLION,
                      f"H · (1 − f) / (λ · n_out · 3600) · 10^6, H = {hourly.value:g} USD/h, λ = {rate:g}/s ({at}), "
                      f"n_out = {sc.outputs.text()}")
    if past:
        frac, per_in, per_out = (attrs.evolve(v, absent=past) for v in (frac, per_in, per_out))
    return CostFigures(price=pr, devices=devices, hourly=hourly,
                       rate=Value(rate, "req/s", Evidence.ASSUMED if what == "the declared rate" else Evidence.DERIVED,
                                  f"the rate the cost is at: {at}"), prefill_share=frac,
                       per_million_input=per_in, per_million_output=per_out)


def at_goodput(p: Plan) -> Optional[CostFigures]:
    """The cost figures at goodput, the largest rate that meets the SLOs: a hook for LoadFigures.goodput (issue 13
    item 3), None until the plan's load figures carry one (and for the batch form, or without a price)."""
    good = getattr(p.load, "goodput", None)
    if not isinstance(good, Value) or good.absent or not good.value > 0:
        return None
    return at_rate(p, good.value, "goodput")


def figures(p: Plan) -> Optional[CostFigures]:
    """The plan's cost figures: a request workload's at the declared rate, the batch form's at the plan's expected
    throughput; None without a price."""
    if p.load is not None:
        return at_rate(p, p.load.rate.value, "the declared rate" if p.scenario.concurrency is None else
                       "the closed loop's throughput")
    pr = price(p.scenario)
    if pr is None:
        return None
    devices, hourly = _base(p, pr)
    thr = p.metrics.throughput_expected
    per_out = derived(hourly.value / (thr.value * HOUR) * MILLION if thr.value > 0 else float("inf"), PER_MILLION,
                      f"H / (expected throughput · 3600) · 10^6, H = {hourly.value:g} USD/h, throughput "
                      f"{thr.human} ({thr.evidence.value})")
    return CostFigures(price=pr, devices=devices, hourly=hourly, per_million_output=per_out)


def priced(p: Plan) -> Plan:
    """The plan with its cost figures, at the declared rate and at goodput, or the line saying how to give a price
    (kvplan.planner.plan calls it on every plan it returns; the renderers only print them)."""
    c = figures(p)
    if c is None:
        return attrs.evolve(p, cost=None, cost_at_goodput=None, cost_absent=no_price(p.scenario))
    return attrs.evolve(p, cost=c, cost_at_goodput=at_goodput(p), cost_absent="")


def cost_per_million_output(plan: Plan) -> Optional[Value]:
    """$/1M output tokens of a plan (at the declared rate for a request workload), or None without a price: the
    cost column of `kvplan pareto` (issue 13 item 5)."""
    c = plan.cost if plan.cost is not None else figures(plan)
    return None if c is None else c.per_million_output


__all__ = ["HOUR", "MILLION", "PER_HOUR", "PER_MILLION", "at_goodput", "at_rate", "cost_per_million_output",
           "figures", "no_price", "price", "priced"]
