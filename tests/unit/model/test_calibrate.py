"""kvplan.model.calibrate: the least-squares fit of the expected model's factors (docs/calibrate.md)."""

from __future__ import annotations

import itertools

import attrs
import pytest

from kvplan import catalog
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Evidence, Value
from kvplan.model import calibrate as cal
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.tiering import prefill_flops

TRUTH = {"eta_w": 0.8, "eta_kv:bf16": 0.7, "eta_kv:fp8": 0.6, "eta_compute": 0.45, "t_fixed": 2e-3,
         "collective_latency": 15e-6, "t_layer": 20e-6}


def factors(kv: str, **over: float) -> ex.Factors:
    t = {**TRUTH, **over}

    def a(v: float, unit: str) -> Value:
        return Value(v, unit, Evidence.ASSUMED, "test")
    return ex.Factors(a(t["eta_w"], "x"), a(t[f"eta_kv:{kv}"], "x"), a(t["eta_compute"], "x"),
                      a(t["t_fixed"], "s"), a(t["collective_latency"], "s"), a(t["t_layer"], "s"),
                      a(t.get("t_moe", 0.0), "s"))


def measured(m: cal.Measurement, **over: float) -> cal.Measurement:
    """`m` with each time it asks for replaced by what the expected model gives at the true factors."""
    d, f = cal.deployment(m), factors(m.kv_dtype, **over)
    out = {kind: cal.expected_time(m, kind, d, f) for kind, _ in m.observed()}
    return attrs.evolve(m, itl_s=out.get("itl"), ttft_s=out.get("ttft", m.ttft_s), request_s=out.get("request"))


def grid(layouts: tuple[tuple[str, int], ...] = (("llama-3-8b", 1), ("llama-3-70b", 2), ("llama-3-70b", 4)),
         kvs: tuple[str, ...] = ("bf16", "fp8"), **over: float) -> list[cal.Measurement]:
    out = []
    for (model, tp), kv in itertools.product(layouts, kvs):
        points = [*itertools.product((1, 8, 32), (1_000, 8_000, 32_000)), (256, 128)]
        for b, s in points:
            m = cal.Measurement(model, "h100-sxm", tp, tp, "", kv, "vllm", b, s, itl_s=1.0, ttft_s=1.0,
                                input_len=s)
            out.append(measured(m, **over))
    return out


def test_the_fit_recovers_known_factors_exactly() -> None:
    ms = grid()
    (fit,) = cal.fit(ms, "p.toml")
    got = dict(fit.fitted)
    assert set(got) == set(TRUTH) and fit.left_out == ()
    for name, want in TRUTH.items():
        assert got[name].value == pytest.approx(want, rel=1e-9), name
        assert got[name].evidence is Evidence.DERIVED and "calibrated in p.toml [fit h100-sxm/vllm]" in got[name].source
    assert dict(fit.kv_efficiency)["fp8"].value == pytest.approx(0.6 / 0.8, rel=1e-9)
    assert fit.points == len(ms) * 2
    assert fit.rms.value < 1e-12 and all(abs(r.error) < 1e-9 for r in fit.residuals)
    assert all(r.measured.evidence is Evidence.MEASURED and r.fitted.evidence is Evidence.DERIVED
               for r in fit.residuals)


def test_a_compute_bound_step_takes_the_compute_branch() -> None:
    """At batch 256 and 128 tokens the 8B model's step is compute-bound at the true factors: the fit predicts
    it through the floor t_fixed + F / (η_π·π), not the memory path."""
    m = cal.Measurement("llama-3-8b", "h100-sxm", 1, 1, "", "bf16", "vllm", 256, 128, 1.0)
    d = cal.deployment(m)
    step = ex.expected_step(d.cfg, 256, 128, factors("bf16"), None)
    assert float(step.compute) + 2e-3 > float(step.fixed + step.weights + step.kv)
    (fit,) = cal.fit(grid(), "p.toml")
    hit = [r for r in fit.residuals if r.kind == "itl" and r.measured.value == pytest.approx(float(step.step))]
    assert hit and abs(hit[0].error) < 1e-9


def test_request_latencies_fit_the_prefill_and_every_decode_step() -> None:
    ms = []
    # two layer counts on one rank (32, 40) separate t_fixed from t_layer; 80 layers on 2 and 4 ranks the
    # collective latency (no step here is compute-bound, whose branch would pay t_layer and not the latency)
    layouts = (("llama-3-8b", 1), ("llama-2-13b", 1), ("llama-3-70b", 2), ("llama-3-70b", 4))
    for (model, tp), (b, inp, out) in itertools.product(layouts, ((1, 128, 64), (8, 1_024, 128), (32, 4_096, 32),
                                                                  (4, 16_000, 16))):
        m = cal.Measurement(model, "h100-sxm", tp, tp, "", "bf16", "vllm", b, inp + out / 2, None,
                            request_s=1.0, input_len=inp, output_len=out, prefill_prompts=b)
        ms.append(measured(m))
    (fit,) = cal.fit(ms, "p.toml")
    got = dict(fit.fitted)
    for name in ("eta_w", "eta_kv:bf16", "eta_compute", "t_fixed", "collective_latency", "t_layer"):
        assert got[name].value == pytest.approx(TRUTH[name], rel=1e-9), name


def test_the_request_latency_is_the_prefill_plus_output_len_minus_one_steps() -> None:
    m = cal.Measurement("llama-3-8b", "h100-sxm", 1, 1, "", "bf16", "vllm", 8, 1_064, None, request_s=1.0,
                        input_len=1_024, output_len=80, prefill_prompts=8)
    d, f = cal.deployment(m), factors("bf16")
    steps = sum(float(ex.expected_step(d.cfg, 8, 1_024 + i, f, d.link_bandwidth).step) for i in range(1, 80))
    assert cal.expected_time(m, "request", d, f) == pytest.approx(cal.prefill_time(d.cfg, 8, 1_024, f,
                                                                                   d.link_bandwidth) + steps,
                                                                  rel=1e-12)


def test_one_prompt_prefills_as_expected_ttft_and_a_batch_as_the_sum_of_its_flops() -> None:
    m, d = catalog.get_model("llama-3-70b"), catalog.get_device("h100-sxm")
    cfg, f, link = rf.Config(m, d, n_devices=2), factors("bf16"), 450e9
    one = cal.prefill_time(cfg, 1, 2_000, f, link)
    assert one == pytest.approx(float(ex.expected_ttft(cfg, 2_000, f, link).ttft), rel=1e-12)
    # independently: 4 prompts are 4 × the FLOPs of one over tp ranks at η_π·π, the weights read once,
    # two all-reduces per layer of all 8,000 tokens' activations, t_fixed and 80 layers' t_layer
    compute = 4 * float(prefill_flops(m, 2_000)) / (2 * 0.45 * d.compute)
    hidden = m.n_q * m.head_dim
    comm = 2 * m.n_layers * (15e-6 + 2 * (2 - 1) / 2 * 8_000 * hidden * 2 / link)
    assert cal.prefill_time(cfg, 4, 2_000, f, link) == pytest.approx(compute + comm + 2e-3 + 80 * 20e-6, rel=1e-12)


def test_one_model_on_one_rank_holds_eta_w_and_fits_t_fixed() -> None:
    """Every step of one dense model on one rank reads the same weights: W/(η_w·β) and t_fixed move together.
    η_w is held at its reported default and t_fixed takes the time they share (and L·t_layer's, held too), so
    the fitted t_fixed is the true one plus the weight time the default η_w misses; the KV term varies with
    batch × context, so η_kv is determined."""
    ms = [m for m in grid(layouts=(("llama-3-8b", 1),), kvs=("bf16",)) if m.batch < 256]
    ms = [attrs.evolve(m, ttft_s=None) for m in ms]
    (fit,) = cal.fit(ms, "p.toml")
    left = dict(fit.left_out)
    assert set(dict(fit.fitted)) == {"eta_kv:bf16", "t_fixed"}
    assert dict(fit.fitted)["eta_kv:bf16"].value == pytest.approx(0.7, rel=1e-9)
    default = ex.default_factors(catalog.get_device("h100-sxm"), "bf16", "vllm")
    d = cal.deployment(ms[0])
    weights = float(rf.step_time(d.cfg, 1, 1_000).weights)
    layers = d.cfg.model.n_layers
    want = (TRUTH["t_fixed"] + weights * (1 / TRUTH["eta_w"] - 1 / default.eta_w.value)
            + layers * (TRUTH["t_layer"] - default.t_layer.value))
    assert dict(fit.fitted)["t_fixed"].value == pytest.approx(want, rel=1e-9)
    assert "cannot separate it from t_fixed" in left["eta_w"] and "held at its default" in left["eta_w"]
    assert left["collective_latency"] == "no measurement on more than one rank"
    assert "no compute-bound" in left["eta_compute"]
    # the profile's reader takes η_w's default, so kv_efficiency is η_kv over that default
    assert dict(fit.kv_efficiency)["bf16"].value == pytest.approx(0.7 / default.eta_w.value, rel=1e-9)
    assert fit.written and fit.rms.value < 1e-12


def test_on_one_tensor_parallel_size_the_collective_latency_is_held_and_t_layer_fitted() -> None:
    """On 2 ranks every step pays 2·L all-reduces and L layers: the latency and t_layer move together. The fit
    holds the latency at its default and fits t_layer (three layer counts separate it from t_fixed and η_w),
    and says so; the measurements are made at that default latency, so t_layer comes back exactly."""
    default = ex.default_factors(catalog.get_device("h100-sxm"), "bf16", "vllm", "nvlink4").collective_latency
    ms = [m for m in grid(layouts=(("llama-3-8b", 2), ("llama-2-13b", 2), ("llama-3-70b", 2)), kvs=("bf16",),
                          collective_latency=default.value) if m.batch < 256]
    ms = [attrs.evolve(m, ttft_s=None) for m in ms]
    (fit,) = cal.fit(ms, "p.toml")
    got, left = dict(fit.fitted), dict(fit.left_out)
    assert set(got) == {"eta_w", "eta_kv:bf16", "t_fixed", "t_layer"}
    for name in got:
        assert got[name].value == pytest.approx(TRUTH[name], rel=1e-9), name
    assert "cannot separate it from t_layer" in left["collective_latency"]
    assert "held at its default" in left["collective_latency"]
    assert fit.rms.value < 1e-12


def test_one_layer_count_holds_t_layer_at_its_default() -> None:
    """One model on one rank: t_fixed and L·t_layer are one constant per step. t_layer is held at its default,
    then η_w (the weights are the same on every step), and t_fixed is fitted."""
    ms = [attrs.evolve(m, ttft_s=None) for m in grid(layouts=(("llama-3-8b", 1),), kvs=("bf16",)) if m.batch < 256]
    (fit,) = cal.fit(ms, "p.toml")
    left = dict(fit.left_out)
    assert "held at its default" in left["t_layer"] and "t_fixed" in left["t_layer"]
    assert set(dict(fit.fitted)) == {"eta_kv:bf16", "t_fixed"} and {"eta_w", "t_layer"} <= set(left)


def test_one_measurement_determines_nothing() -> None:
    ms = [measured(cal.Measurement("llama-3-8b", "h100-sxm", 1, 1, "", "bf16", "vllm", 8, 4_000, 1.0))]
    (fit,) = cal.fit(ms, "p.toml")
    assert fit.fitted == () and fit.kv_efficiency == () and not fit.written
    assert [n for n, _ in fit.left_out] == ["eta_w", "eta_kv:bf16", "eta_compute", "t_fixed", "collective_latency",
                                            "t_layer"]


def test_a_fraction_above_one_is_left_out_and_the_rest_refitted() -> None:
    """Measurements faster than the bound's weight stream (η_w 1.25) cannot make a profile's η_w: it is left out,
    with the reason, and held at its default while the rest is fitted."""
    ms = grid(eta_w=1.25)
    (fit,) = cal.fit(ms, "p.toml")
    left = dict(fit.left_out)
    assert "above 1: the measurements beat the bound" in left["eta_w"]
    assert "eta_w" not in dict(fit.fitted)
    assert all(0 < v.value <= 1 for n, v in fit.fitted if n.startswith("eta"))


def test_fits_are_per_device_and_engine_in_sorted_order() -> None:
    a = grid(layouts=(("llama-3-8b", 1),), kvs=("bf16",))
    b = [attrs.evolve(m, engine="sglang", device="h200") for m in a]
    fits = cal.fit([*b, *a], "p.toml")
    assert [(f.device, f.engine) for f in fits] == [("h100-sxm", "vllm"), ("h200", "sglang")]


def test_a_ttft_that_waited_behind_other_requests_is_not_fitted() -> None:
    m = cal.Measurement("llama-3-8b", "h100-sxm", 1, 1, "", "bf16", "vllm", 16, 2_000, 0.01, ttft_s=0.2,
                        input_len=1_500, prefill_prompts=0)
    assert m.observed() == (("itl", 0.01),)


def test_an_unknown_model_is_an_error_at_the_measurement() -> None:
    m = cal.Measurement("no-such-model", "h100-sxm", 1, 1, "", "bf16", "vllm", 1, 100, 0.01,
                        span=Span("runs.csv", 3, 1, 3, 1))
    with pytest.raises(KvplanError) as err:
        cal.fit([m], "p.toml")
    assert str(err.value).startswith("runs.csv:3:1: ") and "no-such-model" in str(err.value)


def test_a_run_fits_at_most_its_limit_of_measured_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal, "MAX_MEASURED_TIMES", 3)
    ms = [cal.Measurement("llama-3-8b", "h100-sxm", 1, 1, "", "bf16", "vllm", b, 1_000, 0.01) for b in (1, 2, 4, 8)]
    with pytest.raises(KvplanError, match="4 measured times: kvplan fits at most 3 in one run"):
        cal.fit(ms, "p.toml")
    assert cal.fit(ms[:3], "p.toml")
