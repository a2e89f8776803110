"""The eight design rules of SPEC §8, each with a stable id, a title and a docs page.

The rules act in three ways: as constraints on the search (R3, R4, R5, R6, R7
remove candidates, planner/__init__.py), as decisions (R1, R2, R8 shape the
plan, planner/decisions.py), and as findings on pinned choices (KV2xx,
planner/lint.py). This module is their registry: ids, titles, codes, pages.
"""

from __future__ import annotations

from typing import Mapping

import attrs


@attrs.frozen(slots=True)
class DesignRule:
    id: str
    title: str
    code: str
    doc: str


RULES: Mapping[str, DesignRule] = {
    r.id: r
    for r in (
        DesignRule("R1", "Identify the regime first: compute s* and s_cap for the deployment.", "KV201",
                   "docs/rules/R1.md"),
        DesignRule("R2", "Always enable the lossless domains: paging and prefix caching.", "KV202",
                   "docs/rules/R2.md"),
        DesignRule("R3", "Below s*, do not compress the cache.", "KV203", "docs/rules/R3.md"),
        DesignRule("R4", "Above s*, quantize first: 4-bit is nearly free; 2-bit needs a structure-aware "
                   "layout (per-channel keys, per-token values).", "KV204", "docs/rules/R4.md"),
        DesignRule("R5", "Evict tokens only when the workload tolerates it, and keep r ≥ 0.5.", "KV205",
                   "docs/rules/R5.md"),
        DesignRule("R6", "Above s_cap, tier or shard — but never read inside a step from a remote tier.", "KV206",
                   "docs/rules/R6.md"),
        DesignRule("R7", "On multi-die packages, stripe pages.", "KV207", "docs/rules/R7.md"),
        DesignRule("R8", "Re-evaluate the map after every change.", "KV208", "docs/rules/R8.md"),
    )
}
