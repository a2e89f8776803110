"""Disaggregated serving (SPEC §14, docs/service.md "Disaggregated serving"): x prefill workers and y decode workers,
each pool planned by the aggregated service planner on its own scenario, the KV transfer between them in the TTFT,
and with `serving = auto` the decision between that and one engine serving both phases, with both sides' numbers.

The pools (kvplan.model.disagg for the arithmetic):
  decode   the spec's workload with no prefill chunk in its steps (load.Service.decode_only), its ITL SLO and
           slo.rate, no TTFT SLO of its own: its part of the TTFT is the wait for the iteration in progress;
  prefill  one output token per request (the first), the prompt less the shared prefix its cache holds, the TTFT SLO
           less the transfer and the decode pool's part, the decode pool's KV dtype (the connectors copy pages as
           the decode pool stores them), no ITL SLO.
Each pool's layout search (kvplan.planner.layouts) gives its workers (its replicas, separate engines) and their
layout: x and y are the least that carry the rate within the SLOs, so x:y follows from the two pools' rates.
`devices` bounds the two pools' total: each pool is searched within it (less one device for the other pool) and a
total over it is unmet. Suggestions are not searched for a disaggregated plan (docs/service.md says so).

The auto rule: the plan that meets the SLOs; both meet: fewer devices in all, then more goodput per device; neither
meets: more goodput per device; a tie: aggregated (one engine, no KV transfer to run).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import attrs

from kvplan.base.evidence import Value, derived
from kvplan.base.units import fmt_unit
from kvplan.model import disagg as dg
from kvplan.model.scenario import DeviceCount, Lengths, Pin, Scenario, mean_context
from kvplan.planner import service
from kvplan.planner.plan import (
    Constraint,
    Decision,
    LoadFigures,
    Option,
    Plan,
    PoolFigures,
    Pools,
    Rejection,
    Unmet,
)
from kvplan.planner.suggest import layout_words, with_pin

#: A request workload's service plan (kvplan.planner.serving.plan_service with the planner's options).
ServicePlan = Callable[[Scenario], Plan]
#: Pins that size a whole deployment, which the two pools do not share.
_DEPLOYMENT_PINS = ("devices", "replicas")


def plan_serving(sc: Scenario, run: ServicePlan) -> Plan:
    """`serving = disaggregated`: the pools' plan; `auto`: the aggregated plan and the pools' plan, the one the
    rule keeps (module docstring) carrying the decision with both sides' numbers."""
    pooled = plan_disaggregated(sc, run)
    if sc.serving != "auto":
        return pooled
    agg = run(sc)
    return _decide(agg, pooled)


def plan_disaggregated(sc: Scenario, run: ServicePlan) -> Plan:
    """The pools planned (module docstring) and put together: the decode pool's plan with the end-to-end figures,
    both pools in `pools`, the serving decision and what either pool or the whole misses."""
    dec = run(decode_scenario(sc))
    assert dec.load is not None
    n_in = round(_inputs(sc).mean)
    nbytes = dg.transfer_bytes(sc.model, n_in, dec.kv_width)
    worst_link, _ = dg.pool_link(sc.device, 1 + (sc.device.node or 0))  # sized before the pools: the slower link
    pre = run(prefill_scenario(sc, dec, nbytes, worst_link))
    assert pre.load is not None
    x, y = pre.scenario.replicas, dec.scenario.replicas
    total = x * pre.n_devices + y * dec.n_devices
    link, same = dg.pool_link(sc.device, total)
    fig = _figures(sc, pre, dec, nbytes, link, same, total)
    pools = Pools(pre, dec, x, y, link or "", same, fig)
    load = _load(dec.load, pre.load, fig)
    unmet = _unmet(sc, pre, dec, load, total)
    top = attrs.evolve(dec, scenario=attrs.evolve(sc, batch=dec.scenario.batch), load=load, pools=pools,
                       unmet=unmet, cost=None, cost_at_goodput=None,
                       cost_absent="not priced for two pools yet: each pool's own plan has its cost (docs/service.md, "
                                   "Disaggregated serving)",
                       feasible=not unmet,
                       decisions=dec.decisions + (_pools_decision(pools),))
    return top


def decode_scenario(sc: Scenario) -> Scenario:
    """The decode pool's scenario: the spec's workload with no prefill in its steps, no TTFT SLO of its own."""
    return attrs.evolve(sc, pool="decode", slo_ttft=None, pins=_pool_pins(sc), devices=_pool_devices(sc))


def prefill_scenario(sc: Scenario, dec: Plan, nbytes: float, link: Optional[str]) -> Scenario:
    """The prefill pool's scenario: one output token, the prompt less the shared prefix, the TTFT SLO less the
    transfer (over `link`) and the decode pool's wait, the decode pool's KV dtype."""
    inputs = _inputs(sc)
    hi = dg.computed_prompt(inputs.hi, sc.prefix, sc.fanout)
    lo = dg.computed_prompt(inputs.lo, sc.prefix, sc.fanout)
    budget = None
    if sc.slo_ttft is not None:
        assert dec.load is not None
        move = dg.transfer_time(nbytes, dg.link_bandwidth(link)) if link else 0.0
        join = dec.load.ttft.value if dec.load.ttft is not None else math.inf
        budget = max(sc.slo_ttft - move - join, 1e-9)  # nothing left: the prefill pool cannot meet it (unmet)
    pins = with_pin(attrs.evolve(sc, pins=_pool_pins(sc)), "kv_dtype", dec.kv_dtype.id)
    one = Lengths(1, 1)
    return attrs.evolve(sc, pool="prefill", output_tokens=1, output_min=None, input_tokens=hi,
                        input_min=None if inputs.fixed else lo, prefix=0, fanout=1, slo_itl=None, slo_ttft=budget,
                        context=math.ceil(mean_context(Lengths(lo, hi), one) - 1e-9), pins=pins,
                        devices=_pool_devices(sc))


def _inputs(sc: Scenario) -> Lengths:
    assert sc.inputs is not None
    return sc.inputs


def _pool_pins(sc: Scenario) -> dict[str, Pin]:
    return {k: v for k, v in sc.pins.items() if k not in _DEPLOYMENT_PINS}


def _pool_devices(sc: Scenario) -> DeviceCount:
    """Each pool's bound: the spec's total less one device for the other pool (`auto` keeps its own limit)."""
    most = int(sc.pinned.devices) if sc.pinned.devices is not None else sc.devices.n
    return sc.devices if sc.devices.mode == "auto" and sc.pinned.devices is None else DeviceCount(
        "max", max(1, most - 1))


def _worker_rate(p: Plan) -> float:
    """μ: what one worker of the pool carries within its SLOs (its goodput, else its saturation rate), req/s."""
    assert p.load is not None
    g = p.load.goodput if p.load.goodput is not None else p.load.saturation_rate
    return g.value / p.scenario.replicas


def _figures(sc: Scenario, pre: Plan, dec: Plan, nbytes: float, link: Optional[str], same: bool,
             total: int) -> PoolFigures:
    """The whole's figures (kvplan.model.disagg), each derived and naming its inputs."""
    assert pre.load is not None and dec.load is not None
    bw = dg.link_bandwidth(link) if link else math.inf
    where = (f"{link} ({fmt_unit(bw, 'B/s')} per direction), "
             + ("every worker in one scale-up domain" if same else "the workers span scale-up domains")
             if link else "no link in the catalog: the move is not timed")
    t_x = dg.transfer_time(nbytes, bw) if link else 0.0
    n_in = round(_inputs(sc).mean)
    moved = derived(nbytes, "B", f"B_kv(n_in = {n_in:,}) at the decode pool's {dec.kv_dtype.id} KV "
                                 f"({dec.kv_width:g} B per value): the prompt's KV moved to the decode pool")
    move = derived(t_x, "s", f"B_x / β_link over {where}; no latency term (a lower bound on the move)")
    ttft_p, ttft_d = pre.load.ttft, dec.load.ttft
    ttft = None if ttft_p is None or ttft_d is None else derived(
        ttft_p.value + t_x + ttft_d.value, "s", f"TTFT_prefill {ttft_p.human} + transfer {move.human} + the "
        f"decode pool's wait for its iteration in progress {ttft_d.human} (docs/service.md, Disaggregated serving)")
    mu_p, mu_d = _worker_rate(pre), _worker_rate(dec)
    x, y = pre.scenario.replicas, dec.scenario.replicas
    good = min(mu_p * x, mu_d * y)
    return PoolFigures(
        ttft=ttft, ttft_prefill=ttft_p, transfer_bytes=moved, transfer_time=move, ttft_decode=ttft_d,
        itl=dec.load.itl,
        prefill_worker_rate=derived(mu_p, "req/s", f"μ_p: one prefill worker of {pre.n_devices} × {sc.device.id} "
                                    f"(tp {pre.tp}), its goodput at the prefill pool's SLOs ({_workers(x)})"),
        decode_worker_rate=derived(mu_d, "req/s", f"μ_d: one decode worker of {dec.n_devices} × {sc.device.id} "
                                   f"(tp {dec.tp}), its goodput at the decode pool's SLOs ({_workers(y)})"),
        goodput=derived(good, "req/s", f"min(x·μ_p, y·μ_d) = min({x}·{mu_p:.4g}, {y}·{mu_d:.4g}): the lesser "
                                       "pool's, what both carry within the SLOs"),
        devices=derived(float(total), "devices", f"x·n_p + y·n_d = {x}·{pre.n_devices} + {y}·{dec.n_devices}"),
        goodput_per_device=derived(good / total, "req/s", f"goodput / {total} devices in all"),
    )


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n > 1 else ''}"


def _load(dec: LoadFigures, pre: LoadFigures, fig: PoolFigures) -> LoadFigures:
    """The decode pool's service figures with the end-to-end TTFT, the prefill pool's queue and the whole's
    goodput: what the SLOs, lint and `expect` read."""
    return attrs.evolve(dec, ttft=fig.ttft, prefill_wait=pre.prefill_wait,
                        prefill_utilization=pre.prefill_utilization,
                        goodput=fig.goodput if dec.goodput is not None or pre.goodput is not None else None,
                        saturated=dec.saturated or pre.saturated)


def _unmet(sc: Scenario, pre: Plan, dec: Plan, load: LoadFigures, total: int) -> tuple[Unmet, ...]:
    """What the pools miss (each named, a TTFT SLO checked end to end rather than against the prefill pool's
    share), the whole's service SLOs, and a total over the spec's bound."""
    own = tuple(attrs.evolve(u, message=f"{name} pool: {u.message}", suggestions=())
                for name, p in (("prefill", pre), ("decode", dec)) for u in p.unmet
                if u.constraint not in (Constraint.TTFT, Constraint.GOODPUT))
    whole = () if load.saturated else service.service_unmet(sc, load, None, ())
    most = int(sc.pinned.devices) if sc.pinned.devices is not None else sc.devices.n
    over = () if total <= most else (Unmet(Constraint.LAYOUT, f"the two pools take {total} devices in all, over "
                                           f"the {most} the spec allows", derived(float(total - most), "devices",
                                                                                   "pools' total − the bound")),)
    return own + whole + over


def _pools_decision(pools: Pools) -> Decision:
    """The serving decision of a disaggregated plan: x:y from the two pools' rates, each pool's layout."""
    f, pre, dec = pools.figures, pools.prefill, pools.decode
    assert pre.load is not None
    rate = pre.load.rate
    return Decision(
        domain="pools", title="disaggregated prefill/decode", choice=f"{pools.ratio} (prefill:decode workers)",
        rules=(), context=(f"prefill worker: {layout_words(pre)}; decode worker: {layout_words(dec)}",
                           f"the prompt's KV, {f.transfer_bytes.human}, crosses {pools.link or 'no catalog link'} "
                           f"in {f.transfer_time.human}"),
        decision=(f"We will run {_workers(pools.prefill_workers).replace(' ', ' prefill ', 1)} "
                  f"and {_workers(pools.decode_workers).replace(' ', ' decode ', 1)} "
                  f"({f.devices.human} in all): at {rate.human} a prefill worker carries {f.prefill_worker_rate.human}"
                  f" and a decode worker {f.decode_worker_rate.human} within the SLOs, so x = {pools.prefill_workers}"
                  f" and y = {pools.decode_workers} are the least that carry the rate."),
        numbers=f.items())


def _side(p: Plan) -> tuple[bool, int, float, Optional[Value], Optional[Value], float]:
    """(meets, devices in all, goodput per device, TTFT, ITL, goodput) of one side of the auto decision."""
    assert p.load is not None
    if p.pools is not None:
        f = p.pools.figures
        return p.feasible, int(f.devices.value), f.goodput_per_device.value, f.ttft, f.itl, f.goodput.value
    n = p.n_devices * p.scenario.replicas
    g = p.load.goodput if p.load.goodput is not None else p.load.saturation_rate
    good = g.value if not p.load.saturated or p.load.goodput is not None else 0.0
    return p.feasible, n, good / n, p.load.ttft, p.load.itl, good


def _nums(tag: str, p: Plan) -> tuple[tuple[str, Value], ...]:
    meets, n, per, ttft, itl, good = _side(p)
    out: list[tuple[str, Value]] = [(f"{tag}_devices", derived(float(n), "devices", f"the {tag} plan's devices "
                                                                "in all")),
                                    (f"{tag}_goodput", derived(good, "req/s", f"the {tag} plan's goodput")),
                                    (f"{tag}_goodput_per_device", derived(per, "req/s", f"the {tag} plan's goodput "
                                                                           "per device"))]
    out += [(f"{tag}_{k}", v) for k, v in (("ttft", ttft), ("itl", itl)) if v is not None]
    return tuple(out)


def choose(agg: tuple[bool, int, float], pooled: tuple[bool, int, float]) -> tuple[str, str]:
    """The auto rule (module docstring) on (meets, devices, goodput per device) of each side: ("aggregated" or
    "disaggregated", the rule's clause that decided)."""
    (ma, na, ga), (md, nd, gd) = agg, pooled
    if ma != md:
        return ("aggregated" if ma else "disaggregated"), "only it meets the SLOs"
    if ma and na != nd:
        return ("aggregated" if na < nd else "disaggregated"), "both meet the SLOs; it takes fewer devices in all"
    if not math.isclose(ga, gd, rel_tol=1e-9):
        head = "both meet the SLOs on as many devices" if ma else "neither meets the SLOs"
        return ("aggregated" if ga > gd else "disaggregated"), f"{head}; it carries more goodput per device"
    return "aggregated", "a tie: one engine, no KV transfer to run"


def _decide(agg: Plan, pooled: Plan) -> Plan:
    """`serving = auto`: the plan the rule keeps, with the decision "aggregated vs disaggregated here, because …"
    and both sides' numbers (the other side a rejected option)."""
    a, d = _side(agg), _side(pooled)
    won, why = choose((a[0], a[1], a[2]), (d[0], d[1], d[2]))
    assert pooled.pools is not None
    ratio = pooled.pools.ratio
    words = {"aggregated": f"aggregated ({layout_words(agg)})",
             "disaggregated": f"disaggregated ({ratio} prefill:decode workers)"}

    def line(tag: str, s: tuple[bool, int, float, Optional[Value], Optional[Value], float]) -> str:
        meets, n, per, ttft, itl, good = s
        return (f"{words[tag]}: {'meets' if meets else 'misses'} the SLOs; TTFT "
                f"{ttft.human if ttft else '-'}, ITL {itl.human if itl else '-'}, goodput {good:.4g} req/s, "
                f"{n} devices, {per:.4g} req/s per device")

    lost = "disaggregated" if won == "aggregated" else "aggregated"
    nums = _nums("aggregated", agg) + _nums("disaggregated", pooled)
    decision = Decision(
        domain="serving", title="aggregated or disaggregated", choice=won, rules=(),
        context=(line("aggregated", a), line("disaggregated", d),
                 "the rule: the plan that meets the SLOs; both: fewer devices in all, then more goodput per device; "
                 "neither: more goodput per device; a tie: aggregated"),
        decision=f"We will serve {words[won]} here, because {why}.",
        numbers=nums,
        options=(Option(words[lost], Rejection(None, f"{won} wins: {why}", nums, cause="objective"), nums),))
    keep = agg if won == "aggregated" else pooled
    return attrs.evolve(keep, decisions=keep.decisions + (decision,))


__all__ = ["choose", "decode_scenario", "plan_disaggregated", "plan_serving", "prefill_scenario"]
