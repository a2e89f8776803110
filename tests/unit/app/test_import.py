"""`kvplan import`: the unit tests that need the engines layer.

Split by layer from the tests of the same subject in tests/acceptance/test_import.py;
tests/acceptance/test_import.py says what they check.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import pytest

from kvplan.app import importer
from kvplan.app.replan import emit
from kvplan.base.codes import Severity
from kvplan.lang import check_source
from kvplan.lang.fmt import format_source
from kvplan.planner import plan
from tests.paths import ROOT

ROUND_TRIP = ("vllm serve meta-llama/Meta-Llama-3.1-70B --kv-cache-dtype fp8 --block-size 16 --enable-prefix-caching "
              "-tp 4 --max-model-len 32k --max-num-seqs 64")


def checked(text: str, path: str = "imported.kvp") -> Any:
    """The spec checks without errors and is canonical; returns its one scenario."""
    result = check_source(text, path)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert not errors, [f"{d.code} {d.message}" for d in errors]
    assert format_source(text, path) == text
    assert len(result.scenarios) == 1
    return result.scenarios[0]


def pins(sc: Any) -> dict[str, Any]:
    return {k: p.value for k, p in sc.pins.items()}


@pytest.mark.parametrize("value,kv", [("auto", "bf16"), ("bfloat16", "bf16"), ("float16", "fp16"), ("fp8", "fp8"),
                                      ("fp8_e4m3", "fp8"), ("fp8_e5m2", "fp8"), ("int8_per_token_head", "int8"),
                                      ("int4_per_token_head", "int4"), ("nvfp4", "fp4")])
def test_vllm_kv_dtype_names_map_back(value: str, kv: str) -> None:
    out = importer.import_deployment("vllm", ROUND_TRIP.replace("fp8", value),
                                     importer.Options(device="b200"))
    assert dict(out.pins)["kv_dtype"] == kv
    if value == "auto":
        assert "bf16 assumed" in out.text


def test_vllm_kv_dtype_without_a_kvplan_width_is_not_pinned() -> None:
    out = importer.import_deployment("vllm", ROUND_TRIP.replace("fp8", "turboquant_k8v4"),
                                     importer.Options(device="h100-sxm"))
    assert "kv_dtype" not in dict(out.pins)
    assert any("turboquant_k8v4" in w for w in out.warnings)


def test_vllm_defaults_and_human_readable_lengths() -> None:
    out = importer.import_deployment("vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 32K "
                                             "--max_num_seqs 8 --kv-offloading-size 64",
                                     importer.Options(device="h100-sxm"))
    sc = checked(out.text)
    assert sc.context == 32 * 1024 and sc.batch == 8           # upper-case K is 1024; underscores accepted
    assert pins(sc) == {"kv_dtype": "bf16", "block_size": 16, "prefix_caching": True, "tier": "host", "devices": 1,
                        "tensor_parallel": 1, "pipeline_parallel": 1}
    assert "context = 32Ki" in out.text


def test_vllm_offloading_connector_is_a_host_tier_and_disaggregation_is_not() -> None:
    off = ROUND_TRIP + (' --kv-transfer-config \'{"kv_connector":"OffloadingConnector","kv_role":"kv_both",'
                        '"kv_connector_extra_config":{"cpu_bytes_to_use":1000000000}}\'')
    assert dict(importer.import_deployment("vllm", off, importer.Options(device="h100-sxm")).pins)["tier"] == "host"
    nixl = ROUND_TRIP + ' --kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}\''
    out = importer.import_deployment("vllm", nixl, importer.Options(device="h100-sxm"))
    assert "tier" not in dict(out.pins) and any("NixlConnector" in w for w in out.warnings)


# ------------------------------------------------------------------ SGLang and TensorRT-LLM

def test_sglang_flags() -> None:
    cmd = ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --kv-cache-dtype fp8_e4m3 --page-size 32 "
           "--disable-radix-cache --tp-size 2 --context-length 32k --max-running-requests 16 "
           "--enable-hierarchical-cache --mem-fraction-static 0.85 --host 0.0.0.0")
    out = importer.import_deployment("sglang", cmd, importer.Options(device="h200"))
    sc = checked(out.text)
    assert sc.model.id == "qwen3-8b" and sc.engine == "sglang" and (sc.batch, sc.context) == (16, 32_000)
    assert pins(sc) == {"kv_dtype": "fp8", "block_size": 32, "prefix_caching": False, "tier": "host", "devices": 2,
                        "tensor_parallel": 2, "pipeline_parallel": 1, "memory_fraction": 0.85}
    assert "--mem-fraction-static 0.85" in out.text and not out.warnings


def test_sglang_defaults() -> None:
    out = importer.import_deployment("sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                                               "--max-running-requests 4", importer.Options(device="h100-sxm"))
    sc = checked(out.text)
    assert pins(sc) == {"kv_dtype": "bf16", "block_size": 1, "prefix_caching": True, "devices": 1,
                        "tensor_parallel": 1, "pipeline_parallel": 1}
    assert sc.context == 40_960                   # the model's max context, said in a comment
    assert "max context" in out.text


def test_trtllm_command_line_reads_its_config_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "extra.yaml").write_text("kv_cache_config:\n  dtype: nvfp4\nmax_batch_size: 8\n")
    cmd = tmp_path / "serve.sh"
    cmd.write_text("trtllm-serve meta-llama/Meta-Llama-3.1-8B --config extra.yaml --tp_size 2 --max_batch_size 4 "
                   "--max_seq_len 65536 --kv_cache_free_gpu_memory_fraction 0.8\n")
    out = importer.import_deployment("trtllm", cmd.read_text(), importer.Options(device="b200"), str(tmp_path))
    sc = checked(out.text)
    assert sc.batch == 8                                                 # the --config file wins over the flag
    assert "overrides --max_batch_size 4" in out.text
    assert pins(sc) == {"kv_dtype": "fp4", "block_size": 32, "prefix_caching": True, "devices": 2,
                        "tensor_parallel": 2, "pipeline_parallel": 1}


def test_local_model_directory_matches_by_name() -> None:
    found = importer.match_model("/models/Meta-Llama-3.1-8B/")
    assert found is not None and found[0].id == "llama-3-8b"
    assert importer.match_model("nobody/unknown-model") is None


def test_batch_and_context_options_fill_what_the_engine_leaves_out() -> None:
    out = importer.import_deployment("vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B",
                                     importer.Options(device="h100-sxm", batch=12, context=20_000))
    sc = checked(out.text)
    assert (sc.batch, sc.context) == (12, 20_000)


@pytest.mark.parametrize("n,text", [(32_000, "32k"), (32_768, "32Ki"), (131_072, "128Ki"), (40_960, "40Ki"),
                                    (12_345, "12345")])
def test_token_counts_are_written_exactly(n: int, text: str) -> None:
    from kvplan.base.units import Dim, parse_quantity

    assert importer.tokens_text(n) == text
    assert parse_quantity(text, Dim.TOKENS) == n


# ------------------------------------------------------------------ a running deployment, reproduced

LLAMA_70B = "llama-3-70b"                              # the hub id meta-llama/Llama-3.1-70B-Instruct once it resolves
VLLM_70B = (f"vllm serve {LLAMA_70B} --tensor-parallel-size 4 --kv-cache-dtype fp8 --max-model-len 32768 "
            "--gpu-memory-utilization 0.9 --max-num-seqs 64")


def vllm_fill_tokens(fraction: float, batched: int) -> int:
    """The tokens vLLM 0.33.0's pool holds for Llama-3-70B at TP 4 on H100s (80 GB) by hand, as
    `kvplan emit --sizing fill` sizes it (docs/cli-emit.md, "Sizing"): per GPU ceil(80e9 × fraction) less a
    quarter of the bf16 weights, 1 GiB non-torch, 128 KiB per batched token of activation peak and 1 GiB of
    CUDA graphs (kvplan's assumed defaults), in blocks of 16 tokens × 40,960 B (2 of 8 KV heads per GPU, 80
    layers, fp8), one of them vLLM's null block."""
    weights = 70_553_706_496 * 2 / 4
    pool = math.ceil(80e9 * fraction) - weights - 2**30 - 128 * 1024 * batched - 2**30
    return (math.floor(pool) // (16 * 40_960) - 1) * 16


def test_the_quality_budget_is_the_least_that_admits_the_kv_dtype() -> None:
    out = importer.import_deployment("vllm", VLLM_70B, importer.Options(device="h100-sxm"))
    sc = checked(out.text)
    assert sc.budget == "near-lossless" and "the least budget that admits the engine's kv_dtype fp8" in out.text
    bf16 = importer.import_deployment("vllm", VLLM_70B.replace("fp8", "auto"), importer.Options(device="h100-sxm"))
    assert "quality {" not in bf16.text and checked(bf16.text).budget == "lossless"
    int4 = importer.import_deployment("vllm", VLLM_70B.replace("fp8", "int4_per_token_head"),
                                      importer.Options(device="h100-sxm"))
    assert checked(int4.text).budget == "near-lossless"


def test_memory_fraction_and_the_context_bound_are_modelled() -> None:
    out = importer.import_deployment("vllm", VLLM_70B + " --max-num-batched-tokens 8192 --data-parallel-size 2",
                                     importer.Options(device="h100-sxm"))
    sc = checked(out.text)
    assert pins(sc) == {"kv_dtype": "fp8", "block_size": 16, "prefix_caching": True, "devices": 8,
                        "tensor_parallel": 4, "pipeline_parallel": 1, "memory_fraction": 0.9,
                        "max_batched_tokens": 8192, "replicas": 2}
    assert sc.batch == 64 and sc.max_context == 32_768
    # kvplan's memory model leaves 4 × 80 GB × 0.9 − 141.1 GB of weights = 146.9 GB, 896.7k fp8 tokens; vLLM's
    # own sizing of that fraction (less its start-up terms) holds fewer, and the deployment is what vLLM runs
    tokens = vllm_fill_tokens(0.9, 8192)
    assert tokens == 817_888
    assert sc.context == tokens // 64 // 1024 * 1024 == 12 * 1024   # 12.8k per sequence, rounded down to 1Ki
    assert "derived: the longest context at which 64 sequences fit" in out.text


def test_a_typical_context_sits_under_the_engine_bound() -> None:
    out = importer.import_deployment("vllm", VLLM_70B, importer.Options(device="h100-sxm", context=8000))
    sc = checked(out.text)
    assert (sc.batch, sc.context, sc.max_context) == (64, 8000, 32_768)
    assert "context     = 8k" in out.text and "max_context = 32Ki" in out.text
    with pytest.raises(importer.DeploymentReadError, match="longer than the longest sequence"):
        importer.import_deployment("vllm", VLLM_70B, importer.Options(device="h100-sxm", context=40_000))


def test_a_batch_the_engine_leaves_open_is_what_the_pool_holds() -> None:
    out = importer.import_deployment("vllm", VLLM_70B.replace(" --max-num-seqs 64", ""),
                                     importer.Options(device="h100-sxm"))
    sc = checked(out.text)
    # vLLM's 817,888 tokens of pool (above) hold 24 sequences of 32,768 tokens
    assert (sc.batch, sc.context, sc.max_context) == (vllm_fill_tokens(0.9, 8192) // 32_768, 32_768, None)
    assert sc.batch == 24
    assert "derived: --max-num-seqs is not set" in out.text


SGLANG_V3 = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention "
             "--mem-fraction-static 0.85 --context-length 32768 --max-running-requests 64")


def test_sglang_dp_attention_is_attention_groups_and_dp_alone_is_replicas() -> None:
    out = importer.import_deployment("sglang", SGLANG_V3, importer.Options(model="deepseek-v3", device="h200"))
    p = pins(checked(out.text))
    assert p["attention_dp"] == 8 and p["devices"] == 8 and "replicas" not in p and p["memory_fraction"] == 0.85
    alone = importer.import_deployment("sglang", SGLANG_V3.replace(" --enable-dp-attention", "").replace("--tp 8",
                                                                                                          "--tp 4"),
                                       importer.Options(model="deepseek-v3", device="h200"))
    p = pins(checked(alone.text))
    assert p["replicas"] == 8 and p["devices"] == 32 and "attention_dp" not in p  # the total: 8 replicas of tp 4


def test_sglang_chunked_prefill_is_the_step_token_limit() -> None:
    out = importer.import_deployment("sglang", SGLANG_V3 + " --chunked-prefill-size 16384",
                                     importer.Options(model="deepseek-v3", device="h200"))
    assert pins(checked(out.text))["max_batched_tokens"] == 16_384
    off = importer.import_deployment("sglang", SGLANG_V3 + " --chunked-prefill-size -1",
                                     importer.Options(model="deepseek-v3", device="h200"))
    assert "max_batched_tokens" not in pins(checked(off.text)) and "chunked prefill is off" in off.text


@pytest.mark.parametrize("config,weights", [
    ({"torch_dtype": "bfloat16"}, "bf16"),
    ({"torch_dtype": "float16"}, "fp16"),
    ({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}}, "fp8"),
    ({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "mxfp4"}}, "fp4"),
    ({"torch_dtype": "float16", "quantization_config": {"quant_method": "awq", "bits": 4}}, "int4"),
    ({"torch_dtype": "float16", "quantization_config": {"quant_method": "gptq", "bits": 8}}, "int8"),
])
def test_checkpoint_weights_from_the_config(config: dict[str, Any], weights: str) -> None:
    found, warning = importer.checkpoint_weights(config, "config.json")
    assert found is not None and found[0] == weights and warning is None


def test_a_quantization_kvplan_has_no_width_for_is_named() -> None:
    found, warning = importer.checkpoint_weights({"torch_dtype": "bfloat16",
                                                  "quantization_config": {"quant_method": "hqq"}}, "c.json")
    assert found is None and warning is not None and "'hqq'" in warning


def _weights_row(text: str) -> Optional[str]:
    """The value of the spec's `weights = ...` line (not a comment that mentions one), if it has one."""
    rows = [line.split("#")[0].split("=", 1) for line in text.splitlines()]
    found = [r[1].strip() for r in rows if len(r) == 2 and r[0].strip() == "weights"]
    return found[0] if found else None


def test_the_checkpoint_sets_the_weights_unless_the_engine_quantizes() -> None:
    cfg = ROOT / "tests" / "data" / "import" / "deepseek-ai--DeepSeek-V3.json"  # the Hub's file, fp8 quantization
    opts = importer.Options(model_config=str(cfg), device="h200")
    out = importer.import_deployment("sglang", SGLANG_V3, opts)
    # the checkpoint's own fp8 bytes (scales included) are planned, so no `weights` line overrides them
    assert _weights_row(out.text) is None and "quantization_config.quant_method fp8" in out.text
    assert "the checkpoint's own fp8 bytes" in out.text
    kept = importer.import_deployment("sglang", SGLANG_V3 + " --dtype bfloat16", opts)
    assert _weights_row(kept.text) is None and "the checkpoint is quantized" in kept.text
    # an unquantized config still says its width
    plain = ROOT / "tests" / "data" / "hf" / "Qwen--Qwen3-32B.json"
    flat = importer.import_deployment("sglang", SGLANG_V3, importer.Options(model_config=str(plain), device="h200"))
    assert _weights_row(flat.text) == "bf16"
    # the engine's own quantization of an unquantized checkpoint is still written
    q = importer.import_deployment("sglang", SGLANG_V3 + " --quantization fp8", opts)
    assert _weights_row(q.text) == "fp8"


def test_emit_writes_the_bound_and_the_pinned_engine_settings_back() -> None:
    text = """kvplan 1
deployment "d" {
    model = llama-3-70b
    device = h100-sxm
    engine = vllm
    workload {
        batch = 64
        context = 8k
        max_context = 32Ki
    }
    quality {
        budget = near-lossless
    }
    pin {
        kv_dtype = fp8
        devices = 8
        memory_fraction = 0.9
        max_batched_tokens = 8192
        replicas = 2
    }
}
"""
    p = plan(check_source(text, "d.kvp").scenarios[0])
    vllm = emit(p, "vllm").files[0].text
    for flag in ("--max-model-len 32768", "--max-num-seqs 64", "--gpu-memory-utilization 0.9",
                 "--max-num-batched-tokens 8192", "--data-parallel-size 2"):
        assert flag in vllm, flag
    sglang = emit(p, "sglang").files[0].text
    for flag in ("--context-length 32768", "--mem-fraction-static 0.9", "--chunked-prefill-size 8192",
                 "--dp-size 2"):
        assert flag in sglang, flag
    assert "--enable-dp-attention" not in sglang                 # replicas, not attention groups
    trt = emit(p, "trtllm")
    trtllm = "\n".join(f.text for f in trt.files)
    assert "max_seq_len: 32768" in trtllm
    # the pins TensorRT-LLM's target does not write are each said, not dropped
    assert any("pin replicas = 2 is not written" in w and "run 2 copies" in w for w in trt.warnings), trt.warnings
    assert any("pin max_batched_tokens = 8192 is not written" in w for w in trt.warnings), trt.warnings
    groups = plan(check_source(text.replace("replicas = 2", "attention_dp = 2"), "d.kvp").scenarios[0])
    assert "--attn-dp-size 2" in emit(groups, "sglang").files[0].text
    # a dense model: vLLM's data-parallel engines would be replicas, so the groups are said, not written
    assert any("pin attention_dp = 2 is not written" in w for w in emit(groups, "vllm").warnings)
    assert any("pin attention_dp = 2" in w for w in emit(groups, "trtllm").warnings)
