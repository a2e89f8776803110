"""config.json ingestion: KV geometry, per-layer windows, parameter counts, and errors.

Every expected number is computed here from the config's own fields (the
comments name them), never read back from kvplan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from kvplan.base.errors import ConfigError, KvplanError
from kvplan.catalog import models
from kvplan.catalog.hf_config import count_params, load_config, model_from_config, resolve_model
from tests.paths import DATA

HF = DATA / "hf"
BF16 = 2


def fixture(name: str) -> Path:
    return HF / f"{name}.json"


def raw(name: str) -> dict[str, Any]:
    return json.loads(fixture(name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


# ----------------------------------------------------------- KV geometry

# (fixture, bytes per token at BF16 with every layer holding the token, windows per layer)
KV_CASES: list[tuple[str, int, list[Optional[int]]]] = [
    # L=80, n_kv=8, d_h=8192/64=128
    ("meta-llama--Meta-Llama-3.1-70B", 2 * 80 * 8 * 128 * BF16, [None] * 80),
    # L=32, n_kv=8, d_h=4096/32=128
    ("meta-llama--Meta-Llama-3.1-8B", 2 * 32 * 8 * 128 * BF16, [None] * 32),
    # MLA: L=60 x (kv_lora_rank 512 + qk_rope_head_dim 64); num_key_value_heads 128 plays no part
    ("deepseek-ai--DeepSeek-V2", 60 * (512 + 64) * BF16, [None] * 60),
    # MLA: L=61 x (512 + 64); the FP8 quantization_config changes the weights, not the KV
    ("deepseek-ai--DeepSeek-V3", 61 * (512 + 64) * BF16, [None] * 61),
    # sliding_window 4096 on every layer
    ("mistralai--Mistral-7B-v0.1", 2 * 32 * 8 * 128 * BF16, [4096] * 32),
    # sliding_window null: full attention
    ("mistralai--Mixtral-8x7B-v0.1", 2 * 32 * 8 * 128 * BF16, [None] * 32),
    # use_sliding_window false: the 131072 window is inert; L=28, n_kv=4, d_h=3584/28=128
    ("Qwen--Qwen2.5-7B-Instruct", 2 * 28 * 4 * 128 * BF16, [None] * 28),
    # explicit head_dim 128; L=36, n_kv=8
    ("Qwen--Qwen3-8B", 2 * 36 * 8 * 128 * BF16, [None] * 36),
    # explicit head_dim 128 although hidden_size/heads = 2560/32 = 80
    ("Qwen--Qwen3-4B", 2 * 36 * 8 * 128 * BF16, [None] * 36),
    # head_dim 256 (3584/16 would be 224); gemma2: even layers local (4096), odd global
    ("google--gemma-2-9b-it", 2 * 42 * 8 * 256 * BF16, [4096, None] * 21),
    # head_dim 256 (1152/4 would be 288); sliding_window_pattern 6: every 6th layer global
    ("synthetic--gemma-3-1b-it", 2 * 26 * 1 * 256 * BF16,
     ([512] * 5 + [None]) * 4 + [512, 512]),
    # layer_types alternates sliding (128) / full; head_dim 64 (2880/64 would be 45)
    ("openai--gpt-oss-120b", 2 * 36 * 8 * 64 * BF16, [128, None] * 18),
    # MHA (32 KV heads), d_h = 3072/32 = 96, sliding_window 2047 on every layer
    ("microsoft--Phi-3-mini-4k-instruct", 2 * 32 * 32 * 96 * BF16, [2047] * 32),
    # sliding_window 262144 >= max_position_embeddings 131072: it never binds, full attention
    ("microsoft--Phi-3-mini-128k-instruct", 2 * 32 * 32 * 96 * BF16, [None] * 32),
    # num_key_value_heads missing: MHA, 40 KV heads
    ("synthetic--llama-2-13b-no-kv-heads", 2 * 40 * 40 * 128 * BF16, [None] * 40),
    # explicit head_dim 128 although hidden_size/heads = 5120/64 = 80; L=64, n_kv=8
    ("Qwen--Qwen3-32B", 2 * 64 * 8 * 128 * BF16, [None] * 64),
    # L=126, n_kv=8, d_h=16384/128=128
    ("meta-llama--Meta-Llama-3.1-405B", 2 * 126 * 8 * 128 * BF16, [None] * 126),
]


def test_every_fixture_has_a_kv_case() -> None:
    assert sorted(n for n, _, _ in KV_CASES) == sorted(p.stem for p in HF.glob("*.json"))


def test_explicit_head_dim_wins_over_hidden_over_heads() -> None:
    for name, d_h in [("google--gemma-2-9b-it", 256), ("synthetic--gemma-3-1b-it", 256),
                      ("Qwen--Qwen3-4B", 128), ("openai--gpt-oss-120b", 64)]:
        cfg = raw(name)
        assert cfg["hidden_size"] // cfg["num_attention_heads"] != d_h
        assert load_config(fixture(name)).head_dim == d_h


def test_missing_kv_heads_means_mha() -> None:
    cfg = raw("synthetic--llama-2-13b-no-kv-heads")
    assert "num_key_value_heads" not in cfg
    m = load_config(fixture("synthetic--llama-2-13b-no-kv-heads"))
    assert m.n_kv == m.n_q == cfg["num_attention_heads"]
    assert m.g == 1


def test_soft_cap_and_context() -> None:
    assert load_config(fixture("google--gemma-2-9b-it")).soft_cap == 50.0
    assert load_config(fixture("synthetic--gemma-3-1b-it")).soft_cap is None  # stated null
    assert load_config(fixture("meta-llama--Meta-Llama-3.1-8B")).max_context == 131_072


def qwen_with(**changes: Any) -> dict[str, Any]:
    cfg = raw("Qwen--Qwen2.5-7B-Instruct")
    cfg.update(changes)
    return cfg


def test_qwen2_max_window_layers_when_sliding_is_on() -> None:
    # transformers Qwen2Config: layer i is windowed iff i >= max_window_layers
    m = model_from_config(qwen_with(use_sliding_window=True, sliding_window=4096, max_window_layers=20),
                          id="q")
    assert list(m.windows) == [None] * 20 + [4096] * 8
    # the published config: max_window_layers = 28 = L, so even with sliding on every layer is full
    assert model_from_config(qwen_with(use_sliding_window=True), id="q").all_full


def test_qwen_window_is_inert_unless_switched_on() -> None:
    cfg = qwen_with(sliding_window=4096)
    del cfg["use_sliding_window"]  # Qwen2Config defaults it to false
    assert model_from_config(cfg, id="q").all_full
    # the same keys on a Mistral-type model window every layer
    cfg["model_type"] = "mistral"
    assert list(model_from_config(cfg, id="m").windows) == [4096] * 28


def test_layer_types_override_a_pattern() -> None:
    cfg = raw("google--gemma-2-9b-it")
    cfg["layer_types"] = ["full_attention"] * 40 + ["sliding_attention"] * 2
    assert list(model_from_config(cfg, id="g").windows) == [None] * 40 + [4096] * 2


# ----------------------------------------------------------- parameter counts

def dense_count(*, V: int, H: int, L: int, I: int, nq: int, nkv: int, d: int, tied: bool = False,
                qkv_bias: bool = False, qk_norm: bool = False, norms: int = 2) -> int:
    """Independent count of a Llama-shaped decoder: embeddings, q/k/v/o, gated MLP, RMSNorms."""
    attn = H * nq * d + 2 * H * nkv * d + nq * d * H
    attn += (nq * d + 2 * nkv * d) if qkv_bias else 0
    attn += 2 * d if qk_norm else 0
    layer = attn + 3 * H * I + norms * H
    return V * H * (1 if tied else 2) + L * layer + H


def test_llama_3_1_70b_count_is_exact() -> None:
    expect = dense_count(V=128256, H=8192, L=80, I=28672, nq=64, nkv=8, d=128)
    assert expect == 70_553_706_496
    total, active, routed = count_params(raw("meta-llama--Meta-Llama-3.1-70B"))
    assert total == expect
    assert routed == 0
    assert active == expect  # dense: P_active = P (SPEC §4)


def test_llama_3_1_8b_count_is_exact() -> None:
    expect = dense_count(V=128256, H=4096, L=32, I=14336, nq=32, nkv=8, d=128)
    assert expect == 8_030_261_248
    assert count_params(raw("meta-llama--Meta-Llama-3.1-8B"))[0] == expect


@pytest.mark.parametrize("name,expect,published", [
    ("mistralai--Mistral-7B-v0.1",
     dense_count(V=32000, H=4096, L=32, I=14336, nq=32, nkv=8, d=128), None),
    # Qwen2 puts bias on q, k, v; Qwen's model card: 7.61B
    ("Qwen--Qwen2.5-7B-Instruct",
     dense_count(V=152064, H=3584, L=28, I=18944, nq=28, nkv=4, d=128, qkv_bias=True), 7.61e9),
    # Qwen3: q_norm and k_norm per layer
    ("Qwen--Qwen3-8B",
     dense_count(V=151936, H=4096, L=36, I=12288, nq=32, nkv=8, d=128, qk_norm=True), 8.19e9),
    ("Qwen--Qwen3-4B",
     dense_count(V=151936, H=2560, L=36, I=9728, nq=32, nkv=8, d=128, qk_norm=True, tied=True), 4.02e9),
    # Gemma-2: no tie_word_embeddings key (Gemma2Config ties), four norms per layer
    ("google--gemma-2-9b-it",
     dense_count(V=256000, H=3584, L=42, I=14336, nq=16, nkv=8, d=256, tied=True, norms=4), 9.24e9),
    # keras-hub gemma3_1b preset: 999,885,952 parameters
    ("synthetic--gemma-3-1b-it",
     dense_count(V=262144, H=1152, L=26, I=6912, nq=4, nkv=1, d=256, tied=True, qk_norm=True, norms=4),
     999_885_952),
    # keras-hub phi3_mini_4k_instruct_en and _128k_ presets: 3,821,079,552 (fused qkv and gate_up)
    ("microsoft--Phi-3-mini-4k-instruct",
     dense_count(V=32064, H=3072, L=32, I=8192, nq=32, nkv=32, d=96), 3_821_079_552),
    ("microsoft--Phi-3-mini-128k-instruct",
     dense_count(V=32064, H=3072, L=32, I=8192, nq=32, nkv=32, d=96), 3_821_079_552),
    ("synthetic--llama-2-13b-no-kv-heads",
     dense_count(V=32000, H=5120, L=40, I=13824, nq=40, nkv=40, d=128), 13_015_864_320),
])
def test_dense_counts(name: str, expect: int, published: Optional[float]) -> None:
    total, active, routed = count_params(raw(name))
    assert total == expect
    assert routed == 0
    cfg = raw(name)
    tied = cfg.get("tie_word_embeddings", cfg["model_type"].startswith("gemma"))
    assert active == expect and tied in (True, False)  # dense: P_active = P (SPEC §4)
    if published is not None:
        assert total == pytest.approx(published, rel=1e-3)


def test_mixtral_counts() -> None:
    V, H, L, I, E, k = 32000, 4096, 32, 14336, 8, 2
    attn = H * 4096 + 2 * H * 1024 + 4096 * H
    expert = 3 * H * I
    total = 2 * V * H + H + L * (attn + E * expert + E * H + 2 * H)
    routed = L * E * expert
    active = total - routed + L * k * expert - V * H
    assert count_params(raw("mistralai--Mixtral-8x7B-v0.1")) == (total, active, routed)
    m = load_config(fixture("mistralai--Mixtral-8x7B-v0.1"))
    assert (m.n_experts, m.experts_per_token, m.params_routed) == (E, k, routed)
    # Mistral's 46.7B total / 12.9B active; its active figure counts the input embedding table
    assert total == pytest.approx(46.7e9, rel=1e-3)
    assert active + V * H == pytest.approx(12.9e9, rel=2e-3)


def test_deepseek_v2_counts() -> None:
    H, V, L, nq = 5120, 102400, 60, 128
    q_lora, kv_rank, rope, nope, v_dim = 1536, 512, 64, 128, 128
    mla = (H * q_lora + q_lora + q_lora * nq * (nope + rope)
           + H * (kv_rank + rope) + kv_rank + kv_rank * nq * (nope + v_dim) + nq * v_dim * H)
    expert = 3 * H * 1536  # moe_intermediate_size
    moe_layer = 160 * expert + 160 * H + 3 * H * (1536 * 2)  # routed, gate, 2 shared experts
    dense_layer = 3 * H * 12288  # first_k_dense_replace = 1
    total = 2 * V * H + H + L * (mla + 2 * H) + dense_layer + (L - 1) * moe_layer
    routed = (L - 1) * 160 * expert
    active = total - routed + (L - 1) * 6 * expert - V * H
    assert count_params(raw("deepseek-ai--DeepSeek-V2")) == (total, active, routed)
    # DeepSeek-V2 paper: 236B total, 21B activated per token
    assert total == pytest.approx(236e9, rel=0.01)
    assert active == pytest.approx(21e9, rel=0.01)


def test_gpt_oss_120b_counts() -> None:
    H, V, L, nq, nkv, d, I, E, k = 2880, 201088, 36, 64, 8, 64, 2880, 128, 4
    attn = (H * nq * d + nq * d) + 2 * (H * nkv * d + nkv * d) + (nq * d * H + H) + nq  # biases, sinks
    expert = H * 2 * I + 2 * I + I * H + H  # gate_up_proj and down_proj, each with bias
    router = E * H + E
    total = 2 * V * H + H + L * (attn + E * expert + router + 2 * H)
    routed = L * E * expert
    active = total - routed + L * k * expert - V * H
    assert count_params(raw("openai--gpt-oss-120b")) == (total, active, routed)
    # OpenAI's gpt-oss model card: 116.83B total, 5.13B active
    assert total == pytest.approx(116.83e9, rel=1e-3)
    assert active == pytest.approx(5.13e9, rel=1e-3)


def test_moe_layer_placement_rules() -> None:
    # DeepSeek: dense below first_k_dense_replace and off the moe_layer_freq grid
    cfg = raw("deepseek-ai--DeepSeek-V2")
    base = count_params(cfg)
    cfg.update(first_k_dense_replace=3, moe_layer_freq=2)  # MoE at 4, 6, ..., 58: 28 layers
    H = 5120
    expert, moe_extra = 3 * H * 1536, 160 * H + 3 * H * 3072
    moe_layer, dense_layer = 160 * expert + moe_extra, 3 * H * 12288
    total = base[0] + (59 - 28) * (dense_layer - moe_layer)
    assert count_params(cfg)[0] == total
    # Qwen-MoE: mlp_only_layers and decoder_sparse_step
    qwen = qwen_with(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=100,
                     decoder_sparse_step=2, mlp_only_layers=[1])
    n_moe = sum(1 for i in range(28) if i != 1 and (i + 1) % 2 == 0)
    assert count_params(qwen)[2] == n_moe * 4 * 3 * 3584 * 100


def test_stated_params_override_the_total() -> None:
    m = model_from_config(raw("meta-llama--Meta-Llama-3.1-8B"), id="x", params=8.0e9)
    assert m.params == 8.0e9
    assert m.params_active == 8.0e9  # dense: active follows the stated total
    # a dense config without vocab_size can still be planned when the count is stated
    cfg = raw("meta-llama--Meta-Llama-3.1-8B")
    del cfg["vocab_size"]
    with pytest.raises(ConfigError, match="vocab_size"):
        model_from_config(cfg, id="x")
    assert model_from_config(cfg, id="x", params=8e9).params_active == 8e9


# ----------------------------------------------------------- catalog agreement

# (catalog id, fixture): every catalog entry with a fixture of the same model. Catalog
# entries without one here: qwen2.5-72b, gemma-3-27b.
CATALOG_PAIRS = [
    ("llama-3-70b", "meta-llama--Meta-Llama-3.1-70B"),
    ("llama-3-8b", "meta-llama--Meta-Llama-3.1-8B"),
    ("llama-3.1-405b", "meta-llama--Meta-Llama-3.1-405B"),
    ("qwen3-32b", "Qwen--Qwen3-32B"),
    ("deepseek-v3", "deepseek-ai--DeepSeek-V3"),
    ("llama-2-13b", "synthetic--llama-2-13b-no-kv-heads"),
    ("mistral-7b", "mistralai--Mistral-7B-v0.1"),
    ("mixtral-8x7b", "mistralai--Mixtral-8x7B-v0.1"),
    ("qwen2.5-7b", "Qwen--Qwen2.5-7B-Instruct"),
    ("qwen3-8b", "Qwen--Qwen3-8B"),
    ("deepseek-v2", "deepseek-ai--DeepSeek-V2"),
    ("gemma-2-9b", "google--gemma-2-9b-it"),
    ("gpt-oss-120b", "openai--gpt-oss-120b"),
    ("phi-3-mini", "microsoft--Phi-3-mini-128k-instruct"),
]


@pytest.mark.parametrize("mid,name", CATALOG_PAIRS, ids=[p[0] for p in CATALOG_PAIRS])
def test_catalog_geometry_matches_config(mid: str, name: str) -> None:
    cat = models()[mid]
    ing = load_config(fixture(name))
    fields = ("n_layers", "n_q", "n_kv", "head_dim", "kv_kind", "windows", "mla_kv_rank",
              "mla_rope_dim", "v_head_dim", "hidden_size", "n_experts", "experts_per_token", "soft_cap", "max_context")
    assert {f: getattr(cat, f) for f in fields} == {f: getattr(ing, f) for f in fields}
    assert cat.hidden_size == raw(name)["hidden_size"]  # the residual width, as the file states it
    # the catalog states counts to 4 significant figures at least
    assert cat.params == pytest.approx(ing.params, rel=5e-3)
    if cat.is_moe:
        assert (cat.params_active, cat.params_routed) == (ing.params_active, ing.params_routed)


# ----------------------------------------------------------- resolve_model

def test_resolve_model() -> None:
    assert resolve_model("llama-3-70b", None) is models()["llama-3-70b"]
    path = str(fixture("mistralai--Mistral-7B-v0.1"))
    assert resolve_model(None, path) == load_config(path)
    for args in [(None, None), ("llama-3-70b", path)]:
        with pytest.raises(KvplanError):
            resolve_model(*args)


def test_a_directory_holding_config_json(tmp_path: Path) -> None:
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(fixture("mistralai--Mistral-7B-v0.1").read_text())
    m = load_config(d)
    assert m.id == "my-model"
    assert m.windows == load_config(fixture("mistralai--Mistral-7B-v0.1")).windows


# ----------------------------------------------------------- errors

def write(tmp_path: Path, cfg: dict[str, Any], name: str = "bad-config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(cfg, indent=2))
    return p


def edited(name: str, drop: tuple[str, ...] = (), **changes: Any) -> dict[str, Any]:
    cfg = raw(name)
    for k in drop:
        del cfg[k]
    cfg.update(changes)
    return cfg


LLAMA = "meta-llama--Meta-Llama-3.1-8B"
ERROR_CASES = [
    ("missing layers", edited(LLAMA, drop=("num_hidden_layers",)), "num_hidden_layers"),
    ("missing heads", edited(LLAMA, drop=("num_attention_heads",)), "num_attention_heads"),
    ("missing hidden", edited(LLAMA, drop=("hidden_size",)), "hidden_size"),
    ("kv heads do not divide", edited(LLAMA, num_key_value_heads=6), "num_key_value_heads"),
    ("zero hidden", edited(LLAMA, hidden_size=0), "hidden_size"),
    ("negative kv heads", edited(LLAMA, num_key_value_heads=-8), "num_key_value_heads"),
    ("zero window", edited("mistralai--Mistral-7B-v0.1", sliding_window=0), "sliding_window"),
    ("negative intermediate", edited(LLAMA, intermediate_size=-1), "intermediate_size"),
    ("fractional layers", edited(LLAMA, num_hidden_layers=31.5), "num_hidden_layers"),
    ("boolean heads", edited(LLAMA, num_attention_heads=True), "num_attention_heads"),
    ("layer_types too short", edited("openai--gpt-oss-120b", num_hidden_layers=35), "layer_types"),
    ("unknown layer type", edited("openai--gpt-oss-120b",
                                  layer_types=["chunked_attention", "full_attention"] * 18), "layer_types"),
    ("sliding layer without window", edited("openai--gpt-oss-120b", sliding_window=None), "sliding_window"),
    ("sliding layer but sliding off", edited("openai--gpt-oss-120b", use_sliding_window=False),
     "layer_types"),
    ("experts disagree", edited("mistralai--Mixtral-8x7B-v0.1", num_experts=16), "num_experts"),
    ("experts without top-k", edited("mistralai--Mixtral-8x7B-v0.1", drop=("num_experts_per_tok",)),
     "num_experts_per_tok"),
    ("top-k above experts", edited("mistralai--Mixtral-8x7B-v0.1", num_experts_per_tok=9),
     "num_experts_per_tok"),
    ("MLA without rope dim", edited("deepseek-ai--DeepSeek-V2", drop=("qk_rope_head_dim",)),
     "qk_rope_head_dim"),
    ("qwen3 head_dim left to a default that differs", edited("Qwen--Qwen3-4B", drop=("head_dim",)),
     "head_dim"),
    ("head_dim not derivable", edited(LLAMA, hidden_size=4100), "head_dim"),
    ("multimodal wrapper", {"model_type": "gemma3", "text_config": {"num_hidden_layers": 34}},
     "num_hidden_layers"),
    ("non-boolean switch", edited("Qwen--Qwen2.5-7B-Instruct", use_sliding_window="no"), "use_sliding_window"),
]


@pytest.mark.parametrize("label,cfg,key", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_bad_configs_name_file_and_key(tmp_path: Path, label: str, cfg: dict[str, Any], key: str) -> None:
    path = write(tmp_path, cfg)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert str(path) in text
    assert f"'{key}'" in text
    # the span points at the key's line when the key is in the file, else at the start
    lines = path.read_text().splitlines()
    span = info.value.span
    assert span is not None
    if key in cfg:
        assert f'"{key}"' in lines[span.line - 1]
    else:
        assert (span.line, span.column) == (1, 1)


def test_errors_from_a_mapping_name_the_source() -> None:
    with pytest.raises(ConfigError) as info:
        model_from_config(edited(LLAMA, drop=("hidden_size",)), id="m", source="deploy.kvp")
    assert "deploy.kvp" in str(info.value) and "'hidden_size'" in str(info.value)


TEXT_CASES = [
    # json reports the missing value where the closing brace stands: line 4, column 1
    ("broken.json", '{\n  "num_hidden_layers": 32,\n  "hidden_size": \n}\n', "4:1: not valid JSON"),
    ("list.json", "[1, 2]", "1:1: the top level is a JSON list"),
    # the second occurrence is the one a JSON reader would silently keep
    ("dup.json", '{\n  "num_hidden_layers": 32,\n  "num_hidden_layers": 40\n}\n',
     "3:3: 'num_hidden_layers' appears twice"),
]


@pytest.mark.parametrize("name,text,where", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_unreadable_text_says_file_line_and_column(tmp_path: Path, name: str, text: str, where: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert str(info.value).startswith(f"{p}:{where}")


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nowhere" / "config.json"
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert str(p) in str(info.value) and "does not exist" in str(info.value)


def test_stated_count_below_active_is_refused() -> None:
    # a mixture of experts: a stated total below what one token reads is a contradiction
    with pytest.raises(ConfigError, match="below"):
        model_from_config(raw("mistralai--Mixtral-8x7B-v0.1"), id="x", params=1e9)
