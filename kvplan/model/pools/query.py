"""What an engine's memory-pool formula reads of one candidate deployment, and the arithmetic every formula
shares: the plan's KV bytes as token slots, and whole blocks of them (kvplan.model.pools)."""

from __future__ import annotations

import math
from typing import Literal, Optional

from kvplan.base.records import record
from kvplan.catalog import Device, Model
from kvplan.catalog.engines import PageScale
from kvplan.model import memory
from kvplan.model.memory import Reserves
from kvplan.model.roofline import kv_replication

#: How an engine's target is sized (`kvplan emit --sizing`): fill the engine's default share of memory, or write
#: the exact pool the plan needs (vLLM's --kv-cache-memory-bytes, TensorRT-LLM's max_tokens).
Sizing = Literal["fill", "exact"]


@record
class PoolSettings:
    """What a plan's pool depends on beyond the candidate's dtype and layout: the page size, the reserves, prefix
    caching, the pinned per-step token limit and memory fraction (None: the engine's default) and the spec's
    context bound (None: its context), and how the target is sized (`sizing`)."""

    page: int
    reserves: Reserves = Reserves()
    prefix_caching: bool = True
    max_batched_tokens: Optional[int] = None
    memory_fraction: Optional[float] = None
    context_bound: Optional[int] = None
    sizing: Sizing = "fill"


@record
class Fit:
    """One candidate against an engine's own pool: the pool's tokens that hold its KV (per attention group, whole
    pages), the bytes of that pool and what the GPU needs with it (weights + pool + reserves), the engine setting
    that gives exactly that pool, and whether it fits."""

    tokens: int
    pool: float
    needed: float
    setting: str             # the engine's flag: --mem-fraction-static, ...
    value: str               # what it is written as to give that pool
    fits: bool


@record
class PoolQuery:
    """One candidate as an engine sizes its pool: the model on the most loaded GPU of `tp` × `pp`, its KV dtype
    (`dtype_id`, `width` bytes per value as the engine stores it, scales included), the page size, the workload
    (batch and context, `attention_dp` groups that each hold their own sequences), the plan's KV bytes over the
    deployment (`kv_bytes`, replication included), the weights' bytes per parameter (`w_p`), the reserves, prefix
    caching, the pinned per-step token limit and memory fraction (None: the engine's default) and the longest
    request the engine must admit (`context_bound`, the spec's bound; None: `context`)."""

    model: Model
    device: Device
    dtype_id: str
    width: float
    tp: int
    pp: int
    page: int
    batch: int
    context: int
    kv_bytes: float
    w_p: float
    reserves: Reserves = Reserves()
    attention_dp: int = 1
    prefix_caching: bool = True
    max_batched_tokens: Optional[int] = None
    memory_fraction: Optional[float] = None
    context_bound: Optional[int] = None
    sizing: Sizing = "fill"

    @property
    def plan_tokens(self) -> float:
        """Token slots the plan's KV bytes hold: KV bytes / (bytes per token, all layers, replication included)."""
        m = self.model
        per_token = m.n_layers * m.kv_elems_per_layer * self.width * float(kv_replication(m, self.tp,
                                                                                            self.attention_dp))
        return whole(self.kv_bytes / per_token)

    @property
    def groups(self) -> int:
        """Attention groups that each hold their own sequences: a count that does not divide tp counts as the
        largest one that does (kvplan.model.roofline.kv_replication)."""
        return math.gcd(self.tp, max(1, self.attention_dp))

    @property
    def weights(self) -> float:
        """Weight bytes on the most loaded GPU (kvplan.model.memory)."""
        return float(memory.weights_per_device(self.model, self.w_p, self.tp, self.pp))


def whole(x: float) -> float:
    """Snap a float that is an integer up to rounding error (62980095999.99999) to it."""
    r = round(x)
    return float(r) if abs(x - r) <= 1e-9 * max(1.0, abs(x)) else x


def ceil_div(x: float, d: float) -> int:
    return math.ceil(whole(x / d))


@record
class KvLayout:
    """What one GPU stores per token: the most loaded pipeline stage's layers, the KV heads of one
    tensor-parallel shard (replicated beyond n_kv; an MLA latent on every rank)."""

    layers: int
    heads: int
    head_size: int
    head_size_v: int
    dtype_bytes: float
    scale_bytes: float = 0.0    # per token and KV head, K and V together: the engine's inline scales

    def page_bytes_per_layer(self, block: int) -> float:
        """engines.md: num_kv_heads (per TP shard) × block_size × ((head_size + head_size_v) × dtype bytes
        + the scale bytes the engine stores inline per token-head: vLLM's per-token-head fp32 scales)."""
        return self.heads * block * ((self.head_size + self.head_size_v) * self.dtype_bytes + self.scale_bytes)

    def block_bytes(self, block: int) -> float:
        return self.layers * self.page_bytes_per_layer(block)

    @property
    def token_bytes(self) -> float:
        return self.block_bytes(1)


def kv_layout(model: Model, tp: int, pp: int, dtype_bytes: float, scale: Optional[PageScale] = None) -> KvLayout:
    """`scale`: the engine's inline scale bytes for the dtype (its record's page_scales), none on MLA latents."""
    layers = math.ceil(model.n_layers / max(1, pp))
    if model.kv_kind == "mla":
        return KvLayout(layers, 1, model.mla_kv_rank + model.mla_rope_dim, 0, dtype_bytes)
    heads = math.ceil(model.n_kv / tp) if tp <= model.n_kv else 1
    dv = model.v_head_dim or model.head_dim
    extra = scale.bytes_per_token_head(model.head_dim, dv) if scale is not None else 0.0
    return KvLayout(layers, heads, model.head_dim, dv, dtype_bytes, extra)
