"""The planner's entry points: plan() (a batch plan, or a request workload's service plan), the plans of a
checked file, and the plan of a scenario under another engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Optional, TypedDict, cast

import attrs

from kvplan.base.errors import KvplanError
from kvplan.catalog import suggest
from kvplan.catalog.engines import concrete, get_engine
from kvplan.lang import CheckResult
from kvplan.model.pools.query import Sizing
from kvplan.model.scenario import DeviceCount, Scenario
from kvplan.model.tiering import DEFAULT_PREFILL_EFFICIENCY
from kvplan.planner import cost, disagg, intervals, layouts, speculative
from kvplan.planner.batch import plan_batch
from kvplan.planner.plan import Plan
from kvplan.planner.rules import RULES, Rule
from kvplan.planner.serving import plan_service
from kvplan.planner.space import DEFAULT_MIN_GAIN, DEFAULT_RESERVE
from kvplan.planner.suggest import Knobs, Replans

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    from typing_extensions import Unpack


class Overrides(TypedDict, total=False):
    """The planner's assumed defaults a user overrides (`kvplan advise --reserve …`), by plan()'s names."""

    reserve: float
    min_gain: float
    eta: float
    activation_reserve: Optional[float]
    runtime_reserve: Optional[float]


def plan(sc: Scenario, *, reserve: float = DEFAULT_RESERVE, min_gain: float = DEFAULT_MIN_GAIN,
         eta: float = DEFAULT_PREFILL_EFFICIENCY, activation_reserve: Optional[float] = None,
         runtime_reserve: Optional[float] = None, suggest: bool = True,
         rules: Mapping[str, Rule] = RULES, replans: Optional[Replans] = None, sizing: Sizing = "fill") -> Plan:
    """Plan one scenario: the batch form as it is written; a request workload (`rate = 20/s`) at the batch the
    load model derives from the rate on the plan's own layout, planned again until that batch settles (at most
    service.MAX_ROUNDS plans), with its service figures (docs/service.md).

    With `replans`, the plans that verify suggestions come out of that budget (one per batch plan); when it
    runs out during this scenario's search, every unmet constraint of the scenario carries one note instead
    (`unsearched`) and no suggestion: what was found before is dropped with the rest, since a search cut
    short can name a change that is not the smallest. `sizing` is how the engine's target will be sized
    (`kvplan emit --sizing`): an engine's own pool formula fits a candidate as that file sizes it."""
    def at(s: Scenario) -> Plan:
        return plan_batch(s, reserve=reserve, min_gain=min_gain, eta=eta, activation_reserve=activation_reserve,
                           runtime_reserve=runtime_reserve, suggest=suggest, rules=rules, replans=replans,
                           planner=plan, sizing=sizing)

    if not sc.requests:
        return intervals.attach(cost.priced(speculative.decide(_replicated_batch(sc, at))))
    knobs = Knobs(reserve, min_gain, eta, activation_reserve, runtime_reserve, 0.0, plan, replans=replans,
                  sizing=sizing)
    if sc.serving != "aggregated" and not sc.pool:  # separate prefill and decode pools (kvplan.planner.disagg)
        return disagg.plan_serving(sc, lambda s: intervals.attach(plan_service(s, at, knobs, suggest)))
    return intervals.attach(speculative.decide(plan_service(sc, at, knobs, suggest)))


def _replicated_batch(sc: Scenario, at: Callable[[Scenario], Plan]) -> Plan:
    """A batch plan of `pin replicas = r` with a device count: the count is the total over the replicas
    (kvplan.planner.layouts), so each replica is planned on 1/r of it (at least one device) and the plan keeps the
    spec's count."""
    r = sc.replicas
    if r == 1 or (sc.pinned.devices is None and sc.devices.mode == "auto"):
        return at(sc)
    per = max(1, layouts.bound_total(sc) // r)
    one = layouts.per_replica(sc, r, per)
    if sc.devices.mode == "max" and sc.pinned.devices is None:
        one = attrs.evolve(one, devices=DeviceCount("max", per))
    q = at(one)
    return attrs.evolve(q, scenario=attrs.evolve(q.scenario, devices=sc.devices, pins=sc.pins))


def for_engine(p: Plan, engine: str, suggest: bool = True, sizing: Sizing = "fill") -> Plan:
    """The plan of `p`'s scenario made under `engine`'s capabilities on its device for its model (the engine's
    record: KV dtypes and their conditions, pages, eviction, pipeline stages), with the options `p` was made
    with: `p` itself when it was made for that engine, else one of `p.engines`, else planned now (with its
    suggestions searched unless not `suggest`). What an emit target other than the plan's engine is written
    from (docs/cli-emit.md). The plans made with the spec are fill mode's; `sizing = "exact"` plans anew, as the
    exact file is sized (kvplan.model.pools.query.Sizing)."""
    sc = p.scenario
    if sizing == "fill":
        if sc.engine == engine:
            return p
        for q in p.engines:
            if q.scenario.engine == engine:
                return q
    elif sc.engine == engine:
        return plan(sc, suggest=suggest, sizing=sizing, **cast(Overrides, dict(p.options)))
    get_engine(engine)  # an unknown engine is a catalog error, not a plan
    # The scenario's assumptions stay the spec's (`engine = any` by default): a plan the engine's record leaves
    # as it was has the spec plan's digest, and `spec_engine` says for which engine it was made.
    own = plan(attrs.evolve(sc, engine=engine), suggest=suggest, sizing=sizing, **cast(Overrides, dict(p.options)))
    return attrs.evolve(own, spec_engine=p.spec_engine or sc.engine)


def with_engines(p: Plan) -> Plan:
    """`engine = any`: `p` with the plan made for each engine (kvplan.catalog.engines.concrete) beside it, so that
    `kvplan advise` shows what `kvplan emit` writes for each; any other plan as it is."""
    if p.scenario.engine != "any" or p.engines:
        return p
    return attrs.evolve(p, engines=tuple(for_engine(p, e) for e in concrete()))


def plans_for(result: CheckResult, scenario: Optional[str] = None, **overrides: Unpack[Overrides]) -> list[Plan]:
    """Plan every scenario of a checked spec file (or the one named). The caller has
    already refused files with errors; an unknown scenario name is a user error."""
    return [plan(sc, **overrides) for sc in scenarios_for(result, scenario)]


def scenarios_for(result: CheckResult, scenario: Optional[str] = None) -> list[Scenario]:
    """The scenarios of a checked spec file, or the one named (by its expanded or deployment name); a file
    without a deployment and an unknown name are user errors."""
    scenarios = list(result.scenarios)
    if not scenarios:
        raise KvplanError(f"{result.path} declares no deployment: there is nothing to plan",
                          help='add a `deployment "NAME" { ... }` block; examples/w2-batch32.kvp is one to copy')
    if scenario is not None:
        names = {sc.name: sc for sc in scenarios} | {sc.deployment: sc for sc in scenarios}
        if scenario not in names:
            raise KvplanError(f"{result.path}: no scenario '{scenario}'", help=suggest(scenario, names))
        scenarios = [sc for sc in scenarios if scenario in (sc.name, sc.deployment)]
    return scenarios
