"""vLLM 0.33.0 and LMCache 0.5.6 memory as the engines compute it (issue 11, build 4): the page bytes of the
per-token-head dtypes, the null block, the hybrid KV cache groups of a windowed model, the dtypes MLA refuses,
fill sizing from --gpu-memory-utilization, the start-up refusal in vLLM's words, and LMCache's GiB and chunks.

Every expected figure is recomputed here from the engine's formula (the file and line are named beside it),
not read back from kvplan. tools/engine_check.py runs the same files through the engines' own code.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from kvplan.app.replan import emit
from kvplan.catalog import devices, get_model
from kvplan.catalog.engines import get_engine, kv_dtypes_for
from kvplan.engines import Reserves
from kvplan.lang import check_source
from kvplan.model.pools import lmcache as lpool
from kvplan.model.pools import vllm as vpool
from kvplan.planner import plans_for
from kvplan.planner.plan import Plan
from tests.paths import ROOT
from tests.unit.app.test_backends import files, flags, shell

GiB = 2**30


def plans_on(spec: str, device: str | None = None, **edits: str) -> list[Plan]:
    """The spec's plans, on `device` and with each `old: new` text edit made (each must apply)."""
    text = (ROOT / spec).read_text()
    if device is not None:
        text = re.sub(r"(?m)^(\s*device\s*=\s*)\S+", rf"\g<1>{device}", text)
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    result = check_source(text, spec)
    assert result.ok, result.diagnostics
    return plans_for(result)


def plan_on(spec: str, device: str | None = None, **edits: str) -> Plan:
    (p,) = plans_on(spec, device, **edits)
    return p


def vllm_flags(out: object) -> dict[str, str]:
    return flags(shell(files(out)["vllm.sh"])[1])[1]


def stated_tokens(text: str) -> int:
    m = re.search(r"KV capacity \(derived\): ([\d,]+) tokens \(([\d,]+) blocks of (\d+) tokens\)", text)
    assert m, text
    return int(m.group(1).replace(",", ""))


# W2: Llama-3.1-70B on 4 GPUs, int4 KV: 80 layers, 8 KV heads / TP 4 = 2 per GPU, d_h = 128, block 16.
W2_LAYERS, W2_HEADS, W2_D, BLOCK = 80, 2, 128, 16
#: TRITON_ATTN's int4_per_token_head page (vllm/v1/attention/backends/triton_attn.py:308-319): per token-head
#: and side, d/2 packed bytes and one fp32 scale.
W2_BLOCK_BYTES = W2_LAYERS * W2_HEADS * BLOCK * 2 * (W2_D // 2 + 4)


def test_w2_int4_page_gives_the_tokens_vllm_reported_at_the_old_pool() -> None:
    """The old W2 pool, 83,886,080,000 B, was 256,000 blocks of 327,680 B at 4 bits; vLLM logs 3,855,056 tokens
    for it (num_blocks × 16, kv_cache_utils.py:1119-1128), because its page is 136 B per token-head, not 128."""
    assert W2_BLOCK_BYTES == 348_160
    assert 83_886_080_000 // W2_BLOCK_BYTES * BLOCK == 3_855_056
    p = plan_on("examples/w2-batch32.kvp", "h200")
    assert (p.kv_dtype.id, p.tp) == ("int4", 4)
    out = emit(p, "vllm", sizing="exact")
    fl = vllm_flags(out)
    assert fl["--kv-cache-dtype"] == "int4_per_token_head"
    blocks = 32 * 128_000 // BLOCK                                  # the plan's batch × context: 256,000
    assert int(fl["--kv-cache-memory-bytes"]) == (blocks + 1) * W2_BLOCK_BYTES   # and the null block
    # what vLLM gives: (num_blocks − 1 null) × 16 usable tokens, the plan's 4,096,000
    usable = (int(fl["--kv-cache-memory-bytes"]) // W2_BLOCK_BYTES - 1) * BLOCK
    assert usable == 4_096_000 == stated_tokens(files(out)["vllm.sh"]) == dict(out.capacity)["kv_tokens"].value


def test_int8_and_nvfp4_pages_carry_their_scales() -> None:
    """int8_per_token_head: d + 4 B per side and token-head (triton_attn.py:308-319); nvfp4: d/2 + d/16
    (flashinfer.py:558-571)."""
    vllm = get_engine("vllm")
    assert vllm.page_scales["int8"].bytes_per_token_head(128, 128) == 8
    assert vllm.page_scales["int4"].bytes_per_token_head(128, 128) == 8
    assert vllm.page_scales["fp4"].bytes_per_token_head(128, 128) == 16     # 2 × 128/16 FP8 scales
    assert 2 * (128 * 0.5) + vllm.page_scales["fp4"].bytes_per_token_head(128, 128) == 2 * (64 + 8)


def test_batch_1_exact_pool_holds_one_request_beside_the_null_block() -> None:
    """w1-batch1 (batch 1, 128k): ceil(128,000 / 16) = 8,000 blocks left vLLM one short ("To serve at least one
    request ...", kv_cache_planning.py:1533-1556); the exact pool is 8,001 blocks."""
    p = plan_on("examples/w1-batch1.kvp")
    out = emit(p, "vllm", sizing="exact")
    fl = vllm_flags(out)
    block_bytes = int(dict(out.capacity)["kv_pool_per_gpu"].value) // 8001
    assert int(fl["--kv-cache-memory-bytes"]) == 8001 * block_bytes
    assert stated_tokens(files(out)["vllm.sh"]) == 128_000
    assert not [f for f in out.findings if "refuse" in f]
    groups = vpool.kv_groups([None] * 80)
    short = vpool.Pool(8000, block_bytes, BLOCK, 8000, 128_000, groups)   # the old pool: one block short
    said = short.refusal("--kv-cache-memory-bytes N")
    assert said is not None and "To serve at least one request with the model's max seq len (128000)" in said
    assert "the estimated maximum model length is 127984" in said      # (8,000 − 1 null) × 16
    assert vpool.Pool(8001, block_bytes, BLOCK, 8000, 128_000, groups).refusal("x") is None


def test_vllm_windowed_capacity_is_vllms_own_figure() -> None:
    """gemma-2-9b (21 full + 21 sliding-window layers of 4,096): two KV cache groups of 21 layers draw one pool
    (kv_cache_planning.py:505-560). At context 8,000 a request takes cdiv(8000, 16) = 500 full blocks and
    cdiv(min(4095 + 2 × 8192 in flight, 8000), 16) + 1 = 501 window blocks (kv_cache_interface.py:918-944)."""
    p = plan_on("tests/data/emit/windowed.kvp")
    assert (p.scenario.batch, p.scenario.context, p.tp) == (16, 8000, 1)
    out = emit(p, "vllm", sizing="exact")
    fl = vllm_flags(out)
    assert fl["--max-num-batched-tokens"] == "8192"               # vLLM's default on an 80 GB H100, written
    page = 8 * BLOCK * (256 + 256) * 2                            # 8 KV heads, d_h 256, K and V, bf16
    per_request = 500 + 501
    num_blocks = 16 * per_request + 1                             # the batch, and the null block
    assert int(fl["--kv-cache-memory-bytes"]) == num_blocks * 21 * page
    logged = int(num_blocks / per_request * 8000)                 # get_kv_cache_capacity: 128,007
    assert logged == 128_007 == stated_tokens(files(out)["vllm.sh"])
    assert dict(out.capacity)["kv_sequences"].value == 16


def test_vllm_never_plans_or_writes_a_dtype_its_mla_backends_refuse() -> None:
    """vLLM's MLA backends store auto/float16/bfloat16/fp8 only (v1/attention/backends/mla/*.py), and nvfp4 on
    MLA is a VllmConfig error: the record says so, the planner leaves them out, emit maps a pinned one to fp8."""
    vllm = get_engine("vllm")
    b200, mla, gqa = devices()["b200"], get_model("deepseek-v3"), get_model("llama-3-70b")
    assert kv_dtypes_for(vllm, b200, mla) == ("bf16", "fp16", "fp8")
    assert "fp4" in kv_dtypes_for(vllm, b200, gqa) and "int4" in kv_dtypes_for(vllm, b200, gqa)
    edits = {"engine    = sglang": "engine    = vllm", "budget = near-lossless": "budget = aggressive"}
    got = {p.scenario.batch: p.kv_dtype.id for p in plans_on("examples/deepseek-v3-mi300x.kvp", "b200", **edits)}
    assert set(got) == {1, 16, 32} and set(got.values()) <= {"bf16", "fp8"}, got
    # a plan for another engine that chose nvfp4 on DeepSeek-V3 (SGLang on B200): vLLM writes fp8 and says why
    pin = "    pin {\n        kv_dtype = fp4\n    }\n\n    slo {"
    (fp4,) = plans_on("examples/deepseek-v3-mi300x.kvp", "b200", **{
        "budget = near-lossless": "budget = aggressive", "    slo {": pin, "batch   = [1, 16, 32]": "batch   = 32"})
    assert fp4.kv_dtype.id == "fp4"
    out = emit(fp4, "vllm", sizing="exact")
    assert vllm_flags(out)["--kv-cache-dtype"] == "fp8"
    assert any("kv_dtype fp4 → fp8" in f and "MLA" in f for f in out.findings)


def test_fill_sizing_is_vllms_memory_fraction_less_what_it_measures() -> None:
    """vLLM's pool under --gpu-memory-utilization (v1/worker/gpu_worker.py:641-757): ceil(total × 0.92) less
    weights, non-torch memory (1 GiB assumed), the activation peak at --max-num-batched-tokens (128 KiB a batched
    token assumed) and the CUDA-graph estimate (1 GiB assumed), in whole blocks, one of them the null block."""
    p = plan_on("examples/w2-batch32.kvp")                        # 4 × B200, 192 GB each
    out = emit(p, "vllm")                                         # fill is the default
    fl = vllm_flags(out)
    assert fl["--gpu-memory-utilization"] == "0.92" and "--kv-cache-memory-bytes" not in fl
    assert fl["--max-num-batched-tokens"] == "16384"              # vLLM's default from 160 GiB
    weights = dict(out.capacity)["weights_per_gpu"].value         # kvplan.model.memory's, not vLLM's to check
    avail = math.ceil(192e9 * 0.92) - weights - GiB - 16384 * 128 * 1024 - GiB
    num_blocks = math.floor(avail) // W2_BLOCK_BYTES
    tokens = (num_blocks - 1) * BLOCK
    text = files(out)["vllm.sh"]
    assert stated_tokens(text) == tokens == dict(out.capacity)["kv_tokens"].value
    assert f"= {tokens // 128_000} sequences of 128,000 tokens" in text   # what the fraction buys at the context
    assert tokens // 128_000 > p.scenario.batch and not out.findings
    # an override of an assumed term moves the pool by exactly that many bytes
    more = emit(p, "vllm", reserves=Reserves(cudagraph=2 * GiB))
    assert dict(more.capacity)["kv_tokens"].value == ((math.floor(avail - GiB)) // W2_BLOCK_BYTES - 1) * BLOCK


def test_fill_pool_that_cannot_hold_one_request_is_refused_in_vllms_words() -> None:
    # A pinned fraction (what `kvplan import` read from a deployment) is kept, and the refusal said in vLLM's words.
    p = plan_on("examples/w2-batch32.kvp", **{"placement = striped": "placement = striped\n    pin {\n"
                                                 "        memory_fraction = 0.92\n    }"})
    assert p.scenario.memory_fraction == 0.92
    graphs = 136e9
    out = emit(p, "vllm", reserves=Reserves(cudagraph=graphs))
    weights = dict(out.capacity)["weights_per_gpu"].value
    avail = math.ceil(192e9 * 0.92) - weights - GiB - 16384 * 128 * 1024 - graphs
    num_blocks = math.floor(avail) // W2_BLOCK_BYTES
    assert num_blocks - 1 < 8000                                  # fewer than one request of 128,000 tokens
    assert vllm_flags(out)["--gpu-memory-utilization"] == "0.92"
    (said,) = [f for f in out.findings if "would refuse to start" in f]
    assert "To serve at least one request with the model's max seq len (128000)" in said
    least = math.ceil((weights + GiB + 16384 * 128 * 1024 + graphs + 8001 * W2_BLOCK_BYTES) / 192e9 * 100) / 100
    assert f"--gpu-memory-utilization {least:.2f} would start it" in said
    assert f"--max-model-len {(num_blocks - 1) * BLOCK}" in said


def _pool_tokens(u: float, weights: float, graphs: float) -> int:
    """vLLM's pool at --gpu-memory-utilization u for W2 on a B200, in tokens (the null block left out)."""
    blocks = math.floor(math.ceil(192e9 * u) - weights - GiB - 16384 * 128 * 1024 - graphs) // W2_BLOCK_BYTES
    return (blocks - 1) * BLOCK


def test_fill_raises_the_default_fraction_to_the_least_hundredth_that_holds_the_plan() -> None:
    # Where vLLM's default 0.92 would not hold the plan (vLLM's own advice then: "Try increasing
    # `gpu_memory_utilization`"), fill writes the least hundredth whose pool holds the plan's tokens, and says why.
    p = plan_on("examples/w2-batch32.kvp")
    weights = dict(emit(p, "vllm").capacity)["weights_per_gpu"].value
    planned = 32 * 128_000                                        # every GPU holds every token, for its heads
    # CUDA graphs that leave the default's pool 100 blocks short of the plan
    graphs = math.ceil(192e9 * 0.92) - weights - GiB - 16384 * 128 * 1024 - (planned // BLOCK + 1 - 100) * \
        W2_BLOCK_BYTES
    assert _pool_tokens(0.92, weights, graphs) < planned
    u = next(h / 100 for h in range(93, 101) if _pool_tokens(h / 100, weights, graphs) >= planned)
    out = emit(p, "vllm", reserves=Reserves(cudagraph=graphs))
    assert vllm_flags(out)["--gpu-memory-utilization"] == f"{u:g}"
    assert not out.findings
    text = files(out)["vllm.sh"]
    assert f"--gpu-memory-utilization {u:g} (raised from vLLM's default 0.92, whose pool holds " \
           f"{_pool_tokens(0.92, weights, graphs):,} tokens, fewer than the plan's {planned:,}" in text
    assert stated_tokens(text) == _pool_tokens(u, weights, graphs) >= planned
    # no hundredth holds it: the default is kept and the pool refused as before
    huge = emit(p, "vllm", reserves=Reserves(cudagraph=136e9))
    assert vllm_flags(huge)["--gpu-memory-utilization"] == "0.92" and huge.findings


def test_lmcache_sizes_are_gib_and_its_tokens_whole_chunks() -> None:
    """max_local_cpu_size is GiB: int(size × 1024³) B (lmcache/v1/cache_engine.py:2087-2110); a chunk is
    (layers, 2, 256, KV heads, d_h) elements of vLLM's KV torch dtype (integration/vllm/utils.py:405-415)."""
    p = plan_on("examples/w4-reuse.kvp")                          # Llama-3.1-70B, TP 1, fp8 KV, 20.97 GB tier
    out = emit(p, "lmcache")
    text = files(out)["lmcache.yaml"]
    body = yaml.safe_load(text)
    per_gpu = 20_971_520_000                                      # 128,000 tokens × 80 × 2 × 8 × 128 × 1 B
    size = math.ceil(per_gpu / GiB * 100) / 100                   # the fewest hundredths of a GiB: 19.54
    assert body["max_local_cpu_size"] == size == 19.54
    held = int(size * GiB)
    assert held >= per_gpu
    chunk = 80 * 2 * 256 * 8 * 128 * 1                            # fp8 is uint8 in vLLM: 1 B per element
    assert f"{held:,} B per engine worker (one per GPU) = {held // chunk * 256:,} tokens" in text
    rows = dict(out.capacity)
    assert rows["tier_bytes_per_worker"].value == held and rows["tier_tokens"].value == 128_000


def test_lmcache_stores_int4_at_one_byte_per_element() -> None:
    assert lpool.element_bytes("int4") == lpool.element_bytes("fp8") == lpool.element_bytes("int8") == 1
    assert lpool.element_bytes("bf16") == 2
    assert lpool.lmcache_bytes(19.54) == int(19.54 * 1024**3)


@pytest.mark.parametrize("spec", ["examples/w2-batch32.kvp", "tests/data/emit/host-tier.kvp"])
def test_exact_and_fill_write_one_memory_setting_each(spec: str) -> None:
    p = plan_on(spec)
    exact, fill = vllm_flags(emit(p, "vllm", sizing="exact")), vllm_flags(emit(p, "vllm", sizing="fill"))
    assert "--kv-cache-memory-bytes" in exact and "--gpu-memory-utilization" not in exact
    assert "--gpu-memory-utilization" in fill and "--kv-cache-memory-bytes" not in fill
    assert Path(spec).suffix == ".kvp"
