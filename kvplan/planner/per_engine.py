"""Each engine's own plan beside the spec's, in words (issue 11, build 3).

`kvplan.planner.for_engine` makes the plan of a scenario under another engine's record; this module says
what it chose, what differs from the spec's plan and why, and whether it runs at all. `kvplan advise`
prints it side by side for `engine = any` (kvplan/render/plan_view.py) and `kvplan emit` prints the same
words for the targets it writes from those plans (kvplan/app/replan.py). Here, not in the engines
layer, so that `kvplan advise` imports no engine module (tests/acceptance/test_coldstart.py).
"""

from __future__ import annotations

from typing import Optional

from kvplan.base.units import fmt_unit
from kvplan.catalog.engines import ENGINES, kv_refusal
from kvplan.model.expected import deployment_factors
from kvplan.planner.plan import Plan

#: What an unmet constraint of the target's own plan means for its config: nothing that would start.
_BLOCKING = ("fits", "layout", "engine")


def _layout(p: Plan) -> str:
    k = p.scenario.replicas  # a request workload's layout search may take replicas (kvplan.planner.layouts)
    one = f"{p.n_devices} × {p.scenario.device.id} (tp {p.tp} × pp {p.pp})"
    return one if k == 1 else f"{k} replicas × {one}, {k * p.n_devices} in all"


def _fit(p: Plan) -> str:
    """Which calibration fit the plan's expected figures used (engine = any: each engine's line its own), or ""
    without a profile."""
    sc = p.scenario
    if sc.calibration is None:
        return ""
    f = deployment_factors(sc.device, p.kv_dtype.id, sc.engine, sc.calibration)
    return (f", calibration {f.profile}" if f.profile else
            f", no fit in {sc.calibration.path} for {sc.device.id} (engine {sc.engine}): kvplan's default factors")


def _choices(p: Plan) -> str:
    step, exp = p.metrics.step_time, p.metrics.step_time_expected
    return (f"{p.kv_dtype.id} KV on {_layout(p)}, {p.block_size}-token pages, retention {p.retention:g}, "
            f"tier {p.tier.tier}, step ≥ {fmt_unit(step.value, step.unit)} ({step.evidence.value}), expected "
            f"{fmt_unit(exp.value, exp.unit)} ({exp.evidence.value}{_fit(p)})")


def differences(spec_plan: Plan, own: Plan) -> list[str]:
    """What the target's plan chose differently from the spec's, each with its reason where the engine's
    record gives one."""
    eng = ENGINES[own.scenario.engine]
    sc = own.scenario
    out: list[str] = []
    if own.kv_dtype.id != spec_plan.kv_dtype.id:
        why = kv_refusal(eng, spec_plan.kv_dtype.id, sc.device, sc.model)
        out.append(f"kv_dtype {spec_plan.kv_dtype.id} → {own.kv_dtype.id}" + (f" ({why})" if why else ""))
    if (own.n_devices, own.tp, own.pp) != (spec_plan.n_devices, spec_plan.tp, spec_plan.pp):
        out.append(f"devices {_layout(spec_plan)} → {_layout(own)}"
                   + ("" if eng.pipeline else f" ({eng.described} has no pipeline stages)"))
    if own.block_size != spec_plan.block_size:
        where = "" if own.block_size == eng.default_block else f" on {sc.device.id}"  # Engine.blackwell_pages
        out.append(f"block_size {spec_plan.block_size} → {own.block_size} (the {eng.name} default{where})")
    if own.retention != spec_plan.retention:
        out.append(f"retention {spec_plan.retention:g} → {own.retention:g}"
                   + ("" if eng.eviction else f" ({eng.described} does not evict tokens inside a request)"))
    if own.tier.tier != spec_plan.tier.tier:
        out.append(f"tier {spec_plan.tier.tier} → {own.tier.tier}")
    return out


def planned_line(spec_plan: Plan, own: Plan) -> str:
    """The stderr line that says the target's plan is its own, with what it chose and what differs."""
    eng = ENGINES[own.scenario.engine]
    diff = differences(spec_plan, own)
    said = (f"differs from the spec's plan (engine {spec_plan.scenario.engine}): {'; '.join(diff)}" if diff
            else f"the same choices as the spec's plan (engine {spec_plan.scenario.engine})")
    return f"planned for {eng.id} ({eng.label}): {_choices(own)}, plan {own.digest}; {said}"


def unfit(spec_plan: Plan, own: Plan) -> Optional[str]:
    """The error when the target's own plan does not run (does not fit, no layout, no engine split), else None."""
    blocking = [u for u in own.unmet if u.constraint in _BLOCKING]
    if not blocking:
        return None
    eng = ENGINES[own.scenario.engine]
    u = blocking[0]
    diff = differences(spec_plan, own)
    tried = f"; it differs from the spec's plan: {'; '.join(diff)}" if diff else ""
    fix = f" (would meet it: {'; or '.join(s.text for s in u.suggestions)})" if u.suggestions else ""
    return (f"{eng.described}: planned for {eng.id}, no plan fits: {_choices(own)}: {u.message}{fix}{tried}; "
            f"nothing written for {eng.id}")


def side_by_side(spec_plan: Plan, own: Plan) -> str:
    """One engine's plan beside the spec's, as `kvplan advise` prints it for `engine = any`: the words
    `kvplan emit` says for that engine's target."""
    if own.digest == spec_plan.digest:
        eng = ENGINES[own.scenario.engine]
        return f"the spec's plan (plan {spec_plan.digest}): {eng.label} runs its choices as they are"
    error = unfit(spec_plan, own)
    return error if error is not None else planned_line(spec_plan, own)
