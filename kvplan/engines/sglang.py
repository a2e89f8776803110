"""SGLang 0.5.23: the plan as a `python -m sglang.launch_server` command line, written to sglang.sh.

SGLang sizes its KV pool from the free memory it measures after CUDA and NCCL start-up, not from the
device (docs/engine-memory.md § SGLang; paths inside the installed `sglang/srt/` package, 0.5.23):

    pre_model_load   = device memory − runtime reserve            (distributed/bootstrap.py:193-212,
                                                                    model_executor/model_runner.py:1262; GiB,
                                                                    utils/common.py:576. kvplan's runtime
                                                                    reserve, assumed, --runtime-reserve)
    rest             = (pre − weights) − pre × (1 − fraction)     (mem_cache/kv_cache_configurator.py:2990-3060)
    pool tokens      = int(rest × 2^30) // cell // page × page     (model_executor/pool_configurator.py:637-647)
    cell (MHA)       = max(1, n_kv // attn_tp) × (d + d_v) × layers × dtype bytes   (pool_configurator.py:491-499)
    cell (MLA)       = (kv_lora_rank + qk_rope) × layers × dtype bytes                (pool_configurator.py:359-386)
    cell (nvfp4 MHA) = heads × (d/2 + d/16) × 2 × layers on SM100: FP4 data + one FP8 scale layout (TRT-LLM
                       GenMHA's)      (layers/quantization/fp4_kv_cache_quant_method.py:744-768)

`--sizing fill` (the default) writes SGLang's own default fraction for the GPU (arg_groups/memory_hook.py:281-342,
modelled below) and states the capacity it buys; `--sizing exact` solves for the fraction that gives exactly the
plan's pool (whole pages). On AMD GPUs with the aiter attention backend and a context above 8,192 SGLang
multiplies the fraction by 0.85 (arg_groups/attention_hook.py:243-268): fill keeps that (it is SGLang's default
behaviour), exact writes fraction / 0.85 so that the engine's product is the plan's pool (the same effect as
SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION=1, without an environment variable the reader might drop).

Prefix caching (the radix cache) is on by default: `--disable-radix-cache` is
written only when the plan turns it off. A host tier is SGLang's hierarchical
cache (`--enable-hierarchical-cache --hicache-size GB`, per rank, 10^9 B): its host
pool holds copies of device pages (mem_cache/pool_host/base.py:205-246), so it is
sized to the device pool plus the plan's host-tier tokens. An SSD or remote tier
goes through LMCache (`--enable-lmcache --lmcache-config-file`).

The engine's facts (dtype names, page sizes, defaults, setting names) are its catalog record
(kvplan.catalog.engines); this module holds the code that writes and reads them.
`read` reads a `python -m sglang.launch_server --flag ...` line back for `kvplan import --from sglang`.
"""

from __future__ import annotations

import math
import re
from typing import Optional

import attrs

from kvplan.base.evidence import Value, assumed, derived
from kvplan.base.units import fmt_bytes
from kvplan.catalog import DTYPES, Model
from kvplan.catalog.engines import block_sizes_for, get_engine, kv_refusal
from kvplan.engines import common
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile, Flag
from kvplan.engines.flagparse import (
    POOL_CAP,
    DeploymentReadError,
    Read,
    ReadFlag,
    cut,
    digits_in_range,
    exp2,
    model_flag,
    note_flag,
    parse_flags,
    plain_tokens,
    quantization,
    split_command,
    store,
    strip_env,
    table_readers,
    tokens_in_range,
    weights_dtype,
)
from kvplan.model.footprint import kappa, tokens_for_bytes
from kvplan.model.memory import GiB
from kvplan.planner.plan import Plan

ENGINE = get_engine("sglang")
F = ENGINE.flags
#: kvplan dtype -> SGLang's --kv-cache-dtype name (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names

MiB = 2**20
#: arg_groups/attention_hook.py:243-268: aiter at a context above this scales --mem-fraction-static by AITER_SCALE.
AITER_CONTEXT = 8192
AITER_SCALE = 0.85


# --------------------------------------------------------------- SGLang's memory arithmetic

def cell_bytes(model: Model, dtype_id: str, tp: int, pp: int) -> int:
    """Bytes per token of the KV pool on the most loaded GPU, as DefaultPoolConfigurator._compute_cell_size
    (model_executor/pool_configurator.py:340-534) computes it. Layers: the most loaded pipeline rank's,
    ceil(L / pp) (distributed/utils.py get_pp_indices gives the extra layers to the last ranks). Heads:
    ModelConfig.get_num_kv_heads(attn_tp) = max(1, n_kv // tp) under plain tensor parallelism."""
    layers = math.ceil(model.n_layers / max(1, pp))
    if model.kv_kind == "mla":
        dim = model.mla_kv_rank + model.mla_rope_dim
        if dtype_id == "fp4":  # pool_configurator.py:387-398: half the latent + one FP8 scale per 16 values
            return dim * layers // 2 + (dim // 16) * layers
        return dim * layers * int(DTYPES[dtype_id].width)
    heads = max(1, model.n_kv // tp)
    d, dv = model.head_dim, model.v_head_dim or model.head_dim
    if dtype_id == "fp4":
        # NVFP4KVCacheMethod.compute_cell_size (fp4_kv_cache_quant_method.py:744-768) on SM100 with SGLang's
        # trtllm_mha backends: FP4 data heads·(d/2)·L·2 + the native FP8 scale layout heads·(d/16)·L·2, no dequant
        # workspace. (SM120, or a FlashInfer prefill, adds the linear scale layout and a workspace: more bytes.)
        return heads * (d // 2) * layers * 2 + heads * (d // 16) * layers * 2
    return heads * (d + dv) * layers * int(DTYPES[dtype_id].width)


#: configs/model_config.py SWA_SINK_ARCHS: the architectures SGLang gives its hybrid sliding-window pool
#: (is_hybrid_swa_model), their layers split into full and sliding-window ones by the config's layer_types
#: (get_hybrid_layer_ids), which are kvplan's Model.windows.
SWA_SINK_ARCHS = frozenset({"GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM",
                            "IQuestQ1ForCausalLM"})
#: arg_groups/fields/schedule.py:150-162: --swa-full-tokens-ratio's fallback, SWA-pool tokens per full-pool token.
SWA_FULL_TOKENS_RATIO = 0.8
#: environ.py SGLANG_SWA_EVICTION_INTERVAL's default: the SWA tokens a request keeps beyond its window.
SWA_EVICTION_INTERVAL = 128


@attrs.frozen(slots=True)
class PoolShape:
    """How SGLang's pool configurator (model_executor/pool_configurator.py) turns one GPU's KV bytes into tokens.

    One pool (DefaultPoolConfigurator, 637-647): tokens = bytes // cell, whole pages. The hybrid sliding-window
    pool (HybridSWAPoolConfigurator, 656-922) keeps the full-attention layers' tokens and the sliding-window
    layers' tokens in two pools: full = int(bytes // (full cell + ratio × SWA cell)), whole pages, and
    SWA = int(full × ratio), whole pages. With --max-running-requests and the radix cache off,
    SWARequestCapPoolConfigurator (971-1046) sizes the SWA pool from the requests instead (`swa_fixed`) and
    gives the full pool the rest."""

    full_cell: int                 # B per token of the (full-attention) pool
    swa_cell: int = 0              # B per token of the SWA pool, all its layers; 0: one pool
    full_layers: int = 0
    swa_layers: int = 0
    ratio: float = SWA_FULL_TOKENS_RATIO
    swa_fixed: int = 0             # SWA tokens sized from the request cap; 0: ratio × full
    window: int = 0                # the sliding window SGLang's model class reports

    @property
    def hybrid(self) -> bool:
        return self.swa_cell > 0

    @property
    def cell(self) -> float:
        """Bytes per full-pool token: the cell, or full + ratio × SWA (the SWA share rides on each full token)."""
        if not self.hybrid or self.swa_fixed:
            return float(self.full_cell)
        return self.full_cell + self.ratio * self.swa_cell

    def tokens(self, available: int, page: int) -> int:
        """The full pool's tokens (max_total_num_tokens) for `available` bytes."""
        if not self.hybrid:
            return available // self.full_cell // page * page
        if self.swa_fixed:
            return int((available - self.swa_fixed * self.swa_cell) // self.full_cell) // page * page
        return int(available // self.cell) // page * page

    def swa_tokens(self, full: int, page: int) -> int:
        if self.swa_fixed:
            return self.swa_fixed
        return int(full * self.ratio) // page * page if self.hybrid else 0

    def bytes(self, full: int, page: int) -> float:
        """What pools of `full` tokens take: the full pool and the SWA pool beside it."""
        return float(full * self.full_cell + self.swa_tokens(full, page) * self.swa_cell)


def _stage_layers(n_layers: int, pp: int) -> range:
    """The layers of SGLang's most loaded pipeline stage, the last (distributed/utils.py get_pp_indices: the last
    L mod pp stages hold one layer more)."""
    pp = max(1, pp)
    return range(n_layers - math.ceil(n_layers / pp), n_layers)


def pool_shape(p: Plan, dtype_id: str, page: int) -> PoolShape:
    """The pool SGLang builds for the plan's model: the hybrid sliding-window pool for SWA_SINK_ARCHS models with
    windowed layers (full and SWA cells: KV heads per rank × (d + d_v) × layers × the dtype's element size,
    pool_configurator.py:702-716; an FP4 element is torch.float4_e2m1fn_x2's one byte), else one pool."""
    sc = p.scenario
    m = sc.model
    full = cell_bytes(m, dtype_id, p.tp, p.pp)
    if m.architecture not in SWA_SINK_ARCHS or m.all_full or m.kv_kind == "mla":
        return PoolShape(full)
    stage = [m.windows[i] for i in _stage_layers(m.n_layers, p.pp)]
    n_full = sum(1 for w in stage if w is None)
    n_swa = len(stage) - n_full
    per_layer = max(1, m.n_kv // p.tp) * (m.head_dim + (m.v_head_dim or m.head_dim)) * (
        1 if dtype_id == "fp4" else int(DTYPES[dtype_id].width))
    # models/gpt_oss.py:131: the gpt-oss class reports sliding_window − 1 (load_model_utils.py:144-157)
    window = max(w for w in stage if w is not None) - (1 if m.architecture == "GptOssForCausalLM" else 0)
    fixed = 0
    chunk = _prefill_chunk(p)
    if not p.prefix_caching and chunk > 0:
        # compute_swa_request_cap (pool_configurator.py:924-968) without speculative decoding: per request the
        # window + the eviction interval + a page of padding + a page of decode, over the requests per
        # attention-DP rank, + two prefill chunks in flight (overlap scheduling) + a page; whole pages
        per_request = window + SWA_EVICTION_INTERVAL + page + page
        cap = per_request * max(1, sc.batch // max(1, sc.attention_dp)) + 2 * chunk + page
        fixed = common.ceil_div(cap, page) * page
    return PoolShape(per_layer * n_full, per_layer * n_swa, n_full, n_swa, SWA_FULL_TOKENS_RATIO, fixed, window)


def _prefill_chunk(p: Plan) -> int:
    """--chunked-prefill-size as SGLang runs it: the pinned per-step token limit, else its GPU default."""
    batched = p.scenario.pinned.max_batched_tokens
    if batched is not None:
        return batched
    return _gpu_defaults(p.scenario.device.memory / MiB, p.tp)[0]


def page_sizes(p: Plan) -> tuple[int, ...]:
    """The --page-size values SGLang's default attention backend keeps on the plan's GPU: on Blackwell, trtllm_mha
    takes 16, 32, 64 or 128 and the MLA backends 32 or 64; any other value is changed to 64
    (arg_groups/overrides.py:1146-1199). Elsewhere the record's page sizes. The record holds them
    (Engine.blackwell_pages), so a plan made for SGLang already pages in one of them."""
    sc = p.scenario
    return block_sizes_for(ENGINE, sc.device, sc.model)


def uses_aiter(model: Model, device_name: str, tp: int) -> bool:
    """SGLang's default attention backend on AMD is aiter for MHA models, and for MLA models with 16 or 128
    heads per rank (arg_groups/model_override_base.py:300-350)."""
    if "AMD" not in device_name:
        return False
    return model.kv_kind != "mla" or max(1, model.n_q // tp) in (16, 128)


def pre_model_load(total: float, runtime: float) -> float:
    """SGLang's pre_model_load_memory in GiB: free memory after CUDA and NCCL start-up, modelled as the device
    memory less kvplan's runtime reserve (assumed; SGLang measures it on the GPU)."""
    return (total - runtime) / GiB


def pool_bytes(fraction: float, pre: float, weights: float) -> float:
    """KVCacheConfigurator._profile_available_bytes (kv_cache_configurator.py:2990-3060), in GiB floats as SGLang
    computes them: the free memory after the weights less the (1 − fraction) share of pre_model_load."""
    available = pre - weights / GiB
    return available - pre * (1 - fraction)


def pool_tokens(fraction: float, pre: float, weights: float, cell: int | PoolShape, page: int) -> int:
    """max_total_num_tokens: the pool configurator's tokens for int(pool × 2^30) bytes, whole pages (a PoolShape,
    or one pool of `cell` B per token); 0 where SGLang refuses to start."""
    rest = pool_bytes(fraction, pre, weights)
    if rest <= 0:
        return 0
    return max(0, _shape(cell).tokens(int(rest * GiB), page))


def _shape(cell: int | PoolShape) -> PoolShape:
    return cell if isinstance(cell, PoolShape) else PoolShape(cell)


def refusal(fraction: float, pre: float, weights: float) -> str:
    """SGLang's own words when the weights leave no KV pool (kv_cache_configurator.py:3042-3058)."""
    minimum = 1 - (pre - weights / GiB) / pre
    return (f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={fraction:g}. "
            f"Raise --mem-fraction-static above {math.ceil(minimum * 1000) / 1000:.3f}")


def _gpu_defaults(gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max batch) SGLang picks for a GPU of `gpu_mib` MiB
    (arg_groups/memory_hook.py:89-170)."""
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 4096, 48 if tp < 4 else 160
    if gpu_mib < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mib < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def default_fraction(total: float, tp: int, pp: int, batch: int) -> tuple[float, float]:
    """SGLang's default --mem-fraction-static for this GPU and its reserved memory in bytes
    (arg_groups/memory_hook.py:281-342): round((gpu − reserved) / gpu, 3), reserved = 512 MiB + 1.5 MiB per
    activation token (max(chunked prefill, 2048)) + tp·pp/8 GiB + 2 MiB per decode CUDA-graph batch (capped
    at --max-running-requests), at least 10 GiB on GPUs over 60 GiB. Left out (assumed 0): the prefill CUDA
    graph's non-torch memory, DeepEP buffers and multimodal adjustments."""
    gpu_mib = total / MiB
    chunk, max_bs = _gpu_defaults(gpu_mib, tp)
    reserved = 512 + 1.5 * max(chunk, 2048) + tp * pp / 8 * 1024 + 2 * min(max_bs, batch)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3), reserved * MiB


def exact_fraction(tokens: int, pre: float, weights: float, cell: int | PoolShape, page: int, scale: float
                   ) -> tuple[str, float]:
    """The shortest decimal fraction (its last digit worth at most one page of pre_model_load) whose pool,
    after SGLang's `scale` (aiter's 0.85, else 1), holds `tokens`: (text, the value SGLang applies)."""
    if pre <= 0:  # the runtime reserve takes the whole device: no fraction gives a pool
        return "1", scale
    shape = _shape(cell)
    page_gib = shape.cell * page / GiB
    digits = min(9, max(3, math.ceil(math.log10(pre / page_gib)))) if page_gib > 0 else 6
    unit = 10**digits
    want = (shape.bytes(tokens, page) / GiB + weights / GiB) / pre / scale
    units = math.ceil(want * unit)
    for _ in range(64):  # float rounding in SGLang's GiB arithmetic: a digit or two more at most
        if pool_tokens(units / unit * scale, pre, weights, shape, page) >= tokens:
            break
        units += 1
    text = f"{units / unit:.{digits}f}".rstrip("0")
    return (text + "0" if text.endswith(".") else text), float(text) * scale


@attrs.frozen(slots=True)
class SglangMemory:
    """One GPU as SGLang 0.5.23 sizes it."""

    fraction_text: str       # what --mem-fraction-static says
    applied: float           # the fraction SGLang applies (× 0.85 on aiter)
    pre: float               # pre_model_load_memory, GiB
    cell: int                # B per token of the (full-attention) pool
    page: int
    tokens: int              # max_total_num_tokens: the (full-attention) pool's tokens
    aiter: bool
    how: str                 # why this fraction
    exact_text: str          # the fraction that gives exactly the plan's pool
    reserved: Optional[float] = None  # SGLang's reserved memory under its default rule, B
    shape: Optional[PoolShape] = None  # the pool configurator's; None: one pool of `cell`

    @property
    def swa_tokens(self) -> int:
        """The sliding-window pool's tokens beside the full pool (0: one pool)."""
        return self.shape.swa_tokens(self.tokens, self.page) if self.shape is not None else 0

    @property
    def pool(self) -> float:
        """Bytes of every pool on the GPU: the full-attention pool and the SWA pool beside it."""
        return self.shape.bytes(self.tokens, self.page) if self.shape is not None else float(self.tokens * self.cell)

    @property
    def fits(self) -> bool:
        """Whether the plan's pool fits under SGLang: its exact fraction is at most 1."""
        return float(self.exact_text) <= 1


def _text(fraction: float) -> str:
    return f"{fraction:.3f}".rstrip("0").rstrip(".") or "0"


def sglang_memory(req: EmitRequest, sz: common.Sizing, dtype_id: str) -> SglangMemory:
    """--mem-fraction-static and the pool it gives. exact: the plan's pool. fill: SGLang's default fraction for
    the GPU, or the exact one where the default holds less than the plan's pool (the plan's footprint is the
    least the engine must get); where even that exceeds 1 the default is written and the findings say so."""
    p = req.plan
    sc = p.scenario
    shape = pool_shape(p, dtype_id, sz.block)
    pre = pre_model_load(sz.total, float(sz.runtime.value))
    aiter = uses_aiter(sc.model, sc.device.name, p.tp) and sc.context > AITER_CONTEXT
    scale = AITER_SCALE if aiter else 1.0
    plan_tokens = sz.blocks * sz.block
    exact_text, exact_applied = exact_fraction(plan_tokens, pre, sz.weights, shape, sz.block, scale)
    given = (req.reserves or p.reserves).activation
    if given is None:
        default, reserved = default_fraction(sz.total, p.tp, p.pp, sc.batch)
        why = (f"SGLang's default rule for this GPU (arg_groups/memory_hook.py:281-342, reserved "
               f"{fmt_bytes(reserved)}, assumed)")
    else:  # --activation-reserve replaces SGLang's reserved memory
        reserved = float(given)
        default = math.floor((sz.total - reserved) / sz.total * 1000) / 1000
        why = f"(memory − --activation-reserve {fmt_bytes(reserved)}) / memory"
    default_tokens = pool_tokens(float(_text(default)) * scale, pre, sz.weights, shape, sz.block)
    fits = float(exact_text) <= 1
    if sc.memory_fraction is not None and req.sizing == "fill":  # the deployment's own fraction (kvplan import)
        text = _text(sc.memory_fraction)
        applied = float(text) * scale
        how = "pin memory_fraction: the deployment's --mem-fraction-static"
    elif fits and (req.sizing == "exact" or default_tokens < plan_tokens):
        text, applied = exact_text, exact_applied
        how = ("solved so that the pool is the plan's, in whole pages" if req.sizing == "exact" else
               f"the plan's pool: {why} gives {_text(default)}, {default_tokens:,} tokens, less than the plan's "
               f"{plan_tokens:,}")
    else:
        text = _text(default)
        applied = float(text) * scale
        how = why
    tokens = pool_tokens(applied, pre, sz.weights, shape, sz.block)
    return SglangMemory(text, applied, pre, shape.full_cell, sz.block, tokens, aiter, how, exact_text,
                        reserved if given is None else None, shape if shape.hybrid else None)


def _refused_note(p: Plan, mapped: common.Mapped) -> list[str]:
    sc = p.scenario
    why = kv_refusal(ENGINE, p.kv_dtype.id, sc.device, sc.model)
    if why is None or mapped.dtype.id == p.kv_dtype.id:
        return []
    return [f"kv_dtype {p.kv_dtype.id}: {why} ({sc.device.id}, {sc.model.id}); written {mapped.dtype_name}"]


def _hicache(sz: common.Sizing, mem: SglangMemory) -> tuple[int, int, int]:
    """(--hicache-size GB, host pool tokens, tokens it adds): the host pool mirrors device pages, so it must
    hold the device pool plus the plan's host-tier tokens (pool_host/base.py:205-246: GB × 10^9 // cell, then
    one padding page)."""
    tier = common.ceil_div(sz.tier_tokens, sz.block) * sz.block
    gb = max(1, math.ceil((mem.tokens + tier) * mem.cell / 1e9))
    host = (int(gb * 1e9 // mem.cell) // mem.page + 1) * mem.page
    return gb, host, max(0, host - mem.tokens)


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "sglang.sh", label: str = "") -> Emitted:
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, attrs.evolve(common.runnable(BACKEND, ENGINE, p), block_sizes=page_sizes(p)))
    sz, notes = _sizing(req, mapped)
    findings: list[str] = []
    if mapped.dtype_name == "auto" and sc.weights.id != mapped.dtype.id:
        notes.append(f"KV dtype {mapped.dtype.id} is written `auto` (SGLang has no explicit name for it); auto "
                     f"follows the checkpoint's dtype, and the weights are {sc.weights.id}")
    findings += _refused_note(p, mapped)
    mem = sglang_memory(req, sz, mapped.dtype.id)
    flags: list[Flag] = [
        ("--model-path", common.model_ref(p)),
        (F.kv_dtype, mapped.dtype_name),
        (F.block, str(mapped.block)),
        ("--mem-fraction-static", mem.fraction_text),
        (F.tp, str(p.tp)),
    ]
    if p.pp > 1:
        flags.append((F.pp, str(p.pp)))
    flags += [(F.context, str(sc.context_bound)), (F.batch, str(sc.batch))]
    flags += common.pinned_engine_flags(sc, ENGINE.id)
    if not p.prefix_caching:
        flags.append(("--disable-radix-cache", None))
    memory = _memory_findings(mem, sz, sc.context)
    findings += memory
    # SGLang's own pool short of the plan's (or none at all): with a moved dtype, an error (common.finish)
    unfit = memory[0] if mem.tokens <= 0 else None if mem.fits else _unfit(mem, sz)
    tier_lines: list[str] = []
    if mapped.tier != "none":
        if mapped.tier == "host" and not via_lmcache:
            gb, host, adds = _hicache(sz, mem)
            flags += [("--enable-hierarchical-cache", None), ("--hicache-size", str(gb))]
            tier_lines.append(f"# host tier: --hicache-size {gb} GB per rank (10^9 B) = a host pool of {host:,} "
                              f"tokens; it mirrors the device pool's {mem.tokens:,}, so it adds {adds:,} tokens "
                              f"(the plan's host tier: {_contexts(adds, sc.context)} kept for reuse) beyond it")
        else:
            flags += [("--enable-lmcache", None), ("--lmcache-config-file", common.beside("lmcache.yaml"))]
            line, more = common.lmcache_tier(mapped.tier, via_lmcache)
            tier_lines.append(line)
            notes += more
    if sc.model.kv_kind == "mla" and p.tp > 1:
        notes.append(f"MLA under plain TP: each of the {p.tp} ranks stores every request's latent, as planned; with "
                     f"--enable-dp-attention --dp {p.tp} each rank stores only its own requests ({p.tp}x the "
                     "sequences)")
    # with DP attention every attention group's ranks keep a pool of their own (pin.attention_dp)
    total = mem.tokens * sc.attention_dp
    head = _head(req, label, sz, mem, total, tier_lines)
    launch = common.Launch(("python", "-m", "sglang.launch_server"), tuple(flags), (), tuple(head[1:]))
    text = common.shell_script(head, launch.program, launch.flags)
    how = (f"(pre_model_load {mem.pre:.6g} GiB × {mem.applied:.6g} − weights) // {_cell_text(mem)} B "
           f"per token, whole pages of {sz.block} (SGLang 0.5.23 kv_cache_configurator.py, pool_configurator.py)")
    rows = _rows(common.capacity(sz, total, how), mem, sz)
    return common.finish(BACKEND, mapped, None, [EmittedFile(name, text)], rows, notes, findings, launch=launch,
                         unfit=unfit)


def _sizing(req: EmitRequest, mapped: common.Mapped) -> tuple[common.Sizing, list[str]]:
    """The GPU's sizing and the model's notes; under SGLang's hybrid sliding-window pool both count the
    full-attention layers' tokens."""
    p = req.plan
    sz = common.size(p, mapped, req.reserves)
    hybrid = pool_shape(p, mapped.dtype.id, sz.block).hybrid
    notes = common.model_notes(p, BACKEND, slots=not hybrid)
    if not hybrid:
        return sz, notes
    notes.append(f"SGLang sizes {p.scenario.model.architecture} with its hybrid sliding-window pool "
                 "(HybridSWAPoolConfigurator): token figures are the full-attention layers' tokens, and the "
                 "sliding-window layers keep a pool of their own (the SWA pool, stated per GPU)")
    return full_layer_sizing(p, sz), notes


def _head(req: EmitRequest, label: str, sz: common.Sizing, mem: SglangMemory, total: int,
          tier_lines: list[str]) -> list[str]:
    """sglang.sh's comment lines: the capacity, the per-GPU pool, how the fraction was chosen, the tiers."""
    aiter_line = (f"; SGLang's aiter backend multiplies it by {AITER_SCALE} at context > {AITER_CONTEXT:,} "
                  f"(arg_groups/attention_hook.py:243-268): {mem.applied:.6g} applied" if mem.aiter else "")
    return [common.header(req, label or BACKEND.label),
            f"# KV capacity (derived): {common.capacity_text(sz, total)}; the plan stores "
            f"{common.fmt_int(math.ceil(sz.plan_tokens))} tokens for its batch of {sz.batch}",
            f"# per GPU: KV pool {common.fmt_int(mem.tokens)} tokens × {common.fmt_int(mem.cell)} B per token"
            f"{_swa_text(mem)} = {fmt_bytes(mem.pool)} (derived), weights {fmt_bytes(sz.weights)} (derived), "
            f"pre_model_load {fmt_bytes(mem.pre * GiB)} = device {fmt_bytes(sz.total)} − runtime reserve "
            f"{fmt_bytes(sz.runtime.value)} (assumed)",
            f"# --mem-fraction-static {mem.fraction_text} ({req.sizing}): {mem.how}{aiter_line}; pool = "
            "pre_model_load × fraction − weights",
            *tier_lines]


def full_layer_sizing(p: Plan, sz: common.Sizing) -> common.Sizing:
    """`sz` in SGLang's hybrid pool's terms: the plan's tokens in one full-attention layer (each sequence's own
    context, kvplan.model.footprint.tokens_for_bytes of its bytes), where the shared figures count a token slot
    in every layer, the windowed ones included."""
    m = p.scenario.model

    def full(tokens: float) -> float:
        per_seq = tokens / max(1, sz.batch)
        return float(tokens_for_bytes(m, per_seq * kappa(m, 1.0), 1.0)) * sz.batch

    tokens = common.round_whole(full(sz.tokens))
    blocks = common.ceil_div(tokens / p.scenario.attention_dp, sz.block)
    return attrs.evolve(sz, tokens=tokens, plan_tokens=common.round_whole(full(sz.plan_tokens)), blocks=blocks)


def _pool_bytes(mem: SglangMemory, tokens: int) -> float:
    return mem.shape.bytes(tokens, mem.page) if mem.shape is not None else float(tokens * mem.cell)


def _cell_text(mem: SglangMemory) -> str:
    """The bytes each full-pool token costs, as the configurator divides by them."""
    if mem.shape is None:
        return common.fmt_int(mem.cell)
    if mem.shape.swa_fixed:
        return f"{common.fmt_int(mem.cell)} (after the SWA pool's {mem.shape.swa_fixed:,} tokens)"
    return f"({common.fmt_int(mem.cell)} + {mem.shape.ratio:g} × {common.fmt_int(mem.shape.swa_cell)})"


def _swa_how(shape: PoolShape) -> str:
    if shape.swa_fixed:
        return ("SGLang's SWARequestCapPoolConfigurator (--max-running-requests with the radix cache off): "
                "the requests' windows + eviction interval + pages, two prefill chunks and a page")
    return (f"SGLang's HybridSWAPoolConfigurator: --swa-full-tokens-ratio {shape.ratio:g} (its default) × the "
            "full-attention pool, whole pages")


def _swa_text(mem: SglangMemory) -> str:
    """The SWA pool beside the full-attention pool, for the per-GPU comment."""
    if mem.shape is None:
        return ""
    sh = mem.shape
    return (f" in the {sh.full_layers} full-attention layers + SWA pool {common.fmt_int(mem.swa_tokens)} tokens × "
            f"{common.fmt_int(sh.swa_cell)} B per token in the {sh.swa_layers} sliding-window layers "
            f"({_swa_how(sh)})")


def _contexts(tokens: int, context: int) -> str:
    n = tokens // max(1, context)
    return f"{n} context{'' if n == 1 else 's'} of {context:,} tokens"


def _memory_findings(mem: SglangMemory, sz: common.Sizing, context: int) -> list[str]:
    """A pool SGLang refuses to start with, one that holds no request, or one short of the plan's."""
    plan_tokens = sz.blocks * sz.block
    aiter_fix = (f"; on aiter SGLang multiplies an explicit fraction by {AITER_SCALE} too: write it ÷ {AITER_SCALE}"
                 " or export SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION=1" if mem.aiter else "")
    if mem.tokens <= 0:
        return [f"SGLang would refuse to start: \"{refusal(mem.applied, mem.pre, sz.weights)}\" (modelled: "
                f"weights {fmt_bytes(sz.weights)} per GPU, pre_model_load {fmt_bytes(mem.pre * GiB)}){aiter_fix}; "
                "more GPUs (--tp-size, --pp-size) fix it where no fraction below 1 does"]
    out = []
    floor = mem.shape.window + mem.page if mem.shape is not None else 0
    if mem.shape is not None and floor >= mem.swa_tokens:
        out.append(f"SGLang would refuse to start: \"SWA pool ({mem.swa_tokens} tokens) cannot hold even one "
                   f"request: the prefill admission floor is sliding_window_size ({mem.shape.window}) + page_size "
                   f"({mem.page}). Increase --swa-full-tokens-ratio or the total KV budget.\" "
                   "(model_executor/pool_configurator.py:198-216)")
    if not mem.fits:
        out.append(f"{_unfit(mem, sz)}; written {mem.fraction_text}, which holds {mem.tokens:,} of the plan's "
                   f"{plan_tokens:,} tokens")
    if mem.tokens < context:
        out.append(f"SGLang's pool of {mem.tokens:,} tokens holds no request at --context-length {context:,}: raise "
                   f"--mem-fraction-static{aiter_fix}, or use more GPUs")
    return out


def _unfit(mem: SglangMemory, sz: common.Sizing) -> str:
    """SGLang's pool short of the plan's: the fraction that would hold it, above 1."""
    return (f"the plan's pool does not fit under SGLang: it needs --mem-fraction-static {mem.exact_text} > 1 "
            f"(weights {fmt_bytes(sz.weights)} + KV {fmt_bytes(_pool_bytes(mem, sz.blocks * sz.block))} of "
            f"{fmt_bytes(mem.pre * GiB)} free after start-up)")


def _rows(rows: tuple[tuple[str, Value], ...], mem: SglangMemory,
          sz: common.Sizing) -> tuple[tuple[str, Value], ...]:
    """The shared capacity rows with SGLang's own pool, cell and fraction. The memory needed is the other
    engines' sum, weights + SGLang's pool + the assumed reserves: it fits the device exactly when the fraction
    leaves the activation reserve free (what it leaves is its own row)."""
    left = mem.pre * GiB * (1 - mem.applied) if mem.tokens > 0 else 0.0
    own = {
        "kv_pool_per_gpu": derived(mem.pool, "B", f"{mem.tokens:,} tokens × {mem.cell:,} B per token (SGLang's cell)"
                                                  f"{_swa_text(mem)}"),
        "memory_needed_per_gpu": derived(sz.weights + mem.pool + sz.reserves, "B", "weights + KV pool + reserves"),
    }
    out = tuple((k, own.get(k, v)) for k, v in rows)
    extra: list[tuple[str, Value]] = [
        ("fraction_leaves_per_gpu", derived(left, "B", "pre_model_load × (1 − fraction): free beside weights and "
                                                       "the pool for activations and CUDA graphs")),
        ("kv_cell_bytes", derived(mem.cell, "B", "SGLang's bytes per token, all layers on the GPU "
                                                 "(pool_configurator.py)")),
        ("pre_model_load", assumed(mem.pre * GiB, "B", "free memory after CUDA/NCCL start-up: device memory − "
                                                       "runtime reserve (--runtime-reserve)")),
        ("mem_fraction_static", derived(float(mem.fraction_text), "1", mem.how)),
    ]
    if mem.shape is not None:
        extra.append(("swa_pool_tokens", derived(mem.swa_tokens, "tokens", _swa_how(mem.shape))))
    if mem.reserved is not None:
        extra.append(("sglang_reserved_memory", assumed(mem.reserved, "B", "SGLang's reserved memory under its "
                                                                          "default rule; --activation-reserve")))
    return out + tuple(extra)


# --------------------------------------------------------------- read back (kvplan import)

SGLANG_IRRELEVANT = frozenset({"--host", "--port", "--served-model-name", "--api-key", "--log-level",
                               "--tokenizer-path", "--chat-template", "--random-seed", "--revision", "--download-dir",
                               "--tool-call-parser", "--reasoning-parser", "--load-format"})
SGLANG_IRRELEVANT_FLAGS = frozenset({"--trust-remote-code", "--log-requests", "--enable-metrics",
                                     "--disable-cuda-graph", "--skip-server-warmup"})
_SGLANG_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SGLANG_MULT = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def sglang_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as SGLang reads it: case-sensitive SI (`128k`, `1M`) and IEC (`128Ki`) suffixes."""
    text = value.strip()
    m = _SGLANG_INT.fullmatch(text)
    hint = "SGLang's suffixes are case-sensitive: k M G T (powers of 1000) or Ki Mi Gi Ti (powers of 1024)"
    if m is None:
        if re.fullmatch(r"\d+(\.\d+)?[A-Za-z]+", text):
            raise DeploymentReadError(f"{flag} '{cut(value)}': SGLang refuses this suffix", help=hint)
        return plain_tokens(value, flag, "SGLang", hint), ""
    number, suffix = m.groups()
    digits_in_range(number, value, flag)
    if suffix.endswith("i"):
        if "." in number:
            raise DeploymentReadError(f"{flag} '{cut(value)}': SGLang refuses a decimal before {suffix}", help=hint)
        n = int(number) * _SGLANG_MULT[suffix]
        return tokens_in_range(n, value, flag), f"SGLang reads {suffix} as 2^{exp2(suffix)}: {n:,} tokens"
    n = int(float(number) * _SGLANG_MULT[suffix])
    return tokens_in_range(n, value, flag), ""


def _sglang_table() -> list[ReadFlag]:
    tier_sizing = "kvplan sizes the tier from the reuse economics"
    return [
        ReadFlag(("--model-path", "--model"), True, model_flag),
        ReadFlag(("--enable-hierarchical-cache",), False, store("tier", value="host")),
        ReadFlag(("--enable-lmcache",), False, store("tier", value="host")),
        ReadFlag(("--lmcache-config-file",), True, note_flag("LMCache settings are read by LMCache, not imported")),
        ReadFlag(("--hicache-storage-backend",), True,
              note_flag("a storage tier below host memory; the .kvp pins the host tier only")),
        ReadFlag(("--hicache-ratio",), True,
                 note_flag(f"host tier size as a multiple of the device pool; {tier_sizing}")),
        ReadFlag(("--hicache-size",), True, note_flag(f"host tier size in GB; {tier_sizing}")),
        ReadFlag(("--hicache-write-policy",), True, note_flag("how pages reach the host tier; not modelled")),
        ReadFlag(("--radix-eviction-policy",), True, note_flag("which cached prefixes leave first; not modelled")),
        *table_readers(ENGINE.id, sglang_tokens),
        ReadFlag(("--max-total-tokens",), True, note_flag(POOL_CAP)),
        ReadFlag(("--attention-backend",), True,
                 note_flag("the attention kernel; see `kvplan emit --target flashinfer`")),
        ReadFlag(("--dtype",), True, weights_dtype),
        ReadFlag(("--quantization",), True, quantization),
    ]


def read(text: str, base_dir: str = ".", where: str = "config") -> Read:
    """A `python -m sglang.launch_server --flag ...` line (or `sglang serve ...`) in kvplan's terms."""
    words = strip_env(split_command(text))
    if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m" and words[2].startswith("sglang"):
        words = words[3:]
    elif words[:2] == ["sglang", "serve"]:
        words = words[2:]
    elif words[:1] == ["sglang.launch_server"]:
        words = words[1:]
    r = Read(ENGINE.id)

    def positional(w: str) -> None:
        r.warn(f"'{w}': SGLang takes the model as --model-path; not imported")

    parse_flags(words, _sglang_table(), r, SGLANG_IRRELEVANT, SGLANG_IRRELEVANT_FLAGS, lambda f: f, positional)
    r.defaults("SGLang's radix cache is on by default", ENGINE.default_block, f"SGLang's default {F.block} on CUDA",
               f"{F.kv_dtype} auto (default)")
    return r


BACKEND = common.engine_backend(
    ENGINE, source="docs/engines.md § SGLang 0.5.23", build=lambda req: render(req), read=read,
)
