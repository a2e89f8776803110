"""What a design rule is: its identity, what it removes from the search, what it reports on a pin.

A rule module (r1.py … r8.py) defines one `Rule`; the registry in `__init__.py` lists them.
The search hands each rule a `SearchView` (the evaluated candidates and the facts the rules
read); lint hands it a `PinView` (the scenario, its plan and, with a file, the tree to fix).
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs

from kvplan.base.codes import CODES, Stage
from kvplan.base.diagnostics import Diagnostic, Edit, Fix
from kvplan.base.errors import Span
from kvplan.base.records import field, record
from kvplan.catalog import DTYPES, Dtype, settings
from kvplan.catalog.settings import Setting
from kvplan.lang import fixes as fx
from kvplan.lang.spec import DeploymentDecl, ListValue
from kvplan.model.scenario import Pin, Scenario
from kvplan.planner.plan import Change, Numbers, Plan, Rejection
from kvplan.planner.search import Evaluated


@record
class Context:
    """Where a finding's fixes edit: the file's text and the deployment's syntax tree."""

    source: str
    dep: Optional[DeploymentDecl]


@record
class SearchView:
    """What a rule's filter reads about the evaluated candidates."""

    scenario: Scenario
    ev: Evaluated
    weights_read: float    # weight bytes one step reads (B)
    narrowest: float       # the narrowest KV dtype width in the space (B per element, no scale bytes)

    def pinned(self, row: Setting) -> bool:
        return self.scenario.pinned.has(row)


@record
class PinView:
    """What a rule's lint reads: the scenario, its plan, and with a file the text and tree to fix."""

    scenario: Scenario
    plan: Plan
    ctx: Optional[Context] = None

    @property
    def source(self) -> str:
        return self.ctx.source if self.ctx is not None else ""

    @property
    def dep(self) -> Optional[DeploymentDecl]:
        return self.ctx.dep if self.ctx is not None else None


#: A filter: the rejection of candidate i, or None when the rule lets it stay.
Filter = Callable[[SearchView, int], Optional[Rejection]]
#: A lint: the findings on the scenario's pinned choices.
Lint = Callable[[PinView], list[Diagnostic]]


def _rule_code(instance: object, attribute: attrs.Attribute[str], code: str) -> None:
    entry = CODES.get(code)
    if entry is None or entry.stage is not Stage.RULE:
        raise ValueError(f"rule code {code!r} is not a `rule` row of CODES (kvplan/base/codes.py)")


@record
class Rule:
    """One design rule (SPEC §8). `reject` removes candidates from the search; `lint` reports on
    pinned choices; `note` says why the rule shaped the space (shown on options never evaluated);
    `yields`, when set, is why the rule gives way when nothing else fits (the candidates it removed
    that fit and keep every token come back), and a rule without it still binds then. `overruled_by` names the
    pins that overrule the filter when they change what the planner would choose without them (the operator
    decided, and the rule's lint reports it); a pin that confirms the choice leaves the filter as it is unpinned,
    so that pinning the plan's own choices gives the same plan (kvplan.planner.batch._overruled)."""

    id: str
    code: str = field(validator=_rule_code)
    title: str
    reject: Optional[Filter] = None
    lint: Optional[Lint] = None
    note: Optional[Callable[[SearchView], Optional[str]]] = None
    yields: Optional[str] = None
    overruled_by: tuple[str, ...] = ()

    @property
    def doc(self) -> str:
        return f"docs/rules/{self.id}.md"

    def rejection(self, reason: str, numbers: Numbers = ()) -> Rejection:
        return Rejection(self.id, reason, numbers)


def span_of(sc: Scenario, *keys: str) -> Optional[Span]:
    """The span of the first of `keys` the spec sets (`pin.x` for a pin)."""
    for k in keys:
        span = sc.pinned.span(settings.row(k)) if k.startswith("pin.") else None
        if span is not None:
            return span
        if k in sc.spans:
            return sc.spans[k]
    return None


def fix_for(sc: Scenario, ctx: Optional[Context], title: str, changes: tuple[Change, ...]) -> Optional[Fix]:
    """The edits that make `changes` in the file; None without a file or when one cannot be made
    (then the suggestion is printed as text only if it names no concrete change)."""
    if ctx is None or not changes:
        return None
    source, dep = ctx.source, ctx.dep
    edits: list[Edit] = []
    for change in changes:
        path, value = change.path, change.value
        if value is None:
            f = fx.remove_setting(source, dep, path)
        elif path.startswith("workload.") and _is_list(dep, path):
            f = fx.replace(sc.spans[path], value)  # this scenario's element of the list
        else:
            f = fx.set_setting(source, dep, path, value, change.op)
        if f is None:
            return None
        edits += f.edits
    return Fix(title, tuple(edits))


def _is_list(dep: Optional[DeploymentDecl], path: str) -> bool:
    block = dep.workload if dep is not None else None
    entry = next((e for e in block.entries if e.key == path.split(".", 1)[1]), None) if block else None
    return entry is not None and isinstance(entry.value, ListValue)


@record
class PinnedKv:
    """The KV choices a spec pins: the kv_dtype pin and its dtype record (None when not pinned or
    unknown), the retention pin and its value (None when not pinned)."""

    dtype_pin: Optional[Pin]
    dtype: Optional[Dtype]
    retention_pin: Optional[Pin]
    retention: Optional[float]


def pinned_kv(sc: Scenario) -> PinnedKv:
    """The scenario's pinned KV dtype and retention (PinnedKv)."""
    pins = sc.pinned
    dt = DTYPES.get(pins.kv_dtype) if pins.kv_dtype is not None else None
    return PinnedKv(pins.pin(settings.pin("kv_dtype")), dt, pins.pin(settings.pin("retention")), pins.retention)


def placement_fix(sc: Scenario, ctx: Optional[Context], to: str) -> Optional[Fix]:
    """Set every placement the spec pins (the pin and the deployment's own) to `to`."""
    paths = [p for p, k in (("pin.placement", "pin.placement"), ("placement", "placement")) if k in sc.spans]
    return fix_for(sc, ctx, f"placement = {to}", tuple(Change(p, "=", to) for p in paths))
