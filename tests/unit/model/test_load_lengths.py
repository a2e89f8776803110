"""Distribution-shaped request lengths in the load model (kvplan.model.load, docs/service.md): `uniform(lo, hi)`
lengths, their moments against brute force over the support, fixed lengths as the degenerate distribution, and the
bounded work of a wide range."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest

from kvplan import catalog
from kvplan.model import expected as ex
from kvplan.model import load
from kvplan.model import roofline as rf
from kvplan.model.scenario import Lengths, mean_context


def _deployment() -> tuple[rf.Config, ex.Factors, float | None]:
    d = catalog.get_device("h100-sxm")
    m = catalog.get_model("llama-3.1-8b")
    return rf.Config(m, d, n_devices=1, tp=1, w_p=2.0, w_kv=2.0), ex.default_factors(d, "bf16", "any", ""), \
        ex.link_bandwidth(d)


def test_the_moments_of_a_uniform_length_are_those_of_its_integers() -> None:
    n = Lengths(7, 30)
    xs = list(range(7, 31))
    assert n.mean == pytest.approx(sum(xs) / len(xs))
    assert n.second == pytest.approx(sum(x * x for x in xs) / len(xs))
    assert Lengths(512, 512).fixed and not n.fixed


def test_the_mean_context_is_the_token_weighted_mean_of_the_contexts_generated_at() -> None:
    """Brute force: every (n_in, n_out) pair, every context n_in + j (j = 1 … n_out − 1) a generated token is
    made at, weighted equally: the mean is s̄ up to the half token of the closed form (n_in + n_out/2 is the mean
    of n_in + 1 … n_in + n_out − 1)."""
    ins, outs = Lengths(100, 140), Lengths(2, 40)
    total = count = 0
    for a in range(ins.lo, ins.hi + 1):
        for b in range(outs.lo, outs.hi + 1):
            total += sum(a + j for j in range(1, b))
            count += b - 1
    assert mean_context(ins, outs) == pytest.approx(total / count, abs=1e-9)
    # fixed lengths: today's n_in + n_out/2
    assert mean_context(Lengths(4000, 4000), Lengths(512, 512)) == 4256.0


def test_the_prefill_moments_are_the_sums_over_the_prompt_lengths() -> None:
    cfg, f, link = _deployment()
    sv = load.Service(2.0, 3000, 300, 1024, in_lo=500, out_lo=100)
    m = load.Model(cfg, f, link, sv)
    ps, ks = [], []
    for n in range(500, 3001):
        t = ex.expected_ttft(cfg, float(n), f, link)
        ps.append(float(t.ttft) - f.t_fixed.value - float(t.layers))
        ks.append(math.ceil(n / 1024))
    step = 0.01
    s = [k * step + p for k, p in zip(ks, ps, strict=True)]
    mean, second = (float(x) for x in m.service(np.array(step)))
    assert m.prefill == pytest.approx(sum(ps) / len(ps), rel=1e-12)
    assert m.k_mean == pytest.approx(sum(ks) / len(ks), rel=1e-12)
    assert mean == pytest.approx(sum(s) / len(s), rel=1e-12)
    assert second == pytest.approx(sum(x * x for x in s) / len(s) / mean, rel=1e-12)
    assert m.decode_tokens == pytest.approx(199.0)
    assert m.mean_context == pytest.approx(mean_context(Lengths(500, 3000), Lengths(100, 300)))


def test_a_fixed_length_written_as_a_range_of_one_gives_the_same_figures() -> None:
    cfg, f, link = _deployment()
    fixed = load.Service(2.0, 4096, 512, 2048, batch_limit=300.0)
    degenerate = attrs.evolve(fixed, in_lo=4096, out_lo=512)
    assert not load.solve(cfg, f, link, fixed).saturated
    assert load.solve(cfg, f, link, degenerate) == load.solve(cfg, f, link, fixed)
    assert load.goodput(cfg, f, link, degenerate, 0.5, 0.02) == load.goodput(cfg, f, link, fixed, 0.5, 0.02)


def test_variable_lengths_wait_longer_than_fixed_ones_of_the_same_means() -> None:
    """M/G/1: the wait grows with E[S²]; the same mean prompt spread over a range waits longer."""
    cfg, f, link = _deployment()
    fixed = load.solve(cfg, f, link, load.Service(2.0, 4000, 512, 2048))
    spread = load.solve(cfg, f, link, load.Service(2.0, 6000, 768, 2048, in_lo=2000, out_lo=256))
    assert not fixed.saturated and not spread.saturated
    assert spread.prefill_wait > fixed.prefill_wait
    assert spread.tail_context == 6000 + 768 and fixed.tail_context == 4000 + 512


def test_a_wide_range_is_summed_over_bounded_strata() -> None:
    wide = Lengths(1, 1_000_000)
    xs, ws = load.support(wide)
    assert len(xs) == load.SUPPORT_POINTS and ws.sum() == pytest.approx(1.0)
    assert float(np.dot(ws, xs)) == pytest.approx(wide.mean, rel=1e-6)
    narrow = load.support(Lengths(10, 20))[0]
    assert list(narrow) == list(range(10, 21))


@pytest.mark.parametrize("sv", [load.Service(1.0, 100, 10, 64, in_lo=200), load.Service(1.0, 100, 10, 64, out_lo=0)])
def test_a_range_the_model_cannot_take_is_an_error(sv: load.Service) -> None:
    cfg, f, link = _deployment()
    with pytest.raises(load.KvplanError, match="positive rate and lengths"):
        load.solve(cfg, f, link, sv)
