"""LMCache 0.5.6: the plan's second tier as lmcache.yaml, and the vLLM or SGLang commands that load it.

Written only when the plan has a tier; otherwise a warning says there is
nothing to tier. Sizes are per engine worker (one per GPU): the plan's tier
bytes, replicated as the GPU pool is, divided over the GPUs, in whole blocks.

- host: `local_cpu: true`, `max_local_cpu_size` = that size in GB.
- ssd: `local_disk` with `max_local_disk_size` = that size; the CPU level keeps
  LMCache's default `max_local_cpu_size` (5.0 GB, engines.md) as staging. The
  disk path is a placeholder to edit.
- remote: `remote_url` has to name your store (redis://, lm://, s3://,
  mooncakestore://, ...); kvplan cannot know it, so the line is left commented
  and a finding says the tier is not configured until it is set.

`remote_serde` is `naive` (lossless). `cachegen` quantizes in transport: it is
only admissible when the quality budget admits lossy KV, and the plan has not
chosen a transport codec, so it is mentioned, never written. `kivi` is an
unimplemented stub in 0.5.6 and never written.
"""

from __future__ import annotations

import functools
import math

import attrs

from kvplan.base.evidence import Value, derived
from kvplan.catalog.engines import get_engine
from kvplan.catalog.quality import admissible
from kvplan.engines import common, replan, sglang, vllm
from kvplan.engines.common import Backend, EmitRequest, Emitted, EmittedFile

#: LMCache's default chunk size in tokens (engines.md).
CHUNK_SIZE = 256
#: LMCache's default CPU size in GB (engines.md), kept as the staging level in front of a disk or remote tier.
DEFAULT_CPU_GB = 5.0
#: Where the SSD tier lives: a placeholder to edit (LMCache takes `file:///path/`).
DISK_PLACEHOLDER = "file:///mnt/nvme/lmcache/"

FLAGS = ("chunk_size", "local_cpu", "max_local_cpu_size", "local_disk", "max_local_disk_size", "remote_url",
         "remote_serde", "LMCACHE_CONFIG_FILE")

#: The engines LMCache loads into (their catalog records say `lmcache`), by the module that writes each loader.
LOADERS = {m.ENGINE.id: m for m in (vllm, sglang) if m.ENGINE.lmcache}


def _loaders(engine: str) -> tuple[str, ...]:
    """The loaders written for the spec's `engine`: its own, or (`any`, or an engine LMCache does not plug
    into) all of them."""
    return (engine,) if engine in LOADERS else tuple(LOADERS)


def _gb_up(x: float) -> float:
    return max(0.01, math.ceil(x / 1e9 * 100) / 100)


def _lossy_transport_admitted(budget: str) -> bool:
    return any(d not in ("bf16", "fp16", "fp32") for d in admissible(budget, False).kv_dtypes)


@attrs.frozen(slots=True)
class _Config:
    """lmcache.yaml: its comment lines, its settings with their trailing notes, and what to say about it."""

    comments: tuple[str, ...]
    body: dict[str, object]
    keynotes: dict[str, str]
    notes: tuple[str, ...]
    findings: tuple[str, ...]


def _config(req: EmitRequest, mapped: common.Mapped, sz: common.Sizing) -> _Config:
    """The settings of the plan's tier: local CPU (host), a disk (ssd) or a store to name (remote)."""
    sc = req.plan.scenario
    notes: list[str] = []
    findings: list[str] = []
    per_gpu = sz.tier_bytes_per_gpu()
    body: dict[str, object] = {"chunk_size": CHUNK_SIZE, "local_cpu": True}
    comments = [common.header(req, BACKEND.label),
                f"# the plan's {mapped.tier} tier: {common.fmt_int(per_gpu)} B per engine worker (one per GPU) = "
                f"{common.fmt_int(sz.tier_tokens)} tokens of KV in whole blocks (derived)"]
    keynotes: dict[str, str] = {}
    if mapped.tier == "host":
        body["max_local_cpu_size"] = _gb_up(per_gpu)
        keynotes["max_local_cpu_size"] = "GB per worker: the plan's tier bytes"
    else:
        body["max_local_cpu_size"] = DEFAULT_CPU_GB
        keynotes["max_local_cpu_size"] = "GB, LMCache's default, staging in front of the tier"
    if mapped.tier == "ssd":
        body["local_disk"] = DISK_PLACEHOLDER
        body["max_local_disk_size"] = _gb_up(per_gpu)
        keynotes["local_disk"] = "placeholder: your NVMe mount"
        keynotes["max_local_disk_size"] = "GB per worker: the plan's tier bytes"
        notes.append(f"local_disk {DISK_PLACEHOLDER} is a placeholder: point it at your NVMe mount")
    if mapped.tier == "remote":
        comments.append("# remote_url: redis://HOST:PORT   (or lm://, s3://, mooncakestore://: set your store)")
        findings.append("remote tier not configured: remote_url must name your store "
                        "(redis://, lm://, s3://, mooncakestore://); kvplan leaves it commented out")
    body["remote_serde"] = "naive"
    if _lossy_transport_admitted(sc.budget):
        keynotes["remote_serde"] = (f"lossless; cachegen is admissible under budget {sc.budget} but the plan "
                                    "chose no transport codec")
    else:
        keynotes["remote_serde"] = f"lossless: budget {sc.budget} admits no lossy transport (cachegen)"
    return _Config(tuple(comments), body, keynotes, tuple(notes), tuple(findings))


def render(req: EmitRequest) -> Emitted:
    """lmcache.yaml for the plan's second tier, and a launcher of each engine that loads it."""
    spec_req = req
    loaders = _loaders(req.plan.scenario.engine)
    # lmcache.yaml holds what the first loader's engine hands it: sized from the plan made for that engine
    req = attrs.evolve(req, plan=replan.written_from(req.plan, loaders[0]))
    p = req.plan
    if p.tier.tier == "none":
        return Emitted(BACKEND.id, (), (f"{BACKEND.label}: the plan keeps no second tier "
                                        "(reuse economics, docs/model.md §9): nothing to tier, no lmcache.yaml",))
    first = LOADERS[loaders[0]].BACKEND
    tier, tier_changed = common.map_tier(p, BACKEND)
    # Pages are the first loader's: LMCache stores what the engine hands it.
    mapped = attrs.evolve(common.map_choices(p, first), tier=tier, changed=tuple(tier_changed))
    sz = common.size(p, mapped, req.reserves)
    cfg = _config(req, mapped, sz)
    files = [EmittedFile("lmcache.yaml", common.yaml_text(cfg.comments, cfg.body, cfg.keynotes))]
    warnings = list(cfg.notes)
    rows: list[tuple[str, Value]] = [
        ("tier_bytes_per_worker", derived(sz.tier_bytes_per_gpu(), "B", "plan tier bytes × replication / devices, "
                                                                        "whole blocks")),
        ("tier_tokens", derived(sz.tier_tokens, "tokens", "plan tier bytes / bytes per token")),
    ]
    if p.tier.bytes is not None:
        rows.append(("plan_tier_bytes", p.tier.bytes))
    spec_engine = spec_req.plan.scenario.engine
    if spec_engine != "any" and spec_engine not in LOADERS:
        into = " and ".join(m.ENGINE.name for m in LOADERS.values())
        warnings.append(f"LMCache loads into {into} (docs/engines.md), not {get_engine(spec_engine).name}: "
                        "loaders for both are written")
    loaded_warnings: list[str] = []
    loaded_findings: list[str] = []
    errors: list[str] = []
    planned: list[str] = []
    for eng in loaders:
        mod = LOADERS[eng]
        loaded = replan.build_for(eng, spec_req, functools.partial(
            mod.render, via_lmcache=True, name=f"lmcache-{eng}.sh", label=f"{mod.BACKEND.label} + {BACKEND.label}"),
            BACKEND.id)
        own = replan.written_from(spec_req.plan, eng)
        if not loaded.errors and own.tier.bytes != p.tier.bytes:
            loaded_warnings.append(f"{BACKEND.label}: lmcache.yaml is sized for the plan made for {loaders[0]}; the "
                                   f"plan made for {eng} keeps a different tier ({own.tier.tier}): set engine = {eng} "
                                   "for an lmcache.yaml of its own")
        errors += loaded.errors
        planned += loaded.planned
        files += loaded.files
        loaded_warnings += [w for w in loaded.warnings if w not in loaded.findings]
        loaded_findings += loaded.findings
        rows += [(f"{eng}.{k}", v) for k, v in loaded.capacity]
    out = common.finish(BACKEND, mapped, None, files, rows, warnings, cfg.findings)
    return attrs.evolve(out, warnings=out.findings + tuple(loaded_findings) + out.warnings[len(out.findings):]
                        + tuple(loaded_warnings), findings=out.findings + tuple(loaded_findings),
                        errors=tuple(errors), planned=tuple(planned))


BACKEND = Backend(
    id="lmcache", engine="LMCache", version="0.5.6", kv_dtypes={}, block_sizes=(), default_block=CHUNK_SIZE,
    prefix_caching=True, tiers=("host", "ssd", "remote"), eviction=False, flags=FLAGS,
    source="docs/engines.md § LMCache 0.5.6",
    build=render,
)
