"""R3: below s*, do not compress the cache. The search removes a lossy candidate whose own layout,
at 16-bit KV, reads fewer KV bytes than weight bytes per step; the rule yields to capacity when
nothing uncompressed fits. Lint reports compression pinned below s* (KV203)."""

from __future__ import annotations

from typing import Optional

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.evidence import derived
from kvplan.base.units import fmt_unit
from kvplan.catalog import settings
from kvplan.planner.decisions import compression_gain
from kvplan.planner.plan import Change, Rejection
from kvplan.planner.rules.rule import PinView, Rule, SearchView, fix_for, pinned_kv


def _kv_read_16bit(v: SearchView, i: int) -> float:
    """Candidate i's KV bytes read per step with 16-bit KV and every token kept, on its layout."""
    ev = v.ev
    return float(ev.kv_read[i] / (ev.width[i] / 2.0) / ev.retention[i])


def _pinned_lossy(v: SearchView) -> bool:
    # the operator decided: lint reports it
    return v.pinned(settings.pin("kv_dtype")) or v.pinned(settings.pin("retention"))


def reject(v: SearchView, i: int) -> Optional[Rejection]:
    ev = v.ev
    lossy = ev.width[i] < 2.0 or ev.retention[i] < 1.0
    if not lossy:
        return None
    k = _kv_read_16bit(v, i)
    if not k < v.weights_read:
        return None
    return RULE.rejection(
        f"below s* on this layout (KV read {fmt_unit(k, 'B')} < weights {fmt_unit(v.weights_read, 'B')} per step "
        "at 16-bit)",
        (("kv_bytes_read", derived(k, "B", "KV bytes read per step at 16-bit, every token kept, on this layout")),
         ("weight_bytes_read", derived(v.weights_read, "B", "weight bytes read per step"))))


def note(v: SearchView) -> Optional[str]:
    if _pinned_lossy(v) or not any(_kv_read_16bit(v, i) < v.weights_read for i in range(len(v.ev))):
        return None
    return "below s*: compressing the cache barely helps (R3)"


def lint(v: PinView) -> list[Diagnostic]:
    # on the plan's layout, as the search applies R3, with the gain advise prints (one computation)
    sc, plan = v.scenario, v.plan
    k = pinned_kv(sc)
    pin_dt, dt, pin_r, r_val = k.dtype_pin, k.dtype, k.retention_pin, k.retention
    if not ((dt is not None and dt.lossy) or (r_val is not None and r_val < 1)):
        return []
    c = (2.0 / dt.width if dt is not None else 1.0) / (r_val if r_val is not None else 1.0)
    g = compression_gain(plan, c)
    if not sc.context < g.s_star:
        return []
    span = next(x.span for x in (pin_dt, pin_r) if x is not None)
    pins = [k for k in ("kv_dtype", "retention") if sc.pinned.has(settings.pin(k))]
    return [make("KV203", f"KV compressed below s*: context {sc.context:,} is {sc.context / g.s_star:.2f}× s* "
                 f"({fmt_unit(g.s_star, 'tokens')} on {plan.n_devices} × {sc.device.id}, tp {plan.tp}), so the "
                 f"{c:g}× byte cut buys only {g.gain:.2f}× (KV {fmt_unit(g.kv, 'B')} vs weights "
                 f"{fmt_unit(g.weights, 'B')} read per step)", span,
                 help="keep the cache uncompressed in the weight-bound regime (R3): remove the "
                      + " and ".join(f"`{k}` pin" for k in pins),
                 fixes=[fix_for(sc, v.ctx, "remove the compression pins",
                                tuple(Change(f"pin.{k}", "", None) for k in pins))])]


RULE = Rule("R3", "KV203", "Below s*, do not compress the cache.", reject=reject, lint=lint, note=note,
            yields="R3 yields to capacity: below s* but nothing uncompressed fits on the allowed devices",
            overruled_by=("kv_dtype", "retention"))
