"""Split-KV counts for decode kernels: FlashAttention-3's heuristic, and a FlashInfer split size by the same model.

A decode step has one query token per sequence, so a kernel launches one
thread block per (sequence, KV head) and the device fills only when there are
enough of them. Splitting each sequence's KV into `splits` chunks multiplies
the blocks; FlashAttention picks the count by wave efficiency
(waves / ceil(waves), waves = blocks × splits / SMs).

The function below is a port of FlashAttention's `num_splits_heuristic`:

    Dao-AILab/flash-attention, hopper/heuristics.h,
    commit 13d0fd9cc276cb666afc88373e2d81449acdc749

with the inputs computed as its caller `get_num_splits` computes them
(hopper/flash_api.cpp, commit 000090d02f0398e9087a8823fc1f5242becfac99) and the
tile sizes of `tile_size_fwd_sm90` (hopper/tile_size.h, commit
07602adc2baa7a3ea037321ef2ca71c83096e5d5). Arithmetic follows the C++: float32
for the wave counts, the 85% comparison in double.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from kvplan.base.records import record

#: get_num_splits passes max_splits = 128 (hopper/flash_api.cpp).
FA_MAX_SPLITS = 128
#: num_splits_heuristic's assumed L2 size: 50 MiB (hopper/heuristics.h).
FA_L2_BYTES = 50 * 1024 * 1024


def num_splits_heuristic(total_mblocks: int, num_sms: int, num_n_blocks: int, num_m_blocks: int,
                         size_one_kv_head: int, is_causal_or_local: bool, max_splits: int) -> int:
    """FlashAttention-3's split count, line for line (hopper/heuristics.h @ 13d0fd9c)."""
    f32 = np.float32
    # "If we have enough to almost fill the SMs, then just use 1 split" -- unless one KV head
    # overflows L2 and there are at least two waves of queries (never in decode: one query).
    if f32(total_mblocks) >= f32(0.8) * f32(num_sms):
        if size_one_kv_head > FA_L2_BYTES and num_m_blocks >= num_sms * 2 and not is_causal_or_local:
            return min((size_one_kv_head + FA_L2_BYTES - 1) // FA_L2_BYTES, max_splits)
        return 1
    # "If num_n_blocks is too small, use 1 split."
    if num_n_blocks <= 4:
        return 1
    max_splits = min(max_splits, num_sms, num_n_blocks)
    max_efficiency = f32(0.0)
    efficiency = []
    for s in range(1, max_splits + 1):
        n_waves = f32(total_mblocks * s) / f32(num_sms)
        eff = f32(n_waves / f32(math.ceil(n_waves)))
        max_efficiency = max(max_efficiency, eff)
        efficiency.append(eff)
    for s in range(1, max_splits + 1):
        if float(efficiency[s - 1]) >= 0.85 * float(max_efficiency):
            return s
    return 1


def wave_efficiency(blocks: int, splits: int, sms: int) -> float:
    """waves / ceil(waves) with waves = blocks × splits / SMs: the busy fraction of the last wave's SMs
    averaged over all waves."""
    waves = blocks * splits / sms
    return waves / math.ceil(waves)


def _round_up_headdim(d: int) -> int:
    for r in (64, 96, 128, 192, 256):
        if d <= r:
            return r
    return 256


def fa3_decode_tile(head_dim: int, head_dim_v: Optional[int] = None, kv_bytes: int = 2,
                    local: bool = False) -> tuple[int, int]:
    """(kBlockM, kBlockN) of FA3's forward kernel in decode: `tile_size_fwd_sm90` (hopper/tile_size.h
    @ 07602adc) with paged KV read without TMA (decode takes that path: get_pagedkv_tma needs
    seqlen_q·g > kBlockM), not causal (seqlen_q = 1 drops causality), and one MMA warpgroup when
    head_dim is 128 (use_one_mma_wg: seqlen_q·g ≤ 64 for GQA groups up to 64)."""
    d = _round_up_headdim(head_dim)
    dv = _round_up_headdim(head_dim_v if head_dim_v is not None else head_dim)
    if head_dim_v is not None and head_dim_v > 256:
        dv = head_dim_v
    one_wg = d == 128
    if kv_bytes == 2:
        if d <= 64:
            if dv == 512:
                return 64, 64
            if dv == 256:
                return 128, 112
            return 192, 160          # paged_kv_non_TMA → 160
        if d <= 96:
            return 192, 128
        if d <= 128:
            return (64 if one_wg else 128), 128
        if d <= 192:
            return 128, 96           # paged_kv_non_TMA → 96
        return 128, 64 if local else 80
    if d <= 64:
        return 192, 160
    if d <= 96:
        return 192, 128
    if d <= 128:
        return (64, 96) if one_wg else (128, 160)
    if d <= 192:
        return 128, 160
    return 128, 64 if local else 128


@record
class SplitChoice:
    """A split count and the inputs that decided it."""

    splits: int
    blocks: int          # thread blocks without splitting: batch × KV heads × M blocks
    n_blocks: int        # KV blocks (or pages) per sequence and head
    sms: int
    efficiency: float    # wave efficiency at the chosen count
    reason: str


def _reason(blocks: int, n_blocks: int, sms: int, splits: int) -> str:
    if blocks >= 0.8 * sms:
        return f"no split: {blocks} blocks already fill ≥ 80% of {sms} SMs"
    if n_blocks <= 4:
        return f"no split: {n_blocks} KV blocks (≤ 4)"
    return (f"fewest splits whose wave efficiency is ≥ 85% of the best: {blocks} block{'s' * (blocks > 1)} × "
            f"{splits} split{'s' * (splits > 1)} on {sms} SMs")


def fa_split(batch: int, heads: int, context: int, sms: int, block_n: int = 128, *, q_per_kv: int = 1,
             block_m: int = 64, head_dim: int = 128, head_dim_v: Optional[int] = None, kv_bytes: int = 2,
             window_left: int = -1, max_splits: int = FA_MAX_SPLITS) -> SplitChoice:
    """The split count FA3 chooses for a decode step (num_splits = 0), with its inputs.

    `heads` is the KV heads on this rank; `q_per_kv` the query heads per KV head (PackGQA packs
    them into the M dimension); `window_left` the sliding window's left extent (W − 1), −1 for
    none. As in get_num_splits: total_mblocks = batch × heads × ceil(q_per_kv / block_m) and
    num_n_blocks = ceil(loaded / block_n), loaded = the context, or window_left + 1 + block_m
    for a window. (With variable-length batches FA3 passes batch = 1 and splits per sequence at
    run time; this is the fixed-batch count.)
    """
    if min(batch, heads, context, sms, block_n, q_per_kv, block_m) < 1:
        raise ValueError("batch, heads, context, SMs and block sizes must be at least 1")
    local = 0 <= window_left < context - 1
    loaded = min(context, window_left + 0 + 1 + block_m) if local else context
    n_blocks = -(-loaded // block_n)
    m_blocks = -(-q_per_kv // block_m)
    total = batch * heads * m_blocks
    size_one = context * (head_dim + (head_dim_v or head_dim)) * kv_bytes
    s = num_splits_heuristic(total, sms, n_blocks, m_blocks, size_one, local, max_splits)
    return SplitChoice(s, total, n_blocks, sms, wave_efficiency(total, s, sms), _reason(total, n_blocks, sms, s))


def fa_num_splits(batch: int, heads: int, context: int, sms: int, block_n: int = 128, **kw: int) -> int:
    """FA3's split count for `batch` sequences of `context` tokens over `heads` KV heads on `sms` SMs."""
    return fa_split(batch, heads, context, sms, block_n, **kw).splits


def flashinfer_split(batch: int, kv_heads: int, context: int, sms: int, page_size: int,
                     window_left: int = -1) -> tuple[SplitChoice, int]:
    """FlashInfer's `fixed_split_size` (pages per split) by the same wave-efficiency model.

    FlashInfer's decode kernel runs one block per (sequence, KV head), the query heads of a
    group together, so blocks = batch × kv_heads; its split unit is the page, so the KV
    blocks are the pages a sequence reads. The split count is num_splits_heuristic's on those
    inputs; the split size is the pages divided evenly among the splits (rounded up), and the
    returned count is the splits that size really makes (never more than the heuristic's).
    """
    if min(batch, kv_heads, context, sms, page_size) < 1:
        raise ValueError("batch, heads, context, SMs and page size must be at least 1")
    loaded = min(context, window_left + 1) if 0 <= window_left < context - 1 else context
    pages = -(-loaded // page_size)
    blocks = batch * kv_heads
    s = num_splits_heuristic(blocks, sms, pages, 1, 0, window_left >= 0, FA_MAX_SPLITS)
    size = -(-pages // s)
    used = -(-pages // size)   # whole-page splits: 7 pages in 6 splits are 4 splits of 2
    reason = _reason(blocks, pages, sms, s)
    if used != s:
        reason += f"; {s} splits of {size} whole pages leave {used} non-empty"
    return SplitChoice(used, blocks, pages, sms, wave_efficiency(blocks, used, sms), reason), size


__all__ = ["FA_L2_BYTES", "FA_MAX_SPLITS", "SplitChoice", "fa3_decode_tile", "fa_num_splits", "fa_split",
           "flashinfer_split", "num_splits_heuristic", "wave_efficiency"]
