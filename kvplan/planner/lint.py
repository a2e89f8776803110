"""Lint findings from the planner: pinned choices that break a design rule (KV2xx) and
constraints or expectations the plan does not meet (KV3xx), each at its own line."""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import attrs

from kvplan.base.codes import Severity
from kvplan.base.diagnostics import Diagnostic, Edit, Fix, make
from kvplan.base.errors import Span
from kvplan.base.units import fmt_unit
from kvplan.catalog import DTYPES
from kvplan.catalog.engines import get_engine
from kvplan.catalog.quality import admissible
from kvplan.lang import fixes as fx
from kvplan.lang.spec import DeploymentDecl, ListValue
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, sharing_factor
from kvplan.planner import plan
from kvplan.planner.decisions import compression_gain
from kvplan.planner.plan import Change, Plan, PlanResult

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
    "is": operator.eq,
}


def _span(sc: Any, *keys: str) -> Optional[Span]:
    for k in keys:
        if k.startswith("pin.") and k[4:] in sc.pins:
            return sc.pins[k[4:]].span  # type: ignore[no-any-return]
        if k in sc.spans:
            return sc.spans[k]  # type: ignore[no-any-return]
    return None


def metric_value(plan: Plan, metric: str) -> Any:
    """The plan's value for an `expect` metric, in base units."""
    if metric == "regime":
        return plan.regime_after
    if metric == "fits":
        return plan.regime_after != "capacity-bound" and not any(u.constraint in ("fits", "layout") for u in plan.unmet)
    if metric == "devices":
        return plan.n_devices
    if metric == "kv_bytes":
        return plan.metric("kv_bytes").value
    return plan.metric(metric).value


def _fmt_metric(metric: str, v: Any) -> str:
    unit = {"step_time": "s", "throughput": "tok/s", "kv_bytes": "B", "speedup": "x"}.get(metric)
    if unit and isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt_unit(float(v), unit)
    if metric == "devices" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:g}"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


#: Where a finding's fixes edit: the file's text and the deployment's syntax tree.
Context = tuple[str, Optional[DeploymentDecl]]


def _fix(sc: Any, ctx: Optional[Context], title: str, changes: tuple[Change, ...]) -> Optional[Fix]:
    """The edits that make `changes` in the file; None without a file or when one cannot be made
    (then the suggestion is printed as text only if it names no concrete change)."""
    if ctx is None or not changes:
        return None
    source, dep = ctx
    edits: list[Edit] = []
    for path, op, value in changes:
        if value is None:
            f = fx.remove_setting(source, dep, path)
        elif path.startswith("workload.") and _is_list(dep, path):
            f = fx.replace(sc.spans[path], value)  # this scenario's element of the list
        else:
            f = fx.set_setting(source, dep, path, value, op)
        if f is None:
            return None
        edits += f.edits
    return Fix(title, tuple(edits))


def _is_list(dep: Optional[DeploymentDecl], path: str) -> bool:
    block = dep.workload if dep is not None else None
    entry = next((e for e in block.entries if e.key == path.split(".", 1)[1]), None) if block else None
    return entry is not None and isinstance(entry.value, ListValue)


def _unmet_help(sc: Any, ctx: Optional[Context], u: Any, lead: str, sep: str) -> tuple[str, list[Optional[Fix]]]:
    """The help line and its fixes; the lead ("smallest change that fits: ") only before changes."""
    pairs = list(zip(u.suggestions, u.changes or ((),) * len(u.suggestions), strict=True))
    found = [_fix(sc, ctx, text, ch) for text, ch in pairs]
    if not any(ch for _, ch in pairs):
        lead = ""
    return lead + sep.join(u.suggestions), found


def findings(sc: Any, plan: Plan, ctx: Optional[Context] = None) -> list[Diagnostic]:
    """The findings of one planned scenario. With `ctx` (the file's text and the deployment's
    tree) every suggestion that names a change carries it as a Fix."""
    out: list[Diagnostic] = []
    dep = ctx[1] if ctx is not None else None
    source = ctx[0] if ctx is not None else ""
    pins = sc.pins
    m, d = sc.model, sc.device
    b, s = sc.batch, sc.context
    eng = get_engine(sc.engine)

    # R1: a spec that does not assert its regime
    if not any(e.metric == "regime" for e in sc.expects):
        out.append(make("KV201", f"deployment '{sc.deployment}' does not assert its regime", _span(sc, "deployment"),
                        help=f"the plan puts it {plan.regime_after}: add `expect {{ regime == {plan.regime_after} }}` "
                             "so CI notices when it moves",
                        fixes=[fx.set_setting(source, dep, "expect.regime", plan.regime_after, "==")]))

    # R2: lossless domains pinned off
    if "prefix_caching" in pins and not pins["prefix_caching"].value:
        shared = sc.prefix > 0 and min(sc.fanout, sc.batch) > 1
        out.append(make("KV202", "prefix caching is pinned off" + (
            f"; the declared {sc.prefix:,}-token prefix shared by {sc.fanout} requests would give σ = "
            f"{_sigma(sc):.3g}" if shared else ""), pins["prefix_caching"].span,
            help="prefix caching is lossless: set `prefix_caching = on` (R2)",
            severity=Severity.ERROR if shared else Severity.WARNING,
            fixes=[fx.set_setting(source, dep, "pin.prefix_caching", "on")]))

    pin_dt = pins.get("kv_dtype")
    pin_r = pins.get("retention")
    dt = DTYPES.get(str(pin_dt.value)) if pin_dt is not None else None
    r_val = float(pin_r.value) if pin_r is not None else None

    # KV305: a pin the engine or the budget does not admit
    if pin_dt is not None:
        if dt is None or dt.id not in eng.kv_dtypes:
            out.append(make("KV305", f"engine {sc.engine} cannot store KV as {pin_dt.value}", pin_dt.span,
                            help=f"{sc.engine} KV dtypes: {', '.join(eng.kv_dtypes)}"))
        elif dt.id not in admissible(sc.budget, False).kv_dtypes:
            out.append(make("KV305", f"kv_dtype {dt.id} is outside the quality budget '{sc.budget}'", pin_dt.span,
                            help="loosen quality.budget or pin a wider dtype"))
    if "block_size" in pins and int(pins["block_size"].value) not in eng.block_sizes and sc.engine != "any":
        out.append(make("KV305", f"engine {sc.engine} does not accept {int(pins['block_size'].value)}-token pages",
                        pins["block_size"].span, help=f"use one of {', '.join(map(str, eng.block_sizes))}",
                        fixes=[fx.set_setting(source, dep, "pin.block_size", str(n)) for n in eng.block_sizes]))

    # R3: compression pinned below s* — on the plan's layout, as the planner applies R3, with the
    # gain advise prints (one computation: decisions.compression_gain)
    lossy_pin = (dt is not None and dt.lossy) or (r_val is not None and r_val < 1)
    if lossy_pin:
        c = (2.0 / dt.width if dt is not None else 1.0) / (r_val if r_val is not None else 1.0)
        g = compression_gain(plan, c)
        if s < g.s_star:
            n = plan.n_devices
            span = (pin_dt or pin_r).span
            out.append(make("KV203", f"KV compressed below s*: context {s:,} is {s / g.s_star:.2f}× s* "
                            f"({fmt_unit(g.s_star, 'tokens')} on {n} × {d.id}, tp {plan.tp}), so the {c:g}× byte "
                            f"cut buys only {g.gain:.2f}× (KV {fmt_unit(g.kv, 'B')} vs weights "
                            f"{fmt_unit(g.weights, 'B')} read per step)", span,
                            help="keep the cache uncompressed in the weight-bound regime (R3): remove the "
                                 + " and ".join(f"`{k}` pin" for k in ("kv_dtype", "retention") if k in pins),
                            fixes=[_fix(sc, ctx, "remove the compression pins",
                                        tuple((f"pin.{k}", "", None) for k in ("kv_dtype", "retention")
                                              if k in pins))]))

    # R4: evicting with 16-bit KV
    kv_width = dt.width if dt is not None else plan.kv_dtype.width
    if r_val is not None and r_val < 1 and kv_width >= 2.0:
        out.append(make("KV204", f"retention {r_val:g} is pinned while the KV stays {plan.kv_dtype.id}",
                        pin_r.span, help="quantize first: fp8 or int4 KV halves or quarters the bytes (R4)"))

    # R5: eviction not tolerated, or below 0.5
    if r_val is not None and r_val < 1:
        ev_ok = admissible(sc.budget, sc.eviction_allowed).eviction
        if r_val < 0.5:
            out.append(make("KV205", f"retention {r_val:g} is below 0.5", pin_r.span,
                            help="keep r ≥ 0.5 (R5): remove the retention pin"
                                 + (", or write `retention = 0.5`" if ev_ok else ""),
                            fixes=[fx.remove_setting(source, dep, "pin.retention"),
                                   fx.set_setting(source, dep, "pin.retention", "0.5") if ev_ok else None]))
        elif not admissible(sc.budget, sc.eviction_allowed).eviction:
            out.append(make("KV205", f"retention {r_val:g} is pinned but this workload does not tolerate eviction "
                            f"(budget '{sc.budget}', eviction {'allowed' if sc.eviction_allowed else 'forbidden'})",
                            pin_r.span, help="set quality.eviction = allowed, or remove the retention pin (R5)",
                            fixes=[fx.set_setting(source, dep, "quality.eviction", "allowed")
                                   if sc.budget != "lossless" else None,
                                   fx.remove_setting(source, dep, "pin.retention")]))

    # R6: a pinned tier standing in for memory the deployment lacks
    pin_tier = pins.get("tier")
    if pin_tier is not None and str(pin_tier.value) != "none" and any(u.constraint == "fits" for u in plan.unmet):
        short = next(u for u in plan.unmet if u.constraint == "fits").shortfall
        out.append(make("KV206", f"{short.human} of KV does not fit in device memory and would be read from the "
                        f"{pin_tier.value} tier inside every decode step", pin_tier.span,
                        help="shard over more devices or shrink the KV; use the tier only for reuse between steps (R6)"))

    # R7: pinned pages on a multi-die device
    pl_span = _span(sc, "pin.placement", "placement")
    pinned_pl = (pins["placement"].value if "placement" in pins else sc.placement) == "pinned"
    if pinned_pl and d.partitions > 1:
        slow = float(rf.beta_eff(d, "pinned", b)[0])
        fast, upper = rf.beta_eff(d, "striped", b)
        out.append(make("KV207", f"pages pinned to one of {d.partitions} partitions of {d.id} stream at "
                        f"{fmt_unit(slow, 'B/s')} instead of {fmt_unit(float(fast), 'B/s')}"
                        + (" (upper bound)" if upper else ""), pl_span,
                        help="stripe pages (R7), or use placement = affinity when the partition count divides "
                             "the batch",
                        fixes=[_placement_fix(sc, ctx, "striped")]
                        + ([_placement_fix(sc, ctx, "affinity")] if b % d.partitions == 0 else [])))

    # R8: eviction stacked after quantization already left the KV-bound regime
    if dt is not None and dt.lossy and r_val is not None and r_val < 1:
        q_cfg = rf.Config(m, d, n_devices=plan.n_devices, tp=plan.tp, w_p=sc.weights.width, w_kv=dt.width,
                          factors=KvFactors(sharing=plan.sharing))  # the plan's layout, as the planner's R8
        s_star_q = float(rf.s_star(q_cfg, b))
        if s < s_star_q:
            out.append(make("KV208", f"after {dt.id} KV the point is weight-bound (s* = {fmt_unit(s_star_q, 'tokens')}"
                            f" > {s:,}), yet retention {r_val:g} is pinned too", pin_r.span,
                            help="re-evaluate the map after quantizing: eviction now adds risk for little speed (R8); "
                                 "remove the retention pin",
                            fixes=[fx.remove_setting(source, dep, "pin.retention")]))

    # KV301-303: what the plan cannot meet
    for u in plan.unmet:
        if u.constraint == "fits":
            text, found = _unmet_help(sc, ctx, u, "smallest change that fits: ", "; or ")
            out.append(make("KV301", u.message, _span(sc, "pin.devices", "devices", "deployment"), help=text,
                            fixes=found))
        elif u.constraint == "layout":
            text, found = _unmet_help(sc, ctx, u, "would meet it: ", "; or ")
            out.append(make("KV301", u.message, _span(sc, "pin.devices", "devices", "deployment"), help=text,
                            fixes=found))
        elif u.constraint == "step_time":
            text, found = _unmet_help(sc, ctx, u, "would meet it: ", "; or ")
            out.append(make("KV302", u.message, _span(sc, "slo.step_time", "deployment"), help=text, fixes=found))
        elif u.constraint == "engine":
            text, found = _unmet_help(sc, ctx, u, "", "; or ")
            out.append(make("KV305", u.message, _span(sc, "pin.devices", "devices", "engine", "deployment"),
                            help=text or None, fixes=found))
        elif u.constraint == "throughput":
            text, found = _unmet_help(sc, ctx, u, "would meet it: ", "; or ")
            out.append(make("KV303", u.message, _span(sc, "slo.throughput", "deployment"), help=text, fixes=found))

    # KV304: expectations
    for e in sc.expects:
        try:
            got = metric_value(plan, e.metric)
        except KeyError:
            continue
        want = e.value
        if _OPS[e.op](got, want):
            continue
        out.append(make("KV304", f"expected {e.metric} {e.op} {_fmt_metric(e.metric, want)}, the plan gives "
                        f"{_fmt_metric(e.metric, got)}", e.span))
    return out


def _placement_fix(sc: Any, ctx: Optional[Context], to: str) -> Optional[Fix]:
    """Set every placement the spec pins (the pin and the deployment's own) to `to`."""
    paths = [p for p, k in (("pin.placement", "pin.placement"), ("placement", "placement")) if k in sc.spans]
    return _fix(sc, ctx, f"placement = {to}", tuple((p, "=", to) for p in paths))


def _sigma(sc: Any) -> float:
    n = min(sc.fanout, sc.batch)
    return float(sharing_factor(n, sc.context, sc.prefix))


def plan_with_findings(sc: Any, ctx: Optional[Context] = None, **overrides: float) -> PlanResult:
    """Plan one scenario (with the planner options given, as `kvplan advise` takes them) and lint it."""
    kw: dict[str, Any] = dict(overrides)
    p = plan(sc, **kw)
    return PlanResult(p, tuple(findings(sc, p, ctx)))


def check(result: Any, **overrides: float) -> list[Diagnostic]:
    """The lint runner's hook: plan every scenario of a checked file (with the planner options given)
    and report its findings. Files with errors from earlier stages are skipped (their scenarios are incomplete)."""
    if any(dg.severity is Severity.ERROR for dg in result.diagnostics):
        return []
    found: dict[tuple[str, str, int, int], tuple[Diagnostic, list[str]]] = {}
    helps: dict[tuple[str, str, int, int], set[Optional[str]]] = {}
    for sc in result.scenarios:
        ctx = (result.source, fx.deployment(result.file, sc.deployment))
        for dg in plan_with_findings(sc, ctx, **overrides).findings:
            key = (dg.code, dg.message, dg.span.line if dg.span else 0, dg.span.column if dg.span else 0)
            found.setdefault(key, (dg, []))[1].append(sc.name)
            helps.setdefault(key, set()).add(dg.help)
    out: list[Diagnostic] = []
    for key, (dg, names) in list(found.items()):
        if key[0] == "KV201" and len(helps[key]) > 1:
            # the scenarios fall in different regimes: no one `expect { regime == ... }` holds for all
            found[key] = (attrs.evolve(
                dg, help="its scenarios fall in different regimes, so no single `regime ==` assertion holds "
                         "for all of them; split the workload lists into deployments of one regime",
                fixes=()), names)
    for dg, names in found.values():
        # a finding every scenario shares is the deployment's; one that some share names them
        out.append(dg if len(names) == len(result.scenarios) else _tag(dg, ", ".join(names)))
    return out


def _tag(dg: Diagnostic, scenario: str) -> Diagnostic:
    return attrs.evolve(dg, message=f"[{scenario}] {dg.message}")
