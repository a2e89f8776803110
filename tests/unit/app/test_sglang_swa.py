"""SGLang 0.5.23's hybrid sliding-window pool (issue 19, build 6): gpt-oss (GptOssForCausalLM, one of SGLang's
SWA_SINK_ARCHS) is sized by HybridSWAPoolConfigurator, not by one pool over all layers. The figures below are SGLang's
own, from its pool configurators run by tools/engine_check.py in a venv with the engines (docs/engine-memory.md):

    python tools/engine_check.py tests/data/engine-check/gpt-oss.kvp tests/data/engine-check/gpt-oss-no-radix.kvp \\
        --device h200 --engine sglang

    gpt-oss@h200:          HybridSWAPoolConfigurator on 61,244,521,647 B: full pool 922,979 tokens, SWA pool 738,383
    gpt-oss-no-radix@h200: SWARequestCapPoolConfigurator on 61,244,521,647 B: full pool 1,640,866, SWA pool 20,497

(kvplan before this change stated 830,681 tokens for the first: one pool of 73,728 B per token over all 36 layers.)
"""

from __future__ import annotations

import re

from kvplan.catalog import get_model
from kvplan.catalog.hf_config import load_config
from kvplan.engines import emit, sglang
from kvplan.model.pools import sglang as sgl_pools
from tests.paths import ROOT
from tests.unit.app.test_backends import files, flags, plans, shell

GPT_OSS = "tests/data/engine-check/gpt-oss.kvp"
NO_RADIX = "tests/data/engine-check/gpt-oss-no-radix.kvp"
_POOL = re.compile(r"per GPU: KV pool ([\d,]+) tokens × ([\d,]+) B per token in the (\d+) full-attention layers "
                   r"\+ SWA pool ([\d,]+) tokens × ([\d,]+) B per token in the (\d+) sliding-window layers")


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def _emitted(spec: str) -> tuple[str, dict[str, float]]:
    (p,) = plans(spec)
    out = emit(p, "sglang", spec=spec)
    return files(out)["sglang.sh"], {k: float(v.value) for k, v in out.capacity}


def test_gpt_oss_pools_are_sglangs_own() -> None:
    """The full-attention pool and the SWA pool kvplan states for gpt-oss-120b on one H200 are the ones SGLang's
    HybridSWAPoolConfigurator computes (module docstring); the capacity is the full-attention pool's tokens."""
    text, cap = _emitted(GPT_OSS)
    m = _POOL.search(text)
    assert m is not None, text
    full, full_cell, n_full, swa, swa_cell, n_swa = (_num(g) for g in m.groups())
    assert (full, swa) == (922_979, 738_383)
    # 8 KV heads × (64 + 64) × 2 B per layer; 18 full-attention and 18 sliding-window layers
    assert (full_cell, swa_cell, n_full, n_swa) == (18 * 2048, 18 * 2048, 18, 18)
    assert cap["kv_tokens"] == full and cap["swa_pool_tokens"] == swa
    assert cap["kv_pool_per_gpu"] == full * full_cell + swa * swa_cell
    assert "KV capacity (derived): 922,979 tokens" in text


def test_without_the_radix_cache_the_swa_pool_follows_the_requests() -> None:
    """--disable-radix-cache with --max-running-requests: SWARequestCapPoolConfigurator's figures."""
    text, _ = _emitted(NO_RADIX)
    _, argv = shell(text)
    _, fl = flags(argv)
    assert fl["--disable-radix-cache"] is True and fl["--max-running-requests"] == "16"
    m = _POOL.search(text)
    assert m is not None, text
    assert (_num(m.group(1)), _num(m.group(4))) == (1_640_866, 20_497)


def test_exact_sizing_holds_the_plans_full_attention_tokens() -> None:
    """--sizing exact: the fraction gives a full-attention pool of at least the plan's tokens there (16 sequences ×
    32,000), within a page of pre_model_load, with the SWA pool at SGLang's 0.8 of it."""
    (p,) = plans(GPT_OSS)
    out = emit(p, "sglang", spec=GPT_OSS, sizing="exact")
    text = files(out)["sglang.sh"]
    m = _POOL.search(text)
    assert m is not None, text
    full, swa = _num(m.group(1)), _num(m.group(4))
    assert 16 * 32_000 <= full < 16 * 32_000 * 1.001
    assert swa == int(full * 0.8)


def test_only_sglangs_hybrid_architectures_get_two_pools() -> None:
    """Gemma 2 alternates windows too, but SGLang turns its hybrid pool off (disable_hybrid_swa_memory): one pool,
    as before. The architecture comes from config.json's `architectures` for a model outside the catalog."""
    (p,) = plans("tests/data/emit/windowed.kvp")
    text = files(emit(p, "sglang", spec="windowed.kvp"))["sglang.sh"]
    assert "SWA pool" not in text
    assert sglang.pool_shape(p, "bf16", 1).hybrid is False
    assert get_model("gpt-oss-120b").architecture == "GptOssForCausalLM"
    assert load_config(ROOT / "tests/data/hf/openai--gpt-oss-120b.json").architecture == "GptOssForCausalLM"
    assert load_config(ROOT / "tests/data/hf/google--gemma-2-9b-it.json").architecture not in sgl_pools.SWA_SINK_ARCHS
