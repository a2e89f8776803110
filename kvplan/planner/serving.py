"""A request workload's plan (docs/service.md): batch plans settled at the load model's batch, planned again on
larger device counts or as data-parallel replicas until the declared rate has a steady state and meets the
service SLOs, with what it misses and the changes that would meet it. The workload's figures themselves are
kvplan.planner.service's."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Optional, cast

import attrs

from kvplan.base.evidence import Value
from kvplan.catalog import settings
from kvplan.catalog.engines import get_engine
from kvplan.model import load
from kvplan.model.scenario import DeviceCount, Scenario
from kvplan.planner import cost, search, service
from kvplan.planner.plan import Constraint, Option, Plan, Rejection
from kvplan.planner.suggest import (
    LAYOUT_UNMET,
    Knobs,
    Replans,
    ReplansSpent,
    service_suggestions,
    unsearched,
    with_pin,
)

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    pass


def plan_service(sc: Scenario, at: Callable[[Scenario], Plan], knobs: Knobs, suggest: bool) -> Plan:
    """A request workload's plan (docs/service.md): settled at the load model's batch, with its goodput; with
    `devices = auto` or `<= N` (no devices pin), planned again on each larger count of search.AUTO_DEVICE_COUNTS
    until the declared rate has a steady state and meets the service SLOs: the fewest devices that do, the
    counts below it recorded as rejected options of the devices decision. When none does, the fewest with a
    steady state is kept (else the fewest) and what it misses is unmet, with suggestions verified by planning."""
    tried = [_service(sc, at)]
    n0 = tried[0][0].n_devices
    if sc.pinned.devices is None and sc.devices.mode != "fixed":
        counts = sorted({c for c in search.AUTO_DEVICE_COUNTS if n0 < c <= sc.devices.n}
                        | ({sc.devices.n} if sc.devices.mode == "max" and sc.devices.n > n0 else set()))
        for c in counts:
            if _serves(*tried[-1]):
                break
            q, fig, bound = _service(attrs.evolve(sc, devices=DeviceCount("fixed", c)), at)
            tried.append((attrs.evolve(q, scenario=attrs.evolve(q.scenario, devices=sc.devices)), fig, bound))
    served = next((i for i, t in enumerate(tried) if _serves(*t)), None)
    pick = served if served is not None else next(
        (i for i, (q, f, _) in enumerate(tried) if not f.saturated and _fits(q)), 0)
    p, fig, bound = tried[pick]
    rejected = [_rejected_count(*t) for t in tried[:pick]]
    spread = _replicated(sc, at, tried[:pick], p.n_devices if served is not None else None)
    if spread is not None:  # data-parallel replicas of a smaller layout serve the rate on fewer devices
        # the single layout kept when none served (a layout across nodes paying its link, SPEC §12) is passed
        # over for what it misses, not as one that also serves the rate
        single = _replica_option(tried[pick], p) if served is not None else _rejected_count(*tried[pick])
        p, fig, bound = spread[0]
        served = pick
        rejected = [_rejected_count(*t) for t in tried[:pick] if t[0].n_devices != p.n_devices] + [
            single] + list(spread[1])
    short = service.unmet(fig)
    slo_short = service.service_unmet(sc, fig, bound, ())
    try:
        if short is not None and suggest:  # past saturation: what would give the rate a steady state, each planned
            short = attrs.evolve(short, suggestions=service_suggestions(sc, knobs, p, fig,
                                                                         frozenset({Constraint.RATE})))
        if slo_short and suggest:
            sugg = service_suggestions(sc, knobs, p, fig, frozenset(u.constraint for u in slo_short))
            slo_short = service.service_unmet(sc, fig, bound, sugg)
    except ReplansSpent:
        spent = cast(Replans, knobs.replans)  # only a search with a budget runs out of it
        short = unsearched(sc, short, spent) if short is not None else None
        slo_short = tuple(unsearched(sc, u, spent) for u in service.service_unmet(sc, fig, bound, ()))
    assumptions = p.assumptions + ((fig.chunk,) if fig.chunk.evidence.value == "assumed" else ())
    unmet = p.unmet + ((short,) if short else ()) + slo_short
    meets = " and meets the service SLOs" if served is not None and service.has_slos(sc) else ""
    k = p.scenario.replicas
    on = f"{p.n_devices} devices" if k == 1 else (
        f"{k} data-parallel replicas of {p.n_devices} × {sc.device.id}, {k * p.n_devices} devices in all, each "
        f"serving 1/{k} of the rate (pin replicas = {k}: vLLM --data-parallel-size, SGLang --dp-size)")
    why = f"the declared rate {fig.rate.human} has a steady state{meets} on {on}, not on fewer" + (
        "" if served is not None else f"; no count up to {sc.devices.n} meets the service SLOs")
    decisions = tuple(attrs.evolve(d, options=tuple(rejected) + d.options, context=d.context + (why,))
                      if d.domain == "devices" and rejected else d for d in p.decisions)
    return cost.priced(attrs.evolve(p, load=fig, unmet=unmet, assumptions=assumptions, decisions=decisions,
                                    feasible=p.feasible and short is None and not slo_short))


_Served = tuple[Plan, service.LoadFigures, load.Load]


def _replicated(sc: Scenario, at: Callable[[Scenario], Plan], smaller: list[_Served], best: Optional[int]
                ) -> Optional[tuple[_Served, tuple[Option, ...]]]:
    """`devices = auto` or `<= N` with no devices or replicas pin, on an engine whose launch writes a
    data-parallel size (catalog Engine.data_parallel: vLLM, SGLang): whether r data-parallel replicas of one of the
    smaller layouts tried serve the declared rate (each 1/r of it) on fewer devices in all than the single
    layout chosen (`best`; None when none serves), the cap applying to the total. r is the least whole number
    above the rate over the layout's goodput (its saturation rate without ttft/itl SLOs), verified by planning
    it, and once more at r + 1 (the goodput is per replica at 1/r of the rate, so rounding can leave it short).
    The fewest devices in all wins, then the lower ITL. Returns the plan and the replica counts passed over."""
    if (sc.pinned.devices is not None or sc.pinned.has(settings.pin("replicas")) or sc.devices.mode == "fixed"
            or get_engine(sc.engine).data_parallel is None or sc.concurrency is not None):  # a loop: no rate split
        return None
    found: list[_Served] = []
    passed: list[Option] = []
    for q, fig, _ in smaller:
        if not _fits(q):
            continue
        per = fig.goodput if fig.goodput is not None else fig.saturation_rate
        if per is None or not per.value > 0:
            continue
        r0 = max(2, math.floor(fig.rate.value / per.value) + 1)
        for r in (r0, r0 + 1):
            total = r * q.n_devices
            if total > sc.devices.n or (best is not None and total >= best):
                if r == r0:
                    passed.append(_too_many(q, fig, per, r, sc.devices.n if best is None else best))
                break
            pins = with_pin(sc, "replicas", float(r))
            t = _service(attrs.evolve(sc, devices=DeviceCount("fixed", q.n_devices), pins=pins), at)
            t = (attrs.evolve(t[0], scenario=attrs.evolve(t[0].scenario, devices=sc.devices)), t[1], t[2])
            if _serves(*t):
                found.append(t)
                break
            passed.append(_rejected_count(*t))
    if not found:
        return None
    found.sort(key=lambda t: (t[0].n_devices * t[0].scenario.replicas, t[1].itl.value if t[1].itl else math.inf))
    win = found[0]
    for t in found[1:]:  # the other replica layouts that serve the rate: why the chosen one wins
        q, fig = t[0], t[1]
        total, best_total = q.n_devices * q.scenario.replicas, win[0].n_devices * win[0].scenario.replicas
        why = (f"more devices: {total} against {best_total}" if total > best_total else
               f"the same {total} devices, higher ITL: {fig.itl.human if fig.itl else '-'} against "
               f"{win[1].itl.human if win[1].itl else '-'}")
        nums = tuple((n, v) for n, v in (("itl", fig.itl), ("ttft", fig.ttft), ("goodput", fig.goodput))
                     if v is not None)
        passed.append(Option(f"{q.scenario.replicas} replicas × {q.n_devices} × {sc.device.id} (tp {q.tp})",
                             Rejection(None, why, nums, cause="slo"), nums))
    return win, tuple(passed)


def _too_many(q: Plan, fig: service.LoadFigures, per: Value, r: int, most: int) -> Option:
    """A layout whose replicas would take too many devices: r, the least above the rate over its goodput (or
    saturation rate), times its devices, is not below `most` (not planned: the goodput bounds it)."""
    what = "goodput" if fig.goodput is not None else "saturation rate"
    why = (f"replicas: at least {r} (the rate {fig.rate.human} over the layout's {what} {per.human}), "
           f"{r * q.n_devices} devices, not fewer than {most}")
    nums = (("rate", fig.rate), (what.replace(" ", "_"), per))
    return Option(f"{r} replicas × {q.n_devices} × {q.scenario.device.id} (tp {q.tp})",
                  Rejection(None, why, nums, cause="slo"), nums)


def _replica_option(single: _Served, chosen: Plan) -> Option:
    """The single layout that serves the rate, passed over for data-parallel replicas on fewer devices."""
    q, fig, _ = single
    k = chosen.scenario.replicas
    why = (f"more devices: {q.n_devices} in one layout, against {k} replicas × {chosen.n_devices} = "
           f"{k * chosen.n_devices} that also serve the rate")
    nums = tuple((n, v) for n, v in (("itl", fig.itl), ("ttft", fig.ttft), ("goodput", fig.goodput)) if v is not None)
    return Option(f"{q.n_devices} × {q.scenario.device.id} (tp {q.tp})", Rejection(None, why, nums, cause="slo"),
                  nums)


def _service(sc: Scenario, at: Callable[[Scenario], Plan]) -> tuple[Plan, service.LoadFigures, load.Load]:
    """The settled plan of a request workload, its service figures with the goodput, and its load on the bound
    step (--slo-on bound checks the SLOs on it; a missed SLO prints it beside the expected figure)."""
    p, fig = _settle(sc, at)
    return p, service.with_goodput(p, fig), service.solve(p, "bound")[0]


def _fits(p: Plan) -> bool:
    """Whether the plan fits on a layout its engine runs (nothing of suggest.LAYOUT_UNMET is unmet): what a count
    `devices = auto` stops at must not miss, besides the service SLOs."""
    return not any(u.constraint in LAYOUT_UNMET for u in p.unmet)


def _serves(p: Plan, fig: service.LoadFigures, bound: load.Load) -> bool:
    """Whether a request workload's plan fits on its layout and its declared rate meets the service SLOs."""
    return service.meets(p.scenario, fig, bound) and _fits(p)


def _rejected_count(p: Plan, fig: service.LoadFigures, bound: load.Load) -> Option:
    """A device count `devices = auto` tried for a request workload and passed over: what it misses, in numbers."""
    sc = p.scenario
    if fig.saturated:
        why = (f"at {fig.rate.human} no steady state: past the saturation rate {fig.saturation_rate.human} "
               f"({fig.saturation_rate.evidence.value}), set by the {fig.binding}")
    elif service.service_unmet(sc, fig, bound, ()):
        why = "misses the service SLO: " + "; ".join(u.message for u in service.service_unmet(sc, fig, bound, ()))
    else:
        why = "; ".join(u.message for u in p.unmet if u.constraint in LAYOUT_UNMET)
    nums = tuple((k, v) for k, v in (("rate", fig.rate), ("saturation_rate", fig.saturation_rate),
                                     ("itl", fig.itl), ("ttft", fig.ttft), ("goodput", fig.goodput)) if v is not None)
    return Option(f"{p.n_devices} × {sc.device.id} (tp {p.tp})", Rejection(None, why, nums, cause="slo"), nums)


def _settle(sc: Scenario, at: Callable[[Scenario], Plan]) -> tuple[Plan, service.LoadFigures]:
    """A request workload planned at the batch its load model gives on the plan's layout, planned again at each
    new batch until it settles (at most service.MAX_ROUNDS plans; back at a batch already planned, it stops)."""
    tried: set[int] = set()
    b = sc.batch
    for _ in range(service.MAX_ROUNDS):
        p = at(attrs.evolve(sc, batch=b))
        ld, per_seq, limit, ch = service.solve(p)
        want = service.batch_for(ld, limit)
        tried.add(b)
        if want == b or want in tried:
            break
        b = want
    return p, service.figures(p, ld, per_seq, limit, ch)
