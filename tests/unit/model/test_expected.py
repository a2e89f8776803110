"""kvplan.model.expected: the expected step and TTFT beside the bound (docs/expected.md)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan import catalog
from kvplan.base.evidence import Evidence, Value
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.tiering import prefill_flops


def _factors(eta_w: float = 0.8, eta_kv: float = 0.6, eta_c: float = 0.5, fixed: float = 1e-3,
             lat: float = 1e-5, layer: float = 0.0, moe: float = 0.0) -> ex.Factors:
    def a(v: float, unit: str) -> Value:
        return Value(v, unit, Evidence.ASSUMED, "test")
    return ex.Factors(a(eta_w, "x"), a(eta_kv, "x"), a(eta_c, "x"), a(fixed, "s"), a(lat, "s"), a(layer, "s"),
                      a(moe, "s"))


def test_the_expected_step_is_the_formula_of_spec_10() -> None:
    m, d = catalog.get_model("llama-3-70b"), catalog.get_device("h100-sxm")
    cfg = rf.Config(m, d, n_devices=2)
    link = 450e9
    got = ex.expected_step(cfg, 8, 4500, _factors(), link)
    # independently: bytes per rank over the fractions of β, two ring all-reduces per layer
    w = float(rf.weight_bytes_read(m, 8, 2.0)) / 2
    k = float(rf.kv_bytes_read(cfg, 8, 4500)) / 2
    hidden = m.n_q * m.head_dim
    comm = 2 * m.n_layers * (1e-5 + 2 * (2 - 1) / 2 * 8 * hidden * 2 / link)
    want = 1e-3 + w / (0.8 * d.bandwidth) + k / (0.6 * d.bandwidth) + comm
    assert float(got.step) == pytest.approx(want, rel=1e-12)
    assert float(got.comm) == pytest.approx(comm, rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_the_expected_step_never_beats_the_bound(tp: int) -> None:
    m, d = catalog.get_model("llama-3-70b"), catalog.get_device("h200")
    cfg = rf.Config(m, d, n_devices=tp)
    b, s = np.array([1, 8, 64, 256]), np.array([1_000, 32_000, 128_000, 8_000])
    bound = rf.step_time(cfg, b, s).step
    for f in (_factors(), _factors(1, 1, 1, 0, 0)):
        got = ex.expected_step(cfg, b, s, f, 450e9)
        assert np.all(got.step >= bound * (1 - 1e-12))
    exact = ex.expected_step(cfg, b, s, _factors(1, 1, 1, 0, 0), None).step
    np.testing.assert_allclose(exact, bound, rtol=1e-12)  # perfect factors give the bound back


def test_no_all_reduce_on_one_rank_and_ttft_grows_with_the_prompt() -> None:
    m, d = catalog.get_model("llama-3-8b"), catalog.get_device("h100-sxm")
    cfg = rf.Config(m, d)
    assert float(ex.all_reduce_time(m, 8, 1, 450e9, 1e-5)) == 0
    t = ex.expected_ttft(cfg, np.array([128, 1_024, 8_192, 65_536]), _factors(), None).ttft
    assert np.all(np.diff(t) > 0)
    # a long prompt is compute-bound: F / (η_π · π), plus the fixed cost
    f = float(prefill_flops(m, 65_536))
    assert float(t[-1]) == pytest.approx(f / (0.5 * d.compute) + 1e-3, rel=1e-12)


def test_defaults_name_their_evidence() -> None:
    d = catalog.get_device("h100-sxm")
    f = ex.default_factors(d, "int4", "vllm", d.scaleup_link or "")
    for name, v in f.items():
        assert v.evidence in (Evidence.REPORTED, Evidence.ASSUMED, Evidence.DERIVED), name
        assert name in v.source or "η_w" in v.source
        # t_moe is off by default (performance.toml says why); every other factor is a positive rate or time
        assert 0 < v.value or (name == "t_moe" and v.value == 0 and v.evidence is Evidence.ASSUMED), name
    assert f.eta_kv.value == pytest.approx(f.eta_w.value * ex.performance.factor("kv_efficiency", kv="int4").value)


def test_the_all_reduces_over_arrays_are_the_scalar_ones_element_by_element() -> None:
    m = catalog.get_model("llama-3-70b")
    tp = np.array([1, 2, 4, 8, 1, 8])
    lat = np.array([1e-5, 2e-5, 1e-5, 3e-5, 0.0, 0.0])
    for link in (450e9, None):
        for tokens in (1, 32, 4_500):
            got = ex.all_reduce_time(m, tokens, tp, link, lat)  # the planner's call: one tp and latency each
            want = [float(ex.all_reduce_time(m, tokens, int(t), link, la)) for t, la in zip(tp, lat)]
            assert got.tolist() == want  # the same arithmetic, bit for bit


def test_every_layer_adds_t_layer_to_the_step_and_the_ttft_on_both_branches() -> None:
    # L · t_layer is paid by every forward pass: the memory path and the compute floor of the step, and the TTFT
    m, d = catalog.get_model("llama-3-70b"), catalog.get_device("h100-sxm")
    cfg = rf.Config(m, d, n_devices=2)
    base, layered = _factors(), _factors(layer=30e-6)
    extra = m.n_layers * 30e-6  # 80 layers × 30 µs = 2.4 ms
    for b, s in ((8, 4500), (4096, 16)):  # memory-bound, then compute-bound
        a = ex.expected_step(cfg, b, s, base, 450e9)
        z = ex.expected_step(cfg, b, s, layered, 450e9)
        assert float(z.layers) == pytest.approx(extra, rel=1e-12) and float(a.layers) == 0.0
        assert float(z.step) - float(a.step) == pytest.approx(extra, rel=1e-9)
    compute_bound = ex.expected_step(cfg, 4096, 16, layered, 450e9)
    assert float(compute_bound.step) == pytest.approx(1e-3 + extra + float(compute_bound.compute), rel=1e-12)
    t0 = ex.expected_ttft(cfg, 2000, base, 450e9)
    t1 = ex.expected_ttft(cfg, 2000, layered, 450e9)
    assert float(t1.ttft) - float(t0.ttft) == pytest.approx(extra, rel=1e-9)


def test_vllms_default_t_layer_is_reported_and_any_engines_is_an_assumed_zero() -> None:
    d = catalog.get_device("h100-sxm")
    vllm, any_ = ex.default_factors(d, "bf16", "vllm", "nvlink4"), ex.default_factors(d, "bf16", "any", "nvlink4")
    assert (vllm.t_layer.value, vllm.t_layer.evidence) == (pytest.approx(34.5e-6), Evidence.REPORTED)
    assert "pull request #36899" in vllm.t_layer.source
    assert (any_.t_layer.value, any_.t_layer.evidence) == (0.0, Evidence.ASSUMED)
    assert [k for k, _ in vllm.items()][-2:] == ["t_layer", "t_moe"]
