"""SGLang 0.5.23's memory pool, below the planner: the planner fits each candidate against it and the SGLang
writer (kvplan/engines/sglang.py) writes the --mem-fraction-static it derives, so that advise, lint and sglang.sh
agree by construction (issue 20, item 2).

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

A candidate fits under SGLang when the pool that holds its tokens (in the hybrid sliding-window pool's terms for
gpt-oss and the other SWA_SINK_ARCHS: the full-attention pool and the SWA pool beside it) leaves the reserves
free, weights + pool + reserves ≤ device memory, and a --mem-fraction-static of at most 1 gives it.
"""

from __future__ import annotations

import functools
import math
from typing import Literal, Optional

from kvplan.base.records import record
from kvplan.base.units import fmt_bytes
from kvplan.catalog import DTYPES, Model
from kvplan.catalog.engines import get_engine
from kvplan.model.footprint import kappa, tokens_for_bytes
from kvplan.model.memory import GiB
from kvplan.model.pools.query import Fit, PoolQuery, ceil_div, whole

SGLANG = get_engine("sglang")
MiB = 2**20
#: arg_groups/attention_hook.py:243-268: aiter at a context above this scales --mem-fraction-static by AITER_SCALE.
AITER_CONTEXT = 8192
AITER_SCALE = 0.85


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


@record
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


def pool_shape(q: PoolQuery) -> PoolShape:
    """The pool SGLang builds for the candidate's model: the hybrid sliding-window pool for SWA_SINK_ARCHS models
    with windowed layers (full and SWA cells: KV heads per rank × (d + d_v) × layers × the dtype's element size,
    pool_configurator.py:702-716; an FP4 element is torch.float4_e2m1fn_x2's one byte), else one pool."""
    m, dtype_id, page = q.model, q.dtype_id, q.page
    full = cell_bytes(m, dtype_id, q.tp, q.pp)
    if m.architecture not in SWA_SINK_ARCHS or m.all_full or m.kv_kind == "mla":
        return PoolShape(full)
    stage = [m.windows[i] for i in _stage_layers(m.n_layers, q.pp)]
    n_full = sum(1 for w in stage if w is None)
    n_swa = len(stage) - n_full
    per_layer = max(1, m.n_kv // q.tp) * (m.head_dim + (m.v_head_dim or m.head_dim)) * (
        1 if dtype_id == "fp4" else int(DTYPES[dtype_id].width))
    # models/gpt_oss.py:131: the gpt-oss class reports sliding_window − 1 (load_model_utils.py:144-157)
    window = max(w for w in stage if w is not None) - (1 if m.architecture == "GptOssForCausalLM" else 0)
    fixed = 0
    chunk = prefill_chunk(q)
    if not q.prefix_caching and chunk > 0:
        # compute_swa_request_cap (pool_configurator.py:924-968) without speculative decoding: per request the
        # window + the eviction interval + a page of padding + a page of decode, over the requests per
        # attention-DP rank, + two prefill chunks in flight (overlap scheduling) + a page; whole pages
        per_request = window + SWA_EVICTION_INTERVAL + page + page
        cap = per_request * max(1, q.batch // max(1, q.attention_dp)) + 2 * chunk + page
        fixed = ceil_div(cap, page) * page
    return PoolShape(per_layer * n_full, per_layer * n_swa, n_full, n_swa, SWA_FULL_TOKENS_RATIO, fixed, window)


def prefill_chunk(q: PoolQuery) -> int:
    """--chunked-prefill-size as SGLang runs it: the pinned per-step token limit, else its GPU default."""
    if q.max_batched_tokens is not None:
        return q.max_batched_tokens
    return _gpu_defaults(q.device.memory / MiB, q.tp)[0]




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


@record
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
    needed: float = 0.0      # weights + the pool that holds the plan's tokens + the reserves, per GPU
    total: float = 0.0       # device memory
    wanted: int = 0          # the plan's pool's tokens: a pinned fraction's pool must hold them

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
        """Whether the plan's pool fits under SGLang: it leaves the reserves free, its exact fraction is at
        most 1, and the pool written (a pinned fraction's too) holds its tokens."""
        return fits_under(self.exact_text, self.needed, self.total) and self.tokens >= self.wanted


def fits_under(exact_text: str, needed: float, total: float) -> bool:
    """SGLang's fit: the fraction that gives the plan's pool is at most 1, and weights + that pool + the reserves
    fit the device (the planner's test, with SGLang's pool for the plan's KV)."""
    return float(exact_text) <= 1 and needed <= total


def _text(fraction: float) -> str:
    return f"{fraction:.3f}".rstrip("0").rstrip(".") or "0"




@functools.lru_cache(maxsize=1024)  # the planner asks it for each candidate; most share one figure
def full_tokens(model: Model, tokens: float, batch: int) -> float:
    """Token slots counted in every layer (the windowed ones included) as the tokens of one full-attention layer,
    as SGLang's hybrid pool counts them: each sequence's own context (kvplan.model.footprint.tokens_for_bytes of
    its bytes)."""
    per_seq = tokens / max(1, batch)
    return float(tokens_for_bytes(model, per_seq * kappa(model, 1.0), 1.0)) * batch


def held_tokens(q: PoolQuery, shape: PoolShape) -> int:
    """The (full-attention) pool's tokens that hold the candidate's KV on one attention group: whole pages."""
    tokens = q.plan_tokens
    groups = q.groups
    if shape.hybrid:  # as the writer's full_layer_sizing (kvplan/engines/sglang.py) counts them
        return ceil_div(whole(full_tokens(q.model, tokens, q.batch)) / groups, q.page) * q.page
    return ceil_div(whole(tokens / groups), q.page) * q.page


def fit(q: PoolQuery) -> Optional[Fit]:
    """The candidate against SGLang's own pool (what the planner filters with and sglang.sh is written from): the
    pool of every layer (the SWA pool beside the full one included) that holds its tokens. None for a KV dtype
    SGLang does not store (the planner's engine rule rejects it)."""
    if q.dtype_id not in SGLANG.kv_names:
        return None
    shape = pool_shape(q)
    total = float(q.device.memory)
    activation, runtime = q.reserves.resolve(total)
    pre = pre_model_load(total, float(runtime.value))
    scale = AITER_SCALE if aiter_applies(q) else 1.0
    tokens = held_tokens(q, shape)
    weights = q.weights
    exact_text, _ = exact_fraction(tokens, pre, weights, shape, q.page, scale)
    pool = shape.bytes(tokens, q.page)
    needed = weights + pool + float(activation.value + runtime.value)
    fits = fits_under(exact_text, needed, total)
    if q.memory_fraction is not None and q.sizing == "fill":
        # the deployment's own --mem-fraction-static (kvplan import): SGLang sizes its pool from it, so the
        # candidate fits only where that pool holds its tokens (memory_for writes the pin as it is)
        text = _text(q.memory_fraction)
        fits = fits and pool_tokens(float(text) * scale, pre, weights, shape, q.page) >= tokens
        return Fit(tokens, pool, needed, "--mem-fraction-static", text, fits)
    return Fit(tokens, pool, needed, "--mem-fraction-static", exact_text, fits)


def aiter_applies(q: PoolQuery) -> bool:
    """SGLang multiplies the fraction by AITER_SCALE: aiter at a context above AITER_CONTEXT."""
    return uses_aiter(q.model, q.device.name, q.tp) and q.context > AITER_CONTEXT


def memory_for(q: PoolQuery, *, tokens: int, memory_fraction: Optional[float],
               sizing: Literal["fill", "exact"]) -> SglangMemory:
    """--mem-fraction-static and the pool it gives for a pool of `tokens` (whole pages of `q.page`). exact: the
    plan's pool. fill: SGLang's default fraction for the GPU, or the exact one where the default holds less than
    the plan's pool (the plan's footprint is the least the engine must get); where the plan does not fit under
    SGLang (fits_under) the default is written and the findings say so. A pinned `memory_fraction` (kvplan import)
    is the deployment's own; an --activation-reserve replaces SGLang's reserved memory."""
    shape = pool_shape(q)
    total = float(q.device.memory)
    activation, runtime_value = q.reserves.resolve(total)
    runtime = float(runtime_value.value)
    given_activation = q.reserves.activation
    weights = q.weights
    pre = pre_model_load(total, runtime)
    aiter = aiter_applies(q)
    scale = AITER_SCALE if aiter else 1.0
    exact_text, exact_applied = exact_fraction(tokens, pre, weights, shape, q.page, scale)
    if given_activation is None:
        default, reserved = default_fraction(total, q.tp, q.pp, q.batch)
        why = (f"SGLang's default rule for this GPU (arg_groups/memory_hook.py:281-342, reserved "
               f"{fmt_bytes(reserved)}, assumed)")
    else:  # --activation-reserve replaces SGLang's reserved memory
        reserved = float(given_activation)
        default = math.floor((total - reserved) / total * 1000) / 1000
        why = f"(memory − --activation-reserve {fmt_bytes(reserved)}) / memory"
    default_tokens = pool_tokens(float(_text(default)) * scale, pre, weights, shape, q.page)
    needed = weights + shape.bytes(tokens, q.page) + float(activation.value) + runtime
    fits = fits_under(exact_text, needed, total)
    if memory_fraction is not None and sizing == "fill":  # the deployment's own fraction (kvplan import)
        text = _text(memory_fraction)
        applied = float(text) * scale
        how = "pin memory_fraction: the deployment's --mem-fraction-static"
    elif fits and (sizing == "exact" or default_tokens < tokens):
        text, applied = exact_text, exact_applied
        how = ("solved so that the pool is the plan's, in whole pages" if sizing == "exact" else
               f"the plan's pool: {why} gives {_text(default)}, {default_tokens:,} tokens, less than the plan's "
               f"{tokens:,}")
    else:
        text = _text(default)
        applied = float(text) * scale
        how = why
    held = pool_tokens(applied, pre, weights, shape, q.page)
    return SglangMemory(text, applied, pre, shape.full_cell, q.page, held, aiter, how, exact_text,
                        reserved if given_activation is None else None, shape if shape.hybrid else None,
                        needed, total, tokens)
