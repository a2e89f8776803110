"""A benchmark of one tensor-parallel rank's decode attention under a kvplan plan, self-contained.

    python flashinfer_decode.py [-o flashinfer_measured.csv] [--iters 100] [--warmup 10] [--calls]

It builds the rank's paged KV cache (synthetic values; the plan's page size, KV heads per rank,
head dim, dtype and layout), a page table for the plan's batch and context, plans FlashInfer's
decode wrapper with the plan's settings (`--calls` prints those calls, to paste), captures one
decode step's attention (every layer on the rank) in a CUDA graph as the engines do, replays it
(warm-up, then timed replays between CUDA events, the L2 cache flushed before each) and writes
the median to a measurements CSV that `kvplan calibrate` reads; the file's comment lines say what
each column is.

The plan's settings are the one JSON literal SETTINGS_JSON below (`kvplan emit --target
flashinfer` writes it; edit it to try other settings). It needs an NVIDIA GPU, torch and
flashinfer-python; without one of them it exits 2 with one line saying which. The settings, the
page table and the calls need neither: kvplan's tests import this file (torch absent) and check
them. kvplan ships this module (kvplan/engines/kernels/flashinfer_decode.py) and writes it out
as it is, but for the settings; it imports nothing of kvplan.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Callable, Mapping, NoReturn, Optional, Sequence, Union, get_args, get_type_hints

if TYPE_CHECKING:  # torch and FlashInfer are imported where they run; mypy reads their types from here
    from types import ModuleType

    from flashinfer import BatchDecodeWithPagedKVCacheWrapper as Wrapper  # or the MLA wrapper: both plan and run
    from torch import Tensor
    from torch.cuda import CUDAGraph

#: The plan's settings, one JSON object. `kvplan emit --target flashinfer` writes them on this line; kvplan's own
#: copy of the file holds none, and its main() says so.
SETTINGS_JSON = ""

#: Bytes zeroed before each timed replay so that no KV is still in L2: 256 MiB, the buffer
#: triton.testing.do_bench clears between runs (larger than any GPU's L2 in kvplan's catalog).
L2_FLUSH_BYTES = 256 * 1024 * 1024

OUTPUT = "flashinfer_measured.csv"

#: The measurements file's columns: the ones `kvplan calibrate` documents, then what the kernel benchmark adds.
COLUMNS = ("model", "device", "devices", "tensor_parallel", "weights", "kv_dtype", "batch", "context", "itl_ms",
           "kv_bytes", "kernel_ms", "achieved_kv_bandwidth_Bps")

#: What the measurements file's comment lines say about its columns (kvplan's docs/kernels.md has the same).
CSV_NOTES = (
    "kvplan measurements: one tensor-parallel rank's decode attention, timed by flashinfer_decode.py "
    "(kvplan emit --target flashinfer)",
    "lines starting with # are comments; one row per run",
    "model, device, devices, tensor_parallel, weights, batch, context: the plan's deployment (device: the "
    "plan's; the GPU measured is named in the last comment line)",
    "kv_dtype: the KV dtype the kernel read (the plan's, or the nearest one FlashInfer takes)",
    "itl_ms: empty: the row times the attention kernels alone, not the inter-token latency",
    "kv_bytes: KV bytes the kernels read per decode step on the rank, B (layers x batch x tokens kept x "
    "bytes per token per layer)",
    "kernel_ms: one decode step's attention on the rank (every layer, one CUDA graph), ms: the median of "
    "the timed replays between CUDA events, the L2 cache flushed before each",
    "achieved_kv_bandwidth_Bps: kv_bytes / kernel time, B/s; kvplan calibrate fits eta_kv (per KV dtype) "
    "from it, as achieved / the device's memory bandwidth",
)

#: Pages a page table may hold in all: FlashInfer indexes pages with int32, and the lists are built in memory.
MAX_PAGES = 2**31 - 1


# ------------------------------------------------------------------ the settings

class SettingsError(ValueError):
    """SETTINGS_JSON is missing, not JSON, or not the settings this file reads (one line says which)."""


@dataclass(frozen=True)
class Group:
    """Layers sharing one attention window: one wrapper and one plan() each."""

    name: str                    # the wrapper's name in the calls
    window: Optional[int]        # tokens, None for full attention
    layers: int                  # on this rank: ⌈the model's layers of the group / pipeline stages⌉
    tokens: int                  # a sequence reads per layer: min(context, window)
    window_left: int             # FlashInfer's argument: window − 1, or −1 for full attention
    pages: int                   # pages a sequence's tokens take: the CUDA-graph index buffers are sized for them
    fixed_split_size: int        # pages per KV split (kvplan's wave model)
    disable_split_kv: bool
    note: str                    # kvplan's reasons for the split, a comment of the calls


@dataclass(frozen=True)
class Mla:
    """The latent widths of an MLA model (DeepSeek-V2/V3) and the softmax scale the benchmark passes."""

    kv_lora_rank: int
    rope_dim: int
    sm_scale: float              # 1/sqrt(qk_nope + qk_rope head dim); rope mscale² left out: same kernel time


@dataclass(frozen=True)
class Settings:
    """What the benchmark reads of the plan: its deployment, the kernel's settings and kvplan's figures."""

    plan: str                    # the plan's digest
    model: str
    device: str                  # the plan's device; the CSV names the GPU it ran on too
    devices: int
    tensor_parallel: int
    pipeline_parallel: int
    weights: str
    plan_kv_dtype: str
    kv_dtype: str                # what the kernel reads: the plan's, or the nearest dtype FlashInfer takes
    kv_torch_dtype: str          # torch.<name>
    q_torch_dtype: str
    o_torch_dtype: str
    kv_element_bytes: int
    batch: int
    context: int                 # tokens per sequence
    retention: float             # the fraction of its tokens a sequence keeps
    page_size: int               # tokens per page
    kv_layout: str
    backend: str
    use_cuda_graph: bool
    use_tensor_cores: bool
    num_qo_heads: int            # on this rank
    num_kv_heads: int            # on this rank
    head_dim: int
    head_dim_v: int
    logits_soft_cap: Optional[float]
    mla: Optional[Mla]
    groups: tuple[Group, ...]
    planned_kv_bytes: int        # B, kvplan's KV read per rank per step (derived)
    planned_kernel_s: float      # s, kvplan's lower bound on this kernel time (derived)
    workspace_bytes: int         # assumed: what FlashInfer's documentation examples allocate
    flashinfer: str              # the version these calls are written for


JSONValue = Union[None, bool, int, float, str, Sequence["JSONValue"], Mapping[str, "JSONValue"]]
Record = Union[Settings, Group, Mla]


def load(text: str) -> Settings:
    """The settings in `text` (SETTINGS_JSON), every key there and of its type, every count at least 1."""
    if not text.strip():
        raise SettingsError("SETTINGS_JSON holds no settings: write this file with kvplan emit --target flashinfer")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise SettingsError(f"SETTINGS_JSON is not JSON ({error})") from None
    settings = _record(Settings, data, "SETTINGS_JSON")
    assert isinstance(settings, Settings)
    return settings


def _record(cls: type[Record], data: JSONValue, where: str) -> Record:
    """`cls` from a JSON object with exactly its fields."""
    if not isinstance(data, dict):
        raise SettingsError(f"{where}: give a JSON object, not {json.dumps(data)[:40]}")
    names = [f.name for f in fields(cls)]
    missing, unknown = [n for n in names if n not in data], sorted(set(data) - set(names))
    if missing or unknown:
        raise SettingsError(f"{where}: " + "; ".join(
            [f"missing {', '.join(missing)}"] * bool(missing) + [f"unknown {', '.join(unknown)}"] * bool(unknown)))
    hints = get_type_hints(cls, globals())  # this file's names, wherever it was loaded from
    values = {n: _value(hints[n], data[n], f"{where}.{n}") for n in names}
    return cls(**values)  # type: ignore[arg-type]  # each value was checked against its field's type by _value


def _value(hint: object, value: JSONValue, where: str) -> object:
    """`value` as the field's type: a bool is no number, a whole number is a float, a list is a tuple."""
    if hint in (Group, Mla):
        return _record(hint, value, where)
    if hint == Optional[int] or hint == Optional[float] or hint == Optional[Mla]:
        return None if value is None else _value(get_args(hint)[0], value, where)
    if hint == tuple[Group, ...]:
        if not isinstance(value, list) or not value:
            raise SettingsError(f"{where}: give a list of one or more layer groups")
        return tuple(_record(Group, item, f"{where}[{i}]") for i, item in enumerate(value))
    if hint is bool and isinstance(value, bool) or hint is str and isinstance(value, str):
        return value
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        if value < -1 or value < 1 and not where.endswith(".window_left"):
            raise SettingsError(f"{where}: {value}: give a whole number of at least 1")
        return value
    raise SettingsError(f"{where}: {json.dumps(value)[:40]}: give {getattr(hint, '__name__', hint)}")


def settings() -> Settings:
    """This file's settings (SettingsError when there are none or they do not read)."""
    return load(SETTINGS_JSON)


# ------------------------------------------------------------------ the page table (pure Python)

@dataclass(frozen=True)
class Laid:
    """A layer group on this rank with the tokens a sequence keeps in it and its page table."""

    group: Group
    kept: int
    table: tuple[list[int], list[int], list[int]]   # indptr, indices, last_page_len


def kept_tokens(tokens: int, retention: float) -> int:
    """Tokens a sequence keeps in a layer that reads `tokens`: the plan's retention of them, whole, at least 1."""
    return max(1, math.ceil(round(tokens * retention, 6)))


def page_table(batch: int, tokens: int, page_size: int) -> tuple[list[int], list[int], list[int]]:
    """FlashInfer's page table for `batch` sequences of `tokens` tokens in pages of `page_size` tokens:
    indptr (batch + 1 offsets into indices), indices (page ids in the pool) and last_page_len (tokens in
    each sequence's last page, 1..page_size). Sequence i holds pool pages indices[indptr[i]:indptr[i + 1]],
    in order, as a batch prefilled together gets them. Every layer of a group reads the same table over
    its own pool, as the engines do."""
    if min(batch, tokens, page_size) < 1:
        raise ValueError(f"batch, tokens and page_size must be at least 1, not {batch}, {tokens}, {page_size}")
    pages = -(-tokens // page_size)
    if batch * pages > MAX_PAGES:
        raise ValueError(f"{batch} sequences of {pages} pages are more than FlashInfer's int32 page ids hold")
    indptr = [seq * pages for seq in range(batch + 1)]
    indices = list(range(batch * pages))
    last_page_len = [tokens - (pages - 1) * page_size] * batch
    return indptr, indices, last_page_len


def block_table(indptr: list[int], indices: list[int]) -> list[list[int]]:
    """The same page table dense: one row of page ids per sequence (for the MLA backends that take rows)."""
    return [indices[indptr[seq]:indptr[seq + 1]] for seq in range(len(indptr) - 1)]


def groups(s: Settings) -> list[Laid]:
    """Each layer group with the tokens a sequence keeps in it and its page table."""
    out = []
    for group in s.groups:
        kept = kept_tokens(group.tokens, s.retention)
        out.append(Laid(group, kept, page_table(s.batch, kept, s.page_size)))
    return out


def token_bytes(s: Settings) -> int:
    """KV bytes one token stores in one layer on this rank: KV heads × (K + V head dims), or MLA's latent + rope."""
    elements = s.mla.kv_lora_rank + s.mla.rope_dim if s.mla else s.num_kv_heads * (s.head_dim + s.head_dim_v)
    return elements * s.kv_element_bytes


def page_bytes(s: Settings) -> int:
    """KV bytes of one page of one layer on this rank."""
    return s.page_size * token_bytes(s)


def pool_bytes(s: Settings, layout: Sequence[Laid]) -> int:
    """The rank's KV pool: every page of every layer of every group."""
    return sum(laid.group.layers * len(laid.table[1]) for laid in layout) * page_bytes(s)


def kv_bytes_read(s: Settings, layout: Sequence[Laid]) -> int:
    """KV bytes one decode step reads on this rank: every layer, every sequence, the tokens it keeps."""
    return sum(laid.group.layers * s.batch * laid.kept for laid in layout) * token_bytes(s)


def measurements_csv(s: Settings, kv_bytes: float, kernel_s: float, about: str) -> str:
    """The measurements file kvplan calibrate reads: comment lines saying what each column is, the header
    line, one row."""
    row = (s.model, s.device, s.devices, s.tensor_parallel, s.weights, s.kv_dtype, s.batch, s.context, "",
           kv_bytes, f"{kernel_s * 1e3:.6g}", f"{kv_bytes / kernel_s:.0f}")
    lines = [f"# {note}" for note in (*CSV_NOTES, about)]
    return "\n".join([*lines, ",".join(COLUMNS), ",".join(str(x) for x in row)]) + "\n"


def unsupported(s: Settings) -> Optional[str]:
    """Why this plan cannot be measured with its wrapper, or None."""
    if s.mla is None and s.head_dim_v != s.head_dim:
        return f"the decode wrapper takes one head_dim for K and V; this model's are {s.head_dim} and {s.head_dim_v}"
    return None


# ------------------------------------------------------------------ the calls (pure Python until run)

@dataclass(frozen=True)
class Ref:
    """A value made at run time (the workspace, a page-table tensor, a wrapper), by its name."""

    name: str


@dataclass(frozen=True)
class Dtype:
    """torch.<name>."""

    name: str


@dataclass(frozen=True)
class Buffer:
    """An int32 index buffer on the GPU for the wrapper's CUDA-graph mode, of `length` elements."""

    length: int


Arg = Union[None, bool, int, float, str, Ref, Dtype, Buffer, "Call"]


@dataclass(frozen=True)
class Call:
    """One FlashInfer call: `function` is a dotted name (its first part a Ref's), then its arguments."""

    function: str
    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Arg], ...]


def _decode_calls(s: Settings, g: Group) -> tuple[Call, Call]:
    """The decode wrapper (MHA/GQA) of a group and its plan() over the group's page table."""
    make = Call("flashinfer.BatchDecodeWithPagedKVCacheWrapper", (Ref("workspace"),), (
        ("kv_layout", s.kv_layout), ("use_cuda_graph", s.use_cuda_graph), ("use_tensor_cores", s.use_tensor_cores),
        ("paged_kv_indptr_buffer", Buffer(s.batch + 1)), ("paged_kv_indices_buffer", Buffer(s.batch * g.pages)),
        ("paged_kv_last_page_len_buffer", Buffer(s.batch)), ("backend", s.backend)))
    # FlashInfer 0.7.4's plan() raises "fixed_split_size is only supported by tensor core decode" off that path
    split = g.fixed_split_size if s.use_tensor_cores else None
    plan = Call(f"{g.name}.plan", (Ref("indptr"), Ref("indices"), Ref("last_page_len")), (
        ("num_qo_heads", s.num_qo_heads), ("num_kv_heads", s.num_kv_heads), ("head_dim", s.head_dim),
        ("page_size", s.page_size), ("pos_encoding_mode", "NONE"), ("window_left", g.window_left),
        ("logits_soft_cap", s.logits_soft_cap), ("q_data_type", Dtype(s.q_torch_dtype)),
        ("kv_data_type", Dtype(s.kv_torch_dtype)), ("o_data_type", Dtype(s.o_torch_dtype)),
        ("fixed_split_size", split), ("disable_split_kv", g.disable_split_kv)))
    return make, plan


def _mla_calls(s: Settings, mla: Mla, g: Group) -> tuple[Call, Call]:
    """The MLA wrapper of a group and its plan() over the group's page table, as CSR and dense rows
    (MLAPlanMetadata.dual: what every backend takes in a CUDA graph)."""
    make = Call("flashinfer.mla.BatchMLAPagedAttentionWrapper", (Ref("workspace"),), (
        ("use_cuda_graph", s.use_cuda_graph), ("qo_indptr", Buffer(s.batch + 1)), ("kv_indptr", Buffer(s.batch + 1)),
        ("kv_indices", Buffer(s.batch * g.pages)), ("kv_len_arr", Buffer(s.batch)), ("backend", s.backend)))
    metadata = Call("flashinfer.mla.MLAPlanMetadata.dual",
                    (Ref("qo_indptr"), Ref("kv_indptr"), Ref("kv_indices"), Ref("kv_len_arr")),
                    (("cum_seq_lens_q", Ref("qo_indptr")), ("block_tables", Ref("block_tables")),
                     ("seq_lens", Ref("kv_len_arr"))))
    fp8 = (("scale_mode", "kv-per-tensor"),) if s.kv_element_bytes == 1 else ()  # run() passes unit scales
    plan = Call(f"{g.name}.plan", (), (
        ("metadata", metadata), ("num_heads", s.num_qo_heads), ("head_dim_ckv", mla.kv_lora_rank),
        ("head_dim_kpe", mla.rope_dim), ("page_size", s.page_size), ("causal", False), ("sm_scale", mla.sm_scale),
        ("q_data_type", Dtype(s.q_torch_dtype)), ("kv_data_type", Dtype(s.kv_torch_dtype)),
        ("query_layout", "split"), ("kv_cache_layout", "split"), *fp8))
    return make, plan


def group_calls(s: Settings, g: Group) -> tuple[Call, Call]:
    """A group's wrapper construction and its plan() call, with the plan's settings."""
    return _mla_calls(s, s.mla, g) if s.mla else _decode_calls(s, g)


def source(arg: Arg) -> str:
    """`arg` as Python."""
    if isinstance(arg, Ref):
        return arg.name
    if isinstance(arg, Dtype):
        return f"torch.{arg.name}"
    if isinstance(arg, Buffer):
        return f'torch.empty({arg.length}, dtype=torch.int32, device="cuda")'
    if isinstance(arg, Call):
        inner = [source(a) for a in arg.args] + [f"{k}={source(v)}" for k, v in arg.kwargs]
        return f"{arg.function}({', '.join(inner)})"
    return json.dumps(arg) if isinstance(arg, str) else repr(arg)


def calls(s: Settings) -> str:
    """Python a user can paste: each group's wrapper and plan() call, one argument a line."""
    tables = ("indptr, indices, last_page_len" if s.mla is None
              else "qo_indptr, kv_indptr, kv_indices, kv_len_arr, block_tables")
    out = ["# workspace: a zeroed uint8 tensor of workspace_bytes on the GPU; "
           f"{tables}: the group's page table on the GPU (int32)"]
    for g in s.groups:
        make, plan = group_calls(s, g)
        out.append(f"# {g.note}")
        for target, call in ((f"{g.name} = ", make), ("", plan)):
            inner = [source(a) for a in call.args] + [f"{k}={source(v)}" for k, v in call.kwargs]
            out += [f"{target}{call.function}(", *(f"    {x}," for x in inner), ")"]
    return "\n".join(out) + "\n"


def evaluate(arg: Arg, names: Mapping[str, object], torch: ModuleType) -> object:
    """`arg` made: a Ref looked up in `names`, a Buffer allocated, a Call called."""
    if isinstance(arg, Ref):
        return names[arg.name]
    if isinstance(arg, Dtype):
        return getattr(torch, arg.name)
    if isinstance(arg, Buffer):
        return torch.empty(arg.length, dtype=torch.int32, device="cuda")
    if isinstance(arg, Call):
        first, *rest = arg.function.split(".")
        function = names[first]
        for part in rest:
            function = getattr(function, part)
        if not callable(function):
            raise TypeError(f"{arg.function} is not callable")
        return function(*(evaluate(a, names, torch) for a in arg.args),
                        **{k: evaluate(v, names, torch) for k, v in arg.kwargs})
    return arg


# ------------------------------------------------------------------ the KV cache and one decode step (torch)

def fill(tensor: Tensor) -> None:
    """Synthetic values, N(0, 1); drawn in bf16 for fp8, which torch does not draw directly."""
    import torch

    if tensor.element_size() >= 2:
        tensor.normal_()
    else:
        tensor.copy_(torch.randn(tensor.shape, dtype=torch.bfloat16, device=tensor.device))


def kv_cache(s: Settings, layers: int, pages: int) -> tuple[Tensor, ...]:
    """A layer group's paged cache, synthetic. Decode: one tensor [layers, pages, 2 (K, V), page, KV heads,
    head dim] for NHD ([..., KV heads, page, head dim] for HND). MLA: ckv [layers, pages, page, kv_lora_rank]
    and kpe [layers, pages, page, rope dim]. Each [pages, ...] slice is one layer's."""
    import torch

    dtype = getattr(torch, s.kv_torch_dtype)
    shapes: list[tuple[int, ...]]
    if s.mla:
        shapes = [(layers, pages, s.page_size, s.mla.kv_lora_rank), (layers, pages, s.page_size, s.mla.rope_dim)]
    elif s.kv_layout == "NHD":
        shapes = [(layers, pages, 2, s.page_size, s.num_kv_heads, s.head_dim)]
    else:
        shapes = [(layers, pages, 2, s.num_kv_heads, s.page_size, s.head_dim)]
    caches = tuple(torch.empty(shape, dtype=dtype, device="cuda") for shape in shapes)
    for cache in caches:
        for layer in cache:
            fill(layer)
    return caches


def decode_step(s: Settings, wrappers: Sequence[Wrapper], layout: Sequence[Laid]) -> Callable[[], None]:
    """One decode step's attention on this rank: every layer of every group, one query token per sequence."""
    import torch

    dtype = getattr(torch, s.q_torch_dtype)
    caches = [kv_cache(s, laid.group.layers, len(laid.table[1])) for laid in layout]
    if s.mla is None:
        q = torch.randn(s.batch, s.num_qo_heads, s.head_dim, dtype=dtype, device="cuda")
        out = torch.empty_like(q)

        def step() -> None:
            for wrapper, (cache,) in zip(wrappers, caches):
                for layer in cache:
                    wrapper.run(q, layer, out=out)

        return step
    q_nope = torch.randn(s.batch, s.num_qo_heads, s.mla.kv_lora_rank, dtype=dtype, device="cuda")
    q_pe = torch.randn(s.batch, s.num_qo_heads, s.mla.rope_dim, dtype=dtype, device="cuda")
    latent = torch.empty_like(q_nope)
    scales = {"ckv_scale": 1.0, "kpe_scale": 1.0} if s.kv_element_bytes == 1 else {}

    def mla_step() -> None:
        for wrapper, (ckv, kpe) in zip(wrappers, caches):
            for layer in range(len(ckv)):
                wrapper.run(query=(q_nope, q_pe), kv_cache=(ckv[layer], kpe[layer]), out=latent, **scales)

    return mla_step


def device_tables(s: Settings, laid: Laid) -> dict[str, Tensor]:
    """The group's page table on the GPU as int32 tensors, by the names the calls give them."""
    import torch

    def gpu(values: Sequence[int] | Sequence[Sequence[int]]) -> Tensor:
        return torch.tensor(values, dtype=torch.int32, device="cuda")

    indptr, indices, last_page_len = laid.table
    if s.mla is None:
        return {"indptr": gpu(indptr), "indices": gpu(indices), "last_page_len": gpu(last_page_len)}
    return {"qo_indptr": gpu(list(range(s.batch + 1))), "kv_indptr": gpu(indptr), "kv_indices": gpu(indices),
            "kv_len_arr": gpu([laid.kept] * s.batch), "block_tables": gpu(block_table(indptr, indices))}


def plan_wrappers(s: Settings, workspace: Tensor, layout: Sequence[Laid]) -> list[Wrapper]:
    """One wrapper per layer group, made and planned by the calls `--calls` prints, over the group's table."""
    import flashinfer
    import torch

    wrappers = []
    for laid in layout:
        names: dict[str, object] = {"flashinfer": flashinfer, "workspace": workspace, **device_tables(s, laid)}
        make, plan = group_calls(s, laid.group)
        wrapper = evaluate(make, names, torch)
        names[laid.group.name] = wrapper
        evaluate(plan, names, torch)
        wrappers.append(wrapper)
    return wrappers


# ------------------------------------------------------------------ timing (torch, FlashInfer, a CUDA GPU)

def capture(step: Callable[[], None]) -> CUDAGraph:
    """One decode step as a CUDA graph, warmed up on a side stream first as torch.cuda.graph asks."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    torch.cuda.synchronize()
    return graph


def backend_of(wrappers: Sequence[object]) -> str:
    """The backend FlashInfer resolved for each wrapper, as far as it says."""
    names = []
    for wrapper in wrappers:
        try:
            name = getattr(wrapper, "resolved_backend", None)
        except Exception:  # a wrapper that cannot say
            name = None
        names.append(str(name or getattr(wrapper, "_planned_backend_name", None) or getattr(wrapper, "_backend", "?")))
    return ", ".join(sorted(set(names)))


def measure(s: Settings, layout: Sequence[Laid], warmup: int, iters: int) -> tuple[float, str]:
    """The median seconds of one decode step's attention on this rank, and the backend that ran it."""
    import torch

    torch.manual_seed(0)
    workspace = torch.zeros(s.workspace_bytes, dtype=torch.uint8, device="cuda")  # FlashInfer: 0 on first use
    wrappers = plan_wrappers(s, workspace, layout)
    graph = capture(decode_step(s, wrappers, layout))
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    events = []
    for i in range(warmup + iters):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        if i >= warmup:
            events.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(float(a.elapsed_time(b)) / 1e3 for a, b in events), backend_of(wrappers)


# ------------------------------------------------------------------ the command line

def fail(reason: str) -> int:
    print(f"flashinfer_decode.py: cannot measure: {reason}; nothing written", file=sys.stderr)
    return 2


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to 100000")
    return n


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad argument: one line and exit 2, as every other refusal here."""
        print(f"flashinfer_decode.py: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = Parser(description="Time this plan's decode attention on one GPU (one rank).")
    parser.add_argument("-o", "--output", default=OUTPUT, help=f"the measurements CSV to write [{OUTPUT}]")
    parser.add_argument("--iters", type=count, default=100, help="timed replays; the median is written [100]")
    parser.add_argument("--warmup", type=count, default=10, help="replays before the timed ones [10]")
    parser.add_argument("--calls", action="store_true",
                        help="print the wrapper calls with this plan's settings, to paste, and exit (no GPU needed)")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        s = settings()
    except SettingsError as error:
        return fail(str(error))
    if args.calls:
        print(calls(s), end="")
        return 0
    try:
        import torch
    except ImportError:
        return fail("torch is not installed (pip install torch)")
    try:
        import flashinfer
    except Exception as error:  # not installed, or an installed build that does not load
        return fail(f"FlashInfer does not import ({first_line(error)}; pip install flashinfer-python=={s.flashinfer})")
    if not torch.cuda.is_available():
        return fail("no CUDA GPU is visible to torch (torch.cuda.is_available() is False)")
    reason = unsupported(s)
    if reason:
        return fail(reason)
    return run(s, args, f"torch {torch.__version__}, FlashInfer {getattr(flashinfer, '__version__', '?')}")


def run(s: Settings, args: argparse.Namespace, versions: str) -> int:
    """Lay out the pool, refuse it where it does not fit the GPU, time it, write the CSV, say what it found."""
    import torch

    try:
        layout = groups(s)
    except ValueError as error:
        return fail(str(error))
    need, (free, _) = pool_bytes(s, layout) + s.workspace_bytes + L2_FLUSH_BYTES, torch.cuda.mem_get_info()
    if need > free:
        return fail(f"the rank's KV pool and buffers need {need / 2**30:.2f} GiB; the GPU has "
                    f"{free / 2**30:.2f} GiB free")
    try:
        kernel_s, backend = measure(s, layout, args.warmup, args.iters)
    except Exception as error:  # FlashInfer refusing a setting or failing to build a kernel, out of memory
        return fail(f"FlashInfer failed: {first_line(error)}")
    kv_bytes = kv_bytes_read(s, layout)
    about = (f"measured on {torch.cuda.get_device_name()} with {versions} (backend {backend}), CUDA graph, "
             f"median of {args.iters} replays after {args.warmup} warm-up")
    try:
        with open(args.output, "w", encoding="utf-8", newline="") as f:
            f.write(measurements_csv(s, kv_bytes, kernel_s, about))
    except OSError as error:
        return fail(f"cannot write {args.output}: {error.strerror}")
    print(f"attention per decode step on one rank: {kernel_s * 1e3:.4g} ms (measured, median of {args.iters})")
    print(f"KV read per step: {kv_bytes / 1e9:.4g} GB (derived); achieved {kv_bytes / kernel_s / 1e12:.4g} TB/s "
          "(measured)")
    print(f"kvplan's lower bound: {s.planned_kernel_s * 1e3:.4g} ms (derived); measured / bound "
          f"{kernel_s / s.planned_kernel_s:.3g}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
