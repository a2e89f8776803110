"""LMCache 0.5.6: the plan's second tier as lmcache.yaml, and the vLLM or SGLang commands that load it.

Written only when the plan has a tier; otherwise a warning says there is
nothing to tier. The sizes are kvplan.model.pools.lmcache's (below the planner); this
module writes what it derives. Sizes are per engine worker (one per GPU): the plan's tier
bytes, replicated as the GPU pool is, divided over the GPUs, in whole blocks.

- host: `local_cpu: true`, `max_local_cpu_size` = that size in GiB: LMCache
  allocates int(max_local_cpu_size × 1024³) bytes (lmcache/v1/cache_engine.py:2087-2110,
  LMCache 0.5.6), although its log prints "GB"; kvplan writes the fewest
  hundredths of a GiB that hold the plan's bytes.
- ssd: `local_disk` with `max_local_disk_size` = that size, GiB too
  (v1/storage_backend/local_disk_backend.py:190); the CPU level keeps
  LMCache's default `max_local_cpu_size` (5.0 GiB, config.py:88-113) as staging. The
  disk path is a placeholder to edit.

The tokens stated are LMCache's: whole chunks of `chunk_size` (256) tokens, one
chunk being kv_shape (layers on the GPU, 2, or 1 for MLA, 256, KV heads per TP
shard, head size) elements of vLLM's KV torch dtype (lmcache/integration/vllm/utils.py:405-415):
2 B for bf16/fp16, 1 B (uint8/int8) for fp8, int8/int4_per_token_head and nvfp4
(vllm/utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE), so an int4 KV cache takes
twice its packed bytes in LMCache.
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

import attrs

from kvplan.base.evidence import Value, derived
from kvplan.base.records import record
from kvplan.catalog.engines import get_engine
from kvplan.catalog.quality import admissible
from kvplan.engines import common, own, sglang, vllm, yamlout
from kvplan.engines.common import Backend, EmitRequest, Emitted, EmittedFile
from kvplan.model.pools import lmcache as lpool
from kvplan.model.pools.lmcache import CHUNK_SIZE, DEFAULT_CPU_GB, element_bytes

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


def _lossy_transport_admitted(budget: str) -> bool:
    return any(d not in ("bf16", "fp16", "fp32") for d in admissible(budget, False).kv_dtypes)


@record
class _Config:
    """lmcache.yaml: its comment lines, its settings with their trailing notes, and what to say about it."""

    comments: tuple[str, ...]
    body: dict[str, object]
    keynotes: dict[str, str]
    notes: tuple[str, ...]
    findings: tuple[str, ...]
    held: int = 0      # bytes LMCache allocates per worker for the tier (or the staging level)
    tokens: int = 0    # the tokens those bytes hold in LMCache's chunks
    how: str = ""
    cpu_gib: float = 0.0  # max_local_cpu_size: the host memory LMCache allocates per worker, GiB


def _config(req: EmitRequest, mapped: common.Mapped, sz: common.Sizing) -> _Config:
    """The settings of the plan's tier: local CPU (host), a disk (ssd) or a store to name (remote)."""
    sc = req.plan.scenario
    notes: list[str] = []
    findings: list[str] = []
    per_gpu = sz.tier_bytes_per_gpu()
    body: dict[str, object] = {"chunk_size": CHUNK_SIZE, "local_cpu": True}
    t = lpool.tier(sz.layout, mapped.dtype.id, sc.model.kv_kind == "mla", per_gpu, mapped.tier in ("host", "ssd"))
    size, chunk, held, tokens = t.size, t.chunk, t.held, t.tokens
    key = "max_local_disk_size" if mapped.tier == "ssd" else "max_local_cpu_size"
    comments = [common.header(req, BACKEND.label)]
    if mapped.tier in ("host", "ssd"):
        comments.append(
            f"# the plan's {mapped.tier} tier: {common.fmt_int(held)} B per engine worker (one per GPU) = "
            f"{common.fmt_int(tokens)} tokens in LMCache chunks of {CHUNK_SIZE} "
            f"({common.fmt_int(held // chunk)} chunks "
            f"× {common.fmt_int(chunk)} B at {element_bytes(mapped.dtype.id)} B per element) (derived); "
            f"{key} {size} GiB = int({size} × 1024³) B holds the plan's {common.fmt_int(per_gpu)} B = "
            f"{common.fmt_int(sz.tier_tokens)} tokens of KV in whole blocks")
        if tokens < sz.tier_tokens:
            notes.append(f"LMCache stores {mapped.dtype_name} "
                         f"KV at {element_bytes(mapped.dtype.id)} B per element: the plan's "
                         f"{common.fmt_int(per_gpu)} B per worker hold {common.fmt_int(tokens)} tokens in LMCache, "
                         f"not the plan's {common.fmt_int(sz.tier_tokens)}")
    else:
        comments.append(f"# the plan's {mapped.tier} tier holds {common.fmt_int(per_gpu)} B per engine worker "
                        f"({common.fmt_int(sz.tier_tokens)} tokens of KV in whole blocks) in your store; the local CPU "
                        f"level is LMCache's default {DEFAULT_CPU_GB} GiB = {common.fmt_int(held)} B of staging")
    keynotes: dict[str, str] = {}
    if mapped.tier == "host":
        body["max_local_cpu_size"] = size
        keynotes["max_local_cpu_size"] = "GiB per worker (× 1024³ B): the plan's tier bytes"
    else:
        body["max_local_cpu_size"] = DEFAULT_CPU_GB
        keynotes["max_local_cpu_size"] = "GiB, LMCache's default, staging in front of the tier"
    if mapped.tier == "ssd":
        body["local_disk"] = DISK_PLACEHOLDER
        body["max_local_disk_size"] = size
        keynotes["local_disk"] = "placeholder: your NVMe mount"
        keynotes["max_local_disk_size"] = "GiB per worker (× 1024³ B): the plan's tier bytes"
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
    how = (f"int({key} {body[key]} × 1024³) B // {common.fmt_int(chunk)} B per chunk × {CHUNK_SIZE} tokens "
           "(lmcache/v1/cache_engine.py:2087-2110, integration/vllm/utils.py:405-415, LMCache 0.5.6)")
    return _Config(tuple(comments), body, keynotes, tuple(notes), tuple(findings), held, tokens, how,
                   float(size if mapped.tier == "host" else DEFAULT_CPU_GB))


def render(req: EmitRequest) -> Emitted:
    """lmcache.yaml for the plan's second tier, and a launcher of each engine that loads it."""
    spec_req = req
    loaders = _loaders(req.plan.scenario.engine)
    # lmcache.yaml holds what the first loader's engine hands it: sized from the plan made for that engine
    req = attrs.evolve(req, plan=own.written_from(req, loaders[0]))
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
    files = [EmittedFile("lmcache.yaml", yamlout.text(cfg.comments, cfg.body, cfg.keynotes))]
    warnings = list(cfg.notes)
    rows: list[tuple[str, Value]] = [
        ("host_bytes_per_worker", derived(int(cfg.cpu_gib * common.GiB), "B", "int(max_local_cpu_size × 1024³): the "
                                          "host memory LMCache allocates per worker (cache_engine.py:2087-2110)")),
        ("tier_bytes_per_worker", derived(cfg.held, "B", "the GiB LMCache reads × 1024³, the fewest hundredths that "
                                                         "hold the plan's tier bytes per worker")),
        ("tier_tokens", derived(cfg.tokens, "tokens", cfg.how)),
        ("plan_tier_bytes_per_worker", derived(sz.tier_bytes_per_gpu(), "B", "plan tier bytes × replication / "
                                                                             "devices, whole blocks")),
        ("plan_tier_tokens", derived(sz.tier_tokens, "tokens", "plan tier bytes / bytes per token")),
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
        loaded = own.build_for(eng, spec_req, functools.partial(
            mod.render, via_lmcache=True, name=f"lmcache-{eng}.sh", label=f"{mod.BACKEND.label} + {BACKEND.label}"),
            BACKEND.id)
        theirs = own.written_from(spec_req, eng)
        if not loaded.errors and theirs.tier.bytes != p.tier.bytes:
            loaded_warnings.append(f"{BACKEND.label}: lmcache.yaml is sized for the plan made for {loaders[0]}; the "
                                   f"plan made for {eng} keeps a different tier ({theirs.tier.tier}): set engine = "
                                   f"{eng} for an lmcache.yaml of its own")
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
    build=render, writes_for=_loaders,
)
