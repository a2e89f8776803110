"""Verified suggestions: the changes that would meet an unmet constraint, each checked by planning it.

A suggestion is planned again (`replan`, through the `plan` function its `Knobs` carry, so that this module
sits below the steps that call it) before it is printed; the plans of one file come out of one budget
(`Replans`), and a search that runs out of it names no change (`unsearched`)."""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Protocol, Sequence

import attrs

from kvplan.base.errors import KvplanError
from kvplan.base.records import record
from kvplan.catalog import DTYPE_ORDER, DTYPES, settings
from kvplan.catalog.engines import concrete, get_engine, kv_width
from kvplan.catalog.quality import BUDGETS, admissible
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors
from kvplan.model.pools.query import Sizing
from kvplan.model.scenario import DeviceCount, Pin, PinValue, Scenario
from kvplan.planner import search, service
from kvplan.planner.plan import Change, Constraint, Plan, Suggestion, Unmet
from kvplan.planner.search import Evaluated, Space
from kvplan.planner.space import scalar

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    pass



#: The batch plans `kvplan lint` makes to verify the suggestions of one file (Replans): a scenario's search
#: costs about ten to a few tens; at 1.5 to 2.5 ms apiece the budget is 1.5 to 2.5 s of one core
#: (bench/bench_lint.py), beside the scenarios' own plans.
REPLANS_PER_FILE = 1_000


class Replans:
    """What is left of a budget of plans made to verify suggestions, shared by the plans of one file.

    Mutable on purpose: `kvplan lint` hands one to every scenario of a file in the file's order, so the
    suggestion search of the whole file is bounded (a scenario costs tens of them; a file holds up to
    kvplan.base.limits.MAX_FILE_SCENARIOS). Each batch plan made to verify a suggestion takes one; a
    scenario whose search needs one more than is left gets no suggestions and says so
    (kvplan.planner.entry.plan), never a partial search."""

    __slots__ = ("size", "used")

    def __init__(self, size: int = REPLANS_PER_FILE) -> None:
        self.size = size
        self.used = 0

    def take(self) -> None:
        if self.used >= self.size:
            raise ReplansSpent
        self.used += 1


class ReplansSpent(Exception):
    """Raised out of a suggestion search when its file's Replans are spent; batch.plan_batch and
    serving.plan_service catch it."""


#: The largest device count a suggestion searches when nothing allowed fits.
SUGGESTION_MAX_DEVICES = 1024

#: Device counts a suggestion may name: the counts `devices = auto` searches, continued in powers
#: of two up to SUGGESTION_MAX_DEVICES (tensor-parallel groups come in powers of two).
SUGGESTED_COUNTS = tuple(sorted(set(search.AUTO_DEVICE_COUNTS)
                                | {2 ** k for k in range(SUGGESTION_MAX_DEVICES.bit_length())
                                   if 2 ** k <= SUGGESTION_MAX_DEVICES}))


#: What a plan must not miss to be a layout that runs: it fits, its count splits, its engine runs the split.
LAYOUT_UNMET = frozenset({Constraint.FITS, Constraint.LAYOUT, Constraint.ENGINE})


class Planner(Protocol):
    """plan() as a suggestion calls it (kvplan.planner.entry.plan), handed down in `Knobs`."""

    def __call__(self, sc: Scenario, *, reserve: float, min_gain: float, eta: float,
                 activation_reserve: Optional[float], runtime_reserve: Optional[float], suggest: bool,
                 replans: Optional[Replans], sizing: Sizing) -> Plan: ...


@record
class Knobs:
    reserve: float
    min_gain: float
    eta: float
    activation_reserve: Optional[float]   # the overrides the plan was made with (kvplan.model.memory)
    runtime_reserve: Optional[float]
    reserved: float                       # their bytes per device, resolved
    plan: Planner                         # what plans a changed scenario (kvplan.planner.entry.plan)
    fit_only: bool = False   # accept a change that fits even if an SLO is still missed
    replans: Optional[Replans] = None     # the file's budget of verifying plans (plan())
    sizing: Sizing = "fill"               # how the engine's target is sized (kvplan emit --sizing)


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


def replan(sc: Scenario, knobs: Knobs, changes: _Rescope) -> Optional[Plan]:
    """The plan of the scenario with `changes` applied, when it meets every constraint; else None.
    Every suggestion is checked this way before it is printed."""

    try:
        p = knobs.plan(changes.apply(sc), reserve=knobs.reserve, min_gain=knobs.min_gain, eta=knobs.eta,
                 activation_reserve=knobs.activation_reserve, runtime_reserve=knobs.runtime_reserve,
                 suggest=False, replans=knobs.replans, sizing=knobs.sizing)
    except (KvplanError, ValueError, ArithmeticError):
        return None
    if knobs.fit_only:
        return None if any(u.constraint in LAYOUT_UNMET for u in p.unmet) else p
    return None if p.unmet else p


def unsearched(sc: Scenario, u: Unmet, replans: Replans) -> Unmet:
    """`u` without suggestions, saying why and where to get them: its file's budget of verifying plans is spent."""
    note = (f"no suggestion searched: lint verifies at most {replans.size:,} changed plans per file and the "
            f"scenarios before this one used them; `kvplan advise --scenario {shlex.quote(sc.name)}` on this "
            "file searches this one's")
    return attrs.evolve(u, suggestions=(Suggestion(note),))


def with_pin(sc: Scenario, key: str, value: Optional[PinValue]) -> dict[str, Pin]:
    pins = dict(sc.pins)
    if value is None:
        pins.pop(key, None)
    else:
        old = pins.get(key)
        pins[key] = Pin(key, value, old.span if old is not None else sc.spans["deployment"])
    return pins


def devices_change(sc: Scenario, n: int) -> tuple[_Rescope, tuple[Change, ...]]:
    """Scenario changes and spec changes that make the planner use n devices."""

    pins: Optional[dict[str, Pin]] = None
    devices: Optional[DeviceCount] = None
    edits: list[Change] = []
    if sc.pinned.devices is not None:
        pins = with_pin(sc, "devices", float(n))
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
    # a split of the old count
    layout = [k for k in ("tensor_parallel", "pipeline_parallel") if sc.pinned.has(settings.pin(k))]
    if layout:
        pins = {k: v for k, v in (sc.pins if pins is None else pins).items() if k not in layout}
        edits += [Change(f"pin.{k}", "", None) for k in layout]
    return _Rescope(pins=pins, devices=devices), tuple(edits)


def _say(change: Change) -> str:
    """`pin devices = 8`, `devices = <= 16`: a change as the spec would read."""
    section, _, key = change.path.rpartition(".")
    return f"{section + ' ' if section else ''}{key} {change.op} {change.value}"


def say_count(edits: Sequence[Change]) -> str:
    """A device-count change as the spec would read, and the pins of the old split it removes."""
    gone = [c.path.rpartition(".")[2] for c in edits if c.op == "" and c.path.startswith("pin.")]
    return _say(edits[0]) + (f" and remove the {' and '.join(gone)} pins" if gone else "")


def _device_suggestion(sc: Scenario, knobs: Knobs, at_least: int, why: str, layout: bool = False
                       ) -> Optional[Suggestion]:
    """The smallest count the search would consider, above `at_least`, with which the plan meets
    every constraint; verified by planning it. With `layout`, the words name the re-plan's layout (a request
    workload's count is a total the layout search splits into replicas)."""
    for n in SUGGESTED_COUNTS:
        if n <= at_least:
            continue
        changes, edits = devices_change(sc, n)
        p = replan(sc, knobs, changes)
        if p is not None:
            on = f": {layout_words(p)}" if layout else ""
            return Suggestion(f"{say_count(edits)} (the smallest count kvplan searches that {why}{on}; "
                              f"{p.kv_dtype.id} KV)", edits)
    return None


def layout_words(p: Plan) -> str:
    """`2 replicas × 8 × h100-sxm (tp 8), 16 in all`, or `16 × h100-sxm (tp 8 × pp 2)`: a plan's layout."""
    k, n = p.scenario.replicas, p.n_devices
    return replica_words(p) if k == 1 else f"{k} replicas × {replica_words(p)}, {k * n} in all"


def replica_words(p: Plan) -> str:
    """`8 × h100-sxm (tp 8)`, `16 × h100-sxm (tp 8 × pp 2)`, `8 × h200 (tp 8, attention DP 8, EP 8)`: one replica of
    a plan's layout."""
    adp, ep = p.scenario.attention_dp, p.scenario.expert_parallel
    return (f"{p.n_devices} × {p.scenario.device.id} (tp {p.tp}{f' × pp {p.pp}' if p.pp > 1 else ''}"
            f"{f', attention DP {adp}' if adp > 1 else ''}{f', EP {ep}' if ep > 1 else ''})")


def _least_budget(dt: str) -> Optional[str]:
    return next((b for b in BUDGETS if dt in admissible(b, False).kv_dtypes), None)


def _dtype_suggestion(sc: Scenario, knobs: Knobs, current: str) -> Optional[Suggestion]:
    """A narrower KV dtype that meets every constraint: change the kv_dtype pin (the budget too when
    it does not admit the dtype) or, without a pin, loosen the budget to the least lossy that admits it."""

    eng = get_engine(sc.engine)
    pinned = sc.pinned.kv_dtype is not None
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
        p = replan(sc, knobs, _Rescope(budget=budget if budget != sc.budget else None,
                                       pins=with_pin(sc, "kv_dtype", dt) if pinned else None))
        if p is None:
            continue
        where = f"{p.n_devices} device{'s' if p.n_devices > 1 else ''}"
        if pinned:
            also = f" and budget = {budget}" if budget != sc.budget else ""
            return Suggestion(f"pin kv_dtype = {dt}{also} ({dt} KV fits on {where})", tuple(edits))
        return Suggestion(f"budget = {budget} ({p.kv_dtype.id} KV fits on {where})", tuple(edits))
    if pinned:
        p = replan(sc, knobs, _Rescope(pins=with_pin(sc, "kv_dtype", None)))
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


def fit_suggestions(sc: Scenario, ev: Evaluated, best: int, space: Space, sigma: float, phi: float, knobs: Knobs,
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
                    reserved=knobs.reserved, attention_dp=sc.attention_dp,
                    expert_parallel=sc.expert_parallel)
    s_fit = scalar(rf.s_cap(cfg, sc.batch))
    if s_fit > 0 and not sc.requests:  # a request workload has no batch or context to change (docs/service.md)
        c = _largest(max(1, sc.prefix), sc.context - 1,
                     lambda x: replan(sc, knobs, _Rescope(context=x)) is not None, int(s_fit))
        if c is not None:
            sugg.append(Suggestion(f"context = {c} (the longest that fits at batch {sc.batch})",
                                   (Change("workload.context", "=", str(c)),)))
        per_seq = scalar(rf.kv_bytes_stored(cfg, 1, sc.context))
        free = cfg.kv_room  # the deployment's KV bytes when its most loaded device is full
        guess = int(free // per_seq) if per_seq > 0 else 1
        bfit = _largest(1, sc.batch - 1, lambda x: replan(sc, knobs, _Rescope(batch=x)) is not None, guess)
        if bfit is not None:
            sugg.append(Suggestion(f"batch = {bfit} (the largest that fits at {sc.context:,} tokens)",
                                   (Change("workload.batch", "=", str(bfit)),)))
    return sugg


def slo_suggestions(sc: Scenario, knobs: Knobs, space: Space, suggest: bool, dtype: str) -> list[Suggestion]:
    """More devices, or a narrower KV dtype, that meet every constraint (verified by planning);
    else a plain statement that no allowed plan does."""
    if not suggest:
        return []
    out = [s for s in (_device_suggestion(sc, knobs, max(space.counts), "meets the SLO"),
                       _dtype_suggestion(sc, knobs, dtype)) if s is not None]
    return out or [Suggestion("no allowed plan meets it: allow more devices, a looser quality budget or a shorter "
                              "context")]


def service_suggestions(sc: Scenario, knobs: Knobs, p: Plan, fig: service.LoadFigures,
                         missed: frozenset[Constraint]) -> tuple[Suggestion, ...]:
    """Changes that make a request workload meet its service SLOs, each verified by planning it: more devices,
    replicas (pin replicas: the rate is split over them), or a declared rate at the goodput. `missed` holds
    Constraint.RATE for a rate past saturation."""
    out: list[Suggestion] = []
    # the spec's devices are the total over the replicas (kvplan.planner.layouts): a count above its bound
    most = int(sc.pinned.devices) if sc.pinned.devices is not None else sc.devices.n
    dev = _device_suggestion(sc, knobs, most, "meets the service SLOs", layout=True)
    if dev is not None:
        out.append(dev)
    for r in (2, 4, 8):
        if r <= sc.replicas:
            continue
        q = replan(sc, knobs, _Rescope(pins=with_pin(sc, "replicas", float(r))))
        if q is not None:  # the words are the re-plan's layout: r replicas of the split it chose
            out.append(Suggestion(f"pin replicas = {r} (the re-plan: {layout_words(q)}, each replica serving "
                                  f"1/{r} of the rate)", (Change("pin.replicas", "=", str(r)),)))
            break
    if Constraint.RATE in missed and (fig.goodput is None or fig.goodput.value <= 0):  # no latency SLO: below it
        lower = _round_down(fig.saturation_rate.value * (1 - 1e-9))
        ok = lower > 0 and replan(attrs.evolve(sc, rate=lower), knobs, _Rescope()) is not None
        if ok and (sc.slo_rate is None or lower >= sc.slo_rate):
            out.append(Suggestion(f"workload rate = {lower:g}/s (below the saturation rate "
                                  f"{fig.saturation_rate.human}, rounded down)",
                                  (Change("workload.rate", "=", f"{lower:g}/s"),)))
    if fig.goodput is not None and fig.goodput.value > 0 and missed & _LATENCY:
        lower = _round_down(fig.goodput.value)
        ok = lower > 0 and replan(attrs.evolve(sc, rate=lower), knobs, _Rescope()) is not None
        if ok and (sc.slo_rate is None or lower >= sc.slo_rate):
            out.append(Suggestion(f"workload rate = {lower:g}/s (the plan's goodput, {fig.goodput.human}, "
                                  "rounded down)", (Change("workload.rate", "=", f"{lower:g}/s"),)))
    return tuple(out) or (Suggestion("no allowed plan meets it: allow more devices, or lower the rate"),)


#: What a rate at the plan's goodput may meet: the latency SLOs under load, and a rate past saturation.
_LATENCY = frozenset({Constraint.TTFT, Constraint.ITL, Constraint.RATE})


def _round_down(x: float) -> float:
    """x rounded down to three significant digits (a rate a spec would write)."""
    if x <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.floor(x / step + 1e-9) * step


def engine_gap_suggestions(sc: Scenario, knobs: Knobs, engine_gap: tuple[int, ...]) -> list[Suggestion]:
    """A device count the engine splits into tensor-parallel ranks, nearest the counts it cannot run, and an
    engine with pipeline stages: the first of each that meets every constraint (verified by planning it)."""
    gap: list[Suggestion] = []
    near = sorted((c for c in SUGGESTED_COUNTS if c in search.tp_options(sc.model, c)),
                  key=lambda c: (abs(c - max(engine_gap)), c))
    for c in near:
        changes, edits = devices_change(sc, c)
        if replan(sc, knobs, changes) is not None:
            gap.append(Suggestion(f"devices = {c} (splits into {c} tensor-parallel ranks)", edits))
            break
    for e in concrete():  # the engines' records say which run pipeline stages
        if get_engine(e).pipeline and replan(sc, knobs, _Rescope(engine=e)) is not None:
            gap.append(Suggestion(f"engine = {e} (it has pipeline parallelism)", (Change("engine", "=", e),)))
            break
    return gap
