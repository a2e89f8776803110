"""Pareto fronts: the plans that trade tokens/s per user against tokens/s per device (`kvplan pareto`).

    front(scenario) -> Front

The candidates are the planner's own (kvplan.planner.candidates): the same space, evaluation, rules, fit and
SLO checks plan() applies, before it chooses by the objective. Each feasible candidate is a point with

    tokens/s per user   = 1 / T_expected                  (one sequence's decode speed)
    tokens/s per device = b / (T_expected · N)            (the deployment's throughput over its devices)

and the front is the points no other point beats on both, each maximized (docs/cli.md, `kvplan pareto`). Every
point carries the `pin { ... }` block that makes `kvplan advise` choose exactly it: the axes the search varied,
pinned to the point's values, leave one candidate in the space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import attrs

from kvplan.base.evidence import Value, derived
from kvplan.base.records import record
from kvplan.model.scenario import Pin, PinValue, Scenario
from kvplan.planner import DEFAULT_MIN_GAIN, DEFAULT_RESERVE, Candidates, Overrides, candidates, cost, plan

if TYPE_CHECKING:
    from typing_extensions import Unpack


@record
class Point:
    """One feasible candidate: its choices, its figures (expected, and the lower bound's beside them) and its
    costs, labelled by name (`costs`: today the devices it takes, devices × replicas; a price per token joins them
    where the catalog has prices)."""

    candidate: int          # its index in the planner's search (the order of the axes)
    kv_dtype: str
    retention: float
    devices: int
    tp: int
    pp: int
    placement: str
    step: Value             # expected step (s)
    step_bound: Value       # the step's lower bound (s)
    per_user: Value         # tok/s per user, expected
    per_user_bound: Value
    per_device: Value       # tok/s per device, expected
    per_device_bound: Value
    costs: tuple[tuple[str, Value], ...]
    pins: tuple[tuple[str, str], ...]   # (pin key, value as the spec writes it)
    front: bool = False
    number: int = 0         # 1-based, in the order printed
    beaten_by: int = 0      # a dominated point: the number of the first front point that dominates it

    @property
    def label(self) -> str:
        """The point's choices in a few words: `int4, r = 1, 4 devices (tp 4 × pp 1), striped`."""
        r = f", r = {self.retention:g}" if self.retention < 1 else ""
        return (f"{self.kv_dtype}{r}, {self.devices} device{'s' if self.devices > 1 else ''} "
                f"(tp {self.tp} × pp {self.pp}), {self.placement}")

    @property
    def short(self) -> str:
        """The plot's annotation: `int4 ×4 tp4`, `fp8 r0.75 ×8 tp4·pp2`."""
        r = f" r{self.retention:g}" if self.retention < 1 else ""
        split = f"tp{self.tp}" + (f"·pp{self.pp}" if self.pp > 1 else "")
        return f"{self.kv_dtype}{r} ×{self.devices} {split}"

    def pin_block(self, indent: str = "") -> str:
        """The `pin { ... }` block, one setting a line as the language wants, each line after `indent`."""
        width = max(len(k) for k, _ in self.pins)
        body = "".join(f"{indent}    {k.ljust(width)} = {v}\n" for k, v in self.pins)
        return f"{indent}pin {{\n{body}{indent}}}\n"


@record
class Front:
    """A scenario's feasible candidates as points, the front first (tokens/s per user, highest first), then the
    dominated ones in the same order; `chosen` is the point number `kvplan advise` chooses without pins (0: none
    feasible); `gap` why no candidate is feasible, when none is."""

    scenario: Scenario
    points: tuple[Point, ...]
    evaluated: int
    block_size: int
    prefix_caching: bool
    chosen: int
    gap: str = ""

    @property
    def on_front(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.front)


def non_dominated(xs: Sequence[float], ys: Sequence[float]) -> list[bool]:
    """Which points (xs[i], ys[i]) no other point dominates, both axes maximized: j dominates i when it is at
    least as good on both and better on one. Equal points do not dominate each other. One sort and one pass
    (n log n): by x falling, the best y of every strictly larger x decides."""
    order = sorted(range(len(xs)), key=lambda i: (-xs[i], -ys[i], i))
    out = [False] * len(xs)
    best_above = float("-inf")  # the largest y among points of a strictly larger x
    k = 0
    while k < len(order):
        j = k
        while j < len(order) and xs[order[j]] == xs[order[k]]:
            j += 1
        group = order[k:j]                 # equal x, y falling: the first has the group's largest y
        top = ys[group[0]]
        for i in group:
            out[i] = ys[i] == top and ys[i] > best_above
        best_above = max(best_above, top)
        k = j
    return out


def dominates(a: Point, b: Point) -> bool:
    """Whether point a is at least as good as b on both axes (expected tokens/s per user and per device) and
    better on one."""
    au, ad, bu, bd = a.per_user.value, a.per_device.value, b.per_user.value, b.per_device.value
    return au >= bu and ad >= bd and (au > bu or ad > bd)


def _pins(sc: Scenario, cands: Candidates, i: int) -> tuple[tuple[str, str], ...]:
    """The pins that leave candidate i alone in the space: its dtype, device count and split always, the
    retention and placement where the search tried more than one."""
    ev, space = cands.evaluated, cands.space
    n, tp = int(ev.n[i]), int(ev.tp[i])
    pins = [("kv_dtype", str(ev.dtype[i]))]
    if len(space.retentions) > 1 or float(ev.retention[i]) < 1.0:
        pins.append(("retention", f"{float(ev.retention[i]):g}"))
    pins += [("devices", str(n)), ("tensor_parallel", str(tp)), ("pipeline_parallel", str(n // tp))]
    if len(space.placements) > 1:
        pins.append(("placement", str(ev.placement[i])))
    return tuple(pins)


def _point(sc: Scenario, cands: Candidates, i: int) -> Point:
    ev = cands.evaluated
    n, tp, k = int(ev.n[i]), int(ev.tp[i]), sc.replicas
    t_exp, t = float(ev.step_exp[i]), float(ev.step[i])
    per = f"b / (T · N), b = {sc.batch}, N = {n}" + (f" per replica ({k} replicas)" if k > 1 else "")
    return Point(
        candidate=i, kv_dtype=str(ev.dtype[i]), retention=float(ev.retention[i]), devices=n, tp=tp, pp=n // tp,
        placement=str(ev.placement[i]),
        step=derived(t_exp, "s", "the expected step T_expected (docs/expected.md)"),
        step_bound=derived(t, "s", "T_step ≥ max(M/β_eff, F/π) (docs/model.md §4)"),
        per_user=derived(1.0 / t_exp, "tok/s", "1 / T_expected: one sequence's decode rate"),
        per_user_bound=derived(1.0 / t, "tok/s", "1 / T_step: the bound's"),
        per_device=derived(sc.batch / (t_exp * n), "tok/s", f"{per}, T = T_expected"),
        per_device_bound=derived(sc.batch / (t * n), "tok/s", f"{per}, T = T_step (the bound)"),
        costs=_costs(sc, n, t_exp),
        pins=_pins(sc, cands, i),
    )


def _served(sc: Scenario, pts: Sequence[Point], overrides: Overrides) -> list[Point]:
    """A request workload's points, each planned with its pins as `kvplan advise` plans it (at the batch the load
    model derives on that layout) and kept when that plan meets the spec (fits, has a steady state, meets the
    SLOs); its figures are that plan's, at its own batch."""
    out = []
    for p in pts:
        pins = dict(sc.pins)
        for key, text in p.pins:
            value: PinValue = text if key in ("kv_dtype", "placement") else float(text)
            pins[key] = Pin(key, value, sc.spans["deployment"])
        q = plan(attrs.evolve(sc, pins=pins), suggest=False, **overrides)
        if not q.feasible:
            continue
        at = q.scenario
        m, n, k = q.metrics, q.n_devices, at.replicas
        t_exp, t = m.step_time_expected.value, m.step_time.value
        per = (f"b / (T · N), b = {at.batch} (the load model's batch on this layout), N = {n}"
               + (f" per replica ({k} replicas)" if k > 1 else ""))
        out.append(attrs.evolve(
            p, step=m.step_time_expected, step_bound=m.step_time,
            per_user=derived(1.0 / t_exp, "tok/s", "1 / T_expected at the load model's batch on this layout"),
            per_user_bound=derived(1.0 / t, "tok/s", "1 / T_step: the bound's"),
            per_device=derived(at.batch / (t_exp * n), "tok/s", f"{per}, T = T_expected"),
            per_device_bound=derived(at.batch / (t * n), "tok/s", f"{per}, T = T_step (the bound)"),
            costs=_costs(at, n, t_exp)))
    return out


def _costs(sc: Scenario, n: int, t_exp: float) -> tuple[tuple[str, Value], ...]:
    """A point's costs, by name, each a column of every format: the devices it takes, and where the device has a
    price (the spec's or the catalog's, kvplan.planner.cost.price) the $/1M output tokens at the point's expected
    throughput. One price per device-hour makes that cost b/(T·N)'s reciprocal times a constant, so it orders the
    points as tokens/s per device does and adds no axis to the front (docs/cli.md, kvplan pareto)."""
    k = sc.replicas
    out: list[tuple[str, Value]] = [
        ("devices", derived(float(n * k), "devices", "devices × replicas" if k > 1 else "the plan's devices"))]
    pr = cost.price(sc)
    if pr is not None:
        hourly = pr.value * n * k
        thr = sc.batch * k / t_exp
        out.append(("usd_per_1m_output", derived(
            hourly / (thr * cost.HOUR) * cost.MILLION, cost.PER_MILLION,
            f"H / (b · R / T · 3600) · 10^6, H = {pr.value:g} {cost.PER_HOUR} ({pr.evidence.value}) × {n} devices"
            + (f" × {k} replicas" if k > 1 else "") + f", b = {sc.batch}, T = T_expected = {t_exp:.6g} s")))
    return tuple(out)


def front(sc: Scenario, **overrides: Unpack[Overrides]) -> Front:
    """The Pareto front of one scenario. A request workload (a rate or a concurrency) has no batch of its own:
    its candidates are searched at the batch the load model derives on the layout advise chooses (`plan`), and
    each feasible one is planned with its pins as advise would plan it, kept when that plan meets the spec, its
    figures at its own batch, with advise's data-parallel replicas pinned when it chose some (docs/cli.md,
    kvplan pareto). `overrides` are plan()'s: the reserves change what fits; the minimum gain and the prefill
    efficiency only what advise chooses and its tier."""
    q = plan(sc, suggest=False, **overrides) if sc.requests else None
    if q is not None:
        sc = attrs.evolve(sc, batch=q.scenario.batch)
    cands = candidates(sc, reserve=overrides.get("reserve", DEFAULT_RESERVE),
                       activation_reserve=overrides.get("activation_reserve"),
                       runtime_reserve=overrides.get("runtime_reserve"),
                       min_gain=overrides.get("min_gain", DEFAULT_MIN_GAIN))
    pts = [_point(sc, cands, i) for i in cands.feasible]
    if q is not None:
        k = q.scenario.replicas
        if k > 1 and sc.replicas == 1:  # advise's replicas pinned; a devices pin is the total over them
            pts = [attrs.evolve(p, pins=tuple((key, str(int(v) * k)) if key == "devices" else (key, v)
                                              for key, v in p.pins) + (("replicas", str(k)),)) for p in pts]
        pts = _served(sc, pts, overrides)
    on = non_dominated([p.per_user.value for p in pts], [p.per_device.value for p in pts])
    pts = [attrs.evolve(p, front=f) for p, f in zip(pts, on)]
    pts.sort(key=lambda p: (not p.front, -p.per_user.value, -p.per_device.value, p.candidate))
    pts = [attrs.evolve(p, number=k + 1) for k, p in enumerate(pts)]
    tops = [p for p in pts if p.front]
    pts = [p if p.front else attrs.evolve(p, beaten_by=next(q.number for q in tops if dominates(q, p)))
           for p in pts]
    chosen = 0
    if pts:
        q = q or plan(sc, suggest=False, **overrides)
        want = (q.kv_dtype.id, q.retention, q.n_devices, q.tp, q.placement)
        chosen = next((p.number for p in pts if (p.kv_dtype, p.retention, p.devices, p.tp, p.placement) == want), 0)
    ev = cands.evaluated
    missed = ("every layout that passes the rules and fits misses the request workload when planned at its own "
              "batch (no steady state at the rate, or a service SLO missed); `kvplan advise` says what is unmet")
    return Front(sc, tuple(pts), len(ev), cands.block_size, cands.prefix_caching, chosen,
                 cands.gap or ("" if pts else missed if q is not None and cands.feasible else _why_none(cands)))


def _why_none(cands: Candidates) -> str:
    """Why nothing is feasible: the causes of the planner's rejections (fit, rule, slo, layout)."""
    ev = cands.evaluated
    causes = sorted({r.cause for r in ev.reject if r is not None})
    return ("no candidate passes the rules, fits and meets the SLOs (rejected for: " + ", ".join(causes) + "); "
            "`kvplan advise` says what is unmet and what would meet it")


def fronts(scenarios: Sequence[Scenario], **overrides: Unpack[Overrides]) -> list[Front]:
    return [front(sc, **overrides) for sc in scenarios]


__all__ = ["Front", "Point", "dominates", "front", "fronts", "non_dominated"]
