"""Check kvplan's emitted engine files against the real engines: their own parsers, config classes and KV sizing.

    python tools/engine_check.py                         # every example and emit test spec, every catalog device
    python tools/engine_check.py examples/w2-batch32.kvp --device h200 --engine vllm,sglang
    python tools/engine_check.py --keep DIR             # also write the emitted files there

For each spec (default: examples/*.kvp, tests/data/emit/*.kvp, tests/data/engine-check/*.kvp), on the spec's own
device and on every device in the catalog (the spec's `device = ...` lines rewritten; a spec that does not check or
plan there is skipped), every target (vllm, sglang, trtllm, lmcache) is emitted and each file an installed engine
reads is handed to it:

A layout larger than a node is written one launcher per host (`vllm-host0.sh`, `vllm-host1.sh`, ...): each is
checked as its host would run it, host 0's address variable set (HOST_VARS), `--headless` as vLLM's serve runs it.

- vLLM 0.33.0 (`vllm.sh`, `lmcache-vllm.sh`): the `vllm serve` argument parser (`make_arg_parser` on a
  `FlexibleArgumentParser`), `AsyncEngineArgs.from_cli_args`, `create_engine_config()` on vLLM's CPU platform
  with the model's config.json from tests/data/hf (never downloaded; without one, the parser only: EngineArgs
  would look the hub id up). The KV capacity is recomputed with vLLM's
  own code: the attention backend the CUDA platform would pick on the device's compute capability
  (`_get_backend_priorities` of vllm/platforms/cuda.py, read from the installed file, then each backend's
  `validate_configuration`), that backend's `customize_spec` (scale bytes), and `get_kv_cache_configs` on
  `--kv-cache-memory-bytes`. Usable tokens = (num_blocks - 1) x block_size: the BlockPool keeps one null block.
- SGLang 0.5.23 (`sglang.sh`, `lmcache-sglang.sh`): `prepare_server_args` and `ServerArgs.resolve_once()` (its
  whole validation pipeline) under `override_platform(...)` set to the device's architecture, with `--device cuda`
  added (the CUDA default) and its GPU-memory probe answered with the device's memory. The KV budget is
  `_profile_available_bytes` modelled: (pre_model_load x mem_fraction_static - weights), where pre_model_load (free
  memory after CUDA/NCCL start-up) is the device memory less kvplan's runtime reserve (assumed: SGLang measures it
  on the GPU) and the weights are kvplan's per-GPU weights. The pool is SGLang's own: its server args published
  (`set_server_args`), a `KVCacheConfigurator` built as `ModelRunner` builds it for each pipeline stage, and
  `create_memory_pool_configurator(...).calculate_pool_sizes` (DefaultPoolConfigurator, HybridSWAPoolConfigurator
  for SWA_SINK_ARCHS such as gpt-oss, SWARequestCapPoolConfigurator, ...). Compared with the per-GPU pool the file
  states (one DP-attention rank's), and its SWA pool with the file's.
- LMCache 0.5.6 (`lmcache.yaml`): `LMCacheEngineConfig.from_file`; the tier bytes LMCache allocates are
  int(max_local_cpu_size x 1024^3) (cache_engine.py) or int(max_local_disk_size x 1024^3) (local_disk_backend.py),
  and the tokens are whole LMCache chunks of the kv_shape LMCache's own `create_lmcache_metadata`
  (integration/vllm/utils.py) gives for the vLLM loader's config.
- TensorRT-LLM does not install from PyPI here: its files are listed as not checked (docs/engine-memory.md gives
  the KvCacheConfig fields from its source).

The capacity each file's comments state is compared with the engine's figure: `ok` when equal, else MISMATCH with
the difference. Output is one row per file, sorted, then a summary line. Exit 0 when every file was accepted and
every recomputed capacity equals the stated one, 1 on any rejection or mismatch, 2 when nothing could run (no
engine importable, or a spec argument that does not exist). Run it in the venv that has the engines
(docs/engine-memory.md says how to make one).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import glob
import io
import json
import logging
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
HF_DIR = ROOT / "tests" / "data" / "hf"
DEFAULT_SPECS = ("examples/*.kvp", "tests/data/emit/*.kvp", "tests/data/engine-check/*.kvp")
TARGETS = ("vllm", "sglang", "trtllm", "lmcache")
ENGINES = ("vllm", "sglang", "lmcache", "trtllm")
GiB = 1 << 30

#: Compute capability per catalog device (NVIDIA's CUDA GPU table; AMD's gfx ids as vLLM's ROCm platform reads
#: them: gfx942 = 9.4, gfx950 = 9.5). Devices absent here (TPU, Gaudi) have no in-tree vLLM or SGLang platform.
CAPABILITY: dict[str, tuple[str, int, int]] = {
    "a100-80g": ("cuda", 8, 0), "h100-sxm": ("cuda", 9, 0), "h100-pcie": ("cuda", 9, 0), "h200": ("cuda", 9, 0),
    "b200": ("cuda", 10, 0), "b200-hgx": ("cuda", 10, 0), "gb200": ("cuda", 10, 0), "b300": ("cuda", 10, 3),
    "mi300x": ("rocm", 9, 4), "mi325x": ("rocm", 9, 4), "mi355x": ("rocm", 9, 5),
}

def unsized(device: str) -> str:
    """Why a file for `device` is not sized: the checker models the CUDA and ROCm platforms only."""
    return (f"the checker models CUDA and ROCm devices only, not {device} (vLLM runs TPUs through the tpu_inference "
            "plugin and Gaudi through vllm-gaudi; a device outside the catalog has no known compute capability)")


#: DeepSeek-V3's config.json is not among the test fixtures; transformers' DeepseekV3Config defaults are that
#: model's geometry (61 layers, kv_lora_rank 512, qk_rope_head_dim 64), so a config is written from them, with the
#: published config.json's context (163,840 positions: YaRN x40 over 4,096), which the defaults lack.
SYNTHETIC: dict[str, tuple[str, dict[str, Any]]] = {
    "deepseek-ai/DeepSeek-V3": ("deepseek_v3", {
        "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                         "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}}),
}


# ----------------------------------------------------------------------------------------------- results

@dataclass(frozen=True)
class Stated:
    """What an emitted file's comments say the engine's KV pool (or tier) holds."""

    tokens: int                         # the capacity: every GPU's pool together (all DP-attention ranks)
    blocks: Optional[int] = None
    block: Optional[int] = None
    block_bytes: Optional[int] = None
    tier_bytes: Optional[int] = None
    rank_tokens: Optional[int] = None   # one GPU's pool, where the file states it in tokens (SGLang)
    cell: Optional[int] = None          # B per token of that pool (SGLang)
    swa_tokens: Optional[int] = None    # the sliding-window pool beside it (SGLang's hybrid pool)


@dataclass
class Row:
    """One emitted file as an engine read it."""

    file: str
    engine: str
    verdict: str = "not checked"      # accepted | rejected | not checked
    message: str = ""                 # the engine's own words on a rejection, or why it was not checked
    stated: Optional[int] = None      # tokens the file's comments state
    recomputed: Optional[int] = None  # tokens the engine's code gives
    status: str = "-"                 # ok | MISMATCH | -
    notes: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)  # further stated figures the engine's code contradicts

    def finding(self) -> bool:
        return self.verdict == "rejected" or self.status == "MISMATCH"


def compare(stated: Optional[int], recomputed: Optional[int], unit: str = "tokens",
            per_block: Optional[int] = None) -> tuple[str, str]:
    """ok when the engine's figure equals the stated one; otherwise MISMATCH with the difference (in blocks
    too when a block size is given). '-' when either is unknown."""
    if stated is None or recomputed is None:
        return "-", ""
    if stated == recomputed:
        return "ok", ""
    diff = recomputed - stated
    text = f"engine {diff:+,} {unit} ({recomputed / stated - 1:+.2%})" if stated else f"engine {diff:+,} {unit}"
    if per_block:
        blocks = diff / per_block
        text += f", {blocks:+,.0f}" if blocks.is_integer() else f", {blocks:+,.1f}"
        text += f" blocks of {per_block}"
    return "MISMATCH", text


_CAPACITY = re.compile(r"KV capacity \(derived\): ([\d,]+) tokens \(([\d,.]+) blocks of (\d+) tokens\)")
_POOL = re.compile(r"per GPU: KV pool ([\d,]+) blocks × ([\d,]+) B")
_RANK_POOL = re.compile(r"per GPU: KV pool ([\d,]+) tokens × ([\d,]+) B per token")
_SWA_POOL = re.compile(r"SWA pool ([\d,]+) tokens × ([\d,]+) B per token")
_TIER = re.compile(r"tier: ([\d,]+) B per engine worker \(one per GPU\) = ([\d,]+) tokens")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_stated(text: str) -> Optional[Stated]:
    """The capacity an emitted file's comment lines state (kvplan.engines.common.summary_comments, lmcache)."""
    cap = _CAPACITY.search(text)
    if cap:
        pool = _POOL.search(text)
        blocks = float(cap.group(2).replace(",", ""))
        rank, swa = _RANK_POOL.search(text), _SWA_POOL.search(text)
        return Stated(_int(cap.group(1)), int(blocks) if blocks.is_integer() else None, int(cap.group(3)),
                      _int(pool.group(2)) if pool else None, rank_tokens=_int(rank.group(1)) if rank else None,
                      cell=_int(rank.group(2)) if rank else None, swa_tokens=_int(swa.group(1)) if swa else None)
    tier = _TIER.search(text)
    if tier:
        return Stated(_int(tier.group(2)), tier_bytes=_int(tier.group(1)))
    return None


#: What the checker sets the variables a multi-host launcher reads to (kvplan.engines.common.HOST0_ADDR): the
#: command is parsed as host 1 would run it once the user has exported host 0's address.
HOST_VARS = {"KVPLAN_HOST0_ADDR": "10.0.0.1"}


def command_words(text: str) -> tuple[list[str], dict[str, str]]:
    """The `exec ...` command of an emitted launcher, as words, and its exports; the `: "${VAR:?...}"` checks of
    a multi-host launcher left out and its variables set (HOST_VARS), as the shell would expand them."""
    env: dict[str, str] = {}
    lines = [ln for ln in text.splitlines() if not ln.startswith(("#", ": "))]
    for var, value in HOST_VARS.items():
        lines = [ln.replace(f"${var}", value) for ln in lines]
    for ln in lines:
        if ln.startswith("export "):
            key, _, value = ln[len("export "):].partition("=")
            env[key] = value
    joined = " ".join(ln.rstrip("\\").strip() for ln in lines if not ln.startswith("export "))
    words = shlex.split(joined)
    return (words[1:] if words[:1] == ["exec"] else words), env


def one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {msg[:300]}"


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """The engines log to stdout and stderr at import and config time; keep the table readable."""
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            yield buf


# ----------------------------------------------------------------------------------------------- models

@dataclass
class Emit:
    """One emitted file and what the checker needs beside it: the plan's device and per-GPU figures."""

    label: str
    name: str
    text: str
    device: str
    model_ref: str
    model_config: Optional[Path]      # a local config.json, or None (not downloaded)
    capacity: dict[str, float]
    shared: dict[str, Any] = field(default_factory=dict)  # per plan and target: what a sibling file's check left


class ModelDirs:
    """A directory holding config.json per model reference, made from tests/data/hf (or a spec's own config)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made: dict[str, Optional[Path]] = {}

    def get(self, ref: str, config: Optional[Path]) -> Optional[Path]:
        if ref in self._made:
            return self._made[ref]
        src = config or self._fixture(ref)
        path: Optional[Path] = None
        if src is not None or ref in SYNTHETIC:
            path = self.root / re.sub(r"[^A-Za-z0-9._-]+", "--", ref)
            path.mkdir(parents=True, exist_ok=True)
            if src is not None:
                shutil.copyfile(src, path / "config.json")
            else:
                self._synthesize(SYNTHETIC[ref], path / "config.json")
        self._made[ref] = path
        return path

    @staticmethod
    def _fixture(ref: str) -> Optional[Path]:
        """The config.json fixture of `ref`, else of another repo id the same catalog model stands for (the
        base and instruct variants share the architecture, so the engine sizes them alike)."""
        from kvplan.catalog import by_repo_id

        model = by_repo_id().get(ref.lower())
        for rid in (ref, *(model.hf_ids if model is not None else ())):
            f = HF_DIR / (rid.replace("/", "--") + ".json")
            if f.is_file():
                return f
        return None

    @staticmethod
    def _synthesize(spec: tuple[str, dict[str, Any]], dest: Path) -> None:
        from transformers import AutoConfig

        model_type, published = spec
        cfg = AutoConfig.for_model(model_type).to_dict() | published
        cfg["architectures"] = cfg.get("architectures") or ["DeepseekV3ForCausalLM"]
        cfg["torch_dtype"] = "bfloat16"
        dest.write_text(json.dumps(cfg, indent=1, default=str))


# ----------------------------------------------------------------------------------------------- vLLM 0.33.0

def _vllm_cpu() -> None:
    """vLLM's CPU platform: its config classes run without a GPU (read when vLLM first resolves its platform)."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def vllm_absent() -> Optional[str]:
    """None when vLLM 0.33.0 imports here, else why not."""
    _vllm_cpu()
    try:
        with quiet():
            import vllm
    except Exception as exc:  # noqa: BLE001  any import failure means the engine is absent
        return f"vLLM not importable ({one_line(exc)})"
    return None if vllm.__version__ == "0.33.0" else f"vLLM {vllm.__version__} installed; kvplan writes for 0.33.0"


@functools.lru_cache(maxsize=1)
def _vllm_parser() -> Any:
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    sub = parser.add_subparsers(dest="subcommand")
    make_arg_parser(sub.add_parser("serve", usage="vllm serve [model_tag] [options]"))
    return parser


@functools.lru_cache(maxsize=1)
def _cuda_priorities() -> Callable[..., list[Any]]:
    """vllm/platforms/cuda.py `_get_backend_priorities`, compiled from the installed file: the module itself
    loads libcuda at import, which a machine without a GPU does not have."""
    import vllm
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    path = Path(vllm.__file__).parent / "platforms" / "cuda.py"
    tree = ast.parse(path.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_get_backend_priorities")
    ns: dict[str, Any] = {"cache": functools.cache, "lru_cache": functools.lru_cache, "CacheDType": str,
                          "AttentionBackendEnum": AttentionBackendEnum, "DeviceCapability": DeviceCapability}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), ns)  # noqa: S102  vLLM's own code
    return ns["_get_backend_priorities"]  # type: ignore[no-any-return]


def _rocm_priorities(use_mla: bool) -> list[Any]:
    """vllm/platforms/rocm.py `_get_backend_priorities` with AITER off (VLLM_ROCM_USE_AITER unset, its default)."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum as B

    if use_mla:
        return [B.TRITON_MLA]
    return [B.ROCM_ATTN, B.TRITON_ATTN, B.TURBOQUANT, B.ROCM_OCTAVE, B.ULTRAQUANT]


def vllm_backend(cfg: Any, device: str, sliding: bool) -> tuple[Any, str, list[str]]:
    """The attention backend vLLM's platform picks for this config on `device`, as get_attn_backend does
    (vllm/v1/attention/selector.py): the first in priority order whose validate_configuration passes."""
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.selector import AttentionSelectorConfig

    kind, major, minor = CAPABILITY[device]
    mc, pc, cc = cfg.model_config, cfg.parallel_config, cfg.cache_config
    kvd = cc.cache_dtype
    ktc = cfg.kv_transfer_config
    sel = AttentionSelectorConfig(
        head_size=mc.get_head_size(), dtype=mc.dtype, kv_cache_dtype=kvd,
        block_size=cc.block_size if cc.user_specified_block_size else None, use_mla=mc.use_mla, has_sink=False,
        use_sparse=False, use_mm_prefix=False, use_per_head_quant_scales=False, attn_type="decoder",
        has_sliding_window=sliding, use_kv_connector=ktc is not None and ktc.is_kv_transfer_instance)
    cap = DeviceCapability(major, minor)
    order = (_cuda_priorities()(use_mla=mc.use_mla, device_capability=cap, num_heads=mc.get_num_attention_heads(pc),
                                kv_cache_dtype=kvd, head_size=mc.get_head_size())
             if kind == "cuda" else _rocm_priorities(mc.use_mla))
    reasons = []
    unimportable = []
    for b in order:
        try:
            cls = b.get_class()
            bad = cls.validate_configuration(device_capability=cap, **sel._asdict())
        except Exception as exc:  # noqa: BLE001  a backend this CPU machine cannot import
            reasons.append(f"{b.name}: not importable here ({type(exc).__name__})")
            unimportable.append(b.name)
            continue
        if not bad:
            return cls, b.name, unimportable
        reasons.append(f"{b.name}: {', '.join(bad)}")
    raise ValueError(f"No valid attention backend found for {kind} {major}.{minor} with kv_cache_dtype={kvd}. "
                     f"Reasons: {'; '.join(reasons)}")


def _layer_windows(cfg: Any, n_layers: int) -> list[Optional[int]]:
    """Each layer's sliding window as the HF config gives it (layer_types, else one window for all)."""
    hf = cfg.model_config.hf_text_config
    window = getattr(hf, "sliding_window", None)
    if not window or getattr(hf, "use_sliding_window", True) is False:
        return [None] * n_layers
    types = getattr(hf, "layer_types", None)
    if types:
        return [window if t == "sliding_attention" else None for t in types]
    return [window] * n_layers


def vllm_specs(cfg: Any, device: str) -> tuple[list[dict[str, Any]], list[Any], str, int]:
    """The KV cache spec of every layer on every pipeline stage, as the attention layers build them
    (attention.py / mla_attention.py get_kv_cache_spec) and the backend customizes them (customize_spec)."""
    import torch  # noqa: F401  vLLM's dtypes
    from vllm.distributed.utils import get_pp_indices
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec, get_kv_quant_mode
    from vllm.v1.worker.utils import customize_attention_spec

    mc, pc, cc = cfg.model_config, cfg.parallel_config, cfg.cache_config
    kvd = cc.cache_dtype
    total = mc.get_total_num_hidden_layers()
    windows = _layer_windows(cfg, total)
    dtype = kv_cache_dtype_str_to_dtype(kvd, mc)
    common = dict(block_size=cc.block_size, head_size=mc.get_head_size(), dtype=dtype,
                  kv_quant_mode=get_kv_quant_mode(kvd))
    backends: dict[bool, tuple[Any, str, list[str]]] = {}
    workers: list[dict[str, Any]] = []
    page = 0
    for rank in range(pc.pipeline_parallel_size):
        start, end = get_pp_indices(total, rank, pc.pipeline_parallel_size)
        specs: dict[str, Any] = {}
        for i in range(start, end):
            sliding = windows[i] is not None
            if sliding not in backends:
                backends[sliding] = vllm_backend(cfg, device, sliding)
            if mc.use_mla:
                spec = MLAAttentionSpec(num_kv_heads=1, max_tp_shards=1, cache_dtype_str=kvd,
                                        state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(kvd),
                                        **common)
            elif sliding:
                spec = SlidingWindowSpec(num_kv_heads=mc.get_num_kv_heads(pc), sliding_window=windows[i], **common)
            else:
                spec = FullAttentionSpec(num_kv_heads=mc.get_num_kv_heads(pc), **common)
            spec = customize_attention_spec(backends[sliding][0], spec)
            page = max(page, spec.page_size_bytes)
            specs[f"model.layers.{i}.self_attn.attn"] = spec
        workers.append(specs)
    names = "/".join(sorted({name for _, name, _ in backends.values()}))
    skipped = sorted({n for _, _, u in backends.values() for n in u})
    if skipped:
        names += f" ({', '.join(skipped)} ahead of it not importable on this machine: the GPU may pick another)"
    return workers, [cls for cls, _, _ in backends.values()], names, page


def vllm_capacity(cfg: Any, device: str) -> tuple[int, list[str]]:
    """Usable KV tokens per GPU under --kv-cache-memory-bytes, from vLLM's own get_kv_cache_configs
    (vllm/v1/core/kv_cache_planning.py), less the BlockPool's null block (vllm/v1/core/block_pool.py)."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        record_kv_cache_layout,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity

    memory = cfg.cache_config.kv_cache_memory_bytes
    with set_current_vllm_config(cfg):
        workers, classes, backend, page = vllm_specs(cfg, device)
        layouts = [layout.name for layout in get_supported_kv_cache_layouts(classes)]
        layout = resolve_kv_cache_layout(cfg, [layouts] * len(workers), [s for w in workers for s in w.values()])
        record_kv_cache_layout(cfg.cache_config, layout.name)
        groups = get_global_kv_cache_groups(cfg, workers)
        configs = get_kv_cache_configs(cfg, workers, [memory] * len(workers), groups)
    kc = configs[0]
    block = min(g.kv_cache_spec.block_size for g in kc.kv_cache_groups)  # vLLM may resize a sliding-window group's
    logged, _ = get_kv_cache_capacity(cfg, kc)
    notes = [f"backend {backend}, {page:,} B page per layer, {kc.num_blocks:,} blocks of {block} (1 null), "
             f"vLLM logs {logged:,} tokens"]
    if len(kc.kv_cache_groups) > 1:
        # Full and sliding-window layers draw one block pool: a token slot is no longer one block entry, so the
        # engine's own figure (max concurrency x max-model-len, get_kv_cache_capacity) is the capacity.
        notes.append(f"{len(kc.kv_cache_groups)} KV cache groups (hybrid allocator): capacity = vLLM's logged figure")
        return logged, notes
    return (kc.num_blocks - 1) * block, notes


def vllm_parse(words: Sequence[str], model_dir: Optional[Path]) -> Any:
    """`vllm serve MODEL ...` through vLLM's own parser and EngineArgs; the model replaced by its local dir."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import validate_parsed_serve_args

    argv = list(words[1:])
    if model_dir is not None and len(argv) > 1 and not argv[1].startswith("-"):
        argv[1] = str(model_dir)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            args = _vllm_parser().parse_args(argv)
    except SystemExit:
        lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
        raise ValueError(lines[-1] if lines else "argument parser refused the command") from None
    args.model = args.model_tag
    validate_parsed_serve_args(args)
    if model_dir is None:  # EngineArgs would look the hub id up (offline: refused); the parser has spoken
        return None
    return AsyncEngineArgs.from_cli_args(args)


def vllm_check(e: Emit, row: Row) -> None:
    _vllm_cpu()
    words, _ = command_words(e.text)
    if words[:2] != ["vllm", "serve"]:
        row.message = "not a `vllm serve` command"
        return
    try:
        with quiet():
            engine_args = vllm_parse(words, e.model_config)
    except Exception as exc:  # noqa: BLE001  the engine's refusal, in its words
        row.verdict, row.message = "rejected", one_line(exc)
        return
    if e.model_config is None:
        row.verdict = "accepted"
        row.message = f"parsed; no local config.json for {e.model_ref} (not downloaded): engine config not built"
        return
    try:
        with quiet():
            # a host after the first of a layout over nodes runs headless: vLLM checks it so (cli/serve.py)
            cfg = engine_args.create_engine_config(headless="--headless" in words)
    except Exception as exc:  # noqa: BLE001
        row.verdict, row.message = "rejected", one_line(exc)
        return
    row.verdict = "accepted"
    if e.device in CAPABILITY:
        # vLLM's CPU platform turns async scheduling off (platforms/cpu.py:348); its GPU platforms leave it on,
        # which doubles the tokens in flight a sliding-window layer keeps (config/vllm.py:588-609)
        cfg.scheduler_config.async_scheduling = True
    e.shared["vllm_config"] = cfg
    if e.device not in CAPABILITY:
        row.message = f"capacity not recomputed: {unsized(e.device)}"
        return
    if cfg.cache_config.kv_cache_memory_bytes is None:
        # fill sizing: the pool follows vLLM's profiling on the GPU, which a CPU cannot run. Feed vLLM the pool
        # bytes the comment states it computed (ceil(memory × fraction) less the assumed start-up terms), so that
        # vLLM's own code checks the page, group and null-block arithmetic; the start-up terms stay kvplan's
        m = re.search(r"\(assumed\) = ([\d,]+) B = ", e.text)
        if m is None:
            row.message = "capacity not recomputed: no --kv-cache-memory-bytes (the pool follows profiling)"
            return
        cfg.cache_config.kv_cache_memory_bytes = _int(m.group(1))
        row.notes.append(f"fill: vLLM sized on the {m.group(1)} B the comment states (start-up terms assumed)")
    try:
        with quiet():
            row.recomputed, notes = vllm_capacity(cfg, e.device)
    except ValueError as exc:  # get_kv_cache_configs refusing: one request at max-model-len does not fit
        row.verdict, row.message = "rejected", "at start-up: " + one_line(exc)
        return
    row.notes += notes


# ----------------------------------------------------------------------------------------------- SGLang 0.5.23

def sglang_absent() -> Optional[str]:
    try:
        with quiet():
            import sglang
            from sglang.srt.server_args import prepare_server_args  # noqa: F401  what the check runs
    except Exception as exc:  # noqa: BLE001
        return f"SGLang not importable ({one_line(exc)})"
    v = sglang.__version__
    return None if v == "0.5.23" else f"SGLang {v} installed; kvplan writes for 0.5.23"


def sglang_platform(device: str) -> dict[str, Any]:
    """The facts SGLang's PlatformContext probes on a GPU (sglang/srt/runtime_context.py), for `device`."""
    kind, major, minor = CAPABILITY[device]
    cuda = kind == "cuda"
    return dict(is_cuda=cuda, is_hip=not cuda, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
                is_sm90=cuda and major == 9, is_sm100=cuda and major == 10,
                is_sm100_or_sm110=cuda and major in (10, 11),
                is_sm110=cuda and major == 11, is_sm120=cuda and major == 12, is_blackwell=cuda and major >= 10,
                is_hopper_with_cuda_12_3=cuda and major == 9, has_flashinfer=cuda, has_amx=False,
                device_sm=major * 10 + minor, device_capability=(major, minor))


def sglang_args(words: Sequence[str], model_dir: Optional[Path], device: str, memory: Optional[float] = None) -> Any:
    """`python -m sglang.launch_server ...` through prepare_server_args and resolve_once (the validation pipeline,
    sglang/srt/arg_groups/pipeline.py) on `device`'s platform; `memory` (bytes) is the GPU memory SGLang's
    defaults read (arg_groups/memory_hook.py get_device_memory_capacity, which probes the GPU: chunked prefill,
    CUDA-graph batch, default fraction)."""
    from unittest import mock

    from sglang.srt.runtime_context import override_platform
    from sglang.srt.server_args import prepare_server_args

    _sglang_gpu_mxfp4()

    argv = list(words[3:])
    if model_dir is not None and "--model-path" in argv:
        argv[argv.index("--model-path") + 1] = str(model_dir)
    argv += ["--device", "cuda"]  # the default on a GPU machine; on this one SGLang would probe for it
    buf = io.StringIO()
    gpu_mib = None if memory is None else memory / 2**20
    with override_platform(**sglang_platform(device)), \
            mock.patch("sglang.srt.arg_groups.memory_hook.get_device_memory_capacity", lambda *a, **k: gpu_mib):
        try:
            with contextlib.redirect_stderr(buf):
                sa = prepare_server_args(argv)
        except SystemExit:
            lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
            raise ValueError(lines[-1] if lines else "argument parser refused the command") from None
        if model_dir is not None:
            sa.resolve_once()
    return sa


def resolved(sa: Any) -> Any:
    """The server args as the resolution pipeline left them: its declarations over the record's fields
    (sglang/srt/arg_groups/model_override_base.py resolved_view); page size, HiCache ratio and backends are
    filled in there."""
    from sglang.srt.arg_groups.model_override_base import resolved_view

    return resolved_view(sa)


def sglang_cell(sa: Any) -> tuple[int, str]:
    """Bytes per token of the KV pool, as DefaultPoolConfigurator._compute_cell_size
    (sglang/srt/model_executor/pool_configurator.py) computes it for MHA and MLA."""
    import torch
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype

    mc = ModelConfig.from_server_args(sa)
    cfg = resolved(sa)
    _, dtype = configure_kv_cache_dtype(server_args_kv_cache_dtype=cfg.kv_cache_dtype, model=None,
                                        model_dtype=torch.bfloat16, is_draft_worker=False, is_dflash=False,
                                        speculative_draft_attention_backend=None)
    kv_size = torch._utils._element_size(dtype)
    pp = max(1, getattr(cfg, "pp_size", 1) or 1)
    layers = -(-mc.num_hidden_layers // pp)  # a stage holds its own layers' cells (layer_setup.py:154)
    fp4 = hasattr(torch, "float4_e2m1fn_x2") and dtype == torch.float4_e2m1fn_x2
    if mc.attention_arch == AttentionArch.MLA:
        dim = mc.kv_lora_rank + mc.qk_rope_head_dim
        cell = dim * layers * kv_size
        if fp4:
            cell = cell // 2 + (dim // 16) * layers * kv_size
        return cell, f"MLA ({dim} per layer)"
    n = mc.get_num_kv_heads(cfg.tp_size)
    if fp4:
        from sglang.srt.layers.quantization.fp4_kv_cache_quant_method import (
            get_kv_cache_quant_method,
            resolve_kv_cache_quant,
        )

        method = get_kv_cache_quant_method(resolve_kv_cache_quant(cfg.kv_cache_dtype), num_layers=layers,
                                           device="cpu", page_size=cfg.page_size)
        method.configure_attention_backends_from_server_args(sa)
        return method.compute_cell_size(n, mc.head_dim, layers, kv_size), f"{n} KV heads per rank, {method.name}"
    return n * (mc.head_dim + mc.v_head_dim) * layers * kv_size, f"{n} KV heads per rank"


def sglang_available(sa: Any, capacity: dict[str, float]) -> int:
    """The KV budget in bytes: KVCacheConfigurator._profile_available_bytes (sglang/srt/mem_cache/
    kv_cache_configurator.py) with free memory after the weights = pre_model_load - weights (both modelled: SGLang
    measures them on the GPU); its refusal in its words when nothing is left."""
    cfg = resolved(sa)
    pre = (capacity["device_memory"] - capacity["runtime_reserve"]) / GiB   # GiB, as get_available_gpu_memory
    available = pre - capacity["weights_per_gpu"] / GiB
    rest = available - pre * (1 - cfg.mem_fraction_static)
    if rest <= 0:
        minimum = math.ceil((1 - available / pre) * 1000) / 1000
        raise ValueError(f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
                         f"{cfg.mem_fraction_static}. Raise --mem-fraction-static above {minimum:.3f}")
    return int(rest * GiB)


@dataclass(frozen=True)
class SglangPools:
    """What SGLang's own pool configurator made of the budget, on the pipeline stage with the fewest tokens."""

    configurator: str
    tokens: int                   # max_total_num_tokens (the full-attention pool's, for a hybrid pool)
    swa_tokens: Optional[int]     # the sliding-window pool's, for a hybrid pool


def _sglang_gpu_mxfp4() -> None:
    """SGLang registers the mxfp4 checkpoint format only where it finds CUDA, ROCm gfx95 or a CPU platform at import
    (sglang/srt/layers/quantization/__init__.py:95-104); on the GPU the check stands for, gpt-oss's config names it."""
    import sglang.srt.layers.quantization as quant

    quant.QUANTIZATION_METHODS.setdefault("mxfp4", quant.Mxfp4Config)


def sglang_pools(sa: Any, available: int, device: str) -> SglangPools:
    """SGLang's pool sizes for `available` KV bytes, from its own code: the server args published into its runtime
    context (set_server_args), ModelConfig.from_server_args, the KV dtype from configure_kv_cache_dtype, each
    pipeline stage's layers from resolve_layer_indices (its layers as get_pp_indices deals them), a
    KVCacheConfigurator as ModelRunner builds it (model_executor/model_runner.py:656-689) and
    create_memory_pool_configurator(...).calculate_pool_sizes (DefaultPoolConfigurator, HybridSWAPoolConfigurator,
    SWARequestCapPoolConfigurator, ...). Stages sync to the fewest tokens (_apply_token_constraints, a MIN
    all-reduce). Run under override_platform. SGLang's FP4 cell asks torch whether CUDA is available
    (utils/common.py is_float4_e2m1fn_x2); it is answered for `device`, as on the GPU."""
    import types
    from unittest import mock

    import sglang.srt.model_executor.pool_configurator as pool_module
    import torch
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.distributed.utils import get_pp_indices
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
    from sglang.srt.model_executor.model_runner_components.layer_setup import resolve_layer_indices
    from sglang.srt.model_executor.model_runner_components.load_model_utils import resolve_sliding_window_size
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import SpecAuxHiddenStateConfig
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.models.registry import ModelRegistry
    from sglang.srt.runtime_context import get_context, get_model, get_parallel, get_schedule, get_spec
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    get_context().set_server_args(sa)
    mc = ModelConfig.from_server_args(sa)
    kv_str, kv_dtype = configure_kv_cache_dtype(
        server_args_kv_cache_dtype=get_model().kv_cache_dtype, model=None, model_dtype=mc.dtype,
        is_draft_worker=False, is_dflash=False, speculative_draft_attention_backend=None)
    # the model class's own sliding window (gpt-oss reports sliding_window - 1), without loading weights
    cls, _ = ModelRegistry.resolve_model_cls(mc.hf_config.architectures)
    window_of = getattr(cls, "get_attention_sliding_window_size", None)
    pp = get_parallel().pp_size
    found: list[tuple[int, Any, str]] = []
    cuda = CAPABILITY[device][0] == "cuda"
    fp4 = mock.patch.object(pool_module, "is_float4_e2m1fn_x2",
                            lambda dtype: cuda and dtype == getattr(torch, "float4_e2m1fn_x2", None))
    for rank in range(pp):
        start, end = get_pp_indices(mc.num_hidden_layers, rank, pp)
        model = types.SimpleNamespace(start_layer=start, end_layer=end, config=mc.hf_config)
        if window_of is not None:
            model.get_attention_sliding_window_size = functools.partial(window_of, model)
        kvc = KVCacheConfigurator(  # device: where an FP4 recipe's probe tensors go (this machine has no GPU)
            device="cpu", gpu_id=0, attn_dp_size=get_parallel().attn_dp_size, pp_size=pp, pp_group=None,
            model=model, model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=kv_str if kv_str is not None else get_model().kv_cache_dtype, model_dtype=mc.dtype,
            page_size=get_schedule().page_size, sliding_window_size=resolve_sliding_window_size(model, mc),
            spec_algorithm=SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm),
            is_draft_worker=False, post_capture_kv_active=False, spec_aux_config=SpecAuxHiddenStateConfig(),
            is_hybrid_swa=mc.is_hybrid_swa, is_hybrid_swa_compress=mc.is_hybrid_swa_compress,
            use_mla_backend=mc.attention_arch == AttentionArch.MLA,
            layer_info=resolve_layer_indices(model=model, model_config=mc, is_draft_worker=False),
            forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None, memory_pool_config=None)
        with fp4:
            configurator = create_memory_pool_configurator(kvc)
            config = configurator.calculate_pool_sizes(available, get_schedule().page_size)
        found.append((config.max_total_num_tokens, (configurator, config), type(configurator).__name__))
    fewest = min(t for t, _, _ in found)
    tokens, (configurator, config), name = next(f for f in found if f[0] == fewest)
    return SglangPools(name, config.max_total_num_tokens, config.swa_max_total_num_tokens if mc.is_hybrid_swa
                       else None)


def sglang_host(sa: Any, cell: int, device_tokens: int) -> Optional[str]:
    """HiCache's host pool (sglang/srt/mem_cache/pool_host/base.py): --hicache-size GB (1e9 B) or
    --hicache-ratio x the device pool; SGLang warns when it is not larger than the device pool."""
    cfg = resolved(sa)
    if not cfg.enable_hierarchical_cache:
        return None
    page = cfg.page_size or 1
    ratio = cfg.hicache_ratio if cfg.hicache_ratio is not None else 2.0  # fields/memory.py: 2.0 in cache mode
    size = int(cfg.hicache_size * 1e9 // cell) if cfg.hicache_size else int(device_tokens * ratio)
    size = (size // page + 1) * page
    text = f"HiCache host pool {size:,} tokens"
    if size <= device_tokens:
        text += (f" <= device pool {device_tokens:,}: SGLang warns 'L2 cache effectiveness is reduced' "
                 "(host pages mirror device pages: no added capacity)")
    return text


def sglang_check(e: Emit, row: Row) -> None:
    words, _ = command_words(e.text)
    if words[:3] != ["python", "-m", "sglang.launch_server"]:
        row.message = "not a `python -m sglang.launch_server` command"
        return
    if e.device not in CAPABILITY:
        row.message = f"not checked: SGLang's validation needs its GPU platform: {unsized(e.device)}"
        return
    try:
        with quiet():
            sa = sglang_args(words, e.model_config, e.device, e.capacity.get("device_memory"))
    except Exception as exc:  # noqa: BLE001
        row.verdict, row.message = "rejected", one_line(exc)
        return
    row.verdict = "accepted"
    if e.model_config is None:
        row.message = f"parsed; no local config.json for {e.model_ref} (not downloaded): not resolved"
        return
    try:
        from sglang.srt.runtime_context import override_platform

        with quiet(), override_platform(**sglang_platform(e.device)):
            cell, what = sglang_cell(sa)
            available = sglang_available(sa, e.capacity)
            pools = sglang_pools(sa, available, e.device)
    except ValueError as exc:  # SGLang refusing the budget or the pools it gives (its words)
        row.verdict, row.message = "rejected", "at start-up: " + one_line(exc)
        return
    except Exception as exc:  # noqa: BLE001
        row.message = "capacity not recomputed: " + one_line(exc)
        return
    row.recomputed = pools.tokens
    row.notes.append(f"{pools.configurator} on {available:,} B (pre_model_load = memory - runtime reserve, "
                     f"assumed); cell {cell:,} B/token over all layers ({what})")
    if pools.swa_tokens is not None:
        row.notes.append(f"hybrid SWA: full-attention pool {pools.tokens:,} tokens, SWA pool {pools.swa_tokens:,} "
                         "tokens")
        stated = parse_stated(e.text)
        status, diff = compare(stated.swa_tokens if stated else None, pools.swa_tokens)
        if status == "MISMATCH":
            row.mismatches.append(f"SWA pool: {diff}")
        elif stated is None or stated.swa_tokens is None:
            row.mismatches.append("SWA pool: SGLang builds one, the file states none")
    host = sglang_host(sa, cell, row.recomputed)
    if host:
        row.notes.append(host)


# ----------------------------------------------------------------------------------------------- LMCache 0.5.6

def lmcache_absent() -> Optional[str]:
    try:
        with quiet():
            from importlib.metadata import version

            from lmcache.v1.config import LMCacheEngineConfig  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"LMCache not importable ({one_line(exc)})"
    v = version("lmcache")
    return None if v == "0.5.6" else f"LMCache {v} installed; kvplan writes for 0.5.6"


def lmcache_chunk_bytes(vcfg: Any, cfg: Any) -> tuple[int, tuple[int, ...]]:
    """One chunk's bytes and LMCache's kv_shape for the vLLM loader, from LMCache's own create_lmcache_metadata
    (lmcache/integration/vllm/utils.py: kv_shape (num_layer, 1 if MLA else 2, chunk, num_kv_head, head_size) in
    vLLM's KV torch dtype), handed the config read from this file instead of its LMCACHE_CONFIG_FILE singleton."""
    from unittest import mock

    import lmcache.integration.vllm.utils as lmcache_vllm
    import torch

    with mock.patch.object(lmcache_vllm, "lmcache_get_or_create_config", lambda: cfg):
        metadata, _ = lmcache_vllm.create_lmcache_metadata(vllm_config=vcfg)
    shape = tuple(int(x) for x in metadata.kv_shape)
    return math.prod(shape) * torch.empty((), dtype=metadata.kv_dtype).element_size(), shape


def lmcache_check(e: Emit, row: Row, tmp: Path) -> None:
    from lmcache.v1.config import LMCacheEngineConfig

    path = tmp / "lmcache.yaml"
    path.write_text(e.text)
    try:
        with quiet():
            cfg = LMCacheEngineConfig.from_file(str(path))
    except Exception as exc:  # noqa: BLE001
        row.verdict, row.message = "rejected", one_line(exc)
        return
    row.verdict = "accepted"
    disk = bool(cfg.local_disk) and cfg.max_local_disk_size > 0
    size = cfg.max_local_disk_size if disk else cfg.max_local_cpu_size
    tier_bytes = int(size * 1024**3)
    stated = parse_stated(e.text)
    if stated is not None and stated.tier_bytes is not None:
        status, diff = compare(stated.tier_bytes, tier_bytes, "B")
        row.notes.append(f"{'max_local_disk_size' if disk else 'max_local_cpu_size'} {size} x 1024^3 = "
                         f"{tier_bytes:,} B per worker vs {stated.tier_bytes:,} B stated"
                         + (f" ({diff})" if diff else ""))
    vcfg = e.shared.get("vllm_config")
    if vcfg is None:
        row.message = "tokens not recomputed: no vLLM config from the lmcache-vllm.sh loader"
        return
    with quiet():
        chunk_bytes, shape = lmcache_chunk_bytes(vcfg, cfg)
    row.recomputed = tier_bytes // chunk_bytes * cfg.chunk_size
    row.notes.append(f"{tier_bytes // chunk_bytes:,} chunks of {cfg.chunk_size} tokens x {chunk_bytes:,} B "
                     f"(LMCache's kv_shape {shape}, create_lmcache_metadata on the vLLM loader's config)")


# ----------------------------------------------------------------------------------------------- driver

CHECKERS: dict[str, Callable[[], Optional[str]]] = {"vllm": vllm_absent, "sglang": sglang_absent,
                                                    "lmcache": lmcache_absent}
TRTLLM_ABSENT = ("TensorRT-LLM does not install from PyPI here: not checked (its KvCacheConfig fields, from its "
                 "source, are in docs/engine-memory.md)")

_DEVICE_LINE = re.compile(r"^(\s*device\s*=\s*)(\"?)([A-Za-z0-9_.-]+)(\"?)", re.MULTILINE)


_LAUNCHER = re.compile(r"(?:lmcache-)?(vllm|sglang)(?:-host\d+)?\.sh")


def engine_of(name: str) -> str:
    """Which engine reads an emitted file (`vllm.sh`, `lmcache-sglang.sh`, each host's `vllm-host1.sh`)."""
    m = _LAUNCHER.fullmatch(name)
    if m is not None:
        return m.group(1)
    if name == "lmcache.yaml":
        return "lmcache"
    return "trtllm"


def spec_devices(text: str, catalog_ids: Sequence[str], wanted: Optional[Sequence[str]]) -> list[Optional[str]]:
    """The devices a spec is checked on: None (as written) when it names a device outside the catalog, then
    every catalog device (or the --device ones)."""
    written = {m.group(3) for m in _DEVICE_LINE.finditer(text)}
    ids = list(wanted) if wanted else list(catalog_ids)
    out: list[Optional[str]] = [None] if (written - set(catalog_ids)) and not wanted else []
    return out + ids


def on_device(text: str, device: Optional[str]) -> str:
    return text if device is None else _DEVICE_LINE.sub(lambda m: f"{m.group(1)}{m.group(2)}{device}{m.group(4)}", text)


@dataclass
class Skip:
    spec: str
    device: str
    reason: str


def plans(spec: str, device: Optional[str]) -> tuple[list[Any], Optional[str]]:
    """kvplan's plans of `spec` on `device` (None: as written), or why there is none."""
    from kvplan.base.codes import Severity
    from kvplan.base.errors import KvplanError
    from kvplan.lang import check_source
    from kvplan.planner import plans_for

    text = on_device(Path(spec).read_text(), device)
    result = check_source(text, spec, ())
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    if errors:
        d = errors[0]
        return [], f"{d.code} {d.message}"
    try:
        got = plans_for(result)
    except KvplanError as exc:
        return [], str(exc)
    kept = [p for p in got if not any(u.constraint in ("fits", "layout", "engine") for u in p.unmet)]
    if not kept:
        return [], "no plan: " + "; ".join(sorted({u.constraint for p in got for u in p.unmet}))
    return kept, None


def model_config_of(plan: Any, spec: str) -> Optional[Path]:
    """A spec's own model block names its config.json; catalog models are found by hub id (ModelDirs)."""
    src = getattr(plan.scenario.model, "source", "") or ""
    for cand in (Path(src), Path(spec).parent / src):
        if src.endswith(".json") and cand.is_file():
            return cand
    return None


def emits(spec: str, device: Optional[str], plan: Any, dirs: ModelDirs, sizing: str = "fill") -> Iterator[Emit]:
    from kvplan.app.replan import emit
    from kvplan.engines import common

    ref = common.model_ref(plan)
    cfg = dirs.get(ref, model_config_of(plan, spec))
    dev = plan.scenario.device.id
    for target in TARGETS:
        out = emit(plan, target, spec=spec, sizing=sizing)  # type: ignore[arg-type]
        rows = {k: float(v.value) for k, v in out.capacity}
        shared: dict[str, Any] = {}
        for f in sorted(out.files, key=lambda f: f.name):
            eng = engine_of(f.name)
            prefix = f"{eng}." if f.name.startswith("lmcache-") and eng in ("vllm", "sglang") else ""
            cap = {k[len(prefix):]: v for k, v in rows.items() if k.startswith(prefix)} if prefix else rows
            label = f"{spec}:{plan.scenario.name}@{device or dev}/{target}/{f.name}"
            if eng == "trtllm" and not f.name.endswith(".yaml"):
                continue
            yield Emit(label, f.name, f.text, dev, ref, cfg, cap, shared)


def check(e: Emit, tmp: Path, absent: dict[str, Optional[str]]) -> Row:
    eng = engine_of(e.name)
    row = Row(e.label, eng)
    stated = parse_stated(e.text)
    # like with like: an SGLang file states one GPU's pool beside the capacity of all its DP-attention ranks
    row.stated = None if stated is None else stated.rank_tokens if stated.rank_tokens is not None else stated.tokens
    if eng == "trtllm":
        row.message = TRTLLM_ABSENT
        return row
    if absent.get(eng):
        row.message = f"not checked: {absent[eng]}"
        return row
    if eng == "vllm":
        vllm_check(e, row)
    elif eng == "sglang":
        sglang_check(e, row)
    else:
        lmcache_check(e, row, tmp)
    if row.verdict == "accepted":
        row.status, diff = compare(row.stated, row.recomputed, per_block=stated.block if stated else None)
        if row.mismatches:
            row.status = "MISMATCH"
        row.notes[:0] = [d for d in (diff, *row.mismatches) if d]
    return row


def render(rows: Sequence[Row], skips: Sequence[Skip]) -> str:
    """The table: one line per file, its details indented below; then the specs that have no plan somewhere."""
    def num(x: Optional[int]) -> str:
        return "-" if x is None else f"{x:,}"

    lines = [f"{'file':<90} {'engine':<8} {'verdict':<12} {'stated tokens':>14} {'engine tokens':>14} status"]
    for r in sorted(rows, key=lambda r: r.file):
        lines.append(f"{r.file:<90} {r.engine:<8} {r.verdict:<12} {num(r.stated):>14} {num(r.recomputed):>14} "
                     f"{r.status}")
        for detail in ([r.message] if r.message else []) + r.notes:
            lines.append(f"    {detail}")
    for s in sorted(skips, key=lambda s: (s.spec, s.device)):
        lines.append(f"skipped {s.spec} on {s.device}: {s.reason}")
    return "\n".join(lines) + "\n"


def summary(rows: Sequence[Row], skips: Sequence[Skip]) -> str:
    count = {k: sum(1 for r in rows if r.verdict == k) for k in ("accepted", "rejected", "not checked")}
    ok = sum(1 for r in rows if r.status == "ok")
    bad = sum(1 for r in rows if r.status == "MISMATCH")
    by = ", ".join(f"{e} {sum(1 for r in rows if r.engine == e and r.finding())}" for e in ENGINES)
    hicache = sum(1 for r in rows if any("no added capacity" in n for n in r.notes))
    return (f"engine check: {len(rows)} files: {count['accepted']} accepted, {count['rejected']} rejected, "
            f"{count['not checked']} not checked; capacity {ok} ok, {bad} MISMATCH; findings by engine: {by}; "
            f"{hicache} HiCache host pools no larger than the device pool; "
            f"{len(skips)} spec/device pairs without a plan")


def run(specs: Sequence[str], devices: Optional[Sequence[str]], engines: Sequence[str],
        keep: Optional[Path], out: Callable[[str], None], sizing: str = "fill") -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.disable(logging.WARNING)
    from kvplan import catalog

    absent = {e: CHECKERS[e]() for e in CHECKERS if e in engines}
    for e, why in sorted(absent.items()):
        if why:
            out(f"engine check: {e} absent: {why}")
    if all(absent.values()):
        out("engine check: could not run: none of vLLM, SGLang, LMCache is importable here")
        return 2
    ids = sorted(catalog.devices())
    rows: list[Row] = []
    skips: list[Skip] = []
    with tempfile.TemporaryDirectory(prefix="kvplan-engcheck-") as tmp:
        dirs = ModelDirs(Path(tmp) / "models")
        for spec in specs:
            for device in spec_devices(Path(spec).read_text(), ids, devices):
                got, why = plans(spec, device)
                if why:
                    skips.append(Skip(spec, device or "as written", why))
                for p in got:
                    for e in emits(spec, device, p, dirs, sizing):
                        if keep is not None:
                            dest = keep / re.sub(r"[^A-Za-z0-9._@-]+", "_", e.label)
                            dest.parent.mkdir(parents=True, exist_ok=True)
                            dest.write_text(e.text)
                        if engine_of(e.name) in engines:
                            rows.append(check(e, Path(tmp), absent))
    out(render(rows, skips) + summary(rows, skips))
    return 1 if any(r.finding() for r in rows) else 0


def default_specs() -> list[str]:
    return sorted(str(Path(p).relative_to(ROOT)) for pat in DEFAULT_SPECS for p in glob.glob(str(ROOT / pat)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/engine_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", help="specs to emit (default: examples/*.kvp, tests/data/emit/*.kvp, "
                    "tests/data/engine-check/*.kvp)")
    ap.add_argument("--device", action="append", help="a catalog device (repeatable; default: all of them)")
    ap.add_argument("--engine", default=",".join(ENGINES), help="engines to check, comma-separated")
    ap.add_argument("--keep", type=Path, help="also write every emitted file under this folder")
    ap.add_argument("--sizing", choices=("fill", "exact"), default="fill",
                    help="kvplan emit --sizing: the engine's usual memory fraction (default) or the plan's own pool")
    args = ap.parse_args(argv)
    engines = [e.strip() for e in args.engine.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        print(f"tools/engine_check.py: unknown engine '{unknown[0]}' (known: {', '.join(ENGINES)})", file=sys.stderr)
        return 2
    if not args.specs:
        os.chdir(ROOT)
    specs = args.specs or default_specs()
    missing = [s for s in specs if not Path(s).is_file()]
    if missing:
        print(f"tools/engine_check.py: {missing[0]}: no such spec file", file=sys.stderr)
        return 2
    return run(specs, args.device, engines, args.keep, print, args.sizing)


if __name__ == "__main__":
    sys.exit(main())
