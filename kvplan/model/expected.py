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
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from kvplan import catalog
from kvplan.base.evidence import Evidence, Value
from kvplan.catalog import Device, Model, performance
from kvplan.catalog.performance import Factor
from kvplan.model.factors import Factors
from kvplan.model.profile import Profile
from kvplan.model.profile import factors as profile_factors
from kvplan.model.roofline import Config, step_time, weight_bytes_read
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
    """Elements per token an all-reduce moves: the residual stream's width, taken as n_q · d_v (the attention
    output's width, which the output projection maps back to the residual stream; equal to hidden_size for
    Llama, Mistral and most dense models, an approximation where they differ)."""
    return model.n_q * model.attn_dims[1]


def all_reduce_time(model: Model, tokens: ArrayLike, tp: int, link_bandwidth: Optional[float],
                    latency: float) -> Array:
    """Seconds the tensor-parallel all-reduces of one forward pass over `tokens` tokens take: two per layer,
    each `latency` plus a ring all-reduce (2·(tp−1)/tp of tokens·hidden·2 B per rank) over the link;
    0 on one rank. No link (None): the latency alone, and the caller says the bytes are not counted."""
    t = np.asarray(tokens, dtype=np.float64)
    if tp <= 1:
        return np.zeros_like(t)
    per: Array = np.full(t.shape, float(latency), dtype=np.float64)
    if link_bandwidth:
        per = per + 2.0 * (tp - 1) / tp * t * residual_width(model) * ACTIVATION_WIDTH / link_bandwidth
    out: Array = float(ALL_REDUCES_PER_LAYER * model.n_layers) * per
    return out


def all_reduce_times(model: Model, tokens: float, tp: ArrayLike, link_bandwidth: Optional[float],
                     latency: ArrayLike) -> Array:
    """all_reduce_time over arrays of tensor-parallel sizes and latencies (one per candidate), with the same
    arithmetic element by element: the planner's search evaluates every candidate at once."""
    tp_a = np.asarray(tp, dtype=np.float64)
    per = np.asarray(latency, dtype=np.float64) + np.zeros_like(tp_a)
    if link_bandwidth:
        per = per + 2.0 * (tp_a - 1) / tp_a * float(tokens) * residual_width(model) * ACTIVATION_WIDTH / link_bandwidth
    out: Array = np.where(tp_a > 1, float(ALL_REDUCES_PER_LAYER * model.n_layers) * per, 0.0)
    return out


def layer_time(model: Model, t_layer: float) -> float:
    """Seconds one forward pass spends on its layers' fixed per-layer cost: L · t_layer (every layer runs on
    every step, whatever the parallelism)."""
    return float(model.n_layers) * t_layer


def expected_step(cfg: Config, b: ArrayLike, s: ArrayLike, f: Factors,
                  link_bandwidth: Optional[float]) -> dict[str, Array]:
    """The expected decode step and its terms (seconds): fixed, layers (L · t_layer), weights, kv, comm,
    compute (the floor) and step = max(fixed + layers + weights + kv + comm, fixed + layers + compute).
    `link_bandwidth` is the scale-up link's B/s per direction that the all-reduces cross (None: latency only)."""
    bound = step_time(cfg, b, s)
    t_w = bound["weights"] / f.eta_w.value
    t_kv = bound["kv"] / f.eta_kv.value
    t_comm = all_reduce_time(cfg.model, b, cfg.tp, link_bandwidth, f.collective_latency.value)
    t_comp = bound["compute"] / f.eta_compute.value
    fixed = np.full(np.shape(t_w), f.t_fixed.value)
    layers = np.full(np.shape(t_w), layer_time(cfg.model, f.t_layer.value))
    memory_path = fixed + layers + t_w + t_kv + t_comm
    return {"fixed": fixed, "layers": layers, "weights": t_w, "kv": t_kv, "comm": t_comm, "compute": t_comp,
            "step": np.maximum(memory_path, fixed + layers + t_comp)}


def expected_ttft(cfg: Config, prompt: ArrayLike, f: Factors, link_bandwidth: Optional[float]) -> dict[str, Array]:
    """The expected time to first token of one request of `prompt` tokens prefilled alone (seconds):
    prefill = max(F_prefill / (tp · η_π · π), weights read once / (tp · η_w · β)), plus comm (the prefill's
    all-reduces over `prompt` tokens), fixed and layers (L · t_layer); ttft = their sum."""
    p = np.asarray(prompt, dtype=np.float64)
    compute = prefill_flops(cfg.model, p) / (cfg.tp * f.eta_compute.value * cfg.device.compute)
    weights = weight_bytes_read(cfg.model, p, cfg.w_p) / (cfg.tp * f.eta_w.value * cfg.device.bandwidth)
    prefill = np.maximum(compute, weights)
    comm = all_reduce_time(cfg.model, p, cfg.tp, link_bandwidth, f.collective_latency.value)
    fixed = np.full(p.shape, f.t_fixed.value)
    layers = np.full(p.shape, layer_time(cfg.model, f.t_layer.value))
    return {"prefill": prefill, "comm": comm, "fixed": fixed, "layers": layers,
            "ttft": prefill + comm + fixed + layers}


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
    return Factors(eta_w, eta_kv, eta_compute, t_fixed, latency, t_layer)


__all__ = ["ACTIVATION_WIDTH", "ALL_REDUCES_PER_LAYER", "Factors", "all_reduce_time", "all_reduce_times",
           "default_factors", "deployment_factors", "expected_step", "expected_ttft", "layer_time", "link_bandwidth",
           "residual_width"]
