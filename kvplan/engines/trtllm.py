"""TensorRT-LLM (main, newer than 1.2.1): the plan as trtllm.yaml for `trtllm-serve MODEL --config`,
and trtllm.sh with that command.

The pool is set with `kv_cache_config.max_tokens` (the plan's blocks × tokens
per block), so the token count is exact. `free_gpu_memory_fraction` (a fraction
of the memory left after the weights, engines.md) is written too, sized so that
it admits those tokens even when the assumed activation and runtime reserves are
also taken out of the free memory: whichever of the two the engine applies, the
pool holds at least the plan's tokens, and with both it holds max_tokens.

KV dtype: `kv_cache_config.dtype` takes auto|fp8|nvfp4. 16-bit KV is `auto`
(the checkpoint's dtype). INT8 is one of TensorRT-LLM's KV quantization
algorithms but has no `dtype` value: it is written `auto`, which picks up the
KV quantization of a checkpoint quantized with INT8 KV, and a warning says so.
"""

from __future__ import annotations

import math

from kvplan.base.evidence import derived
from kvplan.engines import common
from kvplan.engines.common import Backend, EmitRequest, Emitted, EmittedFile

KV_DTYPES = {"bf16": "auto", "fp16": "auto", "fp8": "fp8", "int8": "auto", "fp4": "nvfp4"}

FLAGS = ("--config", "kv_cache_config", "free_gpu_memory_fraction", "max_tokens", "enable_block_reuse",
         "tokens_per_block", "dtype", "host_cache_size", "max_batch_size", "max_seq_len", "tensor_parallel_size",
         "pipeline_parallel_size")


def render(req: EmitRequest) -> Emitted:
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, BACKEND)
    sz = common.size(p, mapped, req.reserves)
    notes = common.model_notes(p, BACKEND)
    if mapped.dtype.id == "int8":
        notes.append("INT8 KV: kv_cache_config.dtype takes auto|fp8|nvfp4 only, so it is `auto`; quantize the "
                     "checkpoint with the INT8 KV quantization algorithm, or auto stays 16-bit")
    elif mapped.dtype_name == "auto" and sc.weights.id != mapped.dtype.id:
        notes.append(f"KV dtype {mapped.dtype.id} is written `auto` (the checkpoint's dtype); the weights are "
                     f"{sc.weights.id}, so check that auto gives {mapped.dtype.id}")
    max_tokens = sz.blocks * sz.block
    free_after = sz.total - sz.weights - sz.reserves
    if free_after > 0:
        fraction = min(1.0, math.ceil(sz.pool / free_after * 1000) / 1000)
    else:
        fraction = 1.0
    host = math.ceil(sz.tier_bytes_per_gpu()) if mapped.tier == "host" else 0
    kv_cfg: dict[str, object] = {
        "dtype": mapped.dtype_name,
        "tokens_per_block": mapped.block,
        "enable_block_reuse": bool(p.prefix_caching),
        "max_tokens": max_tokens,
        "free_gpu_memory_fraction": fraction,
    }
    if host:
        kv_cfg["host_cache_size"] = host
    body = {
        "tensor_parallel_size": p.tp,
        "pipeline_parallel_size": p.pp,
        "max_batch_size": sc.batch,
        "max_seq_len": sc.context,
        "kv_cache_config": kv_cfg,
    }
    notes_by_key = {
        "kv_cache_config.max_tokens": f"{common.fmt_int(sz.blocks)} blocks of {sz.block} tokens per GPU",
        "kv_cache_config.free_gpu_memory_fraction": "of memory after weights, admits max_tokens with the reserves",
    }
    if host:
        notes_by_key["kv_cache_config.host_cache_size"] = "bytes per GPU: the plan's host tier in whole blocks"
    head = [common.header(req, BACKEND.label), *common.summary_comments(sz, max_tokens),
            "# serve: trtllm-serve MODEL --config trtllm.yaml (trtllm.sh)"]
    yaml = common.yaml_text(head, body, notes_by_key)
    script = common.shell_script(
        [common.header(req, BACKEND.label)], ["trtllm-serve", common.model_ref(p)],
        [("--config", common.beside("trtllm.yaml"))])
    how = f"kv_cache_config.max_tokens = {common.fmt_int(sz.blocks)} blocks × {sz.block} tokens per block"
    rows = common.capacity(sz, max_tokens, how) + (
        ("free_gpu_memory_fraction", derived(fraction, "1", "KV pool / (memory − weights − reserves), "
                                                                   "rounded up to 0.001")),)
    return common.finish(BACKEND, mapped, sz, [EmittedFile("trtllm.yaml", yaml), EmittedFile("trtllm.sh", script)],
                         rows, notes)


BACKEND = Backend(
    id="trtllm", engine="TensorRT-LLM", version="main", kv_dtypes=KV_DTYPES, block_sizes=(8, 16, 32, 64, 128),
    default_block=32, prefix_caching=True, tiers=("host",), eviction=False, flags=FLAGS,
    source="docs/engines.md § TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py, main newer than 1.2.1)",
    build=render,
)
