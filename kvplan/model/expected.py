"""Expected performance beside the lower bound (docs/expected.md): what an engine is expected to achieve.

The bound (kvplan.model.roofline.step_time) assumes perfect kernels at full bandwidth. The expected step is

    T_expected = t_fixed + L · t_layer + W / (η_w · β_eff) + K / (η_kv · β_eff) + T_comm,
                 never below t_fixed + L · t_layer + F / (η_π · π)

with W, K the weight and KV bytes one step reads per tensor-parallel rank (the bound's), η_w and η_kv the
fractions of the bandwidth the weight and KV streams achieve (η_kv also pays the KV dtype's dequantization),
η_π the achievable fraction of dense peak, t_fixed the engine's per-step overhead (sampling, scheduling),
t_layer the fixed time of each of the L layers' small kernels (norms, rotary embedding, KV write, activation:
their bytes are nothing at decode, their time is not) and T_comm the tensor-parallel all-reduces: two per
dense layer, each a latency plus a ring all-reduce of the batch's activations over the device's scale-up link.
Every factor is a `Value` with its evidence class, from `Factors`: kvplan's defaults (kvplan.catalog.performance:
reported where a public measurement backs them, assumed otherwise) or a calibration profile fitted to a user's
measurements (`kvplan calibrate`). TTFT is the prefill of the prompt at η_π · π (never faster than reading the weights
once at η_w · β), plus t_fixed, L · t_layer and the prefill's all-reduces.

Every function broadcasts over numpy arrays of batch `b` and context `s`, like kvplan.model.roofline.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Optional, Sequence, Union

import numpy as np

from kvplan import catalog
from kvplan.base.evidence import Evidence, Value
from kvplan.base.records import record
from kvplan.catalog import Device, Model, performance
from kvplan.catalog.performance import Factor
from kvplan.model.factors import Factors
from kvplan.model.profile import Profile
from kvplan.model.profile import factors as profile_factors
from kvplan.model.roofline import Config, StepTime, step_time, tensor_rate, weight_bytes_read
from kvplan.model.tiering import prefill_flops

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64]]
    Array = npt.NDArray[np.float64]

#: Bytes per activation element the all-reduces move (BF16/FP16 activations).
ACTIVATION_WIDTH = 2.0
#: All-reduces per dense transformer layer under tensor parallelism (after attention, after the MLP).
ALL_REDUCES_PER_LAYER = 2


def residual_width(model: Model) -> int:
    """Elements per token an all-reduce or a pipeline transfer moves: the residual stream's width, the model's
    hidden_size (7,168 for DeepSeek-V3, 5,120 for Qwen3-32B). A model built without one (0) falls back to the
    output projection's input width n_q · v_head_dim, which equals hidden_size for Llama and Mistral."""
    if model.hidden_size:
        return model.hidden_size
    return model.n_q * (model.v_head_dim or model.head_dim)


def all_reduce_time(model: Model, tokens: ArrayLike, tp: ArrayLike, link_bandwidth: Optional[ArrayLike],
                    latency: ArrayLike) -> Array:
    """Seconds the tensor-parallel all-reduces of one forward pass over `tokens` tokens take: two per layer,
    each `latency` plus a ring all-reduce (2·(tp−1)/tp of tokens·hidden·2 B per rank) over the link the group's
    slowest hop crosses (SPEC §12: `link_bandwidth`, one per candidate where the group's span decides it,
    group_bandwidth); 0 on one rank. No link (None): the latency alone, and the caller says the bytes are not
    counted. Over arrays of tokens, or of tensor-parallel sizes and latencies (the planner's candidates)."""
    t = np.asarray(tokens, dtype=np.float64)
    tp_a = np.asarray(tp, dtype=np.float64)
    per: Array = np.asarray(latency, dtype=np.float64) + np.zeros(np.broadcast(t, tp_a).shape)
    if link_bandwidth is not None:
        per = per + 2.0 * (tp_a - 1) / tp_a * t * residual_width(model) * ACTIVATION_WIDTH / link_bandwidth
    out: Array = np.where(tp_a > 1, float(ALL_REDUCES_PER_LAYER * model.n_layers) * per, 0.0)
    return out


def all_to_all_time(model: Model, tokens: ArrayLike, ep: ArrayLike, link_bandwidth: Optional[ArrayLike],
                    latency: ArrayLike) -> Array:
    """Seconds the expert-parallel all-to-alls of one forward pass over `tokens` tokens take (SPEC §14): each layer
    dispatches every token's hidden state to its k experts and combines the results, 2·(tokens/ep)·k·d·w_act·
    (ep−1)/ep bytes per rank over the link the group spans, plus one `latency` each way; 0 on one rank. Every layer
    is counted as a mixture-of-experts layer (the catalog does not record a model's dense layers: DeepSeek-V3's
    first 3 of 61 are dense, so its all-to-all is counted 61/58 = 5% high). No link (None): the latencies alone."""
    t = np.asarray(tokens, dtype=np.float64)
    e = np.asarray(ep, dtype=np.float64)
    per: Array = 2.0 * np.asarray(latency, dtype=np.float64) + np.zeros(np.broadcast(t, e).shape)
    if link_bandwidth is not None:
        moved = 2.0 * t / e * model.experts_per_token * residual_width(model) * ACTIVATION_WIDTH * (e - 1) / e
        per = per + moved / link_bandwidth
    out: Array = np.where(e > 1, float(model.n_layers) * per, 0.0)
    return out


def collective_time(model: Model, device: Device, tokens: ArrayLike, tp: ArrayLike, n: ArrayLike,
                    scaleup: Optional[float], latency: ArrayLike, attention_dp: ArrayLike = 1,
                    ep: ArrayLike = 1, on_group: Optional[ArrayLike] = None) -> Array:
    """Seconds the collectives of one forward pass over `tokens` tokens take, each at the link its group spans
    (group_bandwidth): per layer one all-reduce after attention, over its attention group of tp/attention_dp ranks
    and that group's tokens/attention_dp (none with one rank a group), and one after the MLP over the tp ranks (under
    attention DP the all-gather and reduce-scatter of the whole batch, the same bytes), or, with the experts split
    over `ep` > 1 ranks, the MoE layer's all-to-all dispatch and combine instead (all_to_all_time). `on_group`: the
    tokens of one attention group, where they are not an even share (one prompt prefilled alone). At
    attention_dp = ep = 1 it is all_reduce_time's two all-reduces a layer."""
    d = np.asarray(attention_dp, dtype=np.float64)
    e = np.asarray(ep, dtype=np.float64)
    tp_a = np.asarray(tp, dtype=np.float64)
    group = tp_a / d
    share = np.asarray(tokens, dtype=np.float64) / d if on_group is None else np.asarray(on_group, dtype=np.float64)
    attention = all_reduce_time(model, share, group,
                                group_bandwidth(device, group, n, scaleup), latency) / ALL_REDUCES_PER_LAYER
    mlp = (all_reduce_time(model, tokens, tp_a, group_bandwidth(device, tp_a, n, scaleup), latency)
           / ALL_REDUCES_PER_LAYER)
    moe = all_to_all_time(model, tokens, e, group_bandwidth(device, e, n, scaleup), latency)
    out: Array = attention + np.where(e > 1, moe, mlp)
    return out


def _scaleout(device: Device) -> Optional[float]:
    """B/s per direction of the device's scale-out link, or None where the catalog names none."""
    return catalog.get_link(device.scaleout_link).bandwidth if device.scaleout_link else None


def group_bandwidth(device: Device, tp: ArrayLike, n: ArrayLike, scaleup: Optional[float]) -> Optional[Array]:
    """B/s per direction of the slowest link a tensor-parallel group of `tp` ranks crosses, its replica `n`
    devices laid out rank after rank over nodes of `device.node` (SPEC §12): the scale-up link `scaleup` (as
    the caller passes it) while the group sits in one node, the scale-out link once it spans two — when `tp`
    exceeds the node, or does not divide it and the replica holds more than one node. None where `scaleup` is
    None (the bytes are not counted); the scale-up link where the device has no node or no scale-out link
    (docs/catalog.md, "Nodes and links"). Over arrays of candidates."""
    if scaleup is None:
        return None
    tp_a, n_a = np.asarray(tp, dtype=np.float64), np.asarray(n, dtype=np.float64)
    out = _scaleout(device)
    if device.node is None or out is None:
        same: Array = np.full(np.broadcast(tp_a, n_a).shape, scaleup)
        return same
    spans = (tp_a > device.node) | ((np.mod(device.node, tp_a) != 0) & (n_a > device.node))
    bw: Array = np.where(spans, min(out, scaleup), scaleup)
    return bw


def spanned_link(device: Device, tp: int, n: int) -> Optional[str]:
    """The links.toml id of the link a tensor-parallel group of `tp` ranks in a replica of `n` devices runs its
    all-reduces at (group_bandwidth's choice, for the words beside a figure); None where the device has none."""
    up = link_bandwidth(device)
    bw = group_bandwidth(device, tp, n, up)
    if bw is not None and up is not None and float(bw) < up:
        return device.scaleout_link
    return device.scaleup_link


def pipeline_time(model: Model, device: Device, tokens: ArrayLike, tp: ArrayLike, n: ArrayLike,
                  scaleup: Optional[float], latency: ArrayLike) -> Array:
    """Seconds the pipeline's activation transfers of one forward pass over `tokens` tokens take (SPEC §12):
    n/tp − 1 stage boundaries, each `latency` plus tokens·hidden·2 B over its link — the scale-out link for a
    boundary between two nodes (min(p−1, ⌊(p−1)·tp/node⌋) of them, stages laid out one after the other), the
    scale-up link inside one. No link (None): the latency alone. 0 without pipeline stages. Over arrays."""
    t = np.asarray(tokens, dtype=np.float64)
    tp_a, n_a = np.asarray(tp, dtype=np.float64), np.asarray(n, dtype=np.float64)
    boundaries = n_a / tp_a - 1.0
    lat = np.asarray(latency, dtype=np.float64)
    if scaleup is None:
        out_lat: Array = boundaries * lat + np.zeros(t.shape)
        return out_lat
    out = _scaleout(device)
    crossing = (np.zeros(np.broadcast(tp_a, n_a).shape) if device.node is None or out is None else
                np.minimum(boundaries, np.floor(boundaries * tp_a / device.node)))
    payload = t * residual_width(model) * ACTIVATION_WIDTH
    slow = min(out, scaleup) if out is not None else scaleup
    total: Array = boundaries * lat + (boundaries - crossing) * payload / scaleup + crossing * payload / slow
    return total


def layer_time(model: Model, t_layer: ArrayLike, t_moe: ArrayLike = 0.0) -> Array:
    """Seconds one forward pass spends on its layers' fixed per-layer cost: L · t_layer, plus L · t_moe for an
    MoE model (its routing and permutation kernels; every layer counted as an MoE layer, which overstates models
    with a few dense layers first, DeepSeek-V3's 3 of 61). Every layer runs on every step, whatever the
    parallelism."""
    per = np.asarray(t_layer, dtype=np.float64)
    if model.is_moe:
        per = per + np.asarray(t_moe, dtype=np.float64)
    out: Array = float(model.n_layers) * per
    return out


@record
class Rates:
    """The factors' numbers the expected figures use: scalars for one deployment (`of`), arrays with one entry
    per point for the planner's candidates (`over`, each candidate's KV dtype has its own)."""

    eta_w: ArrayLike
    eta_kv: ArrayLike
    eta_compute: ArrayLike
    t_fixed: ArrayLike
    t_layer: ArrayLike
    latency: ArrayLike      # collective_latency
    t_moe: ArrayLike = 0.0
    gemm: ArrayLike = 0.0   # 1 / η_gemm where the GEMMs serialise with the memory stream, else 0 (they overlap)

    @classmethod
    def of(cls, f: Factors) -> Rates:
        return cls(f.eta_w.value, f.eta_kv.value, f.eta_compute.value, f.t_fixed.value, f.t_layer.value,
                   f.collective_latency.value, f.t_moe.value, _gemm(f))

    @classmethod
    def over(cls, fs: Sequence[Factors]) -> Rates:
        def each(name: str) -> Array:
            return np.array([getattr(f, name).value for f in fs], dtype=np.float64)

        return cls(each("eta_w"), each("eta_kv"), each("eta_compute"), each("t_fixed"), each("t_layer"),
                   each("collective_latency"), each("t_moe"), np.array([_gemm(f) for f in fs], dtype=np.float64))


def _gemm(f: Factors) -> float:
    """The GEMM term's coefficient: 1/η_gemm where the factors set η_gemm, 0 (overlapped) where they do not."""
    return 0.0 if f.eta_gemm is None else 1.0 / f.eta_gemm.value


@record
class ExpectedStep:
    """The expected decode step and its terms, in seconds (docs/expected.md), each over the points evaluated."""

    fixed: Array      # t_fixed
    layers: Array     # L · t_layer (+ L · t_moe for an MoE model)
    weights: Array    # the bound's weights term / η_w
    kv: Array         # the bound's KV term / η_kv
    comm: Array       # the all-reduces over the batch's tokens
    compute: Array    # the bound's compute term / η_π (the floor)
    step: Array       # max(fixed + layers + weights + kv + comm + gemm, fixed + layers + compute)
    gemm: Array       # the weight GEMMs' FLOPs / (tp · η_gemm · π_w) where they serialise (η_gemm set), else 0


@record
class ExpectedTtft:
    """The expected time to first token and its terms, in seconds (docs/expected.md)."""

    prefill: Array    # max(F_prefill / (tp · η_π · π), weights read once / (tp · η_w · β))
    comm: Array       # the prefill's all-reduces over the prompt's tokens
    fixed: Array      # t_fixed
    layers: Array     # L · t_layer (+ L · t_moe for an MoE model)
    ttft: Array       # their sum


def expected_from_bound(model: Model, device: Device, bound: StepTime, b: ArrayLike, tp: ArrayLike, n: ArrayLike,
                        link_bandwidth: Optional[float], k: Rates, attention_dp: ArrayLike = 1,
                        ep: ArrayLike = 1) -> ExpectedStep:
    """The expected step's equation from the bound's terms: expected_step() below and the planner's search
    (every candidate at once, `tp`, `n` (devices per replica) and `k` one entry each) both compute it here.
    T_comm is the collectives at the links their groups span (collective_time: the all-reduces, the all-to-alls
    of `ep` > 1 expert ranks, attention groups of `attention_dp`) plus the pipeline's transfers (SPEC §12, §14;
    `link_bandwidth` is the device's scale-up link, None: bytes not counted)."""
    t_w = bound.weights / k.eta_w
    t_kv = bound.kv / k.eta_kv
    t_comm = (collective_time(model, device, b, tp, n, link_bandwidth, k.latency, attention_dp, ep)
              + pipeline_time(model, device, b, tp, n, link_bandwidth, k.latency))
    t_comp = bound.compute / k.eta_compute
    t_gemm = bound.linear * np.asarray(k.gemm, dtype=np.float64)
    shape = np.broadcast(t_w, t_kv, t_comm, t_gemm).shape
    fixed = np.broadcast_to(np.asarray(k.t_fixed, dtype=np.float64), shape)
    layers = np.broadcast_to(layer_time(model, k.t_layer, k.t_moe), shape)
    memory_path = fixed + layers + t_w + t_kv + t_comm + t_gemm
    return ExpectedStep(fixed=fixed, layers=layers, weights=t_w, kv=t_kv, comm=t_comm, compute=t_comp,
                        step=np.maximum(memory_path, fixed + layers + t_comp), gemm=np.broadcast_to(t_gemm, shape))


def expected_step(cfg: Config, b: ArrayLike, s: ArrayLike, f: Factors,
                  link_bandwidth: Optional[float]) -> ExpectedStep:
    """The expected decode step and its terms (seconds): fixed, layers (L · t_layer), weights, kv, comm,
    compute (the floor) and step = max(fixed + layers + weights + kv + comm, fixed + layers + compute).
    `link_bandwidth` is the scale-up link's B/s per direction that the all-reduces cross (None: latency only)."""
    return expected_from_bound(cfg.model, cfg.device, step_time(cfg, b, s), b, cfg.tp, cfg.n_devices,
                               link_bandwidth, Rates.of(f), cfg.attention_dp, cfg.expert_parallel)


def prefill_ttft(model: Model, device: Device, prompt: ArrayLike, *, tp: ArrayLike, w_p: float,
                 link_bandwidth: Optional[float], k: Rates, n: Optional[ArrayLike] = None,
                 attention_dp: ArrayLike = 1, ep: ArrayLike = 1) -> ExpectedTtft:
    """The TTFT's equation over arrays of prompt lengths, or of the planner's candidates (`tp`, `n` (devices per
    replica, default `tp`: no pipeline) and `k` one entry each): expected_ttft() below and the planner's search
    both compute it here; its collectives are charged at the links they span, as expected_from_bound's."""
    p = np.asarray(prompt, dtype=np.float64)
    compute = prefill_flops(model, p) / (tp * np.asarray(k.eta_compute, dtype=np.float64) * tensor_rate(device, w_p))
    weights = weight_bytes_read(model, p, w_p) / (tp * np.asarray(k.eta_w, dtype=np.float64) * device.bandwidth)
    prefill = np.maximum(compute, weights)
    per = tp if n is None else n
    # one prompt prefills on one attention group: its collectives as the step's with the prompt's tokens on it
    comm = (collective_time(model, device, p, tp, per, link_bandwidth, k.latency, attention_dp, ep, on_group=p)
            + pipeline_time(model, device, p, tp, per, link_bandwidth, k.latency))
    shape = np.broadcast(prefill, comm).shape
    fixed = np.broadcast_to(np.asarray(k.t_fixed, dtype=np.float64), shape)
    layers = np.broadcast_to(layer_time(model, k.t_layer, k.t_moe), shape)
    return ExpectedTtft(prefill=prefill, comm=comm, fixed=fixed, layers=layers, ttft=prefill + comm + fixed + layers)


def expected_ttft(cfg: Config, prompt: ArrayLike, f: Factors, link_bandwidth: Optional[float]) -> ExpectedTtft:
    """The expected time to first token of one request of `prompt` tokens prefilled alone (seconds):
    prefill = max(F_prefill / (tp · η_π · π), weights read once / (tp · η_w · β)), plus comm (the prefill's
    all-reduces over `prompt` tokens), fixed and layers (L · t_layer); ttft = their sum."""
    return prefill_ttft(cfg.model, cfg.device, prompt, tp=cfg.tp, w_p=cfg.w_p, link_bandwidth=link_bandwidth,
                        k=Rates.of(f), n=cfg.n_devices, attention_dp=cfg.attention_dp, ep=cfg.expert_parallel)


def link_bandwidth(device: Device) -> Optional[float]:
    """B/s per direction of the device's scale-up link (the tensor-parallel all-reduces cross it); None when
    the catalog names none."""
    return catalog.get_link(device.scaleup_link).bandwidth if device.scaleup_link else None


def deployment_factors(device: Device, kv_dtype: str, engine: str, profile: Optional[Profile] = None) -> Factors:
    """The factors of a deployment: kvplan's defaults for the device, KV dtype, engine and the device's scale-up
    link, with the profile's fit (when one is given) laid over them."""
    defaults = default_factors(device, kv_dtype, engine, device.scaleup_link or "")
    return profile_factors(profile, device.id, kv_dtype, engine, defaults)


@functools.lru_cache(maxsize=256)
def default_factors(device: Device, kv_dtype: str, engine: str = "any", link: str = "") -> Factors:
    """kvplan's default factors for that device, KV dtype, engine and scale-up link
    (kvplan/catalog/performance.toml): reported where the entry cites a measurement, assumed otherwise;
    η_kv is η_w × the KV dtype's kv_efficiency (a derived product of its two inputs). Made once per
    argument set (the catalog is read once; each plan asks for every candidate dtype's, four plans an advise)."""

    def value(name: str, unit: str, **ids: str) -> tuple[Value, Factor]:
        f = performance.factor(name, **ids)
        text = f"{name} from performance.toml [{f.table}]" + (f": {f.note}" if f.note else "")
        if f.source:
            return Value(f.value, unit, Evidence.REPORTED, f"{text}; {f.source}"), f
        return Value(f.value, unit, Evidence.ASSUMED, text), f

    eta_w, w = value("eta_w", "x", device=device.id)
    kv_eff, k = value("kv_efficiency", "x", kv=kv_dtype)
    both = "reported" if w.source and k.source else "assumed" if not (w.source or k.source) else "mixed"
    eta_kv = Value(eta_w.value * kv_eff.value, "x",
                   Evidence.DERIVED if both == "mixed" else Evidence(both),
                   f"η_w × kv_efficiency({kv_dtype}) = {eta_w.value:g} × {kv_eff.value:g} ({eta_w.source}; "
                   f"{kv_eff.source})")
    eta_compute, _ = value("eta_compute", "x", device=device.id)
    t_fixed, _ = value("t_fixed", "s", engine=engine)
    latency, _ = value("collective_latency", "s", link=link)
    t_layer, _ = value("t_layer", "s", engine=engine)
    t_moe, _ = value("t_moe", "s", engine=engine)
    gemm = performance.optional_factor("eta_gemm", device=device.id)
    eta_gemm = None if gemm is None else value("eta_gemm", "x", device=device.id)[0]
    return Factors(eta_w, eta_kv, eta_compute, t_fixed, latency, t_layer, t_moe, eta_gemm)


__all__ = ["ACTIVATION_WIDTH", "ALL_REDUCES_PER_LAYER", "ExpectedStep", "ExpectedTtft", "Factors", "Rates",
           "all_reduce_time", "all_to_all_time", "collective_time",
           "default_factors", "deployment_factors", "expected_from_bound", "expected_step",
           "expected_ttft", "group_bandwidth", "layer_time", "link_bandwidth", "pipeline_time", "prefill_ttft",
           "residual_width", "spanned_link"]
