"""kvplan.model.calibrate with kernel measurements: the attention kernel alone on one rank (`kernel_s` to read
`kv_bytes` of KV, as `emit --target flashinfer`'s benchmark measures it) pins its KV dtype's η_kv, alone or in
the same least squares as ITL rows. The expected η_kv are computed here from the bandwidths, not by the fit."""

from __future__ import annotations

import attrs
import pytest

from kvplan import catalog
from kvplan.base.evidence import Evidence
from kvplan.model import calibrate as cal
from kvplan.model import expected as ex
from tests.unit.model.test_calibrate import TRUTH, grid

#: KV bytes one rank reads per step in the kernel rows below (any positive figure does).
KV_BYTES = 98_304_000.0


def kernel_row(kv: str, eta_kv: float, *, device: str = "h100-sxm", engine: str = "vllm", batch: int = 8,
               beta: float = 0.0, kv_bytes: float = KV_BYTES) -> cal.Measurement:
    """A kernel measurement whose time is kv_bytes / (η_kv · β), β the device's datasheet bandwidth unless
    given (a one-partition device: the bound's KV bandwidth per rank)."""
    bw = beta or catalog.get_device(device).bandwidth
    return cal.Measurement("llama-3-8b", device, 1, 1, "", kv, engine, batch, 4_000, None,
                           kernel_s=kv_bytes / (eta_kv * bw), kv_bytes=kv_bytes)


def test_a_kernel_measurement_is_its_own_kind_of_time() -> None:
    m = kernel_row("fp8", 0.8)
    assert m.observed() == (("kernel", m.kernel_s),)
    assert "kernel" in cal.KINDS


def test_kernel_rows_alone_give_eta_kv_exactly_and_leave_the_rest_out() -> None:
    ms = [kernel_row("bf16", 0.8123456789), kernel_row("fp8", 0.7012345678, batch=32)]
    (fit,) = cal.fit(ms, "p.toml")
    got = dict(fit.fitted)
    assert set(got) == {"eta_kv:bf16", "eta_kv:fp8"}
    assert got["eta_kv:bf16"].value == pytest.approx(0.8123456789, rel=1e-9)
    assert got["eta_kv:fp8"].value == pytest.approx(0.7012345678, rel=1e-9)
    assert got["eta_kv:fp8"].evidence is Evidence.DERIVED
    # η_w is not determined: the profile carries η_kv / the default η_w, which the reader multiplies back
    default_w = ex.default_factors(catalog.get_device("h100-sxm"), "fp8", "vllm").eta_w.value
    eff = dict(fit.kv_efficiency)
    assert eff["bf16"].value == pytest.approx(0.8123456789 / default_w, rel=1e-9)
    assert eff["fp8"].value == pytest.approx(0.7012345678 / default_w, rel=1e-9)
    left = dict(fit.left_out)
    assert set(left) == {"eta_w", "eta_compute", "t_fixed", "collective_latency", "t_layer"}
    assert all("attention kernel alone" in why for why in left.values())
    assert fit.written and fit.points == 2
    assert [r.kind for r in fit.residuals] == ["kernel", "kernel"]
    assert all(abs(r.error) < 1e-9 for r in fit.residuals)
    assert fit.residuals[0].measured.value == ms[0].kernel_s and fit.residuals[0].measured.unit == "s"


def test_eta_kv_is_relative_to_beta_eff_not_the_datasheet(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a two-partition device whose fabric limits the striped KV stream to 2 × 3 TB/s = 6 TB/s (below the
    datasheet's 8 TB/s), η_kv is achieved / 6 TB/s, as the bound's KV term uses it."""
    slow = attrs.evolve(catalog.get_device("b200"), fabric=3e12)
    real = cal.get_device
    monkeypatch.setattr(cal, "get_device", lambda name: slow if name == "b200" else real(name))
    assert slow.partitions == 2 and slow.bandwidth == 8e12
    m = kernel_row("fp8", 0.75, device="b200", beta=6e12)
    (fit,) = cal.fit([m], "p.toml")
    assert dict(fit.fitted)["eta_kv:fp8"].value == pytest.approx(0.75, rel=1e-9)


def test_kernel_rows_fit_in_the_same_least_squares_as_itl_rows() -> None:
    """ITL, TTFT rows in bf16 and kernel rows in fp8 at the same true factors: every factor comes back, η_kv
    of fp8 from its kernel rows alone (no ITL row is fp8), each residual reported with its kind."""
    ms = [*grid(kvs=("bf16",)), kernel_row("fp8", TRUTH["eta_kv:fp8"]),
          kernel_row("fp8", TRUTH["eta_kv:fp8"], batch=64, kv_bytes=3e9)]
    (fit,) = cal.fit(ms, "p.toml")
    got = dict(fit.fitted)
    assert set(got) == set(TRUTH) and fit.left_out == ()
    for name, want in TRUTH.items():
        assert got[name].value == pytest.approx(want, rel=1e-9), name
    assert dict(fit.kv_efficiency)["fp8"].value == pytest.approx(0.6 / 0.8, rel=1e-9)
    kinds = [r.kind for r in fit.residuals]
    assert kinds.count("kernel") == 2 and kinds.count("itl") == 30 and fit.points == len(kinds)
    assert all(abs(r.error) < 1e-9 for r in fit.residuals)


def test_a_kernel_that_disagrees_with_the_itl_rows_is_weighed_with_them() -> None:
    """bf16 ITL rows made at η_kv 0.7 and a bf16 kernel row at 0.5: the least squares lands between the two,
    and both kinds of row show the misfit in their residuals."""
    ms = [*grid(kvs=("bf16",)), kernel_row("bf16", 0.5)]
    (fit,) = cal.fit(ms, "p.toml")
    eta_kv = dict(fit.fitted)["eta_kv:bf16"].value
    assert 0.5 < eta_kv < 0.7
    kernel = [r for r in fit.residuals if r.kind == "kernel"]
    # the fitted η_kv is above the kernel's 0.5: the fitted kernel time is shorter by 0.5 / η_kv − 1
    assert len(kernel) == 1 and kernel[0].error == pytest.approx(0.5 / eta_kv - 1, rel=1e-9)
    assert any(abs(r.error) > 1e-6 for r in fit.residuals if r.kind == "itl")


def test_a_kernel_faster_than_the_bandwidth_is_left_out() -> None:
    (fit,) = cal.fit([kernel_row("bf16", 1.2)], "p.toml")
    assert "eta_kv:bf16" not in dict(fit.fitted) and not fit.written
    assert "above 1: the measurements beat the bound" in dict(fit.left_out)["eta_kv:bf16"]


def test_the_expected_kernel_time_is_kv_bytes_over_eta_kv_times_beta() -> None:
    m = kernel_row("fp8", 0.6)
    d = cal.deployment(m)
    f = ex.default_factors(d.cfg.device, "fp8", "vllm")
    assert cal.expected_time(m, "kernel", d, f) == pytest.approx(KV_BYTES / (f.eta_kv.value * 3.35e12), rel=1e-12)


def test_a_kernel_above_the_default_eta_w_is_left_out_of_kv_efficiency() -> None:
    """η_kv 0.95 of the H100 with η_w not determined: kv_efficiency would be 0.95 / the default η_w, above 1,
    which a profile cannot hold; it is left out with the reason (η_kv itself is still fitted and printed)."""
    default_w = ex.default_factors(catalog.get_device("h100-sxm"), "bf16", "vllm").eta_w.value
    assert default_w < 0.95
    (fit,) = cal.fit([kernel_row("bf16", 0.95)], "p.toml")
    assert dict(fit.fitted)["eta_kv:bf16"].value == pytest.approx(0.95, rel=1e-9)
    assert fit.kv_efficiency == () and not fit.written
    assert "the KV stream faster than the weights" in dict(fit.left_out)["eta_kv:bf16"]
