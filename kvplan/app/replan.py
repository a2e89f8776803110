"""Each engine target written from its own plan (issue 11, build 3), planned here and handed down finished.

A plan is made under its scenario's engine: the KV dtypes that engine stores on the
device for the model (kvplan.catalog.engines.kv_refusal: FP4 only on FP4 hardware,
the record's conditions), its pages, eviction and pipeline stages. An engine target
other than that engine (every one for `engine = any`, `--target sglang` of a vLLM
spec) is written from the plan made for it (kvplan.planner.for_engine): its own
choices and numbers, said on stderr ("planned for sglang: ...") and under the file's
header, never the spec's choices moved to the nearest the engine has. When no plan
for that engine fits the device, nothing is written for it: the target is an error
(`kvplan: error: ...`), which `kvplan emit` counts as a finding (exit 1; docs/cli-emit.md).

This module makes those plans (the engines layer never plans: kvplan/engines/own.py only looks
them up in the request) and hands them to kvplan.engines.emit.
"""

from __future__ import annotations

from typing import Literal, Optional

from kvplan import engines
from kvplan.engines import DeployOptions, Emitted, OwnPlan, Reserves, capacity_line, resolve_targets
from kvplan.model.pools.query import Sizing
from kvplan.planner import for_engine
from kvplan.planner.per_engine import planned_line, unfit
from kvplan.planner.plan import Plan

#: `kvplan emit` takes its names from here: capacity_line, resolve_targets and Reserves are the engines layer's.
__all__ = ["Reserves", "capacity_line", "emit", "own_plan", "own_plans", "resolve_targets", "written_from"]


def own_plan(spec_plan: Plan, engine: str, sizing: Sizing = "fill") -> OwnPlan:
    """The plan `engine`'s target is written from: the spec's when the plan made for that engine is the same
    plan (the same digest: its record changed nothing), else that engine's own, with the words that say so and
    the error when it does not run."""
    own = for_engine(spec_plan, engine, sizing=sizing)
    if own.digest == spec_plan.digest:
        return OwnPlan(engine, spec_plan)
    return OwnPlan(engine, own, unfit(spec_plan, own), planned_line(spec_plan, own))


def own_plans(spec_plan: Plan, target: str, sizing: Sizing = "fill") -> tuple[OwnPlan, ...]:
    """The plans of every engine `target` writes for (its Backend.writes_for the spec's engine)."""
    backend = engines.TARGETS.get(target)
    if backend is None:
        return ()
    return tuple(own_plan(spec_plan, e, sizing) for e in backend.writes_for(spec_plan.scenario.engine))


def emit(plan: Plan, target: str, *, spec: str = "", reserves: Optional[Reserves] = None,
         deploy: Optional[DeployOptions] = None, sizing: Literal["fill", "exact"] = "fill",
         raise_fill: bool = True) -> Emitted:
    """kvplan.engines.emit with the plans made for the target's engines, sized as the file is (`sizing`): what
    `kvplan emit` writes."""
    return engines.emit(plan, target, spec=spec, reserves=reserves, deploy=deploy, sizing=sizing,
                        raise_fill=raise_fill, own_plans=own_plans(plan, target, sizing))


def written_from(spec_plan: Plan, engine: str) -> Plan:
    """The plan `engine`'s target is written from (own_plan's)."""
    return own_plan(spec_plan, engine).plan
