"""One decode step (SPEC §4–6): FLOPs and bytes, the two crossovers, regimes, placement.

Every function broadcasts over numpy arrays of batch `b` and context `s`, so a
single point and a million-point sweep share the same code. All quantities are
in base units: bytes, B/s, FLOP, FLOP/s, seconds, tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from kvplan.base.errors import ModelInputError
from kvplan.base.records import record
from kvplan.catalog import Device, Model
from kvplan.model import memory
from kvplan.model.footprint import KvFactors, kv_bytes_per_seq, tokens_for_bytes

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64]]
    Array = npt.NDArray[np.float64]


PLACEMENTS = ("striped", "pinned", "affinity")
REGIMES = ("weight-bound", "kv-bound", "capacity-bound")


@record
class Config:
    """A deployment point the model evaluates: what is stored, how wide, on what.

    `tp` is the tensor-parallel size (default: all devices); the rest of the
    devices are pipeline stages (`n_devices / tp`). `reserve` is the fraction of
    each device's memory kept for activations and runtime (0 in SPEC's s_cap), `reserved` the bytes
    per device kept besides it (the planner passes kvplan.model.memory's resolved reserves here).
    """

    model: Model
    device: Device
    n_devices: int = 1
    tp: int = 0
    w_p: float = 2.0
    w_kv: float = 2.0
    factors: KvFactors = KvFactors()
    placement: str = "striped"
    reserve: float = 0.0
    reserved: float = 0.0
    attention_dp: int = 1
    expert_parallel: int = 1   # ranks the routed experts are split over (kvplan.model.expected.collective_time)

    def __attrs_post_init__(self) -> None:
        if self.n_devices < 1:
            raise ModelInputError(f"device count must be at least 1, got {self.n_devices}")
        if self.tp == 0:
            object.__setattr__(self, "tp", self.n_devices)
        if self.tp < 1 or self.n_devices % self.tp:
            raise ModelInputError(f"tensor-parallel size {self.tp} must divide the device count {self.n_devices}")
        if self.placement not in PLACEMENTS:
            raise ModelInputError(f"unknown placement '{self.placement}'", help="use striped, pinned or affinity")
        if not 0 <= self.reserve < 1:
            raise ModelInputError(f"memory reserve must be in [0, 1), got {self.reserve:g}")
        if not 0 <= self.reserved < float("inf"):
            raise ModelInputError(f"reserved bytes per device must be finite and ≥ 0, got {self.reserved:g}")

    @property
    def pp(self) -> int:
        return self.n_devices // self.tp

    @property
    def kv_replication(self) -> float:
        """Copies of each KV byte across tensor-parallel ranks: KV heads split up to n_kv and
        replicate beyond it; an MLA latent is replicated on every rank of an attention group.
        With attention data parallelism (`attention_dp` groups, SGLang --enable-dp-attention) each
        group of tp / attention_dp ranks holds its own sequences, so only that group replicates."""
        return float(kv_replication(self.model, self.tp, self.attention_dp))

    @property
    def device_usable(self) -> float:
        """Bytes one device can give weights and KV: C · (1 − reserve) − reserved."""
        return self.device.memory * (1.0 - self.reserve) - self.reserved

    @property
    def capacity(self) -> float:
        """Bytes the deployment can hold: N · (C · (1 − reserve) − reserved)."""
        return self.n_devices * self.device_usable

    @property
    def kv_room(self) -> float:
        """KV bytes (replication included) at which the most loaded device is full (kvplan.model.memory):
        capacity − P·w_p when the pipeline stages split the layers evenly, less otherwise."""
        return float(memory.kv_room(self.model, self.device_usable, 0.0, self.w_p, self.tp, self.pp))


def kv_replication(model: Model, tp: ArrayLike, attention_dp: int = 1) -> Array:
    """Copies of each KV byte over `tp` ranks split into `attention_dp` attention groups (a count that
    does not divide tp counts as the largest one that does): an MLA latent on every rank of a group,
    KV heads split over a group's ranks up to n_kv and replicated beyond."""
    tp_a = np.asarray(tp, dtype=np.int64)
    group: Array = (tp_a // np.gcd(tp_a, max(1, attention_dp))).astype(np.float64)
    if model.kv_kind == "mla":
        return group
    out: Array = np.maximum(1.0, group / model.n_kv)
    return out


def check_batch_context(b: ArrayLike, s: ArrayLike) -> None:
    """Reject what no deployment can have: a batch below 1 or a context below 1 token."""
    if np.any(np.asarray(b) < 1):
        raise ModelInputError(f"batch must be at least 1, got {np.min(b):g}", help="a batch counts sequences")
    if np.any(np.asarray(s) < 1):
        raise ModelInputError(f"context must be at least 1 token, got {np.min(s):g}")


# ---------------------------------------------------------------- weights

def experts_touched_fraction(model: Model, b: ArrayLike) -> Array:
    """Fraction of routed experts a step touches under uniform routing (assumed):
    1 − (1 − k/E)^b. 1 for a dense model."""
    b_arr = np.asarray(b, dtype=np.float64)
    if not model.is_moe:
        return np.ones_like(b_arr)
    k, e = model.experts_per_token, model.n_experts
    return 1.0 - (1.0 - k / e) ** b_arr


def weight_bytes_read(model: Model, b: ArrayLike, w_p: float) -> Array:
    """Weight bytes one step reads: all of them for a dense model; for MoE the
    non-routed parameters plus the routed experts the batch touches (SPEC §4).
    A model with exact checkpoint bytes (`Model.weight_bytes`) reads those, its
    routed part (stored at its own width, e.g. MXFP4 experts) by the same fraction."""
    frac = experts_touched_fraction(model, b)
    wb = model.weight_bytes
    if wb is not None:
        return (wb.held - wb.routed) + wb.routed * frac if model.is_moe else frac * wb.held
    if not model.is_moe:
        return frac * model.params * w_p
    dense = model.params - model.params_routed
    return (dense + model.params_routed * frac) * w_p


def weight_bytes_held(model: Model, w_p: float) -> float:
    """Capacity always counts every parameter: the checkpoint's exact bytes where known, else P · w_p."""
    return memory.weights_held(model, w_p)


# ---------------------------------------------------------------- one step

def tensor_rate(device: Device, w_p: float) -> float:
    """Dense tensor FLOP/s the GEMMs of weights `w_p` bytes wide run at (docs/expected.md, "Tensor rates"):
    8-bit weights at the device's FP8 rate (a w8a8 FP8 checkpoint: its activations are quantized to FP8 and the
    GEMM runs on FP8 tensor cores), 4-bit weights at its FP4 rate (NVFP4 w4a4) where the part has one; a part
    without that rate runs them weight-only (dequantized to BF16 inside the GEMM: MXFP4 or INT4 on Hopper,
    FP8 on A100), at its BF16 rate, as 16-bit weights do. Keyed by width: an INT8 w8a8 checkpoint runs at the
    INT8 rate, equal to FP8's on every catalog part that has both; an INT4 weight-only checkpoint on an FP4 part
    is taken at the FP4 rate, which overstates it (the bound stays a bound)."""
    if w_p <= 0.5:
        return device.compute_fp4 if device.compute_fp4 is not None else device.compute
    if w_p <= 1.0 and device.compute_fp8 is not None:
        return device.compute_fp8
    return device.compute


def linear_flops(model: Model, b: ArrayLike) -> Array:
    """The FLOPs of one decode step's weight GEMMs (the linear layers, experts included): 2·P_active·b."""
    out: Array = 2.0 * model.params_active * np.asarray(b, dtype=np.float64)
    return out


def decode_flops(model: Model, b: ArrayLike, s: ArrayLike) -> Array:
    """F(b, s) = 2·P_active·b + 2·b·n_q·(d_qk + d_v)·Σ_layers min(s, window)
    (= 4·b·s·L·n_q·d_h for full attention; SPEC §4)."""
    b_arr = np.asarray(b, dtype=np.float64)
    s_arr = np.asarray(s, dtype=np.float64)
    d_qk, d_v = model.attn_dims
    per_pos = 2.0 * model.n_q * (d_qk + d_v)
    held = np.zeros(np.broadcast(b_arr, s_arr).shape)
    for window, n in model.window_groups:
        held = held + n * (s_arr if window is None else np.minimum(s_arr, float(window)))
    return 2.0 * model.params_active * b_arr + per_pos * b_arr * held


def kv_bytes(model: Model, b: ArrayLike, s: ArrayLike, *, w_kv: ArrayLike, factor: ArrayLike,
             replication: ArrayLike) -> Array:
    """b · B_kv(s) · factor · replication (SPEC §3): the KV bytes of b sequences of s tokens at width w_kv, over
    the deployment; `factor` is r/σ for the bytes a step reads, r(1+φ)/σ for those stored (KvFactors). Every
    argument may be an array: a grid of batch × context, or the planner's candidates (one width, factor and
    replication each)."""
    b_arr = np.asarray(b, dtype=np.float64)
    out: Array = b_arr * kv_bytes_per_seq(model, s, w_kv) * factor * replication
    return out


def kv_bytes_read(cfg: Config, b: ArrayLike, s: ArrayLike) -> Array:
    """KV bytes a step reads over the whole deployment: b · B_kv(s) · r/σ · replication."""
    return kv_bytes(cfg.model, b, s, w_kv=cfg.w_kv, factor=cfg.factors.traffic, replication=cfg.kv_replication)


def kv_bytes_stored(cfg: Config, b: ArrayLike, s: ArrayLike) -> Array:
    """KV bytes held for the batch: b · B_kv(s) · r(1+φ)/σ · replication."""
    return kv_bytes(cfg.model, b, s, w_kv=cfg.w_kv, factor=cfg.factors.capacity, replication=cfg.kv_replication)


def decode_bytes(cfg: Config, b: ArrayLike, s: ArrayLike) -> Array:
    """M(b, s) = weight bytes read + KV bytes read."""
    return weight_bytes_read(cfg.model, b, cfg.w_p) + kv_bytes_read(cfg, b, s)


def intensity(cfg: Config, b: ArrayLike, s: ArrayLike) -> Array:
    """I = F / M in FLOP/B."""
    return decode_flops(cfg.model, b, s) / decode_bytes(cfg, b, s)


def intensity_limits(model: Model, b: ArrayLike, w_p: float, w_kv: float) -> tuple[Array, float]:
    """The two limits of I: short context 2·b·P_active / weight bytes read (2b/w_p for a dense
    model: 1 FLOP/B at b = 1, BF16; for MoE the bytes read grow with the experts the batch
    touches) and long context 2g/w_kv, independent of the batch (SPEC §4)."""
    d_qk, d_v = model.attn_dims
    b_arr = np.asarray(b, dtype=np.float64)
    short = 2.0 * b_arr * model.params_active / weight_bytes_read(model, b_arr, w_p)
    long = 2.0 * model.n_q * (d_qk + d_v) / (model.kv_elems_per_layer * w_kv)
    return short, long


# ---------------------------------------------------------------- placement

def beta_eff(device: Device, placement: str, b: ArrayLike = 1) -> tuple[Array, bool]:
    """Effective bandwidth of the KV stream (SPEC §6) and whether it is an upper bound.

    pinned: β/n. striped: min(β, β_link·n/(n−1)); an unpublished fabric gives β as an
    upper bound. affinity: (b / ceil(b/n)) · β/n — each partition streams its own
    sequences; the most loaded one sets the pace.
    """
    n = device.partitions
    b_arr = np.asarray(b, dtype=np.float64)
    beta = device.bandwidth
    if n == 1:
        return np.full(b_arr.shape, beta), False
    if placement == "pinned":
        return np.full(b_arr.shape, beta / n), False
    if placement == "striped":
        if device.fabric is None:
            return np.full(b_arr.shape, beta), True
        return np.full(b_arr.shape, min(beta, device.fabric * n / (n - 1))), False
    if placement == "affinity":
        return (b_arr / np.ceil(b_arr / n)) * beta / n, False
    raise ModelInputError(f"unknown placement '{placement}'", help="use striped, pinned or affinity")


@record
class StepTime:
    """The lower bound on one decode step and its terms, in seconds (SPEC §4), each over the points evaluated."""

    weights: Array    # weight bytes read / (tp · β_eff striped)
    kv: Array         # KV bytes read / (tp · β_eff of the placement)
    memory: Array     # weights + kv
    compute: Array    # FLOPs / (tp · π_w), π_w the tensor rate of the weights' dtype (tensor_rate)
    step: Array       # max(memory, compute)
    linear: Array     # the weight GEMMs' part of compute: 2·P_active·b / (tp · π_w)


def step_bound(model: Model, device: Device, b: ArrayLike, s: ArrayLike, *, w_p: float, tp: ArrayLike,
               kv_read: ArrayLike, beta_kv: ArrayLike) -> StepTime:
    """The bound's equation, T = max((W/β_w + K/β_kv)/tp, F/(tp·π_w)), over arrays of batch and context or of the
    planner's candidates (`tp`, `kv_read` and `beta_kv` one each): step_time() below and the planner's search
    (kvplan.planner.search) both compute it here."""
    beta_w, _ = beta_eff(device, "striped", b)
    # each term as float64 arrays: numpy 1.24's stubs type a sum of ArrayLike quotients as float-or-bool
    t_w = np.asarray(weight_bytes_read(model, b, w_p) / (tp * beta_w), dtype=np.float64)
    t_kv = np.asarray(kv_read / (tp * np.asarray(beta_kv, dtype=np.float64)), dtype=np.float64)
    t_mem = t_w + t_kv
    rate = tensor_rate(device, w_p)
    t_comp = np.asarray(decode_flops(model, b, s) / (tp * rate), dtype=np.float64)
    t_lin = np.asarray(linear_flops(model, b) / (tp * rate), dtype=np.float64)
    return StepTime(weights=t_w, kv=t_kv, memory=t_mem, compute=t_comp, step=np.maximum(t_mem, t_comp), linear=t_lin)


def step_time(cfg: Config, b: ArrayLike, s: ArrayLike) -> StepTime:
    """Lower bound on one decode step: max(memory time, compute time) per SPEC §4.

    Weights stream at the striped bandwidth (the framework spreads them over all
    partitions whatever the KV placement); KV streams at the placement's β_eff.
    Tensor parallelism divides both across `tp` ranks; pipeline stages run one
    after another, so they add capacity, not speed.
    """
    beta_kv, _ = beta_eff(cfg.device, cfg.placement, b)
    return step_bound(cfg.model, cfg.device, b, s, w_p=cfg.w_p, tp=cfg.tp, kv_read=kv_bytes_read(cfg, b, s),
                      beta_kv=beta_kv)


# ---------------------------------------------------------------- crossovers

def s_star(cfg: Config, b: ArrayLike) -> Array:
    """Traffic crossover: the context at which KV bytes read equal weight bytes read,
    s*(b) = P·w_p / (b·κ) for full attention, solved exactly where windows bend B_kv(s)."""
    b_arr = np.asarray(b, dtype=np.float64)
    per_seq = weight_bytes_read(cfg.model, b_arr, cfg.w_p) / (b_arr * cfg.factors.traffic * cfg.kv_replication)
    return tokens_for_bytes(cfg.model, per_seq, cfg.w_kv)


def s_cap(cfg: Config, b: ArrayLike, block_size: int | None = None) -> Array:
    """Capacity crossover: the longest context whose weights plus KV fit,
    s_cap(b) = (N·C − P·w_p) / (b·κ); negative when the weights alone do not fit. The free bytes
    are those of the most loaded device scaled to the deployment (Config.kv_room), so a pipeline
    whose stages hold unequal layers fills up when its fullest stage does.

    With paging, a sequence occupies whole blocks, so the result is rounded down
    to a block multiple (the fragmentation factor then needs no separate term).
    """
    b_arr = np.asarray(b, dtype=np.float64)
    free = cfg.kv_room
    f = cfg.factors
    stored_factor = (f.retention / f.sharing if block_size is not None else f.capacity) * cfg.kv_replication
    s = tokens_for_bytes(cfg.model, free / (b_arr * stored_factor), cfg.w_kv)
    if block_size is not None:
        s = np.where(np.isfinite(s) & (s > 0), np.floor(s / block_size) * block_size, s)
    return s


def regime(s: ArrayLike, s_star_v: ArrayLike, s_cap_v: ArrayLike) -> npt.NDArray[np.str_]:
    """weight-bound below s*, capacity-bound above s_cap, KV-bound between (SPEC §5)."""
    s_arr = np.asarray(s, dtype=np.float64)
    return np.where(s_arr > np.asarray(s_cap_v), "capacity-bound",
                    np.where(s_arr < np.asarray(s_star_v), "weight-bound", "kv-bound"))


def speedup(weights: ArrayLike, kv: ArrayLike, c: ArrayLike) -> Array:
    """S(c) = (W + K) / (W + K/c): the memory-bound speedup of shrinking KV bytes by c."""
    w = np.asarray(weights, dtype=np.float64)
    k = np.asarray(kv, dtype=np.float64)
    return (w + k) / (w + k / np.asarray(c, dtype=np.float64))


def ceiling_rate(cfg: Config, b: ArrayLike = 1) -> Array:
    """R_∞ = β_eff / κ: context tokens per second one device streams in the KV-bound
    limit; aggregate decode throughput there is R_∞ / s whatever the batch."""
    beta, _ = beta_eff(cfg.device, cfg.placement, b)
    per_token = cfg.model.n_layers * cfg.model.kv_elems_per_layer * cfg.w_kv * cfg.factors.traffic
    return beta / per_token


__all__ = [
    "Config", "PLACEMENTS", "REGIMES", "StepTime", "beta_eff", "ceiling_rate", "check_batch_context",
    "decode_bytes", "decode_flops", "experts_touched_fraction", "intensity", "intensity_limits", "kv_bytes",
    "kv_bytes_read", "kv_bytes_stored", "linear_flops", "regime", "s_cap", "s_star", "speedup", "step_bound",
    "step_time", "tensor_rate",
    "weight_bytes_held", "weight_bytes_read",
]
