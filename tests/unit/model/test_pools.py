"""Each engine's memory pool below the planner (kvplan.model.pools): the figures against arithmetic done here."""

from __future__ import annotations

from kvplan.catalog import get_device, get_model
from kvplan.catalog.engines import ENGINES
from kvplan.model import pools
from kvplan.model.pools import lmcache, sglang, trtllm, vllm
from kvplan.model.pools.query import kv_layout


def _gpt_oss(batch: int = 383, context: int = 4000, dtype: str = "bf16") -> pools.PoolQuery:
    m = get_model("gpt-oss-120b")
    # the plan's KV bytes counted as token slots in every layer: batch × context full-layer tokens at 16-bit
    # are 18 full layers × context + 18 windowed layers × 128 per sequence
    per_seq = (18 * context + 18 * 128) * m.kv_elems_per_layer * 2.0
    return pools.PoolQuery(m, get_device("h200"), dtype, 2.0, 1, 1, 1, batch, context, batch * per_seq, 0.0)


def test_every_formula_is_keyed_by_an_engine_record() -> None:
    assert set(pools.FORMULAS) <= set(ENGINES)
    assert pools.fit("vllm", _gpt_oss()) == vllm.fit(_gpt_oss())
    assert pools.fit("lmcache", _gpt_oss()) is None    # LMCache: the memory model's test (no GPU pool of its own)
    assert pools.fit("sglang", _gpt_oss()) == sglang.fit(_gpt_oss())


def test_sglangs_hybrid_pool_for_gpt_oss_is_the_full_pool_and_the_swa_pool_beside_it() -> None:
    f = pools.fit("sglang", _gpt_oss())
    assert f is not None
    cell = 18 * 8 * (64 + 64) * 2                       # 18 full-attention layers, 8 KV heads, d = d_v = 64, bf16
    assert cell == 36_864
    full = 383 * 4000                                   # each sequence's own context in one full-attention layer
    swa = int(full * 0.8)                               # --swa-full-tokens-ratio 0.8
    assert f.tokens == full
    assert f.pool == (full + swa) * cell
    assert not f.fits and f.setting == "--mem-fraction-static" and float(f.value) > 1


def test_a_dtype_the_engine_does_not_store_has_no_fit_of_its_own() -> None:
    assert "int4" not in ENGINES["sglang"].kv_names
    assert sglang.fit(_gpt_oss(dtype="int4")) is None
    assert trtllm.fit(_gpt_oss(dtype="int4")) is None


def test_trtllm_fits_when_a_fraction_below_one_buys_the_plans_blocks() -> None:
    small = _gpt_oss(batch=1, context=4000)
    f = trtllm.fit(small)
    assert f is not None and f.fits and 0 < float(f.value) < 1
    per_token = trtllm.token_bytes(small.model, "bf16", 1, 1)
    assert per_token == 2 * 36 * 64 * 8 * 2             # kv_factor 2 × layers × head_dim × n_kv × 2 B
    assert f.pool == f.tokens * per_token


def _llama70b_128k(dtype: str, width: float) -> pools.PoolQuery:
    """examples/w4-reuse.kvp: Llama-3.1-70B on one B200, one sequence of 128,000 tokens, 16-token pages."""
    m = get_model("meta-llama/Llama-3.1-70B-Instruct")
    per_token = 80 * 8 * 128 * 2 * width                # layers × KV heads × head_dim × (K, V) × bytes
    return pools.PoolQuery(m, get_device("b200"), dtype, width, 1, 1, 16, 1, 128_000, 128_000 * per_token, 2.0)


def test_vllms_pool_is_raised_to_the_least_hundredth_that_holds_the_plan_and_fits_within_the_memory_model() -> None:
    q = _llama70b_128k("bf16", 2.0)
    f = vllm.fit(q)
    assert f is not None and f.setting == "--gpu-memory-utilization"
    block = 80 * 8 * 16 * (128 + 128) * 2               # one 16-token page of every layer, bf16
    blocks = 128_000 // 16
    assert f.tokens == 128_000 and f.pool == (blocks + 1) * block   # and vLLM's null block
    terms = 2**30 + 16_384 * 131_072 + 2**30            # non-torch, activation peak at 16,384 tokens, CUDA graphs
    reserves = 0.08 * 192e9                             # the memory model's: the 8% vLLM's default fraction leaves
    assert f.needed == max(q.weights + f.pool + terms, q.weights + q.kv_bytes + reserves)
    assert f.needed == q.weights + q.kv_bytes + reserves  # here the memory model's is the larger
    assert f.value == "0.98"                            # ceil(needed / 192 GB, hundredths): 0.9758 -> 0.98
    # vLLM's pool at 0.98 would hold it, but the raise takes back no more than the memory model reserves: the
    # memory model's 176.6 GB usable do not hold weights + 42 GB of KV, so the planner keeps to fp8 (w4-reuse)
    assert q.weights + 128_000 * 327_680 > 0.92 * 192e9
    assert not f.fits
    small = vllm.fit(_llama70b_128k("fp8", 1.0))
    assert small is not None and small.fits and small.value == "0.92"  # vLLM's default holds 21 GB of fp8 KV


def test_vllms_exact_pool_is_the_plans_own_and_fits_without_the_fill_terms() -> None:
    """`emit --sizing exact` writes --kv-cache-memory-bytes: vLLM allocates that pool and no share of memory, so
    a candidate fits when weights + the exact pool + the reserves fit, whatever fill mode's terms would take."""
    import attrs

    q = attrs.evolve(_llama70b_128k("fp8", 1.0), sizing="exact")
    f = vllm.fit(q)
    assert f is not None and f.setting == "--kv-cache-memory-bytes"
    block = 80 * 8 * 16 * (128 + 128) * 1               # one 16-token page of every layer, fp8
    assert f.pool == (128_000 // 16 + 1) * block        # the plan's blocks and vLLM's null block
    assert f.value == str(int(f.pool))
    reserves = 0.08 * 192e9
    assert f.needed == max(q.weights + f.pool + reserves, q.weights + q.kv_bytes + reserves)
    assert f.fits == (f.needed <= 192e9) and f.fits
    # bf16 KV: weights + 42 GB of KV + the 8% reserve exceed the B200 in exact mode too
    g = vllm.fit(attrs.evolve(_llama70b_128k("bf16", 2.0), sizing="exact"))
    assert g is not None and not g.fits and g.needed > 192e9


def test_trtllm_allocates_a_whole_kv_head_per_rank_when_tp_exceeds_the_kv_heads() -> None:
    """KVCacheManager's num_kv_heads_per_layer = ceil(n_kv / tp) (resource_manager.py, commit d2a5560): Llama-3-70B
    (8 KV heads) at tp 16 holds one head of 128 per layer and rank, as the memory model's replicated heads."""
    m = get_model("llama-3-70b")
    assert m.n_kv == 8 and m.head_dim == 128 and m.n_layers == 80
    assert trtllm.token_bytes(m, "bf16", 16, 1) == 2 * 80 * 128 * 1 * 2
    assert trtllm.token_bytes(m, "bf16", 8, 1) == 2 * 80 * 128 * 1 * 2
    assert trtllm.token_bytes(m, "fp8", 4, 1) == 2 * 80 * 128 * 2 * 1
    assert trtllm.token_bytes(m, "bf16", 3, 1) == 2 * 80 * 128 * 3 * 2   # ceil(8 / 3)


def test_the_planner_fits_trtllm_candidates_against_trtllms_pool() -> None:
    q = _gpt_oss(batch=1)
    assert pools.fit("trtllm", q) == trtllm.fit(q)


def test_lmcaches_host_tier_is_the_fewest_hundredths_of_a_gib_that_hold_the_plans_bytes() -> None:
    """examples/w4-reuse.kvp's host tier: 128,000 tokens of Llama-70B's fp8 KV per worker."""
    m = get_model("meta-llama/Llama-3.1-70B-Instruct")
    per_worker = 128_000 * 80 * 8 * 128 * 2 * 1.0       # tokens × layers × KV heads × head_dim × (K, V) × 1 B
    t = lmcache.tier(kv_layout(m, 1, 1, 1.0), "fp8", False, per_worker, local=True)
    assert t.size == 19.54                               # 19.53 GiB × 1024³ is short of 20,971,520,000 B
    assert int(19.53 * 2**30) < per_worker <= int(19.54 * 2**30) == t.held
    assert t.chunk == 80 * 2 * 256 * 8 * 128 * 1         # one chunk of 256 tokens, 1 B per fp8 element
    assert t.tokens == t.held // t.chunk * 256 == 500 * 256
    remote = lmcache.tier(kv_layout(m, 1, 1, 1.0), "fp8", False, per_worker, local=False)
    assert remote.held == 5 * 2**30                      # LMCache's default CPU level, staging for a remote store
