"""One batch plan, step by step (docs/planner.md): R1 map the regime of the uncompressed deployment; build the
candidate space; evaluate every candidate (search.evaluate); drop what breaks a rule (R3–R7) or does not fit;
choose by the objective; lay out the chosen candidate's figures, tier and what it misses; record every
decision. `candidates()` is the same search without the choice (kvplan.planner.pareto reads it)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Optional, cast

import attrs
import numpy as np

from kvplan.base.evidence import derived
from kvplan.base.records import record
from kvplan.catalog import DTYPES, settings
from kvplan.catalog.engines import kv_width
from kvplan.model import memory, pools
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors
from kvplan.model.pools.query import Sizing
from kvplan.model.scenario import Scenario
from kvplan.model.tiering import DEFAULT_PREFILL_EFFICIENCY
from kvplan.planner import search
from kvplan.planner.decisions import build_decisions
from kvplan.planner.figures import (
    Map0,
    assumptions_of,
    byte_factors,
    engine_pool_figures,
    map_after,
    map_before,
    metrics_of,
    regime_map,
    tier_for,
)
from kvplan.planner.plan import Plan, Rejection
from kvplan.planner.rules import RULES, Rule, SearchView
from kvplan.planner.search import Evaluated, Space
from kvplan.planner.space import (
    DEFAULT_MIN_GAIN,
    DEFAULT_RESERVE,
    Found,
    Setup,
    factors_for,
    reserve_for,
    runnable_dtypes,
    scalar,
    search_space,
    setup_for,
    slos,
)
from kvplan.planner.suggest import Knobs, Planner, Replans, ReplansSpent, unsearched
from kvplan.planner.unmet import no_fit, no_layout, slo_reason, unmet_constraints

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt


@record
class Filtered:
    """The candidates left after the rules, fit and the SLOs."""

    feasible: list[int]      # fit, pass every rule and meet the SLOs
    fitting: list[int]       # fit and pass every rule
    yielded: frozenset[str]  # the rules that gave way to capacity (Rule.yields)
    bound: frozenset[int]    # removed by a binding rule (its rejection's `rule`), whatever else: never the closest plan


def plan_batch(sc: Scenario, *, reserve: float = DEFAULT_RESERVE, min_gain: float = DEFAULT_MIN_GAIN,
                eta: float = DEFAULT_PREFILL_EFFICIENCY, activation_reserve: Optional[float] = None,
                runtime_reserve: Optional[float] = None, suggest: bool = True,
                rules: Mapping[str, Rule] = RULES, replans: Optional[Replans] = None,
                planner: Planner, sizing: Sizing = "fill") -> Plan:
    """Plan one scenario at its batch. Never raises for a deployment that does not fit: the plan says so.
    The reserves (kvplan.model.memory.Reserves) are the ones every backend's accounting uses for this plan.
    With `suggest`, each unmet constraint carries changes that would meet it, each verified by
    planning the changed scenario (which is planned with suggest=False). `rules` is the registry
    the search filters by (kvplan.planner.rules.with_rules adds to it). A plan made with `replans` and
    without `suggest` verifies a suggestion: it takes one of them (kvplan.planner.entry.plan). `planner` plans
    the changed scenarios that verify suggestions (entry.plan, handed down: it calls this module). `sizing` is how
    the engine's target will be sized (`kvplan emit --sizing`), which its own pool formula reads."""
    if replans is not None and not suggest:
        replans.take()
    rf.check_batch_context(sc.batch, sc.context)
    reserve = reserve_for(sc, reserve)
    reserves = memory.Reserves(activation=activation_reserve, runtime=runtime_reserve, fraction=reserve)
    setup = attrs.evolve(setup_for(sc, reserves), sizing=sizing)
    map0 = regime_map(sc)                                             # R1
    found = search_space(sc)                                          # space
    ev = _evaluate(sc, setup, found)                                   # evaluate
    overruled = _overruled(sc, setup, rules, min_gain)
    kept = _apply_rules(sc, ev, found.space, found.why, rules, found.layout_gap, overruled)  # rules
    best = _choose(sc, ev, kept, min_gain)                             # choose
    knobs = Knobs(reserve, min_gain, eta, activation_reserve, runtime_reserve, setup.reserved, planner,
                   replans=replans, sizing=sizing)
    spent = suggest and replans is not None and replans.used >= replans.size
    if not spent:
        try:
            p = _outcome(sc, setup, map0, ev, best, found, kept, knobs, suggest)  # tier, maps, unmet
        except ReplansSpent:
            spent = True
    if spent:
        p = _outcome(sc, setup, map0, ev, best, found, kept, knobs, False)
        p = attrs.evolve(p, unmet=tuple(unsearched(sc, u, cast(Replans, replans)) for u in p.unmet))
    baseline_step = p.baseline.step_time.value
    given: dict[str, Optional[float]] = {"reserve": reserve, "min_gain": min_gain, "eta": eta,
                                         "activation_reserve": activation_reserve, "runtime_reserve": runtime_reserve}
    return attrs.evolve(p, decisions=build_decisions(p, ev, best, found.space, found.why, baseline_step,
                                                     yielded=kept.yielded),  # decisions
                        options=tuple((k, float(v)) for k, v in given.items() if v is not None))


def _evaluate(sc: Scenario, setup: Setup, found: Found, pool: Optional[pools.PoolSettings] = None) -> Evaluated:
    """Every candidate of the space, evaluated at once (search.evaluate) with the scenario's expected factors,
    against the engine's pool as the scenario sets it (or `pool`)."""
    return search.evaluate(sc.model, sc.device, batch=sc.batch, context=sc.context, w_p=sc.weights.width,
                           sharing=setup.sigma, frag=setup.phi, reserved=setup.reserved, space=found.space,
                           pipeline=found.pipeline, bound=sc.max_context, attention_dp=sc.attention_dp,
                           expert_parallel=sc.expert_parallel, replicas=sc.replicas, engine=sc.engine,
                           factors={d: factors_for(sc, d) for d in found.space.dtypes},
                           pool=pool or _pool(sc, setup))


def _pool(sc: Scenario, setup: Setup) -> pools.PoolSettings:
    """What the engine's own pool formula reads beyond a candidate (kvplan.model.pools): page, reserves, prefix
    caching, the pinned per-step token limit and memory fraction, and the spec's context bound."""
    return pools.PoolSettings(setup.block, setup.reserves, setup.prefix_caching,
                              sc.pinned.max_batched_tokens, sc.memory_fraction, sc.context_bound, setup.sizing)


@record
class Candidates:
    """A batch-form scenario's search as plan() makes it: every evaluated candidate, and those plan() chooses
    from (`feasible`: they pass the design rules, fit and meet the SLOs; a rule that yields to capacity has
    readmitted what it removed). Empty `feasible` with a `gap` when the engine or the model's layouts leave no
    candidate plan() could run. `block_size` and `prefix_caching` are every candidate's (R2). What
    kvplan.planner.pareto reads, so that its candidates are exactly the planner's."""

    scenario: Scenario
    evaluated: Evaluated
    feasible: tuple[int, ...]
    space: Space
    block_size: int
    prefix_caching: bool
    gap: str = ""


def candidates(sc: Scenario, *, reserve: float = DEFAULT_RESERVE, activation_reserve: Optional[float] = None,
               runtime_reserve: Optional[float] = None, rules: Mapping[str, Rule] = RULES,
               min_gain: float = DEFAULT_MIN_GAIN) -> Candidates:
    """The candidates of a batch-form scenario and those that pass every filter plan() applies (the same
    space, evaluation, rules, fit and SLO checks: docs/planner.md steps 3-5), with the reserves plan() would
    use. The choosing step (objective, minimum gain) is not applied: every feasible candidate is returned
    (`min_gain` only says, as in plan(), whether a kv_dtype or retention pin confirms the choice, _overruled)."""
    rf.check_batch_context(sc.batch, sc.context)
    reserves = memory.Reserves(activation=activation_reserve, runtime=runtime_reserve,
                               fraction=reserve_for(sc, reserve))
    setup = setup_for(sc, reserves)
    found = search_space(sc)
    ev = _evaluate(sc, setup, found)
    kept = _apply_rules(sc, ev, found.space, found.why, rules, found.layout_gap, _overruled(sc, setup, rules, min_gain))
    gap = ""
    if found.layout_gap is not None:
        gap = no_layout(sc.model, max(found.layout_gap))
    elif found.engine_gap is not None:
        gap = (f"{sc.engine} has no pipeline parallelism, and {', '.join(map(str, found.engine_gap))} devices "
               f"cannot all be tensor-parallel ranks of {sc.model.id}")
    return Candidates(sc, ev, () if gap else tuple(kept.feasible), found.space, setup.block, setup.prefix_caching,
                      gap)


def fits_at(sc: Scenario, memory_fraction: Optional[float]) -> bool:
    """Whether some candidate of the batch-form scenario fits its device and its engine's own pool at the
    engine's `memory_fraction` as the deployment sets it (search.evaluate's test: kvplan.model.memory, and
    kvplan.model.pools for an engine with a formula), before the rules and the choice, with plan()'s default
    reserves: what `kvplan import` sizes a deployment's open batch or context by, without a plan."""
    setup = setup_for(sc, memory.Reserves(fraction=reserve_for(sc, DEFAULT_RESERVE)))
    pool = attrs.evolve(_pool(sc, setup), memory_fraction=memory_fraction)
    return bool(np.any(_evaluate(sc, setup, search_space(sc), pool).fits))


def _overruled(sc: Scenario, setup: Setup, rules: Mapping[str, Rule], min_gain: float) -> frozenset[str]:
    """The rules whose filters the pins overrule (Rule.overruled_by): none for a pin that confirms what the planner
    chooses without it (the same kv_dtype or retention), so that pinning the plan's own choices gives the same plan;
    for a pin that changes the choice, each rule it overrules (the operator decided: the rule's lint reports it)."""
    keys = {k for r in rules.values() for k in r.overruled_by if sc.pinned.has(settings.pin(k))}
    if not keys:
        return frozenset()
    free = attrs.evolve(sc, pins={k: v for k, v in sc.pins.items() if k not in keys})
    found = search_space(free)
    ev = _evaluate(free, setup, found)
    best = _choose(free, ev, _apply_rules(free, ev, found.space, dict(found.why), rules, found.layout_gap),
                   min_gain)
    pin_dt, pin_r = sc.pinned.kv_dtype or "", sc.pinned.retention
    chosen = {"kv_dtype": DTYPES[pin_dt].id == str(ev.dtype[best]) if pin_dt in DTYPES else False,
              "retention": pin_r is not None and math.isclose(pin_r, float(ev.retention[best]))}
    changed = {k for k in keys if not chosen.get(k, False)}
    return frozenset(r.id for r in rules.values() if changed & set(r.overruled_by))


def _apply_rules(sc: Scenario, ev: Evaluated, space: Space, why: dict[str, str], rules: Mapping[str, Rule],
                 layout_gap: Optional[tuple[int, ...]], overruled: frozenset[str] = frozenset()) -> Filtered:
    """Ask each rule's filter about each candidate (the first rejection names it), then fit, which
    takes precedence as the reason given, then the SLOs; with a layout gap every candidate is
    rejected for it. When nothing is left, a rule that yields to capacity readmits what it removed
    that fits and keeps every token. The `overruled` rules' filters are not asked (_overruled). Records each
    rejection in `ev.reject` and each rule's note in `why`."""
    # the narrowest the budget admits, pinned or not: a pin of the plan's own dtype leaves R4 as it was
    narrowest = min((DTYPES[x].width for x in (*runnable_dtypes(sc), *space.dtypes)), default=2.0)
    view = SearchView(sc, ev, scalar(rf.weight_bytes_read(sc.model, sc.batch, sc.weights.width)), narrowest)
    filters = [r for r in rules.values() if r.reject is not None and r.id not in overruled]
    for r in rules.values():
        said = r.note(view) if r.note is not None else None
        if said is not None:
            why[r.id] = said
    binding = {r.id for r in rules.values() if r.yields is None}
    ok, bound = _rejections(sc, ev, view, filters, binding, layout_gap)
    yielded = _yield_to_capacity(ev, ok, rules, why) if not ok.any() else frozenset()
    want = slos(sc)
    meets = np.array([search.slo_violation(ev, i, want) <= 1.0 + 1e-12 for i in range(len(ev))])
    for i in range(len(ev)):
        if ok[i] and not meets[i]:
            ev.reject[i] = Rejection(None, slo_reason(ev, i, want), cause="slo")
    return Filtered([i for i in range(len(ev)) if ok[i] and meets[i]], [i for i in range(len(ev)) if ok[i]],
                     yielded, frozenset(bound))


def _rejections(sc: Scenario, ev: Evaluated, view: SearchView, filters: list[Rule], binding: set[str],
                layout_gap: Optional[tuple[int, ...]]) -> tuple[npt.NDArray[np.bool_], set[int]]:
    """Which candidates the rules `filters` and fit leave, each other one's rejection recorded in `ev.reject`, and
    those a binding rule removed (whatever else: never the closest plan)."""
    ok = np.ones(len(ev), dtype=bool)
    bound: set[int] = set()
    for i in range(len(ev)):
        if layout_gap is not None:  # no split of the model takes the count: no rule or fit is asked
            ev.reject[i], ok[i] = Rejection(None, no_layout(sc.model, int(ev.n[i])), cause="layout"), False
            continue
        rejection = _first_rejection(view, filters, i)
        if rejection is not None and rejection.rule in binding:
            bound.add(i)
        if not ev.fits[i]:  # not fitting decides it before any design rule: the reason given is that one
            rejection = Rejection(None, no_fit(sc.model, ev, i), cause="fit")
        ev.reject[i] = rejection
        ok[i] = rejection is None
    return ok, bound


def _first_rejection(view: SearchView, filters: list[Rule], i: int) -> Optional[Rejection]:
    """The first rule's rejection of candidate i, in the registry's order; None when every rule lets it stay."""
    return next((x for x in (r.reject(view, i) for r in filters if r.reject is not None) if x is not None), None)


def _yield_to_capacity(ev: Evaluated, ok: npt.NDArray[np.bool_], rules: Mapping[str, Rule],
                       why: dict[str, str]) -> frozenset[str]:
    """Nothing is left: each rule that yields to capacity readmits what it removed that fits and
    keeps every token (into `ok`); the rules that did."""
    # Below s* yet above s_cap with no more devices allowed: R6 cannot shard, so R3 yields to
    # capacity and the least lossy width that fits is admitted (a capacity decision, not speed).
    yielded: set[str] = set()
    for r in rules.values():
        if r.yields is None:
            continue
        rescued = [i for i in range(len(ev)) if _rejected_by(ev, i, r.id) and ev.fits[i]
                   and ev.retention[i] >= 1.0]
        for i in rescued:
            ok[i], ev.reject[i] = True, None
        if rescued:
            yielded.add(r.id)
            why[r.id] = r.yields
    return frozenset(yielded)


def _rejected_by(ev: Evaluated, i: int, rule: str) -> bool:
    x = ev.reject[i]
    return x is not None and x.rule == rule


def _choose(sc: Scenario, ev: Evaluated, kept: Filtered, min_gain: float) -> int:
    """The chosen candidate by the objective, and why each other one lost (into `ev.reject`). `cheapest` at a
    declared rate is the least $/hour, the fewest devices: every plan that carries the rate serves the same tokens
    (docs/planner.md)."""
    want = slos(sc)
    objective = "fewest-devices" if sc.objective == "cheapest" and sc.requests else sc.objective
    if kept.yielded:
        pool = kept.feasible or kept.fitting
        best = min(pool, key=lambda i: (search.slo_violation(ev, i, want), ev.lossy[i], ev.n[i],
                                        ev.step_exp[i], i))
    elif kept.feasible:
        best = search.objective_order(ev, kept.feasible, objective)[0]
        if objective != "most-headroom":
            best = search.relax_to_less_lossy(ev, best, kept.feasible, min_gain)
    elif kept.fitting:
        best = min(kept.fitting, key=lambda i: (search.slo_violation(ev, i, want),
                                                *search.objective_order(ev, [i], objective)))
    else:
        # nothing fits: the closest candidate, among those no binding rule removed (a rule that
        # yields to capacity, R3, does not bind here); read from each rejection's rule before fit took over
        rule_ok = [i for i in range(len(ev)) if i not in kept.bound] or list(range(len(ev)))
        best = min(rule_ok, key=lambda i: (ev.n[i] * (ev.need_dev[i] - ev.usable_dev[i]), ev.lossy[i], i))
    for i in range(len(ev)):
        if i != best and ev.reject[i] is None:
            ev.reject[i] = search.compare_reason(ev, i, best, objective)
    return best


def _outcome(sc: Scenario, setup: Setup, map0: Map0, ev: Evaluated, best: int, found: Found, kept: Filtered,
             knobs: Knobs, suggest: bool) -> Plan:
    """The plan of the chosen candidate without its decisions: metrics, what is unmet, the tier,
    the regime map re-evaluated (R8), the byte factors and the assumptions."""
    m, d, w_p = sc.model, sc.device, sc.weights.width
    b, s = sc.batch, sc.context
    kv = DTYPES[str(ev.dtype[best])]
    r, n, tp, placement = float(ev.retention[best]), int(ev.n[best]), int(ev.tp[best]), str(ev.placement[best])
    factors = KvFactors(retention=r, sharing=setup.sigma, frag=setup.phi)
    w_kv = kv_width(sc.engine, kv.id, m)  # the engine's bytes per value, scales included
    cfg = rf.Config(m, d, n_devices=n, tp=tp, w_p=w_p, w_kv=w_kv, factors=factors, placement=placement,
                    reserved=setup.reserved, attention_dp=sc.attention_dp, expert_parallel=sc.expert_parallel)
    base = rf.Config(m, d, n_devices=n, tp=tp, w_p=w_p, w_kv=2.0, placement="striped", reserved=setup.reserved,
                     attention_dp=sc.attention_dp, expert_parallel=sc.expert_parallel)
    baseline = metrics_of(base, b, s, setup.reserves, sc.replicas, factors_for(sc, "bf16"))
    f_plan = factors_for(sc, kv.id)
    laid = engine_pool_figures(metrics_of(cfg, b, s, setup.reserves, sc.replicas, f_plan),
                               ev.pools[best] if ev.pools else None, sc.engine, setup.reserved, d.memory)
    metrics = laid.with_speedup(derived(baseline.step_time.value / laid.step_time.value, "x",
                                        "baseline step time / plan step time (memory-bound, docs/model.md §6)"))
    unmet = unmet_constraints(sc, ev, best, found, setup, knobs, suggest)
    tier = tier_for(sc, w_kv, factors, tp, knobs.eta)                 # tier
    s_star1 = scalar(rf.s_star(cfg, b))
    s_cap1 = scalar(rf.s_cap(cfg, b, setup.block))
    return Plan(
        scenario=sc, kv_dtype=kv, retention=r, block_size=setup.block, prefix_caching=setup.prefix_caching,
        sharing=setup.sigma, placement=placement, n_devices=n, tp=tp, pp=n // tp, tier=tier,
        regime_before=map0.regime, regime_after=str(rf.regime(s, s_star1, s_cap1)),
        map_before=map_before(sc, map0),
        map_after=map_after(sc, cfg, w_kv, factors, s_star1, s_cap1, setup.block),
        metrics=metrics, baseline=baseline,
        byte_factors=byte_factors(w_kv, r, s, setup), decisions=(), unmet=tuple(unmet),
        assumptions=assumptions_of(sc, knobs, setup.reserves, tier, setup.sigma),
        candidates_evaluated=len(ev), feasible=bool(kept.feasible), reserves=setup.reserves,
        expected_factors=f_plan.items(),
    )
