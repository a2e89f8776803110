"""Lint findings from the planner: pinned choices that break a design rule (KV2xx) and
constraints or expectations the plan does not meet (KV3xx), each at its own line."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

import attrs

from kvplan.base.codes import Severity
from kvplan.base.diagnostics import Diagnostic, Fix, make
from kvplan.base.units import fmt_unit
from kvplan.catalog import settings
from kvplan.catalog.engines import block_sizes_for, get_engine
from kvplan.catalog.quality import admissible
from kvplan.lang import CheckResult
from kvplan.lang import fixes as fx
from kvplan.model.scenario import PinValue, Scenario
from kvplan.planner import Overrides, Replans, plan
from kvplan.planner.plan import Constraint, Plan, PlanResult, Unmet
from kvplan.planner.rules import RULES, PinView, Rule
from kvplan.planner.rules.rule import Context, fix_for, pinned_kv, span_of
from kvplan.planner.search import tp_options

if TYPE_CHECKING:
    from typing_extensions import Unpack

_OPS: dict[str, Callable[[PinValue, PinValue], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
    "is": operator.eq,
}


_span = span_of
_fix = fix_for


#: The unmet constraints that mean the plan does not fit (KV301): memory, or no split of the model.
_NO_FIT = frozenset({Constraint.FITS, Constraint.LAYOUT})
#: The rate-like constraints (KV303) and the setting each finding points at.
_RATES = {Constraint.THROUGHPUT: "slo.throughput", Constraint.RATE: "workload.rate", Constraint.GOODPUT: "slo.rate"}


def metric_value(plan: Plan, metric: str) -> PinValue:
    """The plan's value for an `expect` metric, in base units."""
    if metric == "regime":
        return plan.regime_after
    if metric == "fits":
        return plan.regime_after != "capacity-bound" and not any(u.constraint in _NO_FIT for u in plan.unmet)
    if metric == "devices":  # the total over the replicas, as `devices = N` reads (docs/language.md)
        return plan.n_devices * plan.scenario.replicas
    if metric == "kv_bytes":
        return plan.metric("kv_bytes").value
    return plan.metric(metric).value


def _fmt_metric(metric: str, v: PinValue) -> str:
    unit = {"step_time": "s", "throughput": "tok/s", "kv_bytes": "B", "speedup": "x"}.get(metric)
    if unit and isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt_unit(float(v), unit)
    if metric == "devices" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:g}"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _unmet_help(sc: Scenario, ctx: Optional[Context], u: Unmet, lead: str, sep: str) -> tuple[str, list[Optional[Fix]]]:
    """The help line and its fixes; the lead ("smallest change that fits: ") only before changes."""
    found = [_fix(sc, ctx, s.text, s.changes) for s in u.suggestions]
    if not any(s.changes for s in u.suggestions):
        lead = ""
    return lead + sep.join(s.text for s in u.suggestions), found


def _page_pin(sc: Scenario, ctx: Optional[Context]) -> list[Diagnostic]:
    """KV305 for a pinned page size the engine does not take on this device for this model (SGLang on Blackwell
    takes fewer: kvplan.catalog.engines.block_sizes_for)."""
    block = sc.pinned.block_size
    eng = get_engine(sc.engine)
    pages = block_sizes_for(eng, sc.device, sc.model)
    if block is None or block in pages or sc.engine == "any":
        return []
    source, dep = (ctx.source, ctx.dep) if ctx is not None else ("", None)
    return [make("KV305", f"engine {sc.engine} does not accept {block}-token pages"
                 + ("" if pages == eng.block_sizes else f" on {sc.device.id}"),
                 sc.pinned.span(settings.pin("block_size")), help=f"use one of {', '.join(map(str, pages))}",
                 fixes=[fx.set_setting(source, dep, "pin.block_size", str(n)) for n in pages])]


def findings(sc: Scenario, plan: Plan, ctx: Optional[Context] = None,
             rules: Mapping[str, Rule] = RULES) -> list[Diagnostic]:
    """The findings of one planned scenario: each rule's on the pinned choices, then what the
    engine does not admit, what the plan cannot meet and the expectations it breaks. With `ctx`
    (the file's text and the deployment's tree) every suggestion that names a change carries it as a Fix."""
    out = _layout_findings(sc, plan)  # KV305: a pinned split the model's heads do not take
    eng = get_engine(sc.engine)

    view = PinView(sc, plan, ctx)
    for rule in rules.values():
        if rule.lint is not None:
            out += rule.lint(view)

    pin_dt, dt = (kv := pinned_kv(sc)).dtype_pin, kv.dtype

    # KV305: a pin the engine or the budget does not admit
    if pin_dt is not None:
        if dt is None or dt.id not in eng.kv_dtypes:
            out.append(make("KV305", f"engine {sc.engine} cannot store KV as {pin_dt.value}", pin_dt.span,
                            help=f"{sc.engine} KV dtypes: {', '.join(eng.kv_dtypes)}"))
        elif dt.id not in admissible(sc.budget, False).kv_dtypes:
            out.append(make("KV305", f"kv_dtype {dt.id} is outside the quality budget '{sc.budget}'", pin_dt.span,
                            help="loosen quality.budget or pin a wider dtype"))
    out += _page_pin(sc, ctx)

    # KV301-303, KV306: what the plan cannot meet
    for u in plan.unmet:
        if u.constraint in _NO_FIT:  # no valid split is KV301 as not fitting is
            lead = "smallest change that fits: " if u.constraint is Constraint.FITS else "would meet it: "
            text, found = _unmet_help(sc, ctx, u, lead, "; or ")
            out.append(make("KV301", u.message, _span(sc, "pin.devices", "devices", "deployment"),
                            help=text, fixes=found))
        elif u.constraint in (Constraint.STEP_TIME, Constraint.ITL):  # ITL under load: a service's step time
            text, found = _unmet_help(sc, ctx, u, "would meet it: ", "; or ")
            out.append(make("KV302", u.message, _span(sc, f"slo.{u.constraint.value}", "deployment"), help=text,
                            fixes=found))
        elif u.constraint is Constraint.ENGINE:
            text, found = _unmet_help(sc, ctx, u, "", "; or ")
            out.append(make("KV305", u.message, _span(sc, "pin.devices", "devices", "engine", "deployment"),
                            help=text or None, fixes=found))
        elif u.constraint in _RATES:  # a rate past saturation, or a goodput below slo.rate (docs/service.md)
            text, found = _unmet_help(sc, ctx, u, "would meet it: ", "; or ")
            at = _RATES[u.constraint]
            out.append(make("KV303", u.message, _span(sc, at, "deployment"), help=text, fixes=found))
        elif u.constraint is Constraint.TTFT:
            text, found = _unmet_help(sc, ctx, u, "would meet it: ", "; or ")
            out.append(make("KV306", u.message, _span(sc, "slo.ttft", "deployment"), help=text, fixes=found))

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


def _layout_findings(sc: Scenario, plan: Plan) -> list[Diagnostic]:
    """KV305 on a pinned tensor × pipeline split the search's layout rule (search.tp_options) does not
    take: the plan ran it as pinned, so the finding is the pin's."""
    pinned = [k for k, n in (("tensor_parallel", sc.pinned.tensor_parallel),
                             ("pipeline_parallel", sc.pinned.pipeline_parallel)) if n is not None]
    if not pinned or any(u.constraint is Constraint.LAYOUT for u in plan.unmet):  # no count splits: KV301 says so
        return []
    m, n = sc.model, plan.n_devices
    opts = tp_options(m, n)
    if plan.tp in opts:
        return []
    split = f"tensor parallel {plan.tp} × pipeline parallel {plan.pp}"
    takes = ", ".join(f"{t} × {n // t}" for t in opts)
    return [make("KV305", f"{split} cannot split {m.id} ({m.n_q} query heads, {m.n_kv} KV heads, "
                 f"{m.n_layers} layers) on {n} devices: tensor parallel must divide the query heads and divide "
                 "or be a multiple of the KV heads, and pipeline parallel be at most the layers",
                 sc.pinned.span(settings.pin(pinned[0])),
                 help=f"pin one the model takes (tensor × pipeline): {takes}" if takes else None)]


def plan_with_findings(sc: Scenario, ctx: Optional[Context] = None, replans: Optional[Replans] = None,
                       **overrides: Unpack[Overrides]) -> PlanResult:
    """Plan one scenario (with the planner options given, as `kvplan advise` takes them) and lint it; its
    suggestions are verified out of `replans` when given (kvplan.planner.plan)."""
    p = plan(sc, replans=replans, **overrides)
    return PlanResult(p, tuple(findings(sc, p, ctx)))


def check(result: CheckResult, **overrides: Unpack[Overrides]) -> list[Diagnostic]:
    """The lint runner's hook: plan every scenario of a checked file (with the planner options given)
    and report its findings. Files with errors from earlier stages are skipped (their scenarios are incomplete).
    The suggestions of the whole file are verified out of one budget (kvplan.planner.Replans), spent in the
    file's order, so a file at the scenario cap is linted in bounded time, suggestions included."""
    replans = Replans()
    return _gathered(result, result.scenarios,
                     lambda sc, ctx: plan_with_findings(sc, ctx, replans, **overrides).findings)


def check_plans(result: CheckResult, plans: Sequence[Plan]) -> list[Diagnostic]:
    """`check` on the plans advise or emit made already (of some or all of the file's scenarios): the findings
    lint reports on the same plans."""
    made = {p.scenario.name: p for p in plans}
    return _gathered(result, [sc for sc in result.scenarios if sc.name in made],
                     lambda sc, ctx: findings(made[sc.name].scenario, made[sc.name], ctx))


def _gathered(result: CheckResult, scenarios: Sequence[Scenario],
              found_for: Callable[[Scenario, Context], Sequence[Diagnostic]]) -> list[Diagnostic]:
    """Each scenario's findings, one per place: a finding every scenario shares is the deployment's, one that some
    share names them."""
    if any(dg.severity is Severity.ERROR for dg in result.diagnostics):
        return []
    found: dict[tuple[str, str, int, int], tuple[Diagnostic, list[str]]] = {}
    helps: dict[tuple[str, str, int, int], set[Optional[str]]] = {}
    for sc in scenarios:
        ctx = Context(result.source, fx.deployment(result.file, sc.deployment))
        for dg in found_for(sc, ctx):
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
        out.append(dg if len(names) == len(scenarios) else _tag(dg, ", ".join(names)))
    return out


def _tag(dg: Diagnostic, scenario: str) -> Diagnostic:
    return attrs.evolve(dg, message=f"[{scenario}] {dg.message}")
