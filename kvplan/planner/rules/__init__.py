"""The design rules of SPEC §8, one module each, and their registry.

The rules act in three ways: as filters on the search (a rule's `reject`), as decisions
(planner/decisions.py tags each decision with the rules behind it), and as findings on
pinned choices (a rule's `lint`). `RULES` is a literal table, as the code table is: the set of
rules does not depend on which modules were imported. Its order is the order the search asks
the filters in (the first rule that rejects a candidate names it) and lint runs the checks in.

To add a rule: write `rN.py` defining `RULE`, list it here, add its code to CODES
(kvplan/base/codes.py, stage `rule`) and its pages under docs/rules/ (docs/architecture.md).
`with_rules` is the hook for a registry with extra rules (plan(..., rules=) and findings(..., rules=)).
"""

from __future__ import annotations

from typing import Mapping

from kvplan.planner.rules import r1, r2, r3, r4, r5, r6, r7, r8
from kvplan.planner.rules.rule import PinView, Rule, SearchView

RULES: Mapping[str, Rule] = {r.id: r for r in (
    r1.RULE, r2.RULE, r3.RULE, r4.RULE, r5.RULE, r6.RULE, r7.RULE, r8.RULE,
)}


def with_rules(*extra: Rule, base: Mapping[str, Rule] = RULES) -> Mapping[str, Rule]:
    """The registry `base` with `extra` rules after it; an id or code already taken is an error."""
    out = dict(base)
    for rule in extra:
        if rule.id in out or any(r.code == rule.code for r in out.values()):
            raise ValueError(f"rule {rule.id} ({rule.code}): the id or the code is taken")
        out[rule.id] = rule
    return out


__all__ = ["RULES", "PinView", "Rule", "SearchView", "with_rules"]
