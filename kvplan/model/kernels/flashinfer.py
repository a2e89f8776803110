"""Decode-kernel settings for a plan: FlashInfer's paged decode wrapper, per tensor-parallel rank.

    kernel_config(plan) -> KernelConfig      the settings and the numbers behind them
    kernel_payload(kc)  -> dict              the `kernel` key of the plan JSON (Plan.kernel)

The emit target (`kvplan emit --target flashinfer`, the Python a user pastes)
is kvplan/engines/flashinfer.py. This module sits below the planner, so that
a plan carries its kernel payload and renderers only print it.

Facts about the API come from shared/reference/engines.md ("Decode kernels",
FlashInfer 0.7.4): BatchDecodeWithPagedKVCacheWrapper(workspace, kv_layout,
use_cuda_graph, use_tensor_cores, backend) then plan(indptr, indices,
last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, ...,
window_left, logits_soft_cap, q/kv/o_data_type, fixed_split_size,
disable_split_kv). That wrapper serves MHA/GQA; an MLA model needs
flashinfer.mla.BatchMLAPagedAttentionWrapper, whose plan() takes the latent
widths (head_dim_ckv = kv_lora_rank, head_dim_kpe = the rope width).

Split sizes follow FlashAttention's wave-efficiency heuristic
(kvplan/model/kernels/splits.py, which cites its source). The predicted kernel time
is the KV bytes one rank reads per step over the plan's effective bandwidth
(SPEC §4, §6): a memory-bound lower bound, not a measurement.
"""

from __future__ import annotations

import math
from typing import Optional, Protocol

from kvplan.base.evidence import Value, assumed, derived, reported
from kvplan.base.records import record
from kvplan.catalog import Device, Dtype, Model
from kvplan.model import roofline as rf
from kvplan.model.kernels.splits import SplitChoice, fa3_decode_tile, fa_split, flashinfer_split
from kvplan.model.scenario import Scenario

VERSION = "0.7.4"
LABEL = f"FlashInfer {VERSION}"

#: SMs assumed when the device catalog gives none (a custom device block without `sm_count`):
#: the H100 SXM's 132 (catalog h100-sxm). Set `sm_count` in the device block to replace it.
DEFAULT_SM_COUNT = 132

#: Workspace the emitted Python allocates: 128 MiB, what FlashInfer's documentation examples use
#: for the decode wrapper. A larger batch of long sequences may need more (plan() says so).
WORKSPACE_BYTES = 128 * 1024 * 1024

#: GQA group size from which the decode wrapper's tensor-core path pays off (engines.md:
#: "tensor cores pay off for GQA group sizes of about 4 and up").
TENSOR_CORE_MIN_GROUP = 4

#: GPU generation of each catalog device FlashInfer runs on (NVIDIA, CUDA). Others are not CUDA
#: devices (AMD Instinct, Intel Gaudi, Google TPU) or custom blocks of unknown generation.
ARCH = {
    "a100-80g": "ampere",
    "h100-sxm": "hopper", "h100-pcie": "hopper", "h200": "hopper",
    "b200": "blackwell", "b200-hgx": "blackwell", "b300": "blackwell", "gb200": "blackwell",
}
NOT_CUDA = {"mi300x": "AMD Instinct", "mi325x": "AMD Instinct", "mi355x": "AMD Instinct",
            "gaudi3": "Intel Gaudi", "tpu-v5e": "Google TPU", "tpu-v5p": "Google TPU", "tpu-v6e": "Google TPU"}

#: kvplan KV dtype → the torch dtype FlashInfer's decode wrapper takes (engines.md: 16-bit, or fp8
#: e4m3/e5m2). The other widths have no decode-wrapper dtype; the nearest supported is fp8.
KV_TORCH = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp8": "torch.float8_e4m3fn"}
Q_TORCH = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}


class KernelPlan(Protocol):
    """What the kernel settings are derived from: a plan's scenario and choices (kvplan.planner.plan.Plan
    has them; this module sits below the planner, so it names what it reads instead of importing it)."""

    @property
    def scenario(self) -> Scenario: ...
    @property
    def kv_dtype(self) -> Dtype: ...
    @property
    def block_size(self) -> int: ...
    @property
    def retention(self) -> float: ...
    @property
    def sharing(self) -> float: ...
    @property
    def placement(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...


@record
class LayerGroup:
    """Layers sharing one window: one plan() call (window_left is a plan argument)."""

    window: Optional[int]       # tokens, None for full attention
    layers: int                 # of the model's layers
    window_left: int            # FlashInfer's argument: W − 1, or −1 for none
    tokens_read: int            # per sequence per layer: min(context, window)
    pages: int                  # pages per sequence per layer
    split: SplitChoice          # FlashInfer split count by the wave model
    fixed_split_size: int       # pages per split
    disable_split_kv: bool
    fa_split: SplitChoice       # what FlashAttention-3's heuristic picks (num_splits = 0)
    kv_bytes: Value             # read by one rank per step in these layers
    kernel_time: Value


@record
class KernelConfig:
    """One tensor-parallel rank's decode-kernel settings, with the evidence for each number."""

    wrapper: str
    mla: bool
    arch: str
    backend: str
    backend_reason: str
    kv_layout: str
    page_size: int
    tp: int
    pp: int
    num_qo_heads: int
    num_kv_heads: int
    kv_head_copies: int          # ranks holding each KV head (replication beyond n_kv)
    group: int                   # query heads per KV head on the rank
    head_dim: int
    head_dim_v: int
    kv_lora_rank: int            # MLA only
    rope_dim: int                # MLA only
    q_data_type: str
    kv_data_type: str
    o_data_type: str
    kv_dtype_supported: bool
    use_tensor_cores: bool
    tensor_core_reason: str
    use_cuda_graph: bool
    cuda_graph_batch: int
    logits_soft_cap: Optional[float]
    sm_count: Value
    beta_eff: Value
    groups: tuple[LayerGroup, ...]
    kv_bytes: Value              # per rank per step, all its layers
    kernel_time: Value
    warnings: tuple[str, ...]


def _arch(device: Device) -> str:
    if device.id in ARCH:
        return ARCH[device.id]
    if device.id in NOT_CUDA:
        return "not-cuda"
    return "unknown"


def _backend(arch: str, kv: str, mla: bool, tensor_cores: bool) -> tuple[str, str]:
    if mla:
        return "auto", "the MLA wrapper chooses its kernel per device"
    if arch == "hopper":
        if kv == "fp8":
            return "fa2", ("Hopper, but FlashInfer's auto rule keeps fp8 KV off its fa3 kernels "
                           "(flashinfer/utils.py determine_attention_backend)")
        return "fa3", "Hopper (sm90): FlashInfer's FlashAttention-3 kernels"
    if arch == "blackwell":
        return "trtllm-gen", "Blackwell (sm100): TensorRT-LLM's generated decode kernels"
    if arch == "ampere":
        return "fa2", "Ampere (sm80): FlashAttention-2 kernels, the only family there"
    if arch == "not-cuda":
        return "auto", "not a CUDA device: FlashInfer does not run here; the shape below still applies"
    return "auto", "device generation unknown (not in the catalog): FlashInfer picks at run time"


def _q_dtype(weights: str) -> tuple[str, bool]:
    return (Q_TORCH[weights], True) if weights in Q_TORCH else ("torch.bfloat16", False)


@record
class _Heads:
    """Heads on one rank: query heads split; KV heads split up to n_kv, then replicated."""

    n_qo: int
    n_kv: int
    copies: int                 # ranks holding each KV head
    group: int                  # query heads per KV head


def _heads(m: Model, tp: int, mla: bool) -> tuple[_Heads, list[str]]:
    warnings = []
    if m.n_q % tp:
        warnings.append(f"{m.n_q} query heads do not split evenly over tensor parallel {tp}; "
                        f"ranks hold up to {math.ceil(m.n_q / tp)}")
    n_qo = math.ceil(m.n_q / tp)
    if mla:
        n_kv, copies = 1, tp
    elif tp <= m.n_kv:
        if m.n_kv % tp:
            warnings.append(f"{m.n_kv} KV heads do not split evenly over tensor parallel {tp}")
        n_kv, copies = math.ceil(m.n_kv / tp), 1
    else:
        n_kv, copies = 1, tp // m.n_kv
        warnings.append(f"tensor parallel {tp} exceeds the model's {m.n_kv} KV heads: each KV head is "
                        f"held by {copies} ranks (replicated), each rank reads it")
    if n_qo % n_kv:
        warnings.append(f"num_qo_heads {n_qo} is not a multiple of num_kv_heads {n_kv}, which plan() requires")
    return _Heads(n_qo, n_kv, copies, max(1, n_qo // n_kv)), warnings


@record
class _Dtypes:
    """The torch dtypes the kernel takes, and the KV width it reads."""

    kv_id: str
    supported: bool             # FlashInfer's decode wrapper takes the plan's KV dtype
    kv_torch: str
    kv_width: float             # bytes per element the emitted kernel reads
    q_torch: str


def _dtypes(kv: Dtype, weights: Dtype, mla: bool) -> tuple[_Dtypes, list[str]]:
    warnings = []
    kv_id = kv.id
    supported = kv_id in KV_TORCH
    kv_torch = KV_TORCH.get(kv_id, "torch.float8_e4m3fn")
    kv_width = kv.width if supported else 1.0   # what the emitted kernel reads
    if not supported:
        warnings.append(f"kv_dtype {kv_id}: FlashInfer's decode wrapper takes 16-bit or fp8 (e4m3/e5m2) KV; "
                        f"{kv_id} is not supported, the nearest it takes is fp8 (torch.float8_e4m3fn), "
                        f"{1.0 / kv.width:g}x the plan's KV bytes")
    if mla and kv_id == "fp8":
        warnings.append("fp8 KV with the MLA wrapper: docs/engines.md documents fp8 KV for the decode wrapper only; "
                        "check that your FlashInfer build accepts it for MLA")
    q_torch, q_known = _q_dtype(weights.id)
    if not q_known:
        warnings.append(f"weights {weights.id}: queries and outputs assumed bf16 (activations stay 16-bit)")
    return _Dtypes(kv_id, supported, kv_torch, kv_width, q_torch), warnings


def _arch_warnings(dev: Device, arch: str) -> list[str]:
    if arch == "not-cuda":
        return [f"{dev.id} is an {NOT_CUDA[dev.id]} device; FlashInfer is a CUDA library. Use the "
                "engine's own attention backend there; the shapes and split sizes still describe the work"]
    if arch == "unknown":
        return [f"{dev.id}: GPU generation unknown; backend left to FlashInfer (auto)"]
    return []


def _tensor_cores(mla: bool, group: int) -> tuple[bool, str]:
    if mla:
        return False, "not a decode-wrapper setting: the MLA wrapper has its own kernels"
    if group >= TENSOR_CORE_MIN_GROUP:
        return True, (f"GQA group {group} ≥ {TENSOR_CORE_MIN_GROUP}: the prefill (tensor-core) kernels "
                      "pay off (docs/engines.md)")
    return False, f"GQA group {group} < {TENSOR_CORE_MIN_GROUP}: the CUDA-core decode kernel"


def _sms(dev: Device, sm_count: Optional[int]) -> tuple[Value, list[str]]:
    if sm_count is not None:
        return assumed(sm_count, "SMs", "given by the caller"), []
    if dev.sm_count:
        unit = "CUs" if dev.id in NOT_CUDA and NOT_CUDA[dev.id] == "AMD Instinct" else "SMs"
        return reported(dev.sm_count, unit, f"device catalog: {dev.id} sm_count"), []
    sms = assumed(DEFAULT_SM_COUNT, "SMs", f"{dev.id} has no sm_count: the H100 SXM's {DEFAULT_SM_COUNT} SMs "
                                           "assumed (set sm_count in the device block)")
    return sms, [f"{dev.id} has no SM count; split sizes assume {DEFAULT_SM_COUNT} SMs"]


def _head_dims(m: Model) -> tuple[int, int]:
    """head_dim and head_dim_v as the wrapper's plan() takes them: MLA's are the latent widths."""
    if m.kv_kind == "mla":
        return m.mla_kv_rank + m.mla_rope_dim, m.mla_kv_rank
    return m.head_dim, m.v_head_dim or m.head_dim


def _layer_groups(plan: KernelPlan, heads: _Heads, dt: _Dtypes, n_sms: int, beta: float) -> list[LayerGroup]:
    """One LayerGroup per window of the model: its split, FlashAttention-3's, its KV bytes and time."""
    sc = plan.scenario
    m = sc.model
    b, s, pp = int(sc.batch), int(sc.context), int(plan.pp)
    mla = m.kv_kind == "mla"
    n_kv, kv_id = heads.n_kv, dt.kv_id
    head_dim, head_dim_v = _head_dims(m)
    if mla:
        per_token_layer = (m.mla_kv_rank + m.mla_rope_dim) * dt.kv_width
        tile_m, tile_n = fa3_decode_tile(m.mla_rope_dim, m.mla_kv_rank, 1 if kv_id == "fp8" else 2)
        fa_heads, fa_qper, fa_d, fa_dv = 1, heads.n_qo, m.mla_rope_dim, m.mla_kv_rank
    else:
        per_token_layer = n_kv * (head_dim + head_dim_v) * dt.kv_width
        fa_heads, fa_qper, fa_d, fa_dv = n_kv, heads.group, head_dim, head_dim_v
    groups = []
    for window, n_layers in m.window_groups:
        wl = -1 if window is None else int(window) - 1
        read = s if window is None else min(s, int(window))
        choice, size = flashinfer_split(b, n_kv, s, n_sms, plan.block_size, wl)
        if not mla:
            tile_m, tile_n = fa3_decode_tile(head_dim, head_dim_v, 1 if kv_id == "fp8" else 2,
                                             local=0 <= wl < s - 1)
        fa = fa_split(b, fa_heads, s, n_sms, tile_n, q_per_kv=fa_qper, block_m=tile_m, head_dim=fa_d,
                      head_dim_v=fa_dv, kv_bytes=1 if kv_id == "fp8" else 2, window_left=wl)
        layers_rank = n_layers / pp
        nbytes = b * layers_rank * read * per_token_layer * plan.retention
        what = "full attention" if window is None else f"window {window:,}"
        kvb = derived(nbytes, "B", f"b·(layers/pp)·min(s, window)·bytes per token per layer on a rank·r "
                                   f"= {b}·{layers_rank:g}·{read:,}·{per_token_layer:g}·{plan.retention:g} ({what})")
        kt = derived(nbytes / beta, "s", f"KV bytes a rank reads per step in these layers / β_eff "
                                         f"({beta / 1e12:.4g} TB/s)")
        groups.append(LayerGroup(window, n_layers, wl, read, choice.n_blocks, choice, size, choice.splits == 1,
                                 fa, kvb, kt))
    return groups


def kernel_config(plan: KernelPlan, sm_count: Optional[int] = None) -> KernelConfig:
    """The decode-kernel settings of one rank of `plan`. Never raises for a plan the planner made.

    The steps: heads per rank → dtypes → GPU generation, tensor cores and backend → SMs → bandwidth →
    per layer group (splits, KV bytes, time) → totals; the warnings in that order."""

    sc = plan.scenario
    m, dev = sc.model, sc.device
    b = int(sc.batch)
    tp, pp = int(plan.tp), int(plan.pp)
    mla = m.kv_kind == "mla"

    heads, warnings = _heads(m, tp, mla)
    dt, dtype_warnings = _dtypes(plan.kv_dtype, sc.weights, mla)
    arch = _arch(dev)
    warnings += dtype_warnings + _arch_warnings(dev, arch)
    tc, tc_why = _tensor_cores(mla, heads.group)
    backend, backend_why = _backend(arch, dt.kv_id, mla, tc)
    if not mla and not tc and backend in ("fa2", "fa3"):
        backend_why += "; the decode wrapper uses it on its tensor-core path only"
    sms, sm_warnings = _sms(dev, sm_count)
    warnings += sm_warnings

    beta_arr, upper = rf.beta_eff(dev, plan.placement, b)
    beta = float(beta_arr)
    beta_v = derived(beta, "B/s", f"β_eff, {plan.placement} placement on {dev.id} (docs/model.md §7)"
                     + ("; an upper bound: fabric bandwidth unpublished" if upper else ""))

    groups = _layer_groups(plan, heads, dt, int(sms.value), beta)
    total = sum(g.kv_bytes.value for g in groups)
    kv_total = derived(total, "B", "KV bytes one rank reads per decode step, summed over its layer groups")
    k_time = derived(total / beta, "s", "KV bytes one rank reads per step / β_eff (docs/model.md §4, §7): "
                                        "the attention kernels' memory-bound lower bound"
                                        + (", itself a lower bound as β_eff is an upper bound" if upper else ""))
    if plan.sharing > 1.0:
        warnings.append(f"the plan shares prefix pages (σ = {plan.sharing:.3g}); the decode wrapper reads them once "
                        "per sequence. FlashInfer's cascade wrappers read a shared prefix once per step; the kernel "
                        "time above is for the plain wrapper")
    if len(groups) > 1:
        warnings.append(f"{len(groups)} layer groups with different windows: one wrapper and one plan() per group")

    head_dim, head_dim_v = _head_dims(m)
    return KernelConfig(
        wrapper="flashinfer.mla.BatchMLAPagedAttentionWrapper" if mla
        else "flashinfer.BatchDecodeWithPagedKVCacheWrapper",
        mla=mla, arch=arch, backend=backend, backend_reason=backend_why, kv_layout="NHD",
        page_size=int(plan.block_size), tp=tp, pp=pp, num_qo_heads=heads.n_qo, num_kv_heads=heads.n_kv,
        kv_head_copies=heads.copies, group=heads.group, head_dim=head_dim, head_dim_v=head_dim_v,
        kv_lora_rank=m.mla_kv_rank if mla else 0, rope_dim=m.mla_rope_dim if mla else 0,
        q_data_type=dt.q_torch, kv_data_type=dt.kv_torch, o_data_type=dt.q_torch, kv_dtype_supported=dt.supported,
        use_tensor_cores=tc, tensor_core_reason=tc_why, use_cuda_graph=True, cuda_graph_batch=b,
        logits_soft_cap=m.soft_cap, sm_count=sms, beta_eff=beta_v, groups=tuple(groups), kv_bytes=kv_total,
        kernel_time=k_time, warnings=tuple(warnings),
    )


# ------------------------------------------------------------------ renderers

def _split_json(c: SplitChoice) -> dict[str, object]:
    return {"splits": c.splits, "blocks": c.blocks, "kv_blocks": c.n_blocks, "sms": c.sms,
            "wave_efficiency": round(c.efficiency, 6), "reason": c.reason}


def kernel_payload(kc: KernelConfig) -> dict[str, object]:
    """The plan JSON's `kernel` key (snake_case; quantities as contract objects)."""
    return {
        "target": "flashinfer", "version": VERSION, "per": "tensor-parallel rank",
        "wrapper": kc.wrapper, "mla": kc.mla, "arch": kc.arch,
        "backend": kc.backend, "backend_reason": kc.backend_reason,
        "kv_layout": kc.kv_layout, "page_size": kc.page_size, "tensor_parallel": kc.tp, "pipeline_parallel": kc.pp,
        "num_qo_heads": kc.num_qo_heads, "num_kv_heads": kc.num_kv_heads, "kv_head_copies": kc.kv_head_copies,
        "gqa_group": kc.group, "head_dim": kc.head_dim, "head_dim_v": kc.head_dim_v,
        "mla_dims": {"kv_lora_rank": kc.kv_lora_rank, "rope_dim": kc.rope_dim} if kc.mla else None,
        "q_data_type": kc.q_data_type, "kv_data_type": kc.kv_data_type, "o_data_type": kc.o_data_type,
        "kv_dtype_supported": kc.kv_dtype_supported,
        "use_tensor_cores": kc.use_tensor_cores, "tensor_core_reason": kc.tensor_core_reason,
        "use_cuda_graph": kc.use_cuda_graph, "cuda_graph_batch": kc.cuda_graph_batch,
        "logits_soft_cap": kc.logits_soft_cap,
        "sm_count": kc.sm_count, "beta_eff": kc.beta_eff,
        "layer_groups": [
            {"window": g.window, "layers": g.layers, "window_left": g.window_left, "tokens_read": g.tokens_read,
             "pages": g.pages, "split": _split_json(g.split), "fixed_split_size": g.fixed_split_size,
             "disable_split_kv": g.disable_split_kv, "fa_num_splits": _split_json(g.fa_split),
             "kv_bytes": g.kv_bytes, "kernel_time": g.kernel_time}
            for g in kc.groups
        ],
        "kv_bytes": kc.kv_bytes, "kernel_time": kc.kernel_time,
        "warnings": list(kc.warnings),
    }


def plan_kernel(plan: KernelPlan) -> dict[str, object]:
    """The decode-kernel settings of a plan as the plan JSON's `kernel` key."""
    return kernel_payload(kernel_config(plan))
