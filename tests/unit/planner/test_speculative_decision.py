"""Speculative decoding as a planned decision (kvplan.planner.speculative, SPEC §15): adopted where weights bind,
rejected with both times per token where compute binds, each figure the model's formula worked by hand; the
published EAGLE-3 speedups (arXiv 2503.01840, SGLang, Llama-3.1-8B on one H100) beside the prediction."""

from __future__ import annotations

import pytest

from kvplan.catalog import speculative as drafts
from kvplan.lang import check_source
from kvplan.model import roofline as rf
from kvplan.model import speculative as sp
from kvplan.model.expected import deployment_factors, link_bandwidth
from kvplan.planner import plan
from kvplan.planner.plan import Plan

#: EAGLE-3's SGLang throughputs for Llama-3.1-8B on one H100, MT-bench (arXiv 2503.01840; SGLang's docs quote them).
PUBLISHED_BATCH_1 = 373.25 / 158.34
PUBLISHED_BATCH_64 = 1.38


def _plan(batch: int, context: str, block: str = "method = eagle3", engine: str = "sglang") -> Plan:
    source = (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100\n  devices = 1\n'
              f"  engine = {engine}\n  workload {{\n    batch = {batch}\n    context = {context}\n  }}\n"
              f"  speculative {{\n    {block}\n  }}\n}}\n")
    r = check_source(source, "t.kvp")
    assert r.ok, r.diagnostics
    return plan(r.scenarios[0])


def _by_hand(p: Plan, k: int) -> float:
    """T_step / ((T_verify + k · T_draft)/τ) from the model's pieces at the plan's layout and the catalog's α."""
    sc = p.scenario
    cfg = rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=2.0, w_kv=p.kv_width)
    f = deployment_factors(sc.device, p.kv_dtype.id, sc.engine)
    row = drafts.row_for("eagle3", sc.model.id)
    assert row is not None
    alpha = drafts.acceptance(row).value
    link = link_bandwidth(sc.device)
    tau = sum(alpha ** i for i in range(k + 1))
    head = sp.Draft("eagle3", row.draft_params, row.draft_layers)
    per_token = (float(sp.verify_time(cfg, sc.batch, sc.context, k, f, link))
                 + k * float(sp.draft_time(cfg, head, sc.batch, sc.context, f, link))) / tau
    return float(sp.verify_time(cfg, sc.batch, sc.context, 0, f, link)) / per_token


def test_a_plan_without_the_block_weighs_nothing() -> None:
    r = check_source('deployment "d" {\n  model = llama-3.1-8b\n  device = h100\n  workload {\n    batch = 1\n'
                     "    context = 1k\n  }\n}\n", "t.kvp")
    p = plan(r.scenarios[0])
    assert p.speculative is None and "speculative" not in [d.domain for d in p.decisions]


def test_batch_1_adopts_eagle3_with_the_formulas_speedup_within_15_percent_of_the_papers() -> None:
    p = _plan(1, "1k")
    s = p.speculative
    assert s is not None and s.adopted and s.method == "eagle3"
    assert s.draft_model == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    k = int(s.draft_tokens.value)
    assert s.speedup.value == pytest.approx(_by_hand(p, k))
    assert s.speedup.value == pytest.approx(max(_by_hand(p, j) for j in range(1, 17)))  # auto: the best k
    assert abs(s.speedup.value / PUBLISHED_BATCH_1 - 1) < 0.15
    (d,) = [d for d in p.decisions if d.domain == "speculative"]
    assert d.choice == f"eagle3, k = {k}" and "We will speculate" in d.decision


@pytest.mark.xfail(strict=True, reason="the model predicts 2.03× at batch 64 against 1.38× published: it costs a "
                   "chain verify and no per-step speculation overheads (docs/speculative.md)")
def test_batch_64_within_0_15_of_the_papers_speedup() -> None:
    s = _plan(64, "1k").speculative
    assert s is not None and abs(s.speedup.value - PUBLISHED_BATCH_64) < 0.15


def test_batch_64_is_what_the_formula_gives() -> None:
    p = _plan(64, "1k")
    assert p.speculative is not None
    assert p.speculative.speedup.value == pytest.approx(_by_hand(p, int(p.speculative.draft_tokens.value)))


def test_a_compute_bound_point_rejects_speculation_with_both_times() -> None:
    p = _plan(512, "256", "method = eagle3\n    draft_tokens = 2")
    s = p.speculative
    assert s is not None and not s.adopted and s.regime == "compute-bound"
    assert s.speedup.value == pytest.approx(_by_hand(p, 2)) and s.speedup.value < 1.0
    (d,) = [d for d in p.decisions if d.domain == "speculative"]
    assert d.choice == "off" and "We will not speculate" in d.decision
    assert f"{s.time_per_token.value * 1e3:.3g} ms" in d.decision
    assert f"{s.time_per_token_plain.value * 1e3:.3g} ms" in d.decision


def test_ngram_without_an_acceptance_says_what_to_write() -> None:
    p = _plan(1, "1k", "method = ngram")
    assert p.speculative is None
    (d,) = [d for d in p.decisions if d.domain == "speculative"]
    assert d.choice == "off" and "acceptance = " in d.options[0].reason


def test_ngram_with_an_acceptance_costs_no_draft() -> None:
    p = _plan(1, "1k", "method = ngram\n    acceptance = 0.5\n    draft_tokens = 3")
    s = p.speculative
    assert s is not None and s.draft_time.value == 0.0 and s.draft_memory.value == 0.0
    assert s.speedup.value == pytest.approx(s.time_per_token_plain.value / (s.verify_time.value / 1.875))


def test_auto_weighs_the_engines_methods() -> None:
    p = _plan(1, "1k", "method = auto")
    s = p.speculative
    assert s is not None and s.method == "eagle3"  # mtp has no module for Llama, ngram no acceptance
    (d,) = [d for d in p.decisions if d.domain == "speculative"]
    assert {o.choice for o in d.options} == {"mtp", "ngram"}


def test_the_block_changes_the_digest_only_when_it_asks() -> None:
    p = _plan(1, "1k")
    off = _plan(1, "1k", "method = off")
    assert off.speculative is None and p.digest != off.digest
