"""The residual width the collectives move and the attention FLOPs of prefill and decode (issue 23 item 1):
hidden_size from config.json, MLA prefilled expanded and decoded absorbed. Every expected number is computed here
from the config's own fields (tests/data/hf), never read back from kvplan."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from kvplan import catalog
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.tiering import prefill_flops
from tests.paths import DATA


def _config(name: str) -> dict[str, Any]:
    return json.loads((DATA / "hf" / f"{name}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


DSV3 = _config("deepseek-ai--DeepSeek-V3")


@pytest.mark.parametrize("mid, fixture, attention_width", [
    ("deepseek-v3", "deepseek-ai--DeepSeek-V3", 128 * 512),   # n_q · kv_lora_rank, the absorbed output's width
    ("qwen3-32b", "Qwen--Qwen3-32B", 64 * 128),               # n_q · head_dim
    ("gpt-oss-120b", "openai--gpt-oss-120b", 64 * 64),
    ("llama-3-70b", "meta-llama--Meta-Llama-3.1-70B", 64 * 128),
])
def test_the_all_reduces_move_the_residual_stream_hidden_size(mid: str, fixture: str, attention_width: int) -> None:
    m = catalog.get_model(mid)
    hidden = _config(fixture)["hidden_size"]
    assert ex.residual_width(m) == hidden
    # the figure kvplan used before differs wherever the attention output is not the residual stream's width
    assert (hidden == attention_width) == (mid == "llama-3-70b")


def test_a_model_without_hidden_size_falls_back_to_the_output_projection_input() -> None:
    m = attrs.evolve(catalog.get_model("deepseek-v3"), hidden_size=0)
    assert ex.residual_width(m) == DSV3["num_attention_heads"] * DSV3["v_head_dim"]  # 128 · 128


def test_deepseek_v3_all_reduces_over_a_prompt_are_the_ring_formula_at_hidden_size() -> None:
    m = catalog.get_model("deepseek-v3")
    bw, lat, s, tp = 450e9, 1e-5, 4500, 8
    got = float(ex.all_reduce_time(m, s, tp, bw, lat))
    # 2 per layer × 61 layers, each latency + 2·(tp−1)/tp · s · hidden · 2 B over the link
    want = 2 * DSV3["num_hidden_layers"] * (lat + 2 * (tp - 1) / tp * s * DSV3["hidden_size"] * 2 / bw)
    assert got == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(122 * (1e-5 + 2 * 7 / 8 * 4500 * 7168 * 2 / 450e9), rel=1e-12)  # about 32 ms
    assert 0.030 < got < 0.034


def test_pipeline_transfers_move_hidden_size_per_token() -> None:
    m, d = catalog.get_model("qwen3-32b"), catalog.get_device("h100-sxm")
    # tp 2 over 4 devices: one stage boundary inside the node, tokens · 5,120 · 2 B at the scale-up link
    got = float(ex.pipeline_time(m, d, 100, 2, 4, 450e9, 0.0))
    assert got == pytest.approx(100 * _config("Qwen--Qwen3-32B")["hidden_size"] * 2 / 450e9, rel=1e-12)


def test_deepseek_v3_prefill_runs_expanded_attention() -> None:
    m = catalog.get_model("deepseek-v3")
    s = 4500.0
    n_q, layers = DSV3["num_attention_heads"], DSV3["num_hidden_layers"]
    qk = DSV3["qk_nope_head_dim"] + DSV3["qk_rope_head_dim"]          # 128 + 64 = 192 per head for Q·Kᵀ
    v = DSV3["v_head_dim"]                                            # 128 per head for ·V
    # 2·P_active·s + per causal pair (s²/2 of them, every layer full attention) 2·n_q·(qk + v)
    want = 2 * m.params_active * s + 2 * n_q * (qk + v) * layers * s * s / 2
    assert float(prefill_flops(m, s)) == pytest.approx(want, rel=1e-12)
    # the absorbed latent form (n_q·(576 + 512) per pair) would be about 32% high at 4.5k tokens
    latent = 2 * m.params_active * s + 2 * n_q * (576 + 512) * layers * s * s / 2
    assert 1.30 < latent / want < 1.34


def test_deepseek_v3_decode_keeps_the_absorbed_latent_form() -> None:
    m = catalog.get_model("deepseek-v3")
    b, s = 4, 4500.0
    qk = DSV3["kv_lora_rank"] + DSV3["qk_rope_head_dim"]              # 512 + 64 = 576 against the latent
    v = DSV3["kv_lora_rank"]                                          # 512: the latent is the value
    want = 2 * m.params_active * b + 2 * b * DSV3["num_attention_heads"] * (qk + v) * DSV3["num_hidden_layers"] * s
    assert float(rf.decode_flops(m, b, s)) == pytest.approx(want, rel=1e-12)


def test_gqa_prefill_widths_are_unchanged() -> None:
    m = catalog.get_model("llama-3-70b")
    s = 2000.0
    want = 2 * m.params_active * s + 2 * 64 * (128 + 128) * 80 * s * s / 2  # SPEC §7: 2·L·n_q·d_h·s²
    assert float(prefill_flops(m, s)) == pytest.approx(want, rel=1e-12)
