"""KV footprint (SPEC §3): bytes per token and per sequence, and the factors that scale them.

    B = 2 · L · n_kv · d_h · s · w_q · r · (1 + φ) / σ

Functions take scalars or numpy arrays of context `s` and broadcast. Sliding
windows make the per-sequence bytes a piecewise-linear, concave function of s:
a windowed layer stores min(s, window) tokens.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Union

import numpy as np

from kvplan.base.errors import ModelInputError
from kvplan.base.records import record
from kvplan.catalog import Model

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64]]
    Array = npt.NDArray[np.float64]



def kappa(model: Model, w_kv: float) -> float:
    """Per-token KV bytes with every layer holding the token (SPEC §3: κ = 2·L·n_kv·d_h·w_kv;
    for MLA L·(d_c + d_r)·w_kv). Windows are not applied: this is the slope at s = 0."""
    return float(model.n_layers * model.kv_elems_per_layer * w_kv)


def _segments(model: Model) -> tuple[Array, Array]:
    """Breakpoints (ascending windows) and the per-token byte slope (at w = 1) on each segment.

    Segment i runs from breaks[i] to breaks[i+1]; breaks[0] = 0 and the last segment is open.
    """
    e = float(model.kv_elems_per_layer)
    groups = model.window_groups
    windows = sorted(w for w, _ in groups if w is not None)
    breaks = np.array([0.0] + [float(w) for w in windows])
    slopes = []
    for lo in breaks:
        slopes.append(e * sum(n for w, n in groups if w is None or w > lo))
    return breaks, np.array(slopes, dtype=np.float64)


def kv_bytes_per_seq(model: Model, s: ArrayLike, w_kv: ArrayLike) -> Array:
    """B_kv(s): bytes one sequence of `s` tokens stores, windows applied (before any factor). `w_kv` may be an
    array too (the planner's candidates, one width each)."""
    s_arr = np.asarray(s, dtype=np.float64)
    if model.all_full:  # s · κ, κ = L · (elements per layer) · w_kv as kappa() computes it
        per_token: Array = model.n_layers * model.kv_elems_per_layer * np.asarray(w_kv, dtype=np.float64)
        return s_arr * per_token
    e = float(model.kv_elems_per_layer) * np.asarray(w_kv, dtype=np.float64)
    total = np.zeros(np.broadcast(s_arr, e).shape)
    for window, n in model.window_groups:
        held = s_arr if window is None else np.minimum(s_arr, float(window))
        total = total + e * n * held
    return total


def tokens_for_bytes(model: Model, per_seq_bytes: ArrayLike, w_kv: float) -> Array:
    """Inverse of kv_bytes_per_seq: the context whose sequence stores `per_seq_bytes`.

    Exact on the piecewise-linear curve; +inf where every layer is windowed and the
    bytes exceed what the windows can ever hold; negative input gives a negative
    context (the budget is already overdrawn), which callers report as such.
    """
    target = np.asarray(per_seq_bytes, dtype=np.float64)
    if model.all_full:
        return target / kappa(model, w_kv)
    breaks, slopes = _segments(model)
    slopes = slopes * w_kv
    # bytes at each breakpoint
    at_break = np.concatenate([[0.0], np.cumsum(slopes[:-1] * np.diff(breaks))])
    idx = np.clip(np.searchsorted(at_break, target, side="right") - 1, 0, len(breaks) - 1)
    slope = slopes[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(slope > 0, breaks[idx] + (target - at_break[idx]) / np.where(slope > 0, slope, 1.0),
                     np.inf)
    # below zero: extrapolate with the first slope so that overdrawn budgets stay negative
    return np.where(target < 0, target / slopes[0], s)


def sharing_factor(fanout: ArrayLike, context: ArrayLike, prefix: ArrayLike) -> Array:
    """σ = n·s / (p + n·(s − p)) for n requests of length s sharing a p-token prefix (SPEC §3)."""
    n = np.asarray(fanout, dtype=np.float64)
    s = np.asarray(context, dtype=np.float64)
    p = np.asarray(prefix, dtype=np.float64)
    return (n * s) / (p + n * (s - p))


def fragmentation(context: ArrayLike, block_size: int | None) -> Array:
    """φ of paged allocation: ceil(s / block)·block / s − 1 (the unfilled tail of the last block).

    `None` means no paging: contiguous allocation sized for the context, φ = 0 for the
    context itself (what contiguous allocation wastes depends on the max length
    reserved, which the planner accounts for separately).
    """
    s = np.asarray(context, dtype=np.float64)
    if block_size is None:
        return np.zeros_like(s)
    phi: Array = np.ceil(s / block_size) * block_size / s - 1.0  # typed for numpy 1.x's stubs too
    return phi


@record
class KvFactors:
    """The four footprint factors of SPEC §3 besides the width itself.

    `retention` r ∈ (0, 1]; `sharing` σ ≥ 1; `frag` φ ≥ 0. φ counts toward capacity
    only: decode kernels read filled slots (last_page_len), never the unfilled tail.
    σ counts toward traffic too: a shared-prefix (cascade) kernel reads the shared
    pages once per step — an assumption the planner states where it relies on it.
    """

    retention: float = 1.0
    sharing: float = 1.0
    frag: float = 0.0

    def __attrs_post_init__(self) -> None:
        if not (0 < self.retention <= 1):
            raise ModelInputError(f"retention must be in (0, 1], got {self.retention:g}")
        if not (self.sharing >= 1 - 1e-12) or math.isnan(self.sharing):
            raise ModelInputError(f"sharing factor σ must be ≥ 1, got {self.sharing:g}")
        if self.frag < 0:
            raise ModelInputError(f"fragmentation φ must be ≥ 0, got {self.frag:g}")

    @property
    def capacity(self) -> float:
        """r·(1 + φ)/σ: scales stored bytes."""
        return self.retention * (1.0 + self.frag) / self.sharing

    @property
    def traffic(self) -> float:
        """r/σ: scales bytes read per step."""
        return self.retention / self.sharing


def footprint(model: Model, s: ArrayLike, w_kv: float, factors: KvFactors = KvFactors()) -> Array:
    """Stored bytes of one (average) sequence: B_kv(s)·r·(1+φ)/σ."""
    return kv_bytes_per_seq(model, s, w_kv) * factors.capacity
