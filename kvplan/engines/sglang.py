"""SGLang 0.5.23: the plan as a `python -m sglang.launch_server` command line, written to sglang.sh.

`--mem-fraction-static` is weights plus KV pool as a fraction of total memory
(engines.md), so the pool the engine gets is fraction × memory − weights. The
fraction is rounded UP with just enough decimals that the rounding adds less
than one page of pool: the engine allocates exactly the plan's pages. The
assumed activation and runtime reserves only decide whether it fits.

Prefix caching (the radix cache) is on by default: `--disable-radix-cache` is
written only when the plan turns it off. A host tier is SGLang's hierarchical
cache (`--enable-hierarchical-cache --hicache-size GB`, per rank); an SSD or
remote tier goes through LMCache (`--enable-lmcache --lmcache-config-file`).
"""

from __future__ import annotations

import math
from fractions import Fraction

from kvplan.base.evidence import derived
from kvplan.engines import common
from kvplan.engines.common import Backend, EmitRequest, Emitted, EmittedFile, Flag

KV_DTYPES = {
    "bf16": "bfloat16",
    # SGLang names no float16 KV dtype; `auto` follows the checkpoint's dtype, which is fp16 exactly when
    # the checkpoint is (a warning says so when the weights are not fp16).
    "fp16": "auto",
    "fp8": "fp8_e4m3",
    "fp4": "nvfp4",
}

FLAGS = ("--model-path", "--kv-cache-dtype", "--page-size", "--mem-fraction-static", "--tp-size",
         "--context-length", "--max-running-requests", "--disable-radix-cache", "--enable-hierarchical-cache",
         "--hicache-size", "--enable-lmcache", "--lmcache-config-file")


def pool_tokens(fraction: Fraction, total: float, weights: float, token_bytes: float, page: int) -> int:
    """engines.md: the KV pool is fraction × total − weights; it holds whole pages of tokens."""
    pool = fraction * Fraction(total) - Fraction(weights)
    if pool <= 0:
        return 0
    return math.floor(pool / Fraction(token_bytes) / page) * page


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "sglang.sh", label: str = "") -> Emitted:
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, BACKEND)
    sz = common.size(p, mapped, req.reserves)
    notes = common.model_notes(p, BACKEND)
    findings: list[str] = []
    if mapped.dtype_name == "auto" and sc.weights.id != mapped.dtype.id:
        notes.append(f"KV dtype {mapped.dtype.id} is written `auto` (SGLang has no explicit name for it); auto "
                     f"follows the checkpoint's dtype, and the weights are {sc.weights.id}")
    frac_text, frac = common.fraction_up(sz.weights + sz.pool, sz.total, sz.block_bytes)
    engine_tokens = pool_tokens(frac, sz.total, sz.weights, sz.layout.token_bytes, sz.block)
    ceiling = 1.0 - sz.reserves / sz.total
    flags: list[Flag] = [
        ("--model-path", common.model_ref(p)),
        ("--kv-cache-dtype", mapped.dtype_name),
        ("--page-size", str(mapped.block)),
        ("--mem-fraction-static", frac_text),
        ("--tp-size", str(p.tp)),
        ("--context-length", str(sc.context)),
        ("--max-running-requests", str(sc.batch)),
    ]
    if p.pp > 1:
        findings.append(f"pipeline parallelism of {p.pp} stages is not written: docs/engines.md names "
                        f"no SGLang pipeline flag; the command runs --tp-size {p.tp} on one stage — add the "
                        "pipeline size yourself")
    if not p.prefix_caching:
        flags.append(("--disable-radix-cache", None))
    tier_lines: list[str] = []
    if mapped.tier != "none":
        if mapped.tier == "host" and not via_lmcache:
            gb = max(1, math.ceil(sz.tier_bytes_per_gpu() / 1e9))
            flags += [("--enable-hierarchical-cache", None), ("--hicache-size", str(gb))]
            tier_lines.append(f"# host tier: --hicache-size {gb} GB per rank ({common.fmt_int(sz.tier_bytes_per_gpu())}"
                              " B, the plan's tier bytes per GPU in whole pages)")
        else:
            flags += [("--enable-lmcache", None), ("--lmcache-config-file", common.beside("lmcache.yaml"))]
            line, more = common.lmcache_tier(mapped.tier, via_lmcache)
            tier_lines.append(line)
            notes += more
    head = [common.header(req, label or BACKEND.label),
            *common.summary_comments(sz, engine_tokens),
            f"# --mem-fraction-static = (weights + KV pool) / memory, rounded up by less than one page; the assumed "
            f"reserves leave at most {ceiling:.4f}",
            *tier_lines]
    text = common.shell_script(head, ["python", "-m", "sglang.launch_server"], flags)
    how = (f"(--mem-fraction-static {frac_text} × memory − weights) / {common.fmt_int(sz.layout.token_bytes)} B "
           f"per token, whole pages of {sz.block} (docs/engines.md)")
    rows = common.capacity(sz, engine_tokens, how) + (
        ("mem_fraction_static", derived(float(frac), "1", "(weights + KV pool) / memory, rounded up")),)
    return common.finish(BACKEND, mapped, sz, [EmittedFile(name, text)], rows, notes, findings)


BACKEND = Backend(
    id="sglang", engine="SGLang", version="0.5.23", kv_dtypes=KV_DTYPES, block_sizes=(1, 16, 32, 64, 128),
    default_block=1, prefix_caching=True, tiers=("host", "ssd", "remote"), eviction=False, flags=FLAGS,
    source="docs/engines.md § SGLang 0.5.23",
    build=lambda req: render(req),
)
