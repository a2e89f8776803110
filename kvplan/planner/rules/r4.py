"""R4: above s*, quantize first. The search removes an evicting candidate that is not yet at the
narrowest admissible width; lint reports eviction pinned while the KV stays 16-bit (KV204)."""

from __future__ import annotations

from typing import Optional

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.evidence import derived
from kvplan.catalog import DTYPES
from kvplan.planner.plan import Rejection
from kvplan.planner.rules.rule import PinView, Rule, SearchView, pinned_kv


def reject(v: SearchView, i: int) -> Optional[Rejection]:
    ev = v.ev
    # the dtype's own width, as `narrowest` is: quantizing is about bits a value, not the engine's scale bytes
    # (ev.width, which holds them, would put int4 at 0.53 B above fp4's bare 0.5 B and evict nothing at int4)
    width = DTYPES[str(ev.dtype[i])].width
    if not (ev.retention[i] < 1.0 and width > v.narrowest):
        return None
    return RULE.rejection("quantize to the narrowest admissible width before evicting",
                          (("kv_width", derived(width, "B", "bytes per KV element")),
                           ("narrowest_width", derived(v.narrowest, "B", "narrowest admissible bytes per KV element"))))


def lint(v: PinView) -> list[Diagnostic]:
    k = pinned_kv(v.scenario)
    dt, pin_r, r_val = k.dtype, k.retention_pin, k.retention
    kv_width = dt.width if dt is not None else v.plan.kv_dtype.width
    if pin_r is None or r_val is None or not r_val < 1 or kv_width < 2.0:
        return []
    return [make("KV204", f"retention {r_val:g} is pinned while the KV stays {v.plan.kv_dtype.id}", pin_r.span,
                 help="quantize first: fp8 or int4 KV halves or quarters the bytes (R4)")]


RULE = Rule("R4", "KV204", "Above s*, quantize first: 4-bit is nearly free; 2-bit needs a structure-aware "
            "layout (per-channel keys, per-token values).", reject=reject, lint=lint,
            overruled_by=("kv_dtype", "retention"))
