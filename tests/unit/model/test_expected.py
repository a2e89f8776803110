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
             lat: float = 1e-5) -> ex.Factors:
    def a(v: float, unit: str) -> Value:
        return Value(v, unit, Evidence.ASSUMED, "test")
    return ex.Factors(a(eta_w, "x"), a(eta_kv, "x"), a(eta_c, "x"), a(fixed, "s"), a(lat, "s"))


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
    assert float(got["step"]) == pytest.approx(want, rel=1e-12)
    assert float(got["comm"]) == pytest.approx(comm, rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_the_expected_step_never_beats_the_bound(tp: int) -> None:
    m, d = catalog.get_model("llama-3-70b"), catalog.get_device("h200")
    cfg = rf.Config(m, d, n_devices=tp)
    b, s = np.array([1, 8, 64, 256]), np.array([1_000, 32_000, 128_000, 8_000])
    bound = rf.step_time(cfg, b, s)["step"]
    for f in (_factors(), _factors(1, 1, 1, 0, 0)):
        got = ex.expected_step(cfg, b, s, f, 450e9)
        assert np.all(got["step"] >= bound * (1 - 1e-12))
    exact = ex.expected_step(cfg, b, s, _factors(1, 1, 1, 0, 0), None)["step"]
    np.testing.assert_allclose(exact, bound, rtol=1e-12)  # perfect factors give the bound back


def test_no_all_reduce_on_one_rank_and_ttft_grows_with_the_prompt() -> None:
    m, d = catalog.get_model("llama-3-8b"), catalog.get_device("h100-sxm")
    cfg = rf.Config(m, d)
    assert float(ex.all_reduce_time(m, 8, 1, 450e9, 1e-5)) == 0
    t = ex.expected_ttft(cfg, np.array([128, 1_024, 8_192, 65_536]), _factors(), None)["ttft"]
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
        assert 0 < v.value
    assert f.eta_kv.value == pytest.approx(f.eta_w.value * ex.performance.factor("kv_efficiency", kv="int4").value)


def test_the_vectorized_all_reduces_are_the_scalar_ones_element_by_element() -> None:
    m = catalog.get_model("llama-3-70b")
    tp = np.array([1, 2, 4, 8, 1, 8])
    lat = np.array([1e-5, 2e-5, 1e-5, 3e-5, 0.0, 0.0])
    for link in (450e9, None):
        for tokens in (1, 32, 4_500):
            got = ex.all_reduce_times(m, tokens, tp, link, lat)
            want = [float(ex.all_reduce_time(m, tokens, int(t), link, la)) for t, la in zip(tp, lat)]
            assert got.tolist() == want  # the same arithmetic, bit for bit
