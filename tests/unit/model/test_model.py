"""The model of SPEC §3–7: worked examples computed by hand, and its laws as properties."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.catalog import Device, Model
from kvplan.model import roofline as rf
from kvplan.model.footprint import (
    KvFactors,
    footprint,
    fragmentation,
    kappa,
    kv_bytes_per_seq,
    sharing_factor,
    tokens_for_bytes,
)
from kvplan.model.tiering import fetch_time, prefill_time


def llama70(params: float = 70e9) -> Model:
    # Llama-3-70B geometry (config.json): 80 layers, 64 q heads, 8 kv heads, head dim 128.
    return Model(id="l70", name="l70", n_layers=80, n_q=64, n_kv=8, head_dim=128, params=params,
                 params_active=params, windows=(None,) * 80)


def b200() -> Device:
    return Device(id="b200", name="b200", memory=192e9, bandwidth=8e12, compute=2250e12, compute_fp8=None,
                  partitions=2, fabric=10e12, sm_count=None, host_link=None, scaleup_link=None)


def mi300x() -> Device:
    return Device(id="mi300x", name="mi300x", memory=192e9, bandwidth=5.3e12, compute=1307.4e12,
                  compute_fp8=None, partitions=8, fabric=None, sm_count=None, host_link=None, scaleup_link=None)


# ------------------------------------------------------------ worked examples

def test_kappa_llama_3_70b() -> None:
    assert kappa(llama70(), 2.0) == 2 * 80 * 8 * 128 * 2 == 327_680


def test_s_star_worked_example() -> None:
    # SPEC §5: s*(1) = P·w_p/(b·κ) = 140e9 / 327,680 = 427,246.09 tokens ("427.2k")
    s = float(rf.s_star(rf.Config(llama70(), b200()), 1))
    assert s == pytest.approx(140e9 / 327_680)
    assert round(s / 1e3, 1) == 427.2


def test_two_bit_speedup_at_w1_is_1_25() -> None:
    w = 140e9
    k = 1 * 128_000 * 327_680
    assert float(rf.speedup(w, k, 8)) == pytest.approx((140 + 41.94304) / (140 + 41.94304 / 8))
    assert round(float(rf.speedup(w, k, 8)), 2) == 1.25


def test_two_bit_speedup_at_w2_is_4_8() -> None:
    w, k = 140e9, 32 * 128_000 * 327_680
    assert round(float(rf.speedup(w, k, 8)), 1) == 4.8


def test_deepseek_v2_mla_bytes_per_token() -> None:
    m = Model(id="dsv2", name="dsv2", n_layers=60, n_q=128, n_kv=128, head_dim=128, params=236e9,
              params_active=21e9, windows=(None,) * 60, kv_kind="mla", mla_kv_rank=512, mla_rope_dim=64)
    assert kappa(m, 2.0) == 60 * (512 + 64) * 2 == 69_120


def test_s_cap_worked() -> None:
    # (192 GB − 140 GB) / (1 · 327,680 B) = 158,691.4 tokens
    assert float(rf.s_cap(rf.Config(llama70(), b200()), 1)) == pytest.approx(52e9 / 327_680)


def test_s_cap_negative_when_weights_do_not_fit() -> None:
    small = attrs.evolve(b200(), memory=80e9)
    assert float(rf.s_cap(rf.Config(llama70(), small), 1)) < 0


def test_decode_flops_and_bytes() -> None:
    cfg = rf.Config(llama70(), b200())
    b, s = 4, 10_000
    assert float(rf.decode_flops(cfg.model, b, s)) == 2 * 70e9 * b + 4 * b * s * 80 * 64 * 128
    assert float(rf.decode_bytes(cfg, b, s)) == 140e9 + b * s * 327_680


def test_intensity_limits() -> None:
    short, long = rf.intensity_limits(llama70(), 1, 2.0, 2.0)
    assert float(short) == 1.0 and long == 8.0  # SPEC §4: 1 FLOP/B at b = 1, 8 FLOP/B for g = 8
    _, long2 = rf.intensity_limits(llama70(), 1, 2.0, 0.25)
    assert long2 == 64.0  # 2-bit KV: 64 FLOP/B, still far below any ridge


def test_beta_eff_placements() -> None:
    assert float(rf.beta_eff(b200(), "pinned")[0]) == 4e12
    assert float(rf.beta_eff(b200(), "striped")[0]) == 8e12  # min(8, 10·2/1)
    beta, upper = rf.beta_eff(mi300x(), "striped")
    assert float(beta) == 5.3e12 and upper  # unpublished fabric: an upper bound
    assert float(rf.beta_eff(mi300x(), "pinned")[0]) == pytest.approx(5.3e12 / 8)
    # affinity, b = 9 on 8 stacks: most loaded stack holds 2 → 4.5 stacks' worth
    assert float(rf.beta_eff(mi300x(), "affinity", 9)[0]) == pytest.approx(4.5 * 5.3e12 / 8)
    assert float(rf.beta_eff(mi300x(), "affinity", 16)[0]) == pytest.approx(5.3e12)


def test_ceiling_rate() -> None:
    cfg = rf.Config(llama70(), b200())
    assert float(rf.ceiling_rate(cfg)) == pytest.approx(8e12 / 327_680)


def test_sharing_factor_w3() -> None:
    # 8 requests of 128k sharing 96k: 8·128k / (96k + 8·32k) = 1024/352
    assert float(sharing_factor(8, 128_000, 96_000)) == pytest.approx(1024 / 352)


def test_fragmentation() -> None:
    assert float(fragmentation(100, 16)) == pytest.approx(112 / 100 - 1)
    assert float(fragmentation(128_000, 16)) == 0.0


def test_windows_sliding_every_layer() -> None:
    # Mistral-7B: 32 layers, 8 kv heads × 128, window 4096 on every layer
    m = Model(id="m7", name="m7", n_layers=32, n_q=32, n_kv=8, head_dim=128, params=7.24e9,
              params_active=7.24e9, windows=(4096,) * 32)
    assert float(kv_bytes_per_seq(m, 100_000, 2.0)) == 131_072 * 4096
    assert float(kv_bytes_per_seq(m, 1000, 2.0)) == 131_072 * 1000
    # the KV never reaches the weights' bytes past the window: s* is infinite at b = 1
    assert math.isinf(float(rf.s_star(rf.Config(m, b200()), 1)))


def test_windows_interleaved_inverse_exact() -> None:
    # 2 full + 2 windowed (W = 1000) layers: bytes(s) = e·(2s + 2·min(s, 1000))
    m = Model(id="x", name="x", n_layers=4, n_q=8, n_kv=2, head_dim=64, params=1e9, params_active=1e9,
              windows=(None, 1000, None, 1000))
    e = 2 * 2 * 64 * 2.0
    for s in (10.0, 999.0, 1000.0, 5000.0, 1e6):
        b = e * (2 * s + 2 * min(s, 1000))
        assert float(kv_bytes_per_seq(m, s, 2.0)) == pytest.approx(b)
        assert float(tokens_for_bytes(m, b, 2.0)) == pytest.approx(s)


def test_moe_weight_traffic() -> None:
    # E = 8, k = 2: b = 1 touches k/E, large b touches all
    m = Model(id="moe", name="moe", n_layers=2, n_q=8, n_kv=8, head_dim=64, params=10e9, params_active=4e9,
              windows=(None, None), n_experts=8, experts_per_token=2, params_routed=8e9)
    assert float(rf.weight_bytes_read(m, 1, 2.0)) == pytest.approx((2e9 + 8e9 * 2 / 8) * 2)
    assert float(rf.weight_bytes_read(m, 1000, 2.0)) == pytest.approx(10e9 * 2, rel=1e-6)
    b = 3
    assert float(rf.weight_bytes_read(m, b, 2.0)) == pytest.approx((2e9 + 8e9 * (1 - (6 / 8) ** 3)) * 2)


def test_tensor_parallel_replication() -> None:
    m = llama70()
    assert rf.Config(m, b200(), n_devices=8).kv_replication == 1.0
    assert rf.Config(m, b200(), n_devices=16).kv_replication == 2.0  # 16 ranks, 8 kv heads
    mla = attrs.evolve(m, kv_kind="mla", mla_kv_rank=512, mla_rope_dim=64)
    assert rf.Config(mla, b200(), n_devices=4).kv_replication == 4.0


def test_pipeline_adds_capacity_not_speed() -> None:
    m = llama70()
    one = rf.Config(m, b200(), n_devices=2, tp=1)
    t_pp = float(rf.step_time(one, 8, 64_000).memory)
    t_single = float(rf.step_time(rf.Config(m, b200()), 8, 64_000).memory)
    assert t_pp == pytest.approx(t_single)
    assert float(rf.s_cap(one, 8)) > float(rf.s_cap(rf.Config(m, b200()), 8))


def test_tiering_w4() -> None:
    m = llama70()
    s = 128_000
    flops = 2 * 70e9 * s + 2 * 80 * 64 * 128 * s**2
    assert float(prefill_time(m, s, 2250e12)) == pytest.approx(flops / (0.7 * 2250e12))
    assert float(fetch_time(m, s, 2.0, 64e9, 4.0)) == pytest.approx(s * 327_680 / (64e9 * 4))


def test_bad_inputs_raise() -> None:
    from kvplan.base.errors import ModelInputError

    with pytest.raises(ModelInputError):
        rf.check_batch_context(-1, 1000)
    with pytest.raises(ModelInputError):
        rf.check_batch_context(1, 0)
    with pytest.raises(ModelInputError):
        KvFactors(retention=0.0)
    with pytest.raises(ModelInputError):
        rf.Config(llama70(), b200(), n_devices=4, tp=3)


# ------------------------------------------------------------------- laws

batches = st.integers(min_value=1, max_value=4096)
contexts = st.integers(min_value=1, max_value=4_000_000)


@given(w=st.floats(1e6, 1e13), k=st.floats(1e3, 1e14), c1=st.floats(1.0, 64.0), c2=st.floats(1.0, 64.0))
def test_speedup_rises_with_c_and_stays_below_c(w: float, k: float, c1: float, c2: float) -> None:
    lo, hi = sorted((c1, c2))
    s_lo, s_hi = float(rf.speedup(w, k, lo)), float(rf.speedup(w, k, hi))
    assert s_lo <= s_hi * (1 + 1e-12)
    assert 1.0 - 1e-12 <= s_hi <= hi * (1 + 1e-12)


@given(b=batches, m=st.integers(2, 64))
def test_s_star_inversely_proportional_to_batch(b: int, m: int) -> None:
    cfg = rf.Config(llama70(), b200())
    assert float(rf.s_star(cfg, b)) == pytest.approx(float(rf.s_star(cfg, b * m)) * m, rel=1e-9)


@given(q=st.sampled_from([2.0, 1.0, 0.5, 0.25]), r=st.floats(0.5, 1.0), n=st.integers(1, 64),
       p_frac=st.floats(0.0, 0.99), s=st.integers(1000, 1_000_000))
def test_footprint_factors_multiply(q: float, r: float, n: int, p_frac: float, s: int) -> None:
    m = llama70()
    sigma = float(sharing_factor(n, s, int(p_frac * s)))
    phi = float(fragmentation(s, 16))
    got = float(footprint(m, s, q, KvFactors(retention=r, sharing=sigma, frag=phi)))
    expected = 2 * 80 * 8 * 128 * s * q * r * (1 + phi) / sigma
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(float(footprint(m, s, 2.0)) * (q / 2.0) * r * (1 + phi) / sigma, rel=1e-9)


@given(b1=batches, b2=batches)
def test_s_cap_shrinks_as_batch_grows(b1: int, b2: int) -> None:
    cfg = rf.Config(llama70(), b200())
    lo, hi = sorted((b1, b2))
    assert float(rf.s_cap(cfg, hi)) <= float(rf.s_cap(cfg, lo))


@given(b=batches)
def test_striped_at_least_pinned(b: int) -> None:
    for dev in (b200(), mi300x()):
        assert float(rf.beta_eff(dev, "striped", b)[0]) >= float(rf.beta_eff(dev, "pinned", b)[0])
        assert float(rf.beta_eff(dev, "affinity", b)[0]) >= float(rf.beta_eff(dev, "pinned", b)[0])


@settings(max_examples=50)
@given(b=batches, s=contexts)
def test_regime_consistent_with_crossovers(b: int, s: int) -> None:
    cfg = rf.Config(llama70(), b200())
    ss, sc = float(rf.s_star(cfg, b)), float(rf.s_cap(cfg, b))
    reg = str(rf.regime(s, ss, sc))
    kv = float(rf.kv_bytes_read(cfg, b, s))
    w = float(rf.weight_bytes_read(cfg.model, b, 2.0))
    need = w + float(rf.kv_bytes_stored(cfg, b, s))
    if reg == "capacity-bound":
        assert need > cfg.capacity * (1 - 1e-9)
    else:
        assert need <= cfg.capacity * (1 + 1e-9)
        assert (kv >= w * (1 - 1e-9)) == (reg == "kv-bound")


def test_vectorized_equals_scalar() -> None:
    cfg = rf.Config(llama70(), b200())
    bs = np.array([[1.0], [8.0], [32.0]])
    ss = np.array([[1e3, 1e4, 1e5]])
    grid = rf.step_time(cfg, bs, ss).step
    for i, b in enumerate((1, 8, 32)):
        for j, s in enumerate((1e3, 1e4, 1e5)):
            assert grid[i, j] == float(rf.step_time(cfg, b, s).step)
