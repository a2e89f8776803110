"""Pinning choices the plan made gives the same plan (the same digest), whichever of them are pinned (issue 19
item 5): a pin of the plan's own kv_dtype or retention leaves the rules that chose it applying as they did, and a
pinned tp or pp never makes a count without a valid split of the model a candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan import catalog
from kvplan.lang import check_source
from kvplan.model.scenario import Pin, PinValue, Scenario
from kvplan.planner import plan
from kvplan.planner.plan import Plan
from tests.paths import DATA, ROOT

#: What a pin block can hold of a plan's choices, by pin key (what `kvplan pareto`'s pin block and lint read).
KEYS = ("kv_dtype", "retention", "block_size", "prefix_caching", "tier", "placement", "devices", "tensor_parallel",
        "pipeline_parallel")


def choices(p: Plan) -> dict[str, PinValue]:
    """The pin block that reproduces p: `devices` is the total over the replicas, as `pin devices = N` reads."""
    return {"kv_dtype": p.kv_dtype.id, "retention": float(p.retention), "block_size": float(p.block_size),
            "prefix_caching": bool(p.prefix_caching), "tier": p.tier.tier, "placement": p.placement,
            "devices": float(p.n_devices * p.scenario.replicas), "tensor_parallel": float(p.tp),
            "pipeline_parallel": float(p.pp)}


def pinned(sc: Scenario, p: Plan, keys: Sequence[str]) -> Scenario:
    made = choices(p)
    return attrs.evolve(sc, pins={**sc.pins, **{k: Pin(k, made[k], sc.spans["deployment"]) for k in keys}})


def scenario(path: Path, device: str, batch: int, context: int, name: str = "") -> Scenario:
    res = check_source(path.read_text(encoding="utf-8"), str(path))
    sc = next(s for s in res.scenarios if name in s.name)
    return attrs.evolve(sc, device=catalog.get_device(device), batch=batch, context=context)


def test_pinning_the_chosen_kv_dtype_keeps_the_layout() -> None:
    # W3 on TPU v6e: int4 on 16 devices, because R3 removes int4 on 8 (below s* there) and bf16 does not fit on 8;
    # the pinned int4 was planned on 8 devices, its expected step 45% longer
    sc = scenario(ROOT / "examples" / "w3-shared-prefix.kvp", "tpu-v6e", 8, 128_000)
    p0 = plan(sc, suggest=False)
    assert (p0.kv_dtype.id, p0.n_devices) == ("int4", 16)
    p1 = plan(pinned(sc, p0, ["kv_dtype"]), suggest=False)
    assert (p1.kv_dtype.id, p1.n_devices, p1.tp) == ("int4", 16, 16)
    assert p1.metrics.step_time.value == p0.metrics.step_time.value and p1.digest == p0.digest


def test_pinning_the_chosen_retention_keeps_the_kv_dtype() -> None:
    # a retention = 1 pin turned R3 off, and int4 below s* took the place of the bf16 the plan had chosen
    sc = scenario(ROOT / "examples" / "llama-3.1-8b-h100-custom.kvp", "mi355x", 16, 8_000, "context=8k")
    p0 = plan(sc, suggest=False)
    assert (p0.kv_dtype.id, p0.retention) == ("bf16", 1.0)
    p1 = plan(pinned(sc, p0, ["retention"]), suggest=False)
    assert p1.kv_dtype.id == "bf16" and p1.digest == p0.digest


FASTEST = """kvplan 1
deployment "d" {
    model = llama-3-8b
    device = gb200
    objective = fastest
    workload {
        batch = 64
        context = 32k
    }
}
"""


def test_a_pinned_pipeline_depth_does_not_make_an_invalid_split_a_candidate() -> None:
    # pipeline_parallel = 1 pinned searched 64 ranks of Llama-3-8B's 32 query heads, which no engine runs, and the
    # fastest objective took them (on GB200, whose 72-GPU NVLink domain holds a TP32 group: SPEC §12)
    (sc,) = check_source(FASTEST, "d.kvp").scenarios
    p0 = plan(sc, suggest=False)
    assert (p0.n_devices, p0.tp) == (32, 32)
    p1 = plan(pinned(sc, p0, ["pipeline_parallel"]), suggest=False)
    assert (p1.n_devices, p1.tp) == (32, 32) and p1.digest == p0.digest
    assert sc.model.n_q % p1.tp == 0


def test_a_pinned_compression_the_rules_refuse_everywhere_is_still_planned() -> None:
    # the operator decided: fp8 below s* on every layout is planned (lint reports it, KV203), not left unmet
    sc = scenario(DATA / "lint" / "project" / "suppressed.kvp", "h100-sxm", 1, 2_000)
    assert sc.pins["kv_dtype"].value == "fp8"
    p = plan(sc, suggest=False)
    assert p.kv_dtype.id == "fp8" and p.n_devices == 1 and not p.unmet


AGENTS = """kvplan 1
deployment "agents" {
    model  = llama-3-70b
    device = b200
    workload {
        batch   = 4
        context = 128k
    }
    quality {
        budget = aggressive
    }
    pin {
        kv_dtype  = int2
        retention = 0.5
    }
}
"""


def test_a_pin_that_changes_the_choice_overrules_the_rules_it_breaks() -> None:
    # docs/rules/KV208.md's example: int2 and r = 0.5 are the operator's, not the planner's, choice; R8 (below s* at
    # int2, eviction buys little) gives way to the pins, as R3 and R4 do, rather than moving the plan to the one
    # layout where it would not apply (64 ranks, the KV replicated 8 times)
    (sc,) = check_source(AGENTS, "agents.kvp").scenarios
    p = plan(sc, suggest=False)
    assert (p.kv_dtype.id, p.retention, p.n_devices) == ("int2", 0.5, 1)


SPECS = sorted(p for p in (*ROOT.glob("examples/*.kvp"), *DATA.glob("**/*.kvp"))
               if "invalid" not in p.parts and "golden" not in p.parts)


def _scenarios() -> list[Scenario]:
    out = []
    for path in SPECS:
        res = check_source(path.read_text(encoding="utf-8"), str(path))
        out += [s for s in res.scenarios if s.rate is None]  # a request workload's batch is the load model's
    return out


SCENARIOS = _scenarios()
DEVICES = sorted(catalog.devices())


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SCENARIOS), st.sampled_from(DEVICES), st.sampled_from([1, 4, 16, 64, 256]),
       st.sampled_from([1_000, 8_000, 32_000, 128_000]), st.lists(st.sampled_from(KEYS), min_size=1, unique=True))
@pytest.mark.slow
def test_pinning_any_of_the_plans_choices_gives_the_same_plan(sc: Scenario, device: str, batch: int, context: int,
                                                              keys: list[str]) -> None:
    context = context if context > sc.prefix else sc.context  # a shared prefix is part of every context
    sc = attrs.evolve(sc, device=catalog.get_device(device), batch=batch, context=context)
    p0 = plan(sc, suggest=False)
    p1 = plan(pinned(sc, p0, keys), suggest=False)
    assert p1.choices == p0.choices
    assert p1.digest == p0.digest

