"""The load model's edges (kvplan.model.load): where each saturation limit binds, the prefill-only service,
bounded work and clear errors. Its agreement with a simulation is tests/unit/model/test_load_sim.py."""

from __future__ import annotations

import math

import pytest

from kvplan.base.errors import KvplanError
from kvplan.model import expected as ex
from kvplan.model import load


def test_the_saturation_rate_is_the_edge_of_the_steady_state(dep) -> None:
    cfg, f, link = dep
    sat = load.solve(cfg, f, link, load.Service(1.0, 1024, 128, 512)).saturation_rate
    assert not load.solve(cfg, f, link, load.Service(0.99 * sat, 1024, 128, 512)).saturated
    over = load.solve(cfg, f, link, load.Service(1.01 * sat, 1024, 128, 512))
    assert over.saturated and math.isnan(over.ttft) and over.binding == "prefill"


def test_at_the_prefill_limit_every_iteration_carries_a_chunk(dep) -> None:
    cfg, f, link = dep
    got = load.solve(cfg, f, link, load.Service(1.0, 1024, 128, 512))
    near = load.solve(cfg, f, link, load.Service(0.999 * got.saturation_rate, 1024, 128, 512))
    # N_d → (n_out − 1)/k = 127/2 and ρ → 1 as the rate reaches the prefill limit
    assert near.decode_batch == pytest.approx(127 / 2, rel=0.01)
    assert near.prefill_utilization == pytest.approx(1.0, abs=0.01)


def test_a_small_memory_binds_first_and_caps_the_running_sequences(dep) -> None:
    cfg, f, link = dep
    sv = load.Service(1.0, 1024, 128, 512, batch_limit=8.0)
    got = load.solve(cfg, f, link, sv)
    assert got.binding == "memory" and got.max_running == 8.0
    near = load.solve(cfg, f, link, load.Service(0.999 * got.saturation_rate, 1024, 128, 512, batch_limit=8.0))
    assert near.decode_batch == pytest.approx(7.0, rel=0.01)


def test_one_output_token_is_a_prefill_only_service(dep) -> None:
    cfg, f, link = dep
    got = load.solve(cfg, f, link, load.Service(1.0, 1024, 1, 512, arrivals="deterministic"))
    assert got.decode_batch == 0.0 and got.binding == "prefill"
    s = got.prefill_service
    assert got.saturation_rate == pytest.approx(1.0 / s)
    assert got.ttft == pytest.approx((1 - 1.0 * s) * got.step / 2 + s)  # no queue with deterministic arrivals


def test_the_fixed_point_is_little_s_law_on_the_decode_stage(dep) -> None:
    cfg, f, link = dep
    got = load.solve(cfg, f, link, load.Service(5.0, 2048, 256, 2048))
    assert got.decode_batch == pytest.approx(5.0 * 255 * got.itl, rel=1e-9)
    assert got.itl == pytest.approx(got.step / (1 - 5.0 * got.chunk_time))
    assert got.concurrency == pytest.approx(5.0 * (got.ttft + 255 * got.itl))


@pytest.mark.parametrize("sv", [load.Service(0.0, 10, 10, 10), load.Service(math.inf, 10, 10, 10),
                                load.Service(1.0, 0, 10, 10), load.Service(1.0, 10, 10, 0),
                                load.Service(1.0, 10, 10, 10, arrivals="bursty")])
def test_inputs_the_model_cannot_take_are_clear_errors(dep, sv: load.Service) -> None:
    cfg, f, link = dep
    with pytest.raises(KvplanError):
        load.solve(cfg, f, link, sv)


def test_a_chunk_adds_the_prefill_without_the_per_step_and_per_layer_costs_the_step_pays(dep) -> None:
    # P is the prompt's expected prefill less t_fixed and L · t_layer: a chunk rides on a forward pass that
    # already pays both, so vLLM's t_layer (34.5 µs × 32 layers) must not change P
    cfg, f, link = dep
    vllm = ex.default_factors(cfg.device, "bf16", "vllm", "")
    assert vllm.t_layer.value > 0 and f.t_layer.value == 0
    sv = load.Service(1.0, 1024, 128, 512)
    assert load.Model(cfg, vllm, link, sv).prefill == pytest.approx(load.Model(cfg, f, link, sv).prefill, rel=1e-12)
