"""The engine settings a deployment runs with, pinned in a spec (`kvplan import` writes them): what the
planner does with each (docs/language.md `pin`, docs/planner.md "Engine settings").

    memory_fraction  weights + KV may take that share of each device (the reserve is the rest)
    attention_dp     attention groups inside the tensor-parallel group each hold their own sequences,
                     so an MLA latent is copied once per group's rank, not on every rank
    replicas         copies of the deployment multiply the throughput
    max_context      the pool must also hold one sequence of the bound (an engine refuses to start else)
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.base.codes import Severity
from kvplan.lang import check_source
from kvplan.planner import plan


def spec(pin: str = "", workload: str = "", model: str = "deepseek-v3", device: str = "h200",
         devices: int = 8, weights: str = "fp8") -> str:
    return f"""kvplan 1
deployment "d" {{
    model = {model}
    device = {device}
    weights = {weights}
    engine = sglang
    workload {{
        batch = 8
        context = 4k
        {workload}
    }}
    pin {{
        kv_dtype = bf16
        devices = {devices}
        {pin}
    }}
}}
"""


def scenario(text: str) -> Any:
    result = check_source(text, "d.kvp")
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert not errors, [f"{d.code} {d.message}" for d in errors]
    return result.scenarios[0]


def codes(text: str) -> list[str]:
    return [d.code for d in check_source(text, "d.kvp").diagnostics]


def fits(p: Any) -> bool:
    return not any(u.constraint == "fits" for u in p.unmet)


def test_attention_dp_stores_the_mla_latent_once_per_group() -> None:
    one = plan(scenario(spec()))
    dp = plan(scenario(spec("attention_dp = 8")))
    assert one.tp == dp.tp == 8
    # tensor parallel 8 copies the latent on all 8 ranks; 8 attention groups of 1 rank copy it once
    assert one.metrics.kv_bytes.value == pytest.approx(8 * dp.metrics.kv_bytes.value)
    # DeepSeek-V3: 61 layers × (512 + 64) latent elements × 2 B = 70,272 B per token, 8 × 4,000 tokens
    assert dp.metrics.kv_bytes.value == pytest.approx(8 * 4000 * 61 * 576 * 2, rel=1e-3)


def test_attention_dp_of_a_gqa_model_splits_its_heads_over_the_group() -> None:
    one = plan(scenario(spec(model="llama-3-8b", weights="bf16", devices=8)))
    dp = plan(scenario(spec("attention_dp = 8", model="llama-3-8b", weights="bf16", devices=8)))
    # 8 KV heads over 8 ranks: no copy either way; 8 groups of one rank hold all 8 heads of their own sequences
    assert one.metrics.kv_bytes.value == pytest.approx(dp.metrics.kv_bytes.value)


def test_replicas_multiply_the_throughput_and_not_the_step() -> None:
    one = plan(scenario(spec()))
    two = plan(scenario(spec("replicas = 3", devices=24)))  # pin devices is the total: 3 replicas of 8
    assert two.metrics.step_time.value == pytest.approx(one.metrics.step_time.value)
    assert two.metrics.throughput.value == pytest.approx(3 * one.metrics.throughput.value)
    assert "3 replicas" in two.metrics.throughput.source


def test_memory_fraction_is_the_share_weights_and_kv_may_take() -> None:
    p = plan(scenario(spec("memory_fraction = 0.5")))
    # 8 × 141 GB at 0.5: the reserve is the other half of each device
    assert p.metrics.memory_usable.value == pytest.approx(8 * 141e9 * 0.5)
    default = plan(scenario(spec()))
    assert default.metrics.memory_usable.value == pytest.approx(8 * 141e9 * 0.92)


def test_memory_fraction_too_small_for_the_weights_does_not_fit() -> None:
    # 671B fp8 weights on 8 × 141 GB: 84 GB per device, more than 0.55 × 141 GB = 77.6 GB
    assert not fits(plan(scenario(spec("memory_fraction = 0.55"))))
    assert fits(plan(scenario(spec("memory_fraction = 0.9"))))


def test_the_pool_must_hold_one_sequence_of_the_bound() -> None:
    # one 8-GPU attention group of DeepSeek-V3 at bf16 KV holds about 285 GB / 8 per rank; a bound of
    # 16M tokens needs 16M × 70,272 B = 1.1 TB on one rank's group
    fine = spec("attention_dp = 8", workload="max_context = 128k")
    assert fits(plan(scenario(fine)))
    too_long = spec("attention_dp = 8", workload="max_context = 16M")
    p = plan(scenario(too_long))
    assert not fits(p)
    unmet = next(u for u in p.unmet if u.constraint == "fits")
    assert "one sequence of max_context 16,000,000 tokens" in unmet.message
    # fp8 weights (1 B per parameter) and, on every group alike, one 16M-token latent of 70,272 B per token
    # (1/8 of the pool each), against 8 × 141 GB less the 8% reserve
    sc = scenario(too_long)
    need = sc.model.params * 1 + 16e6 * 61 * 576 * 2 * 8
    assert unmet.shortfall.value == pytest.approx(need - 8 * 141e9 * 0.92, rel=1e-3)


def test_context_beyond_its_bound_and_groups_that_do_not_divide_are_reported() -> None:
    assert "KV108" in codes(spec(workload="max_context = 2k"))
    assert "KV120" in codes(spec("attention_dp = 3"))
    assert "KV108" in codes(spec("memory_fraction = 1.5"))
    assert "KV108" in codes(spec("replicas = 0"))
    assert "KV109" in codes(spec("max_batched_tokens = 8.5"))


def test_engine_pins_are_kept_on_the_scenario() -> None:
    sc = scenario(spec("memory_fraction = 85%\n        max_batched_tokens = 8Ki\n        replicas = 2\n"
                       "        attention_dp = 4", workload="max_context = 32Ki"))
    assert (sc.memory_fraction, sc.replicas, sc.attention_dp, sc.max_context) == (0.85, 2, 4, 32 * 1024)
    assert sc.pins["max_batched_tokens"].value == 8192
    assert sc.context_bound == 32 * 1024
    plain = scenario(spec())
    assert (plain.memory_fraction, plain.replicas, plain.attention_dp, plain.max_context) == (None, 1, 1, None)
    assert plain.context_bound == 4000
