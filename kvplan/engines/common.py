"""What every backend shares: the emitted-artifact types, the capability mapping from a plan's
choices to what an engine can express, and the engine memory accounting (pure functions).

Facts about engines come from shared/reference/engines.md only. The memory accounting:

    tokens the plan stores   = plan KV bytes / (bytes per token, all layers, replication included)
    blocks per GPU           = ceil(tokens / block_size)           (a block holds block_size tokens
                                                                    of every layer on that GPU)
    bytes per block (a GPU)  = layers on the GPU × page bytes per layer
    page bytes per layer     = KV heads per TP shard × block_size × (head_size + head_size_v)
                               × dtype bytes;  MLA: block_size × (d_c + d_r) × dtype bytes
    KV pool per GPU          = blocks × bytes per block            (= plan KV / n rounded up to blocks)
    weights per GPU          = P · w_p · ⌈L/pp⌉ / (L · tp)         (the most loaded stage)
    fits                     ⇔ weights + KV pool + activation + runtime reserves ≤ device memory

This is kvplan.model.memory, the one memory model the planner's fit filter uses too: the weights share,
the reserves and the fit test come from there; the KV pool is the same share counted in whole
blocks of the target's dtype. An engine that sizes its pool its own way (SGLang, TensorRT-LLM) has its
formula below the planner, in kvplan.model.pools, which its writer writes (and the planner fits SGLang's).
The two reserves are `assumed`: the runtime reserve (CUDA context,
communication buffers) is 1 GiB, the activation reserve 8% of the device (the share vLLM's default
--gpu-memory-utilization of 0.92 leaves) less the runtime reserve, at least 0. Both are overridable
(`kvplan emit --activation-reserve 6GiB --runtime-reserve 2GiB`), and the plan is made with them.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import Callable, Literal, Mapping, Optional, Sequence

import attrs

from kvplan import __version__
from kvplan.base import controls
from kvplan.base.errors import KvplanError
from kvplan.base.evidence import Value, derived, reported
from kvplan.base.outputs import folder_name
from kvplan.base.records import record
from kvplan.base.units import fmt_bytes
from kvplan.catalog import DTYPE_ORDER, DTYPES, Dtype, Model, settings
from kvplan.catalog.engines import ENGINES, PageScale, kv_dtypes_for, kv_refusal, kv_width
from kvplan.catalog.engines import Engine as EngineRecord
from kvplan.engines.flagparse import Read
from kvplan.model import memory
from kvplan.model.footprint import fragmentation
from kvplan.model.memory import DEFAULT_RUNTIME_RESERVE, GiB, Reserves
from kvplan.model.pools.query import KvLayout, PoolQuery, ceil_div, kv_layout
from kvplan.model.pools.query import whole as round_whole
from kvplan.model.roofline import Config
from kvplan.model.scenario import Scenario
from kvplan.planner.plan import Plan

__all__ = ["DEFAULT_RUNTIME_RESERVE", "GiB", "KvLayout", "Reserves", "kv_layout"]  # re-exported: the model's names

#: The tiers a backend can be asked for (TierPlan.tier, besides "none").
TIERS = ("host", "peer", "ssd", "remote")

#: A header line: "# kvplan 0.1.0 · spec x.kvp · scenario s · plan sha256:… · vLLM 0.33.0", with
#: "· overrides runtime_reserve=2147483648 · " before the engine when the plan was made with overrides
#: of the planner's assumed defaults (`lint --check-digest` plans again with the same ones). A spec path or scenario
#: name that is not plain text stands as a JSON literal (`spec "x\ntouch PWNED\n#.kvp"`; `header_field` reads it).
HEADER = re.compile(r"^(?:#|//)\s*kvplan (?P<version>\S+) · spec (?P<spec>.+?) · scenario (?P<scenario>.+?) · "
                    r"plan (?P<digest>sha256:[0-9a-f]+) · (?:overrides (?P<overrides>[a-z_]+=[0-9.e+]+"
                    r"(?:,[a-z_]+=[0-9.e+]+)*) · )?(?P<engine>.+?)\s*$")

#: The planner overrides a header can carry: the memory model's byte reserves, which `kvplan emit` takes.
HEADER_OVERRIDES = ("activation_reserve", "runtime_reserve")


# ---------------------------------------------------------------- artifacts

@record
class EmittedFile:
    name: str
    text: str

    @property
    def executable(self) -> bool:
        return self.name.endswith(".sh")


@record
class Emitted:
    """What one target makes of one plan.

    `warnings` go to stderr; `findings` is the subset that makes `kvplan emit` exit 1 (a plan choice
    the target cannot express and that was changed, or a config that does not fit the device);
    `capacity` holds the KV capacity the engine would allocate beside the plan's figure.
    """

    target: str
    files: tuple[EmittedFile, ...]
    warnings: tuple[str, ...] = ()
    capacity: tuple[tuple[str, Value], ...] = ()
    findings: tuple[str, ...] = ()
    #: An engine target's command, as its launcher script execs it (the k8s target runs the same one).
    launch: Optional["Launch"] = None
    #: Errors (also in `findings`): a target written from its own plan that does not fit, or a fallback that
    #: no longer fits (kvplan/engines/own.py); its files are not written. `kvplan emit` prints them as errors.
    errors: tuple[str, ...] = ()
    #: "planned for sglang: ...": the target was written from the plan made for its engine, not the spec's.
    planned: tuple[str, ...] = ()


@record
class Backend:
    """One emit target: an engine at the version whose flag names it writes, and what it can express.

    `kv_dtypes` maps kvplan dtype ids to the engine's own names; `tiers` are the second tiers it can
    hold natively; `flags` lists every flag or field name the backend may write (tests check each
    against engines.md); `build` turns an EmitRequest into an Emitted.
    """

    id: str
    engine: str
    version: str
    kv_dtypes: Mapping[str, str]
    block_sizes: tuple[int, ...]
    default_block: int
    prefix_caching: bool
    tiers: tuple[str, ...]
    eviction: bool
    flags: tuple[str, ...]
    source: str
    build: Callable[["EmitRequest"], Emitted]
    #: An engine target's reader, for `kvplan import --from ID`: (text, base directory, where) -> Read.
    read: Optional[Callable[[str, str, str], Read]] = None
    #: The engines whose own plans the target is written from, for the spec's engine (EmitRequest.own)
    writes_for: Callable[[str], tuple[str, ...]] = lambda engine: ()

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"


def flag_set(engine: EngineRecord) -> tuple[str, ...]:
    """Every flag or key name `engine`'s writer may write: the settings table's carriers (settings.flag_names),
    the engine record's named flags (those the plan's choices are written under) and its own (Flags.own), a YAML
    key path (`kv_cache_config.dtype`) as its keys."""
    f = engine.flags
    names = (*settings.flag_names(engine.id, f), f.kv_dtype, f.block, f.batch, f.context, f.tp, f.pp, *f.own)
    return tuple(dict.fromkeys(part for name in names if name
                               for part in (name.split(".") if not name.startswith("-") else [name])))


def engine_backend(engine: EngineRecord, *, source: str, build: Callable[["EmitRequest"], Emitted],
                   read: Optional[Callable[[str, str, str], Read]] = None) -> Backend:
    """The Backend of an engine target, its capabilities taken from the engine's catalog record
    (kvplan.catalog.engines) and its flag set from the settings table (flag_set), so that the planner, the
    checker and the target read one set of facts."""
    return Backend(id=engine.id, engine=engine.name, version=engine.version, kv_dtypes=engine.kv_names,
                   block_sizes=engine.block_sizes, default_block=engine.default_block,
                   prefix_caching=engine.prefix_caching, tiers=engine.tiers, eviction=engine.eviction,
                   flags=flag_set(engine), source=source, build=build, read=read, writes_for=lambda _: (engine.id,))


@record
class DeployOptions:
    """`kvplan emit`'s overrides of a deployment target's assumed defaults (kvplan/engines/k8s.py); None takes
    the default."""

    image: Optional[str] = None
    namespace: Optional[str] = None
    pvc: Optional[str] = None
    shm_bytes: Optional[float] = None
    gpus_per_node: Optional[int] = None
    gpu_resource: Optional[str] = None


@record
class OwnPlan:
    """The plan made for one engine beside the spec's, handed down finished (kvplan/app/replan.py): `plan` is the
    spec's plan itself when the engine's record changed nothing (the same digest); `error` the words when it does
    not run (nothing is written for the engine); `planned` the stderr line that says it is the engine's own."""

    engine: str
    plan: Plan
    error: Optional[str] = None
    planned: str = ""


@record
class EmitRequest:
    plan: Plan
    spec: str = ""            # the spec path as the user gave it
    reserves: Optional[Reserves] = None  # None: the reserves the plan was made with
    deploy: DeployOptions = DeployOptions()
    sizing: Literal["fill", "exact"] = "fill"
    #: fill sizing may raise vLLM's default fraction to the least that holds the plan; False models a deployment
    #: as it runs, at the default (kvplan import derives what that deployment holds)
    raise_fill: bool = True
    #: the plans made for the engines the target writes for (kvplan.engines.own); the spec's plan serves its engine
    own: tuple[OwnPlan, ...] = ()


# ---------------------------------------------------------------- header

def header(req: EmitRequest, label: str, comment: str = "#") -> str:
    """The first comment of every emitted file: spec, scenario, plan digest, engine and version; then the plan's
    service verdict (Plan.verdict: each SLO, predicted beside its bound, met or UNMET)."""

    p = req.plan
    over = overrides(p)
    extra = f"overrides {','.join(f'{k}={v:.17g}' for k, v in over.items())} · " if over else ""
    # the path and the name as literals: a file named `x<LF>touch PWNED<LF>#.kvp` stays one comment line
    head = (f"{comment} kvplan {__version__} · spec {controls.literal(req.spec or '-')} · scenario "
            f"{controls.literal(p.scenario.name)} · plan {p.digest} · {extra}{label}")
    # the service verdict on every file: a plan that misses its spec says so where the file is read
    head += f"\n{comment} {p.verdict().line}"
    if p.spec_engine:  # written from the plan made for this target's engine (kvplan/engines/own.py)
        head += (f"\n{comment} planned for {p.scenario.engine}: this file's plan is the one made under "
                 f"{p.scenario.engine}'s capabilities (the spec says engine = {p.spec_engine}); "
                 f"`kvplan advise` shows it beside the spec's")
    return head


def header_field(text: str) -> str:
    """A spec path or scenario name as the header wrote it (`controls.literal`): a JSON literal read back."""
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    return text


def overrides(plan: Plan) -> dict[str, float]:
    """The planner overrides the plan was made with that `lint --check-digest` must plan with again."""
    r = plan.reserves
    given = {"activation_reserve": r.activation, "runtime_reserve": r.runtime}
    return {k: float(v) for k, v in given.items() if v is not None}


def json_header(req: EmitRequest, backend: Backend) -> dict[str, object]:
    """The `_kvplan` key a JSON artifact carries instead of a comment."""

    p = req.plan
    head: dict[str, object] = {"version": __version__, "spec": req.spec or "-", "scenario": p.scenario.name,
                            "plan": p.digest, "engine": backend.engine, "engine_version": backend.version}
    if overrides(p):
        head["overrides"] = overrides(p)
    v = p.verdict()
    head["verdict"] = {"met": v.met, "line": v.line}
    return head


def slug(text: str) -> str:
    """A scenario's folder name (kvplan.base.outputs.folder_name)."""
    return folder_name(text)


def model_ref(plan: Plan) -> str:
    """What the engine loads: the Hugging Face id, else the model's name (replace it with a path)."""
    m: Model = plan.scenario.model
    return m.hf_id or m.id


def model_notes(plan: Plan, backend: Backend, slots: bool = True) -> list[str]:
    """Warnings about the model that hold for every target; `slots` False: the target counts a windowed model's
    tokens per full-attention layer (SGLang's hybrid pool), not as slots in every layer."""
    m = plan.scenario.model
    notes = []
    if not m.hf_id:
        notes.append(f"model {m.id} has no Hugging Face id: replace '{m.id}' with the checkpoint's id or path")
    if not m.all_full and slots:
        notes.append(f"{m.id} has sliding-window layers: token figures count slots in every layer (the pool holds "
                     "the plan's windowed bytes); docs/engines.md gives no per-window page formula")
    return notes


# ---------------------------------------------------------------- capability mapping

@record
class Mapped:
    """The plan's choices as the target can run them; `changed` names each choice that differs."""

    dtype: Dtype
    dtype_name: str
    block: int
    retention: float
    tier: str
    changed: tuple[str, ...]


def _family(dtype_id: str) -> str:
    return "int" if dtype_id.startswith("int") else "float"


def nearest_dtype(wanted: str, supported: Sequence[str]) -> str:
    """The closest dtype the engine has that is never lossier: same width first (same family
    first), else the next wider one."""
    w = DTYPES[wanted].width
    wider = [d for d in supported if DTYPES[d].width >= w]
    pool = wider or list(supported)
    return min(pool, key=lambda d: (abs(DTYPES[d].width - w), _family(d) != _family(wanted),
                                    DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 99))


def nearest_block(wanted: int, supported: Sequence[int]) -> int:
    return min(supported, key=lambda b: (abs(b - wanted), -b))


def map_choices(plan: Plan, backend: Backend) -> Mapped:
    """Map every plan choice onto the target; never change one silently."""
    changed: list[str] = []
    eng = backend.label
    want = plan.kv_dtype.id
    sc = plan.scenario
    record = ENGINES.get(backend.id)  # an engine target: what it stores on this device for this model
    runs = [d for d in backend.kv_dtypes if record is None or d in kv_dtypes_for(record, sc.device, sc.model)]
    if want in runs:
        dt = plan.kv_dtype
    else:
        dt = DTYPES[nearest_dtype(want, runs or list(backend.kv_dtypes))]
        refused = None if record is None else kv_refusal(record, want, sc.device, sc.model)
        # bytes as the target's pool holds them, scales included, over the plan's (catalog.engines.kv_width)
        ratio = (kv_width(backend.id, dt.id, sc.model) / plan.kv_width if record is not None
                 else dt.width / DTYPES[want].width)
        changed.append(f"kv_dtype {want} → {dt.id}: {refused or f'{eng} has no {want} KV cache'} "
                       f"(it takes {', '.join(sorted(runs))} here); the nearest that is not lossier is "
                       f"{dt.id} ({backend.kv_dtypes[dt.id]}), {ratio:.4g}x the plan's bytes")
    block = plan.block_size
    if block not in backend.block_sizes:
        block = nearest_block(plan.block_size, backend.block_sizes)
        changed.append(f"block_size {plan.block_size} → {block}: {eng} pages take "
                       f"{', '.join(map(str, backend.block_sizes))} tokens")
    retention = plan.retention
    if retention < 1.0 and not backend.eviction:
        changed.append(f"retention {retention:g} → 1: {eng} does not evict tokens inside a request (docs/engines.md); "
                       "the KV pool is sized to hold every token")
        retention = 1.0
    if plan.placement not in ("striped",):
        changed.append(f"placement {plan.placement} → the engine's allocator: {eng} has no flag that places KV "
                       "pages per memory partition")
    tier, tier_changed = map_tier(plan, backend)
    changed += tier_changed
    return Mapped(dt, backend.kv_dtypes[dt.id], block, retention, tier, tuple(changed))


def map_tier(plan: Plan, backend: Backend) -> tuple[str, list[str]]:
    """The plan's second tier on the target, or the nearest it holds, with the change named."""
    tier = plan.tier.tier
    eng = backend.label
    if tier == "none" or tier in backend.tiers:
        return tier, []
    if backend.tiers:
        near = "host" if "host" in backend.tiers else backend.tiers[0]
        return near, [f"tier {tier} → {near}: {eng} has no {tier} tier (it holds {', '.join(backend.tiers)}); "
                      f"the {near} tier gets the plan's tier bytes"]
    return "none", [f"tier {tier} → none: {eng} has no second KV tier"]


def runnable(backend: Backend, engine: EngineRecord, plan: Plan) -> Backend:
    """The backend with only the KV dtypes the engine runs on the plan's device and model (the record's
    kv_requires: NVFP4 only with FP4 hardware, ...), so that map_choices never writes one the engine refuses."""
    sc = plan.scenario
    on = kv_dtypes_for(engine, sc.device, sc.model)
    return attrs.evolve(backend, kv_dtypes={d: n for d, n in backend.kv_dtypes.items() if d in on})


# ---------------------------------------------------------------- memory accounting

def pinned_engine_flags(sc: Scenario, engine: str) -> list[Flag]:
    """The engine settings a spec pins (what `kvplan import` read), written back under `engine`'s flags as
    the settings table says (kvplan.catalog.settings, Write.PIN), in its order; a pin at its default
    (replicas = 1) is not written. Replicas and attention groups are both SGLang's data-parallel size,
    the switch beside it telling them apart (--dp-size with or without --enable-dp-attention)."""
    out: list[Flag] = []
    pins = sc.pinned
    for row, carrier in settings.carried(engine):
        text = pins.text(row)
        if carrier.write is not settings.Write.PIN or text is None or pins.at_default(row):
            continue
        out.append((carrier.flag, text))
        if carrier.also:
            out.append((carrier.also, None))
    return out


def unwritten_pins(sc: Scenario, engine: str) -> list[str]:
    """A warning for each engine pin the spec sets that `engine`'s writer does not write (the settings table's
    Write.NONE, with its reason; docs/cli-emit.md): never dropped without a word."""
    out: list[str] = []
    pins = sc.pinned
    for row, carrier in settings.carried(engine):
        text = pins.text(row)
        if carrier.write is settings.Write.NONE and text is not None and not pins.at_default(row):
            why = carrier.why.format(n=text, value=text)
            out.append(f"pin {row.key} = {text}{row.aside} is not written: {why}")
    return out


def replication(plan: Plan) -> float:
    """Copies of each KV byte across TP ranks (kvplan.model.roofline.Config.kv_replication)."""

    sc = plan.scenario
    cfg = Config(sc.model, sc.device, n_devices=plan.n_devices, tp=plan.tp, attention_dp=sc.attention_dp,
                    expert_parallel=sc.expert_parallel)
    return cfg.kv_replication


@record
class Sizing:
    """One GPU's memory under the target's choices, and the plan's figures beside it."""

    layout: KvLayout
    block: int
    blocks: int                 # KV blocks per GPU the config must provide
    plan_tokens: float          # token slots the plan's KV bytes hold
    tokens: float               # token slots the target needs (plan tokens with the target's deviations)
    batch: int
    context: int
    weights: float              # bytes per GPU
    total: float                # device memory, bytes
    plan_kv_per_gpu: float
    activation: Value
    runtime: Value
    tier_tokens: float          # token slots the second tier holds (0 without a tier)

    @property
    def pool(self) -> float:
        """KV bytes per GPU: whole blocks."""
        return self.blocks * self.layout.block_bytes(self.block)

    @property
    def block_bytes(self) -> float:
        return self.layout.block_bytes(self.block)

    @property
    def tokens_per_seq(self) -> float:
        return self.tokens / self.batch

    @property
    def reserves(self) -> float:
        return float(self.activation.value + self.runtime.value)

    @property
    def device(self) -> memory.DeviceMemory:
        """This GPU in the one memory model (kvplan.model.memory), the pool as its KV."""
        return memory.DeviceMemory(self.weights, self.pool, self.activation, self.runtime, self.total)

    @property
    def needed(self) -> float:
        """weights + KV pool + reserves, per GPU."""
        return self.device.needed

    @property
    def fits(self) -> bool:
        return self.device.fits

    def tier_bytes_per_gpu(self) -> float:
        """The second tier's share of one GPU's KV, in whole blocks."""
        if self.tier_tokens <= 0:
            return 0.0
        return ceil_div(self.tier_tokens, self.block) * self.block_bytes


def size(plan: Plan, mapped: Mapped, reserves: Optional[Reserves] = None,
         scales: Mapping[str, PageScale] = {}) -> Sizing:
    """The per-GPU memory of the plan under the target's dtype, block size and retention, for its
    most loaded GPU (kvplan.model.memory); `reserves` None takes the plan's own; `scales` are the engine's
    inline scale bytes per dtype (its record's page_scales)."""

    sc = plan.scenario
    m = sc.model
    tp, pp = plan.tp, plan.pp
    repl = replication(plan)
    per_token_plan = m.n_layers * m.kv_elems_per_layer * plan.kv_width * repl
    plan_kv = plan.metric("kv_bytes").value
    plan_tokens = round_whole(plan_kv / per_token_plan)
    tokens = plan_tokens
    if mapped.retention != plan.retention:
        tokens /= plan.retention
    if mapped.block != plan.block_size:
        phi_plan = float(fragmentation(sc.context, plan.block_size))
        phi = float(fragmentation(sc.context, mapped.block))
        tokens = tokens / (1.0 + phi_plan) * (1.0 + phi)
    tokens = round_whole(tokens)
    layout = kv_layout(m, tp, pp, mapped.dtype.width, scales.get(mapped.dtype.id))
    # each attention group's ranks hold their own share of the sequences (pin.attention_dp)
    blocks = ceil_div(round_whole(tokens / sc.attention_dp), mapped.block)
    activation, runtime = (plan.reserves if reserves is None else reserves).resolve(sc.device.memory)
    tier_tokens = 0.0
    if mapped.tier != "none" and plan.tier.bytes is not None:
        tier_tokens = plan.tier.bytes.value / (m.n_layers * m.kv_elems_per_layer * plan.kv_width)
        if mapped.retention != plan.retention:
            tier_tokens /= plan.retention
    return Sizing(layout, mapped.block, blocks, plan_tokens, tokens, sc.batch, sc.context,
                  float(memory.weights_per_device(m, sc.weights.width, tp, pp)), sc.device.memory,
                  float(memory.kv_per_device(m, plan_kv, tp, pp)), activation, runtime, round_whole(tier_tokens))


def pool_query(p: Plan, dtype_id: str, page: int, reserves: Optional[Reserves] = None) -> PoolQuery:
    """The plan as an engine's pool formula reads it (kvplan.model.pools), under the target's dtype and page;
    `reserves` None takes the plan's own."""
    sc = p.scenario
    return PoolQuery(sc.model, sc.device, dtype_id, p.kv_width, p.tp, p.pp, page, sc.batch, sc.context,
                     float(p.metric("kv_bytes").value), sc.weights.width, reserves or p.reserves, sc.attention_dp,
                     p.prefix_caching, sc.pinned.max_batched_tokens)


def pool_sequences(sizing: Sizing, engine_tokens: float) -> int:
    """The sequences of the plan's context the engine's pool holds, sharing and paging as planned (the
    capacity rows' kv_sequences)."""
    per_seq = sizing.tokens_per_seq
    return math.floor(round_whole(engine_tokens / per_seq)) if per_seq > 0 else 0


def fmt_int(x: float) -> str:
    return f"{int(x):,}"


def capacity(sizing: Sizing, engine_tokens: float, how: str,
             sequences: Optional[int] = None) -> tuple[tuple[str, Value], ...]:
    """The capacity rows every engine target prints: the engine's figure beside the plan's; `sequences` the
    engine's own count where tokens over tokens per sequence is not it (vLLM's hybrid KV cache groups)."""
    per_seq = sizing.tokens_per_seq
    seqs = pool_sequences(sizing, engine_tokens)
    if sequences is not None:
        seqs = sequences
    return (
        ("kv_tokens", derived(engine_tokens, "tokens", how)),
        ("plan_kv_tokens", derived(sizing.plan_tokens, "tokens",
                                   "plan KV bytes / bytes per token (all layers, replication included)")),
        ("kv_sequences", derived(seqs, "sequences",
                                 f"engine tokens / {per_seq:,.6g} tokens per sequence of {sizing.context:,} "
                                 "(sharing and paging as planned)")),
        ("plan_sequences", derived(sizing.batch, "sequences", "the plan's batch")),
        ("kv_pool_per_gpu", derived(sizing.pool, "B", f"{fmt_int(sizing.blocks)} blocks × "
                                                      f"{fmt_int(sizing.block_bytes)} B per block")),
        ("plan_kv_per_gpu", derived(sizing.plan_kv_per_gpu, "B", "plan KV bytes · ⌈L/pp⌉/(L·tp), the most "
                                                                 "loaded GPU (kvplan.model.memory)")),
        ("weights_per_gpu", derived(sizing.weights, "B", "weight bytes · ⌈L/pp⌉/(L·tp), the most loaded GPU "
                                                         "(kvplan.model.memory)")),
        ("activation_reserve", sizing.activation),
        ("runtime_reserve", sizing.runtime),
        ("memory_needed_per_gpu", derived(sizing.needed, "B", "weights + KV pool + reserves")),
        ("device_memory", reported(sizing.total, "B", "device catalog")),
    )


def fit_warning(sizing: Sizing, backend: Backend) -> Optional[str]:
    if sizing.fits:
        return None

    return (f"{backend.label}: does not fit: weights {fmt_bytes(sizing.weights)} + KV pool {fmt_bytes(sizing.pool)} "
            f"+ reserves {fmt_bytes(sizing.reserves)} = {fmt_bytes(sizing.needed)} per GPU, "
            f"{fmt_bytes(sizing.total)} on the device; the config is written as planned and will not start")


def _count(x: float) -> str:
    """A token count as written in a comment: whole numbers with separators, else one decimal."""
    return fmt_int(x) if float(x).is_integer() else f"{x:,.1f}"


def capacity_text(sizing: Sizing, engine_tokens: float) -> str:
    """What the KV pool holds, with arithmetic a reader can redo: token slots in whole blocks, then
    sequences at the spec's context. A sequence takes ceil(s/B) blocks of B tokens; with a shared
    prefix (or eviction) the plan's sequences take fewer slots each, counted as planned."""
    block = sizing.block
    blocks = engine_tokens / block
    own_blocks = ceil_div(sizing.context, block)  # one sequence that shares nothing
    own = own_blocks * block
    n_own = math.floor(round_whole(engine_tokens / own)) if own > 0 else 0
    per_seq = round_whole(sizing.tokens_per_seq)
    s = "s" if n_own != 1 else ""
    pool = f"{fmt_int(engine_tokens)} tokens ({_count(blocks)} blocks of {block} tokens)"
    paged = (f"{fmt_int(own_blocks)} blocks = {fmt_int(own)} tokens each" if own != sizing.context
             else f"{fmt_int(own_blocks)} blocks each")
    if abs(per_seq - own) <= 1e-9 * own:
        spare = engine_tokens - n_own * own
        return (f"{pool} = {n_own} sequence{s} of {sizing.context:,} tokens ({paged})"
                + (f" + {_count(spare)} spare tokens" if spare > 0 else ""))
    n_plan = math.floor(round_whole(engine_tokens / per_seq)) if per_seq > 0 else 0
    return (f"{pool}; at the spec's context of {sizing.context:,} tokens that is {n_plan} sequence"
            f"{'' if n_plan == 1 else 's'} as planned ({_count(per_seq)} tokens each on average, with the "
            f"plan's prefix sharing and eviction), or {n_own} sequence{s} that share nothing ({paged})")


def summary_comments(sizing: Sizing, engine_tokens: float, comment: str = "#") -> list[str]:
    """The lines under the header: the KV capacity the settings give, beside the plan's."""

    return [
        f"{comment} KV capacity (derived): {capacity_text(sizing, engine_tokens)}; the plan stores "
        f"{fmt_int(math.ceil(sizing.plan_tokens))} tokens for its batch of {sizing.batch}",
        f"{comment} per GPU: KV pool {fmt_int(sizing.blocks)} blocks × {fmt_int(sizing.block_bytes)} B = "
        f"{fmt_bytes(sizing.pool)} (derived), weights {fmt_bytes(sizing.weights)} (derived), reserves "
        f"{fmt_bytes(sizing.activation.value)} activations + {fmt_bytes(sizing.runtime.value)} runtime (assumed), "
        f"device {fmt_bytes(sizing.total)}",
    ]


def finish(backend: Backend, mapped: Mapped, sizing: Optional[Sizing], files: Sequence[EmittedFile],
           capacity_rows: Sequence[tuple[str, Value]], warnings: Sequence[str] = (),
           findings: Sequence[str] = (), launch: Optional["Launch"] = None, unfit: Optional[str] = None) -> Emitted:
    """Assemble an Emitted: changed choices and a config that does not fit are findings. `unfit`: the engine's
    own words that the plan's pool does not fit (an engine that sizes its pool itself passes no `sizing`); with
    a dtype moved to the nearest the target has, a pool that does not fit is an error and nothing is written."""
    label = backend.label
    all_findings = [f"{label}: {c}" for c in (*mapped.changed, *findings)]
    moved = [c for c in mapped.changed if c.startswith("kv_dtype ")]
    fw = fit_warning(sizing, backend) if sizing is not None else None
    if moved and (fw or unfit):
        # a dtype moved to the nearest the target has that no longer fits: an error, nothing written
        said = (fw.replace("the config is written as planned and will not start", "nothing written") if fw
                else f"{label}: {unfit}; nothing written")
        errors = (f"{said} ({'; '.join(moved)})",)
        return Emitted(backend.id, (), errors, (), errors, errors=errors)
    if fw:
        all_findings.append(fw)
    notes = [f"{label}: {w}" for w in warnings]
    return Emitted(backend.id, tuple(files), tuple(all_findings + notes), tuple(capacity_rows), tuple(all_findings),
                   launch)


# ---------------------------------------------------------------- text helpers

class Raw(str):
    """A shell word written as it is, not quoted: "$(dirname "$0")/lmcache.yaml"."""


class Beside(Raw):
    """A file written beside the script, `"$(dirname "$0")/NAME"`; `file` is NAME (the k8s target mounts it)."""

    file: str

    def __new__(cls, name: str) -> "Beside":
        word = super().__new__(cls, f'"$(dirname "$0")/{name}"')
        word.file = name
        return word


Flag = tuple[str, Optional[str]]


@record
class Launch:
    """What an engine target's launcher script execs: the program's words, its flags, the exports, and the
    comment lines that state its KV capacity (kvplan/engines/k8s.py writes the same command into a pod)."""

    program: tuple[str, ...]
    flags: tuple[Flag, ...]
    env: tuple[tuple[str, str], ...] = ()
    comments: tuple[str, ...] = ()
    #: Host memory the command's own KV tier keeps for one replica's ranks, bytes (vLLM's native offload, SGLang's
    #: HiCache); 0 without one. A tier behind LMCache is lmcache.yaml's (its host_bytes_per_worker row).
    host_memory: float = 0.0


def beside(name: str) -> Beside:
    """A file written beside the script, found whatever the working directory."""
    return Beside(name)


def lmcache_tier(tier: str, via_lmcache: bool) -> tuple[str, list[str]]:
    """The comment line, and the warning when the lmcache target is not the one writing, for a tier an
    engine reaches through LMCache."""
    note = [] if via_lmcache else [f"the {tier} tier goes through LMCache: also emit --target lmcache for "
                                   "lmcache.yaml"]
    return f"# {tier} tier through LMCache: lmcache.yaml beside this script", note


def shell_script(head: Sequence[str], program: Sequence[str], flags: Sequence[Flag],
                 env: Sequence[tuple[str, str]] = (), needs: Sequence[tuple[str, str]] = ()) -> str:
    """A POSIX sh launcher: shebang, comment lines, exports, a check of each variable the user must set
    (`needs`: name, what it holds; sh stops with that message when it is unset or empty), then `exec program`,
    one flag per line.

    Every word is shlex-quoted; an env value is written as given (the caller quotes it: it may use
    "$(dirname "$0")" to find a file written beside the script).
    """

    lines = ["#!/bin/sh", *comment_lines(head)]
    lines += [f"export {k}={shell_word(v)}" for k, v in env]
    lines += [f': "${{{k}:?{shell_word(why).replace(chr(34), chr(39))}}}"' for k, why in needs]
    lines.append("exec " + " ".join(shlex.quote(shell_word(w)) for w in program) + (" \\" if flags else ""))
    for j, (flag, value) in enumerate(flags):
        word = None if value is None else value if isinstance(value, Raw) else shlex.quote(shell_word(value))
        part = shlex.quote(flag) if word is None else f"{shlex.quote(flag)} {word}"
        lines.append(f"    {part}" + (" \\" if j < len(flags) - 1 else ""))
    return "\n".join(lines) + "\n"


def comment_lines(head: Sequence[str], markers: tuple[str, ...] = ("#", "//")) -> list[str]:
    """Comment lines as a file takes them: every control or bidirectional-formatting character escaped
    (`controls.escaped`), a line feed too unless a comment line follows it, so that no text ends a comment.
    What a user wrote goes in as `controls.literal` already; this holds for any text a writer did not think of."""
    out: list[str] = []
    for line in head:
        first, *rest = line.split("\n")
        lines = [first]
        for part in rest:
            if part.startswith(markers):
                lines.append(part)
            else:
                lines[-1] += "\n" + part
        out += [controls.escaped(text) for text in lines]
    return out


def shell_word(word: str) -> str:
    """`word` when a launcher can hold it on one line: POSIX sh has no escape for a line feed or a carriage
    return but the character itself, which would start a line of the script (the language refuses them in a
    spec, KV019; this is for any other way in)."""
    at = controls.first(word)
    if at is not None:
        raise KvplanError(f"cannot write {controls.literal(word)} into a launcher script: it holds "
                          f"{controls.describe(word[at])}, which a shell word cannot hold on one line",
                          help="remove it from the spec or the name that holds it")
    return word
