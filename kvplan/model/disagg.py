"""Disaggregated prefill/decode: the arithmetic between the two pools (SPEC §14, docs/service.md).

x prefill workers and y decode workers, each an engine of its own layout. A request is prefilled on a prefill worker
(a service of one output token: its first), its KV moves to a decode worker over the link between them, and the
decode worker generates the rest with no prefill chunk in its steps:

    transfer bytes     B_x = B_kv(n_in) at the decode pool's KV width (n_in · κ for a model whose layers all hold
                       every token; windows applied otherwise)
    transfer time      t_x = B_x / β_link, β_link the per-device link between the pools: the scale-up link when
                       every worker sits in one scale-up domain (x·n_p + y·n_d <= the device's node), else the
                       scale-out link (SPEC §12); no latency or efficiency term (a lower bound on the move)
    TTFT               TTFT_prefill(λ/x) + t_x + TTFT_decode(λ/y), the last the wait of an arriving request for
                       the decode iteration in progress, T/2 (kvplan.model.load, decode_only)
    ITL                the decode pool's at λ/y: T(N_d), no λ·P stretch
    x : y              the least x and y whose workers carry λ within the SLOs: x ≈ ⌈λ / μ_p⌉, y ≈ ⌈λ / μ_d⌉,
                       μ the goodput of one worker of each pool

Prefix sharing discounts the prefill (the prefill worker's cache holds the shared prefix): of the `prefix` tokens
each of `fanout` requests shares, one computes them and fanout − 1 read them, so the tokens computed per request
are n_in − prefix·(fanout − 1)/fanout.
"""

from __future__ import annotations

import math
from typing import Optional

from kvplan import catalog
from kvplan.base.errors import KvplanError
from kvplan.catalog import Device, Model
from kvplan.model.footprint import kv_bytes_per_seq


def transfer_bytes(model: Model, n_in: int, w_kv: float) -> float:
    """B_x: the bytes of one prompt's KV that move from the prefill worker to the decode worker."""
    return float(kv_bytes_per_seq(model, n_in, w_kv))


def transfer_time(nbytes: float, link_bandwidth: float) -> float:
    """t_x = B_x / β_link, seconds (module docstring: a lower bound, no latency term)."""
    if not link_bandwidth > 0:
        raise KvplanError(f"the link between the pools needs a positive bandwidth, got {link_bandwidth:g} B/s",
                          help="give the device a scale-up or scale-out link (docs/catalog.md, Nodes and links)")
    return nbytes / link_bandwidth


def pool_link(device: Device, devices: int) -> tuple[Optional[str], bool]:
    """(links.toml id, same node) of the link the KV crosses between pools of `devices` devices in all: the
    scale-up link when they fit one scale-up domain (or the device names no node), else the scale-out link; the id
    is None when the catalog names neither."""
    same = device.node is None or devices <= device.node
    if same or device.scaleout_link is None:
        return device.scaleup_link or device.scaleout_link, same or device.scaleout_link is None
    return device.scaleout_link, False


def link_bandwidth(link: str) -> float:
    """B/s per direction of a catalog link."""
    return catalog.get_link(link).bandwidth


def computed_prompt(n_in: int, prefix: int, fanout: int) -> int:
    """The prompt tokens a prefill worker computes per request: n_in − prefix·(fanout − 1)/fanout (module
    docstring), rounded up, at least one (the last token is always computed)."""
    shared = prefix * (fanout - 1) / fanout if fanout > 1 else 0.0
    return max(1, math.ceil(n_in - min(shared, n_in - 1)))


def workers(rate: float, per_worker: float) -> int:
    """⌈λ / μ⌉: the least workers of rate μ each that carry λ (at least one); 0 when μ is 0 (none do)."""
    if not per_worker > 0:
        return 0
    return max(1, math.ceil(rate / per_worker - 1e-12))


__all__ = ["computed_prompt", "link_bandwidth", "pool_link", "transfer_bytes", "transfer_time", "workers"]
