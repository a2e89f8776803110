"""The planner: a scenario in, a justified plan out (SPEC §8 applied to the regime map).

    plan(scenario) -> Plan

Steps: R1 map the regime of the uncompressed deployment; build the candidate
space from the quality budget, the engine and the pins; evaluate every
candidate (search.evaluate); drop what breaks a rule (R3–R7) or does not fit;
choose by the objective; decide tiering from the reuse economics; re-evaluate
the map for the chosen plan (R8); record every decision with its numbers,
evidence and the options turned down.
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, TypedDict, cast

import attrs
import numpy as np

from kvplan.base.errors import KvplanError
from kvplan.base.evidence import Value, assumed, derived
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import DTYPE_ORDER, DTYPES, Model, get_link, suggest
from kvplan.catalog.engines import concrete, default_block_for, get_engine, kv_dtypes_for, kv_width
from kvplan.catalog.quality import BUDGETS, admissible
from kvplan.lang import CheckResult
from kvplan.model import expected as ex
from kvplan.model import load, memory
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, fragmentation, kappa, kv_bytes_per_seq, sharing_factor
from kvplan.model.regime import cap_value, devices_for_weights, over_cap_value, weights_unheld_note, widest_tp
from kvplan.model.scenario import DeviceCount, Pin, PinValue, Scenario
from kvplan.model.tiering import DEFAULT_PREFILL_EFFICIENCY, fetch_time, prefill_time
from kvplan.planner import cost, search, service
from kvplan.planner.decisions import build_decisions
from kvplan.planner.plan import (
    ByteFactors,
    Change,
    MapNumbers,
    Metrics,
    Option,
    Plan,
    Rejection,
    Suggestion,
    TierPlan,
    Unmet,
)
from kvplan.planner.rules import RULES, Rule, SearchView
from kvplan.planner.search import Evaluated, Slos, Space

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt
    from typing_extensions import Unpack

#: Fraction of each device's memory kept for activations, CUDA graphs and the runtime (assumed:
#: vLLM's default --gpu-memory-utilization of 0.92 leaves the same 8%); kvplan.model.memory holds it.
DEFAULT_RESERVE = memory.DEFAULT_RESERVE
#: A lossier option must shorten the step by at least this factor to be preferred (assumed).
DEFAULT_MIN_GAIN = 1.10
#: The largest device count a suggestion searches when nothing allowed fits.
SUGGESTION_MAX_DEVICES = 1024


#: The batch plans `kvplan lint` makes to verify the suggestions of one file (Replans): a scenario's search
#: costs about ten to a few tens; at 1.5 to 2.5 ms apiece the budget is 1.5 to 2.5 s of one core
#: (bench/bench_lint.py), beside the scenarios' own plans.
REPLANS_PER_FILE = 1_000


class Replans:
    """What is left of a budget of plans made to verify suggestions, shared by the plans of one file.

    Mutable on purpose: `kvplan lint` hands one to every scenario of a file in the file's order, so the
    suggestion search of the whole file is bounded (a scenario costs tens of them; a file holds up to
    kvplan.base.limits.MAX_FILE_SCENARIOS). Each batch plan made to verify a suggestion takes one; a
    scenario whose search needs one more than is left gets no suggestions and says so (plan() below),
    never a partial search."""

    __slots__ = ("size", "used")

    def __init__(self, size: int = REPLANS_PER_FILE) -> None:
        self.size = size
        self.used = 0

    def take(self) -> None:
        if self.used >= self.size:
            raise _ReplansSpent
        self.used += 1


class _ReplansSpent(Exception):
    """Raised out of a suggestion search when its file's Replans are spent; plan() catches it."""


def _f(x: npt.ArrayLike) -> float:
    return float(np.asarray(x))


def _pin(sc: Scenario, key: str) -> Optional[PinValue]:
    p = sc.pins.get(key)
    return None if p is None else p.value


def admissible_dtypes(budget: str, engine: str) -> tuple[str, ...]:
    """KV dtypes the budget admits (LANGUAGE.md) that the engine can store (on some device, for some model:
    `_space` narrows them to the scenario's with the record's `kv_requires`)."""

    allowed = admissible(budget, False).kv_dtypes
    eng = get_engine(engine)
    return tuple(d for d in DTYPE_ORDER if d in allowed and d in eng.kv_dtypes and d != "fp16")


def eviction_admissible(sc: Scenario) -> bool:
    return admissible(sc.budget, sc.eviction_allowed).eviction and get_engine(sc.engine).eviction


def _runnable_dtypes(sc: Scenario) -> tuple[str, ...]:
    """The KV dtypes the budget admits that the engine stores on this device for this model (FP4 only with FP4
    hardware; the record's conditions), before a kv_dtype pin."""
    runs = kv_dtypes_for(get_engine(sc.engine), sc.device, sc.model)
    return tuple(x for x in admissible_dtypes(sc.budget, sc.engine) if x in runs)


def _space(sc: Scenario) -> tuple[Space, dict[str, str]]:
    """Candidate axes after pins, budget and engine; `why` says what removed an option.
    R3 is applied per candidate afterwards: whether a layout is below s* depends on its
    tensor-parallel replication."""
    why: dict[str, str] = {}
    dtypes = _runnable_dtypes(sc)
    pin_dt = _pin(sc, "kv_dtype")
    if pin_dt is not None:
        dtypes = (DTYPES[str(pin_dt)].id if str(pin_dt) in DTYPES else str(pin_dt),)
    retentions: tuple[float, ...] = (1.0,)
    if eviction_admissible(sc):
        retentions = (1.0,) + tuple(r for r in search.EVICTION_RETENTIONS if r >= max(0.5, sc.min_retention))
        if sc.min_retention not in retentions and 0.5 <= sc.min_retention < 1:
            retentions = retentions + (float(sc.min_retention),)
    pin_r = _pin(sc, "retention")
    if pin_r is not None:
        retentions = (float(pin_r),)
    pin_n = _pin(sc, "devices")
    if pin_n is not None:
        counts: tuple[int, ...] = (int(pin_n),)
    elif sc.devices.mode == "fixed":
        counts = (sc.devices.n,)
    else:
        cap = sc.devices.n
        counts = tuple(sorted({c for c in search.AUTO_DEVICE_COUNTS if c <= cap}
                              | ({cap} if sc.devices.mode == "max" else set())))
    pin_pl = _pin(sc, "placement") or (sc.placement if sc.placement != "auto" else None)
    if sc.device.partitions == 1:
        placements: tuple[str, ...] = ("striped",)
    elif pin_pl is not None:
        placements = (str(pin_pl),)
    else:
        placements = ("striped", "affinity")
    tp, pp = _pin(sc, "tensor_parallel"), _pin(sc, "pipeline_parallel")
    layout = Space(tuple(dtypes), retentions, counts, placements, None if tp is None else int(tp),
                   None if pp is None else int(pp))
    return attrs.evolve(layout, counts=layout.layout_counts(counts)), why


def _sharing(sc: Scenario, prefix_caching: bool) -> float:
    if not prefix_caching or sc.prefix <= 0 or sc.fanout <= 1:
        return 1.0
    n = min(sc.fanout, sc.batch)
    return _f(sharing_factor(n, sc.context, sc.prefix)) if n > 1 else 1.0


@record
class _Setup:
    """What every step of one plan reads: the reserves, the engine and the lossless domains (R2)."""

    reserves: memory.Reserves
    reserved: float          # bytes per device the reserves keep free
    block: int
    prefix_caching: bool
    sigma: float
    phi: float


@record
class _Map0:
    """R1: the regime map of the uncompressed deployment, on n0 devices (tp0 tensor-parallel)."""

    n0: int
    tp0: int
    base: rf.Config
    s_star: float
    s_cap: float
    regime: str
    n_fit: Optional[int]     # the fewest devices that hold the weights; None when no count up to the limit does


@record
class _Filtered:
    """The candidates left after the rules, fit and the SLOs."""

    feasible: list[int]      # fit, pass every rule and meet the SLOs
    fitting: list[int]       # fit and pass every rule
    yielded: frozenset[str]  # the rules that gave way to capacity (Rule.yields)
    bound: frozenset[int]    # removed by a binding rule (its rejection's `rule`), whatever else: never the closest plan


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
         rules: Mapping[str, Rule] = RULES, replans: Optional[Replans] = None) -> Plan:
    """Plan one scenario: the batch form as it is written; a request workload (`rate = 20/s`) at the batch the
    load model derives from the rate on the plan's own layout, planned again until that batch settles (at most
    service.MAX_ROUNDS plans), with its service figures (docs/service.md).

    With `replans`, the plans that verify suggestions come out of that budget (one per batch plan); when it
    runs out during this scenario's search, every unmet constraint of the scenario carries one note instead
    (`unsearched`) and no suggestion: what was found before is dropped with the rest, since a search cut
    short can name a change that is not the smallest."""
    def at(s: Scenario) -> Plan:
        return _plan_batch(s, reserve=reserve, min_gain=min_gain, eta=eta, activation_reserve=activation_reserve,
                           runtime_reserve=runtime_reserve, suggest=suggest, rules=rules, replans=replans)

    if sc.rate is None:
        return cost.priced(at(sc))
    knobs = _Knobs(reserve, min_gain, eta, activation_reserve, runtime_reserve, 0.0, replans=replans)
    return _plan_service(sc, at, knobs, suggest)


def _plan_service(sc: Scenario, at: Callable[[Scenario], Plan], knobs: _Knobs, suggest: bool) -> Plan:
    """A request workload's plan (docs/service.md): settled at the load model's batch, with its goodput; with
    `devices = auto` or `<= N` (no devices pin), planned again on each larger count of search.AUTO_DEVICE_COUNTS
    until the declared rate has a steady state and meets the service SLOs: the fewest devices that do, the
    counts below it recorded as rejected options of the devices decision. When none does, the fewest with a
    steady state is kept (else the fewest) and what it misses is unmet, with suggestions verified by planning."""
    tried = [_service(sc, at)]
    n0 = tried[0][0].n_devices
    if "devices" not in sc.pins and sc.devices.mode != "fixed":
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
        p, fig, bound = spread[0]
        served = pick
        rejected = [_rejected_count(*t) for t in tried[:pick] if t[0].n_devices != p.n_devices] + [
            _replica_option(tried[pick], p)] + list(spread[1])
    short = service.unmet(fig)
    slo_short = service.service_unmet(sc, fig, bound, ())
    try:
        if short is not None and suggest:  # past saturation: what would give the rate a steady state, each planned
            said = _service_suggestions(sc, knobs, p, fig, {"saturation"})
            short = attrs.evolve(short, suggestions=tuple(t for t, _ in said), changes=tuple(c for _, c in said))
        if slo_short and suggest:
            sugg = _service_suggestions(sc, knobs, p, fig, {u.constraint for u in slo_short})
            slo_short = service.service_unmet(sc, fig, bound, sugg)
    except _ReplansSpent:
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
    if "devices" in sc.pins or "replicas" in sc.pins or sc.devices.mode == "fixed" or get_engine(
            sc.engine).data_parallel is None:
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
            pins = _with_pin(sc, "replicas", float(r))
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


#: What a plan at a device count must not miss for `devices = auto` to stop there (besides the service SLOs).
_LAYOUT_UNMET = ("fits", "layout", "engine")


def _fits(p: Plan) -> bool:
    """Whether the plan fits on a layout its engine runs (nothing of _LAYOUT_UNMET is unmet)."""
    return not any(u.constraint in _LAYOUT_UNMET for u in p.unmet)


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
        why = "; ".join(u.message for u in p.unmet if u.constraint in _LAYOUT_UNMET)
    nums = tuple((k, v) for k, v in (("rate", fig.rate), ("saturation_rate", fig.saturation_rate),
                                     ("itl", fig.itl), ("ttft", fig.ttft), ("goodput", fig.goodput)) if v is not None)
    return Option(f"{p.n_devices} × {sc.device.id} (tp {p.tp})", Rejection(None, why, nums, cause="slo"), nums)


def _service_suggestions(sc: Scenario, knobs: _Knobs, p: Plan, fig: service.LoadFigures, missed: set[str]
                         ) -> tuple[tuple[str, tuple[Change, ...]], ...]:
    """Changes that make a request workload meet its service SLOs, each verified by planning it: more devices,
    replicas (pin replicas: the rate is split over them), or a declared rate at the goodput."""
    out: list[tuple[str, tuple[Change, ...]]] = []
    dev = _device_suggestion(sc, knobs, p.n_devices, "meets the service SLOs")
    if dev is not None:
        out.append((dev.text, dev.changes))
    for r in (2, 4, 8):
        if r <= sc.replicas:
            continue
        if _replan(sc, knobs, _Rescope(pins=_with_pin(sc, "replicas", float(r)))) is not None:
            out.append((f"pin replicas = {r} (each replica serves 1/{r} of the rate on {p.n_devices} × "
                        f"{sc.device.id})", (Change("pin.replicas", "=", str(r)),)))
            break
    if "saturation" in missed and (fig.goodput is None or fig.goodput.value <= 0):  # no latency SLO: below it
        lower = _round_down(fig.saturation_rate.value * (1 - 1e-9))
        ok = lower > 0 and _replan(attrs.evolve(sc, rate=lower), knobs, _Rescope()) is not None
        if ok and (sc.slo_rate is None or lower >= sc.slo_rate):
            out.append((f"workload rate = {lower:g}/s (below the saturation rate {fig.saturation_rate.human}, "
                        "rounded down)", (Change("workload.rate", "=", f"{lower:g}/s"),)))
    if fig.goodput is not None and fig.goodput.value > 0 and missed & {"ttft", "itl", "saturation"}:
        lower = _round_down(fig.goodput.value)
        ok = lower > 0 and _replan(attrs.evolve(sc, rate=lower), knobs, _Rescope()) is not None
        if ok and (sc.slo_rate is None or lower >= sc.slo_rate):
            out.append((f"workload rate = {lower:g}/s (the plan's goodput, {fig.goodput.human}, rounded down)",
                        (Change("workload.rate", "=", f"{lower:g}/s"),)))
    return tuple(out) or (("no allowed plan meets it: allow more devices, or lower the rate", ()),)


def _round_down(x: float) -> float:
    """x rounded down to three significant digits (a rate a spec would write)."""
    if x <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.floor(x / step + 1e-9) * step


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


def _plan_batch(sc: Scenario, *, reserve: float = DEFAULT_RESERVE, min_gain: float = DEFAULT_MIN_GAIN,
                eta: float = DEFAULT_PREFILL_EFFICIENCY, activation_reserve: Optional[float] = None,
                runtime_reserve: Optional[float] = None, suggest: bool = True,
                rules: Mapping[str, Rule] = RULES, replans: Optional[Replans] = None) -> Plan:
    """Plan one scenario at its batch. Never raises for a deployment that does not fit: the plan says so.
    The reserves (kvplan.model.memory.Reserves) are the ones every backend's accounting uses for this plan.
    With `suggest`, each unmet constraint carries changes that would meet it, each verified by
    planning the changed scenario (which is planned with suggest=False). `rules` is the registry
    the search filters by (kvplan.planner.rules.with_rules adds to it). A plan made with `replans` and
    without `suggest` verifies a suggestion: it takes one of them (plan() above)."""
    if replans is not None and not suggest:
        replans.take()
    rf.check_batch_context(sc.batch, sc.context)
    reserve = _reserve_for(sc, reserve)
    reserves = memory.Reserves(activation=activation_reserve, runtime=runtime_reserve, fraction=reserve)
    setup = _setup(sc, reserves)
    map0 = _regime_map(sc)                                             # R1
    found = _search_space(sc)                                          # space
    ev = _evaluate(sc, setup, found)                                   # evaluate
    overruled = _overruled(sc, setup, rules, min_gain)
    kept = _apply_rules(sc, ev, found.space, found.why, rules, found.layout_gap, overruled)  # rules
    best = _choose(sc, ev, kept, min_gain)                             # choose
    knobs = _Knobs(reserve, min_gain, eta, activation_reserve, runtime_reserve, setup.reserved, replans=replans)
    spent = suggest and replans is not None and replans.used >= replans.size
    if not spent:
        try:
            p = _outcome(sc, setup, map0, ev, best, found, kept, knobs, suggest)  # tier, maps, unmet
        except _ReplansSpent:
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


def _reserve_for(sc: Scenario, reserve: float) -> float:
    """The reserve fraction a plan is made with: the pinned memory fraction's rest, unless --reserve was given."""
    return 1.0 - sc.memory_fraction if sc.memory_fraction is not None and reserve == DEFAULT_RESERVE else reserve


def _evaluate(sc: Scenario, setup: _Setup, found: _Found) -> Evaluated:
    """Every candidate of the space, evaluated at once (search.evaluate) with the scenario's expected factors."""
    return search.evaluate(sc.model, sc.device, batch=sc.batch, context=sc.context, w_p=sc.weights.width,
                           sharing=setup.sigma, frag=setup.phi, reserved=setup.reserved, space=found.space,
                           pipeline=found.pipeline, bound=sc.max_context, attention_dp=sc.attention_dp,
                           replicas=sc.replicas, engine=sc.engine,
                           factors={d: factors_for(sc, d) for d in found.space.dtypes})


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
                               fraction=_reserve_for(sc, reserve))
    setup = _setup(sc, reserves)
    found = _search_space(sc)
    ev = _evaluate(sc, setup, found)
    kept = _apply_rules(sc, ev, found.space, found.why, rules, found.layout_gap, _overruled(sc, setup, rules, min_gain))
    gap = ""
    if found.layout_gap is not None:
        gap = _no_layout(sc.model, max(found.layout_gap))
    elif found.engine_gap is not None:
        gap = (f"{sc.engine} has no pipeline parallelism, and {', '.join(map(str, found.engine_gap))} devices "
               f"cannot all be tensor-parallel ranks of {sc.model.id}")
    return Candidates(sc, ev, () if gap else tuple(kept.feasible), found.space, setup.block, setup.prefix_caching,
                      gap)


def factors_for(sc: Scenario, kv_dtype: str) -> ex.Factors:
    """The expected-performance factors of the scenario at a KV dtype: kvplan's defaults for its device,
    engine and scale-up link, with its calibration profile's fit laid over them (docs/expected.md)."""
    return ex.deployment_factors(sc.device, kv_dtype, sc.engine, sc.calibration)


def slos(sc: Scenario) -> Slos:
    """The scenario's SLOs on a step and the figures they are checked against (`--slo-on`, default expected).
    A request workload's ttft is the TTFT under load, checked on the service figures (_plan_service), not here."""
    return Slos(sc.slo_step_time, sc.slo_throughput, sc.slo_ttft if sc.rate is None else None, sc.slo_on)


def for_engine(p: Plan, engine: str, suggest: bool = True) -> Plan:
    """The plan of `p`'s scenario made under `engine`'s capabilities on its device for its model (the engine's
    record: KV dtypes and their conditions, pages, eviction, pipeline stages), with the options `p` was made
    with: `p` itself when it was made for that engine, else one of `p.engines`, else planned now (with its
    suggestions searched unless not `suggest`). What an emit target other than the plan's engine is written
    from (docs/cli-emit.md)."""
    sc = p.scenario
    if sc.engine == engine:
        return p
    for q in p.engines:
        if q.scenario.engine == engine:
            return q
    get_engine(engine)  # an unknown engine is a catalog error, not a plan
    # The scenario's assumptions stay the spec's (`engine = any` by default): a plan the engine's record leaves
    # as it was has the spec plan's digest, and `spec_engine` says for which engine it was made.
    own = plan(attrs.evolve(sc, engine=engine), suggest=suggest, **cast(Overrides, dict(p.options)))
    return attrs.evolve(own, spec_engine=p.spec_engine or sc.engine)


def with_engines(p: Plan) -> Plan:
    """`engine = any`: `p` with the plan made for each engine (kvplan.catalog.engines.concrete) beside it, so that
    `kvplan advise` shows what `kvplan emit` writes for each; any other plan as it is."""
    if p.scenario.engine != "any" or p.engines:
        return p
    return attrs.evolve(p, engines=tuple(for_engine(p, e) for e in concrete()))


def _setup(sc: Scenario, reserves: memory.Reserves) -> _Setup:
    pin_pc = _pin(sc, "prefix_caching")
    prefix_caching = True if pin_pc is None else bool(pin_pc)
    block = int(_pin(sc, "block_size") or default_block_for(get_engine(sc.engine), sc.device, sc.model))
    return _Setup(reserves, reserves.total(sc.device.memory), block, prefix_caching,
                  _sharing(sc, prefix_caching), _f(fragmentation(sc.context, block)))


def _regime_map(sc: Scenario) -> _Map0:
    """R1: the regime of the uncompressed deployment on one device, or, where the weights alone
    exceed one device, on the fewest devices that hold them (all tensor-parallel where the heads
    allow): a map at a device count that cannot hold the weights has no capacity crossover."""
    m, d, w_p, b = sc.model, sc.device, sc.weights.width, sc.batch
    n_fit = devices_for_weights(m, d, w_p)
    n0 = 1 if n_fit is None else n_fit  # no count up to the device limit holds them: one device, said so
    tp0 = widest_tp(m, n0)
    base1 = rf.Config(m, d, n_devices=n0, tp=tp0, w_p=w_p, w_kv=2.0, reserve=0.0, attention_dp=sc.attention_dp)
    s_star0 = _f(rf.s_star(base1, b))
    s_cap0 = _f(rf.s_cap(base1, b))
    return _Map0(n0, tp0, base1, s_star0, s_cap0, str(rf.regime(sc.context, s_star0, s_cap0)), n_fit)


@record
class _Found:
    """The candidate space and what the engine and the model's layouts left of it (_search_space)."""

    space: Space
    why: dict[str, str]      # what removed an option; the rules add their notes to it
    pipeline: bool           # whether a candidate may use pipeline stages
    engine_gap: Optional[tuple[int, ...]]  # counts the engine cannot run (no pipeline, no head split), else None
    layout_gap: Optional[tuple[int, ...]]  # counts no tensor × pipeline split takes, when none does, else None


def _search_space(sc: Scenario) -> _Found:
    """The candidate space, whether it may use pipeline stages, the device counts the engine
    cannot run (no pipeline parallelism and no count that splits the heads), else None, and the
    counts no tensor × pipeline split of the model takes when none of them does, else None."""
    space, why = _space(sc)
    pipeline, engine_gap = get_engine(sc.engine).pipeline, None
    if not pipeline:  # every device must be a tensor-parallel rank, so the count must split the heads
        splittable = tuple(c for c in space.counts if c in search.tp_options(sc.model, c))
        if splittable:
            space = attrs.evolve(space, counts=splittable)
        else:
            pipeline = True
            engine_gap = space.counts
    # A count no tensor × pipeline split of the model takes (more stages than layers, or heads the
    # ranks cannot share) is never a valid plan: searched counts without one are dropped, and a
    # fixed count without one leaves the plan unmet ("layout") rather than planned on a split that
    # cannot run.
    layout_gap: Optional[tuple[int, ...]] = None
    laid = tuple(c for c in space.counts if search.has_layout(sc.model, c))
    if laid:
        space = attrs.evolve(space, counts=laid)
    else:
        layout_gap, engine_gap = space.counts, None
    # a searched count no layout of which keeps a pinned tp or pp is no plan either (pipeline_parallel = 1 pinned
    # does not make 64 ranks of 32 query heads a candidate); when no count keeps it, the pin is evaluated as given
    kept = tuple(c for c in space.counts if space.pinned_splits(sc.model, c, pipeline))
    if kept and (space.tp is not None or space.pp is not None):
        space = attrs.evolve(space, counts=kept)
    return _Found(space, why, pipeline, engine_gap, layout_gap)


def _overruled(sc: Scenario, setup: _Setup, rules: Mapping[str, Rule], min_gain: float) -> frozenset[str]:
    """The rules whose filters the pins overrule (Rule.overruled_by): none for a pin that confirms what the planner
    chooses without it (the same kv_dtype or retention), so that pinning the plan's own choices gives the same plan;
    for a pin that changes the choice, each rule it overrules (the operator decided: the rule's lint reports it)."""
    keys = {k for r in rules.values() for k in r.overruled_by if k in sc.pins}
    if not keys:
        return frozenset()
    free = attrs.evolve(sc, pins={k: v for k, v in sc.pins.items() if k not in keys})
    found = _search_space(free)
    ev = _evaluate(free, setup, found)
    best = _choose(free, ev, _apply_rules(free, ev, found.space, dict(found.why), rules, found.layout_gap),
                   min_gain)
    pin_dt = str(sc.pins["kv_dtype"].value) if "kv_dtype" in sc.pins else ""
    chosen = {"kv_dtype": DTYPES[pin_dt].id == str(ev.dtype[best]) if pin_dt in DTYPES else False,
              "retention": "retention" in sc.pins and math.isclose(float(sc.pins["retention"].value),
                                                                    float(ev.retention[best]))}
    changed = {k for k in keys if not chosen.get(k, False)}
    return frozenset(r.id for r in rules.values() if changed & set(r.overruled_by))


def _apply_rules(sc: Scenario, ev: Evaluated, space: Space, why: dict[str, str], rules: Mapping[str, Rule],
                 layout_gap: Optional[tuple[int, ...]], overruled: frozenset[str] = frozenset()) -> _Filtered:
    """Ask each rule's filter about each candidate (the first rejection names it), then fit, which
    takes precedence as the reason given, then the SLOs; with a layout gap every candidate is
    rejected for it. When nothing is left, a rule that yields to capacity readmits what it removed
    that fits and keeps every token. The `overruled` rules' filters are not asked (_overruled). Records each
    rejection in `ev.reject` and each rule's note in `why`."""
    # the narrowest the budget admits, pinned or not: a pin of the plan's own dtype leaves R4 as it was
    narrowest = min((DTYPES[x].width for x in (*_runnable_dtypes(sc), *space.dtypes)), default=2.0)
    view = SearchView(sc, ev, _f(rf.weight_bytes_read(sc.model, sc.batch, sc.weights.width)), narrowest)
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
            ev.reject[i] = Rejection(None, _slo_reason(ev, i, want), cause="slo")
    return _Filtered([i for i in range(len(ev)) if ok[i] and meets[i]], [i for i in range(len(ev)) if ok[i]],
                     yielded, frozenset(bound))


def _rejections(sc: Scenario, ev: Evaluated, view: SearchView, filters: list[Rule], binding: set[str],
                layout_gap: Optional[tuple[int, ...]]) -> tuple[npt.NDArray[np.bool_], set[int]]:
    """Which candidates the rules `filters` and fit leave, each other one's rejection recorded in `ev.reject`, and
    those a binding rule removed (whatever else: never the closest plan)."""
    ok = np.ones(len(ev), dtype=bool)
    bound: set[int] = set()
    for i in range(len(ev)):
        if layout_gap is not None:  # no split of the model takes the count: no rule or fit is asked
            ev.reject[i], ok[i] = Rejection(None, _no_layout(sc.model, int(ev.n[i])), cause="layout"), False
            continue
        rejection = _first_rejection(view, filters, i)
        if rejection is not None and rejection.rule in binding:
            bound.add(i)
        if not ev.fits[i]:  # not fitting decides it before any design rule: the reason given is that one
            rejection = Rejection(None, _no_fit(sc.model, ev, i), cause="fit")
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


def _choose(sc: Scenario, ev: Evaluated, kept: _Filtered, min_gain: float) -> int:
    """The chosen candidate by the objective, and why each other one lost (into `ev.reject`). `cheapest` at a
    declared rate is the least $/hour, the fewest devices: every plan that carries the rate serves the same tokens
    (docs/planner.md)."""
    want = slos(sc)
    objective = "fewest-devices" if sc.objective == "cheapest" and sc.rate is not None else sc.objective
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


def _outcome(sc: Scenario, setup: _Setup, map0: _Map0, ev: Evaluated, best: int, found: _Found, kept: _Filtered,
             knobs: _Knobs, suggest: bool) -> Plan:
    """The plan of the chosen candidate without its decisions: metrics, what is unmet, the tier,
    the regime map re-evaluated (R8), the byte factors and the assumptions."""
    m, d, w_p = sc.model, sc.device, sc.weights.width
    b, s = sc.batch, sc.context
    kv = DTYPES[str(ev.dtype[best])]
    r, n, tp, placement = float(ev.retention[best]), int(ev.n[best]), int(ev.tp[best]), str(ev.placement[best])
    factors = KvFactors(retention=r, sharing=setup.sigma, frag=setup.phi)
    w_kv = kv_width(sc.engine, kv.id, m)  # the engine's bytes per value, scales included
    cfg = rf.Config(m, d, n_devices=n, tp=tp, w_p=w_p, w_kv=w_kv, factors=factors, placement=placement,
                    reserved=setup.reserved, attention_dp=sc.attention_dp)
    base = rf.Config(m, d, n_devices=n, tp=tp, w_p=w_p, w_kv=2.0, placement="striped", reserved=setup.reserved,
                     attention_dp=sc.attention_dp)
    baseline = _metrics(base, b, s, setup.reserves, sc.replicas, factors_for(sc, "bf16"))
    f_plan = factors_for(sc, kv.id)
    laid = _metrics(cfg, b, s, setup.reserves, sc.replicas, f_plan)
    metrics = laid.with_speedup(derived(baseline.step_time.value / laid.step_time.value, "x",
                                        "baseline step time / plan step time (memory-bound, docs/model.md §6)"))
    unmet = _unmet(sc, ev, best, found, setup, knobs, suggest)
    tier = _tier(sc, w_kv, factors, tp, knobs.eta)                 # tier
    s_star1 = _f(rf.s_star(cfg, b))
    s_cap1 = _f(rf.s_cap(cfg, b, setup.block))
    return Plan(
        scenario=sc, kv_dtype=kv, retention=r, block_size=setup.block, prefix_caching=setup.prefix_caching,
        sharing=setup.sigma, placement=placement, n_devices=n, tp=tp, pp=n // tp, tier=tier,
        regime_before=map0.regime, regime_after=str(rf.regime(s, s_star1, s_cap1)),
        map_before=_map_before(sc, map0),
        map_after=_map_after(sc, cfg, w_kv, factors, s_star1, s_cap1, setup.block),
        metrics=metrics, baseline=baseline,
        byte_factors=_byte_factors(w_kv, r, s, setup), decisions=(), unmet=tuple(unmet),
        assumptions=_assumptions(sc, knobs, setup.reserves, tier, setup.sigma),
        candidates_evaluated=len(ev), feasible=bool(kept.feasible), reserves=setup.reserves,
        expected_factors=f_plan.items(),
    )


def _unmet(sc: Scenario, ev: Evaluated, best: int, found: _Found, setup: _Setup, knobs: _Knobs,
           suggest: bool) -> list[Unmet]:
    """What the chosen candidate misses: a layout, fit or the SLOs, and a device count the engine
    cannot run (the gaps _search_space found)."""
    m = sc.model
    space, engine_gap, layout_gap = found.space, found.engine_gap, found.layout_gap
    unmet: list[Unmet] = []
    if layout_gap is not None:
        unmet.append(_unmet_layout(sc, knobs, layout_gap, suggest))
    elif not bool(ev.fits[best]):
        unmet.append(_unmet_fit(sc, ev, best, space, setup.sigma, setup.phi, knobs, sc.weights.width, suggest))
    else:
        unmet += _unmet_slo(sc, ev, best, slos(sc), knobs, space, suggest)
    if engine_gap is None:
        return unmet
    gap: list[Suggestion] = []
    if suggest:
        near = sorted((c for c in SUGGESTED_COUNTS if c in search.tp_options(m, c)),
                      key=lambda c: (abs(c - max(engine_gap)), c))
        for c in near:
            changes, edits = _devices_change(sc, c)
            if _replan(sc, knobs, changes) is not None:
                gap.append(Suggestion(f"devices = {c} (splits into {c} tensor-parallel ranks)", edits))
                break
        for e in concrete():  # the engines' records say which run pipeline stages
            if get_engine(e).pipeline and _replan(sc, knobs, _Rescope(engine=e)) is not None:
                gap.append(Suggestion(f"engine = {e} (it has pipeline parallelism)", (Change("engine", "=", e),)))
                break
    unmet.append(Unmet(
        "engine", f"{sc.engine} has no pipeline parallelism, and {', '.join(map(str, engine_gap))} devices cannot all "
        f"be tensor-parallel ranks of {m.id} ({m.n_q} query heads, {m.n_kv} KV heads)",
        derived(float(int(ev.n[best])), "1", "devices planned with pipeline stages the engine cannot run"),
        *_texts_and_changes(gap)))
    return unmet


def _map_before(sc: Scenario, map0: _Map0) -> MapNumbers:
    """R1's figures: κ, s*, s_cap and where the context sits, on the map's n0 devices."""
    m, d, s, n0 = sc.model, sc.device, sc.context, map0.n0
    w_held = rf.weight_bytes_held(m, sc.weights.width)
    where0 = _where0(map0)
    unheld = weights_unheld_note(m, d, sc.weights.width) if map0.n_fit is None else ""
    return MapNumbers(
        devices=derived(n0, "1", f"the fewest {d.id} whose memory N·C holds the weights P·w_p = "
                                 f"{fmt_unit(w_held, 'B')}: the map is drawn there") if n0 > 1 else
        attrs.evolve(derived(1, "1", f"none: {unheld}; the map is drawn on one device"),
                     absent="none up to the device limit") if unheld else None,
        kappa=derived(kappa(m, 2.0), "B", "κ at 16-bit (docs/model.md §2)"),
        s_star=derived(map0.s_star, "tokens", "s*(b) = P·w_p/(b·κ), 16-bit KV"
                       + (f", {where0}, KV replication per tp rank" if n0 > 1 else "") + " (docs/model.md §5)"),
        s_cap=cap_value(map0.s_cap, _cap_source(m, map0, where0), w_held, map0.base.capacity, map0.base),
        context_over_s_star=derived(s / map0.s_star if map0.s_star > 0 else 0.0, "x", "s / s*"),
        context_over_s_cap=over_cap_value(s, map0.s_cap, w_held, map0.base.capacity, map0.base),
    )


def _where0(map0: _Map0) -> str:
    n0, tp0 = map0.n0, map0.tp0
    return "one device" if n0 == 1 else (f"N = {n0} (tp {tp0} × pp {n0 // tp0}, the layout `kvplan map --devices {n0} "
                                         f"--tp {tp0}` draws), the fewest devices that hold the weights")


def _cap_source(m: Model, map0: _Map0, where0: str) -> str:
    """The R1 map's s_cap formula as the layout computes it: ρ copies over the tp ranks, and the most
    loaded device when the pipeline stages split the layers unevenly."""
    n0, pp0 = map0.n0, map0.n0 // map0.tp0
    rho0 = map0.base.kv_replication
    rho_txt = "·ρ" if rho0 != 1 else ""
    rho_note = f", ρ = {rho0:g} copies of each KV byte over the tp ranks" if rho0 != 1 else ""
    layers0 = int(memory.stage_layers(m, pp0))
    if n0 == 1:
        return "s_cap(b) = (C − P·w_p)/(b·κ), one device, 16-bit KV (docs/model.md §5)"
    if layers0 * pp0 == m.n_layers:
        return f"s_cap(b) = (N·C − P·w_p)/(b·κ{rho_txt}), {where0}{rho_note}, 16-bit KV (docs/model.md §5)"
    # the stages split the layers unevenly: the most loaded device fills first
    return (f"s_cap(b) = (C − W_d)·L·tp/(⌈L/pp⌉·b·κ{rho_txt}), W_d = P·w_p·⌈L/pp⌉/(L·tp) the weights of the "
            f"most loaded device ({layers0} of {m.n_layers} layers on one of {pp0} pipeline stages), "
            f"{where0}{rho_note}, 16-bit KV (docs/model.md §5)")


def _map_after(sc: Scenario, cfg: rf.Config, w_kv: float, factors: KvFactors, s_star1: float, s_cap1: float,
               block: int) -> MapNumbers:
    """R8: the map re-evaluated for the chosen plan."""
    m, s, n = sc.model, sc.context, cfg.n_devices
    w_held = rf.weight_bytes_held(m, sc.weights.width)
    return MapNumbers(
        kappa=derived(kappa(m, w_kv) * factors.traffic, "B", "κ·r/σ read per token after the plan"),
        s_star=derived(s_star1, "tokens", "s* with the plan's width, r and σ (docs/model.md §5, rule R8)"),
        s_cap=cap_value(s_cap1, f"s_cap on {n} devices less the reserves, {block}-token pages, "
                                "the most loaded device full (R8)", w_held, cfg.capacity, cfg),
        context_over_s_star=derived(s / s_star1 if s_star1 > 0 else 0.0, "x", "s / s*"),
        context_over_s_cap=over_cap_value(s, s_cap1, w_held, cfg.capacity, cfg),
    )


def _byte_factors(w_kv: float, r: float, s: int, setup: _Setup) -> ByteFactors:
    phi, sigma, block = setup.phi, setup.sigma, setup.block
    return ByteFactors(
        quantization=derived(w_kv / 2.0, "x", f"w_q/w_kv = {w_kv:g}/2"),
        eviction=derived(r, "x", "retention r"),
        paging=derived(1.0 + phi, "x", f"1 + φ, {block}-token pages at {s} tokens"),
        prefix_caching=derived(1.0 / sigma, "x", "1/σ"),
        combined=derived(w_kv / 2.0 * r * (1.0 + phi) / sigma, "x", "(w_q/w_kv)·r·(1+φ)/σ (docs/model.md §3)"),
    )


def _assumptions(sc: Scenario, knobs: _Knobs, reserves: memory.Reserves, tier: TierPlan,
                 sigma: float) -> tuple[Value, ...]:
    """The spec's defaults, then the planner's assumed defaults and overrides this plan used."""
    m, d, b = sc.model, sc.device, sc.batch
    reserve, min_gain, eta = knobs.reserve, knobs.min_gain, knobs.eta
    activation, runtime = reserves.resolve(d.memory)
    assumptions = tuple(sc.assumptions) + (
        assumed(reserve, "1", "memory reserve per device for activations and runtime " + (
            "(default: vLLM's default 0.92 utilization leaves 8%)" if reserve == DEFAULT_RESERVE else "(--reserve)")
            + ("" if knobs.activation_reserve is not None else "; sizes the activation reserve")),
        activation, runtime,
        assumed(min_gain, "x", "a lossier option must shorten the expected step by this factor to be preferred"
                + (" (default)" if min_gain == DEFAULT_MIN_GAIN else " (--min-gain)")),
    )
    if m.is_moe:
        assumptions += (assumed(1.0, "1", "uniform expert routing for weight traffic (docs/model.md §4)"),)
    if tier.prefill_time is not None:
        assumptions += (assumed(eta, "1", "prefill efficiency η: recompute runs at η·π "
                                + ("(docs/model.md §9 default)" if eta == DEFAULT_PREFILL_EFFICIENCY
                                   else "(--prefill-efficiency)")),)
    if sigma > 1.0:
        assumptions += (assumed(1.0, "1", "shared prefix pages read once per step (cascade attention); "
                                          "without it σ saves capacity only"),)
    if rf.beta_eff(d, "striped", b)[1]:
        assumptions += (assumed(d.bandwidth, "B/s", f"{d.id} fabric unpublished: striped bandwidth taken "
                                                     "as the aggregate, an upper bound"),)
    return assumptions


def _metrics(cfg: rf.Config, b: int, s: int, reserves: memory.Reserves, replicas: int,
             factors: ex.Factors) -> Metrics:
    t = rf.step_time(cfg, b, s)
    weights = rf.weight_bytes_held(cfg.model, cfg.w_p)
    kv = _f(rf.kv_bytes_stored(cfg, b, s))
    step = _f(t["step"])
    link = ex.link_bandwidth(cfg.device)
    step_exp = _f(ex.expected_step(cfg, b, s, factors, link)["step"])
    ttft = _f(ex.expected_ttft(cfg, s, factors.perfect(), None)["ttft"])
    ttft_exp = _f(ex.expected_ttft(cfg, s, factors, link)["ttft"])
    words = ", ".join(f"{k} = {v.human} {v.evidence.value}" for k, v in factors.items())
    per = "b / T" if replicas == 1 else f"replicas · b / T ({replicas} replicas, pin.replicas)"
    dev = memory.per_device(cfg.model, cfg.device.memory, w_p=cfg.w_p, kv_bytes=kv, tp=cfg.tp, pp=cfg.pp,
                            reserves=reserves)
    layers = int(memory.stage_layers(cfg.model, cfg.pp))
    return Metrics(
        step_time=derived(step, "s", "T_step ≥ max(M/β_eff, F/π) (docs/model.md §4)"),
        step_time_expected=derived(step_exp, "s", "max(t_fixed + L·t_layer + W/(η_w·β_eff) + K/(η_kv·β_eff) + T_comm, "
                                                  f"t_fixed + L·t_layer + F/(η_π·π)) (docs/expected.md): {words}"),
        throughput=derived(replicas * b / step, "tok/s", "b / T_step" if replicas == 1 else
                           f"replicas · b / T_step ({replicas} replicas, pin.replicas)"),
        throughput_expected=derived(replicas * b / step_exp, "tok/s", per.replace("T", "T_expected")),
        ttft=derived(ttft, "s", f"TTFT ≥ max(F_prefill/(tp·π), W/(tp·β)): one prompt of the context, {s:,} tokens "
                                "(docs/expected.md)"),
        ttft_expected=derived(ttft_exp, "s", "max(F_prefill/(tp·η_π·π), W/(tp·η_w·β)) + T_comm + t_fixed + "
                                             f"L·t_layer: one prompt of the context, {s:,} tokens (docs/expected.md): "
                                             f"{words}"),
        kv_bytes=derived(kv, "B", "b·B_kv(s)·(w_q/w_kv)·r·(1+φ)/σ (docs/model.md §3)"),
        weight_bytes=derived(weights, "B", "P·w_p" if cfg.model.weight_bytes is None
                             else "the checkpoint's weight bytes (docs/weights.md)"),
        memory_needed=derived(weights + kv, "B", "weights + KV"),
        memory_usable=derived(cfg.capacity, "B", "N·(C − reserves)"),
        device_need=derived(dev.needed, "B", f"most loaded device: weights + KV on {layers} of "
                                             f"{cfg.model.n_layers} layers, 1/{cfg.tp} of the heads, + reserves "
                                             "(kvplan.model.memory)"),
        headroom=derived(dev.headroom, "%", "1 − (weights + KV)/(C − reserves), most loaded device")
        if math.isfinite(dev.headroom) else
        attrs.evolve(derived(dev.headroom, "%", "1 − (weights + KV)/(C − reserves), most loaded device; none: "
                                                f"the reserves ({fmt_unit(dev.reserves, 'B')}) take all of the "
                                                f"device's {fmt_unit(dev.total, 'B')}"),
                     absent="none (reserves exceed device)"),
        kv_bytes_read=derived(_f(rf.kv_bytes_read(cfg, b, s)), "B", "KV bytes read per step"),
    )


def _slo_reason(ev: Evaluated, i: int, want: Slos) -> str:
    """Which SLOs a candidate misses, on the figures they are checked against, the other figure beside it."""
    parts = []
    for key, figure, slo, unit in _slo_figures(ev, i, want):
        miss = figure[0] > slo if key != "throughput" else figure[0] < slo
        if miss:
            parts.append(f"{key.replace('_', ' ')} {fmt_unit(figure[0], unit)} {'<' if key == 'throughput' else '>'} "
                         f"{fmt_unit(slo, unit)} ({figure[2]}; {figure[3]} {fmt_unit(figure[1], unit)})")
    return "misses the SLO: " + ", ".join(parts)


def _slo_figures(ev: Evaluated, i: int, want: Slos) -> list[tuple[str, tuple[float, float, str, str], float, str]]:
    """Each SLO set: its key, (the figure it is checked against, the other one, their names), the SLO, the unit."""
    on, other = ("expected", "bound") if want.on != "bound" else ("bound", "expected")
    checked, shown = ev.figures(want.on), ev.figures(other)
    out = []
    for k, (key, slo, unit) in enumerate((("step_time", want.step_time, "s"), ("throughput", want.throughput, "tok/s"),
                                          ("ttft", want.ttft, "s"))):
        if slo is not None:
            out.append((key, (float(checked[k][i]), float(shown[k][i]), on, other), float(slo), unit))
    return out


def _no_fit(m: Model, ev: Evaluated, i: int) -> str:
    """Why a candidate does not fit, in the terms that decide it: the totals when every device holds
    the same share, the most loaded device when the pipeline stages split the layers unevenly."""
    n, tp = int(ev.n[i]), int(ev.tp[i])
    layers = int(memory.stage_layers(m, n // tp))
    if ev.usable_dev[i] <= 0:
        return _reserves_exceed(ev, i)
    if layers * (n // tp) == m.n_layers:
        return f"does not fit: needs {fmt_unit(ev.need[i], 'B')} of {fmt_unit(ev.capacity[i], 'B')} usable"
    return (f"does not fit: its most loaded device ({layers} of {m.n_layers} layers on one of {n // tp} "
            f"pipeline stages) needs {fmt_unit(ev.need_dev[i], 'B')} of {fmt_unit(ev.usable_dev[i], 'B')} usable")


def _no_layout(m: Model, n: int) -> str:
    return (f"no layout: {n:,} devices do not split into tensor-parallel ranks of {m.id}'s {m.n_q} query and "
            f"{m.n_kv} KV heads times pipeline stages of at least one of its {m.n_layers} layers")


def _unmet_layout(sc: Scenario, knobs: _Knobs, counts: tuple[int, ...], suggest: bool) -> Unmet:
    """A device count with no valid split: the plan is unmet, with the smallest count kvplan searches
    that splits and meets every constraint (verified by planning it)."""
    m = sc.model
    tp_max = search.closest_tp(m, m.n_q)
    sugg: list[Suggestion] = []
    if suggest:
        for c in SUGGESTED_COUNTS:
            if not search.has_layout(m, c):
                continue
            changes, edits = _devices_change(sc, c)
            p = _replan(sc, knobs, changes)
            if p is not None:
                sugg.append(Suggestion(f"{_say_count(edits)} (the smallest count kvplan searches that splits into "
                                       f"tensor parallel {p.tp} × pipeline {p.pp} and meets every constraint; "
                                       f"{p.kv_dtype.id} KV)", edits))
                break
    return Unmet("layout", _no_layout(m, max(counts)) + f" (at most tensor parallel {tp_max} × pipeline "
                 f"{m.n_layers} = {tp_max * m.n_layers:,} devices, and a count those divide)",
                 derived(float(max(counts)), "1", "devices with no tensor × pipeline split of the model"),
                 *_texts_and_changes(sugg))


def _reserves_exceed(ev: Evaluated, i: int) -> str:
    reserved = float(ev.usable_dev[i] + 0.0)
    return (f"does not fit: the reserves alone take more than the device: {fmt_unit(-reserved, 'B')} short before any "
            "weights or KV (activation and runtime reserves, assumed: --runtime-reserve, --activation-reserve)")


#: Device counts a suggestion may name: the counts `devices = auto` searches, continued in powers
#: of two up to SUGGESTION_MAX_DEVICES (tensor-parallel groups come in powers of two).
SUGGESTED_COUNTS = tuple(sorted(set(search.AUTO_DEVICE_COUNTS)
                                | {2 ** k for k in range(SUGGESTION_MAX_DEVICES.bit_length())
                                   if 2 ** k <= SUGGESTION_MAX_DEVICES}))


@record
class _Knobs:
    reserve: float
    min_gain: float
    eta: float
    activation_reserve: Optional[float]   # the overrides the plan was made with (kvplan.model.memory)
    runtime_reserve: Optional[float]
    reserved: float                       # their bytes per device, resolved
    fit_only: bool = False   # accept a change that fits even if an SLO is still missed
    replans: Optional[Replans] = None     # the file's budget of verifying plans (plan())


@record(kw_only=True)
class _Rescope:
    """What a suggestion changes in a scenario, to plan it again; None keeps the scenario's own."""

    pins: Optional[Mapping[str, Pin]] = None
    devices: Optional[DeviceCount] = None
    budget: Optional[str] = None
    engine: Optional[str] = None
    context: Optional[int] = None
    batch: Optional[int] = None

    def apply(self, sc: Scenario) -> Scenario:
        return attrs.evolve(
            sc, pins=sc.pins if self.pins is None else self.pins,
            devices=sc.devices if self.devices is None else self.devices,
            budget=sc.budget if self.budget is None else self.budget,
            engine=sc.engine if self.engine is None else self.engine,
            context=sc.context if self.context is None else self.context,
            batch=sc.batch if self.batch is None else self.batch)


def _replan(sc: Scenario, knobs: _Knobs, changes: _Rescope) -> Optional[Plan]:
    """The plan of the scenario with `changes` applied, when it meets every constraint; else None.
    Every suggestion is checked this way before it is printed."""

    try:
        p = plan(changes.apply(sc), reserve=knobs.reserve, min_gain=knobs.min_gain, eta=knobs.eta,
                 activation_reserve=knobs.activation_reserve, runtime_reserve=knobs.runtime_reserve,
                 suggest=False, replans=knobs.replans)
    except (KvplanError, ValueError, ArithmeticError):
        return None
    if knobs.fit_only:
        return None if any(u.constraint in ("fits", "engine", "layout") for u in p.unmet) else p
    return None if p.unmet else p


def unsearched(sc: Scenario, u: Unmet, replans: Replans) -> Unmet:
    """`u` without suggestions, saying why and where to get them: its file's budget of verifying plans is spent."""
    note = (f"no suggestion searched: lint verifies at most {replans.size:,} changed plans per file and the "
            f"scenarios before this one used them; `kvplan advise --scenario {shlex.quote(sc.name)}` on this "
            "file searches this one's")
    return attrs.evolve(u, suggestions=(note,), changes=((),))


def _with_pin(sc: Scenario, key: str, value: Optional[PinValue]) -> dict[str, Pin]:
    pins = dict(sc.pins)
    if value is None:
        pins.pop(key, None)
    else:
        old = pins.get(key)
        pins[key] = Pin(key, value, old.span if old is not None else sc.spans["deployment"])
    return pins


def _devices_change(sc: Scenario, n: int) -> tuple[_Rescope, tuple[Change, ...]]:
    """Scenario changes and spec changes that make the planner use n devices."""

    pins: Optional[dict[str, Pin]] = None
    devices: Optional[DeviceCount] = None
    edits: list[Change] = []
    if "devices" in sc.pins:
        pins = _with_pin(sc, "devices", float(n))
        edits.append(Change("pin.devices", "=", str(n)))
        if "devices" in sc.spans and sc.devices.mode != "auto":  # keep the two from contradicting (KV120)
            devices = DeviceCount(sc.devices.mode, n)
            edits.append(Change("devices", "=", f"<= {n}" if sc.devices.mode == "max" else str(n)))
    elif sc.devices.mode == "max":
        devices = DeviceCount("max", n)
        edits.append(Change("devices", "=", f"<= {n}"))
    else:
        devices = DeviceCount("fixed", n)
        edits.append(Change("devices", "=", str(n)))
    layout = [k for k in ("tensor_parallel", "pipeline_parallel") if k in sc.pins]  # a split of the old count
    if layout:
        pins = {k: v for k, v in (sc.pins if pins is None else pins).items() if k not in layout}
        edits += [Change(f"pin.{k}", "", None) for k in layout]
    return _Rescope(pins=pins, devices=devices), tuple(edits)


def _texts_and_changes(sugg: Sequence[Suggestion]) -> tuple[tuple[str, ...], tuple[tuple[Change, ...], ...]]:
    """Unmet's `suggestions` and `changes`: the texts, and the changes each is made of."""
    return tuple(x.text for x in sugg), tuple(x.changes for x in sugg)


def _say(change: Change) -> str:
    """`pin devices = 8`, `devices = <= 16`: a change as the spec would read."""
    section, _, key = change.path.rpartition(".")
    return f"{section + ' ' if section else ''}{key} {change.op} {change.value}"


def _say_count(edits: Sequence[Change]) -> str:
    """A device-count change as the spec would read, and the pins of the old split it removes."""
    gone = [c.path.rpartition(".")[2] for c in edits if c.op == "" and c.path.startswith("pin.")]
    return _say(edits[0]) + (f" and remove the {' and '.join(gone)} pins" if gone else "")


def _device_suggestion(sc: Scenario, knobs: _Knobs, at_least: int, why: str) -> Optional[Suggestion]:
    """The smallest count the search would consider, above `at_least`, with which the plan meets
    every constraint; verified by planning it."""
    for n in SUGGESTED_COUNTS:
        if n <= at_least:
            continue
        changes, edits = _devices_change(sc, n)
        p = _replan(sc, knobs, changes)
        if p is not None:
            return Suggestion(f"{_say_count(edits)} (the smallest count kvplan searches that {why}; "
                              f"{p.kv_dtype.id} KV)", edits)
    return None


def _least_budget(dt: str) -> Optional[str]:
    return next((b for b in BUDGETS if dt in admissible(b, False).kv_dtypes), None)


def _dtype_suggestion(sc: Scenario, knobs: _Knobs, current: str) -> Optional[Suggestion]:
    """A narrower KV dtype that meets every constraint: change the kv_dtype pin (the budget too when
    it does not admit the dtype) or, without a pin, loosen the budget to the least lossy that admits it."""

    eng = get_engine(sc.engine)
    pinned = "kv_dtype" in sc.pins
    allowed_now = admissible(sc.budget, False).kv_dtypes
    for dt in DTYPE_ORDER:
        if DTYPES[dt].width >= DTYPES[current].width or dt not in eng.kv_dtypes or (dt == "fp4" and not sc.device.fp4):
            continue
        budget = sc.budget if dt in allowed_now else _least_budget(dt)
        if budget is None or (not pinned and budget == sc.budget):
            continue  # already in the space the planner searched
        edits: list[Change] = [Change("quality.budget", "=", budget)] if budget != sc.budget else []
        if pinned:
            edits.insert(0, Change("pin.kv_dtype", "=", dt))
        p = _replan(sc, knobs, _Rescope(budget=budget if budget != sc.budget else None,
                                       pins=_with_pin(sc, "kv_dtype", dt) if pinned else None))
        if p is None:
            continue
        where = f"{p.n_devices} device{'s' if p.n_devices > 1 else ''}"
        if pinned:
            also = f" and budget = {budget}" if budget != sc.budget else ""
            return Suggestion(f"pin kv_dtype = {dt}{also} ({dt} KV fits on {where})", tuple(edits))
        return Suggestion(f"budget = {budget} ({p.kv_dtype.id} KV fits on {where})", tuple(edits))
    if pinned:
        p = _replan(sc, knobs, _Rescope(pins=_with_pin(sc, "kv_dtype", None)))
        if p is not None:
            return Suggestion(f"remove the kv_dtype pin (the planner then takes {p.kv_dtype.id} KV on {p.n_devices} "
                              f"device{'s' if p.n_devices > 1 else ''})", (Change("pin.kv_dtype", "", None),))
    return None


def _largest(lo: int, hi: int, works: Callable[[int], bool], guess: int) -> Optional[int]:
    """The largest x in [lo, hi] for which works(x) holds (works is monotone: true up to a point),
    trying the arithmetic guess first; None when not even lo works."""
    if hi < lo:
        return None
    guess = min(max(guess, lo), hi)
    if works(guess) and (guess == hi or not works(guess + 1)):
        return guess
    if not works(lo):
        return None
    a, b = lo, hi  # works(a), and b is the upper end
    if works(b):
        return b
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if works(mid) else (a, mid)
    return a


def _unmet_fit(sc: Scenario, ev: Evaluated, best: int, space: Space, sigma: float, phi: float, knobs: _Knobs,
               w_p: float, suggest: bool) -> Unmet:
    short = float(ev.need[best] - ev.capacity[best])
    sugg: list[Suggestion] = []
    if suggest:
        sugg = _fit_suggestions(sc, ev, best, space, sigma, phi, knobs, w_p)
        if not sugg and slos(sc).any:
            # nothing fits and meets the SLOs: say what fits, and that the SLO stays missed
            sugg = [attrs.evolve(x, text=x.text + "; the SLO is still missed")
                    for x in _fit_suggestions(sc, ev, best, space, sigma, phi, attrs.evolve(knobs, fit_only=True),
                                              w_p)]
        if not sugg:
            sugg = [Suggestion("no single change kvplan can verify fits: more devices, narrower weights or a "
                               "smaller workload")]
    n, tp = int(ev.n[best]), int(ev.tp[best])
    layers = int(memory.stage_layers(sc.model, n // tp))
    if ev.usable_dev[best] <= 0:
        short = float(ev.need_dev[best] - ev.usable_dev[best])
        return Unmet("fits", _reserves_exceed(ev, best) + f"; each {sc.device.id} would need "
                     f"{fmt_unit(short, 'B')} more for this plan",
                     derived(short, "B", "memory needed − usable, per device (kvplan.model.memory)"),
                     *_texts_and_changes(sugg))
    if layers * (n // tp) != sc.model.n_layers:
        short = float(ev.need_dev[best] - ev.usable_dev[best])
        return Unmet("fits", f"does not fit: the most loaded device ({layers} of {sc.model.n_layers} layers on one of "
                     f"{n // tp} pipeline stages) needs {fmt_unit(ev.need_dev[best], 'B')}, "
                     f"{fmt_unit(ev.usable_dev[best], 'B')} usable on each {sc.device.id}; short by "
                     f"{fmt_unit(short, 'B')}",
                     derived(short, "B", "memory needed − usable, most loaded device (kvplan.model.memory)"),
                     *_texts_and_changes(sugg))
    bound = ""
    if ev.bound_binds is not None and ev.bound_binds[best]:
        bound = (f" (one sequence of max_context {sc.context_bound:,} tokens, which the engine must admit, "
                 f"takes more KV {'on its attention group ' if sc.attention_dp > 1 else ''}than the batch)")
    return Unmet("fits", f"does not fit: needs {fmt_unit(ev.need[best], 'B')}{bound}, "
                 f"{fmt_unit(ev.capacity[best], 'B')} "
                 f"usable on {int(ev.n[best])} × {sc.device.id}; short by {fmt_unit(short, 'B')}",
                 derived(short, "B", "memory needed − usable capacity"), *_texts_and_changes(sugg))


def _fit_suggestions(sc: Scenario, ev: Evaluated, best: int, space: Space, sigma: float, phi: float, knobs: _Knobs,
                     w_p: float) -> list[Suggestion]:
    dtype, r, placement = str(ev.dtype[best]), float(ev.retention[best]), str(ev.placement[best])
    sugg: list[Suggestion] = []
    dev = _device_suggestion(sc, knobs, max(space.counts), "fits")
    if dev is not None:
        sugg.append(dev)
    dt = _dtype_suggestion(sc, knobs, dtype)
    if dt is not None:
        sugg.append(dt)
    cfg = rf.Config(sc.model, sc.device, n_devices=int(ev.n[best]), tp=int(ev.tp[best]), w_p=w_p,
                    w_kv=kv_width(sc.engine, dtype, sc.model), factors=KvFactors(r, sigma, phi), placement=placement,
                    reserved=knobs.reserved, attention_dp=sc.attention_dp)
    s_fit = _f(rf.s_cap(cfg, sc.batch))
    if s_fit > 0 and sc.rate is None:  # a request workload has no batch or context to change (docs/service.md)
        c = _largest(max(1, sc.prefix), sc.context - 1,
                     lambda x: _replan(sc, knobs, _Rescope(context=x)) is not None, int(s_fit))
        if c is not None:
            sugg.append(Suggestion(f"context = {c} (the longest that fits at batch {sc.batch})",
                                   (Change("workload.context", "=", str(c)),)))
        per_seq = _f(rf.kv_bytes_stored(cfg, 1, sc.context))
        free = cfg.kv_room  # the deployment's KV bytes when its most loaded device is full
        guess = int(free // per_seq) if per_seq > 0 else 1
        bfit = _largest(1, sc.batch - 1, lambda x: _replan(sc, knobs, _Rescope(batch=x)) is not None, guess)
        if bfit is not None:
            sugg.append(Suggestion(f"batch = {bfit} (the largest that fits at {sc.context:,} tokens)",
                                   (Change("workload.batch", "=", str(bfit)),)))
    return sugg


def _unmet_slo(sc: Scenario, ev: Evaluated, best: int, want: Slos, knobs: _Knobs, space: Space,
               suggest: bool) -> list[Unmet]:
    """Each SLO the chosen candidate misses on the figures it is checked against (`--slo-on`), both figures
    printed, with changes that would meet it."""
    out = []
    for key, (got, other, on, other_name), slo, unit in _slo_figures(ev, best, want):
        low = key == "throughput"
        if (got >= slo) if low else (got <= slo):
            continue
        sugg = _slo_suggestions(sc, knobs, space, suggest, str(ev.dtype[best]))
        gap = slo - got if low else got - slo
        name = {"step_time": "step time", "throughput": "throughput", "ttft": "TTFT"}[key]
        verb = "is below" if low else "exceeds"
        out.append(Unmet(key, f"{name} {fmt_unit(got, unit)} ({on}; {other_name} {fmt_unit(other, unit)}) {verb} "
                         f"the SLO {fmt_unit(slo, unit)} by {fmt_unit(gap, unit)}",
                         derived(gap, unit, f"SLO − plan {name} ({on})" if low else f"plan {name} ({on}) − SLO"),
                         *_texts_and_changes(sugg)))
    return out


def _slo_suggestions(sc: Scenario, knobs: _Knobs, space: Space, suggest: bool, dtype: str) -> list[Suggestion]:
    """More devices, or a narrower KV dtype, that meet every constraint (verified by planning);
    else a plain statement that no allowed plan does."""
    if not suggest:
        return []
    out = [s for s in (_device_suggestion(sc, knobs, max(space.counts), "meets the SLO"),
                       _dtype_suggestion(sc, knobs, dtype)) if s is not None]
    return out or [Suggestion("no allowed plan meets it: allow more devices, a looser quality budget or a shorter "
                              "context")]


def _tier(sc: Scenario, w_kv: float, factors: KvFactors, tp: int, eta: float) -> TierPlan:
    """Reuse economics (SPEC §7): keep reused contexts in host memory when fetching them
    over the host link beats recomputing them; never as a read inside a step (R6)."""
    pin = _pin(sc, "tier")
    if sc.reuse <= 0 and pin in (None, "none"):  # pinning what the planner would choose changes nothing
        return TierPlan("none", None, None, None, None)
    m, d = sc.model, sc.device
    link = get_link(d.host_link) if d.host_link else None
    t_pre = _f(prefill_time(m, sc.context, d.compute * tp, eta))
    pre = derived(t_pre, "s", f"(2·P_active·s + 2·L·n_q·d_h·s²)/(η·π·tp), tp = {tp}, "
                              f"η = {eta:g} assumed (docs/model.md §9)")
    if link is None:
        return TierPlan("none" if pin is None else str(pin), None, None, pre, None)
    per_seq = _f(kv_bytes_per_seq(m, sc.context, w_kv)) * factors.capacity
    t_fetch = _f(fetch_time(m, sc.context, w_kv, link.bandwidth)) * factors.retention
    fetch = derived(t_fetch, "s",
                    f"B_kv(s)·r/({link.name} {fmt_unit(link.bandwidth, 'B/s')} per direction) (docs/model.md §9)")
    size = derived(sc.reuse * sc.batch * per_seq, "B", "reuse × batch × KV bytes per sequence")
    tier = "host" if t_fetch < t_pre else "none"
    if pin is not None:
        tier = str(pin)
    return TierPlan(tier, link.id, size if tier != "none" else None, pre, fetch)  # no tier holds no bytes


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
