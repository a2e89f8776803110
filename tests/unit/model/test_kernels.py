"""Decode-kernel settings: FlashAttention's split heuristic, FlashInfer split sizes, heads per rank,
tensor-core choice, backends by device generation, kernel time, and golden `emit --target flashinfer`.

The expected split counts below are worked out by hand from the heuristic's statement
(hopper/heuristics.h): with B = batch × KV heads blocks (one M block each: a decode query
packs into one), N = ceil(context / 128) KV blocks and S SMs,
  1. B ≥ 0.8·S                      → 1 split
  2. N ≤ 4                          → 1 split
  3. otherwise, over s = 1..min(128, S, N), eff(s) = w / ceil(w) with w = B·s / S;
     the answer is the smallest s with eff(s) ≥ 0.85 · max eff.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.catalog import DTYPES, Device, get_device, get_model
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors
from kvplan.model.kernels import flashinfer as fi
from kvplan.model.kernels.splits import (
    fa3_decode_tile,
    fa_num_splits,
    fa_split,
    flashinfer_split,
    num_splits_heuristic,
    wave_efficiency,
)

# (batch, KV heads, context, SMs, expected splits) — arithmetic per case in the comment.
SPLIT_CASES = [
    # B=8 < 105.6; N=1000; s≤128. eff=8s/132 rises to 128/132 at s=16; s=33 gives 2 waves → max 1.0.
    # s=14: 112/132 = .848 < .85; s=15: 120/132 = .909 ≥ .85 → 15
    (1, 8, 128_000, 132, 15),
    # B=32; eff(1..4) = 32/132 .242, .485, .727, 128/132 .970 (max 1.0 at s=33) → 4
    (32, 1, 128_000, 132, 4),
    # B=128 ≥ 0.8·132 = 105.6 → 1
    (16, 8, 128_000, 132, 1),
    # B=104 < 105.6; N=250. eff = (26s/33)/ceil: s=1..4 all .788; s=5: 130/33 = 3.94 → 3.94/4 = .985 → 5
    (13, 8, 32_000, 132, 5),
    # N = ceil(512/128) = 4 ≤ 4 → 1
    (1, 8, 512, 132, 1),
    # N = 5, s ≤ 5. eff = 8s/132: .061 .121 .182 .242 .303; max .303, .85·max = .258 → s=5
    (1, 8, 513, 132, 5),
    # B=1, N=7813, s ≤ 128: eff = s/132, max 128/132 = .9697, .85·max = .8242 → s ≥ 108.8 → 109
    (1, 1, 1_000_000, 132, 109),
    # B=32, N=64, s ≤ 64: as case 2 → 4 (s=3 .727, s=4 .970)
    (4, 8, 8192, 132, 4),
    # FlashAttention's own example: 48 blocks on 108 SMs; s=1 .444, s=2 96/108 = .889 (max 1.0 at s=9) → 2
    (48, 1, 4096, 108, 2),
    # B=8, N=16, s ≤ 16: eff = 8s/132, max 128/132 = .9697 (s=16), .85·max = .8242;
    # s=13: 104/132 = .788; s=14: 112/132 = .848 → 14
    (2, 4, 2048, 132, 14),
    # B200, 148 SMs: B=8; 8s/148 ≥ .85 needs s ≥ 15.7; s=15 .811, s=16 128/148 = .865 (max 1.0 at s=37) → 16
    (1, 8, 128_000, 148, 16),
    # B=64 < 118.4: s=1 64/148 = .432, s=2 128/148 = .865 → 2
    (8, 8, 64_000, 148, 2),
    # B=120 ≥ 0.8·148 = 118.4 → 1
    (15, 8, 64_000, 148, 1),
    # B=112: eff(1..4) = 112s/148 / ceil = .757 each; s=5: 560/148 = 3.78 → /4 = .946 → 5
    (14, 8, 64_000, 148, 5),
    # MI300X, 304 CUs: B=16; 16s/304 ≥ .85 needs s ≥ 16.15; s=16 .842, s=17 272/304 = .895 (max 1.0 at 19) → 17
    (16, 1, 64_000, 304, 17),
    # B=1, s ≤ 128: eff = s/304, max 128/304 = .4211, .85·max = .3579; s=108 .3553, s=109 .3586 → 109
    (1, 1, 64_000, 304, 109),
    # B=64: eff = (4s/19)/ceil: s=4 16/19 = .842 (< .85), s=5..8 ≤ .842, s=9 36/19 = 1.895 → /2 = .947 → 9
    (64, 1, 64_000, 304, 9),
    # B=24, N=782: eff = (2s/11)/ceil: s=4 .727, s=5 10/11 = .909 → 5
    (3, 8, 100_000, 132, 5),
    # B=40, N=32: eff = (10s/33)/ceil; max over s ≤ 32 is s=23: 230/33 = 6.97 → .9957; .85·max = .8463;
    # s=2 20/33 = .606, s=3 30/33 = .909 → 3
    (1, 40, 4096, 132, 3),
    # N = ceil(640/128) = 5: as case 6 → 5
    (1, 8, 640, 132, 5),
    # one SM: B=1 ≥ 0.8 → 1
    (1, 1, 100, 1, 1),
    # B=96 < 105.6, N=16: eff = (8s/11)/ceil: s=1 .727, s=2 1.4545/2 = .727, s=3 2.18/3 = .727,
    # s=4 2.909/3 = .970 → 4
    (12, 8, 2048, 132, 4),
]


@pytest.mark.parametrize("batch,heads,context,sms,expected", SPLIT_CASES)
def test_fa_num_splits_matches_hand_computed_heuristic(batch: int, heads: int, context: int, sms: int,
                                                       expected: int) -> None:
    assert fa_num_splits(batch, heads, context, sms) == expected


def test_split_table_is_large_enough() -> None:
    assert len(SPLIT_CASES) >= 20


def test_windowed_layers_load_window_plus_block() -> None:
    # window_left 4095 (W = 4096), block_m 64: loaded = 4095 + 0 + 1 + 64 = 4160 → N = ceil(4160/128) = 33,
    # s ≤ 33; B=8 → as the 128k case: 15. Still local at 128k, so N differs but the answer does not.
    c = fa_split(1, 8, 128_000, 132, window_left=4095)
    assert c.n_blocks == 33 and c.splits == 15
    # a window that covers the context is not local (FA resets window_left ≥ seqlen_k − 1 to −1)
    assert fa_split(1, 8, 2000, 132, window_left=4095).n_blocks == math.ceil(2000 / 128)


def test_mla_tile_and_split() -> None:
    # FA3 MLA decode: qk 64 (rope) with v 512 → tile (64, 64). B=4, N=1000: 4s/132 ≥ .85 needs s ≥ 28.05;
    # s=28 .848, s=29 116/132 = .879 (max 1.0 at s=33) → 29
    assert fa3_decode_tile(64, 512) == (64, 64)
    assert fa_num_splits(4, 1, 64_000, 132, 64) == 29


def test_tiles_follow_tile_size_fwd_sm90() -> None:
    assert fa3_decode_tile(128) == (64, 128)          # one MMA warpgroup, paged KV without TMA
    assert fa3_decode_tile(128, kv_bytes=1) == (64, 96)
    assert fa3_decode_tile(256) == (128, 80)
    assert fa3_decode_tile(96) == (192, 128)


def test_l2_branch_splits_by_kv_head_size() -> None:
    # 200 blocks ≥ 105.6 but a 120 MiB KV head > 50 MiB L2 with 300 ≥ 264 M blocks, not causal:
    # ceil(120/50) = 3 splits; causal or local never split there.
    mib = 1024 * 1024
    assert num_splits_heuristic(200, 132, 1000, 300, 120 * mib, False, 128) == 3
    assert num_splits_heuristic(200, 132, 1000, 300, 120 * mib, True, 128) == 1
    assert num_splits_heuristic(200, 132, 1000, 300, 120 * mib, False, 2) == 2   # capped by max_splits
    assert num_splits_heuristic(200, 132, 1000, 10, 120 * mib, False, 128) == 1  # too few queries


@settings(max_examples=300, deadline=None)
@given(blocks=st.integers(1, 400), sms=st.integers(1, 320), n_blocks=st.integers(1, 5000))
def test_heuristic_laws(blocks: int, sms: int, n_blocks: int) -> None:
    s = num_splits_heuristic(blocks, sms, n_blocks, 1, 0, False, 128)
    limit = min(128, sms, n_blocks)
    assert 1 <= s <= max(1, limit)
    if blocks >= 0.8 * sms or n_blocks <= 4:
        assert s == 1
        return
    effs = [wave_efficiency(blocks, k, sms) for k in range(1, limit + 1)]
    best = max(effs)
    assert effs[s - 1] >= 0.85 * best - 1e-6                        # good enough ...
    assert all(e < 0.85 * best + 1e-6 for e in effs[: s - 1])        # ... and the fewest such


def test_flashinfer_split_size_covers_the_pages() -> None:
    # B200: B = 32 × 1, pages = 128000/16 = 8000; 32s/148: s=3 .649, s=4 128/148 = .865 → 4 splits of 2000 pages
    choice, size = flashinfer_split(32, 1, 128_000, 148, 16)
    assert (choice.splits, size, choice.n_blocks) == (4, 2000, 8000)
    # a window: pages of min(context, W) = 4096 tokens → 256 pages
    choice, size = flashinfer_split(1, 8, 128_000, 132, 16, window_left=4095)
    assert choice.n_blocks == 256 and size * choice.splits >= 256 > size * (choice.splits - 1)


@settings(max_examples=200, deadline=None)
@given(batch=st.integers(1, 256), heads=st.integers(1, 16), context=st.integers(1, 2_000_000),
       sms=st.sampled_from([108, 132, 148, 304]), page=st.sampled_from([1, 16, 32, 64]))
def test_flashinfer_split_partitions_pages(batch: int, heads: int, context: int, sms: int, page: int) -> None:
    choice, size = flashinfer_split(batch, heads, context, sms, page)
    pages = math.ceil(context / page)
    assert choice.n_blocks == pages
    assert size * choice.splits >= pages and size * (choice.splits - 1) < pages


# ------------------------------------------------------------------ kernel config

def _plan(model: str, device: Any, tp: int, *, pp: int = 1, kv: str = "bf16", batch: int = 8,
          context: int = 32_000, block: int = 16, weights: str = "bf16", placement: str = "striped",
          retention: float = 1.0, sharing: float = 1.0) -> Any:
    """A stand-in for planner.plan.Plan carrying only what kernel_config reads."""
    dev = get_device(device) if isinstance(device, str) else device
    sc = SimpleNamespace(model=get_model(model), device=dev, batch=batch, context=context, weights=DTYPES[weights])
    return SimpleNamespace(scenario=sc, tp=tp, pp=pp, n_devices=tp * pp, kv_dtype=DTYPES[kv], block_size=block,
                           retention=retention, sharing=sharing, placement=placement)


@pytest.mark.parametrize("model,tp,qo,kv,copies,tc", [
    ("llama-3-70b", 4, 16, 2, 1, True),     # 64/4 = 16 query, 8/4 = 2 KV: group 8 ≥ 4
    ("llama-3-70b", 8, 8, 1, 1, True),      # 8 KV heads over 8 ranks: one each
    ("llama-3-70b", 16, 4, 1, 2, True),     # 16 ranks > 8 KV heads: each head on 2 ranks; group 4
    ("phi-3-mini", 1, 32, 32, 1, False),    # multi-head attention: group 1
    ("qwen2.5-7b", 1, 28, 4, 1, True),      # group 7
    ("qwen2.5-7b", 2, 14, 2, 1, True),
    ("gemma-2-9b", 2, 8, 4, 1, False),      # 16/2 query, 8/2 KV: group 2 < 4
    ("mistral-7b", 8, 4, 1, 1, True),       # 32/8, 8/8: group 4, the threshold
    ("llama-2-13b", 4, 10, 10, 1, False),   # 40 heads, MHA
])
def test_heads_per_rank_and_tensor_cores(model: str, tp: int, qo: int, kv: int, copies: int, tc: bool) -> None:
    kc = fi.kernel_config(_plan(model, "h100-sxm", tp))
    assert (kc.num_qo_heads, kc.num_kv_heads, kc.kv_head_copies, kc.use_tensor_cores) == (qo, kv, copies, tc)
    assert kc.num_qo_heads % kc.num_kv_heads == 0
    assert kc.wrapper == "flashinfer.BatchDecodeWithPagedKVCacheWrapper"


@pytest.mark.parametrize("device,kv,backend", [
    ("h100-sxm", "bf16", "fa3"), ("h200", "bf16", "fa3"), ("h100-sxm", "fp8", "fa2"),
    ("b200", "bf16", "trtllm-gen"), ("gb200", "fp8", "trtllm-gen"), ("a100-80g", "bf16", "fa2"),
    ("mi300x", "bf16", "auto"), ("tpu-v5p", "bf16", "auto"),
])
def test_backend_by_device_generation(device: str, kv: str, backend: str) -> None:
    kc = fi.kernel_config(_plan("llama-3-70b", device, 8, kv=kv))
    assert kc.backend == backend
    assert (kc.arch == "not-cuda") == (device in ("mi300x", "tpu-v5p"))


def test_missing_sm_count_is_assumed_and_said() -> None:
    base = get_device("h100-sxm")
    custom = Device(id="my-gpu", name="my-gpu", memory=base.memory, bandwidth=base.bandwidth, compute=base.compute,
                    compute_fp8=None, partitions=1, fabric=None, sm_count=None, host_link=None, scaleup_link=None)
    kc = fi.kernel_config(_plan("llama-3-8b", custom, 1))
    assert kc.sm_count.evidence.value == "assumed" and kc.sm_count.value == fi.DEFAULT_SM_COUNT
    assert kc.backend == "auto"
    assert any("no SM count" in w for w in kc.warnings)
    assert all(g.split.sms == fi.DEFAULT_SM_COUNT for g in kc.groups)
    catalog = fi.kernel_config(_plan("llama-3-8b", "h100-sxm", 1))
    assert catalog.sm_count.evidence.value == "reported" and catalog.sm_count.value == 132


@pytest.mark.parametrize("kv,torch_name,ok", [("bf16", "torch.bfloat16", True), ("fp16", "torch.float16", True),
                                              ("fp8", "torch.float8_e4m3fn", True),
                                              ("int4", "torch.float8_e4m3fn", False),
                                              ("int2", "torch.float8_e4m3fn", False)])
def test_kv_dtypes(kv: str, torch_name: str, ok: bool) -> None:
    kc = fi.kernel_config(_plan("llama-3-8b", "h100-sxm", 1, kv=kv))
    assert kc.kv_data_type == torch_name and kc.kv_dtype_supported is ok
    assert any(w.startswith(f"kv_dtype {kv}") for w in kc.warnings) is (not ok)


@pytest.mark.parametrize("model,device,tp,pp,placement", [
    ("llama-3-70b", "b200", 4, 1, "striped"), ("llama-3-70b", "mi300x", 8, 1, "pinned"),
    ("gemma-2-9b", "h100-sxm", 2, 1, "striped"), ("llama-3-70b", "b200", 2, 2, "affinity"),
])
def test_kernel_bytes_add_up_to_the_step_accounting(model: str, device: str, tp: int, pp: int,
                                                    placement: str) -> None:
    """Every rank's KV reads summed over ranks are the step's KV bytes (roofline.kv_bytes_read, σ = 1),
    and the kernel time is those bytes over β_eff."""
    p = _plan(model, device, tp, pp=pp, kv="fp8", batch=12, context=50_000, placement=placement, retention=0.75)
    kc = fi.kernel_config(p)
    cfg = rf.Config(p.scenario.model, p.scenario.device, n_devices=tp * pp, tp=tp, w_kv=1.0,
                    factors=KvFactors(retention=0.75), placement=placement)
    step = float(rf.kv_bytes_read(cfg, 12, 50_000))
    assert kc.kv_bytes.value * tp * pp == pytest.approx(step, rel=1e-12)
    beta = float(rf.beta_eff(p.scenario.device, placement, 12)[0])
    assert kc.kernel_time.value == pytest.approx(kc.kv_bytes.value / beta, rel=1e-12)
    assert kc.kernel_time.evidence.value == "derived"
