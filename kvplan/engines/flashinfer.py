"""`kvplan emit --target flashinfer`: flashinfer_decode.py, a self-contained benchmark of the plan's decode
attention on one tensor-parallel rank, and flashinfer_kernel.json, the settings.

The settings and the numbers behind them are computed by kvplan/model/kernels/flashinfer.py (the plan's
`kernel`); this module writes them out. The emitted script builds the rank's paged KV cache and a page table
for the plan's batch and context, plans FlashInfer's wrapper with those settings (plan_wrappers(), the calls a
user can also paste), times one decode step's attention in a CUDA graph and writes a measurements CSV that
`kvplan calibrate` reads (docs/kernels.md § Measuring). It imports without torch: its page-table functions are
pure Python, and kvplan's tests import the emitted file and check them.

The calls follow FlashInfer 0.7.4's Python API (flashinfer/decode.py BatchDecodeWithPagedKVCacheWrapper;
flashinfer/mla/_batch_mla/_wrapper.py BatchMLAPagedAttentionWrapper, whose plan() takes MLAPlanMetadata).
"""

from __future__ import annotations

from typing import Optional

from kvplan.base import controls
from kvplan.base.evidence import Value, to_jsonable
from kvplan.base.units import fmt_bytes
from kvplan.catalog import DTYPES
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

#: The measurements file's columns: the ones `kvplan calibrate` documents, then what the kernel benchmark adds.
CSV_COLUMNS = ("model", "device", "devices", "tensor_parallel", "weights", "kv_dtype", "batch", "context", "itl_ms",
               "kv_bytes", "kernel_ms", "achieved_kv_bandwidth_Bps")

#: Bytes the benchmark zeroes before each timed replay so that no KV is still in L2: 256 MiB, the buffer
#: triton.testing.do_bench clears between runs (larger than any GPU's L2 in the catalog).
L2_FLUSH_BYTES = 256 * 1024 * 1024


def _py_float(x: Optional[float]) -> str:
    return "None" if x is None else repr(float(x))


def _group_name(kc: KernelConfig, g: LayerGroup) -> str:
    return "wrapper" if len(kc.groups) == 1 else f"wrapper_{'full' if g.window is None else f'w{g.window}'}"


def _group_comment(kc: KernelConfig, g: LayerGroup) -> str:
    what = "full attention" if g.window is None else f"sliding window {g.window:,}"
    fa = f"FlashAttention-3 would pick {g.fa_split.splits} split{'s' * (g.fa_split.splits > 1)}"
    if kc.mla:
        return (f"    # {g.layers} layers, {what}. The MLA wrapper schedules its own KV splits; the wave model "
                f"gives {g.split.splits} ({g.split.reason}); {fa}")
    return f"    # {g.layers} layers, {what}: {g.split.reason}; {fa}"


def _mla_group(kc: KernelConfig, g: LayerGroup, i: int) -> list[str]:
    name = _group_name(kc, g)
    scale = ['        scale_mode="kv-per-tensor",  # fp8 KV: run() passes unit ckv/kpe scales']
    return [
        f"    qo_indptr, kv_indptr, kv_indices, kv_len_arr, block_tables = mla_tables(layout[{i}])",
        f"    {name} = flashinfer.mla.BatchMLAPagedAttentionWrapper(",
        "        workspace, use_cuda_graph=True,",
        "        qo_indptr=torch.empty(BATCH + 1, dtype=torch.int32, device=\"cuda\"),",
        "        kv_indptr=torch.empty(BATCH + 1, dtype=torch.int32, device=\"cuda\"),",
        f"        kv_indices=torch.empty(BATCH * {g.pages}, dtype=torch.int32, device=\"cuda\"),",
        "        kv_len_arr=torch.empty(BATCH, dtype=torch.int32, device=\"cuda\"),",
        f'        backend="{kc.backend}",',
        "    )",
        f"    {name}.plan(",
        "        metadata=flashinfer.mla.MLAPlanMetadata.dual(  # CSR and dense: what every backend takes in a graph",
        "            qo_indptr, kv_indptr, kv_indices, kv_len_arr,",
        "            cum_seq_lens_q=qo_indptr, block_tables=block_tables, seq_lens=kv_len_arr,",
        "        ),",
        f"        num_heads={kc.num_qo_heads}, head_dim_ckv={kc.kv_lora_rank}, head_dim_kpe={kc.rope_dim},",
        f"        page_size={kc.page_size}, causal=False,",
        "        sm_scale=SM_SCALE,",
        f"        q_data_type={kc.q_data_type}, kv_data_type={kc.kv_data_type},",
        '        query_layout="split", kv_cache_layout="split",',
        *(scale if kc.kv_data_type == KV_TORCH["fp8"] else []),
        "    )",
        f"    wrappers.append({name})",
    ]


def _decode_group(kc: KernelConfig, g: LayerGroup, i: int) -> list[str]:
    name = _group_name(kc, g)
    split = [f"        fixed_split_size={g.fixed_split_size}, disable_split_kv={g.disable_split_kv},"]
    if not kc.use_tensor_cores:   # FlashInfer's plan() raises for a split size off the tensor-core path
        split = [f"        # fixed_split_size is for the tensor-core path only (the wave model's: {g.fixed_split_size} "
                 "pages)",
                 f"        fixed_split_size=None, disable_split_kv={g.disable_split_kv},"]
    return [
        f"    indptr, indices, last_page_len = device_table(layout[{i}][\"table\"])",
        f"    {name} = flashinfer.BatchDecodeWithPagedKVCacheWrapper(",
        f'        workspace, kv_layout="{kc.kv_layout}", use_cuda_graph={kc.use_cuda_graph}, '
        f"use_tensor_cores={kc.use_tensor_cores},",
        "        paged_kv_indptr_buffer=torch.empty(BATCH + 1, dtype=torch.int32, device=\"cuda\"),",
        f"        paged_kv_indices_buffer=torch.empty(BATCH * {g.pages}, dtype=torch.int32, device=\"cuda\"),",
        "        paged_kv_last_page_len_buffer=torch.empty(BATCH, dtype=torch.int32, device=\"cuda\"),",
        f'        backend="{kc.backend}",',
        "    )",
        f"    {name}.plan(",
        "        indptr, indices, last_page_len,",
        f"        num_qo_heads={kc.num_qo_heads}, num_kv_heads={kc.num_kv_heads}, head_dim={kc.head_dim}, "
        f"page_size={kc.page_size},",
        f'        pos_encoding_mode="NONE", window_left={g.window_left}, '
        f'logits_soft_cap={_py_float(kc.logits_soft_cap)},',
        f"        q_data_type={kc.q_data_type}, kv_data_type={kc.kv_data_type}, o_data_type={kc.o_data_type},",
        *split,
        "    )",
        f"    wrappers.append({name})",
    ]


def plan_call(kc: KernelConfig) -> str:
    """`plan_wrappers()` of the emitted benchmark: one wrapper per layer group, constructed and planned with the
    plan's settings (CUDA-graph buffers sized for the plan's batch), as Python a user can also paste."""
    out = ["def plan_wrappers(workspace, layout):",
           '    """One wrapper per layer group, planned with the plan\'s settings over the group\'s page table."""',
           "    import flashinfer",
           "    import torch",
           "",
           "    wrappers = []"]
    for i, g in enumerate(kc.groups):
        out += ["", _group_comment(kc, g)]
        out += _mla_group(kc, g, i) if kc.mla else _decode_group(kc, g, i)
    return "\n".join(out + ["    return wrappers"]) + "\n"


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

#: The emitted script's docstring: what it does and how to run it.
_DOC = r'''"""A benchmark of one tensor-parallel rank's decode attention under this plan, self-contained.

    python flashinfer_decode.py [-o flashinfer_measured.csv] [--iters 100] [--warmup 10]

It builds the rank's paged KV cache (synthetic values; the plan's page size, KV heads per rank,
head dim, dtype and layout), a page table for the plan's batch and context, plans FlashInfer's
decode wrapper with the settings in plan_wrappers() below, captures one decode step's attention
(every layer on the rank) in a CUDA graph as the engines do, replays it (warm-up, then timed
replays between CUDA events, the L2 cache flushed before each) and writes the median to a
measurements CSV that `kvplan calibrate` reads; the file's comment lines say what each column is.

It needs an NVIDIA GPU, torch and flashinfer-python; without one of them it exits 2 with one
line saying which. The page-table functions need neither: kvplan's tests import this file
(torch absent) and check them.
"""

import argparse
import math
import statistics
import sys
'''

#: What the measurements file's comment lines say about its columns (docs/kernels.md § Measuring has the same).
_CSV_NOTES = (
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

#: The page table and the byte counts: pure Python (kvplan's tests import the emitted file without torch).
_TABLE = r'''
# ------------------------------------------------------------------ the page table (pure Python)

def kept_tokens(tokens, retention):
    """Tokens a sequence keeps in a layer that reads `tokens`: the plan's retention of them, whole, at least 1."""
    return max(1, math.ceil(round(tokens * retention, 6)))


def page_table(batch, tokens, page_size):
    """FlashInfer's page table for `batch` sequences of `tokens` tokens in pages of `page_size` tokens:
    indptr (batch + 1 offsets into indices), indices (page ids in the pool) and last_page_len (tokens in
    each sequence's last page, 1..page_size). Sequence i holds pool pages indices[indptr[i]:indptr[i + 1]],
    in order, as a batch prefilled together gets them. Every layer of a group reads the same table over
    its own pool, as the engines do."""
    if min(batch, tokens, page_size) < 1:
        raise ValueError(f"batch, tokens and page_size must be at least 1, not {batch}, {tokens}, {page_size}")
    pages = -(-tokens // page_size)
    indptr = [seq * pages for seq in range(batch + 1)]
    indices = list(range(batch * pages))
    last_page_len = [tokens - (pages - 1) * page_size] * batch
    return indptr, indices, last_page_len


def block_table(indptr, indices):
    """The same page table dense: one row of page ids per sequence (for the MLA backends that take rows)."""
    return [indices[indptr[seq]:indptr[seq + 1]] for seq in range(len(indptr) - 1)]


def groups():
    """Each layer group with the tokens a sequence keeps in it and its page table."""
    out = []
    for group in GROUPS:
        kept = kept_tokens(group["tokens"], RETENTION)
        out.append({**group, "kept": kept, "table": page_table(BATCH, kept, PAGE_SIZE)})
    return out


def token_bytes():
    """KV bytes one token stores in one layer on this rank."""
    return TOKEN_ELEMENTS * KV_ELEMENT_BYTES


def page_bytes():
    """KV bytes of one page of one layer on this rank."""
    return PAGE_SIZE * token_bytes()


def pool_bytes(layout):
    """The rank's KV pool: every page of every layer of every group."""
    return sum(group["layers"] * len(group["table"][1]) for group in layout) * page_bytes()


def kv_bytes_read(layout):
    """KV bytes one decode step reads on this rank: every layer, every sequence, the tokens it keeps."""
    return sum(group["layers"] * BATCH * group["kept"] for group in layout) * token_bytes()


def measurements_csv(kv_bytes, kernel_s, about):
    """The measurements file kvplan calibrate reads: comment lines saying what each column is, the header
    line, one row."""
    row = (MODEL, DEVICE, DEVICES, TENSOR_PARALLEL, WEIGHTS, KV_DTYPE, BATCH, CONTEXT, "",
           kv_bytes, f"{kernel_s * 1e3:.6g}", f"{kv_bytes / kernel_s:.0f}")
    lines = [f"# {note}" for note in (*CSV_NOTES, about)]
    return "\n".join([*lines, ",".join(COLUMNS), ",".join(str(x) for x in row)]) + "\n"
'''

#: The KV cache, the query and one decode step of the decode wrapper (MHA/GQA).
_DECODE_STEP = r'''
# ------------------------------------------------------------------ the KV cache and one decode step

def kv_cache(layers, pages):
    """A layer group's paged KV cache, synthetic: [layers, pages, 2 (K, V), page, KV heads, head dim] for
    the NHD layout ([..., KV heads, page, head dim] for HND), one [pages, ...] tensor per layer."""
    import torch

    if KV_LAYOUT == "NHD":
        shape = (layers, pages, 2, PAGE_SIZE, NUM_KV_HEADS, HEAD_DIM)
    else:
        shape = (layers, pages, 2, NUM_KV_HEADS, PAGE_SIZE, HEAD_DIM)
    cache = torch.empty(shape, dtype=getattr(torch, KV_TORCH_DTYPE), device="cuda")
    for layer in cache:
        fill(layer)
    return cache


def decode_step(wrappers, layout):
    """One decode step's attention on this rank: every layer of every group, one query token per sequence."""
    import torch

    q = torch.randn(BATCH, NUM_QO_HEADS, HEAD_DIM, dtype=getattr(torch, Q_TORCH_DTYPE), device="cuda")
    out = torch.empty_like(q)
    caches = [kv_cache(group["layers"], len(group["table"][1])) for group in layout]

    def step():
        for wrapper, cache in zip(wrappers, caches):
            for layer in cache:
                wrapper.run(q, layer, out=out)

    return step


def device_table(table):
    """A page table on the GPU, as int32 tensors."""
    import torch

    return tuple(torch.tensor(column, dtype=torch.int32, device="cuda") for column in table)


def unsupported():
    """Why this plan cannot be measured with the decode wrapper, or None."""
    if HEAD_DIM_V != HEAD_DIM:
        return f"the decode wrapper takes one head_dim for K and V; this model's are {HEAD_DIM} and {HEAD_DIM_V}"
    return None
'''

#: The same for the MLA wrapper (DeepSeek-V2/V3): the latent cache, split into its no-rope and rope parts.
_MLA_STEP = r'''
# ------------------------------------------------------------------ the latent cache and one decode step

def kv_cache(layers, pages):
    """A layer group's paged latent cache, synthetic: ckv [layers, pages, page, kv_lora_rank] and
    kpe [layers, pages, page, rope dim], one [pages, ...] tensor of each per layer."""
    import torch

    dtype = getattr(torch, KV_TORCH_DTYPE)
    ckv = torch.empty((layers, pages, PAGE_SIZE, KV_LORA_RANK), dtype=dtype, device="cuda")
    kpe = torch.empty((layers, pages, PAGE_SIZE, ROPE_DIM), dtype=dtype, device="cuda")
    for layer in (*ckv, *kpe):
        fill(layer)
    return ckv, kpe


def decode_step(wrappers, layout):
    """One decode step's attention on this rank: every layer of every group, one query token per sequence."""
    import torch

    dtype = getattr(torch, Q_TORCH_DTYPE)
    q_nope = torch.randn(BATCH, NUM_QO_HEADS, KV_LORA_RANK, dtype=dtype, device="cuda")
    q_pe = torch.randn(BATCH, NUM_QO_HEADS, ROPE_DIM, dtype=dtype, device="cuda")
    out = torch.empty_like(q_nope)
    caches = [kv_cache(group["layers"], len(group["table"][1])) for group in layout]
    scales = {"ckv_scale": 1.0, "kpe_scale": 1.0} if KV_ELEMENT_BYTES == 1 else {}

    def step():
        for wrapper, (ckv, kpe) in zip(wrappers, caches):
            for layer in range(len(ckv)):
                wrapper.run(query=(q_nope, q_pe), kv_cache=(ckv[layer], kpe[layer]), out=out, **scales)

    return step


def mla_tables(group):
    """The MLA wrapper's metadata on the GPU: query offsets (one token a sequence), the page table as CSR
    (kv_indptr, kv_indices), the KV lengths, and the same table dense (block_tables)."""
    import torch

    indptr, indices, _ = group["table"]

    def gpu(values):
        return torch.tensor(values, dtype=torch.int32, device="cuda")

    return (gpu(list(range(BATCH + 1))), gpu(indptr), gpu(indices), gpu([group["kept"]] * BATCH),
            gpu(block_table(indptr, indices)))


def unsupported():
    """Why this plan cannot be measured with the MLA wrapper, or None."""
    return None
'''

#: Timing and the command line: needs torch, FlashInfer and a CUDA GPU only inside main().
_MAIN = r'''
# ------------------------------------------------------------------ timing (torch, FlashInfer, a CUDA GPU)

def fill(tensor):
    """Synthetic values, N(0, 1); drawn in bf16 for fp8, which torch does not draw directly."""
    import torch

    if tensor.element_size() >= 2:
        tensor.normal_()
    else:
        tensor.copy_(torch.randn(tensor.shape, dtype=torch.bfloat16, device=tensor.device))


def capture(step):
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


def backend_of(wrappers):
    """The backend FlashInfer resolved for each wrapper, as far as it says."""
    names = []
    for wrapper in wrappers:
        try:
            name = getattr(wrapper, "resolved_backend", None)
        except Exception:  # a wrapper that cannot say
            name = None
        names.append(str(name or getattr(wrapper, "_planned_backend_name", None) or getattr(wrapper, "_backend", "?")))
    return ", ".join(sorted(set(names)))


def measure(layout, warmup, iters):
    """The median seconds of one decode step's attention on this rank, and the backend that ran it."""
    import torch

    torch.manual_seed(0)
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")  # FlashInfer: 0 on first use
    wrappers = plan_wrappers(workspace, layout)
    graph = capture(decode_step(wrappers, layout))
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
    return statistics.median(s.elapsed_time(e) / 1e3 for s, e in events), backend_of(wrappers)


def fail(reason):
    print(f"flashinfer_decode.py: cannot measure: {reason}; nothing written", file=sys.stderr)
    return 2


def first_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def count(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to 100000")
    return n


class Parser(argparse.ArgumentParser):
    def error(self, message):
        """A bad argument: one line and exit 2, as every other refusal here."""
        print(f"flashinfer_decode.py: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    parser = Parser(description="Time this plan's decode attention on one GPU (one rank).")
    parser.add_argument("-o", "--output", default=OUTPUT, help=f"the measurements CSV to write [{OUTPUT}]")
    parser.add_argument("--iters", type=count, default=100, help="timed replays; the median is written [100]")
    parser.add_argument("--warmup", type=count, default=10, help="replays before the timed ones [10]")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        return fail("torch is not installed (pip install torch)")
    try:
        import flashinfer
    except Exception as error:  # not installed, or an installed build that does not load
        return fail(f"FlashInfer does not import ({first_line(error)}; pip install flashinfer-python=={FLASHINFER})")
    if not torch.cuda.is_available():
        return fail("no CUDA GPU is visible to torch (torch.cuda.is_available() is False)")
    if unsupported():
        return fail(unsupported())
    layout = groups()
    need, (free, _) = pool_bytes(layout) + WORKSPACE_BYTES + L2_FLUSH_BYTES, torch.cuda.mem_get_info()
    if need > free:
        return fail(f"the rank's KV pool and buffers need {need / 2**30:.2f} GiB; the GPU has "
                    f"{free / 2**30:.2f} GiB free")
    try:
        kernel_s, backend = measure(layout, args.warmup, args.iters)
    except Exception as error:  # FlashInfer refusing a setting or failing to build a kernel, out of memory
        return fail(f"FlashInfer failed: {first_line(error)}")
    kv_bytes = kv_bytes_read(layout)
    about = (f"measured on {torch.cuda.get_device_name()} with torch {torch.__version__}, FlashInfer "
             f"{getattr(flashinfer, '__version__', '?')} (backend {backend}), CUDA graph, median of "
             f"{args.iters} replays after {args.warmup} warm-up")
    try:
        with open(args.output, "w", encoding="utf-8", newline="") as f:
            f.write(measurements_csv(kv_bytes, kernel_s, about))
    except OSError as error:
        return fail(f"cannot write {args.output}: {error.strerror}")
    print(f"attention per decode step on one rank: {kernel_s * 1e3:.4g} ms (measured, median of {args.iters})")
    print(f"KV read per step: {kv_bytes / 1e9:.4g} GB (derived); achieved {kv_bytes / kernel_s / 1e12:.4g} TB/s "
          "(measured)")
    print(f"kvplan's lower bound: {PLANNED_KERNEL_S * 1e3:.4g} ms (derived); measured / bound "
          f"{kernel_s / PLANNED_KERNEL_S:.3g}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _layers_on_rank(layers: int, pp: int) -> int:
    """Layers of a group one rank holds: ⌈layers / pp⌉, the most loaded pipeline stage's (kvplan.model.memory)."""
    return -(-layers // pp)


def _str(text: str) -> str:
    """A Python string literal in double quotes (JSON's escapes are Python's), no control or bidirectional-formatting
    character left as it is (kvplan.base.controls)."""
    return controls.dumps(text)


def _shape(req: EmitRequest, kc: KernelConfig) -> list[str]:
    """The per-token shape on the rank (MLA: the latent widths and the softmax scale) and the layer groups."""
    if kc.mla:
        elements = [f"TOKEN_ELEMENTS = {kc.kv_lora_rank} + {kc.rope_dim}  # per token per layer: latent + rope",
                    f"KV_LORA_RANK = {kc.kv_lora_rank}",
                    f"ROPE_DIM = {kc.rope_dim}",
                    f"SM_SCALE = 1 / math.sqrt({req.plan.scenario.model.head_dim})  # 1/sqrt(qk_nope + qk_rope head "
                    "dim); the checkpoint's rope mscale² is left out: it does not change the time"]
    else:
        elements = [f"TOKEN_ELEMENTS = {kc.num_kv_heads} * ({kc.head_dim} + {kc.head_dim_v})  "
                    "# per token per layer on the rank: KV heads × (K + V head dims)"]
    groups = [f'    {{"window": {g.window!r}, "layers": {_layers_on_rank(g.layers, kc.pp)}, '
              f'"tokens": {g.tokens_read}, "window_left": {g.window_left}}},' for g in kc.groups]
    return [*elements,
            "#: Layer groups, one wrapper and one plan() each: layers on this rank (⌈layers / pipeline stages⌉),",
            "#: tokens a sequence reads in each (min(context, window)) and FlashInfer's window_left.",
            "GROUPS = (", *groups, ")"]


def _constants(req: EmitRequest, kc: KernelConfig) -> list[str]:
    """The plan's numbers the benchmark reads, as module constants (edit them to try other settings)."""
    p = req.plan
    sc, m = p.scenario, p.scenario.model
    kv_id = p.kv_dtype.id if kc.kv_dtype_supported else next(k for k, v in KV_TORCH.items() if v == kc.kv_data_type)
    width = DTYPES[kv_id].width
    return [
        "# ------------------------------------------------------------------ the plan (written by kvplan)",
        "",
        f"PLAN = {_str(p.digest)}",
        f"MODEL = {_str(m.id)}",
        f"DEVICE = {_str(sc.device.id)}  # the plan's device; the CSV names the GPU it ran on too",
        f"DEVICES = {int(p.n_devices)}",
        f"TENSOR_PARALLEL = {kc.tp}",
        f"PIPELINE_PARALLEL = {kc.pp}",
        f"WEIGHTS = {_str(sc.weights.id)}",
        f"PLAN_KV_DTYPE = {_str(p.kv_dtype.id)}",
        f"KV_DTYPE = {_str(kv_id)}  # what the kernel reads: " + ("the plan's" if kc.kv_dtype_supported
                                                             else "the nearest dtype FlashInfer takes"),
        f"KV_TORCH_DTYPE = {_str(kc.kv_data_type.removeprefix('torch.'))}",
        f"Q_TORCH_DTYPE = {_str(kc.q_data_type.removeprefix('torch.'))}",
        f"KV_ELEMENT_BYTES = {width:g}",
        f"BATCH = {int(sc.batch)}",
        f"CONTEXT = {int(sc.context)}  # tokens per sequence",
        f"RETENTION = {float(p.retention)!r}  # the fraction of its tokens a sequence keeps",
        f"PAGE_SIZE = {kc.page_size}  # tokens per page",
        f"KV_LAYOUT = {_str(kc.kv_layout)}",
        f"NUM_QO_HEADS = {kc.num_qo_heads}  # on this rank",
        f"NUM_KV_HEADS = {kc.num_kv_heads}  # on this rank",
        f"HEAD_DIM = {kc.head_dim}",
        f"HEAD_DIM_V = {kc.head_dim_v}",
        *_shape(req, kc),
        f"PLANNED_KV_BYTES = {kc.kv_bytes.value:.0f}  # B, kvplan's KV read per rank per step (derived)",
        f"PLANNED_KERNEL_S = {kc.kernel_time.value!r}  # s, kvplan's lower bound on this kernel time (derived)",
        f"WORKSPACE_BYTES = {WORKSPACE_BYTES // 2**20} * 1024 * 1024  # assumed: what FlashInfer's documentation "
        "examples allocate",
        f"L2_FLUSH_BYTES = {L2_FLUSH_BYTES // 2**20} * 1024 * 1024  # zeroed before each timed replay, as "
        "triton.testing.do_bench does",
        f"FLASHINFER = {_str(VERSION)}  # the version these calls are written for",
        'OUTPUT = "flashinfer_measured.csv"',
        "COLUMNS = (",
        *(f"    {', '.join(_str(c) for c in CSV_COLUMNS[i:i + 6])}," for i in range(0, len(CSV_COLUMNS), 6)),
        ")",
        "CSV_NOTES = (",
        *(f"    {_str(note)}," for note in _CSV_NOTES),
        ")",
    ]


def benchmark_script(req: EmitRequest, kc: KernelConfig) -> str:
    """flashinfer_decode.py: the header and settings as comments, the plan's constants, the pure page-table
    functions, the cache and decode step, plan_wrappers() (the plan's wrapper calls) and the timed main()."""
    top = "\n".join(["#!/usr/bin/env python3", *comment_lines([header(req, LABEL), *_summary(kc)]), _DOC])
    sections = [top, "\n".join(_constants(req, kc)), _TABLE, _MLA_STEP if kc.mla else _DECODE_STEP, plan_call(kc),
                _MAIN]
    return "\n\n\n".join(part.strip("\n") for part in sections) + "\n"


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
