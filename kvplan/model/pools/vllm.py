"""vLLM 0.33.0's memory pool, below the planner: the planner fits each candidate against it and the vLLM writer
(kvplan/engines/vllm.py) writes the --gpu-memory-utilization (or --kv-cache-memory-bytes) it derives (issue 20,
item 2). docs/engine-memory.md § vLLM and docs/cli-emit.md "Sizing" have the formulas:

    pool      = ceil(total × u) − weights − non-torch − activation peak at --max-num-batched-tokens − CUDA graphs
                (v1/worker/gpu_worker.py:641-757), in whole pool blocks, one of them the null block
                (v1/core/block_pool.py:191)
    u         = the pinned --gpu-memory-utilization, else vLLM's default, else (the default's pool too small) the
                least hundredth up to 1 whose pool holds the plan: vLLM's own advice in its refusal
    a window  = layers bucketed by attention window form KV cache groups that draw one pool
                (v1/core/kv_cache_planning.py); the fraction is not raised for them

A candidate fits under vLLM when that pool admits one request at --max-model-len and holds the batch.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from kvplan.base.evidence import Value, assumed
from kvplan.base.records import record
from kvplan.catalog import DTYPES, Device, Model
from kvplan.catalog.engines import get_engine
from kvplan.model import memory
from kvplan.model.memory import GiB, Reserves
from kvplan.model.pools.query import Fit, PoolQuery, kv_layout, whole

VLLM = get_engine("vllm")


def batched_tier(device_memory: float, device_id: str) -> tuple[int, str, int]:
    """vLLM 0.33.0's default --max-num-batched-tokens for `vllm serve` (OPENAI_API_SERVER) on a GPU of this much
    memory (vllm/engine/arg_utils.py:2955-3005): 16,384 from 160 GiB, 8,192 from 70 GiB (not A100), else 2,048;
    with the GPUs it is the default for and the line of arg_utils.py that sets it."""
    gib = device_memory / GiB
    if gib >= 160:
        return 16384, "GPUs of 160 GiB or more", 2975
    if gib >= 70 and "a100" not in device_id:
        return 8192, "GPUs of 70 GiB or more but A100", 2989
    return 2048, "smaller GPUs and A100", 2999


def default_batched_tokens(device_memory: float, device_id: str) -> tuple[int, str]:
    """The default --max-num-batched-tokens (batched_tier) and where it comes from."""
    n, gpus, line = batched_tier(device_memory, device_id)
    return n, f"vLLM's default for {gpus} (engine/arg_utils.py:{line})"


def default_max_seqs(device_memory: float, device_id: str) -> tuple[int, str]:
    """The requests vLLM runs at once when nothing pins it: vLLM 0.33.0's default --max-num-seqs for
    `vllm serve` (vllm/engine/arg_utils.py:2979-3006, get_batch_defaults: 1,024 on the GPUs whose token budget is
    8,192 or 16,384, else 256), no more than its --max-num-batched-tokens (arg_utils.py:3232-3234). The load model
    queues a closed loop's clients above it, and the launchers never write a larger cap for one (the two agree)."""
    n, gpus, _ = batched_tier(device_memory, device_id)
    seqs = 1024 if n >= 8192 else 256
    return min(seqs, n), f"vLLM's default --max-num-seqs on {gpus}"


def gib_text(b: float) -> str:
    """vLLM's format_gib (vllm/utils/mem_utils.py:30): GiB rounded to 2 decimals, as its messages print them."""
    return f"{round(b / GiB, 2)}"


@record
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


@record
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

    def sequences(self, tokens: float, batch: int) -> int:
        """The sequences of the plan's length (`tokens` over `batch`) the pool holds: vLLM's own request count
        with several KV cache groups (kvplan.engines.common.capacity's kv_sequences)."""
        if self.groups.hybrid:
            return self.requests
        per_seq = tokens / batch
        return math.floor(whole(self.tokens / per_seq)) if per_seq > 0 else 0

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
                f"({self.max_len}), ({gib_text(needed)} GiB KV cache is needed, which is larger than the available "
                f"KV cache memory ({gib_text(avail)} GiB). {est_msg}Try increasing "
                f"`gpu_memory_utilization` ... or decreasing `max_model_len`\"; {fix}")


def layer_windows(model: Model, pp: int) -> tuple[Optional[int], ...]:
    """The windows of the most loaded pipeline stage's layers (the first: vLLM's get_pp_indices)."""
    return tuple(model.windows[:math.ceil(model.n_layers / max(1, pp))])


def fill_fraction(pinned: Optional[float]) -> tuple[float, str]:
    """The --gpu-memory-utilization fill mode starts from: the spec's pin (what `kvplan import` read), else
    vLLM's default (the engine record)."""
    if pinned is not None:
        return pinned, "pin memory_fraction: the deployment's --gpu-memory-utilization"
    mem = VLLM.memory
    assert mem is not None
    return mem.fraction, mem.fraction_source


@record
class Shape:
    """What fixes vLLM's pool arithmetic for one GPU: its KV cache groups, the bytes of one pool block, the blocks
    one request at --max-model-len takes, and the --max-num-batched-tokens written."""

    groups: Groups
    block_bytes: int
    per_request: int
    batched: int
    batched_why: str


def shape(model: Model, device: Device, pp: int, batch: int, bound: int, block: int, page_per_layer: float,
          block_bytes: float, pinned_batched: Optional[int]) -> Shape:
    """The shape of the pool on the most loaded GPU: `page_per_layer` and `block_bytes` of the engine's layout
    (kvplan.model.pools.query.KvLayout), `bound` the longest request (--max-model-len, the spec's bound)."""
    groups = kv_groups(layer_windows(model, pp))
    one = math.ceil(page_per_layer * groups.group_size) if groups.hybrid else math.ceil(block_bytes)
    if pinned_batched is not None:
        batched, why = pinned_batched, "pin max_batched_tokens: the deployment's --max-num-batched-tokens"
    else:
        batched, why = default_batched_tokens(device.memory, device.id)
        batched = max(batched, batch)  # vLLM requires max_num_batched_tokens >= max_num_seqs
    in_flight = (2 if pp <= 1 else pp) * batched  # VllmConfig.max_in_flight_tokens (config/vllm.py:588-609)
    # one request at --max-model-len must fit (kv_cache_planning.py:1533-1556): the spec's bound, not its context
    return Shape(groups, one, blocks_per_request(groups, bound, block, in_flight), batched, why)


def fill_terms(reserves: Reserves, total: float, batched: int) -> tuple[Value, Value, Value]:
    """(non-torch, activation peak, CUDA graphs) per GPU: the user's figures, else kvplan's assumed defaults."""
    mem = VLLM.memory
    assert mem is not None
    _, runtime = reserves.resolve(total)
    if reserves.activation is None:
        activation = assumed(batched * mem.activation_per_token, "B",
                             f"activation peak of vLLM's profile run at --max-num-batched-tokens {batched:,}: "
                             f"{int(mem.activation_per_token):,} B per batched token, a round default; "
                             "vLLM logs the measured peak; --activation-reserve")
    else:
        activation = assumed(reserves.activation, "B", "activation peak per GPU (--activation-reserve)")
    if reserves.cudagraph is None:
        graphs = assumed(mem.cudagraph, "B", "CUDA-graph memory per GPU: 1 GiB, a round default; vLLM estimates "
                                             "it at start-up (envs.py:329); --cudagraph-reserve")
    else:
        graphs = assumed(reserves.cudagraph, "B", "CUDA-graph memory per GPU (--cudagraph-reserve)")
    return runtime, activation, graphs


def fill_pool(total: float, weights: float, sh: Shape, block: int, bound: int, frac: float, terms: float) -> Pool:
    """The pool --gpu-memory-utilization `frac` gives: ceil(total × frac) − weights − `terms`, in whole blocks."""
    avail = math.ceil(total * frac) - weights - terms
    return Pool(math.floor(avail) // sh.block_bytes if avail > 0 else 0, sh.block_bytes, block, sh.per_request,
                bound, sh.groups)


def raised(total: float, weights: float, sh: Shape, block: int, bound: int, frac: float, terms: float,
           tokens: float) -> Optional[float]:
    """The least hundredth above `frac` (vLLM's default) whose pool holds one request at --max-model-len and the
    plan's `tokens`, where `frac`'s does not: vLLM's own advice in its refusal ("Try increasing
    `gpu_memory_utilization`"). None: keep `frac` (it holds them, none up to 1 does, or the layers form several
    KV cache groups, whose pool is vLLM's own figure)."""
    if sh.groups.hybrid:
        return None
    pool = fill_pool(total, weights, sh, block, bound, frac, terms)
    if pool.requests >= 1 and pool.tokens >= tokens:
        return None
    blocks = max(sh.per_request, math.ceil(tokens / block)) + 1  # and vLLM's null block
    least = math.ceil((weights + terms + blocks * sh.block_bytes) / total * 100) / 100
    while least <= 1 and fill_pool(total, weights, sh, block, bound, least, terms).tokens < tokens:
        least = round(least + 0.01, 2)  # ceil(total × u) rounds: one more hundredth at most
    return least if frac < least <= 1 else None


def exact_blocks(sh: Shape, blocks: int, batch: int) -> int:
    """--kv-cache-memory-bytes' pool blocks: the plan's `blocks` (for KV cache groups the batch's requests), at
    least one request at --max-model-len, and the null block vLLM holds back."""
    return (batch * sh.per_request if sh.groups.hybrid else max(blocks, sh.per_request)) + 1


def fit(q: PoolQuery) -> Optional[Fit]:
    """The candidate against vLLM's own pool, as vllm.sh is written. In exact mode (`sizing`), the pool is the
    plan's own and the need the weights + that pool + the reserves. In fill mode (the default): the pinned or
    default --gpu-memory-utilization, raised where its pool is too small, fits when its pool admits one request at
    --max-model-len and holds the batch. The need is the weights + the plan's own pool (exact mode's, the null
    block included) + vLLM's non-torch, activation and CUDA-graph terms, or the memory model's where that is
    more. None for a KV dtype vLLM does not store."""
    if q.dtype_id not in VLLM.kv_names:
        return None
    layout = kv_layout(q.model, q.tp, q.pp, DTYPES[q.dtype_id].width, VLLM.page_scales.get(q.dtype_id))
    bound = q.context_bound if q.context_bound is not None else q.context
    # attention data parallelism of a mixture of experts runs one engine per group, its pool and --max-num-seqs its
    # own share of the sequences (docs/engine-memory.md § vLLM); a dense model's groups vLLM does not run (its
    # data-parallel engines are replicas), so its one pool holds every sequence
    groups = q.groups if q.model.is_moe else 1
    batch = math.ceil(q.batch / groups)
    sh = shape(q.model, q.device, q.pp, batch, bound, q.page, layout.page_bytes_per_layer(q.page),
               layout.block_bytes(q.page), q.max_batched_tokens)
    total, weights, tokens = float(q.device.memory), q.weights, whole(q.plan_tokens / groups)
    terms = float(sum(v.value for v in fill_terms(q.reserves, total, sh.batched)))
    frac, _ = fill_fraction(q.memory_fraction)
    if q.memory_fraction is None:
        frac = raised(total, weights, sh, q.page, bound, frac, terms, tokens) or frac
    held = fill_pool(total, weights, sh, q.page, bound, frac, terms)
    blocks = math.ceil(whole(tokens / q.page))
    pool = float(exact_blocks(sh, blocks, batch) * sh.block_bytes)
    # the raise takes back vLLM's own terms from the share the memory model reserves, never more: as the writer
    # raises only for a plan that fits, a candidate the memory model does not fit is not made to fit by it (and
    # its need is the larger of the two)
    reserves = q.reserves.total(total)
    model_need = weights + float(memory.kv_per_device(q.model, q.kv_bytes, q.tp, q.pp)) + reserves
    if q.sizing == "exact":
        # --kv-cache-memory-bytes: vLLM allocates the plan's own pool and no share of memory, so the need is the
        # weights + that pool + the reserves, as the memory model counts them (the exact writer's check)
        need = max(weights + pool + reserves, model_need)
        return Fit(blocks * q.page, pool, need, "--kv-cache-memory-bytes", f"{int(pool)}", need <= total)
    return Fit(blocks * q.page, pool, max(weights + pool + terms, model_need), "--gpu-memory-utilization",
               f"{frac:g}", model_need <= total and held.requests >= 1 and held.sequences(tokens, batch) >= batch)
