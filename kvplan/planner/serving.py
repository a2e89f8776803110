"""A request workload's plan (docs/service.md): batch plans settled at the load model's batch, for each replica
layout kvplan.planner.layouts searches (`devices` the total over the replicas), the chosen one with why that count,
what it misses and the changes that would meet it. The workload's figures themselves are
kvplan.planner.service's."""

from __future__ import annotations

import math
from typing import Callable, cast

import attrs

from kvplan.base.evidence import Value, derived
from kvplan.model import load
from kvplan.model.scenario import Scenario
from kvplan.planner import cost, layouts, service
from kvplan.planner.plan import Constraint, Option, Plan, Rejection
from kvplan.planner.suggest import (
    LAYOUT_UNMET,
    Knobs,
    Replans,
    ReplansSpent,
    layout_words,
    replica_words,
    service_suggestions,
    unsearched,
)


def plan_service(sc: Scenario, at: Callable[[Scenario], Plan], knobs: Knobs, suggest: bool) -> Plan:
    """A request workload's plan (docs/service.md): each replica layout the spec allows settled at the load
    model's batch, with its goodput (kvplan.planner.layouts: r replicas × the batch plan's tensor × pipeline
    split, `devices` the total); the least total that meets the service SLOs, the best of its layouts, the
    others recorded as rejected options of the devices decision. When none meets, the best within the bound
    (most goodput) is kept and what it misses is unmet, with suggestions verified by planning."""
    found = layouts.layout_search(sc, lambda s: _service(s, at))
    win = found.chosen
    p, fig, bound = win.plan, win.fig, win.bound
    rejected = [_rejected_layout(t, win) for t in found.tried if t is not win]
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
    why = _why_count(found)
    because, nums = _because(found)
    decisions = tuple(attrs.evolve(d, options=tuple(rejected) + d.options, context=d.context + (why,),
                                   decision=f"{d.decision} {because}", numbers=d.numbers + nums)
                      if d.domain == "devices" else d for d in p.decisions)
    return cost.priced(attrs.evolve(p, load=fig, unmet=unmet, assumptions=assumptions, decisions=decisions,
                                    feasible=p.feasible and short is None and not slo_short))


def _because(found: layouts.Found) -> tuple[str, tuple[tuple[str, Value], ...]]:
    """Why that count, in one sentence with its numbers (`One replica of 8 × h100-sxm (tp 8 × pp 1) saturates at
    7.87 req/s; 2 replicas carry 13.4 req/s within the SLOs, for the declared 10 req/s.`), and those numbers."""
    t = found.chosen
    fig, k = t.fig, t.replicas
    one = derived(fig.saturation_rate.value / k, "req/s", f"the saturation rate of one replica: "
                  f"{fig.saturation_rate.human} over {k} replica{'s' if k > 1 else ''}")
    nums: tuple[tuple[str, Value], ...] = (("replica_saturation_rate", one),) + (
        (("goodput", fig.goodput),) if fig.goodput is not None else ())
    lead = f"One replica of {replica_words(t.plan)}"
    carry = ("" if fig.goodput is None else
             f"; {k} replicas carry {fig.goodput.human} within the SLOs" if k > 1 else
             f" and carries {fig.goodput.human} within the SLOs")
    return f"{lead} saturates at {one.human}{carry}, for {_rate_words(t.plan.scenario, fig)}.", nums


def _rate_words(sc: Scenario, fig: service.LoadFigures) -> str:
    """The rate a layout serves: the declared one, or a closed loop's throughput (it declares clients, not a rate)."""
    return (f"the closed loop's {fig.rate.human} ({sc.concurrency} clients)" if sc.concurrency is not None else
            f"the declared {fig.rate.human}")


def _why_count(found: layouts.Found) -> str:
    """Why the devices decision took that count: the least total that meets (or the best within the bound) and
    how many layouts the search planned; what one replica carries is the decision's own sentence (_because), with
    its numbers as Values."""
    t = found.chosen
    fig = t.fig
    spread = f"{len(found.tried)} layouts planned, totals up to {found.bound}"
    head = (f"{_rate_words(t.plan.scenario, fig)} meets the service SLOs on {layout_words(t.plan)}, the least "
            f"total that does, the best of its layouts" if found.met else
            f"no layout of up to {found.bound} devices in all meets the service SLOs at {fig.rate.human}: "
            f"{layout_words(t.plan)} is the best within the bound (most goodput, then lower ITL)")
    return f"{head} ({spread})"


def _rejected_layout(t: layouts.Tried, win: layouts.Tried) -> Option:
    """A layout the search planned and passed over: what it misses, or why the chosen one beats it, in numbers."""
    if not t.fits:
        why = "; ".join(u.message for u in t.plan.unmet if u.constraint in LAYOUT_UNMET)
        return Option(_label(t), Rejection(None, why, (), cause="fit"))
    if not t.meets or not win.meets:
        base = _rejected_count(t.plan, t.fig, t.bound)
        if t.fits and not win.meets:
            why = (f"less goodput than {layout_words(win.plan)}: {t.goodput:.4g} against {win.goodput:.4g} req/s"
                   if t.goodput < win.goodput else
                   f"the same goodput, higher ITL: {_ms(t.itl)} against {_ms(win.itl)}")
            reason = attrs.evolve(cast(Rejection, base.reason), reason=why)
            base = attrs.evolve(base, reason=reason)
        return attrs.evolve(base, choice=_label(t))
    if t.total > win.total:
        why = f"more devices: {t.total} in all against {win.total}"
    elif t.goodput < win.goodput:
        why = f"the same {t.total} devices, less goodput: {t.goodput:.4g} against {win.goodput:.4g} req/s"
    else:
        why = f"the same {t.total} devices, higher ITL: {_ms(t.itl)} against {_ms(win.itl)}"
    fig = t.fig
    nums = tuple((n, v) for n, v in (("itl", fig.itl), ("ttft", fig.ttft), ("goodput", fig.goodput)) if v is not None)
    return Option(_label(t), Rejection(None, why, nums, cause="slo"), nums)


def _label(t: layouts.Tried) -> str:
    return layout_words(t.plan)


def _ms(seconds: float) -> str:
    return "-" if math.isinf(seconds) else f"{seconds * 1e3:.4g} ms"


def _service(sc: Scenario, at: Callable[[Scenario], Plan]) -> tuple[Plan, service.LoadFigures, load.Load]:
    """The settled plan of a request workload, its service figures with the goodput, and its load on the bound
    step (--slo-on bound checks the SLOs on it; a missed SLO prints it beside the expected figure)."""
    p, fig = _settle(sc, at)
    return p, service.with_goodput(p, fig), service.solve(p, "bound")[0]


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
