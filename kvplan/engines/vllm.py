"""vLLM 0.33.0: the plan as a `vllm serve` command line, written to vllm.sh.

The KV pool is sized one of two ways (`EmitRequest.sizing`, `kvplan emit --sizing`):
`fill` (the default) writes vLLM's own `--gpu-memory-utilization` (0.92) and states the
capacity vLLM's formula gives under it, ceil(total × u) − weights − non-torch memory −
the activation peak at `--max-num-batched-tokens` − the CUDA-graph estimate
(v1/worker/gpu_worker.py:641-757, vLLM 0.33.0; the non-weight terms are kvplan's
assumed, overridable defaults); `exact` writes `--kv-cache-memory-bytes`, the plan's
blocks plus the null block vLLM's BlockPool holds back (v1/core/block_pool.py:191).
Pages are vLLM's: the per-token-head dtypes carry fp32 scales (TRITON_ATTN), nvfp4
FP8 block scales; a windowed model's layers form KV cache groups that share one pool
(v1/core/kv_cache_planning.py). docs/cli-emit.md "Sizing" has the formulas; the arithmetic
is kvplan.model.pools.vllm, which the planner fits each candidate against, and this writer
writes what it derives.

A host tier uses vLLM's own offloading (`--kv-offloading-size`, summed over TP
ranks, with `--kv-offloading-backend native`); an SSD or remote tier goes
through LMCache (`--kv-transfer-config` with LMCacheConnectorV1 and the
lmcache.yaml written beside the script). `--cpu-offload-gb` offloads weights
and `--swap-space` is gone in 0.33.0: neither is ever written.

The engine's facts (dtype names, page sizes, defaults, setting names) are its catalog record
(kvplan.catalog.engines); this module holds the code that writes and reads them.
`read` reads a `vllm serve MODEL --flag ...` line back into kvplan's terms for `kvplan import --from vllm`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Optional, cast

import attrs

from kvplan.base import limits
from kvplan.base.evidence import Value, assumed, derived, reported
from kvplan.base.records import record
from kvplan.base.units import fmt_bytes
from kvplan.catalog.engines import get_engine
from kvplan.engines import common, launchers, speculative
from kvplan.engines.common import EmitRequest, Emitted, Flag, Reserves
from kvplan.engines.flagparse import (
    DeploymentReadError,
    Read,
    ReadFlag,
    cut,
    digits_in_range,
    exp2,
    json_float,
    json_int,
    model_flag,
    note_flag,
    number,
    parse_flags,
    plain_tokens,
    quantization,
    split_command,
    strip_env,
    table_readers,
    tokens_in_range,
    warn_flag,
    weights_dtype,
)
from kvplan.model.pools import vllm as vpool
from kvplan.model.pools.query import whole
from kvplan.model.pools.vllm import Pool, Shape
from kvplan.model.scenario import Scenario
from kvplan.planner.plan import Plan

ENGINE = get_engine("vllm")
F = ENGINE.flags
#: kvplan dtype -> vLLM's --kv-cache-dtype name (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names

LMCACHE_CONNECTOR = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
#: A disaggregated pool's --kv-transfer-config (vLLM 0.33.0 vllm/config/kv_transfer.py:11-13 and 57-88,
#: KVTransferConfig: kv_connector, kv_role kv_producer | kv_consumer | kv_both): NixlConnector, kv_producer on the
#: prefill pool and kv_consumer on the decode pool, as vllm/distributed/kv_transfer/kv_connector/v1/nixl/
#: connector.py:97-103 asks (kv_both is deprecated there). A proxy in front sends each request to a prefill worker,
#: then to a decode worker.
NIXL_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}
_POOL_OF_ROLE = {role: pool for pool, role in NIXL_ROLES.items()}


def nixl_connector(pool: str) -> dict[str, str]:
    """The --kv-transfer-config of a disaggregated pool's `vllm serve` (the prefill or the decode pool)."""
    return {"kv_connector": "NixlConnector", "kv_role": NIXL_ROLES[pool]}


def _gib_up(x: float) -> int:
    return max(1, math.ceil(x / common.GiB))


def groups(p: Plan) -> int:
    """The plan's attention data-parallel groups (pin.attention_dp) of a mixture-of-experts model: vLLM runs each as a
    data-parallel engine of tp / groups ranks with its own scheduler and KV pool, the expert layers over all of them
    (ENGINE.attention_dp); 1 for a dense model, whose data-parallel engines would be replicas (unwritten_groups)."""
    if not p.scenario.model.is_moe:
        return 1
    return math.gcd(p.tp, max(1, p.scenario.attention_dp))


def unwritten_groups(p: Plan) -> list[str]:
    """The warning for attention groups vLLM does not run: a dense model's (its data-parallel engines share nothing)."""
    sc = p.scenario
    if sc.attention_dp == 1 or sc.model.is_moe:
        return []
    return [f"pin attention_dp = {sc.attention_dp} is not written: for a dense model vLLM's data-parallel engines "
            "are replicas that share nothing, so it runs no attention groups; its one pool per GPU holds each "
            "group's share of the batch as planned"]


def rank_batch(p: Plan) -> int:
    """The sequences one data-parallel engine schedules: the batch over the attention groups."""
    return math.ceil(p.scenario.batch / groups(p))


def shape(p: Plan, sz: common.Sizing, block: int) -> Shape:
    """vLLM's pool shape for the plan on its most loaded GPU (kvplan.model.pools.vllm.shape), one data-parallel
    engine's share of the batch under attention data parallelism."""
    sc = p.scenario
    return vpool.shape(sc.model, sc.device, p.pp, rank_batch(p), sc.context_bound, block,
                       sz.layout.page_bytes_per_layer(block), sz.block_bytes, sc.pinned.max_batched_tokens)


@record
class Sized:
    """One sizing mode's outcome: the pool, the Sizing it gives, the memory flag, the comment line and the
    capacity rows that explain it, and the findings (a refusal, a pool smaller than the plan)."""

    pool: Pool
    sizing: common.Sizing
    flag: Flag
    line: str
    how: str
    rows: tuple[tuple[str, Value], ...]
    findings: tuple[str, ...]


def _on_pool(sz: common.Sizing, pool: Pool, activation: Optional[Value] = None,
             runtime: Optional[Value] = None) -> common.Sizing:
    """`sz` with the engine's pool (its blocks; for hybrid groups a block of group_size layers) and reserves."""
    layout = attrs.evolve(sz.layout, layers=pool.groups.group_size) if pool.groups.hybrid else sz.layout
    return attrs.evolve(sz, blocks=pool.num_blocks, layout=layout, activation=activation or sz.activation,
                        runtime=runtime or sz.runtime)


def size_exact(p: Plan, sz: common.Sizing, sh: Shape, block: int) -> Sized:
    """--kv-cache-memory-bytes: the plan's blocks (for hybrid groups the batch's requests) and the null block
    vLLM holds back, so every request at --max-model-len fits."""
    pool = Pool(vpool.exact_blocks(sh, sz.blocks, rank_batch(p)), sh.block_bytes, block, sh.per_request,
                p.scenario.context, sh.groups)
    sized = _on_pool(sz, pool)
    util = math.ceil((sized.weights + pool.bytes + sized.reserves) / sized.total * 1e4) / 1e4
    line = (f"# --kv-cache-memory-bytes fixes the pool ({common.fmt_int(pool.num_blocks)} blocks, 1 of them "
            f"vLLM's null block); under the assumed reserves it equals --gpu-memory-utilization {util:.4f}")
    how = (f"(--kv-cache-memory-bytes {pool.bytes} // {common.fmt_int(sh.block_bytes)} B per block − 1 null block) "
           f"× {block} tokens (vllm/v1/core/kv_cache_planning.py:681, block_pool.py:191)")
    rows = (("gpu_memory_utilization_equivalent",
             derived(util, "1", "(weights + KV pool + reserves) / memory, rounded up to 0.0001")),)
    refused = pool.refusal(f"raise --kv-cache-memory-bytes to {(sh.per_request + 1) * sh.block_bytes}")
    return Sized(pool, sized, ("--kv-cache-memory-bytes", str(pool.bytes)), line, how, rows,
                 (refused,) if refused else ())


def size_fill(p: Plan, sz: common.Sizing, sh: Shape, block: int, reserves: Reserves,
              raise_fill: bool = True) -> Sized:
    """--gpu-memory-utilization: ceil(total × u) − weights − non-torch − activation peak − CUDA graphs
    (v1/worker/gpu_worker.py:641-757), in whole pool blocks, one of them the null block. u is vLLM's default, the
    deployment's pin, or, where the default's pool would not hold the plan, the least hundredth that does."""
    sc = p.scenario
    frac, frac_why = vpool.fill_fraction(sc.memory_fraction)
    runtime, activation, graphs = vpool.fill_terms(reserves, sz.total, sh.batched)
    terms = runtime.value + activation.value + graphs.value
    label = "the deployment's pin" if sc.memory_fraction is not None else "vLLM's default"
    # a pinned fraction is the deployment's; a plan that does not fit is not made to
    tokens = sz.tokens / groups(p)  # one data-parallel engine's share (sz.blocks is its pool already)
    raised = (vpool.raised(sz.total, sz.weights, sh, block, sc.context_bound, frac, terms, tokens)
              if raise_fill and sc.memory_fraction is None and p.feasible else None)
    if raised is not None:
        held = vpool.fill_pool(sz.total, sz.weights, sh, block, sc.context_bound, frac, terms).tokens
        label = (f"raised from vLLM's default {frac:g}, whose pool holds {common.fmt_int(held)} tokens, fewer than "
                 f"the plan's {common.fmt_int(math.ceil(tokens))}: the least hundredth that holds them")
        frac, frac_why = raised, f"{label} (kvplan emit --sizing fill; --sizing exact writes the plan's own pool)"
    avail = math.ceil(sz.total * frac) - sz.weights - terms
    pool = vpool.fill_pool(sz.total, sz.weights, sh, block, sc.context_bound, frac, terms)
    sized = _on_pool(sz, pool, activation=activation,
                     runtime=assumed(float(runtime.value + graphs.value), "B",
                                     f"vLLM's non-torch memory, the {runtime.source}; + {graphs.source}"))
    line = (f"# --gpu-memory-utilization {frac:g} ({label}): pool = ceil({common.fmt_int(sz.total)} B "
            f"× {frac:g}) − weights {common.fmt_int(sz.weights)} B "
            f"− non-torch {common.fmt_int(runtime.value)} B "
            f"− activation peak {common.fmt_int(activation.value)} B − CUDA graphs "
            f"{common.fmt_int(graphs.value)} B (assumed) = {common.fmt_int(max(0.0, avail))} B "
            f"= {common.fmt_int(pool.num_blocks)} blocks, 1 of them vLLM's null block")
    how = (f"(ceil(memory × {frac:g}) − weights − non-torch − activation peak − CUDA graphs) // "
           f"{common.fmt_int(sh.block_bytes)} B per block − 1 null block, × {block} tokens "
           "(vllm/v1/worker/gpu_worker.py:641-757, kv_cache_planning.py:681, block_pool.py:191)")
    need = sz.weights + runtime.value + activation.value + graphs.value + (sh.per_request + 1) * sh.block_bytes
    least = math.ceil(need / sz.total * 100) / 100
    fix = (f"--gpu-memory-utilization {least:.2f} would start it" if least <= 1 else
           f"no --gpu-memory-utilization fits one request of {sc.context_bound:,} tokens on {sc.device.id}")
    if pool.num_blocks > 1 and not sh.groups.hybrid:
        fix += f", or --max-model-len {(pool.num_blocks - 1) * block}"
    fix += "; kvplan emit --sizing exact writes the plan's own pool"
    findings = [pool.refusal(fix)]
    if pool.requests >= 1 and pool.tokens < whole(tokens) and not sh.groups.hybrid:
        findings.append(f"--gpu-memory-utilization {frac:g} leaves a KV pool of {common.fmt_int(pool.tokens)} "
                        f"tokens, fewer than the plan's {common.fmt_int(math.ceil(tokens))}: the plan's batch "
                        f"of {sc.batch} does not fit (emit --sizing exact sizes the pool to the plan)")
    rows = (("gpu_memory_utilization", reported(frac, "1", frac_why)), ("cudagraph_reserve", graphs))
    return Sized(pool, sized, ("--gpu-memory-utilization", f"{frac:g}"), line, how, rows,
                 tuple(f for f in findings if f))


def _sized(p: Plan, mapped: common.Mapped, req: EmitRequest) -> common.Sizing:
    """The plan's sizing on one GPU (common.size); attention groups vLLM does not run (groups) leave its one pool
    holding every sequence."""
    sz = common.size(p, mapped, req.reserves, ENGINE.page_scales)
    if p.scenario.attention_dp > 1 and groups(p) == 1:
        sz = attrs.evolve(sz, blocks=math.ceil(whole(sz.tokens / mapped.block)))
    return sz


def _mla_note(sc: Scenario, mapped: common.Mapped) -> list[str]:
    """The note on an MLA model's FP8/FP4 KV: vLLM's *_ds_mla spellings have no documented page layout."""
    if sc.model.kv_kind == "mla" and mapped.dtype.id in ("fp8", "fp4"):
        return [f"docs/engines.md also lists {'fp8' if mapped.dtype.id == 'fp8' else 'nvfp4'}_ds_mla without its "
                f"page layout; kvplan writes {mapped.dtype_name}, whose page bytes follow the docs/engines.md formula"]
    return []


def _pool_flags(sc: Scenario, mapped: common.Mapped, notes: list[str]) -> list[Flag]:
    """A disaggregated pool's --kv-transfer-config (NixlConnector: the KV moves between the pools through NIXL),
    and the note that its tier is not written (vLLM takes one --kv-transfer-config); none for one engine."""
    if not sc.pool:
        return []
    if mapped.tier != "none":
        notes.append(f"the plan's {mapped.tier} tier is not written for a disaggregated pool: vLLM takes one "
                     "--kv-transfer-config, here NixlConnector (MultiConnector would hold both; kvplan writes it not)")
    return [("--kv-transfer-config", json.dumps(nixl_connector(sc.pool), separators=(",", ":")))]


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "vllm.sh", label: str = "") -> Emitted:
    """vllm.sh for the plan; `via_lmcache` puts any tier behind LMCache (the lmcache target)."""
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, BACKEND)
    sz = _sized(p, mapped, req)
    notes = common.model_notes(p, BACKEND) + common.unwritten_pins(sc, ENGINE.id) + unwritten_groups(p)
    notes += launchers.pinned_length_note(sc, F.context)
    notes += _mla_note(sc, mapped)
    g = groups(p)
    sh = shape(p, sz, mapped.block)
    got = (size_exact(p, sz, sh, mapped.block) if req.sizing == "exact" else
           size_fill(p, sz, sh, mapped.block, p.reserves if req.reserves is None else req.reserves,
                     req.raise_fill))
    flags: list[Flag] = [
        (F.kv_dtype, mapped.dtype_name),
        (F.block, str(mapped.block)),
        ("--enable-prefix-caching" if p.prefix_caching else "--disable-prefix-caching", None),
        (F.tp, str(p.tp // g)),
    ]
    if p.pp > 1:
        flags.append((F.pp, str(p.pp)))
    cap = launchers.concurrency_cap(p, got.pool.requests if sh.groups.hybrid else
                                 common.pool_sequences(got.sizing, got.pool.tokens), F.batch, groups=g)
    flags += [(F.context, str(sc.context_bound)), (F.batch, str(cap.value)),
              ("--max-num-batched-tokens", str(sh.batched)), got.flag]
    flags += data_parallel(p, common.pinned_engine_flags(sc, ENGINE.id)) + expert_parallel(p, notes)
    flags += speculative.vllm_flags(p)
    notes += speculative.draft_note(p)
    env: list[tuple[str, str]] = []
    tier_lines: list[str] = []
    tier_gpu = sz.tier_bytes_per_gpu()
    host = 0.0
    flags += _pool_flags(sc, mapped, notes)
    if mapped.tier != "none" and not sc.pool:
        if mapped.tier == "host" and not via_lmcache:
            size = _gib_up(tier_gpu * p.tp)
            host = float(size * common.GiB * p.pp)  # summed over one stage's TP ranks, each stage its own
            flags += [("--kv-offloading-size", str(size)), ("--kv-offloading-backend", "native")]
            tier_lines.append(f"# host tier: {size} GiB summed over {p.tp} TP rank{'s' if p.tp > 1 else ''} "
                              f"({common.fmt_int(tier_gpu)} B per GPU, the plan's tier bytes in whole blocks)")
        else:
            flags.append(("--kv-transfer-config", json.dumps(LMCACHE_CONNECTOR, separators=(",", ":"))))
            env.append(("LMCACHE_CONFIG_FILE", common.beside("lmcache.yaml")))
            line, more = common.lmcache_tier(mapped.tier, via_lmcache)
            tier_lines.append(line)
            notes += more
    head = [common.header(req, label or BACKEND.label), *_comments(got.sizing, got.pool, g), got.line, cap.line,
            *tier_lines]
    launch = common.Launch(("vllm", "serve", common.model_ref(p)), tuple(flags), tuple(env), tuple(head[1:]), host)
    files = launchers.scripts(p, name, head, launch, on_host, _where)
    rows = common.capacity(got.sizing, got.pool.tokens * g, got.how,
                           got.pool.requests * g if sh.groups.hybrid else None) + (
        ("max_num_batched_tokens", reported(sh.batched, "tokens", sh.batched_why + ", written explicitly")),
        *got.rows)
    return common.finish(BACKEND, mapped, got.sizing, files, rows, notes, got.findings, launch=launch)


#: vLLM's default --data-parallel-rpc-port (vllm/config/parallel.py:161, vLLM 0.33.0), written so each host says it.
DP_RPC_PORT = 29550


def on_host(flags: tuple[Flag, ...], hosts: launchers.Hosts, h: launchers.Host) -> list[Flag]:
    """The flags of one host's `vllm serve`, as vLLM 0.33.0 runs a layout over nodes (vllm/engine/arg_utils.py:
    2390-2520, entrypoints/cli/serve.py): a replica over nodes with --nnodes/--node-rank/--master-addr, the hosts
    after the first --headless, each set one replica (no --data-parallel-size); replicas that fit a node as
    data-parallel ranks, --data-parallel-size-local of them on each host, host 0 serving the API at
    --data-parallel-address, the others --headless from their --data-parallel-start-rank."""
    addr = common.Raw(f'"${launchers.HOST0_ADDR}"')
    headless: list[Flag] = [] if h.index == 0 else [("--headless", None)]
    if hosts.spans:
        kept = [f for f in flags if f[0] != ENGINE.data_parallel]
        return [*kept, ("--nnodes", str(len(hosts.hosts))), ("--node-rank", str(h.rank)), ("--master-addr", addr),
                *headless]
    start: list[Flag] = [] if h.index == 0 else [("--data-parallel-start-rank", str(h.rank))]
    return [*flags, ("--data-parallel-size-local", str(h.replicas)), *start, ("--data-parallel-address", addr),
            ("--data-parallel-rpc-port", str(DP_RPC_PORT)), *headless]


def _where(hosts: launchers.Hosts, h: launchers.Host) -> str:
    role = "it serves the API" if h.index == 0 else "headless: its engine ranks join host 0's, no API server"
    runs = (f"node rank {h.rank} of one replica's {len(hosts.hosts)}" if hosts.spans else
            f"data-parallel {hosts.span(h)} of {hosts.replicas}")
    return hosts.where(h, f"{runs}; {role}")


def data_parallel(p: Plan, pinned: list[Flag]) -> list[Flag]:
    """The pinned flags with vLLM's data-parallel size: the replicas (pin.replicas) × the attention groups, each
    group a data-parallel engine of tp / groups ranks (groups); none at 1."""
    g = groups(p)
    if g == 1:
        return pinned
    size = p.scenario.replicas * g
    return [f for f in pinned if f[0] != ENGINE.data_parallel] + [(cast(str, ENGINE.data_parallel), str(size))]


def expert_parallel(p: Plan, notes: list[str]) -> list[Flag]:
    """--enable-expert-parallel for a plan whose experts are split (pin.expert_parallel): vLLM splits them over every
    DP × TP rank of the replica, which `notes` says where the plan's count is another."""
    sc = p.scenario
    if sc.expert_parallel == 1:
        return []
    if sc.expert_parallel != p.tp:
        notes.append(f"pin expert_parallel = {sc.expert_parallel}: vLLM's --enable-expert-parallel splits the "
                     f"experts over all {p.tp} ranks of the replica, the plan over {sc.expert_parallel}")
    return [("--enable-expert-parallel", None)]


def _comments(sz: common.Sizing, pool: Pool, groups: int = 1) -> list[str]:
    """The capacity and per-GPU lines: vLLM's usable blocks (the null block left out) and the sequences they hold,
    over the attention groups' engines (each its own pool)."""
    if not pool.groups.hybrid:
        lines = common.summary_comments(sz, pool.tokens * groups)
        if groups > 1:
            lines.append(f"# attention data parallelism: {groups} data-parallel engines, each its own scheduler, KV "
                         "pool and --max-num-seqs (the figures above are their sum); the expert layers run over all "
                         "their ranks (vLLM's DP × TP group)")
        return lines
    n = len(pool.groups.windows)
    return [
        f"# KV capacity (derived): {common.fmt_int(pool.tokens)} tokens ({common.fmt_int(pool.num_blocks - 1)} blocks "
        f"of {pool.block} tokens) = vLLM's own figure, {common.fmt_int(pool.num_blocks)} blocks / "
        f"{common.fmt_int(pool.per_request)} blocks per request × {pool.max_len:,} (kv_cache_utils.py:1119-1128): "
        f"{n} KV cache groups of {pool.groups.group_size} layers (full and sliding-window) draw one pool; "
        f"{pool.requests} sequence{'s' if pool.requests != 1 else ''} of {pool.max_len:,} tokens fit beside the null "
        f"block; the plan stores {common.fmt_int(math.ceil(sz.plan_tokens))} token slots for its batch of {sz.batch}",
        f"# per GPU: KV pool {common.fmt_int(pool.num_blocks)} blocks × {common.fmt_int(pool.block_bytes)} B = "
        f"{fmt_bytes(pool.bytes)} (derived), weights {fmt_bytes(sz.weights)} (derived), reserves "
        f"{fmt_bytes(sz.activation.value)} activations + {fmt_bytes(sz.runtime.value)} runtime (assumed), "
        f"device {fmt_bytes(sz.total)}",
    ]


# --------------------------------------------------------------- read back (kvplan import)

VLLM_OFFLOAD_CONNECTORS = frozenset({"OffloadingConnector", "LMCacheConnectorV1", "LMCacheMPConnector"})
VLLM_IRRELEVANT = frozenset({
    "--host", "--port", "--served-model-name", "--api-key", "--seed", "--uvicorn-log-level", "--tokenizer",
    "--revision", "--download-dir", "--chat-template", "--max-log-len", "--root-path", "--ssl-keyfile",
    "--ssl-certfile", "--tool-call-parser", "--reasoning-parser", "--generation-config", "--config-format",
    "--load-format", "--tokenizer-mode", "--allowed-origins",
})
VLLM_IRRELEVANT_FLAGS = frozenset({
    "--trust-remote-code", "--disable-log-requests", "--disable-log-stats", "--enable-auto-tool-choice",
    "--enable-log-requests", "--disable-fastapi-docs", "--enforce-eager",
})


_VLLM_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_VLLM_MULT = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def vllm_tokens(value: str, flag: str) -> tuple[int, str]:
    """A token count as vLLM reads it, and how it read it: '32k' -> 32000, '32K' -> 32768."""
    text = value.strip()
    m = _VLLM_INT.fullmatch(text)
    hint = "vLLM takes a whole number, or k/m/g/t (powers of 1000) or K/M/G/T (powers of 1024) after one"
    if m is None:
        return plain_tokens(value, flag, "vLLM", hint), ""
    number, suffix = m.groups()
    digits_in_range(number, value, flag)
    if suffix.islower():
        n = int(float(number) * _VLLM_MULT[suffix])
        return tokens_in_range(n, value, flag), ""
    if "." in number:
        raise DeploymentReadError(f"{flag} '{cut(value)}': vLLM refuses a decimal before the binary suffix {suffix}",
                                  help=f"did the command mean {number}{suffix.lower()}?")
    n = int(number) * _VLLM_MULT[suffix]
    return tokens_in_range(n, value, flag), f"vLLM reads {suffix} as 2^{exp2(suffix)}: {n:,} tokens"


def _vllm_offload_json(r: Read, value: str, written: str) -> None:
    deep = limits.json_too_deep(value)
    if deep is not None:
        raise DeploymentReadError(f"--kv-transfer-config nests more than {limits.MAX_JSON_DEPTH} levels deep "
                                  f"(at column {deep + 1})", help="give a flat JSON object, as vLLM documents")
    try:
        cfg = json.loads(value, parse_int=json_int, parse_float=json_float)
    except json.JSONDecodeError as exc:
        raise DeploymentReadError(f"--kv-transfer-config is not JSON: {exc.msg} at column {exc.colno}",
                           help='give a JSON object, e.g. \'{"kv_connector":"OffloadingConnector",...}\'') from None
    if not isinstance(cfg, dict):
        raise DeploymentReadError("--kv-transfer-config must be a JSON object")
    conn = str(cfg.get("kv_connector", ""))
    if conn and "kv_role" not in cfg:
        r.warn(f"--kv-transfer-config: kv_connector {conn} without kv_role (vLLM requires one: "
               "kv_producer, kv_consumer or kv_both)")
    if conn in VLLM_OFFLOAD_CONNECTORS:
        extra = cfg.get("kv_connector_extra_config") or {}
        detail = f"kv_connector {conn}"
        if isinstance(extra, dict) and "cpu_bytes_to_use" in extra:
            detail += f", cpu_bytes_to_use {extra['cpu_bytes_to_use']}"
        r.tier = ("host", f"--kv-transfer-config {detail}")
        if isinstance(extra, dict) and extra.get("secondary_tiers"):
            r.note(f"--kv-transfer-config secondary_tiers {json.dumps(extra['secondary_tiers'], sort_keys=True)}: "
                   "a tier below host memory; the .kvp pins the host tier only")
    elif conn == "NixlConnector" and cfg.get("kv_role") in _POOL_OF_ROLE:
        role = str(cfg["kv_role"])
        r.pool = (_POOL_OF_ROLE[role], f"--kv-transfer-config kv_connector {conn}, kv_role {role}")
        r.warn(f"--kv-transfer-config kv_connector {conn}, kv_role {role}: the {_POOL_OF_ROLE[role]} pool of a "
               "disaggregated deployment, imported as this pool alone (`serving = disaggregated` plans both pools)")
    elif conn:
        r.warn(f"--kv-transfer-config kv_connector {conn}: moves KV between instances (disaggregated "
               "serving), not a tier kvplan plans; not imported")
    else:
        r.warn("--kv-transfer-config without kv_connector; not imported")


def _vllm_table() -> list[ReadFlag]:
    def offload_size(r: Read, v: str, w: str) -> None:
        number(v, "--kv-offloading-size")
        r.tier = ("host", f"{w} GiB, summed over tensor-parallel ranks")

    def offload_backend(r: Read, v: str, w: str) -> None:
        if v not in ("native", "lmcache"):
            r.warn(f"{w}: {ENGINE.label} takes native or lmcache")
        r.note(f"{w}: host offload through {v}")

    removed = warn_flag(f"removed in {ENGINE.label} (unrecognized there; the server would not start); not imported")
    return [
        ReadFlag(("--model",), True, model_flag),
        ReadFlag(("-dcp", "--decode-context-parallel-size"), True,
              note_flag("decode context parallelism shards the KV cache over tensor-parallel ranks; "
                    "kvplan does not model it")),
        ReadFlag(("--kv-cache-memory-bytes",), True,
              note_flag("a fixed KV budget per GPU; the .kvp has no such key (kvplan sizes the cache)")),
        *table_readers(ENGINE.id, vllm_tokens),
        ReadFlag(("--kv-offloading-size",), True, offload_size),
        ReadFlag(("--kv-offloading-backend",), True, offload_backend),
        ReadFlag(("--kv-transfer-config",), True, _vllm_offload_json),
        ReadFlag(("--speculative-config",), True, speculative.read_vllm_config),
        ReadFlag(("--swap-space",), True, removed),
        ReadFlag(("--calculate-kv-scales",), False, removed),
        ReadFlag(("--cpu-offload-gb",), True,
              warn_flag("offloads model weights to host memory, not the KV cache; no KV tier imported")),
        ReadFlag(("--dtype",), True, weights_dtype),
        ReadFlag(("-q", "--quantization"), True, quantization),
    ]


def _vllm_name(flag: str) -> str:
    # vLLM's parser accepts underscores for dashes (--max_model_len).
    return flag if not flag.startswith("--") else "--" + flag[2:].replace("_", "-")


def read(text: str, base_dir: str = ".", where: str = "config") -> Read:
    """A `vllm serve MODEL --flag ...` line (or `python -m vllm.entrypoints...`) in kvplan's terms."""
    words = strip_env(split_command(text))
    if words[:2] == ["vllm", "serve"]:
        words = words[2:]
    elif len(words) >= 3 and words[0].startswith("python") and words[1] == "-m" and words[2].startswith("vllm."):
        words = words[3:]
    r = Read(ENGINE.id)

    def positional(w: str) -> None:
        if r.model_ref is None:
            r.model_ref = w
        else:
            r.warn(f"'{w}': an extra argument vLLM would not accept; not imported")

    parse_flags(words, _vllm_table(), r, VLLM_IRRELEVANT, VLLM_IRRELEVANT_FLAGS, _vllm_name, positional)
    r.defaults("vLLM's default (V1 engine)", ENGINE.default_block, f"vLLM's default {F.block}",
               f"{F.kv_dtype} auto (default)")
    return r


BACKEND = common.engine_backend(
    ENGINE,
    source="docs/engines.md § vLLM 0.33.0 (vllm/config/cache.py, vllm/engine/arg_utils.py, vllm/config/kv_transfer.py)",
    build=lambda req: render(req), read=read,
)
