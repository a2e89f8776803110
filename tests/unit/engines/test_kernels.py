"""Decode-kernel settings: the unit tests that need the engines layer.

Split by layer from the tests of the same subject in tests/acceptance/test_kernels.py,
tests/unit/model/test_kernels.py; tests/unit/model/test_kernels.py says what they check.
"""

from __future__ import annotations

from kvplan.catalog import get_model
from kvplan.engines import flashinfer as fi_emit
from kvplan.model.kernels import flashinfer as fi
from tests.unit.model.test_kernels import _plan


def test_mla_uses_the_mla_wrapper_with_latent_dims() -> None:
    plan = _plan("deepseek-v3", "h200", 8)
    plan.digest = "sha256:0"   # the stand-in's digest: the benchmark's settings name the plan
    kc = fi.kernel_config(plan)
    assert kc.mla and kc.wrapper == "flashinfer.mla.BatchMLAPagedAttentionWrapper"
    assert (kc.num_qo_heads, kc.num_kv_heads, kc.kv_head_copies) == (16, 1, 8)   # 128/8; the latent on every rank
    assert (kc.kv_lora_rank, kc.rope_dim) == (512, 64)
    text = fi_emit.plan_call(plan, kc)
    assert "    head_dim_ckv=512,\n    head_dim_kpe=64,\n" in text and "    num_heads=16,\n" in text


def test_interleaved_windows_get_one_plan_per_group_and_soft_cap() -> None:
    m = get_model("gemma-2-9b")
    plan = _plan("gemma-2-9b", "h100-sxm", 1, context=32_000)
    plan.digest = "sha256:0"
    kc = fi.kernel_config(plan)
    by_window = {g.window: g for g in kc.groups}
    assert set(by_window) == {None, 4096}
    assert by_window[None].window_left == -1 and by_window[4096].window_left == 4095
    assert sum(g.layers for g in kc.groups) == m.n_layers
    assert by_window[4096].tokens_read == 4096 and by_window[None].tokens_read == 32_000
    assert kc.logits_soft_cap == 50.0
    text = fi_emit.plan_call(plan, kc)
    assert text.count(".plan(") == 2 and "    window_left=4095,\n" in text and "    logits_soft_cap=50.0,\n" in text
