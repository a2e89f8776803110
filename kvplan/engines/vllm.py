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
(v1/core/kv_cache_planning.py). docs/cli-emit.md "Sizing" has the formulas.

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
from typing import Optional, Sequence

import attrs

from kvplan.base import limits
from kvplan.base.evidence import Value, assumed, derived, reported
from kvplan.base.units import fmt_bytes
from kvplan.catalog import Model
from kvplan.catalog.engines import get_engine
from kvplan.engines import common
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile, Flag, Reserves
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
from kvplan.planner.plan import Plan

ENGINE = get_engine("vllm")
F = ENGINE.flags
#: kvplan dtype -> vLLM's --kv-cache-dtype name (the catalog record's, kvplan.catalog.engines).
KV_DTYPES = ENGINE.kv_names

LMCACHE_CONNECTOR = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def _gib_up(x: float) -> int:
    return max(1, math.ceil(x / common.GiB))


def _gib(b: float) -> str:
    """vLLM's format_gib (vllm/utils/mem_utils.py:30): GiB rounded to 2 decimals, as its messages print them."""
    return f"{round(b / common.GiB, 2)}"


def default_batched_tokens(device_memory: float, device_id: str) -> tuple[int, str]:
    """vLLM 0.33.0's default --max-num-batched-tokens for `vllm serve` (OPENAI_API_SERVER) on a GPU of this much
    memory (vllm/engine/arg_utils.py:2955-3005): 16,384 from 160 GiB, 8,192 from 70 GiB (not A100), else 2,048."""
    gib = device_memory / common.GiB
    if gib >= 160:
        return 16384, "vLLM's default for GPUs of 160 GiB or more (engine/arg_utils.py:2975)"
    if gib >= 70 and "a100" not in device_id:
        return 8192, "vLLM's default for GPUs of 70 GiB or more but A100 (engine/arg_utils.py:2989)"
    return 2048, "vLLM's default for smaller GPUs and A100 (engine/arg_utils.py:2999)"


@attrs.frozen(slots=True)
class Groups:
    """vLLM's KV cache groups on one GPU (v1/core/kv_cache_planning.py:416-560): layers bucketed by attention
    window, each bucket split into groups of `group_size` layers; all groups draw block ids from one pool, and
    one pool block is one page of `group_size` layers."""

    group_size: int
    windows: tuple[Optional[int], ...]   # one per group: None for full attention

    @property
    def hybrid(self) -> bool:
        return len(self.windows) > 1


def kv_groups(windows: Sequence[Optional[int]]) -> Groups:
    """_get_kv_cache_groups_uniform_page_size (kv_cache_planning.py:505-560) for layers of equal page size:
    group size = the fewest layers of one window, or the most when no bucket has 1.5x the fewest."""
    buckets: dict[Optional[int], int] = {}
    for w in windows:
        buckets[w] = buckets.get(w, 0) + 1
    if len(buckets) == 1:
        return Groups(len(windows), (next(iter(buckets)),))
    least, most = min(buckets.values()), max(buckets.values())
    size = most if most < least * 1.5 else least
    return Groups(size, tuple(w for w, n in buckets.items() for _ in range(math.ceil(n / size))))


def blocks_per_request(groups: Groups, max_len: int, block: int, in_flight: int) -> int:
    """Pool blocks one request at max_len takes (kv_cache_utils.py:1061-1090, the sum over groups): a full
    group cdiv(max_len, block) (kv_cache_interface.py:643-648); a sliding-window group
    cdiv(min(window - 1 + in-flight tokens, max_len), block) + 1 (kv_cache_interface.py:918-944)."""
    total = 0
    for w in groups.windows:
        if w is None:
            total += math.ceil(max_len / block)
        else:
            total += math.ceil(min(w - 1 + in_flight, max_len) / block) + 1
    return total


@attrs.frozen(slots=True)
class Pool:
    """One GPU's vLLM KV pool: `num_blocks` pool blocks of `block_bytes` (the null block among them)."""

    num_blocks: int
    block_bytes: int
    block: int
    per_request: int          # pool blocks one request at --max-model-len takes
    max_len: int
    groups: Groups

    @property
    def bytes(self) -> int:
        return self.num_blocks * self.block_bytes

    @property
    def tokens(self) -> int:
        """The capacity kvplan states: usable token slots, (num_blocks - 1) x block (the BlockPool holds one
        null block, v1/core/block_pool.py:191); with several KV cache groups vLLM's own figure,
        int(num_blocks / blocks per request x max-model-len) (kv_cache_utils.py:1119-1128)."""
        if self.groups.hybrid:
            return int(self.num_blocks / self.per_request * self.max_len)
        return max(0, self.num_blocks - 1) * self.block

    @property
    def requests(self) -> int:
        """Requests at --max-model-len that fit beside the null block."""
        return max(0, self.num_blocks - 1) // self.per_request if self.per_request else 0

    def refusal(self, fix: str) -> Optional[str]:
        """vLLM's own words when one request at --max-model-len does not fit (kv_cache_planning.py:50-88,
        checked against the pool less the null block, 1533-1556), with the flag that would fix it."""
        avail = self.bytes - self.block_bytes
        needed = self.per_request * self.block_bytes
        if self.bytes <= 0:
            return ("vLLM would refuse to start: \"No available memory for the cache blocks. Try increasing "
                    f"`gpu_memory_utilization` when initializing the engine\"; {fix}")
        if needed <= avail:
            return None
        est = max(0, self.num_blocks - 1) * self.block if not self.groups.hybrid else 0
        est_msg = f"Based on the available memory, the estimated maximum model length is {est}. " if est > 0 else ""
        return (f"vLLM would refuse to start: \"To serve at least one request with the model's max seq len "
                f"({self.max_len}), ({_gib(needed)} GiB KV cache is needed, which is larger than the available KV "
                f"cache memory ({_gib(avail)} GiB). {est_msg}Try increasing "
                f"`gpu_memory_utilization` ... or decreasing `max_model_len`\"; {fix}")


def _layer_windows(model: Model, pp: int) -> tuple[Optional[int], ...]:
    """The windows of the most loaded pipeline stage's layers (the first: vLLM's get_pp_indices)."""
    return tuple(model.windows[:math.ceil(model.n_layers / max(1, pp))])


def fill_fraction(plan: Plan) -> tuple[float, str]:
    """The --gpu-memory-utilization fill mode writes: the spec's pin (what `kvplan import` read), else vLLM's
    default (the engine record)."""
    pinned = plan.scenario.memory_fraction
    if pinned is not None:
        return pinned, "pin memory_fraction: the deployment's --gpu-memory-utilization"
    mem = ENGINE.memory
    assert mem is not None
    return mem.fraction, mem.fraction_source


@attrs.frozen(slots=True)
class Shape:
    """What fixes vLLM's pool arithmetic for one GPU: its KV cache groups, the bytes of one pool block, the blocks
    one request at --max-model-len takes, and the --max-num-batched-tokens written."""

    groups: Groups
    block_bytes: int
    per_request: int
    batched: int
    batched_why: str


def shape(p: Plan, sz: common.Sizing, block: int) -> Shape:
    sc = p.scenario
    groups = kv_groups(_layer_windows(sc.model, p.pp))
    page = sz.layout.page_bytes_per_layer(block)
    block_bytes = math.ceil(page * groups.group_size) if groups.hybrid else math.ceil(sz.block_bytes)
    pinned = sc.pinned.max_batched_tokens
    if pinned is not None:
        batched, why = pinned, "pin max_batched_tokens: the deployment's --max-num-batched-tokens"
    else:
        batched, why = default_batched_tokens(sz.total, sc.device.id)
        batched = max(batched, sc.batch)  # vLLM requires max_num_batched_tokens >= max_num_seqs
    in_flight = (2 if p.pp <= 1 else p.pp) * batched  # VllmConfig.max_in_flight_tokens (config/vllm.py:588-609)
    # one request at --max-model-len must fit (kv_cache_planning.py:1533-1556): the spec's bound, not its context
    return Shape(groups, block_bytes, blocks_per_request(groups, sc.context_bound, block, in_flight), batched, why)


@attrs.frozen(slots=True)
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
    want = p.scenario.batch * sh.per_request if sh.groups.hybrid else max(sz.blocks, sh.per_request)
    pool = Pool(want + 1, sh.block_bytes, block, sh.per_request, p.scenario.context, sh.groups)
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


def _fill_terms(reserves: Reserves, total: float, batched: int) -> tuple[Value, Value, Value]:
    """(non-torch, activation peak, CUDA graphs) per GPU: the user's figures, else kvplan's assumed defaults."""
    mem = ENGINE.memory
    assert mem is not None
    _, runtime = reserves.resolve(total)
    if reserves.activation is None:
        activation = assumed(batched * mem.activation_per_token, "B",
                             f"activation peak of vLLM's profile run at --max-num-batched-tokens {batched:,}: "
                             f"{common.fmt_int(mem.activation_per_token)} B per batched token, a round default; "
                             "vLLM logs the measured peak; --activation-reserve")
    else:
        activation = assumed(reserves.activation, "B", "activation peak per GPU (--activation-reserve)")
    if reserves.cudagraph is None:
        graphs = assumed(mem.cudagraph, "B", "CUDA-graph memory per GPU: 1 GiB, a round default; vLLM estimates "
                                             "it at start-up (envs.py:329); --cudagraph-reserve")
    else:
        graphs = assumed(reserves.cudagraph, "B", "CUDA-graph memory per GPU (--cudagraph-reserve)")
    return runtime, activation, graphs


def _fill_pool(sz: common.Sizing, sh: Shape, block: int, context: int, frac: float, terms: float) -> Pool:
    avail = math.ceil(sz.total * frac) - sz.weights - terms
    return Pool(math.floor(avail) // sh.block_bytes if avail > 0 else 0, sh.block_bytes, block, sh.per_request,
                context, sh.groups)


def _raised(p: Plan, sz: common.Sizing, sh: Shape, block: int, frac: float, terms: float) -> Optional[float]:
    """The least hundredth above vLLM's default --gpu-memory-utilization whose pool holds the plan (one request at
    --max-model-len and the plan's tokens), where the default's does not and the fraction is not pinned: vLLM's
    own advice in its refusal ("Try increasing `gpu_memory_utilization`"). None: keep the default."""
    if p.scenario.memory_fraction is not None or sh.groups.hybrid or not p.feasible:
        return None  # a pinned fraction is the deployment's; a plan that does not fit is not made to
    pool = _fill_pool(sz, sh, block, p.scenario.context_bound, frac, terms)
    if pool.requests >= 1 and pool.tokens >= sz.tokens:
        return None
    blocks = max(sh.per_request, math.ceil(sz.tokens / block)) + 1  # and vLLM's null block
    least = math.ceil((sz.weights + terms + blocks * sh.block_bytes) / sz.total * 100) / 100
    while least <= 1 and _fill_pool(sz, sh, block, p.scenario.context_bound, least, terms).tokens < sz.tokens:
        least = round(least + 0.01, 2)  # ceil(total × u) rounds: one more hundredth at most
    return least if frac < least <= 1 else None


def size_fill(p: Plan, sz: common.Sizing, sh: Shape, block: int, reserves: Reserves,
              raise_fill: bool = True) -> Sized:
    """--gpu-memory-utilization: ceil(total × u) − weights − non-torch − activation peak − CUDA graphs
    (v1/worker/gpu_worker.py:641-757), in whole pool blocks, one of them the null block. u is vLLM's default, the
    deployment's pin, or, where the default's pool would not hold the plan, the least hundredth that does."""
    sc = p.scenario
    frac, frac_why = fill_fraction(p)
    runtime, activation, graphs = _fill_terms(reserves, sz.total, sh.batched)
    terms = runtime.value + activation.value + graphs.value
    label = "the deployment's pin" if sc.memory_fraction is not None else "vLLM's default"
    raised = _raised(p, sz, sh, block, frac, terms) if raise_fill else None
    if raised is not None:
        held = _fill_pool(sz, sh, block, sc.context_bound, frac, terms).tokens
        label = (f"raised from vLLM's default {frac:g}, whose pool holds {common.fmt_int(held)} tokens, fewer than "
                 f"the plan's {common.fmt_int(math.ceil(sz.tokens))}: the least hundredth that holds them")
        frac, frac_why = raised, f"{label} (kvplan emit --sizing fill; --sizing exact writes the plan's own pool)"
    avail = math.ceil(sz.total * frac) - sz.weights - terms
    pool = _fill_pool(sz, sh, block, sc.context_bound, frac, terms)
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
    if pool.requests >= 1 and pool.tokens < sz.tokens and not sh.groups.hybrid:
        findings.append(f"--gpu-memory-utilization {frac:g} leaves a KV pool of {common.fmt_int(pool.tokens)} "
                        f"tokens, fewer than the plan's {common.fmt_int(math.ceil(sz.tokens))}: the plan's batch "
                        f"of {sc.batch} does not fit (emit --sizing exact sizes the pool to the plan)")
    rows = (("gpu_memory_utilization", reported(frac, "1", frac_why)), ("cudagraph_reserve", graphs))
    return Sized(pool, sized, ("--gpu-memory-utilization", f"{frac:g}"), line, how, rows,
                 tuple(f for f in findings if f))


def render(req: EmitRequest, *, via_lmcache: bool = False, name: str = "vllm.sh", label: str = "") -> Emitted:
    """vllm.sh for the plan; `via_lmcache` puts any tier behind LMCache (the lmcache target)."""
    p = req.plan
    sc = p.scenario
    mapped = common.map_choices(p, BACKEND)
    sz = common.size(p, mapped, req.reserves, ENGINE.page_scales)
    notes = common.model_notes(p, BACKEND) + common.unwritten_pins(sc, ENGINE.id)
    if sc.model.kv_kind == "mla" and mapped.dtype.id in ("fp8", "fp4"):
        notes.append(f"docs/engines.md also lists {'fp8' if mapped.dtype.id == 'fp8' else 'nvfp4'}_ds_mla without its "
                     f"page layout; kvplan writes {mapped.dtype_name}, "
                     "whose page bytes follow the docs/engines.md formula")
    sh = shape(p, sz, mapped.block)
    got = (size_exact(p, sz, sh, mapped.block) if req.sizing == "exact" else
           size_fill(p, sz, sh, mapped.block, p.reserves if req.reserves is None else req.reserves,
                     req.raise_fill))
    flags: list[Flag] = [
        (F.kv_dtype, mapped.dtype_name),
        (F.block, str(mapped.block)),
        ("--enable-prefix-caching" if p.prefix_caching else "--disable-prefix-caching", None),
        (F.tp, str(p.tp)),
    ]
    if p.pp > 1:
        flags.append((F.pp, str(p.pp)))
    flags += [(F.context, str(sc.context_bound)), (F.batch, str(sc.batch)),
              ("--max-num-batched-tokens", str(sh.batched)), got.flag]
    flags += common.pinned_engine_flags(sc, ENGINE.id)
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
    head = [common.header(req, label or BACKEND.label), *_comments(got.sizing, got.pool), got.line, *tier_lines]
    launch = common.Launch(("vllm", "serve", common.model_ref(p)), tuple(flags), tuple(env), tuple(head[1:]))
    text = common.shell_script(head, launch.program, launch.flags, launch.env)
    rows = common.capacity(got.sizing, got.pool.tokens, got.how, got.pool.requests if sh.groups.hybrid else None) + (
        ("max_num_batched_tokens", reported(sh.batched, "tokens", sh.batched_why + ", written explicitly")),
        *got.rows)
    return common.finish(BACKEND, mapped, got.sizing, [EmittedFile(name, text)], rows, notes, got.findings,
                         launch=launch)


def _comments(sz: common.Sizing, pool: Pool) -> list[str]:
    """The capacity and per-GPU lines: vLLM's usable blocks (the null block left out) and the sequences they hold."""
    if not pool.groups.hybrid:
        return common.summary_comments(sz, pool.tokens)
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
