"""The expected step's terms of issue 22 item 2 (docs/expected.md): tensor rates of the weights' dtype for prefill
and the compute floor, the per-MoE-layer fixed time, and the GEMM term that is off unless a device sets η_gemm.
Each figure is recomputed here from its formula and the catalog's published numbers."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan import catalog
from kvplan.base.evidence import Evidence, Value
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.tiering import prefill_flops

H100 = catalog.get_device("h100-sxm")
B200 = catalog.get_device("b200-hgx")
A100 = catalog.get_device("a100-80g")


@pytest.mark.parametrize(("device", "w_p", "rate"), [
    ("h100-sxm", 2.0, 989.4e12), ("h100-sxm", 1.0, 1978.9e12), ("h100-sxm", 0.5, 989.4e12),
    ("b200-hgx", 1.0, 4500e12), ("b200-hgx", 0.5, 9000e12), ("b300", 0.5, 13125e12), ("gb200", 0.5, 10000e12),
    ("a100-80g", 1.0, 312e12), ("mi300x", 1.0, 2614.9e12),
])
def test_the_gemms_run_at_the_rate_of_the_weights_dtype(device: str, w_p: float, rate: float) -> None:
    """FP8 weights at the FP8 peak, FP4 at the FP4 peak where the part has one; 4-bit weights on Hopper and FP8 on
    A100 (no such tensor cores) run weight-only at the BF16 peak."""
    assert rf.tensor_rate(catalog.get_device(device), w_p) == pytest.approx(rate)


def test_fp4_peaks_are_the_dense_halves_of_the_sparse_datasheet_figures() -> None:
    """The HGX B200 and GB200 tables publish FP4 with sparsity, 18 and 20 PFLOPS per GPU: dense is half."""
    assert B200.compute_fp4 == pytest.approx(18e15 / 2)
    assert catalog.get_device("gb200").compute_fp4 == pytest.approx(20e15 / 2)
    assert all(d.compute_fp4 is None or (d.fp4 and d.compute_fp4 >= (d.compute_fp8 or d.compute))
               for d in catalog.devices().values())


def test_prefill_and_the_compute_floor_of_fp8_weights_run_at_the_fp8_peak() -> None:
    m = catalog.get_model("llama-3-70b")
    cfg = rf.Config(m, H100, n_devices=4, w_p=1.0, w_kv=2.0)
    f = ex.default_factors(H100, "bf16", "vllm", "nvlink4")
    prompt = 4096
    want = prefill_flops(m, prompt) / (4 * f.eta_compute.value * 1978.9e12)
    assert float(ex.expected_ttft(cfg, prompt, f, None).prefill) == pytest.approx(float(want))
    b, s = 256, 2048
    flops = 2 * m.params_active * b + 4 * b * s * m.n_layers * m.n_q * m.head_dim
    assert float(rf.step_time(cfg, b, s).compute) == pytest.approx(flops / (4 * 1978.9e12))
    assert float(rf.step_time(cfg, b, s).linear) == pytest.approx(2 * m.params_active * b / (4 * 1978.9e12))


def test_the_ttft_bound_of_fp8_weights_is_below_the_bf16_one() -> None:
    m = catalog.get_model("llama-3-70b")
    f = ex.default_factors(H100, "bf16", "vllm", "nvlink4").perfect()
    t8 = float(ex.expected_ttft(rf.Config(m, H100, n_devices=2, w_p=1.0), 8192, f, None).ttft)
    t16 = float(ex.expected_ttft(rf.Config(m, H100, n_devices=2, w_p=2.0), 8192, f, None).ttft)
    assert t8 < t16


def _with(f: ex.Factors, **values: float) -> ex.Factors:
    return f.replaced({k: Value(v, "x" if k.startswith("eta") else "s", Evidence.ASSUMED, "test")
                       for k, v in values.items()})


def test_an_moe_model_pays_t_moe_per_layer_on_every_step_and_prefill_a_dense_one_does_not() -> None:
    default = ex.default_factors(H100, "bf16", "vllm", "nvlink4")
    assert (default.t_moe.value, default.t_moe.evidence) == (0.0, Evidence.ASSUMED)   # off: the ledger's fit set
    f, off = _with(default, t_moe=3 * 6.9056e-6), default   # vLLM's kernel count (docs/expected.md)
    moe = catalog.get_model("mixtral-8x7b")
    cfg = rf.Config(moe, H100, n_devices=2)
    gained = float(ex.expected_step(cfg, 8, 1024, f, None).step - ex.expected_step(cfg, 8, 1024, off, None).step)
    assert gained == pytest.approx(moe.n_layers * f.t_moe.value)
    ttft = float(ex.expected_ttft(cfg, 1024, f, None).ttft - ex.expected_ttft(cfg, 1024, off, None).ttft)
    assert ttft == pytest.approx(moe.n_layers * f.t_moe.value)
    dense = rf.Config(catalog.get_model("llama-3-70b"), H100, n_devices=2)
    assert float(ex.expected_step(dense, 8, 1024, f, None).step) == float(ex.expected_step(dense, 8, 1024, off,
                                                                                              None).step)


def test_the_gemm_term_is_off_by_default_and_adds_the_gemm_flops_at_eta_gemm_where_set() -> None:
    assert all(ex.default_factors(d, "bf16").eta_gemm is None for d in catalog.devices().values())
    m = catalog.get_model("llama-3-70b")
    cfg = rf.Config(m, H100, n_devices=4, w_p=1.0)
    f = ex.default_factors(H100, "bf16", "vllm", "nvlink4")
    on = f.replaced({"eta_gemm": Value(0.25, "x", Evidence.ASSUMED, "test")})
    b = np.array([1.0, 32.0, 128.0])
    base, with_gemm = ex.expected_step(cfg, b, 2048, f, None), ex.expected_step(cfg, b, 2048, on, None)
    np.testing.assert_allclose(with_gemm.gemm, 2 * m.params_active * b / (4 * 0.25 * 1978.9e12))
    np.testing.assert_allclose(with_gemm.step - base.step, with_gemm.gemm)   # the memory path binds at 2,048
    assert np.all(base.gemm == 0.0)
    assert on.perfect().eta_gemm is None
    bound = rf.step_time(cfg, b, 2048).step
    np.testing.assert_allclose(ex.expected_step(cfg, b, 2048, on.perfect(), None).step, bound)
