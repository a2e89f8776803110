"""Tiering economics (SPEC §7): recompute a reused context, or fetch its KV over a link.

A remote tier serves reuse between steps and sessions, never reads inside a
decode step. `eta` is the prefill efficiency, an assumed default of 0.7.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from kvplan.catalog import Model
from kvplan.model.footprint import kv_bytes_per_seq

if TYPE_CHECKING:  # numpy.typing is for annotations only: its import costs the cold start
    import numpy.typing as npt

    ArrayLike = Union[float, int, npt.NDArray[np.float64]]
    Array = npt.NDArray[np.float64]


#: SPEC §7: prefill runs at this fraction of dense peak (assumed).
DEFAULT_PREFILL_EFFICIENCY = 0.7


def causal_pairs(s: ArrayLike, window: float | None) -> Array:
    """(query, key) pairs causal attention scores over a prompt of s tokens:
    s²/2 for full attention (the s²/2 of SPEC §7), s·W − W²/2 past a window W."""
    s_arr = np.asarray(s, dtype=np.float64)
    if window is None:
        return s_arr**2 / 2.0
    w = float(window)
    return np.where(s_arr <= w, s_arr**2 / 2.0, w * s_arr - w**2 / 2.0)


def prefill_flops(model: Model, s: ArrayLike) -> Array:
    """2·P_active·s + 2·L·n_q·d_h·s² for full attention (SPEC §7), windows applied per layer: per causal
    (query, key) pair 2·n_q·(d_qk + d_v) at the widths engines prefill with (Model.prefill_attn_dims: MLA
    expanded, 2·n_q·(192 + 128) for DeepSeek-V3, not the absorbed latent's 2·n_q·(576 + 512) decode runs)."""
    d_qk, d_v = model.prefill_attn_dims
    per_pair = 2.0 * model.n_q * (d_qk + d_v)
    attn = sum(n * causal_pairs(s, w) for w, n in model.window_groups)
    return 2.0 * model.params_active * np.asarray(s, dtype=np.float64) + per_pair * attn


def prefill_time(model: Model, s: ArrayLike, compute: float, eta: float = DEFAULT_PREFILL_EFFICIENCY) -> Array:
    """Seconds to recompute the KV of s tokens at η·π FLOP/s."""
    return prefill_flops(model, s) / (eta * compute)


def fetch_time(model: Model, s: ArrayLike, w_kv: float, link_bandwidth: float, codec_ratio: float = 1.0) -> Array:
    """Seconds to move B_kv(s) over a link of the given per-direction bandwidth, shrunk
    `codec_ratio`× by a transport codec (e.g. CacheGen's 3.5–4.3×, reported)."""
    return kv_bytes_per_seq(model, s, w_kv) / (link_bandwidth * codec_ratio)
