"""What each serving engine can run, as the planner needs it (facts: shared/reference/engines.md).

The backends (kvplan/engines/) translate a plan into each engine's flag names;
this table only says which plan choices an engine can express at all, so that
the spec's `engine` constrains the search instead of a choice being silently
changed at emit time.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from kvplan.base.errors import CatalogError
from kvplan.catalog import suggest


@attrs.frozen(slots=True)
class Engine:
    id: str
    version: str
    kv_dtypes: tuple[str, ...]     # kvplan dtype ids the engine can store KV in
    eviction: bool                 # token eviction inside a request
    default_block: int             # tokens per KV page by default
    block_sizes: tuple[int, ...]   # page sizes the default attention backends accept
    prefix_caching: bool           # whether the engine can share prefix pages
    host_tier: bool                # native host-memory KV tier
    source: str
    pipeline: bool = True          # pipeline-parallel stages (engines.md names no SGLang flag)


ENGINES: Mapping[str, Engine] = {
    e.id: e
    for e in (
        Engine("any", "-", ("bf16", "fp16", "fp8", "int8", "int4", "fp4", "int2"), True, 16,
               (1, 8, 16, 32, 64, 128), True, True, "no engine constraint"),
        Engine("vllm", "0.33.0", ("bf16", "fp16", "fp8", "int8", "int4", "fp4"), False, 16, (16, 32, 64, 128),
               True, True,
               "docs/engines.md: --kv-cache-dtype (int8/int4 as *_per_token_head, nvfp4; no 2-bit); "
               "--block-size default 16, FLASH_ATTN multiple of 16; no token eviction"),
        Engine("sglang", "0.5.23", ("bf16", "fp16", "fp8", "fp4"), False, 1, (1, 16, 32, 64, 128), True, True,
               "docs/engines.md: --kv-cache-dtype fp8_e4m3/fp8_e5m2/nvfp4 (no int8, int4 or 2-bit); "
               "--page-size default 1; radix cache on by default; --enable-hierarchical-cache; "
               "no pipeline-parallel flag", pipeline=False),
        Engine("trtllm", "main (> 1.2.1)", ("bf16", "fp16", "fp8", "int8", "fp4"), False, 32, (8, 16, 32, 64, 128),
               True, True,
               "docs/engines.md: kv_cache_config.dtype auto|fp8|nvfp4, INT8 KV quantization; tokens_per_block 32; "
               "enable_block_reuse; host_cache_size; eviction only experimental on main"),
    )
}


def get_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise CatalogError(f"unknown engine '{name}'", help=suggest(name, ENGINES))
    return ENGINES[name]
