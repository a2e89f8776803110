"""Backends: a finished plan in, the files an engine takes as written out.

    emit(plan, target, spec=..., reserves=...) -> Emitted
    TARGETS: Mapping[str, Backend]      one per target id
    default_targets(engine) -> targets  what `kvplan emit` writes when --target is not given
    PACKAGING                           targets that run another target's command on a platform (k8s):
                                        written when named, never by `all` or `engine = any`

One module per target (kvplan/engines/<id>.py) defines `BACKEND`, a common.Backend:
the engine and the version whose names it writes (shared/reference/engines.md), its
capability table, and `build(EmitRequest) -> Emitted`. An engine target other than the
plan's engine is written from the plan made for that engine, handed down finished
(kvplan/app/replan.py plans it, kvplan/engines/own.py looks it up), said as such; a plan
choice a target still cannot express (a pin) is mapped to the nearest setting it has and
named in a finding, and an error when that no longer fits; it is never changed silently.
To add a target, add its module and its BACKEND to TARGETS; an engine target also has its record
in kvplan.catalog.engines (docs/architecture.md, "Where to add things").
"""

from __future__ import annotations

from typing import Literal, Optional

from kvplan.base.errors import KvplanError
from kvplan.base.evidence import Value
from kvplan.catalog import suggest
from kvplan.engines import flashinfer, k8s, lmcache, own, sglang, trtllm, vllm
from kvplan.engines.common import Backend, DeployOptions, EmitRequest, Emitted, EmittedFile, OwnPlan, Reserves
from kvplan.planner.plan import Plan

__all__ = ["Backend", "DeployOptions", "Emitted", "EmittedFile", "EmitRequest", "OwnPlan", "PACKAGING", "Reserves",
           "TARGETS",
           "capacity_line", "default_targets", "emit"]

#: Every emit target, one module each: a literal table, not filled by importing modules. A plain dict, so
#: that a test can register a toy target with `monkeypatch.setitem(TARGETS, ...)`; it is read at call time.
TARGETS: dict[str, Backend] = {
    b.id: b for b in (vllm.BACKEND, sglang.BACKEND, trtllm.BACKEND, lmcache.BACKEND, flashinfer.BACKEND, k8s.BACKEND)
}

#: Targets that package an engine target's command for a platform (Kubernetes manifests): not engine configs of
#: their own, so `--target all` and `engine = any` leave them out; `--target k8s` names one (docs/cli-emit.md).
PACKAGING = frozenset({k8s.ID})


def _every_config() -> tuple[str, ...]:
    return tuple(t for t in TARGETS if t not in PACKAGING)


def default_targets(engine: str) -> tuple[str, ...]:
    """The targets `kvplan emit` writes for the spec's `engine`: the engine's own target (its module has the
    engine's id), or for `any` all of them but the packaging targets."""
    return (engine,) if engine != "any" and engine in TARGETS else _every_config()


def resolve_targets(names: str | None, engine: str) -> tuple[str, ...]:
    """`--target vllm`, `--target vllm,lmcache`, `--target all`, or the spec engine's default."""

    if not names:
        return default_targets(engine)
    out: list[str] = []
    for name in (n.strip() for n in names.split(",")):
        if name == "all":
            out.extend(_every_config())
        elif name in TARGETS:
            out.append(name)
        else:
            raise KvplanError(f"unknown target '{name}'", help=suggest(name, [*TARGETS, "all"]))
    return tuple(dict.fromkeys(out))


def emit(plan: Plan, target: str, *, spec: str = "", reserves: Optional[Reserves] = None,
         deploy: Optional[DeployOptions] = None, sizing: Literal["fill", "exact"] = "fill",
         raise_fill: bool = True, own_plans: tuple[OwnPlan, ...] = ()) -> Emitted:
    """The files `target` takes for `plan`, with warnings and the KV capacity they give. The memory
    accounting uses the reserves the plan was made with unless `reserves` is given; `deploy` holds the
    overrides of a packaging target's defaults (kvplan/engines/k8s.py). `raise_fill`: see EmitRequest.
    `own_plans`: the plans made for the engines of `TARGETS[target].writes_for` (kvplan.app.replan.emit makes them)."""

    targets = TARGETS
    if target not in targets:
        raise KvplanError(f"unknown target '{target}'", help=suggest(target, targets))
    req = EmitRequest(plan, spec, reserves, deploy or DeployOptions(), sizing, raise_fill, own_plans)
    engine = own.engine_of(target)
    if engine is None:
        return targets[target].build(req)
    return own.build_for(engine, req, targets[target].build, target)


def capacity_line(out: Emitted) -> str:
    """One line for stderr: the KV capacity the emitted settings give, beside the plan's figure."""
    rows = dict(out.capacity)
    if "kv_tokens" in rows:
        kv, seqs, pk, ps = rows["kv_tokens"], rows["kv_sequences"], rows["plan_kv_tokens"], rows["plan_sequences"]
        def count(v: Value) -> str:
            return f"{v.value:,.0f} sequence{'' if v.value == 1 else 's'}"

        line = (f"KV capacity {kv.human} = {count(seqs)} as planned ({kv.evidence.value}); plan {pk.human} = "
                f"{count(ps)} ({pk.evidence.value})")
        if "memory_needed_per_gpu" in rows:
            need, mem = rows["memory_needed_per_gpu"], rows["device_memory"]
            line += f"; per GPU {need.human} with assumed reserves, of {mem.human}"
        return line
    if "tier_bytes_per_worker" in rows:
        t, tok = rows["tier_bytes_per_worker"], rows["tier_tokens"]
        return f"tier {t.human} per worker = {tok.human} ({t.evidence.value})"
    return ""
