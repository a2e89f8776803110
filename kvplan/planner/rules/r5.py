"""R5: evict only when the workload tolerates it, and keep r ≥ 0.5. The search never offers a
retention the budget, the workload or the engine does not admit (planner/space.py);
lint reports a retention pin below 0.5 or on a workload that does not tolerate eviction (KV205)."""

from __future__ import annotations

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.catalog.quality import admissible
from kvplan.lang import fixes as fx
from kvplan.planner.rules.rule import PinView, Rule, pinned_kv


def lint(v: PinView) -> list[Diagnostic]:
    sc = v.scenario
    k = pinned_kv(sc)
    pin_r, r_val = k.retention_pin, k.retention
    if pin_r is None or r_val is None or not r_val < 1:
        return []
    ev_ok = admissible(sc.budget, sc.eviction_allowed).eviction
    if r_val < 0.5:
        return [make("KV205", f"retention {r_val:g} is below 0.5", pin_r.span,
                     help="keep r ≥ 0.5 (R5): remove the retention pin"
                          + (", or write `retention = 0.5`" if ev_ok else ""),
                     fixes=[fx.remove_setting(v.source, v.dep, "pin.retention"),
                            fx.set_setting(v.source, v.dep, "pin.retention", "0.5") if ev_ok else None])]
    if ev_ok:
        return []
    return [make("KV205", f"retention {r_val:g} is pinned but this workload does not tolerate eviction "
                 f"(budget '{sc.budget}', eviction {'allowed' if sc.eviction_allowed else 'forbidden'})",
                 pin_r.span, help="set quality.eviction = allowed, or remove the retention pin (R5)",
                 fixes=[fx.set_setting(v.source, v.dep, "quality.eviction", "allowed")
                        if sc.budget != "lossless" else None,
                        fx.remove_setting(v.source, v.dep, "pin.retention")])]


RULE = Rule("R5", "KV205", "Evict tokens only when the workload tolerates it, and keep r ≥ 0.5.", lint=lint)
