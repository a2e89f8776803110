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

from kvplan.catalog.engines import ENGINES
from kvplan.engines.common import EmitRequest, Emitted
from kvplan.planner import for_engine
from kvplan.planner.per_engine import planned_line, side_by_side, unfit
from kvplan.planner.plan import Plan

__all__ = ["build_for", "engine_of", "side_by_side", "written_from"]


def engine_of(target: str) -> Optional[str]:
    """The engine an emit target writes for (its id is the engine's: vllm, sglang, trtllm), else None."""
    return target if target in ENGINES and target != "any" else None


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
