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

The engine's facts (dtype names, page sizes, defaults, setting names) are its catalog record
(kvplan.catalog.engines); this module holds the code that writes and reads them.
`read` reads a `python -m sglang.launch_server --flag ...` line back for `kvplan import --from sglang`.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kvplan.base.evidence import derived
from kvplan.catalog.engines import get_engine
from kvplan.engines import common
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile, Flag
from kvplan.engines.flagparse import (
    CHUNK,
    POOL_CAP,
    DeploymentReadError,
    Read,
    ReadFlag,
    bounded,
    context_flag,
    cut,
    digits_in_range,
    exp2,
    fraction_flag,
    kv_flag,
    model_flag,
    note_flag,
    parse_flags,
    plain_tokens,
    quantization,
    split_command,
    store,
    strip_env,
    tokens_in_range,
    weights_dtype,
)

ENGINE = get_engine("sglang")
F = ENGINE.flags
#: kvplan dtype -> SGLang's --kv-cache-dtype name (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names

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
    if sc.memory_fraction is not None:  # the deployment's own fraction, pinned (kvplan import)
        frac_text, frac = f"{sc.memory_fraction:g}", Fraction(str(sc.memory_fraction))
    # with DP attention every attention group's ranks keep a pool of their own (pin.attention_dp)
    engine_tokens = pool_tokens(frac, sz.total, sz.weights, sz.layout.token_bytes, sz.block) * sc.attention_dp
    ceiling = 1.0 - sz.reserves / sz.total
    flags: list[Flag] = [
        ("--model-path", common.model_ref(p)),
        (F.kv_dtype, mapped.dtype_name),
        (F.block, str(mapped.block)),
        ("--mem-fraction-static", frac_text),
        (F.tp, str(p.tp)),
        (F.context, str(sc.context_bound)),
        (F.batch, str(sc.batch)),
        *common.pinned_engine_flags(sc, (None, "--chunked-prefill-size", "--dp-size", "--enable-dp-attention")),
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
    launch = common.Launch(("python", "-m", "sglang.launch_server"), tuple(flags), (), tuple(head[1:]))
    text = common.shell_script(head, launch.program, launch.flags)
    how = (f"(--mem-fraction-static {frac_text} × memory − weights) / {common.fmt_int(sz.layout.token_bytes)} B "
           f"per token, whole pages of {sz.block} (docs/engines.md)")
    rows = common.capacity(sz, engine_tokens, how) + (
        ("mem_fraction_static", derived(float(frac), "1", "(weights + KV pool) / memory, rounded up")),)
    return common.finish(BACKEND, mapped, sz, [EmittedFile(name, text)], rows, notes, findings, launch=launch)


# --------------------------------------------------------------- read back (kvplan import)

SGLANG_IRRELEVANT = frozenset({"--host", "--port", "--served-model-name", "--api-key", "--log-level",
                               "--tokenizer-path", "--chat-template", "--random-seed", "--revision", "--download-dir",
                               "--tool-call-parser", "--reasoning-parser", "--load-format"})
SGLANG_IRRELEVANT_FLAGS = frozenset({"--trust-remote-code", "--log-requests", "--enable-metrics",
                                     "--disable-cuda-graph", "--skip-server-warmup"})
_SGLANG_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
_SGLANG_MULT = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def sglang_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as SGLang reads it: case-sensitive SI (`128k`, `1M`) and IEC (`128Ki`) suffixes."""
    text = value.strip()
    m = _SGLANG_INT.fullmatch(text)
    hint = "SGLang's suffixes are case-sensitive: k M G T (powers of 1000) or Ki Mi Gi Ti (powers of 1024)"
    if m is None:
        if re.fullmatch(r"\d+(\.\d+)?[A-Za-z]+", text):
            raise DeploymentReadError(f"{flag} '{cut(value)}': SGLang refuses this suffix", help=hint)
        return plain_tokens(value, flag, "SGLang", hint), ""
    number, suffix = m.groups()
    digits_in_range(number, value, flag)
    if suffix.endswith("i"):
        if "." in number:
            raise DeploymentReadError(f"{flag} '{cut(value)}': SGLang refuses a decimal before {suffix}", help=hint)
        n = int(number) * _SGLANG_MULT[suffix]
        return tokens_in_range(n, value, flag), f"SGLang reads {suffix} as 2^{exp2(suffix)}: {n:,} tokens"
    n = int(float(number) * _SGLANG_MULT[suffix])
    return tokens_in_range(n, value, flag), ""


def _dp_attention(r: Read, v: str, w: str) -> None:
    r.dp_attention = w


def _chunked_prefill(r: Read, v: str, w: str) -> None:
    """--chunked-prefill-size N: at most N prompt tokens per step; -1 turns chunking off (SGLang's
    server_args), and then no per-step limit is imported."""
    if v.strip() == "-1":
        r.note(f"{w}: chunked prefill is off; {CHUNK}")
        return
    store("max_batched_tokens", lambda x, flag: sglang_tokens(x, flag)[0])(r, v, w)


def _sglang_table() -> list[ReadFlag]:
    tier_sizing = "kvplan sizes the tier from the reuse economics"
    return [
        ReadFlag(("--model-path", "--model"), True, model_flag),
        ReadFlag((F.kv_dtype,), True, kv_flag(ENGINE.kv_reads)),
        ReadFlag((F.block,), True, store("block_size", bounded("block_size"))),
        ReadFlag(("--disable-radix-cache",), False, store("prefix_caching", value=False)),
        ReadFlag((F.context,), True, context_flag(sglang_tokens)),
        ReadFlag((F.batch,), True, store("batch", bounded("batch"))),
        ReadFlag((F.tp, "--tp"), True, store("tp", bounded("tp"))),
        ReadFlag((F.pp, "--pp"), True, store("pp", bounded("pp"))),
        ReadFlag(("--enable-hierarchical-cache",), False, store("tier", value="host")),
        ReadFlag(("--enable-lmcache",), False, store("tier", value="host")),
        ReadFlag(("--lmcache-config-file",), True, note_flag("LMCache settings are read by LMCache, not imported")),
        ReadFlag(("--hicache-storage-backend",), True,
              note_flag("a storage tier below host memory; the .kvp pins the host tier only")),
        ReadFlag(("--hicache-ratio",), True,
                 note_flag(f"host tier size as a multiple of the device pool; {tier_sizing}")),
        ReadFlag(("--hicache-size",), True, note_flag(f"host tier size in GB; {tier_sizing}")),
        ReadFlag(("--hicache-write-policy",), True, note_flag("how pages reach the host tier; not modelled")),
        ReadFlag(("--radix-eviction-policy",), True, note_flag("which cached prefixes leave first; not modelled")),
        ReadFlag(("--mem-fraction-static",), True, fraction_flag),
        ReadFlag(("--max-total-tokens",), True, note_flag(POOL_CAP)),
        ReadFlag(("--attention-backend",), True,
                 note_flag("the attention kernel; see `kvplan emit --target flashinfer`")),
        ReadFlag(("--dp-size", "--dp"), True, store("dp", bounded("tp"))),
        ReadFlag(("--enable-dp-attention",), False, _dp_attention),
        ReadFlag(("--chunked-prefill-size",), True, _chunked_prefill),
        ReadFlag(("--dtype",), True, weights_dtype),
        ReadFlag(("--quantization",), True, quantization),
    ]


def read(text: str, base_dir: str = ".", where: str = "config") -> Read:
    """A `python -m sglang.launch_server --flag ...` line (or `sglang serve ...`) in kvplan's terms."""
    words = strip_env(split_command(text))
    if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m" and words[2].startswith("sglang"):
        words = words[3:]
    elif words[:2] == ["sglang", "serve"]:
        words = words[2:]
    elif words[:1] == ["sglang.launch_server"]:
        words = words[1:]
    r = Read(ENGINE.id)

    def positional(w: str) -> None:
        r.warn(f"'{w}': SGLang takes the model as --model-path; not imported")

    parse_flags(words, _sglang_table(), r, SGLANG_IRRELEVANT, SGLANG_IRRELEVANT_FLAGS, lambda f: f, positional)
    r.defaults("SGLang's radix cache is on by default", ENGINE.default_block, f"SGLang's default {F.block} on CUDA",
               f"{F.kv_dtype} auto (default)")
    return r


BACKEND = common.engine_backend(
    ENGINE, flags=FLAGS, source="docs/engines.md § SGLang 0.5.23", build=lambda req: render(req), read=read,
)
