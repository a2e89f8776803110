"""`kvplan emit --target flashinfer`: flashinfer_decode.py, a self-contained benchmark of the plan's decode
attention on one tensor-parallel rank, and flashinfer_kernel.json, the settings.

The settings and the numbers behind them are computed by kvplan/model/kernels/flashinfer.py (the plan's
`kernel`); this module writes them out. The benchmark is a module of its own, kvplan/engines/kernels/
flashinfer_decode.py (linted, typed and tested with the package; it imports nothing of kvplan): the emitted file is
its source as it is, after the digest header, with the plan's settings as one JSON literal on its SETTINGS_JSON
line, so nothing a spec holds is written as code (docs/kernels.md § Measuring).

The calls follow FlashInfer 0.7.4's Python API (flashinfer/decode.py BatchDecodeWithPagedKVCacheWrapper;
flashinfer/mla/_batch_mla/_wrapper.py BatchMLAPagedAttentionWrapper, whose plan() takes MLAPlanMetadata).
"""

from __future__ import annotations

import functools
import math
from importlib import resources
from typing import Optional

from kvplan.base import controls
from kvplan.base.evidence import Value, to_jsonable
from kvplan.base.units import fmt_bytes
from kvplan.catalog import DTYPES
from kvplan.engines import kernels
from kvplan.engines.common import (
    Backend,
    EmitRequest,
    Emitted,
    EmittedFile,
    Mapped,
    comment_lines,
    header,
    json_header,
    size,
)
from kvplan.engines.kernels import flashinfer_decode as bench
from kvplan.model.kernels.flashinfer import (
    KV_TORCH,
    LABEL,
    VERSION,
    WORKSPACE_BYTES,
    KernelConfig,
    LayerGroup,
    kernel_config,
    kernel_payload,
)
from kvplan.planner.plan import Plan

#: The measurements file's columns (the benchmark's): the ones `kvplan calibrate` documents, then the kernel's.
CSV_COLUMNS = bench.COLUMNS


def _group_name(kc: KernelConfig, g: LayerGroup) -> str:
    return "wrapper" if len(kc.groups) == 1 else f"wrapper_{'full' if g.window is None else f'w{g.window}'}"


def _group_note(kc: KernelConfig, g: LayerGroup) -> str:
    """Why the group's split is what it is: the wave model's count, and what FlashAttention-3 would pick."""
    what = "full attention" if g.window is None else f"sliding window {g.window:,}"
    fa = f"FlashAttention-3 would pick {g.fa_split.splits} split{'s' * (g.fa_split.splits > 1)}"
    if kc.mla:
        return (f"{g.layers} layers, {what}. The MLA wrapper schedules its own KV splits; the wave model "
                f"gives {g.split.splits} ({g.split.reason}); {fa}")
    note = f"{g.layers} layers, {what}: {g.split.reason}; {fa}"
    if not kc.use_tensor_cores:   # FlashInfer's plan() raises for a split size off the tensor-core path
        note += f"; fixed_split_size is for the tensor-core path only (the wave model's: {g.fixed_split_size} pages)"
    return note


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
    lines += [f"# warning: {controls.escaped(w)}" for w in kc.warnings]  # a warning may name the device
    return lines


# ------------------------------------------------------------------ the emitted benchmark

#: The line of kvplan/engines/kernels/flashinfer_decode.py that the emitted copy holds the plan's settings on.
_SETTINGS_LINE = 'SETTINGS_JSON = ""\n'


@functools.cache
def _source() -> str:
    """The benchmark module's source, as the package ships it."""
    text = resources.files(kernels).joinpath("flashinfer_decode.py").read_text(encoding="utf-8")
    if text.count("\n" + _SETTINGS_LINE) != 1:
        raise RuntimeError(f"kvplan/engines/kernels/flashinfer_decode.py holds no line {_SETTINGS_LINE!r} to fill")
    return text


def _layers_on_rank(layers: int, pp: int) -> int:
    """Layers of a group one rank holds: ⌈layers / pp⌉, the most loaded pipeline stage's (kvplan.model.memory)."""
    return -(-layers // pp)


def _kv_read(plan: Plan, kc: KernelConfig) -> str:
    """The KV dtype the kernel reads: the plan's, or the nearest one the wrapper takes."""
    return plan.kv_dtype.id if kc.kv_dtype_supported else next(k for k, v in KV_TORCH.items()
                                                                if v == kc.kv_data_type)


def bench_settings(plan: Plan, kc: KernelConfig) -> dict[str, object]:
    """What the benchmark reads of the plan (flashinfer_decode.Settings, field for field)."""
    sc, m = plan.scenario, plan.scenario.model
    width = DTYPES[_kv_read(plan, kc)].width
    mla = {"kv_lora_rank": kc.kv_lora_rank, "rope_dim": kc.rope_dim,
           # 1/sqrt(qk_nope + qk_rope head dim); the checkpoint's rope mscale² is left out: same kernel time
           "sm_scale": 1 / math.sqrt(m.head_dim)} if kc.mla else None
    groups = [{"name": _group_name(kc, g), "window": g.window, "layers": _layers_on_rank(g.layers, kc.pp),
               "tokens": g.tokens_read, "window_left": g.window_left, "pages": g.pages,
               "fixed_split_size": g.fixed_split_size, "disable_split_kv": g.disable_split_kv,
               "note": _group_note(kc, g)} for g in kc.groups]
    return {
        "plan": plan.digest, "model": m.id, "device": sc.device.id, "devices": int(plan.n_devices),
        "tensor_parallel": kc.tp, "pipeline_parallel": kc.pp, "weights": sc.weights.id,
        "plan_kv_dtype": plan.kv_dtype.id, "kv_dtype": _kv_read(plan, kc),
        "kv_torch_dtype": kc.kv_data_type.removeprefix("torch."),
        "q_torch_dtype": kc.q_data_type.removeprefix("torch."), "o_torch_dtype": kc.o_data_type.removeprefix("torch."),
        "kv_element_bytes": int(width),
        "batch": int(sc.batch), "context": int(sc.context), "retention": float(plan.retention),
        "page_size": kc.page_size, "kv_layout": kc.kv_layout, "backend": kc.backend,
        "use_cuda_graph": kc.use_cuda_graph, "use_tensor_cores": kc.use_tensor_cores,
        "num_qo_heads": kc.num_qo_heads, "num_kv_heads": kc.num_kv_heads, "head_dim": kc.head_dim,
        "head_dim_v": kc.head_dim_v, "logits_soft_cap": kc.logits_soft_cap, "mla": mla, "groups": groups,
        "planned_kv_bytes": round(kc.kv_bytes.value), "planned_kernel_s": float(kc.kernel_time.value),
        "workspace_bytes": WORKSPACE_BYTES, "flashinfer": VERSION,
    }


def settings_json(plan: Plan, kc: KernelConfig) -> str:
    """The settings as the JSON the benchmark's SETTINGS_JSON holds: every string escaped past what JSON needs
    (controls.dumps), so no text a spec holds breaks a line; JSON has no `\"\"\"` (a quote in a string is `\\"`)."""
    return controls.dumps(bench_settings(plan, kc), indent=2, allow_nan=False)


def plan_call(plan: Plan, kc: KernelConfig) -> str:
    """The wrapper calls the benchmark makes for the plan (its `--calls`), as Python a user can paste."""
    return bench.calls(bench.load(settings_json(plan, kc)))


def benchmark_script(req: EmitRequest, kc: KernelConfig) -> str:
    """flashinfer_decode.py: the digest header, the settings and the calls as comments, then the benchmark
    module as kvplan ships it with the plan's settings as one JSON literal on its SETTINGS_JSON line."""
    calls = ["#", "# the calls plan_wrappers() makes (python flashinfer_decode.py --calls prints them):",
             *(f"#   {line}" for line in plan_call(req.plan, kc).splitlines())]
    top = ["#!/usr/bin/env python3", *comment_lines([header(req, LABEL), *_summary(kc), *calls])]
    literal = f'SETTINGS_JSON = r"""\n{settings_json(req.plan, kc)}\n"""\n'
    return "\n".join(top) + "\n" + _source().replace("\n" + _SETTINGS_LINE, "\n" + literal)


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
    py = benchmark_script(req, kc)
    body = {"_kvplan": json_header(req, BACKEND), **kernel_payload(kc)}

    js = controls.dumps(to_jsonable(body), indent=2, allow_nan=False) + "\n"
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
