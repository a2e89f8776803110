"""What each serving engine can run, one record per engine (facts: shared/reference/engines.md).

`ENGINES` is the one table of engine facts. Everything that names an engine is
derived from it: the planner's engine constraints (kv dtypes, page sizes,
eviction, pipeline stages), the language's `engine = ...` words and their
synonyms, the CLI's `import --from` choices, the emit targets' capability
tables (kvplan/engines/<id>.py build their `Backend` from the record) and the
importer's names, flags and defaults. The engine modules hold only what is code:
how a plan is written out and how a configuration is read back.

Adding an engine is this record plus one module kvplan/engines/<id>.py
(docs/architecture.md). `ENGINES` is a plain literal dict so that a test can
register a toy engine with `monkeypatch.setitem(ENGINES, "toy", record)`; every
reader looks it up at call time.
"""

from __future__ import annotations

from typing import Mapping, Optional

from kvplan.base.errors import CatalogError
from kvplan.base.records import field, record
from kvplan.catalog import DTYPES, Device, Model, suggest


@record
class Flags:
    """The names under which an engine takes the settings kvplan writes and reads back (its CLI flags, or
    for TensorRT-LLM its YAML keys)."""

    kv_dtype: str
    block: str
    batch: str
    context: str
    tp: str
    pp: str
    #: the flags (or keys) its launch writes that carry no setting of kvplan.catalog.settings: the model path,
    #: the config file, the KV pool size its sizing writes. With the table's carriers, the engine's flag set.
    own: tuple[str, ...] = ()


@record
class PageScale:
    """Bytes an engine's KV page stores beside each token-head's K values (and again beside its V values): a
    fixed number per token-head and side (`per_side`: one fp32 scale is 4 B) and a share per value
    (`per_value`: one FP8 scale per 16 values is 1/16 B), with the engine source that says so."""

    per_side: float = 0.0
    per_value: float = 0.0
    source: str = ""

    def bytes_per_token_head(self, head_size: int, head_size_v: int) -> float:
        """Scale bytes per token and KV head, K and V together."""
        return 2 * self.per_side + (head_size + head_size_v) * self.per_value


@record
class MemoryDefaults:
    """How an engine sizes its KV pool from a memory fraction, and kvplan's assumed figures for the terms the
    engine measures at start-up (each overridable on `kvplan emit`; docs/engine-memory.md)."""

    fraction: float                # the engine's default memory fraction (vLLM --gpu-memory-utilization)
    fraction_source: str
    cudagraph: float               # bytes per GPU, assumed: CUDA-graph memory the engine subtracts
    activation_per_token: float    # bytes per batched token, assumed: the activation peak of the profile run


#: "No engine constraint": `engine = any` names no flags.
NO_FLAGS = Flags("", "", "", "", "", "")

#: An engine's KV dtype name as the importer reads it → (the kvplan dtype, or None where no kvplan dtype has
#: its width; why, when the mapping is not one-to-one).
KvReads = Mapping[str, tuple[Optional[str], str]]

_AUTO = ("bf16", "auto keeps the model's dtype: bf16 assumed")


@record
class KvRequires:
    """Where an engine stores KV in one of its dtypes only on some devices or for some models: each condition
    is the engine's own check, held as its refusal in its words with the file and version it comes from (empty:
    no such condition). `kv_refusal` reads it; the planner never picks what it refuses, and emit plans each
    target under it (docs/cli-emit.md)."""

    fp4_hardware: str = ""        # only on a device with FP4 formats in hardware (Device.fp4: SM100/SM120)
    no_mla: str = ""              # refused for models with multi-head latent attention


@record
class BlackwellPages:
    """The page sizes an engine's default attention backend takes on NVIDIA Blackwell (an NVIDIA device with FP4
    formats in hardware, Device.fp4: SM100/SM120), for MHA and for MLA models, and the page the engine changes
    any other `--page-size` (its own default among them) to there, with the engine source that says so.
    `block_sizes_for` and `default_block_for` read it: the planner pages a plan made for the engine in sizes it
    runs, and emit writes that page unchanged."""

    mha: tuple[int, ...]
    mla: tuple[int, ...]
    forced: int                    # what any other page size becomes on Blackwell
    source: str


@record
class Engine:
    id: str
    name: str                      # as configs and messages name it: "vLLM"
    version: str                   # the version whose flag names kvplan writes: "0.33.0", "main"
    described: str                 # the engine and version in a sentence: "TensorRT-LLM (main, > 1.2.1)"
    kv_names: Mapping[str, str]    # kvplan dtype id -> the engine's name for it (written by emit); the
                                   # keys, in this order, are the dtypes the engine can store KV in
    eviction: bool                 # token eviction inside a request
    default_block: int             # tokens per KV page by default
    block_sizes: tuple[int, ...]   # page sizes the default attention backends accept
    prefix_caching: bool           # whether the engine can share prefix pages (on by default when it can)
    host_tier: bool                # native host-memory KV tier
    source: str
    pipeline: bool = True          # pipeline-parallel stages
    tiers: tuple[str, ...] = ()    # second tiers its emitted config can hold (natively or through LMCache)
    lmcache: bool = False          # LMCache loads into it (engines.md § LMCache)
    kv_reads: KvReads = field(factory=dict)   # its KV dtype names read back (kvplan import)
    flags: Flags = NO_FLAGS
    aliases: tuple[str, ...] = ()  # words people write for it in a spec (`trt-llm`), offered as suggestions
    page_scales: Mapping[str, PageScale] = field(factory=dict)  # scale bytes in its KV page, per dtype id
    memory: Optional[MemoryDefaults] = None  # its fill-mode sizing (kvplan emit --sizing fill)
    #: kvplan dtype id -> the device or model condition under which the engine stores KV in it (absent: always)
    kv_requires: Mapping[str, KvRequires] = field(factory=dict)
    #: the page sizes its default attention backends take on NVIDIA Blackwell, where they differ (absent: the same)
    blackwell_pages: Optional[BlackwellPages] = None
    #: the flag of its launch that sets the data-parallel size (replicas in one command), None where kvplan writes
    #: none: the planner may serve a rate with replicas of a smaller layout only where it is set (docs/service.md)
    data_parallel: Optional[str] = None
    #: speculative methods it runs (SPEC §15): kvplan's method -> the engine's own name for it, as emit writes it
    speculative: Mapping[str, str] = field(factory=dict)
    #: how its launch runs attention data-parallel for a mixture-of-experts model (each attention group holds only
    #: its own sequences' KV, the experts stay sharded over every rank; SPEC §14), None where it does not: the
    #: layout search tries attention groups only where it is set (docs/planner.md, "Attention data parallelism")
    attention_dp: Optional[str] = None
    #: how its launch splits a mixture-of-experts model's routed experts over the ranks (each MoE layer an all-to-all
    #: dispatch and combine, SPEC §14), None where kvplan writes none: the layout search tries it only where set
    expert_parallel: Optional[str] = None

    @property
    def kv_dtypes(self) -> tuple[str, ...]:
        """The kvplan dtype ids the engine can store KV in, in the search's order."""
        return tuple(self.kv_names)

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


GiB = 2**30
KiB = 2**10

#: vLLM 0.33.0 (vllm/v1/attention/backends/triton_attn.py:308-319, the only backend that lists the
#: *_per_token_head dtypes): the page holds (data + one fp32 scale) per K/V side and token-head; nvfp4
#: (flashinfer.py:558-571, utils/torch_utils.py:542-544) stores d/2 data bytes and d/16 FP8 scale bytes per side.
_VLLM_SCALES = {
    "int8": PageScale(4.0, 0.0, "vllm/v1/attention/backends/triton_attn.py:308-319 (vLLM 0.33.0): one fp32 scale "
                                "per token-head and side"),
    "int4": PageScale(4.0, 0.0, "vllm/v1/attention/backends/triton_attn.py:308-319 (vLLM 0.33.0): d/2 packed bytes "
                                "and one fp32 scale per token-head and side"),
    "fp4": PageScale(0.0, 1 / 16, "vllm/v1/attention/backends/flashinfer.py:558-571, utils/torch_utils.py:542-544 "
                                  "(vLLM 0.33.0): an FP8 scale per 16 values"),
}

#: SGLang 0.5.23 nvfp4 (layers/quantization/fp4_kv_cache_quant_method.py:744-768, NVFP4KVCacheMethod.compute_cell_size
#: on SM100; MLA: model_executor/pool_configurator.py:387-398): d/2 FP4 data bytes and d/16 FP8 scale bytes per side.
_SGLANG_SCALES = {
    "fp4": PageScale(0.0, 1 / 16, "sglang/srt/layers/quantization/fp4_kv_cache_quant_method.py:744-768 (SGLang "
                                  "0.5.23): an FP8 scale per 16 values"),
}

#: TensorRT-LLM nvfp4 (tensorrt_llm/_torch/pyexecutor/resource_manager.py, KVCacheManager.get_cache_size_per_token,
#: commit d2a5560abdadfbdf496ce057696103e0509a71ed): ceil(x/2) + ceil(x/16) bytes for x values.
_TRTLLM_SCALES = {
    "fp4": PageScale(0.0, 1 / 16, "tensorrt_llm/_torch/pyexecutor/resource_manager.py get_cache_size_per_token "
                                  "(commit d2a5560): an FP8 scale per 16 values"),
}

_ALL_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4", "int2")

#: The one table of engines; `any` is "no engine constraint". A literal dict: see the module docstring.
ENGINES: dict[str, Engine] = {
    e.id: e
    for e in (
        Engine("any", "any engine", "-", "no engine constraint", {d: d for d in _ALL_DTYPES}, True, 16,
               (1, 8, 16, 32, 64, 128), True, True, "no engine constraint",
               speculative={"eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram"}),
        Engine("vllm", "vLLM", "0.33.0", "vLLM 0.33.0",
               # bf16 is written `bfloat16`, not `auto`: auto follows the checkpoint's dtype, which the plan does
               # not control (an FP8 checkpoint's auto need not be 16-bit); the explicit name is the plan's choice.
               {"bf16": "bfloat16", "fp16": "float16",
                "fp8": "fp8",                     # = fp8_e4m3
                "int8": "int8_per_token_head",    # plain `int8` is rejected
                "int4": "int4_per_token_head",    # plain `int4` is rejected
                "fp4": "nvfp4"},
               False, 16, (16, 32, 64, 128), True, True,
               "docs/engines.md: --kv-cache-dtype (int8/int4 as *_per_token_head, nvfp4; no 2-bit); "
               "--block-size default 16, FLASH_ATTN multiple of 16; no token eviction",
               tiers=("host", "ssd", "remote"), lmcache=True,
               kv_requires={
                   "fp4": KvRequires(
                       no_mla="\"nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) backends\" "
                              "(vllm/config/vllm.py:3422-3437, VllmConfig.validate_nvfp4_kv_cache_with_mla)"),
                   **{d: KvRequires(no_mla=f"{d}_per_token_head runs on TRITON_ATTN only; no MLA backend lists it "
                                           "(vllm/v1/attention/backends/mla/*.py supported_kv_cache_dtypes: auto, "
                                           "float16, bfloat16, fp8, fp8_e4m3)")
                      for d in ("int8", "int4")}},
               kv_reads={
                   "auto": _AUTO,
                   "bfloat16": ("bf16", ""), "float16": ("fp16", ""),
                   "fp8": ("fp8", "= fp8_e4m3"), "fp8_e4m3": ("fp8", ""),
                   "fp8_e5m2": ("fp8", "E5M2, the width of kvplan's fp8"), "fp8_inc": ("fp8", "Intel Gaudi FP8"),
                   "fp8_ds_mla": ("fp8", "DeepSeek MLA FP8 layout"),
                   "fp8_per_token_head": ("fp8", "per-token-head scales"),
                   "int8_per_token_head": ("int8", ""), "int4_per_token_head": ("int4", ""),
                   "nvfp4": ("fp4", ""), "nvfp4_ds_mla": ("fp4", "DeepSeek MLA NVFP4 layout"),
                   "nvfp4_4over6": ("fp4", ""),
                   "turboquant_4bit_nc": ("int4", "a 4-bit scheme, modelled at int4's width"),
                   "ultraquant_4bit": ("int4", "a 4-bit scheme, modelled at int4's width"),
                   # Mixed or 3-bit widths: no kvplan dtype has them.
                   "turboquant_k8v4": (None, "8-bit keys, 4-bit values"),
                   "turboquant_k3v4_nc": (None, "3-bit keys, 4-bit values"),
                   "turboquant_3bit_nc": (None, "3-bit"), "octave_k3v4": (None, "3-bit keys, 4-bit values"),
                   "octave_k3v3": (None, "3-bit"), "octave_k3v3_compact": (None, "3-bit"),
               },
               flags=Flags("--kv-cache-dtype", "--block-size", "--max-num-seqs", "--max-model-len",
                           "--tensor-parallel-size", "--pipeline-parallel-size",
                           # the pool size; then a layout over nodes, one file a host (kvplan/engines/vllm.py)
                           own=("--kv-cache-memory-bytes", "--nnodes", "--node-rank", "--master-addr", "--headless",
                                "--data-parallel-size-local", "--data-parallel-start-rank", "--data-parallel-address",
                                "--data-parallel-rpc-port")),
               # vLLM 0.33.0's MLA backends list only auto/float16/bfloat16/fp8 (v1/attention/backends/mla/*.py,
               # supported_kv_cache_dtypes): the *_per_token_head modes are TRITON_ATTN's, and nvfp4 is a VllmConfig
               # error, "nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) backends"
               # (nvfp4_ds_mla needs a sparse MLA backend, which DeepSeek-V3 has not).
               page_scales=_VLLM_SCALES,
               memory=MemoryDefaults(
                   0.92, "vllm/config/cache.py:215 (vLLM 0.33.0): --gpu-memory-utilization default 0.92, a fraction "
                         "of the device's total memory (v1/worker/utils.py:716-726)",
                   # Assumed round figures: vLLM measures both at start-up and logs them ("PyTorch activation peak
                   # memory takes X GiB", "Estimated CUDA graph memory: X GiB"); measure yours and override.
                   cudagraph=1 * GiB, activation_per_token=128 * KiB),
               data_parallel="--data-parallel-size",
               # vllm/config/speculative.py (vLLM 0.33.0): SpeculativeConfig.method, whose MTP types include `mtp`
               speculative={"eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram"},
               attention_dp="--data-parallel-size over --tensor-parallel-size tp/d: for an MoE model vLLM 0.33.0 runs "
                            "each data-parallel rank's attention on its own sequences and the expert layers over "
                            "DP × TP ranks (docs/serving/data_parallel_deployment.md; vllm/config/parallel.py)",
               expert_parallel="--enable-expert-parallel: the experts split over all DP × TP ranks instead of "
                               "tensor-parallel (vllm/config/parallel.py ParallelConfig.enable_expert_parallel)"),
        Engine("sglang", "SGLang", "0.5.23", "SGLang 0.5.23",
               # bf16 is written `bf16`: the trtllm_mla backend (DeepSeek on Blackwell) accepts the spellings
               # fp8_e4m3, bf16 and auto only (arg_groups/overrides.py:1203-1218), `bfloat16` is refused there.
               {"bf16": "bf16",
                # SGLang names no float16 KV dtype; `auto` follows the checkpoint's dtype, which is fp16 exactly
                # when the checkpoint is (a warning says so when the weights are not fp16).
                "fp16": "auto",
                "fp8": "fp8_e4m3", "fp4": "nvfp4"},
               False, 1, (1, 16, 32, 64, 128), True, True,
               "docs/engines.md: --kv-cache-dtype fp8_e4m3/fp8_e5m2/nvfp4 (no int8, int4 or 2-bit); "
               "--page-size default 1; radix cache on by default; --enable-hierarchical-cache; "
               "--pp-size (arg_groups/fields/parallel.py:59); nvfp4 only on Blackwell and MHA models",
               tiers=("host", "ssd", "remote"), lmcache=True, kv_requires={"fp4": KvRequires(
                   fp4_hardware="\"--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120\" "
                                "(sglang/srt/arg_groups/kv_cache_hook.py:124-131)",
                   no_mla="\"NVFP4 prefill supports an FP8 E4M3 workspace or native NVFP4, but backend "
                          "'trtllm_mla' provides neither\": the MLA backend on Blackwell (kv_cache_hook.py:34-60)")},
               kv_reads={
                   "auto": _AUTO,
                   "bf16": ("bf16", ""), "bfloat16": ("bf16", ""),
                   "fp8_e4m3": ("fp8", ""), "fp8_e5m2": ("fp8", "E5M2, the width of kvplan's fp8"),
                   "mxfp8": ("fp8", "MX block scales"),
                   "nvfp4": ("fp4", ""), "fp4_mx_block16": ("fp4", "MX block scales"),
               },
               flags=Flags("--kv-cache-dtype", "--page-size", "--max-running-requests", "--context-length",
                           "--tp-size", "--pp-size",
                           # the model; then a replica over nodes, one file a host (kvplan/engines/sglang.py)
                           own=("--model-path", "--nnodes", "--node-rank", "--dist-init-addr")),
               aliases=("sg-lang",), page_scales=_SGLANG_SCALES,
               blackwell_pages=BlackwellPages(
                   (16, 32, 64, 128), (32, 64), 64,
                   "sglang/srt/arg_groups/overrides.py:1146-1199 (SGLang 0.5.23): on Blackwell the default MHA "
                   "backend trtllm_mha takes pages of 16, 32, 64 or 128 tokens and the MLA backends (trtllm_mla, "
                   "FlashMLA, CuteDSL) 32 or 64; any other --page-size, the default 1 included, is changed to 64"),
               data_parallel="--dp-size",
               # sglang/srt/server_args.py (SGLang 0.5.23): --speculative-algorithm EAGLE3, NEXTN (MTP), NGRAM
               speculative={"eagle3": "EAGLE3", "mtp": "NEXTN", "ngram": "NGRAM"},
               attention_dp="--attn-dp-size d (SGLang 0.5.23; the deprecated spelling `--dp-size d "
                            "--enable-dp-attention` resolves to it, and --dp-size replicas beside it are refused: "
                            "sgl-project/sglang pull request 41818, its test_attn_dp_size.py)",
               expert_parallel="--ep-size e (alias --expert-parallel-size, --ep; arg_groups/fields/parallel.py "
                               "Parallel.ep_size): moe_tp_size = tp / e"),
        Engine("trtllm", "TensorRT-LLM", "main", "TensorRT-LLM (main, > 1.2.1)",
               {"bf16": "auto", "fp16": "auto", "fp8": "fp8", "int8": "auto", "fp4": "nvfp4"},
               False, 32, (8, 16, 32, 64, 128), True, True,
               "docs/engines.md: kv_cache_config.dtype auto|fp8|nvfp4, INT8 KV quantization; tokens_per_block 32; "
               "enable_block_reuse; host_cache_size; eviction only experimental on main", tiers=("host",),
               kv_requires={"fp4": KvRequires(fp4_hardware="NVFP4 KV needs FP4 tensor cores (Blackwell)")},
               kv_reads={"auto": _AUTO, "fp8": ("fp8", ""), "nvfp4": ("fp4", "")},
               flags=Flags("kv_cache_config.dtype", "kv_cache_config.tokens_per_block", "max_batch_size",
                           "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size",
                           own=("--config", "kv_cache_config.free_gpu_memory_fraction", "kv_cache_config.max_tokens")),
               aliases=("trt-llm", "tensorrt-llm", "tensorrt"), page_scales=_TRTLLM_SCALES,
               # tensorrt_llm/llmapi/llm_args.py: speculative_config.decoding_type Eagle3, MTP, NGram
               speculative={"eagle3": "Eagle3", "mtp": "MTP", "ngram": "NGram"},
               attention_dp="enable_attention_dp: true, every tensor-parallel rank its own attention group (d = tp; "
                            "tensorrt_llm/llmapi/llm_args.py enable_attention_dp)",
               expert_parallel="moe_expert_parallel_size (tensorrt_llm/llmapi/llm_args.py)"),
    )
}


def kv_refusal(engine: Engine, dtype: str, device: Device, model: Model) -> Optional[str]:
    """Why `engine` cannot store KV as `dtype` for `model` on `device`, or None when it can. FP4 needs FP4
    formats in hardware on every engine (NVFP4, Device.fp4); the rest is the engine's record."""
    if dtype not in engine.kv_names:
        return f"{engine.described} has no {dtype} KV cache"
    need = engine.kv_requires.get(dtype, KvRequires())
    if need.fp4_hardware and not device.fp4:
        return f"{engine.described} has no {dtype} KV cache on {device.id}, which has no FP4 formats in hardware: " \
               + need.fp4_hardware
    if need.no_mla and model.kv_kind == "mla":
        return f"{engine.described} has no {dtype} KV cache for {model.id}, an MLA model: {need.no_mla}"
    if dtype == "fp4" and not device.fp4:
        return f"{device.id} has no FP4 formats in hardware"
    return None


def scale_bytes_per_value(engine: Engine, dtype: str, model: Model) -> float:
    """The scale bytes `engine`'s KV pool stores per KV value of `dtype` for `model`: its page scale's per-value
    share plus its per-side bytes spread over the token-head's values, 2·per_side/(d + d_v) (= per_side/d where
    d_v = d); PageScale.bytes_per_token_head over the (d + d_v) values it covers. An MLA latent holds no
    per-token-head scale (kvplan.engines.common.kv_layout), only the per-value share."""
    scale = engine.page_scales.get(dtype)
    if scale is None:
        return 0.0
    if model.kv_kind == "mla":
        return scale.per_value
    d, dv = model.head_dim, model.v_head_dim or model.head_dim
    return scale.bytes_per_token_head(d, dv) / (d + dv)


def kv_width(engine: str, dtype: str, model: Model) -> float:
    """Bytes per KV value as `engine` stores `dtype` for `model`: the dtype's width plus the engine's scale bytes
    (its record's page_scales). The one width the planner's KV bytes use. For `any` (no engine constraint), the
    least of the engines that can store the dtype: a lower bound, as the plan under `any` is (docs/planner.md); a
    dtype no engine stores is its plain width."""
    width = DTYPES[dtype].width
    if engine != "any":
        return width + scale_bytes_per_value(get_engine(engine), dtype, model)
    extra = [scale_bytes_per_value(e, dtype, model) for k, e in ENGINES.items() if k != "any" and dtype in e.kv_names]
    return width + min(extra, default=0.0)


def kv_dtypes_for(engine: Engine, device: Device, model: Model) -> tuple[str, ...]:
    """The kvplan dtype ids `engine` can store KV in for `model` on `device`, in the record's order."""
    return tuple(d for d in engine.kv_dtypes if kv_refusal(engine, d, device, model) is None)


def blackwell(device: Device) -> bool:
    """An NVIDIA GPU with FP4 formats in hardware: SM100 or SM120 (the catalog's B200, B300, GB200)."""
    return device.fp4 and "NVIDIA" in device.name


def block_sizes_for(engine: Engine, device: Device, model: Model) -> tuple[int, ...]:
    """The page sizes `engine` runs for `model` on `device` as written: the record's, or on Blackwell its
    `blackwell_pages` (MLA or MHA)."""
    pages = engine.blackwell_pages
    if pages is None or not blackwell(device):
        return engine.block_sizes
    return pages.mla if model.kv_kind == "mla" else pages.mha


def default_block_for(engine: Engine, device: Device, model: Model) -> int:
    """The page `engine` runs for `model` on `device` when none is given: its default, or on Blackwell the page
    its backend changes the default to where the default is not one it takes."""
    pages = engine.blackwell_pages
    if pages is None or engine.default_block in block_sizes_for(engine, device, model):
        return engine.default_block
    return pages.forced


def get_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise CatalogError(f"unknown engine '{name}'", help=suggest(name, ENGINES))
    return ENGINES[name]


def engine_ids() -> tuple[str, ...]:
    """The words `engine = ...` takes: every record, `any` first."""
    return tuple(ENGINES)


def concrete() -> tuple[str, ...]:
    """The real engines (every record but `any`): what `kvplan import --from` reads."""
    return tuple(e for e in ENGINES if e != "any")
