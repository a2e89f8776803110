"""LMCache 0.5.6's tier as it sizes it, below the planner (issue 20, item 2): the bytes one engine worker (one per
GPU) allocates for `max_local_cpu_size` or `max_local_disk_size` and the tokens they hold in LMCache's chunks.
The LMCache writer (kvplan/engines/lmcache.py) writes what these functions derive. LMCache keeps no GPU pool of
its own, so it has no entry in `FORMULAS`: the GPU fit is its loader engine's.

    bytes   = int(size × 1024³) (lmcache/v1/cache_engine.py:2087-2110), size the fewest hundredths of a GiB that
              hold the plan's tier bytes per worker (LMCache's default 5.0 GiB as staging in front of a disk or
              remote tier, v1/config.py:88-113)
    chunk   = layers × (1 if MLA else 2) × 256 × KV heads per TP shard × head size × element bytes
              (lmcache/integration/vllm/utils.py:405-415): 2 B for 16-bit, else 1 (uint8)
    tokens  = bytes // chunk × 256
"""

from __future__ import annotations

import math

from kvplan.base.records import record
from kvplan.model.pools.query import KvLayout

#: LMCache's default chunk size in tokens (engines.md).
CHUNK_SIZE = 256
#: LMCache's default CPU size in GiB (lmcache/v1/config.py:88-113), kept as the staging level in front of a disk or
#: remote tier.
DEFAULT_CPU_GB = 5.0
GiB = 1024**3


def gib_up(x: float) -> float:
    """The fewest hundredths of a GiB whose int(value × 1024³) bytes, as LMCache reads them, hold `x` bytes."""
    v = max(1, math.ceil(x / GiB * 100))
    while int(v / 100 * GiB) < x:
        v += 1
    return v / 100


def lmcache_bytes(size_gib: float) -> int:
    """The bytes LMCache allocates for a size in GiB: int(size × 1024**3) (cache_engine.py:2087-2110)."""
    return int(size_gib * GiB)


def element_bytes(dtype_id: str) -> int:
    """Bytes per element of vLLM's KV torch dtype, which LMCache's chunks use: 2 for 16-bit, else 1 (uint8)."""
    return 2 if dtype_id in ("bf16", "fp16") else 1


def chunk_bytes(layout: KvLayout, dtype_id: str, mla: bool) -> int:
    """One LMCache chunk: kv_shape (layers, 1 if MLA else 2, chunk_size, KV heads, head size) × element bytes
    (lmcache/integration/vllm/utils.py:405-415)."""
    return layout.layers * (1 if mla else 2) * CHUNK_SIZE * layout.heads * layout.head_size * element_bytes(dtype_id)


@record
class Tier:
    """One worker's LMCache tier: the GiB written for the plan's bytes (`size`), the bytes LMCache allocates at the
    level it sizes (`held`: that size for a host or disk tier, the default staging level otherwise), one chunk's
    bytes and the tokens `held` holds in whole chunks."""

    size: float
    held: int
    chunk: int
    tokens: int


def tier(layout: KvLayout, dtype_id: str, mla: bool, per_worker: float, local: bool) -> Tier:
    """The tier for the plan's `per_worker` bytes: `local` (host or disk) at its own size, else (a remote store)
    LMCache's default CPU level in front of it."""
    size = gib_up(per_worker)
    chunk = chunk_bytes(layout, dtype_id, mla)
    held = lmcache_bytes(size if local else DEFAULT_CPU_GB)
    return Tier(size, held, chunk, held // chunk * CHUNK_SIZE)
