"""Speculative decoding's step (kvplan.model.speculative, SPEC §15): τ, the verify step at b·(k+1) query tokens on
the expected step's own terms, a draft forward's cost and the time per token, each against the formula worked by
hand from the catalog's figures (Llama-3.1-8B on one H100: 8,030,261,248 parameters, 32 layers, κ = 131,072 B)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan import catalog
from kvplan.base.errors import ModelInputError
from kvplan.catalog import speculative as drafts
from kvplan.model import roofline as rf
from kvplan.model import speculative as sp
from kvplan.model.expected import default_factors, expected_step

M = catalog.get_model("llama-3.1-8b")
H100 = catalog.get_device("h100")
F = default_factors(H100, "bf16", "sglang", H100.scaleup_link or "")
CFG = rf.Config(M, H100, w_p=2.0, w_kv=2.0)
HEAD = sp.Draft("eagle3", 424_689_664, 1)
KAPPA = 2 * 32 * 8 * 128 * 2  # bytes of KV per token


def test_tau_is_the_geometric_sum_of_kept_tokens() -> None:
    assert float(sp.tau(0.5, 3)) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert float(sp.tau(0.8, 1)) == pytest.approx(1.8)


def test_the_catalogs_alpha_gives_back_its_tau() -> None:
    row = drafts.row_for("eagle3", M.id)
    assert row is not None and row.tau == 2.77 and row.tau_k == 7
    alpha = drafts.acceptance(row).value
    assert sum(alpha ** i for i in range(8)) == pytest.approx(2.77, abs=1e-9)


def test_verify_at_no_draft_is_the_expected_step() -> None:
    for b, s in ((1, 1000), (64, 4000), (512, 256)):
        assert float(sp.verify_time(CFG, b, s, 0, F, None)) == pytest.approx(
            float(expected_step(CFG, b, s, F, None).step))


def test_a_weight_bound_verify_reads_what_one_step_reads() -> None:
    """At batch 1 the memory path dominates: k + 1 query tokens read the same weights and KV as one."""
    s = 1000
    by_hand = (F.t_fixed.value + 32 * F.t_layer.value + M.params * 2 / (F.eta_w.value * H100.bandwidth)
               + s * KAPPA / (F.eta_kv.value * H100.bandwidth))
    for k in (1, 3, 7):
        assert float(sp.verify_time(CFG, 1, s, k, F, None)) == pytest.approx(by_hand)


def test_a_compute_bound_verify_grows_with_k_plus_one() -> None:
    b, s, k = 512, 256, 3
    attention = 2 * 32 * (128 + 128) * 32 * s  # FLOPs per query token over the context: 2·n_q·(d_qk + d_v)·L·s
    flops = (k + 1) * b * (2 * M.params + attention)
    by_hand = F.t_fixed.value + 32 * F.t_layer.value + flops / (F.eta_compute.value * H100.compute)
    assert float(sp.verify_time(CFG, b, s, k, F, None)) == pytest.approx(by_hand)


def test_an_eagle3_forward_reads_its_head_and_one_layers_kv() -> None:
    b, s = 4, 2000
    memory = HEAD.params * 2 / (F.eta_w.value * H100.bandwidth) + b * s * KAPPA / 32 / (F.eta_kv.value * H100.bandwidth)
    assert float(sp.draft_time(CFG, HEAD, b, s, F, None)) == pytest.approx(F.t_layer.value + memory)
    assert float(sp.draft_time(CFG, sp.Draft("ngram", 0, 0), b, s, F, None)) == 0.0


def test_time_per_token_and_speedup() -> None:
    b, s, alpha = 1, 1000, 0.65
    ks = np.arange(1, 5)
    step = sp.speculative_step(CFG, b, s, ks, alpha, HEAD, F, None)
    plain = float(expected_step(CFG, b, s, F, None).step)
    draft = float(sp.draft_time(CFG, HEAD, b, s, F, None))
    for i, k in enumerate(ks):
        tau = sum(alpha ** j for j in range(k + 1))
        per_token = (float(sp.verify_time(CFG, b, s, k, F, None)) + k * draft) / tau
        assert float(step.per_token[i]) == pytest.approx(per_token)
        assert float(step.speedup[i]) == pytest.approx(plain / per_token)
    assert 1 < float(step.speedup.max()) < float(sp.tau(alpha, 4))  # never above the tokens kept per verify


def test_speculation_loses_where_compute_binds() -> None:
    """Large batch, short context: every k is slower per token than the plain step (SPEC §15)."""
    step = sp.speculative_step(CFG, 512, 256, np.arange(1, 17), 0.65, HEAD, F, None)
    assert float(step.speedup.max()) < 1.0


def test_draft_memory_is_its_weights_and_one_layers_kv() -> None:
    assert float(sp.draft_memory(CFG, HEAD, 8, 1000)) == pytest.approx(HEAD.params * 2 + 8 * 1000 * KAPPA / 32)


def test_bad_inputs_are_model_errors() -> None:
    with pytest.raises(ModelInputError):
        sp.speculative_step(CFG, 1, 1000, 3, 1.0, HEAD, F, None)
    with pytest.raises(ModelInputError):
        sp.speculative_step(CFG, 1, 1000, 0, 0.5, HEAD, F, None)
    with pytest.raises(ModelInputError):
        sp.Draft("medusa", 1.0, 1)
