"""One memory model for every device of a deployment: the planner's fit filter, its numbers, lint's
`fits`, and every emit backend's accounting all call these functions (docs/model.md, "Memory per
device").

    layers on the most loaded stage   = ⌈L / pp⌉
    weights per device                = P · w_p · ⌈L/pp⌉ / (L · tp)     (parameters spread evenly
                                                                        over layers, split over tp)
    KV per device                     = KV bytes (replication included) · ⌈L/pp⌉ / (L · tp)
    reserves per device               = activation reserve + runtime reserve
    fits                              ⇔ weights + KV + reserves ≤ device memory, on the most loaded
                                        device

With pp dividing L every device holds the same share and the totals (N devices) say the same; with
36 layers over 35 stages one stage holds 2 layers, twice the average, and only the per-device check
sees it.

The reserves are `assumed` defaults the user can override: the runtime reserve (CUDA context,
communication buffers, allocator slack) is 1 GiB; the activation reserve is the reserve fraction
(8%, what vLLM's default --gpu-memory-utilization 0.92 leaves free) of the device less the runtime
reserve, never below 0. Together they keep max(8% of the device, 1 GiB) free.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from kvplan.base.errors import ModelInputError
from kvplan.base.evidence import Value, assumed
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import Model

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64], npt.NDArray[np.int64]]
    Array = npt.NDArray[np.float64]


GiB = 2**30

#: Fraction of each device's memory kept free for activations and the runtime (assumed: vLLM's
#: default --gpu-memory-utilization of 0.92 leaves the same 8%). `--reserve` overrides it.
DEFAULT_RESERVE = 0.08
#: Runtime memory per device outside the KV pool and activations: CUDA context, communication
#: buffers, allocator slack. A round figure, assumed; measure yours and pass --runtime-reserve.
DEFAULT_RUNTIME_RESERVE = 1 * GiB


@record
class Reserves:
    """Per-device memory kept outside weights and KV. `activation` and `runtime` are bytes (None
    takes the default); `fraction` sizes the default activation reserve."""

    activation: Optional[float] = None
    runtime: Optional[float] = None
    fraction: float = DEFAULT_RESERVE
    #: CUDA-graph memory per device, bytes, that an engine subtracts from its memory fraction (`kvplan emit
    #: --cudagraph-reserve`; None: the engine record's assumed default). Not part of the planner's fit: the
    #: planner's reserves are the 8% the engine's fraction leaves, and this sits inside the fraction.
    cudagraph: Optional[float] = None

    def __attrs_post_init__(self) -> None:
        for option, v in (("--activation-reserve", self.activation), ("--runtime-reserve", self.runtime),
                          ("--cudagraph-reserve", self.cudagraph)):
            if v is not None and not (math.isfinite(v) and 0 <= v < 2**64):
                raise ModelInputError(f"{option} must be a byte size from 0 to 2^64 B, got "
                                      f"{fmt_unit(v, 'B') if math.isfinite(v) else v}",
                                      help=f"write the memory per device, e.g. {option} 6GiB")
        if not (math.isfinite(self.fraction) and 0 <= self.fraction < 1):
            raise ModelInputError(f"--reserve must be a fraction in [0, 1), got {self.fraction:g}")

    def resolve(self, device_memory: float) -> tuple[Value, Value]:
        """(activation, runtime) for a device of `device_memory` bytes, each an `assumed` Value."""
        if self.runtime is None:
            runtime = assumed(DEFAULT_RUNTIME_RESERVE, "B", "runtime reserve per GPU (CUDA context, communication "
                                                            "buffers): 1 GiB, a round default; --runtime-reserve")
        else:
            runtime = assumed(self.runtime, "B", "runtime reserve per GPU (--runtime-reserve)")
        if self.activation is None:
            act = max(0.0, self.fraction * device_memory - runtime.value)
            share = ("the planner's 8% reserve (vLLM's default --gpu-memory-utilization 0.92 leaves 8%)"
                     if self.fraction == DEFAULT_RESERVE else f"the --reserve {self.fraction:.4g} of the device")
            activation = assumed(act, "B", f"activation reserve per GPU: {share} less the runtime reserve; "
                                           "--activation-reserve")
        else:
            activation = assumed(self.activation, "B", "activation reserve per GPU (--activation-reserve)")
        return activation, runtime

    def total(self, device_memory: float) -> float:
        """Bytes per device the reserves keep free."""
        a, r = self.resolve(device_memory)
        return float(a.value + r.value)


def stage_layers(model: Model, pp: ArrayLike) -> Array:
    """Layers on the most loaded pipeline stage: ⌈L / pp⌉."""
    layers: Array = np.ceil(model.n_layers / np.maximum(1, np.asarray(pp, dtype=np.float64)))
    return layers  # a typed local: numpy 1.x's stubs type np.ceil's result as Any


def device_share(model: Model, tp: ArrayLike, pp: ArrayLike) -> Array:
    """The most loaded device's share of the layered bytes: ⌈L/pp⌉ / (L · tp)."""
    return stage_layers(model, pp) / (model.n_layers * np.asarray(tp, dtype=np.float64))


def weights_held(model: Model, w_p: float) -> float:
    """Weight bytes over the whole deployment: the checkpoint's exact bytes where known
    (`Model.weight_bytes`, kvplan.catalog.weight_bytes), else P · w_p."""
    return model.weight_bytes.held if model.weight_bytes is not None else model.params * w_p


def weights_per_device(model: Model, w_p: float, tp: ArrayLike, pp: ArrayLike) -> Array:
    """Weight bytes on the most loaded device: P · w_p · ⌈L/pp⌉ / (L · tp)."""
    return weights_held(model, w_p) * device_share(model, tp, pp)


def kv_per_device(model: Model, kv_bytes: ArrayLike, tp: ArrayLike, pp: ArrayLike) -> Array:
    """KV bytes on the most loaded device, from the deployment's KV bytes with tensor-parallel
    replication already counted (kvplan.model.roofline.kv_bytes_stored): KV · ⌈L/pp⌉ / (L · tp)."""
    return np.asarray(kv_bytes, dtype=np.float64) * device_share(model, tp, pp)


def kv_room(model: Model, device_memory: float, reserved: float, w_p: float, tp: ArrayLike,
            pp: ArrayLike) -> Array:
    """The deployment's KV bytes (replication included) at which the most loaded device is full:
    (C − reserves − weights per device) · L · tp / ⌈L/pp⌉. Negative when the weights alone do not fit."""
    tp_a, pp_a = np.asarray(tp, dtype=np.float64), np.maximum(1, np.asarray(pp, dtype=np.float64))
    usable = device_memory - reserved
    share = device_share(model, tp_a, pp_a)
    uneven = (usable - weights_per_device(model, w_p, tp_a, pp_a)) / share
    even = usable * tp_a * pp_a - weights_held(model, w_p)  # the same when pp divides L, without rounding
    return np.where(stage_layers(model, pp_a) * pp_a == model.n_layers, even, uneven)


@record
class DeviceMemory:
    """One device's bytes: the most loaded device of a deployment."""

    weights: float
    kv: float
    activation: Value
    runtime: Value
    total: float                 # device memory

    @property
    def reserves(self) -> float:
        return float(self.activation.value + self.runtime.value)

    @property
    def usable(self) -> float:
        """Device memory less the reserves: what weights and KV may take."""
        return self.total - self.reserves

    @property
    def needed(self) -> float:
        """weights + KV + reserves."""
        return self.weights + self.kv + self.reserves

    @property
    def fits(self) -> bool:
        return self.needed <= self.total

    @property
    def headroom(self) -> float:
        """1 − (weights + KV) / usable."""
        return 1.0 - (self.weights + self.kv) / self.usable if self.usable > 0 else float("-inf")


def per_device(model: Model, device_memory: float, *, w_p: float, kv_bytes: float, tp: int, pp: int,
               reserves: Reserves = Reserves(), kv_on_device: Optional[float] = None) -> DeviceMemory:
    """The most loaded device's memory. `kv_on_device` replaces the KV share when the caller has
    sized it itself (an engine's pool in whole blocks of that device's layers and heads)."""
    activation, runtime = reserves.resolve(device_memory)
    kv = float(kv_per_device(model, kv_bytes, tp, pp)) if kv_on_device is None else float(kv_on_device)
    return DeviceMemory(float(weights_per_device(model, w_p, tp, pp)), kv, activation, runtime, float(device_memory))


__all__ = ["DEFAULT_RESERVE", "DEFAULT_RUNTIME_RESERVE", "DeviceMemory", "GiB", "Reserves", "device_share",
           "kv_per_device", "kv_room", "per_device", "stage_layers", "weights_held", "weights_per_device"]
