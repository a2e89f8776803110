"""`kvplan emit --target flashinfer`: the decode wrapper's construction and plan() calls as Python.

The settings and the numbers behind them are computed by kvplan/model/kernels/flashinfer.py
(the plan's `kernel`); this module writes them out.
"""

from __future__ import annotations

import json
from typing import Optional

from kvplan.base.evidence import Value, to_jsonable
from kvplan.base.units import fmt_bytes
from kvplan.catalog import DTYPES
from kvplan.engines.common import Backend, EmitRequest, Emitted, EmittedFile, Mapped, header, json_header, size
from kvplan.model.kernels.flashinfer import (
    KV_TORCH,
    LABEL,
    VERSION,
    WORKSPACE_BYTES,
    KernelConfig,
    kernel_config,
    kernel_payload,
)


def _py_float(x: Optional[float]) -> str:
    return "None" if x is None else repr(float(x))


def plan_call(kc: KernelConfig, batch: int) -> str:
    """The wrapper construction and plan() calls, as Python a user pastes into a serving loop."""
    out = ["import flashinfer", "import torch", "",
           f"# {WORKSPACE_BYTES // 2**20} MiB workspace, as FlashInfer's documentation examples allocate (assumed)",
           f'workspace = torch.empty({WORKSPACE_BYTES // 2**20} * 1024 * 1024, dtype=torch.uint8, device="cuda")',
           f"max_batch = {batch}  # the plan's batch: CUDA-graph buffers are sized for it"]
    for g in kc.groups:
        name = "wrapper" if len(kc.groups) == 1 else f"wrapper_{'full' if g.window is None else f'w{g.window}'}"
        what = "full attention" if g.window is None else f"sliding window {g.window:,}"
        fa = f"FlashAttention-3 would pick {g.fa_split.splits} split{'s' * (g.fa_split.splits > 1)}"
        if kc.mla:
            out += ["", f"# {g.layers} layers, {what}. The MLA wrapper schedules its own KV splits; the wave model "
                        f"gives {g.split.splits} ({g.split.reason}); {fa}"]
        else:
            out += ["", f"# {g.layers} layers, {what}: {g.split.reason}; {fa}"]
        if kc.mla:
            out += [
                f"{name} = flashinfer.mla.BatchMLAPagedAttentionWrapper(",
                "    workspace, use_cuda_graph=True,",
                "    qo_indptr=torch.empty(max_batch + 1, dtype=torch.int32, device=\"cuda\"),",
                "    kv_indptr=torch.empty(max_batch + 1, dtype=torch.int32, device=\"cuda\"),",
                f"    kv_indices=torch.empty(max_batch * {g.pages}, dtype=torch.int32, device=\"cuda\"),",
                "    kv_len_arr=torch.empty(max_batch, dtype=torch.int32, device=\"cuda\"),",
                f'    backend="{kc.backend}",',
                ")",
                f"{name}.plan(",
                "    qo_indptr, kv_indptr, kv_indices, kv_len_arr,",
                f"    num_heads={kc.num_qo_heads}, head_dim_ckv={kc.kv_lora_rank}, head_dim_kpe={kc.rope_dim},",
                f"    page_size={kc.page_size}, causal=False,",
                "    sm_scale=sm_scale,  # 1/sqrt(qk_nope + qk_rope head dim) times the checkpoint's rope mscale²",
                f"    q_data_type={kc.q_data_type}, kv_data_type={kc.kv_data_type},",
                ")",
            ]
            continue
        out += [
            f"{name} = flashinfer.BatchDecodeWithPagedKVCacheWrapper(",
            f'    workspace, kv_layout="{kc.kv_layout}", use_cuda_graph={kc.use_cuda_graph}, '
            f"use_tensor_cores={kc.use_tensor_cores},",
            "    paged_kv_indptr_buffer=torch.empty(max_batch + 1, dtype=torch.int32, device=\"cuda\"),",
            f"    paged_kv_indices_buffer=torch.empty(max_batch * {g.pages}, dtype=torch.int32, device=\"cuda\"),",
            "    paged_kv_last_page_len_buffer=torch.empty(max_batch, dtype=torch.int32, device=\"cuda\"),",
            f'    backend="{kc.backend}",',
            ")",
            f"{name}.plan(",
            "    indptr, indices, last_page_len,",
            f"    num_qo_heads={kc.num_qo_heads}, num_kv_heads={kc.num_kv_heads}, head_dim={kc.head_dim}, "
            f"page_size={kc.page_size},",
            f'    pos_encoding_mode="NONE", window_left={g.window_left}, '
            f'logits_soft_cap={_py_float(kc.logits_soft_cap)},',
            f"    q_data_type={kc.q_data_type}, kv_data_type={kc.kv_data_type}, o_data_type={kc.o_data_type},",
            f"    fixed_split_size={g.fixed_split_size}, disable_split_kv={g.disable_split_kv},",
            ")",
        ]
    return "\n".join(out) + "\n"


def _summary(kc: KernelConfig) -> list[str]:
    def v(x: Value) -> str:
        return f"{x.human} ({x.evidence.value})"

    lines = [
        f"# {kc.wrapper}, per tensor-parallel rank (tp {kc.tp}, pp {kc.pp})",
        f"# backend {kc.backend}: {kc.backend_reason}",
        f"# heads: {kc.num_qo_heads} query, {kc.num_kv_heads} KV (group {kc.group}"
        + (f"; each KV head on {kc.kv_head_copies} ranks" if kc.kv_head_copies > 1 else "") + ")",
    ]
    if kc.mla:
        lines.append(f"# MLA latent: kv_lora_rank {kc.kv_lora_rank} + rope {kc.rope_dim} per token per layer")
    lines += [
        f"# tensor cores: {kc.use_tensor_cores} ({kc.tensor_core_reason})",
        f"# KV {kc.kv_data_type}" + ("" if kc.kv_dtype_supported else " (the plan's dtype is not supported: nearest)"),
        f"# SMs {v(kc.sm_count)}; β_eff {v(kc.beta_eff)}",
        f"# KV read per rank per step {v(kc.kv_bytes)}; attention kernel time ≥ {v(kc.kernel_time)}",
    ]
    lines += [f"# warning: {w}" for w in kc.warnings]
    return lines


# ------------------------------------------------------------------ emit target

def fallback_unfit(req: EmitRequest, kc: KernelConfig) -> Optional[str]:
    """The error when the KV dtype the wrapper falls back to (fp8 for a width it does not take) no longer fits
    the device: the pool at that width, with the plan's weights and reserves (kvplan.model.memory), per GPU."""
    p = req.plan
    if kc.kv_dtype_supported:
        return None
    fallback = DTYPES[next(k for k, v in KV_TORCH.items() if v == kc.kv_data_type)]
    mapped = Mapped(fallback, kc.kv_data_type, p.block_size, p.retention, "none", ())
    sz = size(p, mapped, req.reserves)
    if sz.fits:
        return None
    return (f"{LABEL}: kv_dtype {p.kv_dtype.id} → {fallback.id}: does not fit: the decode wrapper takes no "
            f"{p.kv_dtype.id} KV, and at {fallback.id} ({fallback.width / p.kv_dtype.width:g}x the plan's bytes) "
            f"weights {fmt_bytes(sz.weights)} + KV pool {fmt_bytes(sz.pool)} + reserves {fmt_bytes(sz.reserves)} = "
            f"{fmt_bytes(sz.needed)} per GPU, {fmt_bytes(sz.total)} on the device; nothing written for flashinfer "
            f"(the wrapper takes {', '.join(KV_TORCH)} KV: plan one of them)")


def build(req: EmitRequest) -> Emitted:
    kc = kernel_config(req.plan)
    error = fallback_unfit(req, kc)
    if error is not None:
        return Emitted("flashinfer", (), (error,), (), (error,), errors=(error,))
    head = header(req, LABEL)
    py = "\n".join([head, *_summary(kc), ""]) + "\n" + plan_call(kc, int(req.plan.scenario.batch))
    body = {"_kvplan": json_header(req, BACKEND), **kernel_payload(kc)}

    js = json.dumps(to_jsonable(body), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    # A KV dtype the wrapper cannot take changes the plan: a finding (exit 1), like an engine target's.
    findings = tuple(f"{LABEL}: {w}" for w in kc.warnings if w.startswith("kv_dtype "))
    warns = tuple(f"{LABEL}: {w}" for w in kc.warnings if not w.startswith("kv_dtype "))
    return Emitted("flashinfer", (EmittedFile("flashinfer_decode.py", py), EmittedFile("flashinfer_kernel.json", js)),
                   findings + warns, (), findings)


BACKEND = Backend(
    id="flashinfer", engine="FlashInfer", version=VERSION, kv_dtypes=dict(KV_TORCH),
    block_sizes=(1, 8, 16, 32, 64, 128), default_block=16, prefix_caching=True, tiers=(), eviction=False,
    flags=("kv_layout", "use_cuda_graph", "use_tensor_cores", "backend", "num_qo_heads", "num_kv_heads", "head_dim",
           "page_size", "pos_encoding_mode", "window_left", "logits_soft_cap", "q_data_type", "kv_data_type",
           "o_data_type", "fixed_split_size", "disable_split_kv"),
    source="docs/engines.md § Decode kernels (FlashInfer 0.7.4 BatchDecodeWithPagedKVCacheWrapper)",
    build=build,
)
