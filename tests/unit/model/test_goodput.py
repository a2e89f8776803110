"""The goodput search (kvplan.model.load.goodput, docs/service.md): checked against an independent scan of the
rate through load.solve, the monotonic properties it relies on, and its edges (no SLO, an SLO no rate meets, one
output token, a memory that binds first). The simulation's view of it is tests/unit/model/test_load_sim.py."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.model import load

N_IN, N_OUT, CHUNK = 1024, 128, 512


def _sv(rate: float = 1.0, n_out: int = N_OUT, limit: float | None = None) -> load.Service:
    return load.Service(rate, N_IN, n_out, CHUNK, batch_limit=limit)


def _scan(dep, ttft: float | None, itl: float | None, n_out: int = N_OUT, limit: float | None = None,
          points: int = 800) -> tuple[float, float]:
    """The last rate that meets and the first that misses on a fine even scan of (0, λ_sat) through load.solve."""
    cfg, f, link = dep
    sat = load.solve(cfg, f, link, _sv(1.0, n_out, limit)).saturation_rate
    last = 0.0
    for r in np.linspace(sat / points, sat, points, endpoint=False):
        if load.misses(load.solve(cfg, f, link, _sv(float(r), n_out, limit)), ttft, itl) is not None:
            return last, float(r)
        last = float(r)
    return last, sat


@pytest.mark.slow
@pytest.mark.parametrize(("ttft", "itl", "binds"), [(0.095, None, "ttft"), (None, 0.0117, "itl"),
                                                    (0.2, 0.0117, "itl"), (0.08, 0.02, "ttft")])
def test_goodput_is_the_slo_boundary_a_fine_scan_of_the_rate_finds(dep, ttft, itl, binds) -> None:
    cfg, f, link = dep
    g = load.goodput(cfg, f, link, _sv(), ttft, itl)
    last, first = _scan(dep, ttft, itl)
    assert g.binding == binds
    assert last <= g.rate < first  # within one scan step of the boundary the scan saw
    below = load.solve(cfg, f, link, _sv(g.rate * (1 - 1e-6)))
    above = load.solve(cfg, f, link, _sv(g.rate * (1 + 1e-6)))
    assert load.misses(below, ttft, itl) is None and load.misses(above, ttft, itl) == binds


@pytest.mark.parametrize("n_out", [N_OUT, 1])
def test_itl_and_ttft_grow_with_the_rate_up_to_saturation(dep, n_out: int) -> None:
    cfg, f, link = dep
    sat = load.solve(cfg, f, link, _sv(1.0, n_out)).saturation_rate
    loads = [load.solve(cfg, f, link, _sv(float(r), n_out)) for r in np.linspace(sat / 100, sat, 100, endpoint=False)]
    itl, ttft = np.array([x.itl for x in loads]), np.array([x.ttft for x in loads])
    assert np.all(np.diff(itl) > 0) and np.all(np.diff(ttft) > 0)


def test_goodput_grows_as_the_slo_loosens(dep) -> None:
    cfg, f, link = dep
    rates = [load.goodput(cfg, f, link, _sv(), t, None).rate for t in (0.06, 0.08, 0.1, 0.2, 1.0)]
    assert rates == sorted(rates) and len(set(rates)) == len(rates)


def test_with_no_latency_slo_the_goodput_is_the_saturation_rate(dep) -> None:
    cfg, f, link = dep
    sat = load.solve(cfg, f, link, _sv()).saturation_rate
    assert load.goodput(cfg, f, link, _sv(), None, None) == load.Goodput(sat, "saturation")
    # an ITL SLO the steady state meets up to saturation: saturation binds, not the SLO
    assert load.goodput(cfg, f, link, _sv(), None, 1.0) == load.Goodput(sat, "saturation")


def test_an_slo_no_rate_meets_gives_no_goodput(dep) -> None:
    cfg, f, link = dep
    alone = load.solve(cfg, f, link, _sv(1e-6))  # the TTFT of a prompt that finds the engine idle
    g = load.goodput(cfg, f, link, _sv(), 0.5 * alone.ttft, None)
    assert g == load.Goodput(0.0, "ttft")


def test_one_output_token_and_a_binding_memory(dep) -> None:
    cfg, f, link = dep
    g = load.goodput(cfg, f, link, _sv(n_out=1), 0.095, None)
    last, first = _scan(dep, 0.095, None, n_out=1)
    assert g.binding == "ttft" and last <= g.rate < first
    # a memory of 8 sequences saturates before the TTFT SLO binds
    capped = load.goodput(cfg, f, link, _sv(limit=8.0), 0.5, None)
    assert capped.binding == "saturation"
    assert capped.rate == pytest.approx(load.solve(cfg, f, link, _sv(limit=8.0)).saturation_rate)


def test_the_search_is_bounded_and_does_not_read_the_declared_rate(dep) -> None:
    cfg, f, link = dep
    a = load.goodput(cfg, f, link, _sv(1.0), 0.095, 0.0117)
    b = load.goodput(cfg, f, link, _sv(500.0), 0.095, 0.0117)  # a rate past saturation: the lengths are what count
    assert a == b
