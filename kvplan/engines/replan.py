"""Each engine target written from its own plan (issue 11, build 3).

A plan is made under its scenario's engine: the KV dtypes that engine stores on the
device for the model (kvplan.catalog.engines.kv_refusal: FP4 only on FP4 hardware,
the record's conditions), its pages, eviction and pipeline stages. An engine target
other than that engine (every one for `engine = any`, `--target sglang` of a vLLM
spec) is written from the plan made for it (kvplan.planner.for_engine): its own
choices and numbers, said on stderr ("planned for sglang: ...") and under the file's
header, never the spec's choices moved to the nearest the engine has. When no plan
for that engine fits the device, nothing is written for it: the target is an error
(`kvplan: error: ...`), which `kvplan emit` counts as a finding (exit 1; docs/cli-emit.md).
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs

from kvplan.base.units import fmt_unit
from kvplan.catalog.engines import ENGINES, kv_refusal
from kvplan.engines.common import EmitRequest, Emitted
from kvplan.planner import for_engine
from kvplan.planner.plan import Plan

#: What an unmet constraint of the target's own plan means for its config: nothing that would start.
_BLOCKING = ("fits", "layout", "engine")


def engine_of(target: str) -> Optional[str]:
    """The engine an emit target writes for (its id is the engine's: vllm, sglang, trtllm), else None."""
    return target if target in ENGINES and target != "any" else None


def _layout(p: Plan) -> str:
    return f"{p.n_devices} × {p.scenario.device.id} (tp {p.tp} × pp {p.pp})"


def _choices(p: Plan) -> str:
    step = p.metrics.step_time
    return (f"{p.kv_dtype.id} KV on {_layout(p)}, {p.block_size}-token pages, retention {p.retention:g}, "
            f"tier {p.tier.tier}, step ≥ {fmt_unit(step.value, step.unit)} ({step.evidence.value})")


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
        out.append(f"block_size {spec_plan.block_size} → {own.block_size} (the {eng.name} default)")
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
    fix = f" (would meet it: {'; or '.join(u.suggestions)})" if u.suggestions else ""
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


def written_from(spec_plan: Plan, engine: str) -> Plan:
    """The plan `engine`'s target is written from: the spec's when the plan made for that engine is the same
    plan (the same digest: its record changed nothing), else that engine's own."""
    own = for_engine(spec_plan, engine)
    return spec_plan if own.digest == spec_plan.digest else own


def build_for(engine: str, req: EmitRequest, build: Callable[[EmitRequest], Emitted], target: str) -> Emitted:
    """`build` (an engine target's) on the plan made for `engine`: the spec's plan when it was made for that
    engine, else the engine's own, said in the output; an error and no files when the engine's plan does not fit."""
    spec_plan = req.plan
    own = written_from(spec_plan, engine)
    if own is spec_plan:
        return build(req)
    error = unfit(spec_plan, own)
    if error is not None:
        return Emitted(target, (), (error,), (), (error,), errors=(error,))
    out = build(attrs.evolve(req, plan=own))
    return attrs.evolve(out, planned=(planned_line(spec_plan, own),) + out.planned)
