"""R8: re-evaluate the map after every change. The planner maps the chosen plan again; the search
removes an evicting candidate whose width alone already puts it below s* on its layout; lint
reports eviction pinned on top of a quantization that left the KV-bound regime (KV208)."""

from __future__ import annotations

from typing import Optional

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.evidence import derived
from kvplan.base.units import fmt_unit
from kvplan.lang import fixes as fx
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors
from kvplan.planner.plan import Rejection
from kvplan.planner.rules.rule import PinView, Rule, SearchView, pinned_kv


def reject(v: SearchView, i: int) -> Optional[Rejection]:
    ev = v.ev
    if not ev.retention[i] < 1.0:
        return None
    k = float(ev.kv_read[i] / ev.retention[i])  # this width, no eviction
    if not k < v.weights_read:
        return None
    return RULE.rejection(f"with {ev.dtype[i]} KV the point is already below s* on this layout; "
                          "evicting would add risk for little speed",
                          (("kv_bytes_read",
                            derived(k, "B", f"KV bytes read per step at {ev.dtype[i]}, every token kept")),
                           ("weight_bytes_read", derived(v.weights_read, "B", "weight bytes read per step"))))


def lint(v: PinView) -> list[Diagnostic]:
    sc, plan = v.scenario, v.plan
    k = pinned_kv(sc)
    dt, pin_r, r_val = k.dtype, k.retention_pin, k.retention
    if dt is None or not dt.lossy or pin_r is None or r_val is None or not r_val < 1:
        return []
    q_cfg = rf.Config(sc.model, sc.device, n_devices=plan.n_devices, tp=plan.tp, w_p=sc.weights.width, w_kv=dt.width,
                      factors=KvFactors(sharing=plan.sharing))  # the plan's layout, as the search's R8
    s_star_q = float(rf.s_star(q_cfg, sc.batch))
    if not sc.context < s_star_q:
        return []
    return [make("KV208", f"after {dt.id} KV the point is weight-bound (s* = {fmt_unit(s_star_q, 'tokens')}"
                 f" > {sc.context:,}), yet retention {r_val:g} is pinned too", pin_r.span,
                 help="re-evaluate the map after quantizing: eviction now adds risk for little speed (R8); "
                      "remove the retention pin",
                 fixes=[fx.remove_setting(v.source, v.dep, "pin.retention")])]


RULE = Rule("R8", "KV208", "Re-evaluate the map after every change.", reject=reject, lint=lint,
            overruled_by=("retention",))
