"""R7: on multi-die packages, stripe pages. The search offers striped and affinity placements and
prefers striped on ties (search.py); lint reports pages pinned to one partition (KV207)."""

from __future__ import annotations

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.units import fmt_unit
from kvplan.model import roofline as rf
from kvplan.planner.rules.rule import PinView, Rule, placement_fix, span_of


def lint(v: PinView) -> list[Diagnostic]:
    sc, d, b = v.scenario, v.scenario.device, v.scenario.batch
    pinned = (sc.pinned.placement or sc.placement) == "pinned"
    if not pinned or d.partitions <= 1:
        return []
    slow = float(rf.beta_eff(d, "pinned", b)[0])
    fast, upper = rf.beta_eff(d, "striped", b)
    return [make("KV207", f"pages pinned to one of {d.partitions} partitions of {d.id} stream at "
                 f"{fmt_unit(slow, 'B/s')} instead of {fmt_unit(float(fast), 'B/s')}"
                 + (" (upper bound)" if upper else ""), span_of(sc, "pin.placement", "placement"),
                 help="stripe pages (R7), or use placement = affinity when the partition count divides the batch",
                 fixes=[placement_fix(sc, v.ctx, "striped")]
                 + ([placement_fix(sc, v.ctx, "affinity")] if b % d.partitions == 0 else []))]


RULE = Rule("R7", "KV207", "On multi-die packages, stripe pages.", lint=lint)
