"""One memory model (kvplan.model.memory) for the planner's fit filter: the unit tests that need the engines layer.

Split by layer from the tests of the same subject in tests/acceptance/test_memory.py;
tests/acceptance/test_memory.py says what they check.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from kvplan.app.replan import emit, written_from
from kvplan.lang import check_source
from kvplan.planner import plans_for

GiB = 2**30

# qwen3-8b (catalog): 36 layers, 8 KV heads of 128, 8,190,735,360 parameters; b200-hgx: 180 GB
QWEN_L, QWEN_KV, QWEN_D, QWEN_P = 36, 8, 128, 8_190_735_360
HGX_MEM = 180e9

FIT35 = """kvplan 1

deployment "f" {{
    model   = qwen3-8b
    device  = b200-hgx
    devices = {devices}

    workload {{
        batch   = 3615
        context = 40960
    }}

    quality {{
        budget = near-lossless
    }}

    expect {{
        fits
    }}
}}
"""


def plan_of(text: str, path: str = "t.kvp", **overrides: Any) -> Any:
    r = check_source(text, path)
    assert not [d for d in r.diagnostics if d.severity.name == "ERROR"], r.diagnostics
    (p,) = plans_for(r, **overrides)
    return p


def qwen_device_bytes(n: int, tp: int, kv_width: float, block: int = 16, batch: int = 3615) -> float:
    """The most loaded b200-hgx's bytes for the FIT35 workload on n devices, by hand: its pipeline
    stage holds ⌈36/pp⌉ layers; it holds 1/tp of those layers' weights and KV heads."""
    pp = n // tp
    layers = math.ceil(QWEN_L / pp)
    s = 40960
    stored = math.ceil(s / block) * block                      # whole 16-token pages
    kv_total = batch * stored * 2 * QWEN_L * QWEN_KV * QWEN_D * kv_width * max(1.0, tp / QWEN_KV)
    weights = QWEN_P * 2.0                                     # bf16
    reserves = max(0.08 * HGX_MEM, GiB)                        # 8% of the device, at least the 1 GiB runtime
    return (weights + kv_total) * layers / (QWEN_L * tp) + reserves


#: Bytes per KV value as each engine's pool holds it for qwen3-8b (d_h = 128), by hand: NVFP4 holds an FP8 scale
#: per 16 values in all three (0.5 + 1/16); vLLM's *_per_token_head one fp32 scale per token-head and side (+ 4/128);
#: TensorRT-LLM's int8 (written `auto`) none. `any` takes the least of the engines that store the dtype.
QWEN_KV_WIDTH = {
    "any": {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + 4 / 128, "fp4": 0.5 + 1 / 16},
    "vllm": {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0 + 4 / 128, "int4": 0.5 + 4 / 128, "fp4": 0.5 + 1 / 16},
    "sglang": {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5 + 1 / 16},
    "trtllm": {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5 + 1 / 16},
}


def test_a_plan_that_fits_fits_every_backend_and_the_numbers_agree() -> None:
    """The planner's per-device figure is emit's per-GPU figure (within one page of KV), and a plan
    the planner says fits fits every engine it is emitted for.

    The planner counts KV at the engine's bytes per value, scales included (issue 11: it counted NVFP4 at 4 bits
    a value, so the fp4 plan on 36 devices did not fit TensorRT-LLM's pool, whose FP8 scales add 12.5%)."""
    gaps: list[tuple[str, str]] = []
    for devices in ("<= 35", "35", "<= 64", "36", "48"):
        p = plan_of(FIT35.format(devices=devices))
        fits = not any(u.constraint == "fits" for u in p.unmet)
        by_hand = qwen_device_bytes(p.n_devices, p.tp, QWEN_KV_WIDTH["any"][p.kv_dtype.id])
        assert p.metric("device_need").value == pytest.approx(by_hand, rel=1e-9)
        for target in ("vllm", "sglang", "trtllm"):
            out = emit(p, target, sizing="exact")
            q = written_from(p, target)  # the plan the target is written from: its own (kvplan/app/replan.py)
            if out.errors:  # which does not fit: nothing written, said as an error
                assert not out.files and any(u.constraint in ("fits", "layout", "engine") for u in q.unmet)
                continue
            rows = dict(out.capacity)
            per_gpu = rows["memory_needed_per_gpu"].value
            page = rows["kv_pool_per_gpu"].value / 1e6  # any gap is block rounding, far below a MB
            by_hand_q = qwen_device_bytes(q.n_devices, q.tp, QWEN_KV_WIDTH[target][q.kv_dtype.id], q.block_size)
            if target == "vllm":  # vLLM's pool holds a null block: more KV, same rest
                pool, plan_kv = rows["kv_pool_per_gpu"].value, rows["plan_kv_per_gpu"].value
                assert pool >= plan_kv
                assert per_gpu - pool == pytest.approx(by_hand_q - plan_kv, abs=1e6)
            elif q.kv_dtype.id == "fp4" and any("does not fit" in f for f in out.findings):
                gaps.append((devices, target))  # the planner's 4-bit NVFP4 against the engine's 4.5 bits
                continue
            elif "→" not in " ".join(out.findings):     # the target runs its plan's own dtype
                assert per_gpu == pytest.approx(by_hand_q, abs=max(page, 1e6))
            fits = not any(u.constraint == "fits" for u in q.unmet)
            if fits and "→" not in " ".join(out.findings):  # a fallback dtype may cost more (TRT-LLM's nvfp4 for
                # int4 is 1.125x with its FP8 scales) and is then an error, not a fit
                assert not [f for f in out.findings if "does not fit" in f], (devices, target, out.findings)
    assert gaps == []
