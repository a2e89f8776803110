"""SGLang 0.5.23 and TensorRT-LLM KV memory as the engines compute it (docs/engine-memory.md).

Every expected figure here is computed by hand from the engines' formulas (quoted beside it), not with the
functions under test.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

import pytest
import yaml

from kvplan.catalog import devices, get_model, models
from kvplan.catalog.engines import get_engine, kv_dtypes_for, kv_refusal
from kvplan.engines import sglang as sgl
from kvplan.engines import trtllm as trt
from kvplan.engines.common import EmitRequest
from kvplan.lang import check_source
from kvplan.model.pools import sglang as sgl_pools
from kvplan.model.pools import trtllm as trt_pools
from kvplan.planner import plans_for
from tests.paths import ROOT

GiB = 2**30
MiB = 2**20


def plan_of(source: str) -> Any:
    r = check_source(source, "t.kvp")
    assert not [d for d in r.diagnostics if d.severity.name == "ERROR"], r.diagnostics
    (p,) = plans_for(r)
    return p


def spec(model: str, device: str, n: int, batch: int, context: int, engine: str = "sglang",
         extra: str = "") -> str:
    return (f'kvplan 1\ndeployment "d" {{\n model = {model}\n device = {device}\n devices = {n}\n'
            f' engine = {engine}\n workload {{\n batch = {batch}\n context = {context}\n{extra} }}\n'
            ' quality {\n budget = near-lossless\n }\n}\n')


def flags_of(script: str) -> dict[str, str]:
    body = " ".join(ln.rstrip("\\") for ln in script.splitlines() if not ln.startswith("#"))
    words = shlex.split(body)
    out: dict[str, str] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            out[w] = "" if nxt.startswith("--") or not nxt else nxt
    return out


def stated_tokens(text: str) -> int:
    m = re.search(r"KV capacity \(derived\): ([\d,]+) tokens", text)
    assert m, text
    return int(m.group(1).replace(",", ""))


# ------------------------------------------------------------------ SGLang: cell size (pool_configurator.py)

def test_nvfp4_cell_of_w2_on_b200_is_23040_bytes() -> None:
    """Llama-3-70B at TP 4: 2 KV heads per rank, d = 128, 80 layers. NVFP4 data 2·64·80·2 = 20,480 B plus the native
    FP8 scale layout 2·(128/16)·80·2 = 2,560 B: 23,040 B per token, 1.125 × plain 4-bit."""
    assert sgl_pools.cell_bytes(models()["llama-3-70b"], "fp4", 4, 1) == 23_040


def test_mha_cells_bf16_and_fp8() -> None:
    m = models()["llama-3-70b"]
    assert sgl_pools.cell_bytes(m, "bf16", 4, 1) == 2 * (128 + 128) * 80 * 2 == 81_920
    assert sgl_pools.cell_bytes(m, "fp8", 4, 1) == 40_960
    # TP 16 beyond 8 KV heads: get_num_kv_heads = max(1, 8 // 16) = 1
    assert sgl_pools.cell_bytes(m, "bf16", 16, 1) == 1 * 256 * 80 * 2


def test_pipeline_stage_holds_only_its_layers() -> None:
    """80 layers over 3 stages: the last ranks take the extra layers, the most loaded holds 27."""
    m = models()["llama-3-70b"]
    assert sgl_pools.cell_bytes(m, "bf16", 1, 3) == 8 * 256 * 27 * 2


def test_mla_cell_has_no_tp_division() -> None:
    """DeepSeek-V3: (kv_lora_rank 512 + rope 64) · 61 layers · dtype bytes, the same on every rank."""
    m = models()["deepseek-v3"]
    assert sgl_pools.cell_bytes(m, "fp8", 8, 1) == 576 * 61 == 35_136
    assert sgl_pools.cell_bytes(m, "bf16", 8, 1) == 576 * 61 * 2
    assert sgl_pools.cell_bytes(m, "fp8", 8, 1) == sgl_pools.cell_bytes(m, "fp8", 1, 1)


# ------------------------------------------------------------------ SGLang: the pool (kv_cache_configurator.py)

def test_pool_is_pre_model_load_times_fraction_less_weights() -> None:
    """pre 10 GiB, weights 2 GiB, fraction 0.5: rest = (10 − 2) − 10·0.5 = 3 GiB; 3 GiB // 1,024 B = 3,145,728
    tokens, a whole number of 16-token pages."""
    assert sgl_pools.pool_tokens(0.5, 10.0, 2 * GiB, 1024, 16) == 3_145_728
    assert sgl_pools.pool_tokens(0.5, 10.0, 2 * GiB, 1000, 16) == 3 * GiB // 1000 // 16 * 16
    assert sgl_pools.pool_tokens(0.15, 10.0, 2 * GiB, 1024, 16) == 0   # (10 − 2) − 10·0.85 < 0: SGLang refuses


def test_refusal_is_in_sglangs_words_with_the_fraction_that_fixes_it() -> None:
    """minimum = 1 − available / pre = 1 − 8/10 = 0.2 (kv_cache_configurator.py:3042-3058)."""
    text = sgl.refusal(0.15, 10.0, 2 * GiB)
    assert text == ("Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.15. "
                    "Raise --mem-fraction-static above 0.200")


def test_default_fraction_on_h200_at_tp4() -> None:
    """H200 (141 GB = 134,470.3 MiB, between 90 and 160 GiB): chunked prefill 8,192, decode graph max batch 512
    (TP ≥ 4) capped at 32 requests; reserved = 512 + 1.5·8,192 + 4/8·1,024 + 2·32 = 13,376 MiB (above the
    10 GiB floor); round((134,470.3 − 13,376) / 134,470.3, 3) = 0.901."""
    frac, reserved = sgl_pools.default_fraction(141e9, 4, 1, 32)
    assert reserved == 13_376 * MiB
    assert frac == 0.901


def test_default_fraction_floor_of_10_gib() -> None:
    """H100 (80 GB = 76,293.9 MiB) at TP 1, batch 1: 512 + 12,288 + 128 + 2 = 12,930 MiB; at batch 1 on a 60-90 GiB
    GPU the reserve is above the 10 GiB floor. A100-40-like (40 GB): no floor, chunk 4,096."""
    frac, reserved = sgl_pools.default_fraction(80e9, 1, 1, 1)
    assert reserved == 12_930 * MiB and frac == round(1 - 12_930 / (80e9 / MiB), 3)
    frac40, reserved40 = sgl_pools.default_fraction(40e9, 1, 1, 1)
    assert reserved40 == (512 + 1.5 * 4096 + 128 + 2) * MiB


def test_exact_fraction_gives_exactly_the_pool_and_one_digit_less_does_not() -> None:
    pre, weights, cell, page, tokens = (141e9 - GiB) / GiB, 35.28e9, 40_960, 16, 1_024_000
    text, applied = sgl_pools.exact_fraction(tokens, pre, weights, cell, page, 1.0)
    assert sgl_pools.pool_tokens(applied, pre, weights, cell, page) == tokens
    digits = len(text.split(".")[1])
    less = float(text) - 10.0**-digits
    assert sgl_pools.pool_tokens(less, pre, weights, cell, page) < tokens
    # aiter: SGLang multiplies the written fraction by 0.85; the written one is larger by 1/0.85
    text85, applied85 = sgl_pools.exact_fraction(tokens, pre, weights, cell, page, 0.85)
    assert applied85 == pytest.approx(float(text85) * 0.85)
    assert sgl_pools.pool_tokens(applied85, pre, weights, cell, page) == tokens


# ------------------------------------------------------------------ SGLang: what emit writes

def sglang_out(source: str, sizing: str = "fill") -> tuple[Any, Any, str]:
    p = plan_of(source)
    out = sgl.BACKEND.build(EmitRequest(p, "t.kvp", sizing=sizing))  # type: ignore[arg-type]
    return p, out, out.files[0].text


def by_hand_tokens(p: Any, fraction: float, cell: int, page: int, aiter: bool = False) -> int:
    """SGLang's pool from the written fraction, by hand: pre = memory − 1 GiB (the assumed runtime reserve)."""
    m, sc = p.scenario.model, p.scenario
    weights = m.params * sc.weights.width * math.ceil(m.n_layers / p.pp) / (m.n_layers * p.tp)
    pre = (sc.device.memory - GiB) / GiB
    f = fraction * (0.85 if aiter else 1.0)
    rest = (pre - weights / GiB) - pre * (1 - f)
    return int(rest * GiB) // cell // page * page


def test_fill_states_the_capacity_sglang_computes() -> None:
    p, out, text = sglang_out(spec("llama-3-8b", "h100-sxm", 1, 8, 32000))
    fl = flags_of(text)
    cell = 8 * 256 * 32 * 2 if fl["--kv-cache-dtype"] == "bf16" else 8 * 256 * 32
    want = by_hand_tokens(p, float(fl["--mem-fraction-static"]), cell, int(fl["--page-size"]))
    assert stated_tokens(text) == want == dict(out.capacity)["kv_tokens"].value
    assert want >= 8 * 32000                      # fill buys at least the plan's batch
    assert fl["--mem-fraction-static"] == f"{sgl_pools.default_fraction(80e9, 1, 1, 8)[0]:g}"


def test_exact_gives_the_plans_pool() -> None:
    p, out, text = sglang_out(spec("llama-3-8b", "h100-sxm", 1, 8, 32000), "exact")
    fl = flags_of(text)
    page = int(fl["--page-size"])
    cell = sgl_pools.cell_bytes(p.scenario.model, p.kv_dtype.id, p.tp, p.pp)
    plan = 8 * math.ceil(32000 / page) * page
    assert by_hand_tokens(p, float(fl["--mem-fraction-static"]), cell, page) == plan == stated_tokens(text)


def test_aiter_on_amd_exact_compensates_and_fill_keeps_sglangs_scaling() -> None:
    src = spec("llama-3-8b", "mi300x", 1, 8, 32000)
    p, out, text = sglang_out(src, "exact")
    fl = flags_of(text)
    page = int(fl["--page-size"])
    cell = sgl_pools.cell_bytes(p.scenario.model, p.kv_dtype.id, p.tp, p.pp)
    assert by_hand_tokens(p, float(fl["--mem-fraction-static"]), cell, page, aiter=True) == stated_tokens(text) \
        == 8 * math.ceil(32000 / page) * page
    assert "0.85" in text
    p, out, text = sglang_out(src)
    fl = flags_of(text)
    assert by_hand_tokens(p, float(fl["--mem-fraction-static"]), cell, page, aiter=True) == stated_tokens(text)


def test_weights_that_leave_no_pool_are_reported_in_sglangs_words() -> None:
    """Llama-3-70B in BF16 (141 GB) on one H200 (141 GB): no fraction ≤ 1 leaves a pool."""
    src = spec("llama-3-70b", "h200", 1, 1, 8000).replace("devices = 1", "devices = 1").replace(
        "budget = near-lossless", "budget = lossless")
    r = check_source(src, "t.kvp")
    (p,) = plans_for(r)
    out = sgl.BACKEND.build(EmitRequest(p, "t.kvp"))
    text = " ".join(out.findings)
    assert "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=" in text
    assert "Raise --mem-fraction-static above" in text


def test_bf16_is_written_bf16() -> None:
    assert get_engine("sglang").kv_names["bf16"] == "bf16"
    _, _, text = sglang_out(spec("llama-3-8b", "h100-sxm", 1, 8, 8000).replace("near-lossless", "lossless"))
    assert flags_of(text)["--kv-cache-dtype"] == "bf16"


def test_pipeline_writes_pp_size() -> None:
    src = spec("llama-3-70b", "h200", 3, 16, 32000)
    p = plan_of(src)
    assert p.pp == 3
    out = sgl.BACKEND.build(EmitRequest(p, "t.kvp"))
    fl = flags_of(out.files[0].text)
    assert fl["--pp-size"] == "3"
    assert dict(out.capacity)["kv_cell_bytes"].value == sgl_pools.cell_bytes(p.scenario.model, p.kv_dtype.id, p.tp, 3)


def test_hicache_host_pool_is_larger_than_the_device_pool_by_the_tier() -> None:
    src = spec("llama-3-8b", "h100-sxm", 1, 8, 32000, extra=" reuse = 50%\n")
    p = plan_of(src)
    if p.tier.tier != "host":
        pytest.skip("the plan keeps no host tier")
    out = sgl.BACKEND.build(EmitRequest(p, "t.kvp"))
    text = out.files[0].text
    fl = flags_of(text)
    gb = int(fl["--hicache-size"])
    device = stated_tokens(text)
    page = int(fl["--page-size"])
    cell = sgl_pools.cell_bytes(p.scenario.model, p.kv_dtype.id, p.tp, p.pp)
    host = (int(gb * 1e9 // cell) // page + 1) * page     # pool_host/base.py:205-246
    tier = p.tier.bytes.value / (32 * 8 * 256 * p.kv_width)
    assert host > device
    assert host - device >= tier - page


# ------------------------------------------------------------------ capabilities: what SGLang refuses

def test_sglang_record_refuses_nvfp4_off_blackwell_and_on_mla() -> None:
    eng = get_engine("sglang")
    h100, b200 = devices()["h100-sxm"], devices()["b200"]
    mha, mla = get_model("llama-3-70b"), get_model("deepseek-v3")
    assert kv_refusal(eng, "fp4", h100, mha) is not None                      # H100, A100, AMD
    assert kv_refusal(eng, "fp4", b200, mla) is not None                      # MLA on Blackwell
    assert kv_refusal(eng, "fp4", b200, mha) is None                          # MHA on Blackwell
    assert "fp4" not in kv_dtypes_for(eng, h100, mha)
    assert "fp4" in kv_dtypes_for(eng, b200, mha)


def test_planner_never_gives_sglang_nvfp4_for_mla_on_blackwell() -> None:
    """examples/deepseek-v3-mi300x.kvp at batch 32 on B200: for TensorRT-LLM (which stores an MLA latent in NVFP4)
    the planner picks fp4; SGLang's record refuses it (its MLA backend has no NVFP4 prefill), so SGLang's plan never
    holds fp4."""
    text = (ROOT / "examples" / "deepseek-v3-mi300x.kvp").read_text()
    text = text.replace("device    = mi300x", "device    = b200").replace("[1, 16, 32]", "32")
    trt_plans = plans_for(check_source(text.replace("engine    = sglang", "engine    = trtllm"), "t.kvp"))
    assert any(p.kv_dtype.id == "fp4" for p in trt_plans)          # the test can fail: fp4 is a candidate
    for p in plans_for(check_source(text, "t.kvp")):
        assert p.kv_dtype.id != "fp4"


@pytest.mark.parametrize("device", ["h100-sxm", "a100-80g", "mi300x"])
def test_an_int4_plan_never_becomes_nvfp4_off_blackwell(device: str) -> None:
    src = spec("llama-3-70b", device, 8, 32, 128000, engine="any")
    for p in plans_for(check_source(src, "t.kvp")):
        out = sgl.BACKEND.build(EmitRequest(p, "t.kvp"))
        trt_out = trt.BACKEND.build(EmitRequest(p, "t.kvp"))
        if device != "mi300x":
            # 8-bit KV for W2 is 83.9 GB per GPU at tp 8 (32 × 128,000 × 80 × 1 × 128 × 2 B), past 80 GB: the
            # fallback no longer fits, an error with nothing written, and it names the 8-bit dtype, never nvfp4
            for o, nearest in ((out, "int4 → fp8"), (trt_out, "int4 → int8")):
                assert not o.files and o.errors and nearest in o.errors[0] and "nvfp4" not in o.errors[0]
            continue
        assert flags_of(out.files[0].text)["--kv-cache-dtype"] != "nvfp4"
        assert yaml.safe_load(trt_out.files[0].text)["kv_cache_config"]["dtype"] != "nvfp4"


# ------------------------------------------------------------------ TensorRT-LLM (resource_manager.py, commit d2a5560)

def test_trtllm_bytes_per_token() -> None:
    """x = 2 · 80 layers · (128 · 8 // 4) = 40,960 elements: NVFP4 ceil(x/2) + ceil(x/16) = 20,480 + 2,560 = 23,040;
    FP8 40,960; 16-bit 81,920. MLA: 61 · 576 = 35,136 elements, no TP division."""
    m = models()["llama-3-70b"]
    assert trt_pools.token_bytes(m, "fp4", 4, 1) == 23_040
    assert trt_pools.token_bytes(m, "fp8", 4, 1) == 40_960
    assert trt_pools.token_bytes(m, "bf16", 4, 1) == 81_920
    assert trt_pools.token_bytes(m, "bf16", 4, 3) == 2 * 27 * 256 * 2
    assert trt_pools.token_bytes(models()["deepseek-v3"], "fp8", 8, 1) == 35_136


def trt_out(source: str, sizing: str = "fill") -> tuple[Any, dict[str, Any], str]:
    p = plan_of(source)
    out = trt.BACKEND.build(EmitRequest(p, "t.kvp", sizing=sizing))  # type: ignore[arg-type]
    text = out.files[0].text
    return p, yaml.safe_load(text)["kv_cache_config"], text


def test_trtllm_exact_writes_max_tokens_in_whole_blocks() -> None:
    src = spec("llama-3-8b", "h100-sxm", 1, 8, 32000, engine="trtllm")
    p, kv, text = trt_out(src, "exact")
    tpb = kv["tokens_per_block"]
    assert kv["max_tokens"] == 8 * math.ceil(32000 / tpb) * tpb == stated_tokens(text)
    assert 0 < kv["free_gpu_memory_fraction"] < 1            # calculate_max_num_blocks asserts < 1.0


def test_trtllm_fill_writes_the_default_fraction_and_states_what_it_buys() -> None:
    src = spec("llama-3-8b", "h100-sxm", 1, 8, 32000, engine="trtllm")
    p, kv, text = trt_out(src)
    assert "max_tokens" not in kv and kv["free_gpu_memory_fraction"] == 0.9
    m, sc = p.scenario.model, p.scenario
    weights = m.params * sc.weights.width
    act = max(0.0, 0.08 * sc.device.memory - GiB)               # the assumed reserves (kvplan.model.memory)
    free = sc.device.memory - weights - act - GiB
    per_token = trt_pools.token_bytes(m, p.kv_dtype.id, 1, 1)
    tpb = kv["tokens_per_block"]
    assert stated_tokens(text) == int(0.9 * free / per_token // tpb) * tpb
