"""The planner's KV bytes per value (kvplan.catalog.engines.kv_width) against each engine's own pool formula:
the width plus the scale bytes the engine stores beside the values (issue 11)."""

from __future__ import annotations

import pytest

from kvplan import catalog
from kvplan.catalog.engines import ENGINES, get_engine, kv_refusal, kv_width
from kvplan.engines.common import kv_layout
from kvplan.model.pools import sglang as sgl_pools
from kvplan.model.pools import trtllm as trt_pools

#: a device with FP4 formats, so that every engine's nvfp4 is in reach where the model allows it
_FP4_DEVICE = catalog.get_device("b200")


def _stored(engine: str, dtype: str) -> list[str]:
    """The catalog models `engine` stores `dtype` KV for (on a Blackwell GPU)."""
    e = get_engine(engine)
    return [m for m in catalog.models() if kv_refusal(e, dtype, _FP4_DEVICE, catalog.get_model(m)) is None]


def _values_per_token(model: catalog.Model) -> int:
    """KV values per token on one GPU holding every layer and KV head (tp = pp = 1)."""
    return model.n_layers * model.kv_elems_per_layer


@pytest.mark.parametrize("model_id", _stored("sglang", "fp4"))
def test_sglang_nvfp4_cell_is_the_planners_width(model_id: str) -> None:
    m = catalog.get_model(model_id)
    assert sgl_pools.cell_bytes(m, "fp4", 1, 1) == pytest.approx(kv_width("sglang", "fp4", m) * _values_per_token(m))


@pytest.mark.parametrize("model_id", _stored("trtllm", "fp4"))
def test_trtllm_nvfp4_token_bytes_are_the_planners_width(model_id: str) -> None:
    m = catalog.get_model(model_id)
    assert trt_pools.token_bytes(m, "fp4", 1, 1) == pytest.approx(kv_width("trtllm", "fp4", m) * _values_per_token(m))


@pytest.mark.parametrize("dtype", ["int8", "int4", "fp4"])
def test_vllm_page_bytes_are_the_planners_width(dtype: str) -> None:
    vllm = get_engine("vllm")
    for model_id in _stored("vllm", dtype):
        m = catalog.get_model(model_id)
        layout = kv_layout(m, 1, 1, catalog.DTYPES[dtype].width, vllm.page_scales.get(dtype))
        assert layout.token_bytes == pytest.approx(kv_width("vllm", dtype, m) * _values_per_token(m)), model_id


def test_widths_by_hand_at_head_dim_128() -> None:
    """qwen3-8b, d_h = 128: NVFP4 0.5 + 1/16 in every engine; vLLM's int4_per_token_head 2 × (64 + 4) B per
    token-head of 256 values; TensorRT-LLM's int8 (written `auto`) holds no scales; bf16 none anywhere."""
    m = catalog.get_model("qwen3-8b")
    assert m.head_dim == 128
    for engine in ("vllm", "sglang", "trtllm", "any"):
        assert kv_width(engine, "fp4", m) == 0.5625
        assert kv_width(engine, "bf16", m) == 2.0
    assert kv_width("vllm", "int4", m) == 2 * (64 + 4) / 256
    assert kv_width("vllm", "int8", m) == 2 * (128 + 4) / 256
    assert kv_width("trtllm", "int8", m) == 1.0


def test_any_is_the_least_of_the_engines_that_store_the_dtype() -> None:
    """`engine = any` plans a lower bound: the narrowest any engine stores it in; a dtype no engine stores
    (int2) is its plain width."""
    m = catalog.get_model("qwen3-8b")
    for dtype in catalog.DTYPES:
        stores = [e for e in ENGINES if e != "any" and dtype in ENGINES[e].kv_names]
        want = min((kv_width(e, dtype, m) for e in stores), default=catalog.DTYPES[dtype].width)
        assert kv_width("any", dtype, m) == want, dtype
    assert kv_width("any", "int8", m) == 1.0    # TensorRT-LLM's, below vLLM's 1 + 4/128
    assert kv_width("any", "int2", m) == 0.25


def test_the_plan_counts_kv_at_its_engines_width() -> None:
    """A plan's KV bytes are b·s·(values per token)·w·r·(1+φ)/σ at its engine's width, scales included: vLLM's
    int4 plan on qwen3-8b (d_h = 128) at 2 × (64 + 4) B per token-head of 256 values, 17/16 of the 4-bit bytes."""
    from kvplan.lang import check_source
    from kvplan.planner import plans_for

    text = ("kvplan 1\n\ndeployment \"t\" {\n    model   = qwen3-8b\n    device  = h200\n    engine  = vllm\n\n"
            "    workload {\n        batch   = 64\n        context = 32768\n    }\n\n"
            "    quality {\n        budget = aggressive\n    }\n\n    pin {\n        kv_dtype  = int4\n"
            "        retention = 1\n    }\n}\n")
    r = check_source(text, "t.kvp")
    (p,) = plans_for(r)
    assert (p.kv_dtype.id, p.retention, p.sharing) == ("int4", 1.0, 1.0)
    m = p.scenario.model
    phi = p.byte_factors.paging.value - 1.0
    by_hand = 64 * 32768 * _values_per_token(m) * (2 * (64 + 4) / 256) * (1.0 + phi)
    assert p.metric("kv_bytes").value == pytest.approx(by_hand, rel=1e-12)
    assert p.byte_factors.quantization.value == pytest.approx(0.53125 / 2)


def test_r4_compares_the_dtypes_own_width_not_the_scale_bytes() -> None:
    """R4 (quantize to the narrowest admissible width before evicting) reads the dtype's bits: int4 at vLLM's
    0.53 B a value with its scales is as narrow as fp4's bare 0.5 B, so with eviction allowed the plan may evict
    at int4 (W2's point on 4 × B200: r = 0.5 is the fastest, 9.98 ms against 15.55 ms at r = 1)."""
    from kvplan.lang import check_source
    from kvplan.planner import plans_for

    text = ("kvplan 1\n\ndeployment \"r4\" {\n    model   = llama-3-70b\n    device  = b200\n    devices = 4\n\n"
            "    workload {\n        batch   = 32\n        context = 128k\n    }\n\n"
            "    quality {\n        budget   = near-lossless\n        eviction = allowed\n    }\n}\n")
    (p,) = plans_for(check_source(text, "r4.kvp"))
    assert (p.kv_dtype.id, p.retention) == ("int4", 0.5)
    ev = next(d for d in p.decisions if d.domain == "eviction")
    assert not [o for o in ev.options if "R4" in str(o.reason)], ev.options


def test_a_fallback_dtype_states_its_bytes_with_the_engines_scales() -> None:
    """int4 pinned, emitted for TensorRT-LLM (no int4 KV): the nvfp4 it is written as holds an FP8 scale per 16
    values, 0.5625 B a value against the plan's 0.5 B (the TensorRT-LLM plan's int4, which it has no scales for)."""
    from kvplan.app.replan import emit
    from kvplan.lang import check_source
    from kvplan.planner import plans_for

    text = ("kvplan 1\n\ndeployment \"pin\" {\n    model   = llama-3-70b\n    device  = b200\n"
            "    devices = 4\n\n    workload {\n        batch   = 32\n        context = 128k\n    }\n\n"
            "    quality {\n        budget = near-lossless\n    }\n\n    pin {\n        kv_dtype = int4\n"
            "    }\n}\n")
    (p,) = plans_for(check_source(text, "pin.kvp"))
    said = " ".join(emit(p, "trtllm").findings)
    assert "kv_dtype int4 → fp4" in said, said
    assert "the nearest that is not lossier is fp4 (nvfp4), 1.125x the plan's bytes" in said, said
