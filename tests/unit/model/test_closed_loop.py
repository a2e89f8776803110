"""The closed-loop form of the load model (kvplan.model.load.closed_loop, SPEC §13): its identities, the
queue-free single client, monotonicity in the clients, the prefill-bound limit, and one case computed by hand
with a different algorithm (a damped fixed-point iteration) from the same step and prefill figures."""

from __future__ import annotations

import math

import pytest

from kvplan.base.errors import KvplanError
from kvplan.model import expected as ex
from kvplan.model import load
from kvplan.model import roofline as rf

N_IN, N_OUT, CHUNK = 1024, 1024, 8192


def _loop(dep: tuple[rf.Config, ex.Factors, float | None], c: float, n_in: int = N_IN, n_out: int = N_OUT,
          **kw: int) -> load.Load:
    cfg, f, link = dep
    return load.solve(cfg, f, link, load.Service(0.0, n_in, n_out, CHUNK, clients=c, **kw))


@pytest.mark.parametrize("c", [1, 3, 64, 512, 4096])
def test_the_closed_loop_identities_hold(dep, c: int) -> None:
    ld = _loop(dep, c)
    x, ttft, tpot = ld.throughput, ld.ttft, ld.itl
    assert x is not None and not ld.saturated
    # X·(TTFT + (OSL − 1)·TPOT) = C: each client is always in a request (SPEC §13)
    assert x * (ttft + (N_OUT - 1) * tpot) == pytest.approx(c, rel=1e-9)
    # Little's law on the decode stage and on the prefill slot: the clients are decoding or at the prefill slot
    assert ld.decode_batch == pytest.approx(x * (N_OUT - 1) * tpot, rel=1e-9)
    assert ld.decode_batch + x * ttft == pytest.approx(c, rel=1e-9)
    # the slot is busy X·S of the time, and at most one prompt is in it
    assert ld.prefill_utilization == pytest.approx(x * ld.prefill_service, rel=1e-9)
    assert ld.prefill_utilization <= 1 + 1e-12
    assert ld.running == pytest.approx(ld.decode_batch + ld.prefill_utilization, rel=1e-12)


def test_one_client_never_queues_and_its_ttft_is_one_prefill(dep) -> None:
    cfg, f, link = dep
    ld = _loop(dep, 1)
    m = load.Model(cfg, f, link, load.Service(0.0, N_IN, N_OUT, CHUNK, clients=1.0))
    # alone: its prompt runs with no decoder beside it, k = 1 iteration of the step at batch 0 plus its prefill
    one_prefill = math.ceil(N_IN / CHUNK) * float(m.step(0.0)) + m.prefill
    assert ld.prefill_wait == pytest.approx(0.0, abs=1e-15)
    assert ld.ttft == pytest.approx(one_prefill, rel=1e-12)
    # and its prefill is the expected TTFT of the prompt alone, less nothing but the step's own fixed parts
    alone = ex.expected_ttft(cfg, float(N_IN), f, link)
    assert ld.ttft == pytest.approx(float(alone.ttft) - f.t_fixed.value - float(alone.layers)
                                    + float(m.step(0.0)), rel=1e-12)


def test_more_clients_raise_throughput_ttft_and_tpot(dep) -> None:
    loads = [_loop(dep, c) for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)]
    for a, b in zip(loads, loads[1:]):
        assert a.throughput is not None and b.throughput is not None
        assert b.throughput > a.throughput and b.ttft > a.ttft and b.itl > a.itl


def test_many_clients_saturate_the_prefill_slot(dep) -> None:
    ld = _loop(dep, 2**17)
    # every iteration carries a prompt: X → 1/S, the slot's utilization → 1, and the queue holds the rest
    assert ld.throughput == pytest.approx(1.0 / ld.prefill_service, rel=1e-3)
    assert ld.prefill_utilization == pytest.approx(1.0, abs=1e-3)


def _by_hand(dep, c: float) -> tuple[float, float, float]:
    """(X, TTFT, TPOT) of the closed loop by a damped fixed-point iteration on N_d, written out from SPEC §13 and
    the mean value analysis of a queue with a delay station (not the module's grid-and-bisection)."""
    cfg, f, link = dep
    m = load.Model(cfg, f, link, load.Service(0.0, N_IN, N_OUT, CHUNK, clients=c))
    p, k, dec = m.prefill, math.ceil(N_IN / CHUNK), N_OUT - 1
    n = c / 2
    for _ in range(2000):
        t = float(m.step(n))
        s = k * float(m.step(n * (c - 1) / c)) + p
        # decode stage: X_d = n / (dec·T + n·P); the ITL the prefill chunks stretch
        x_d = n / (dec * t + n * p)
        itl = t / (1 - x_d * p)
        z = dec * itl
        # R = S + (C − 1)/(R + Z)·S·(R − S/2) (deterministic service), iterated to its fixed point
        r = s
        for _ in range(500):
            r = s + (c - 1) / (r + z) * s * (r - s / 2)
        x = c / (r + z)
        n = 0.5 * n + 0.5 * x * z  # Little's law on the decode stage, damped
    return x, r, itl


def test_one_case_agrees_with_a_hand_computation(dep) -> None:
    ld = _loop(dep, 48)
    x, ttft, tpot = _by_hand(dep, 48.0)
    assert ld.throughput == pytest.approx(x, rel=1e-6)
    assert ld.ttft == pytest.approx(ttft, rel=1e-6)
    assert ld.itl == pytest.approx(tpot, rel=1e-6)


def test_uniform_lengths_keep_the_identities(dep) -> None:
    ld = _loop(dep, 64, n_in=1536, n_out=768, in_lo=512, out_lo=256)
    assert ld.throughput is not None
    assert ld.throughput * (ld.ttft + (512 - 1) * ld.itl) == pytest.approx(64, rel=1e-9)  # E[n_out] = 512


def test_one_output_token_has_no_tpot_and_is_an_error(dep) -> None:
    with pytest.raises(KvplanError, match="at least two output tokens"):
        _loop(dep, 8, n_out=1)


@pytest.mark.parametrize("cap", [1, 16, 48])
def test_a_queue_appears_exactly_when_the_clients_exceed_max_seqs(dep, cap: int) -> None:
    free = _loop(dep, cap)  # the loop of `cap` clients, no engine cap
    at = _loop(dep, cap, max_seqs=cap)
    assert at == free  # C = max_num_seqs: nothing waits, the figures are the uncapped loop's
    assert _loop(dep, cap, max_seqs=cap + 1) == free
    extra = 7
    over = _loop(dep, cap + extra, max_seqs=cap)
    assert free.throughput is not None and over.throughput is not None
    # the engine runs `cap` at once and the queue is never empty: its loop is the cap-client loop, and by hand
    # (Little's law on the queue) the 7 waiting clients add 7 / X to every request's TTFT
    assert over.throughput == pytest.approx(free.throughput, rel=1e-12)
    assert over.itl == pytest.approx(free.itl, rel=1e-12)
    assert over.ttft == pytest.approx(free.ttft + extra / free.throughput, rel=1e-12)
    assert over.prefill_wait == pytest.approx(free.prefill_wait + extra / free.throughput, rel=1e-12)
    assert over.concurrency == cap + extra
    # the closed-loop identity still holds over all C clients
    assert over.throughput * (over.ttft + (N_OUT - 1) * over.itl) == pytest.approx(cap + extra, rel=1e-9)


def test_the_default_max_seqs_is_vllms() -> None:
    from kvplan.catalog import get_device
    from kvplan.model.pools.vllm import default_max_seqs
    # vLLM 0.33.0 get_batch_defaults (engine/arg_utils.py:2979-3006): 1,024 from 70 GiB but A100, else 256
    assert default_max_seqs(get_device("h100-sxm").memory, "h100-sxm")[0] == 1024
    assert default_max_seqs(get_device("b200").memory, "b200")[0] == 1024
    assert default_max_seqs(get_device("a100-sxm").memory, "a100-sxm")[0] == 256
