"""The .kvp front end: the unit tests that need the render layer.

Split by layer from the tests of the same subject in tests/project/test_lang_codes.py,
tests/unit/lang/test_lang.py; tests/unit/lang/test_lang.py says what they check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import attrs
import pytest

from kvplan import catalog
from kvplan.base.errors import Span
from kvplan.lang import CheckResult, check_file
from kvplan.model.scenario import Scenario
from kvplan.render.diagnostics import concise, full
from tests.paths import DATA
from tests.unit.lang.test_lang import (
    EXAMPLES,
    INVALID,
    VALID,
    _at_root,  # noqa: F401  (autouse: runs from the repository root)
    _rel,
)

Golden = Callable[[Path, str], None]


# ------------------------------------------------------------------------------- goldens

def _lowered(r: CheckResult) -> str:
    """A deterministic JSON dump of what the checker lowered a file to."""
    def span(s: Span) -> str:
        return f"{s.line}:{s.column}-{s.end_line}:{s.end_column}"

    def entity(x: Any, table: Any) -> Any:
        if x.id in table and table[x.id] == x:
            return x.id
        return {k: v for k, v in attrs.asdict(x).items() if v not in (None, "", 0, 0.0, [], ())}

    def scenario(s: Scenario) -> dict[str, Any]:
        return {
            "name": s.name, "deployment": s.deployment,
            "model": entity(s.model, catalog.models()), "device": entity(s.device, catalog.devices()),
            "weights": s.weights.id, "devices": attrs.asdict(s.devices), "placement": s.placement,
            "engine": s.engine, "batch": s.batch, "context": s.context, "prefix": s.prefix, "fanout": s.fanout,
            "reuse": s.reuse, "budget": s.budget, "eviction_allowed": s.eviction_allowed,
            "min_retention": s.min_retention, "slo_step_time": s.slo_step_time,
            "slo_throughput": s.slo_throughput, "objective": s.objective,
            "pins": {k: [p.value, span(p.span)] for k, p in sorted(s.pins.items())},
            "expects": [[e.metric, e.op, e.value, span(e.span)] for e in s.expects],
            "spans": {k: span(v) for k, v in sorted(s.spans.items())},
            "assumptions": [v.to_json() for v in s.assumptions],
            # the request form only (the batch form's goldens stay as they were)
            **({"rate": s.rate, "input": s.input_tokens, "output": s.output_tokens, "max_context": s.max_context}
               if s.rate is not None else {}),
            # the service SLOs, where set (issue 13 item 3: the files without them stay as they were)
            **{k: v for k, v in (("slo_ttft", s.slo_ttft), ("slo_itl", s.slo_itl), ("slo_rate", s.slo_rate))
               if v is not None and s.rate is not None},
            # a uniform length's shortest (issue 13 item 1: fixed lengths stay as they were)
            **{k: v for k, v in (("input_min", s.input_min), ("output_min", s.output_min)) if v is not None},
        }

    doc = {"path": r.path, "diagnostics": concise([r]).splitlines(),
           "scenarios": [scenario(s) for s in r.scenarios]}
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("path", EXAMPLES + VALID, ids=lambda p: p.name)
def test_valid_files_lower_to_their_golden(path: Path, golden: Golden) -> None:
    r = check_file(_rel(path))
    assert r.ok and r.scenarios, concise([r])
    assert not [d for d in r.diagnostics if d.severity.value != "info"], concise([r])
    golden(DATA / "lowered" / path.parent.name / f"{path.stem}.json", _lowered(r))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_files_give_their_expected_diagnostics(path: Path, golden: Golden) -> None:
    r = check_file(_rel(path))
    assert r.diagnostics
    golden(path.with_suffix(".expected"), concise([r]))
    golden(path.with_suffix(".full"), full([r]))  # the caret snippet and help, exactly
