"""The model and device catalogs as an aligned text table or contract JSON.

Catalog figures are `reported` (each entry's `source` names where); per-token
KV bytes, ridge points and per-partition bandwidth are `derived` from them.
"""

from __future__ import annotations

import textwrap
from typing import Optional, Sequence

from kvplan import catalog
from kvplan.base.evidence import Value, derived, reported
from kvplan.base.units import fmt_bandwidth, fmt_bytes
from kvplan.catalog import Device, Link, Model
from kvplan.render.common import dump_json, table

BF16 = catalog.DTYPES["bf16"].width


def kv_bytes_per_token(m: Model, width: float = BF16) -> float:
    """κ = L · (2·n_kv·d_h or d_c + d_r) · w (SPEC §2–3), before any window caps."""
    return float(m.kv_elems_per_layer * m.n_layers * width)


def _kv_source(m: Model) -> str:
    if m.kv_kind == "mla":
        return (f"L * (d_c + d_r) * w_kv = {m.n_layers} * ({m.mla_kv_rank} + {m.mla_rope_dim}) * 2 "
                "(docs/model.md §2, MLA, BF16)")
    return f"2 * L * n_kv * d_h * w_kv = 2 * {m.n_layers} * {m.n_kv} * {m.head_dim} * 2 (docs/model.md §2, BF16)"


def _count(x: float) -> str:
    return f"{x / 1e9:.4g}B"


def _windows(m: Model) -> str:
    """'full', 'all 4096', or '21 full, 21 @4096' (layer counts per window)."""
    groups = m.window_groups
    if len(groups) == 1:
        w, _ = groups[0]
        return "full" if w is None else f"all @{w}"
    return ", ".join(f"{n} full" if w is None else f"{n} @{w}" for w, n in groups)


def _aliases(kind: str, cid: str) -> list[str]:
    return sorted(a for a, target in catalog.aliases(kind).items() if target == cid)


# ------------------------------------------------------------------- models

def attention_kind(m: Model) -> str:
    """How the model's attention stores KV: MLA (a latent), MHA (a KV head per query head), MQA
    (one KV head), GQA (groups of query heads share a KV head)."""
    if m.kv_kind == "mla":
        return "MLA"
    if m.n_kv == m.n_q:
        return "MHA"
    return "MQA" if m.n_kv == 1 else "GQA"


#: What each column of `kvplan models` is (also in docs/cli.md).
MODELS_LEGEND = """\
columns:
  id               the name a spec uses (`model = ...`); aliases in `--format json`
  layers           L, decoder layers
  q/kv             query heads / KV heads per layer
  d_h              head dimension (MLA: the query-key head dimension)
  attn             how KV is stored: MHA one KV head per query head, GQA groups of query heads
                   share a KV head, MQA one KV head, MLA one compressed latent per layer
  KV B/token bf16  κ, derived (docs/model.md §2), before window caps
  params/active    parameters held / read per token at batch 1 (MoE only)
  windows          layers per attention window: full, or @N = a sliding window of N tokens
  the rest is reported from each model's config.json: sources in `kvplan models --format json`
  and docs/catalog.md
"""


def models(items: Sequence[Model], fmt: str) -> str:
    ordered = sorted(items, key=lambda m: m.id)
    if fmt == "json":
        return dump_json({"models": [_model_json(m) for m in ordered]})
    rows = []
    for m in ordered:
        params = _count(m.params) + (f"/{_count(m.params_active)}" if m.is_moe else "")
        rows.append([m.id, str(m.n_layers), f"{m.n_q}/{m.n_kv}", str(m.head_dim), attention_kind(m),
                     f"{kv_bytes_per_token(m):,.0f}", params, _windows(m)])
    head = ["id", "layers", "q/kv", "d_h", "attn", "KV B/token bf16", "params/active", "windows"]
    return table(head, rows, right=(1, 2, 3, 5)) + "\n" + MODELS_LEGEND


def _model_json(m: Model) -> dict[str, object]:
    rep = m.source or "catalog"
    out: dict[str, object] = {
        "id": m.id, "name": m.name, "hf_id": m.hf_id, "aliases": _aliases("model", m.id),
        "layers": m.n_layers, "q_heads": m.n_q, "kv_heads": m.n_kv, "head_dim": m.head_dim,
        "kv_kind": m.kv_kind, "attention": attention_kind(m),
    }
    if m.kv_kind == "mla":
        out.update(mla_kv_rank=m.mla_kv_rank, mla_rope_dim=m.mla_rope_dim, v_head_dim=m.v_head_dim)
    out["kv_bytes_per_token_bf16"] = derived(kv_bytes_per_token(m), "B", _kv_source(m))
    out["windows"] = [{"window": None if w is None else reported(w, "tokens", rep), "layers": n}
                      for w, n in m.window_groups]
    out["params"] = reported(m.params, "1", rep)
    if m.is_moe:
        out.update(params_active=reported(m.params_active, "1", rep),
                   params_routed=reported(m.params_routed, "1", rep),
                   experts=m.n_experts, experts_per_token=m.experts_per_token)
    out["soft_cap"] = None if m.soft_cap is None else reported(m.soft_cap, "1", rep)
    out["max_context"] = None if m.max_context is None else reported(m.max_context, "tokens", rep)
    out.update(confidence=m.confidence, source=m.source, note=m.note)
    return out


# ------------------------------------------------------------------ devices

def _fabric_text(d: Device) -> str:
    if d.partitions == 1:
        return "n/a"
    return "unpublished" if d.fabric is None else fmt_bandwidth(d.fabric)


#: What each column of `kvplan devices` is (also in docs/cli.md).
DEVICES_LEGEND = """\
columns:
  id            the name a spec uses (`device = ...`); aliases in `--format json`
  memory        HBM capacity C per package
  HBM BW        aggregate HBM bandwidth β
  BF16 TFLOP/s  dense BF16 tensor rate π
  ridge FLOP/B  π/β, derived (docs/model.md §4)
  parts         memory partitions (dies or HBM stacks) a kernel can pin pages to
  BW/part       β/parts, derived (docs/model.md §7)
  fabric        die-to-die bandwidth; n/a: one partition; unpublished: striped bandwidth is an
                upper bound
  conf          confidence in the sources: V vendor document, S well-sourced secondary,
                U uncertain or conflicting (the entry's note says which figure)
  the rest is reported: sources in `kvplan devices --format json` and docs/catalog.md
"""


def devices(items: Sequence[Device], fmt: str) -> str:
    ordered = sorted(items, key=lambda d: d.id)
    if fmt == "json":
        link_ids = sorted({lid for d in ordered for lid in (d.host_link, d.scaleup_link, d.scaleout_link) if lid})
        return dump_json({"devices": [_device_json(d) for d in ordered],
                          "links": [_link_json(catalog.get_link(lid)) for lid in link_ids]})
    rows = [[d.id, fmt_bytes(d.memory), fmt_bandwidth(d.bandwidth), f"{d.compute / 1e12:g}",
             f"{d.ridge:.1f}", str(d.partitions), fmt_bandwidth(d.partition_bandwidth),
             _fabric_text(d), d.confidence] for d in ordered]
    head = ["id", "memory", "HBM BW", "BF16 TFLOP/s", "ridge FLOP/B", "parts", "BW/part", "fabric",
            "conf"]
    prices = [line for d in ordered if d.price_per_hour is not None
              for line in textwrap.wrap(f"{d.id}: {d.price_per_hour:g} USD/h, read {d.price_date}: {d.price_source}",
                                        100, initial_indent="  ", subsequent_indent="    ", break_long_words=False,
                                        break_on_hyphens=False)]
    return (table(head, rows, right=(1, 2, 3, 4, 5, 6)) + "\n" + DEVICES_LEGEND
            + ("prices (reported: public on-demand list prices, USD per device-hour, with the page read and\n"
               "its date; a device not listed has none, and a spec gives one: `price = 2.50 USD/h`):\n"
               + "\n".join(prices) + "\n" if prices else ""))


def _rep(x: float, unit: str, source: str) -> Value:
    """A reported catalog figure; whole base units, since "2.039 TB/s" parses to ...0.0002."""
    return reported(float(round(x)), unit, source)


def _opt(x: Optional[float], unit: str, source: str) -> Optional[Value]:
    return None if x is None else _rep(x, unit, source)


def _device_json(d: Device) -> dict[str, object]:
    rep = d.source or "catalog"
    fabric_status = "not_applicable" if d.partitions == 1 else (
        "unpublished" if d.fabric is None else "published")
    return {
        "id": d.id, "name": d.name, "aliases": _aliases("device", d.id),
        "memory": _rep(d.memory, "B", rep),
        "bandwidth": _rep(d.bandwidth, "B/s", rep),
        "compute_bf16": _rep(d.compute, "FLOP/s", rep),
        "compute_fp8": _opt(d.compute_fp8, "FLOP/s", rep),
        "compute_fp4": _opt(d.compute_fp4, "FLOP/s", rep),
        "ridge": derived(d.ridge, "FLOP/B", "dense BF16 FLOP/s / HBM bandwidth (docs/model.md §4)"),
        "partitions": d.partitions,
        "partition_bandwidth": derived(round(d.partition_bandwidth), "B/s",
                                       f"HBM bandwidth / partitions ({d.partitions}) (docs/model.md §7, pinned)"),
        "fabric": _opt(d.fabric, "B/s", rep),
        "fabric_status": fabric_status,
        "sm_count": d.sm_count,
        "host_link": d.host_link, "scaleup_link": d.scaleup_link, "node": d.node, "scaleout_link": d.scaleout_link,
        "host": d.host,
        "confidence": d.confidence, "source": d.source, "note": d.note,
        "price_per_hour": None if d.price_per_hour is None else reported(d.price_per_hour, "USD/h", d.price_source),
        "price_date": d.price_date or None,
    }


def _link_json(link: Link) -> dict[str, object]:
    return {"id": link.id, "name": link.name,
            "bandwidth_per_direction": _rep(link.bandwidth, "B/s", link.source or "catalog"),
            "source": link.source, "note": link.note}
