"""The plan: choices, the numbers behind each, the rules that drove them, what was turned down."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

import attrs

from kvplan.catalog import Dtype
from kvplan.diagnostics import Diagnostic
from kvplan.evidence import Value


@attrs.frozen(slots=True)
class Option:
    """An option considered for a decision and why it was or was not taken."""

    choice: str
    reason: str
    numbers: tuple[tuple[str, Value], ...] = ()


@attrs.frozen(slots=True)
class Decision:
    """One MADR-shaped record: context (facts), the decision, evidence, options considered."""

    domain: str                       # regime | quantization | eviction | paging | prefix-caching | tiering | placement | devices
    title: str
    choice: str
    rules: tuple[str, ...]            # R1..R8
    context: tuple[str, ...]          # facts only
    decision: str                     # "We will ..."
    numbers: tuple[tuple[str, Value], ...]
    evidence: tuple[Value, ...] = ()  # reported results, never mixed with derived numbers
    options: tuple[Option, ...] = ()
    consequences: tuple[str, ...] = ()
    pinned: bool = False
    reported_text: tuple[str, ...] = ()  # reported results with no single number, or gaps, as written


#: One concrete change to a deployment: (path, operator, value), e.g. ("pin.devices", "=", "8");
#: value None removes the setting. kvplan.planner.lint turns changes into edits of the file.
Change = tuple[str, str, Optional[str]]
#: A suggestion's text and the changes it is made of (none: a statement, not a change).
Suggestion = tuple[str, tuple[Change, ...]]


@attrs.frozen(slots=True)
class Unmet:
    """A constraint the best plan misses, by how much, and what would meet it.

    `changes[i]` is what `suggestions[i]` says, as data; each was verified by planning it."""

    constraint: str                   # fits | step_time | throughput | engine
    message: str
    shortfall: Value
    suggestions: tuple[str, ...]
    changes: tuple[tuple[Change, ...], ...] = ()


@attrs.frozen(slots=True)
class TierPlan:
    tier: str                         # none | host | ssd | remote
    link: Optional[str]
    bytes: Optional[Value]
    prefill_time: Optional[Value]
    fetch_time: Optional[Value]


@attrs.frozen(slots=True)
class Plan:
    scenario: Any                     # kvplan.lang.Scenario
    kv_dtype: Dtype
    retention: float
    block_size: int
    prefix_caching: bool
    sharing: float
    placement: str
    n_devices: int
    tp: int
    pp: int
    tier: TierPlan
    regime_before: str
    regime_after: str
    map_before: tuple[tuple[str, Value], ...]
    map_after: tuple[tuple[str, Value], ...]
    metrics: tuple[tuple[str, Value], ...]
    baseline: tuple[tuple[str, Value], ...]
    byte_factors: tuple[tuple[str, Value], ...]
    decisions: tuple[Decision, ...]
    unmet: tuple[Unmet, ...]
    assumptions: tuple[Value, ...]
    candidates_evaluated: int
    feasible: bool

    def metric(self, key: str) -> Value:
        return dict(self.metrics)[key]

    @property
    def choices(self) -> dict[str, Any]:
        """The decisions an engine config is made of; the digest covers exactly these."""
        return {
            "kv_dtype": self.kv_dtype.id, "retention": self.retention, "block_size": self.block_size,
            "prefix_caching": self.prefix_caching, "placement": self.placement, "devices": self.n_devices,
            "tensor_parallel": self.tp, "pipeline_parallel": self.pp, "tier": self.tier.tier,
            "tier_bytes": None if self.tier.bytes is None else round(self.tier.bytes.value),
            "model": self.scenario.model.id, "device": self.scenario.device.id,
            "weights": self.scenario.weights.id, "batch": self.scenario.batch, "context": self.scenario.context,
        }

    @property
    def digest(self) -> str:
        """A short stable hash of the plan's choices, for stale-config detection."""
        blob = json.dumps(self.choices, sort_keys=True).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


@attrs.frozen(slots=True)
class PlanResult:
    """A plan and the findings lint reports for it (pinned choices, SLOs, expectations)."""

    plan: Plan
    findings: tuple[Diagnostic, ...]
