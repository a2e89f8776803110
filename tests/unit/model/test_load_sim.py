"""The load model (kvplan.model.load) against a discrete-event simulation of the same scheduler.

The simulation runs the scheduler iteration by iteration with seeded arrivals: continuous batching, one prompt
prefilled at a time (first come first served) in chunks of `chunk` tokens, one chunk per iteration riding on the
decode step. An iteration takes the expected step (kvplan.model.expected.expected_step, the function the closed
form uses) at the number of generating sequences and *their actual mean context* (the closed form assumes
n_in + n_out/2), plus c/n_in of the prompt's prefill for a chunk of c tokens. It measures what the closed form
predicts: the time-averaged decode batch, the token-weighted inter-token latency, the mean TTFT and the mean
requests in the engine. Nothing of the closed form's algebra (Little's law, the fluid ITL, Pollaczek–Khinchine) is
used by the simulation.

Tolerances (why), over rates at 20%, 50% and 80% of the saturation rate the closed form reports: the decode batch,
the ITL and the concurrency within 8%: the closed form is a mean-value (fluid) model; with Poisson arrivals the
batch fluctuates, and the step grows with the batch, so the token-weighted ITL leans to the larger batches (Jensen:
measured 6% at 80% of saturation, 2% or less at 50% and below; deterministic arrivals within 2.5%). The TTFT within
10%: the prefill's service time varies with the decode batch during the prompt's iterations, and a prompt that finds
the slot free waits for the iteration in progress, which the closed form takes as half a decode step (measured within
5.5%). The simulation keeps 3,000 requests after a warm-up of 1,000, seeded. With uniform lengths
(`uniform(lo, hi)`, drawn per request, seeded) the same tolerances hold over the same grid of rates.
"""

from __future__ import annotations

import math
import random
from collections import deque

import pytest

from kvplan import catalog
from kvplan.model import expected as ex
from kvplan.model import load
from kvplan.model import roofline as rf

N_IN, N_OUT, CHUNK = 1024, 128, 512


def _deployment() -> tuple[rf.Config, ex.Factors, float | None]:
    d = catalog.get_device("h100-sxm")
    m = catalog.get_model("llama-3.1-8b")
    link = ex.link_bandwidth(d)
    return rf.Config(m, d, n_devices=1, tp=1, w_p=2.0, w_kv=2.0), ex.default_factors(d, "bf16", "any", ""), link


def _requests(rng: random.Random, rate: float, arrivals: str, requests: int, inputs: tuple[int, int],
              outputs: tuple[int, int]) -> tuple[list[float], list[int], list[int]]:
    """Arrival times, then each request's lengths: the arrivals are drawn first, so fixed lengths see the same
    arrivals as before lengths were drawn."""
    gaps = [rng.expovariate(rate) if arrivals == "poisson" else 1.0 / rate for _ in range(requests)]
    t_acc, times = 0.0, []
    for g in gaps:
        t_acc += g
        times.append(t_acc)
    return times, [rng.randint(*inputs) for _ in range(requests)], [rng.randint(*outputs) for _ in range(requests)]


def simulate(cfg: rf.Config, f: ex.Factors, link: float | None, rate: float, arrivals: str,
             requests: int = 4000, seed: int = 13, inputs: tuple[int, int] = (N_IN, N_IN),
             outputs: tuple[int, int] = (N_OUT, N_OUT), chunk: int = CHUNK) -> dict[str, float]:
    """Mean decode batch, ITL, TTFT and requests in the engine, after the first quarter of the requests. Each
    request's lengths are drawn (seeded) uniformly from the integers of `inputs` and `outputs`, inclusive, as
    vLLM's random dataset draws them; fixed by default."""
    times, n_in, n_out = _requests(random.Random(seed), rate, arrivals, requests, inputs, outputs)
    prefill = {n: float(ex.expected_ttft(cfg, float(n), f, link).ttft) - f.t_fixed.value for n in set(n_in)}

    cache: dict[tuple[int, int], float] = {}

    def step(n: int, ctx_sum: int) -> float:
        key = (n, round(ctx_sum / n) if n else 0)
        if key not in cache:
            cache[key] = float(ex.expected_step(cfg, float(n), float(key[1]), f, link).step)
        return cache[key]

    queue: deque[int] = deque()
    decoding: list[list[int]] = []       # [request, tokens left, context]
    active: list[int] | None = None      # [request, prompt tokens left]
    first, done = [math.nan] * requests, [math.nan] * requests
    t, nxt = 0.0, 0
    warm = times[requests // 4]
    itl_sum = itl_n = batch_area = span = 0.0
    while nxt < requests or queue or active or decoding:
        if not (queue or active or decoding):
            t = max(t, times[nxt])
        while nxt < requests and times[nxt] <= t:
            queue.append(nxt)
            nxt += 1
        if active is None and queue:
            r = queue.popleft()
            active = [r, n_in[r]]
        c = min(chunk, active[1]) if active else 0
        n = len(decoding)
        dt = step(n, sum(s[2] for s in decoding))
        if active is not None:
            dt += c / n_in[active[0]] * prefill[n_in[active[0]]]
        if t >= warm and nxt < requests:
            batch_area += n * dt
            span += dt
            itl_sum += n * dt
            itl_n += n
        t += dt
        for s in decoding:
            s[1] -= 1
            s[2] += 1
        for s in [s for s in decoding if s[1] == 0]:
            done[s[0]] = t
        decoding = [s for s in decoding if s[1] > 0]
        if active is not None:
            active[1] -= c
            if active[1] == 0:
                first[active[0]] = t
                if n_out[active[0]] > 1:
                    decoding.append([active[0], n_out[active[0]] - 1, n_in[active[0]] + 1])
                else:
                    done[active[0]] = t
                active = None
    kept = range(requests // 4, requests)
    sojourn = sum(done[i] - times[i] for i in kept) / len(kept)
    return {"decode_batch": batch_area / span, "itl": itl_sum / itl_n,
            "ttft": sum(first[i] - times[i] for i in kept) / len(kept),
            "concurrency": rate * sojourn}


@pytest.fixture(scope="module")
def deployment() -> tuple[rf.Config, ex.Factors, float | None]:
    return _deployment()


def _service(rate: float, arrivals: str = "poisson") -> load.Service:
    return load.Service(rate, N_IN, N_OUT, CHUNK, batch_limit=None, arrivals=arrivals)


@pytest.mark.parametrize("arrivals", load.ARRIVALS)
@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
def test_closed_form_agrees_with_the_simulation_below_saturation(deployment, arrivals: str, share: float) -> None:
    cfg, f, link = deployment
    sat = load.solve(cfg, f, link, _service(1.0, arrivals)).saturation_rate
    rate = share * sat
    got = load.solve(cfg, f, link, _service(rate, arrivals))
    assert not got.saturated
    sim = simulate(cfg, f, link, rate, arrivals)
    assert got.decode_batch == pytest.approx(sim["decode_batch"], rel=0.08)
    assert got.itl == pytest.approx(sim["itl"], rel=0.08)
    assert got.concurrency == pytest.approx(sim["concurrency"], rel=0.08)
    assert got.ttft == pytest.approx(sim["ttft"], rel=0.10)


def test_past_saturation_the_model_says_so_and_the_simulation_queue_grows(deployment) -> None:
    cfg, f, link = deployment
    sat = load.solve(cfg, f, link, _service(1.0)).saturation_rate
    over = load.solve(cfg, f, link, _service(1.3 * sat))
    assert over.saturated and over.saturation_rate == pytest.approx(sat)
    assert math.isnan(over.itl)
    # the simulated TTFT grows with the length of the run: the queue has no steady state
    short = simulate(cfg, f, link, 1.3 * sat, "deterministic", requests=1000)["ttft"]
    long = simulate(cfg, f, link, 1.3 * sat, "deterministic", requests=3000)["ttft"]
    assert long > 2 * short


@pytest.mark.parametrize(("ttft", "itl"), [(0.095, None), (None, 0.0117)])
def test_at_the_goodput_the_simulation_meets_the_slos_and_just_above_it_does_not(deployment, ttft, itl) -> None:
    """The goodput (kvplan.model.load.goodput) seen by the simulation: at it the simulated mean TTFT and ITL are
    within the tolerances above of the SLOs; at 1.25× it they exceed the SLOs (the closed form's miss there is
    larger than its disagreement with the simulation). SLOs set so that the goodput is 60–70% of saturation."""
    cfg, f, link = deployment
    g = load.goodput(cfg, f, link, _service(1.0), ttft, itl)
    sat = load.solve(cfg, f, link, _service(1.0)).saturation_rate
    assert 0.5 * sat < g.rate < 0.8 * sat and g.binding == ("ttft" if ttft else "itl")
    key, slo, tol = ("ttft", ttft, 0.10) if ttft else ("itl", itl, 0.08)
    at = simulate(cfg, f, link, g.rate, "poisson")
    above = simulate(cfg, f, link, 1.25 * g.rate, "poisson")
    assert at[key] <= slo * (1 + tol)
    assert above[key] > slo


#: A uniform case (docs/service.md, Distribution-shaped lengths): the fixed case's means, spread ±50% as
#: `vllm bench serve --dataset-name random --random-range-ratio 0.5` spreads them.
IN_RANGE, OUT_RANGE = (512, 1536), (64, 192)


def _uniform(rate: float) -> load.Service:
    return load.Service(rate, IN_RANGE[1], OUT_RANGE[1], CHUNK, batch_limit=None, in_lo=IN_RANGE[0],
                        out_lo=OUT_RANGE[0])


@pytest.mark.slow
@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
def test_with_uniform_lengths_the_closed_form_agrees_with_the_simulation(deployment, share: float) -> None:
    """Lengths drawn per request (seeded) from the uniform ranges; the closed form's M/G/1 wait, E[P] and the
    token-weighted mean context against the simulation, within the fixed case's tolerances (module docstring).
    Measured: every figure within 6% (the largest at 80% of saturation: decode batch −6.0%, TTFT −5.8%); the M/D/1
    closed form at the mean lengths instead misses the simulated TTFT by −12% at 50% and −28% at 80%."""
    cfg, f, link = deployment
    sat = load.solve(cfg, f, link, _uniform(1.0)).saturation_rate
    got = load.solve(cfg, f, link, _uniform(share * sat))
    assert not got.saturated
    sim = simulate(cfg, f, link, share * sat, "poisson", inputs=IN_RANGE, outputs=OUT_RANGE)
    assert got.decode_batch == pytest.approx(sim["decode_batch"], rel=0.08)
    assert got.itl == pytest.approx(sim["itl"], rel=0.08)
    assert got.concurrency == pytest.approx(sim["concurrency"], rel=0.08)
    assert got.ttft == pytest.approx(sim["ttft"], rel=0.10)
