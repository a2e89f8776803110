"""vLLM 0.33.0: the plan as a `vllm serve` command line, written to vllm.sh.

The KV pool is set with `--kv-cache-memory-bytes` (per GPU), not with
`--gpu-memory-utilization`: the byte count fixes the number of blocks exactly
(num_blocks = bytes // bytes per block, engines.md), whereas the utilization
fraction leaves the pool to whatever the activation peak and non-torch memory
turn out to be at start-up, which kvplan can only assume. The equivalent
utilization under the assumed reserves is written as a comment.

A host tier uses vLLM's own offloading (`--kv-offloading-size`, summed over TP
ranks, with `--kv-offloading-backend native`); an SSD or remote tier goes
through LMCache (`--kv-transfer-config` with LMCacheConnectorV1 and the
lmcache.yaml written beside the script). `--cpu-offload-gb` offloads weights
and `--swap-space` is gone in 0.33.0: neither is ever written.
"""

from __future__ import annotations

import json
import math

from kvplan.base.evidence import derived
from kvplan.engines import common
from kvplan.engines.common import Backend, EmitRequest, Emitted, EmittedFile, Flag

KV_DTYPES = {
    # bf16 is written `bfloat16`, not `auto`: auto follows the checkpoint's dtype, which the plan does not
    # control (an FP8 checkpoint's auto need not be 16-bit); the explicit name is the plan's choice.
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8": "fp8",                     # = fp8_e4m3
    "int8": "int8_per_token_head",    # plain `int8` is rejected
    "int4": "int4_per_token_head",    # plain `int4` is rejected
    "fp4": "nvfp4",
}

FLAGS = ("--kv-cache-dtype", "--block-size", "--enable-prefix-caching", "--disable-prefix-caching",
         "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len", "--max-num-seqs",
         "--kv-cache-memory-bytes", "--kv-offloading-size", "--kv-offloading-backend",
         "--kv-transfer-config", "kv_connector", "kv_role", "LMCacheConnectorV1", "kv_both")

LMCACHE_CONNECTOR = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def _gib_up(x: float) -> int:
    return max(1, math.ceil(x / common.GiB))


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "vllm.sh", label: str = "") -> Emitted:
    """vllm.sh for the plan; `via_lmcache` puts any tier behind LMCache (the lmcache target)."""
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, BACKEND)
    sz = common.size(p, mapped, req.reserves)
    notes = common.model_notes(p, BACKEND)
    kv_bytes = math.ceil(sz.pool)
    engine_blocks = kv_bytes // math.ceil(sz.block_bytes)
    engine_tokens = engine_blocks * sz.block
    util = math.ceil((sz.weights + kv_bytes + sz.reserves) / sz.total * 1e4) / 1e4
    util_text = f"{util:.4f}"
    if sc.model.kv_kind == "mla" and mapped.dtype.id in ("fp8", "fp4"):
        notes.append(f"docs/engines.md also lists {'fp8' if mapped.dtype.id == 'fp8' else 'nvfp4'}_ds_mla without its "
                     f"page layout; kvplan writes {mapped.dtype_name}, whose page bytes follow the docs/engines.md formula")

    flags: list[Flag] = [
        ("--kv-cache-dtype", mapped.dtype_name),
        ("--block-size", str(mapped.block)),
        ("--enable-prefix-caching" if p.prefix_caching else "--disable-prefix-caching", None),
        ("--tensor-parallel-size", str(p.tp)),
    ]
    if p.pp > 1:
        flags.append(("--pipeline-parallel-size", str(p.pp)))
    flags += [("--max-model-len", str(sc.context)), ("--max-num-seqs", str(sc.batch)),
              ("--kv-cache-memory-bytes", str(kv_bytes))]
    env: list[tuple[str, str]] = []
    tier_lines: list[str] = []
    tier_gpu = sz.tier_bytes_per_gpu()
    if mapped.tier != "none":
        if mapped.tier == "host" and not via_lmcache:
            size = _gib_up(tier_gpu * p.tp)
            flags += [("--kv-offloading-size", str(size)), ("--kv-offloading-backend", "native")]
            tier_lines.append(f"# host tier: {size} GiB summed over {p.tp} TP rank{'s' if p.tp > 1 else ''} "
                              f"({common.fmt_int(tier_gpu)} B per GPU, the plan's tier bytes in whole blocks)")
        else:
            flags.append(("--kv-transfer-config", json.dumps(LMCACHE_CONNECTOR, separators=(",", ":"))))
            env.append(("LMCACHE_CONFIG_FILE", common.beside("lmcache.yaml")))
            line, more = common.lmcache_tier(mapped.tier, via_lmcache)
            tier_lines.append(line)
            notes += more
    head = [common.header(req, label or BACKEND.label),
            *common.summary_comments(sz, engine_tokens),
            f"# --kv-cache-memory-bytes fixes the pool ({common.fmt_int(engine_blocks)} blocks); under the assumed "
            f"reserves it equals --gpu-memory-utilization {util_text}",
            *tier_lines]
    text = common.shell_script(head, ["vllm", "serve", common.model_ref(p)], flags, env)
    how = (f"--kv-cache-memory-bytes {kv_bytes} // {common.fmt_int(sz.block_bytes)} B per block "
           f"× {sz.block} tokens (docs/engines.md)")
    rows = common.capacity(sz, engine_tokens, how) + (
        ("gpu_memory_utilization_equivalent", derived(util, "1", "(weights + KV pool + reserves) / memory, rounded up to 0.0001")),)
    return common.finish(BACKEND, mapped, sz, [EmittedFile(name, text)], rows, notes)


BACKEND = Backend(
    id="vllm", engine="vLLM", version="0.33.0", kv_dtypes=KV_DTYPES, block_sizes=(16, 32, 64, 128),
    default_block=16, prefix_caching=True, tiers=("host", "ssd", "remote"), eviction=False, flags=FLAGS,
    source="docs/engines.md § vLLM 0.33.0 (vllm/config/cache.py, vllm/engine/arg_utils.py, vllm/config/kv_transfer.py)",
    build=lambda req: render(req),
)
