"""A closed-loop benchmark run's start (kvplan.model.load.start_burst, run_mean): its C clients send their first
requests together, the engine packs their prompts into iterations of `chunk` tokens, and the mean TTFT the tool
prints is the run's. Checked by hand for one iteration and for one prompt per iteration, and for the identities."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.model import load

N_IN, N_OUT, CHUNK = 1024, 1024, 8192


def _model(dep, c: int, n_in: int = N_IN, chunk: int = CHUNK, prompts: float | None = None) -> load.Model:
    cfg, f, link = dep
    return load.Model(cfg, f, link, load.Service(0.0, n_in, N_OUT, chunk, clients=float(c), prompts=prompts))


def _run(dep, c: int, prompts: float | None, **kw: int) -> load.Load:
    cfg, f, link = dep
    return load.solve(cfg, f, link, load.Service(0.0, kw.get("n_in", N_IN), N_OUT, kw.get("chunk", CHUNK),
                                                 clients=float(c), prompts=prompts))


def test_prompts_that_fit_one_iteration_all_wait_for_it(dep) -> None:
    # 8 prompts of 1,024 tokens are one iteration of 8,192: each first token comes at its end, after all 8
    # prefills and one step with no decoder beside them
    m = _model(dep, 8)
    assert load.start_burst(m, 8) == pytest.approx(8 * m.prefill + float(m.step(0.0)), rel=1e-12)


def test_prompts_of_a_whole_chunk_each_take_one_iteration_in_turn(dep) -> None:
    # a prompt as long as the chunk is one iteration: prompt i waits for i prefills and the steps of iterations
    # 1..i, iteration i' carrying the i' − 1 prompts already decoding
    c = 5
    m = _model(dep, c, n_in=CHUNK)
    steps = [float(m.step(float(i))) for i in range(c)]
    by_hand = sum(i * m.prefill + sum(steps[:i]) for i in range(1, c + 1)) / c
    assert load.start_burst(m, c) == pytest.approx(by_hand, rel=1e-12)


def test_a_run_of_one_round_is_the_burst_and_a_long_run_tends_to_the_steady_state(dep) -> None:
    steady = _run(dep, 8, None)
    one_round = _run(dep, 8, 8.0)
    m = _model(dep, 8)
    assert one_round.ttft == pytest.approx(load.start_burst(m, 8), rel=1e-12)
    ten = _run(dep, 8, 80.0)
    assert ten.ttft == pytest.approx((8 * load.start_burst(m, 8) + 72 * steady.ttft) / 80, rel=1e-12)
    long = _run(dep, 8, 8e7)
    assert long.ttft == pytest.approx(steady.ttft, rel=1e-5)
    assert steady.ttft < ten.ttft < one_round.ttft  # the burst queues C prompts at once


def test_one_client_has_no_burst(dep) -> None:
    # alone, its first prompt runs as every later one does: k iterations of the step at batch 0 plus its prefill
    assert _run(dep, 1, 10.0).ttft == pytest.approx(_run(dep, 1, None).ttft, rel=1e-12)


@pytest.mark.parametrize("c", [1, 3, 64, 512])
def test_the_run_keeps_the_closed_loop_identities(dep, c: int) -> None:
    ld = _run(dep, c, 10.0 * c)
    x = ld.throughput
    assert x is not None
    assert x * (ld.ttft + (N_OUT - 1) * ld.itl) == pytest.approx(c, rel=1e-9)
    assert ld.decode_batch + x * ld.ttft == pytest.approx(c, rel=1e-9)
    assert ld.prefill_utilization == pytest.approx(x * ld.prefill_service, rel=1e-12)
    assert ld.running == pytest.approx(ld.decode_batch + ld.prefill_utilization, rel=1e-12)
    assert ld.prefill_wait == pytest.approx(ld.ttft - ld.prefill_service, rel=1e-12, abs=1e-15)


def test_the_queue_above_max_seqs_bursts_only_the_admitted(dep) -> None:
    cfg, f, link = dep
    sv = load.Service(0.0, N_IN, N_OUT, CHUNK, clients=24.0, max_seqs=16.0, prompts=240.0)
    ld = load.solve(cfg, f, link, sv)
    steady = load.solve(cfg, f, link, load.Service(0.0, N_IN, N_OUT, CHUNK, clients=24.0, max_seqs=16.0))
    m = _model(dep, 24)
    assert ld.ttft == pytest.approx((16 * load.start_burst(m, 16) + 224 * steady.ttft) / 240, rel=1e-12)
    assert math.isfinite(ld.ttft)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=st.integers(1, 600), n_in=st.integers(1, 20000), chunk=st.sampled_from([512, 2048, 8192, 16384]),
       per=st.floats(1.0, 50.0))
def test_any_run_keeps_the_identities_and_its_ttft_lies_between_its_parts(dep, c: int, n_in: int, chunk: int,
                                                                          per: float) -> None:
    ld = _run(dep, c, per * c, n_in=n_in, chunk=chunk)
    steady = _run(dep, c, None, n_in=n_in, chunk=chunk)
    x = ld.throughput
    assert x is not None
    assert x * (ld.ttft + (N_OUT - 1) * ld.itl) == pytest.approx(c, rel=1e-9)
    assert ld.decode_batch + x * ld.ttft == pytest.approx(c, rel=1e-9)
    # the run's mean TTFT is a weighted mean of the burst's and the steady state's
    burst = load.start_burst(_model(dep, c, n_in=n_in, chunk=chunk), c)
    assert min(burst, steady.ttft) * (1 - 1e-12) <= ld.ttft <= max(burst, steady.ttft) * (1 + 1e-12)
    assert ld.itl == steady.itl
