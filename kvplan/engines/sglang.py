"""SGLang 0.5.23: the plan as a `python -m sglang.launch_server` command line, written to sglang.sh.

SGLang sizes its KV pool from the free memory it measures after CUDA and NCCL start-up, not from the
device: pre_model_load × fraction − weights, in whole pages of its cell (docs/engine-memory.md § SGLang).
That arithmetic is below the planner, in kvplan.model.pools.sglang (its docstring has the formulas and the
source lines), so that the planner fits each candidate against the pool this module writes: advise, lint and
sglang.sh agree by construction.

`--sizing fill` (the default) writes SGLang's own default fraction for the GPU (arg_groups/memory_hook.py:281-342,
modelled below) and states the capacity it buys; `--sizing exact` solves for the fraction that gives exactly the
plan's pool (whole pages). On AMD GPUs with the aiter attention backend and a context above 8,192 SGLang
multiplies the fraction by 0.85 (arg_groups/attention_hook.py:243-268): fill keeps that (it is SGLang's default
behaviour), exact writes fraction / 0.85 so that the engine's product is the plan's pool (the same effect as
SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION=1, without an environment variable the reader might drop).

Prefix caching (the radix cache) is on by default: `--disable-radix-cache` is
written only when the plan turns it off. A host tier is SGLang's hierarchical
cache (`--enable-hierarchical-cache --hicache-size GB`, per rank, 10^9 B): its host
pool holds copies of device pages (mem_cache/pool_host/base.py:205-246), so it is
sized to the device pool plus the plan's host-tier tokens. An SSD or remote tier
goes through LMCache (`--enable-lmcache --lmcache-config-file`).

The engine's facts (dtype names, page sizes, defaults, setting names) are its catalog record
(kvplan.catalog.engines); this module holds the code that writes and reads them.
`read` reads a `python -m sglang.launch_server --flag ...` line back for `kvplan import --from sglang`.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Optional

import attrs

from kvplan.base.evidence import Value, assumed, derived
from kvplan.base.units import fmt_bytes
from kvplan.catalog.engines import block_sizes_for, get_engine, kv_refusal
from kvplan.engines import common, launchers, speculative
from kvplan.engines.common import EmitRequest, Emitted, Flag
from kvplan.engines.flagparse import (
    POOL_CAP,
    DeploymentReadError,
    Read,
    ReadFlag,
    cut,
    digits_in_range,
    exp2,
    model_flag,
    note_flag,
    parse_flags,
    plain_tokens,
    quantization,
    split_command,
    store,
    strip_env,
    table_readers,
    tokens_in_range,
    weights_dtype,
)
from kvplan.model.memory import GiB
from kvplan.model.pools import sglang as pools
from kvplan.model.pools.query import ceil_div, whole
from kvplan.model.pools.sglang import (  # the names the writer and the tests read here
    AITER_CONTEXT,
    AITER_SCALE,
    PoolShape,
    SglangMemory,
    fits_under,
    refusal,
)
from kvplan.planner.plan import Plan

ENGINE = get_engine("sglang")
F = ENGINE.flags
#: kvplan dtype -> SGLang's --kv-cache-dtype name (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names


# --------------------------------------------------------------- SGLang's memory arithmetic (kvplan.model.pools)

def page_sizes(p: Plan) -> tuple[int, ...]:
    """The --page-size values SGLang's default attention backend keeps on the plan's GPU: on Blackwell, trtllm_mha
    takes 16, 32, 64 or 128 and the MLA backends 32 or 64; any other value is changed to 64
    (arg_groups/overrides.py:1146-1199). Elsewhere the record's page sizes. The record holds them
    (Engine.blackwell_pages), so a plan made for SGLang already pages in one of them."""
    sc = p.scenario
    return block_sizes_for(ENGINE, sc.device, sc.model)


def pool_shape(p: Plan, dtype_id: str, page: int) -> PoolShape:
    """The pool SGLang builds for the plan's model (kvplan.model.pools.sglang.pool_shape)."""
    return pools.pool_shape(common.pool_query(p, dtype_id, page))


def sglang_memory(req: EmitRequest, sz: common.Sizing, dtype_id: str, cap: Optional[int] = None) -> SglangMemory:
    """--mem-fraction-static and the pool it gives for the plan's pool (kvplan.model.pools.sglang.memory_for);
    `cap` the --max-running-requests written, where not the plan's batch (SGLang sizes by it: the request-capped
    sliding-window pool, the decode CUDA graphs' reserve)."""
    p = req.plan
    q = common.pool_query(p, dtype_id, sz.block, req.reserves)
    if cap is not None:
        q = attrs.evolve(q, batch=cap)
    return pools.memory_for(q, tokens=sz.blocks * sz.block, memory_fraction=p.scenario.memory_fraction,
                            sizing=req.sizing)


def _refused_note(p: Plan, mapped: common.Mapped) -> list[str]:
    sc = p.scenario
    why = kv_refusal(ENGINE, p.kv_dtype.id, sc.device, sc.model)
    if why is None or mapped.dtype.id == p.kv_dtype.id:
        return []
    return [f"kv_dtype {p.kv_dtype.id}: {why} ({sc.device.id}, {sc.model.id}); written {mapped.dtype_name}"]


def _hicache(sz: common.Sizing, mem: SglangMemory) -> tuple[int, int, int]:
    """(--hicache-size GB, host pool tokens, tokens it adds): the host pool mirrors device pages, so it must
    hold the device pool plus the plan's host-tier tokens (pool_host/base.py:205-246: GB × 10^9 // cell, then
    one padding page)."""
    tier = ceil_div(sz.tier_tokens, sz.block) * sz.block
    gb = max(1, math.ceil((mem.tokens + tier) * mem.cell / 1e9))
    host = (int(gb * 1e9 // mem.cell) // mem.page + 1) * mem.page
    return gb, host, max(0, host - mem.tokens)


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "sglang.sh", label: str = "") -> Emitted:
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, attrs.evolve(common.runnable(BACKEND, ENGINE, p), block_sizes=page_sizes(p)))
    sz, notes = _sizing(req, mapped)
    notes += launchers.pinned_length_note(sc, F.context)
    findings: list[str] = []
    if mapped.dtype_name == "auto" and sc.weights.id != mapped.dtype.id:
        notes.append(f"KV dtype {mapped.dtype.id} is written `auto` (SGLang has no explicit name for it); auto "
                     f"follows the checkpoint's dtype, and the weights are {sc.weights.id}")
    findings += _refused_note(p, mapped)
    mem, cap = _capped(req, sz, mapped.dtype.id)
    flags: list[Flag] = [
        ("--model-path", common.model_ref(p)),
        (F.kv_dtype, mapped.dtype_name),
        (F.block, str(mapped.block)),
        ("--mem-fraction-static", mem.fraction_text),
        (F.tp, str(p.tp)),
    ]
    if p.pp > 1:
        flags.append((F.pp, str(p.pp)))
    flags += [(F.context, str(sc.context_bound)), (F.batch, str(cap.value))]
    flags += common.pinned_engine_flags(sc, ENGINE.id)
    flags += speculative.sglang_flags(p)
    notes += speculative.draft_note(p)
    if not p.prefix_caching:
        flags.append(("--disable-radix-cache", None))
    flags += disaggregation_flags(sc.pool, p.prefix_caching, notes)
    memory = _memory_findings(mem, sz, sc.context)
    findings += memory
    # SGLang's own pool short of the plan's (or none at all): with a moved dtype, an error (common.finish)
    unfit = memory[0] if mem.tokens <= 0 else None if mem.fits else _unfit(mem, sz)
    tier_lines: list[str] = []
    host_memory = 0.0
    if mapped.tier != "none":
        if mapped.tier == "host" and not via_lmcache:
            gb, host, adds = _hicache(sz, mem)
            host_memory = gb * 1e9 * p.tp * p.pp  # --hicache-size is per rank
            flags += [("--enable-hierarchical-cache", None), ("--hicache-size", str(gb))]
            tier_lines.append(f"# host tier: --hicache-size {gb} GB per rank (10^9 B) = a host pool of {host:,} "
                              f"tokens; it mirrors the device pool's {mem.tokens:,}, so it adds {adds:,} tokens "
                              f"(the plan's host tier: {_contexts(adds, sc.context)} kept for reuse) beyond it")
        else:
            flags += [("--enable-lmcache", None), ("--lmcache-config-file", common.beside("lmcache.yaml"))]
            line, more = common.lmcache_tier(mapped.tier, via_lmcache)
            tier_lines.append(line)
            notes += more
    if sc.model.kv_kind == "mla" and p.tp > 1 and sc.attention_dp == 1:
        notes.append(f"MLA under plain TP: each of the {p.tp} ranks stores every request's latent, as planned; with "
                     f"--attn-dp-size {p.tp} each rank stores only its own requests ({p.tp}x the sequences)")
    # with DP attention every attention group's ranks keep a pool of their own (pin.attention_dp)
    total = mem.tokens * sc.attention_dp
    head = _head(req, label, sz, mem, total, [cap.line, *tier_lines])
    launch = common.Launch(("python", "-m", "sglang.launch_server"), tuple(flags), (), tuple(head[1:]),
                           host_memory)
    files = launchers.scripts(p, name, head, launch, on_host, _where, reads=lambda hosts: hosts.spans)
    how = (f"(pre_model_load {mem.pre:.6g} GiB × {mem.applied:.6g} − weights) // {_cell_text(mem)} B "
           f"per token, whole pages of {sz.block} (SGLang 0.5.23 kv_cache_configurator.py, pool_configurator.py)")
    rows = _rows(common.capacity(sz, total, how), mem, sz)
    return common.finish(BACKEND, mapped, None, files, rows, notes, findings, launch=launch, unfit=unfit)


#: The port SGLang's ranks meet on across nodes (`--dist-init-addr HOST:PORT`), as the LeaderWorkerSet project's
#: SGLang example sets it (kubernetes-sigs/lws:docs/examples/sglang/lws.yaml, v0.10.0).
DIST_PORT = 20000


def on_host(flags: tuple[Flag, ...], hosts: launchers.Hosts, h: launchers.Host) -> list[Flag]:
    """The flags of one host's server, as SGLang 0.5.23 runs a layout over nodes: a replica over nodes with
    --nnodes/--node-rank/--dist-init-addr (arg_groups/validation_hook.py:179: tp × pp divisible by the nodes), each
    set one replica; SGLang refuses data-parallel replicas over nodes (validation_hook.py:199), so replicas that fit
    a node run as one server per host with --dp-size of its own replicas, a router in front."""
    dp = ENGINE.data_parallel
    kept = [f for f in flags if f[0] != dp]
    if hosts.spans:
        at = common.Raw(f'"${launchers.HOST0_ADDR}:{DIST_PORT}"')
        return [*kept, ("--nnodes", str(len(hosts.hosts))), ("--node-rank", str(h.rank)), ("--dist-init-addr", at)]
    return kept + ([(dp, str(h.replicas))] if dp is not None and h.replicas > 1 else [])


def _where(hosts: launchers.Hosts, h: launchers.Host) -> str:
    if hosts.spans:
        runs = f"node rank {h.rank} of one replica's {len(hosts.hosts)}; " + (
            "it serves the API" if h.index == 0 else "its ranks join host 0's, which serves the API")
    else:
        runs = (f"{hosts.span(h)} of {hosts.replicas}, a server of its own: put a router (sglang-router) or load "
                "balancer in front of the hosts")
    return hosts.where(h, runs, reads=hosts.spans)


def _capped(req: EmitRequest, sz: common.Sizing, dtype_id: str) -> tuple[SglangMemory, launchers.Cap]:
    """SGLang's pool and --max-running-requests (launchers.concurrency_cap over what the pool holds): the pool sized
    again under the cap where it is not the plan's batch, and the cap kept within what that pool holds."""
    p = req.plan
    adp = p.scenario.attention_dp
    mem = sglang_memory(req, sz, dtype_id)
    cap = launchers.concurrency_cap(p, common.pool_sequences(sz, mem.tokens * adp), F.batch)
    if cap.value != p.scenario.batch:
        mem = sglang_memory(req, sz, dtype_id, cap.value)
        again = launchers.concurrency_cap(p, common.pool_sequences(sz, mem.tokens * adp), F.batch)
        if again.value < cap.value:  # the pool under the cap holds fewer: the cap is what that pool holds
            mem, cap = sglang_memory(req, sz, dtype_id, again.value), again
    return mem, cap


def _sizing(req: EmitRequest, mapped: common.Mapped) -> tuple[common.Sizing, list[str]]:
    """The GPU's sizing and the model's notes; under SGLang's hybrid sliding-window pool both count the
    full-attention layers' tokens."""
    p = req.plan
    sz = common.size(p, mapped, req.reserves)
    hybrid = pool_shape(p, mapped.dtype.id, sz.block).hybrid
    notes = common.model_notes(p, BACKEND, slots=not hybrid)
    if not hybrid:
        return sz, notes
    notes.append(f"SGLang sizes {p.scenario.model.architecture} with its hybrid sliding-window pool "
                 "(HybridSWAPoolConfigurator): token figures are the full-attention layers' tokens, and the "
                 "sliding-window layers keep a pool of their own (the SWA pool, stated per GPU)")
    return full_layer_sizing(p, sz), notes


def _head(req: EmitRequest, label: str, sz: common.Sizing, mem: SglangMemory, total: int,
          tier_lines: list[str]) -> list[str]:
    """sglang.sh's comment lines: the capacity, the per-GPU pool, how the fraction was chosen, the tiers."""
    aiter_line = (f"; SGLang's aiter backend multiplies it by {AITER_SCALE} at context > {AITER_CONTEXT:,} "
                  f"(arg_groups/attention_hook.py:243-268): {mem.applied:.6g} applied" if mem.aiter else "")
    return [common.header(req, label or BACKEND.label),
            f"# KV capacity (derived): {common.capacity_text(sz, total)}; the plan stores "
            f"{common.fmt_int(math.ceil(sz.plan_tokens))} tokens for its batch of {sz.batch}",
            f"# per GPU: KV pool {common.fmt_int(mem.tokens)} tokens × {common.fmt_int(mem.cell)} B per token"
            f"{_swa_text(mem)} = {fmt_bytes(mem.pool)} (derived), weights {fmt_bytes(sz.weights)} (derived), "
            f"pre_model_load {fmt_bytes(mem.pre * GiB)} = device {fmt_bytes(sz.total)} − runtime reserve "
            f"{fmt_bytes(sz.runtime.value)} (assumed)",
            f"# --mem-fraction-static {mem.fraction_text} ({req.sizing}): {mem.how}{aiter_line}; pool = "
            "pre_model_load × fraction − weights",
            *tier_lines]


def full_layer_sizing(p: Plan, sz: common.Sizing) -> common.Sizing:
    """`sz` in SGLang's hybrid pool's terms: the plan's tokens in one full-attention layer (each sequence's own
    context, kvplan.model.footprint.tokens_for_bytes of its bytes), where the shared figures count a token slot
    in every layer, the windowed ones included."""
    m = p.scenario.model
    tokens = whole(pools.full_tokens(m, sz.tokens, sz.batch))
    blocks = ceil_div(tokens / p.scenario.attention_dp, sz.block)
    plan_tokens = whole(pools.full_tokens(m, sz.plan_tokens, sz.batch))
    return attrs.evolve(sz, tokens=tokens, plan_tokens=plan_tokens, blocks=blocks)


def _pool_bytes(mem: SglangMemory, tokens: int) -> float:
    return mem.shape.bytes(tokens, mem.page) if mem.shape is not None else float(tokens * mem.cell)


def _cell_text(mem: SglangMemory) -> str:
    """The bytes each full-pool token costs, as the configurator divides by them."""
    if mem.shape is None:
        return common.fmt_int(mem.cell)
    if mem.shape.swa_fixed:
        return f"{common.fmt_int(mem.cell)} (after the SWA pool's {mem.shape.swa_fixed:,} tokens)"
    return f"({common.fmt_int(mem.cell)} + {mem.shape.ratio:g} × {common.fmt_int(mem.shape.swa_cell)})"


def _swa_how(shape: PoolShape) -> str:
    if shape.swa_fixed:
        return ("SGLang's SWARequestCapPoolConfigurator (--max-running-requests with the radix cache off): "
                "the requests' windows + eviction interval + pages, two prefill chunks and a page")
    return (f"SGLang's HybridSWAPoolConfigurator: --swa-full-tokens-ratio {shape.ratio:g} (its default) × the "
            "full-attention pool, whole pages")


def _swa_text(mem: SglangMemory) -> str:
    """The SWA pool beside the full-attention pool, for the per-GPU comment."""
    if mem.shape is None:
        return ""
    sh = mem.shape
    return (f" in the {sh.full_layers} full-attention layers + SWA pool {common.fmt_int(mem.swa_tokens)} tokens × "
            f"{common.fmt_int(sh.swa_cell)} B per token in the {sh.swa_layers} sliding-window layers "
            f"({_swa_how(sh)})")


def _contexts(tokens: int, context: int) -> str:
    n = tokens // max(1, context)
    return f"{n} context{'' if n == 1 else 's'} of {context:,} tokens"


def _memory_findings(mem: SglangMemory, sz: common.Sizing, context: int) -> list[str]:
    """A pool SGLang refuses to start with, one that holds no request, or one short of the plan's."""
    plan_tokens = sz.blocks * sz.block
    aiter_fix = (f"; on aiter SGLang multiplies an explicit fraction by {AITER_SCALE} too: write it ÷ {AITER_SCALE}"
                 " or export SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION=1" if mem.aiter else "")
    if mem.tokens <= 0:
        return [f"SGLang would refuse to start: \"{refusal(mem.applied, mem.pre, sz.weights)}\" (modelled: "
                f"weights {fmt_bytes(sz.weights)} per GPU, pre_model_load {fmt_bytes(mem.pre * GiB)}){aiter_fix}; "
                "more GPUs (--tp-size, --pp-size) fix it where no fraction below 1 does"]
    out = []
    floor = mem.shape.window + mem.page if mem.shape is not None else 0
    if mem.shape is not None and floor >= mem.swa_tokens:
        out.append(f"SGLang would refuse to start: \"SWA pool ({mem.swa_tokens} tokens) cannot hold even one "
                   f"request: the prefill admission floor is sliding_window_size ({mem.shape.window}) + page_size "
                   f"({mem.page}). Increase --swa-full-tokens-ratio or the total KV budget.\" "
                   "(model_executor/pool_configurator.py:198-216)")
    if not mem.fits:
        out.append(f"{_unfit(mem, sz)}; written {mem.fraction_text}, which holds {mem.tokens:,} of the plan's "
                   f"{plan_tokens:,} tokens")
    if mem.tokens < context:
        out.append(f"SGLang's pool of {mem.tokens:,} tokens holds no request at --context-length {context:,}: raise "
                   f"--mem-fraction-static{aiter_fix}, or use more GPUs")
    return out


def _unfit(mem: SglangMemory, sz: common.Sizing) -> str:
    """SGLang's pool short of the plan's: the fraction that would hold it, above 1, or the pinned one's pool."""
    if fits_under(mem.exact_text, mem.needed, mem.total):  # a pinned fraction whose pool is short of the plan's
        return (f"pin memory_fraction {mem.fraction_text} gives SGLang a pool short of the plan's: "
                f"--mem-fraction-static {mem.exact_text} holds it")
    return (f"the plan's pool does not fit under SGLang: it needs --mem-fraction-static {mem.exact_text} > 1 "
            f"(weights {fmt_bytes(sz.weights)} + KV {fmt_bytes(_pool_bytes(mem, sz.blocks * sz.block))} of "
            f"{fmt_bytes(mem.pre * GiB)} free after start-up)")


def _rows(rows: tuple[tuple[str, Value], ...], mem: SglangMemory,
          sz: common.Sizing) -> tuple[tuple[str, Value], ...]:
    """The shared capacity rows with SGLang's own pool, cell and fraction. The memory needed is the other
    engines' sum, weights + SGLang's pool + the assumed reserves: it fits the device exactly when the fraction
    leaves the activation reserve free (what it leaves is its own row)."""
    left = mem.pre * GiB * (1 - mem.applied) if mem.tokens > 0 else 0.0
    own = {
        "kv_pool_per_gpu": derived(mem.pool, "B", f"{mem.tokens:,} tokens × {mem.cell:,} B per token (SGLang's cell)"
                                                  f"{_swa_text(mem)}"),
        "memory_needed_per_gpu": derived(sz.weights + mem.pool + sz.reserves, "B", "weights + KV pool + reserves"),
    }
    out = tuple((k, own.get(k, v)) for k, v in rows)
    extra: list[tuple[str, Value]] = [
        ("fraction_leaves_per_gpu", derived(left, "B", "pre_model_load × (1 − fraction): free beside weights and "
                                                       "the pool for activations and CUDA graphs")),
        ("kv_cell_bytes", derived(mem.cell, "B", "SGLang's bytes per token, all layers on the GPU "
                                                 "(pool_configurator.py)")),
        ("pre_model_load", assumed(mem.pre * GiB, "B", "free memory after CUDA/NCCL start-up: device memory − "
                                                       "runtime reserve (--runtime-reserve)")),
        ("mem_fraction_static", derived(float(mem.fraction_text), "1", mem.how)),
    ]
    if mem.shape is not None:
        extra.append(("swa_pool_tokens", derived(mem.swa_tokens, "tokens", _swa_how(mem.shape))))
    if mem.reserved is not None:
        extra.append(("sglang_reserved_memory", assumed(mem.reserved, "B", "SGLang's reserved memory under its "
                                                                          "default rule; --activation-reserve")))
    return out + tuple(extra)


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


#: PD disaggregation in SGLang 0.5.23 (sglang/srt/arg_groups/fields/disagg.py:55-71): `--disaggregation-mode` null,
#: prefill or decode, and `--disaggregation-transfer-backend` (arg_groups/choices.py:122-129: mooncake, nixl, ascend,
#: fake, mori, mooncake_tcp; default mooncake). kvplan writes nixl, the NIXL library vLLM's NixlConnector also runs,
#: so that both engines' pools name one transfer stack; the two pools must name the same backend.
DISAGG_MODE = "--disaggregation-mode"
DISAGG_BACKEND = "--disaggregation-transfer-backend"
TRANSFER_BACKEND = "nixl"
_DISAGG_MODES = ("null", "prefill", "decode")
_DISAGG_BACKENDS = ("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp")


def disaggregation_flags(pool: str, prefix_caching: bool = False, notes: Optional[list[str]] = None) -> list[Flag]:
    """The flags of a disaggregated pool's server (the prefill or the decode pool; none for one that serves both);
    a decode pool planned with prefix caching adds to `notes` that SGLang turns its radix cache off."""
    if pool == "decode" and prefix_caching and notes is not None:
        notes.append("the decode pool's radix cache: SGLang 0.5.23 turns it off in decode mode unless "
                     "--disaggregation-decode-enable-radix-cache (arg_groups/pd_disaggregation_hook.py); its "
                     "prefixes arrive over the link")
    return [(DISAGG_MODE, pool), (DISAGG_BACKEND, TRANSFER_BACKEND)] if pool else []


def _disaggregation_mode(r: Read, v: str, w: str) -> None:
    if v not in _DISAGG_MODES:
        r.warn(f"{w}: SGLang takes {', '.join(_DISAGG_MODES)}; not imported")
    elif v != "null":
        r.pool = (v, w)
        r.warn(f"{w}: one pool of a disaggregated deployment, imported as this pool alone (`serving = "
               "disaggregated` plans both pools)")


def _transfer_backend(r: Read, v: str, w: str) -> None:
    if v not in _DISAGG_BACKENDS:
        r.warn(f"{w}: SGLang takes {', '.join(_DISAGG_BACKENDS)}")
    else:
        r.note(f"{w}: the KV moves between the pools through {v}")


def _sglang_table() -> list[ReadFlag]:
    tier_sizing = "kvplan sizes the tier from the reuse economics"
    return [
        ReadFlag(("--model-path", "--model"), True, model_flag),
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
        *table_readers(ENGINE.id, sglang_tokens),
        ReadFlag(("--max-total-tokens",), True, note_flag(POOL_CAP)),
        ReadFlag(("--attention-backend",), True,
                 note_flag("the attention kernel; see `kvplan emit --target flashinfer`")),
        ReadFlag(("--dtype",), True, weights_dtype),
        ReadFlag(("--quantization",), True, quantization),
        *(ReadFlag((flag,), True, _gather(flag)) for flag in SPECULATIVE_FLAGS),
        ReadFlag((DISAGG_MODE,), True, _disaggregation_mode),
        ReadFlag((DISAGG_BACKEND,), True, _transfer_backend),
    ]


#: SGLang's speculative flags kvplan reads back (kvplan.engines.speculative), gathered then read together.
SPECULATIVE_FLAGS = ("--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
                     "--speculative-num-draft-tokens", "--speculative-draft-model-path")


def _gather(flag: str) -> Callable[[Read, str, str], None]:
    def h(r: Read, v: str, w: str) -> None:
        r.speculative_flags[flag] = v
    return h


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
    speculative.read_sglang(r, r.speculative_flags)
    r.defaults("SGLang's radix cache is on by default", ENGINE.default_block, f"SGLang's default {F.block} on CUDA",
               f"{F.kv_dtype} auto (default)")
    return r


BACKEND = common.engine_backend(
    ENGINE, source="docs/engines.md § SGLang 0.5.23", build=lambda req: render(req), read=read,
)
