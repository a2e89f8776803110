"""Speculative decoding's step (SPEC §15, docs/speculative.md): a draft proposes k tokens, the target verifies
them in one step of b·(k+1) query tokens, and each verify keeps τ = (1 − α^(k+1))/(1 − α) tokens on average.

The verify step is the expected step's own equation (kvplan.model.expected.expected_from_bound over the bound's
kvplan.model.roofline.step_bound) at b·(k+1) query tokens: the weights are read once (for a mixture of experts,
the experts b·(k+1) tokens touch), each sequence's KV once (at b sequences), and the FLOPs and the all-reduced
activations are those of b·(k+1) tokens. A draft forward is costed with the same factors: its weight bytes and
its layers' KV over the bandwidth, its FLOPs over the compute, the fixed time of its layers; the engine's per-step
overhead t_fixed is paid once per verify step, by the verify. The time per output token is

    T_token = (T_verify(b, k) + k · T_draft(b)) / τ

against the plain expected step T_step(b): the speedup is T_step / T_token. Everything broadcasts over numpy
arrays of k (the planner evaluates k = 1..16 at once), as kvplan.model.expected does over batch and context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from kvplan.base.errors import ModelInputError
from kvplan.base.records import record
from kvplan.model import roofline as rf
from kvplan.model.expected import Rates, all_reduce_time, expected_from_bound, group_bandwidth
from kvplan.model.factors import Factors
from kvplan.model.scenario import Speculation

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64]]
    Array = npt.NDArray[np.float64]

#: The methods with a draft to cost; `ngram` looks its drafts up in the context (no forward pass).
METHODS = ("eagle3", "mtp", "ngram")


@record
class Draft:
    """A draft's cost: `params` it holds, `layers` it runs per drafted token (each holds KV like one target
    layer), and whether a forward reads all its parameters (`dense`: an EAGLE-3 head) or, like an MTP module
    built of one target layer, that layer's share of the target's weight traffic (the experts its batch touches)."""

    method: str
    params: float
    layers: int
    dense: bool = True

    def __attrs_post_init__(self) -> None:
        if self.method not in METHODS:
            raise ModelInputError(f"unknown speculative method '{self.method}'", help="use eagle3, mtp or ngram")
        if self.params < 0 or self.layers < 0:
            raise ModelInputError("a draft's parameters and layers are not negative")


def tau(alpha: ArrayLike, k: ArrayLike) -> Array:
    """τ = (1 − α^(k+1))/(1 − α), the mean tokens one verify step keeps (α in (0, 1), k ≥ 0)."""
    a = np.asarray(alpha, dtype=np.float64)
    kk = np.asarray(k, dtype=np.float64)
    out: Array = (1.0 - a ** (kk + 1.0)) / (1.0 - a)
    return out


def _share(cfg: rf.Config, d: Draft) -> float:
    """The draft's layers as a share of the target's: what its KV and its all-reduces are of the target's."""
    return d.layers / cfg.model.n_layers


def draft_bytes_read(cfg: rf.Config, d: Draft, b: ArrayLike) -> Array:
    """Weight bytes one draft forward reads over the deployment: all its parameters (dense), one target layer's
    share of the step's weight traffic per layer it runs (MTP), nothing for n-gram."""
    if d.method == "ngram":
        return np.zeros(np.shape(b))
    if d.dense:
        return np.full(np.shape(b), d.params * cfg.w_p)
    out: Array = rf.weight_bytes_read(cfg.model, b, cfg.w_p) * _share(cfg, d)
    return out


def draft_flops(cfg: rf.Config, d: Draft, b: ArrayLike, s: ArrayLike) -> Array:
    """FLOPs of one draft forward over b sequences of s tokens: 2 per parameter read per sequence, and its layers'
    share of the target's attention FLOPs; nothing for n-gram."""
    b_arr = np.asarray(b, dtype=np.float64)
    if d.method == "ngram":
        return np.zeros(np.broadcast(b_arr, np.asarray(s)).shape)
    attention = (rf.decode_flops(cfg.model, b_arr, s) - 2.0 * cfg.model.params_active * b_arr) * _share(cfg, d)
    params = d.params if d.dense else cfg.model.params_active * _share(cfg, d)
    out: Array = 2.0 * params * b_arr + attention
    return out


def draft_time(cfg: rf.Config, d: Draft, b: ArrayLike, s: ArrayLike, f: Factors,
               link_bandwidth: Optional[float]) -> Array:
    """The expected seconds of one draft forward: its layers' fixed time plus its weight and KV bytes over the
    achievable bandwidth and its all-reduces, never below its layers' time plus its FLOPs at the achievable
    compute (the expected step's equation for a model of `d.layers` layers); 0 for n-gram."""
    if d.method == "ngram":
        return np.zeros(np.broadcast(np.asarray(b), np.asarray(s)).shape)
    k = Rates.of(f)
    beta_w, _ = rf.beta_eff(cfg.device, "striped", b)
    beta_kv, _ = rf.beta_eff(cfg.device, cfg.placement, b)
    t_w = draft_bytes_read(cfg, d, b) / (cfg.tp * beta_w * float(k.eta_w))
    t_kv = rf.kv_bytes_read(cfg, b, s) * _share(cfg, d) / (cfg.tp * beta_kv * float(k.eta_kv))
    comm = all_reduce_time(cfg.model, b, cfg.tp, group_bandwidth(cfg.device, cfg.tp, cfg.n_devices, link_bandwidth),
                           k.latency) * _share(cfg, d)
    layers = d.layers * float(k.t_layer)
    compute = draft_flops(cfg, d, b, s) / (cfg.tp * cfg.device.compute * float(k.eta_compute))
    out: Array = np.maximum(layers + t_w + t_kv + comm, layers + compute)
    return out


def verify_time(cfg: rf.Config, b: ArrayLike, s: ArrayLike, k: ArrayLike, f: Factors,
                link_bandwidth: Optional[float]) -> Array:
    """The expected seconds of one verify step of b·(k+1) query tokens (the expected step's equation: weights
    read once for the experts b·(k+1) tokens touch, each of the b sequences' KV once, FLOPs and all-reduces of
    b·(k+1) tokens); k = 0 is the plain expected step."""
    b_arr = np.asarray(b, dtype=np.float64)
    queries = b_arr * (np.asarray(k, dtype=np.float64) + 1.0)
    beta_kv, _ = rf.beta_eff(cfg.device, cfg.placement, b_arr)
    bound = rf.step_bound(cfg.model, cfg.device, queries, s, w_p=cfg.w_p, tp=cfg.tp,
                          kv_read=rf.kv_bytes_read(cfg, b_arr, s), beta_kv=beta_kv)
    step: Array = expected_from_bound(cfg.model, cfg.device, bound, queries, cfg.tp, cfg.n_devices, link_bandwidth,
                                      Rates.of(f)).step
    return step


@record
class SpecStep:
    """Speculative decoding at one point, each over the k evaluated (seconds, tokens, x)."""

    k: Array          # draft tokens per verify
    tau: Array        # tokens kept per verify
    verify: Array     # T_verify(b, k)
    draft: Array      # T_draft(b), one draft forward
    per_token: Array  # (T_verify + k · T_draft) / τ
    plain: Array      # T_step(b): the expected step without speculation
    speedup: Array    # plain / per_token


def speculative_step(cfg: rf.Config, b: ArrayLike, s: ArrayLike, k: ArrayLike, alpha: float, d: Draft, f: Factors,
                     link_bandwidth: Optional[float]) -> SpecStep:
    """The time per output token with k drafted tokens at acceptance α, beside the plain step (module docstring)."""
    if not 0.0 < alpha < 1.0:
        raise ModelInputError(f"acceptance must be in (0, 1), got {alpha:g}")
    kk = np.asarray(k, dtype=np.float64)
    if np.any(kk < 1):
        raise ModelInputError("a draft proposes at least one token")
    t = tau(alpha, kk)
    verify = verify_time(cfg, b, s, kk, f, link_bandwidth)
    draft = np.broadcast_to(draft_time(cfg, d, b, s, f, link_bandwidth), verify.shape)
    plain = np.broadcast_to(verify_time(cfg, b, s, 0, f, link_bandwidth), verify.shape)
    per_token = (verify + kk * draft) / t
    return SpecStep(k=np.broadcast_to(kk, verify.shape), tau=np.broadcast_to(t, verify.shape), verify=verify,
                    draft=draft, per_token=per_token, plain=plain, speedup=plain / per_token)


def draft_memory(cfg: rf.Config, d: Draft, b: ArrayLike, s: ArrayLike) -> Array:
    """Bytes the draft takes from the memory pool over the deployment: its weights (nothing for n-gram) and the
    KV its layers hold for b sequences of s tokens, stored as the target's (replicated as the target's)."""
    weights = 0.0 if d.method == "ngram" else d.params * cfg.w_p
    out: Array = weights + rf.kv_bytes_stored(cfg, b, s) * _share(cfg, d)
    return out


__all__ = ["METHODS", "Draft", "SpecStep", "Speculation", "draft_bytes_read", "draft_flops", "draft_memory",
           "draft_time", "speculative_step", "tau", "verify_time"]
