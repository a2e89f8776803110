"""config.json ingestion: the unit tests that need the model layer.

Split by layer from the tests of the same subject in tests/unit/catalog/test_hf_config.py;
tests/unit/catalog/test_hf_config.py says what they check.
"""

from __future__ import annotations

from typing import Optional

import pytest

from kvplan.catalog.hf_config import load_config, model_from_config
from kvplan.model.footprint import kappa, kv_bytes_per_seq
from tests.unit.catalog.test_hf_config import BF16, KV_CASES, fixture, raw


@pytest.mark.parametrize("name,per_token,windows", KV_CASES, ids=[c[0] for c in KV_CASES])
def test_kv_bytes_per_token_and_windows(name: str, per_token: int, windows: list[Optional[int]]) -> None:
    m = load_config(fixture(name))
    assert m.id == name
    assert kappa(m, BF16) == per_token
    assert list(m.windows) == windows
    # a context longer than every window: each layer holds min(s, window) tokens
    s = 200_000
    per_layer_token = per_token / m.n_layers
    held = sum(s if w is None else min(s, w) for w in windows)
    assert float(kv_bytes_per_seq(m, s, BF16)) == per_layer_token * held


def test_the_spec_reference_values() -> None:
    assert kappa(load_config(fixture("meta-llama--Meta-Llama-3.1-70B")), BF16) == 327_680
    assert kappa(load_config(fixture("meta-llama--Meta-Llama-3.1-8B")), BF16) == 131_072
    assert kappa(load_config(fixture("deepseek-ai--DeepSeek-V2")), BF16) == 69_120
    assert kappa(load_config(fixture("Qwen--Qwen2.5-7B-Instruct")), BF16) == 57_344


def test_mla_geometry() -> None:
    m = load_config(fixture("deepseek-ai--DeepSeek-V2"))
    assert (m.kv_kind, m.mla_kv_rank, m.mla_rope_dim, m.v_head_dim) == ("mla", 512, 64, 128)
    assert m.head_dim == 128 + 64  # qk_nope_head_dim + qk_rope_head_dim
    assert m.kv_elems_per_layer == 512 + 64
    assert m.attn_dims == (512 + 64, 512)
    # the cache does not depend on num_key_value_heads for MLA
    for n_kv in (1, 16, 128):
        cfg = raw("deepseek-ai--DeepSeek-V2")
        cfg["num_key_value_heads"] = n_kv
        assert kappa(model_from_config(cfg, id="v2"), BF16) == 69_120
