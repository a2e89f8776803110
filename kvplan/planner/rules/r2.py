"""R2: always enable the lossless domains. Every candidate pages its KV and caches prefixes
(search.py), so the rule removes nothing; lint reports prefix caching pinned off (KV202)."""

from __future__ import annotations

from kvplan.base.codes import Severity
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.catalog import settings
from kvplan.lang import fixes as fx
from kvplan.model.footprint import sharing_factor
from kvplan.planner.rules.rule import PinView, Rule


def lint(v: PinView) -> list[Diagnostic]:
    sc = v.scenario
    if sc.pinned.prefix_caching is not False:
        return []
    n = min(sc.fanout, sc.batch)
    shared = sc.prefix > 0 and n > 1
    return [make("KV202", "prefix caching is pinned off" + (
        f"; the declared {sc.prefix:,}-token prefix shared by {sc.fanout} requests would give σ = "
        f"{float(sharing_factor(n, sc.context, sc.prefix)):.3g}" if shared else ""),
        sc.pinned.span(settings.pin("prefix_caching")),
        help="prefix caching is lossless: set `prefix_caching = on` (R2)",
        severity=Severity.ERROR if shared else Severity.WARNING,
        fixes=[fx.set_setting(v.source, v.dep, "pin.prefix_caching", "on")])]


RULE = Rule("R2", "KV202", "Always enable the lossless domains: paging and prefix caching.", lint=lint)
