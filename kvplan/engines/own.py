"""Each engine target written from the plan made for its engine, as handed down finished (issue 20, item 2).

The plans are made above this layer (kvplan/app/replan.py: kvplan.planner.for_engine, and the words of
kvplan.planner.per_engine); an EmitRequest carries one OwnPlan (kvplan.engines.common) per engine its
target writes for, and this module only looks them up: an engine target other than the spec's engine is
written from that engine's own plan, said on stderr and under the header, and when that plan does not fit
nothing is written for it.
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs

from kvplan.catalog.engines import ENGINES
from kvplan.engines.common import EmitRequest, Emitted, OwnPlan
from kvplan.planner.plan import Plan


def engine_of(target: str) -> Optional[str]:
    """The engine an emit target writes for (its id is the engine's: vllm, sglang, trtllm), else None."""
    return target if target in ENGINES and target != "any" else None


def own_plan(req: EmitRequest, engine: str) -> OwnPlan:
    """The OwnPlan of `engine` the request carries; the spec's plan when it was made for that engine."""
    for own in req.own:
        if own.engine == engine:
            return own
    if req.plan.scenario.engine == engine:
        return OwnPlan(engine, req.plan)
    # a caller below kvplan.app that did not plan for the engine: a bug, not a user's error
    raise ValueError(f"no plan made for {engine} was handed to its target: emit through kvplan.app.replan.emit")


def written_from(req: EmitRequest, engine: str) -> Plan:
    """The plan `engine`'s target is written from: the spec's, or the one made for that engine."""
    return own_plan(req, engine).plan


def build_for(engine: str, req: EmitRequest, build: Callable[[EmitRequest], Emitted],
              target: str) -> Emitted:
    """`build` (an engine target's) on the plan made for `engine`, said in the output when it is not the spec's;
    an error and no files when the engine's plan does not fit."""
    own = own_plan(req, engine)
    if own.plan is req.plan:
        return build(req)
    if own.error is not None:
        return Emitted(target, (), (own.error,), (), (own.error,), errors=(own.error,))
    out = build(attrs.evolve(req, plan=own.plan))
    return attrs.evolve(out, planned=(own.planned,) + out.planned)
