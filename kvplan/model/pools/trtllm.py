"""TensorRT-LLM's memory pool (main, newer than 1.2.1), below the planner: the planner fits each candidate against
it and the TensorRT-LLM writer (kvplan/engines/trtllm.py) writes the free_gpu_memory_fraction and max_tokens it
derives (issue 20, item 2). The formulas and their source lines are in kvplan/engines/trtllm.py's docstring and
docs/engine-memory.md § TensorRT-LLM:

    bytes per token  = x × 2 (16-bit), x (FP8), ceil(x/2) + ceil(x/16) (NVFP4),
                       x = 2 × layers × head_dim × ceil(n_kv / tp) (MHA),
                       layers × (kv_lora_rank + qk_rope_head_dim) (MLA)
    tokens           = int(fraction × free / bytes per token // tokens_per_block) × tokens_per_block,
                       free = device − weights − reserves, fraction < 1
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

from kvplan.base.records import record
from kvplan.catalog import Model
from kvplan.catalog.engines import get_engine
from kvplan.model.pools.query import Fit, PoolQuery, ceil_div, whole

TRTLLM = get_engine("trtllm")
#: KvCacheConfig.free_gpu_memory_fraction's default (tensorrt_llm/llmapi/llm_args.py, commit 0004396).
DEFAULT_FRACTION = 0.9


def fraction_up(numerator: float, denominator: float, step_bytes: float) -> tuple[str, Fraction]:
    """numerator / denominator rounded UP to the fewest decimals whose last digit is worth no more
    than `step_bytes` of the denominator, so an engine reading the fraction allocates less than one
    extra block. Returns the decimal text and its exact value."""
    digits = max(2, math.ceil(math.log10(denominator / step_bytes))) if step_bytes > 0 else 6
    scale = 10**digits
    num = Fraction(numerator) * scale / Fraction(denominator)
    units = math.ceil(num)
    text = f"{units // scale}.{units % scale:0{digits}d}".rstrip("0")
    text = text + "0" if text.endswith(".") else text
    return text, Fraction(units, scale)


def exact_fraction(pool: float, free: float, block_bytes: float) -> float:
    """pool / free rounded up with just enough decimals that the rounding adds less than one block, kept below 1:
    calculate_max_num_blocks asserts free_mem_fraction < 1.0 (resource_manager.py, commit d2a5560)."""
    if free <= 0:
        return 0.999
    text, value = fraction_up(pool, free, block_bytes)
    if value < 1:
        return float(text)
    digits = max(3, len(text.split(".")[1]))
    return 1 - 10.0**-digits


def kv_heads(model: Model, tp: int) -> int:
    """KV heads per layer on one rank as TensorRT-LLM allocates them: KVCacheManager.__init__'s
    num_kv_heads_per_layer = (num_kv_heads + tp_size - 1) // tp_size (resource_manager.py, commit d2a5560), so
    with tp above the KV heads each rank holds one whole head (the memory model's replicated heads)."""
    return -(-model.n_kv // max(1, tp))


def token_bytes(model: Model, dtype_id: str, tp: int, pp: int) -> int:
    """Bytes per token on the most loaded rank as the pool is allocated: KVCacheManager.get_cache_bytes_per_token,
    kv_factor × sum(num_kv_heads_per_layer) × head_dim, which calculate_max_num_blocks divides the free memory by
    (resource_manager.py, commit d2a5560; layers: ceil(L / pp), TensorRT-LLM's pp_layers gives the first ranks the
    extra layers). Not the static get_cache_size_per_token, head_dim × n_kv // tp, which only estimates during
    the profiling run and counts half a head per rank at tp = 2 × n_kv."""
    layers = math.ceil(model.n_layers / max(1, pp))
    if model.kv_kind == "mla":
        x = layers * (model.mla_kv_rank + model.mla_rope_dim)
    else:
        x = 2 * layers * model.head_dim * kv_heads(model, tp)
    if dtype_id == "fp4":
        return math.ceil(x / 2) + math.ceil(x / 16)  # 1 B per 2 elements + an FP8 scale per 16 elements
    return x * (2 if dtype_id in ("bf16", "fp16") else 1)


def fill_tokens(fraction: float, free: float, per_token: int, block: int) -> int:
    """Tokens a fraction of the free memory buys, in whole blocks: int(fraction × free / B // block) × block."""
    if free <= 0:
        return 0
    return int(fraction * free / per_token // block) * block


@record
class TrtllmMemory:
    """One GPU as TensorRT-LLM sizes it for a pool of `wanted` tokens."""

    use_exact: bool          # max_tokens is written
    fraction: float          # free_gpu_memory_fraction
    tokens: int              # the tokens TensorRT-LLM allocates
    per_token: int           # its bytes per token
    free: float              # device − weights − reserves
    wanted: int

    @property
    def fits(self) -> bool:
        return self.tokens >= self.wanted


def memory_for(q: PoolQuery, *, tokens: int, sizing: Literal["fill", "exact"]) -> TrtllmMemory:
    """The settings for a pool of `tokens` (whole blocks of `q.page`): exact, or fill where the default fraction
    holds them."""
    per_token = token_bytes(q.model, q.dtype_id, q.tp, q.pp)
    free = q.device.memory - q.weights - q.reserves.total(q.device.memory)
    filled = fill_tokens(DEFAULT_FRACTION, free, per_token, q.page)
    if sizing != "exact" and filled >= tokens:
        return TrtllmMemory(False, DEFAULT_FRACTION, filled, per_token, free, tokens)
    fraction = exact_fraction(tokens * per_token, free, per_token * q.page)
    return TrtllmMemory(True, fraction, min(tokens, fill_tokens(fraction, free, per_token, q.page)), per_token, free,
                        tokens)


def held_tokens(q: PoolQuery) -> int:
    """The pool's tokens that hold the candidate's KV on one attention group: whole blocks."""
    return ceil_div(whole(q.plan_tokens / q.groups), q.page) * q.page


def fit(q: PoolQuery) -> Fit | None:
    """The candidate against TensorRT-LLM's own pool; None for a KV dtype it does not store."""
    if q.dtype_id not in TRTLLM.kv_names:
        return None
    tokens = held_tokens(q)
    mem = memory_for(q, tokens=tokens, sizing="exact")
    pool = float(tokens * mem.per_token)
    return Fit(tokens, pool, q.weights + pool + q.reserves.total(q.device.memory), "free_gpu_memory_fraction",
               f"{mem.fraction:g}", mem.fits)
