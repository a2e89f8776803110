"""The arithmetic between the pools of disaggregated serving (kvplan.model.disagg, SPEC §14), each figure recomputed
by hand here, and the load model's decode pool (load.Service.decode_only): no prefill chunk in its steps."""

from __future__ import annotations

import math

import pytest

from kvplan import catalog
from kvplan.base.errors import KvplanError
from kvplan.model import disagg as dg
from kvplan.model import expected as ex
from kvplan.model import load
from kvplan.model.roofline import Config


def test_the_transfer_of_a_gqa_prompt_is_n_in_kappa() -> None:
    m = catalog.get_model("llama-3.1-8b")
    # κ = 2 · L · n_kv · d_h · w = 2 · 32 · 8 · 128 · 2 B = 131,072 B per token at bf16
    assert dg.transfer_bytes(m, 4000, 2.0) == pytest.approx(4000 * 131_072)
    # over NVLink 4 at 450 GB/s a direction: 524.288 MB / 450 GB/s = 1.16508 ms
    assert dg.transfer_time(4000 * 131_072, 450e9) == pytest.approx(524_288_000 / 450e9)


def test_the_transfer_of_an_mla_prompt_is_its_latent() -> None:
    m = catalog.get_model("deepseek-r1")
    # MLA: κ = L · (d_c + d_r) · w = 61 · (512 + 64) · 2 B = 70,272 B per token; 4,000 tokens over IB NDR's 50 GB/s
    assert dg.transfer_bytes(m, 4000, 2.0) == pytest.approx(281_088_000)
    assert dg.transfer_time(281_088_000, 50e9) == pytest.approx(5.62176e-3)


def test_a_link_of_no_bandwidth_is_an_error() -> None:
    with pytest.raises(KvplanError, match="positive bandwidth"):
        dg.transfer_time(1.0, 0.0)


@pytest.mark.parametrize("devices, link, same", [(2, "nvlink4", True), (8, "nvlink4", True), (9, "ib-ndr", False),
                                                 (16, "ib-ndr", False)])
def test_the_link_between_the_pools(devices: int, link: str, same: bool) -> None:
    # an H200 HGX board holds 8 in one NVLink domain; past it the KV crosses each GPU's ConnectX-7
    assert dg.pool_link(catalog.get_device("h200"), devices) == (link, same)


def test_prefix_sharing_discounts_the_prefill() -> None:
    # 4 requests share a 1,000-token prefix: one computes it, three read it: 4,000 − 1,000 · 3/4 = 3,250
    assert dg.computed_prompt(4000, 1000, 4) == 3250
    assert dg.computed_prompt(4000, 1000, 1) == 4000
    assert dg.computed_prompt(10, 10, 2) == 5
    assert dg.computed_prompt(10, 10, 1000) == 1  # the last token is always computed


@pytest.mark.parametrize("rate, mu, n", [(2.0, 0.7, 3), (2.0, 1.0, 2), (0.1, 5.0, 1), (2.0, 0.0, 0)])
def test_workers_carry_the_rate(rate: float, mu: float, n: int) -> None:
    assert dg.workers(rate, mu) == n


def _decode_pool(rate: float, decode_only: bool) -> tuple[load.Load, load.Model]:
    m, d = catalog.get_model("llama-3.1-8b"), catalog.get_device("h100-sxm")
    cfg = Config(m, d, n_devices=1, tp=1, w_p=2.0, w_kv=2.0)
    f = ex.deployment_factors(d, "bf16", "vllm")
    sv = load.Service(rate, 2000, 200, 2048, batch_limit=200.0, decode_only=decode_only)
    return load.solve(cfg, f, None, sv), load.Model(cfg, f, None, sv)


def test_a_decode_pool_has_no_prefill_in_its_steps() -> None:
    ld, m = _decode_pool(2.0, True)
    assert m.prefill == 0.0 and m.chunks == 0
    assert not ld.saturated
    # ITL is the step itself (no λ·P stretch), the wait for a slot is the iteration in progress, T/2
    assert ld.itl == pytest.approx(ld.step)
    assert ld.ttft == pytest.approx(ld.step / 2.0)
    assert ld.prefill_wait == 0.0 and ld.prefill_utilization == 0.0
    # Little's law on the decode stage: N_d = λ · (n_out − 1) · ITL
    assert ld.decode_batch == pytest.approx(2.0 * 199 * ld.itl, rel=1e-6)
    both, _ = _decode_pool(2.0, False)
    assert both.itl > ld.itl  # the chunks of one engine serving both phases stretch its steps


def test_a_decode_pool_saturates_on_memory_or_decode_only() -> None:
    ld, m = _decode_pool(2.0, True)
    assert ld.binding in ("memory", "decode")
    assert m.cap() == pytest.approx(199.0)  # the batch limit less the one slot; the prefill cap is gone
    assert math.isfinite(ld.saturation_rate)
