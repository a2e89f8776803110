"""The plan digest covers every input that changes the plan: the unit tests that need the planner layer.

Split by layer from the tests of the same subject in tests/acceptance/test_digest.py,
tests/unit/render/test_digest.py; tests/acceptance/test_digest.py says what they check.
"""

from __future__ import annotations

from typing import Any, Optional

import attrs

from kvplan.lang import check_source
from kvplan.planner import plans_for

# ------------------------------------------------------------------ a spec with every field written out

#: The base value of every spec field the planner reads, and values to change each to.
FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("llama-3-70b", "llama-3-8b", "qwen3-8b", "gemma-2-9b", "mixtral-8x7b"),
    "device": ("b200", "h100-sxm", "h200", "mi300x", "b200-hgx"),
    "devices": ("auto", "1", "4", "8", "<= 8", "<= 35"),
    "placement": ("auto", "striped", "affinity"),
    "engine": ("any", "vllm", "sglang", "trtllm"),
    "weights": ("bf16", "fp8"),
    "batch": ("32", "1", "8", "102"),
    "context": ("32k", "8k", "128k", "1451618"),
    "prefix": ("1k", "0", "4k"),
    "fanout": ("4", "1", "16"),
    "reuse": ("0%", "30%", "60%"),
    "budget": ("near-lossless", "lossless", "moderate", "aggressive"),
    "eviction": ("forbidden", "allowed"),
    "min_retention": ("0.5", "0.75"),
    "step_time": ("none", "20 ms", "50 ms", "2 ms"),
    "throughput": ("none", "500 tok/s", "20000 tok/s"),
    "objective": ("fewest-devices", "fastest", "most-headroom"),
}
BASE = {k: v[0] for k, v in FIELDS.items()}


def spec_text(f: dict[str, str], pins: str = "") -> str:
    slo = "".join(f"        {k} {op} {f[k]}\n" for k, op in (("step_time", "<="), ("throughput", ">="))
                  if f[k] != "none")
    return f"""kvplan 1

deployment "d" {{
    model     = {f['model']}
    weights   = {f['weights']}
    device    = {f['device']}
    devices   = {f['devices']}
    placement = {f['placement']}
    engine    = {f['engine']}

    workload {{
        batch   = {f['batch']}
        context = {f['context']}
        prefix  = {f['prefix']}
        fanout  = {f['fanout']}
        reuse   = {f['reuse']}
    }}

    quality {{
        budget        = {f['budget']}
        eviction      = {f['eviction']}
        min_retention = {f['min_retention']}
    }}
{('    slo {' + chr(10) + slo + '    }' + chr(10)) if slo else ''}
    objective = {f['objective']}
{pins}}}
"""


def plan_or_none(text: str, **overrides: Optional[float]) -> Any:
    r = check_source(text, "d.kvp")
    if any(d.severity.name == "ERROR" for d in r.diagnostics):
        return None
    (p,) = plans_for(r, None, **{k: v for k, v in overrides.items() if v is not None})
    return p


def test_catalog_records_are_inputs_of_the_digest() -> None:
    """A catalog entry the plan uses (device, model, link) changing changes the digest."""
    p = plan_or_none(spec_text({**BASE, "reuse": "60%"}))
    assert p is not None and p.tier.link is not None
    sc = p.scenario
    from kvplan.planner import plan

    faster = attrs.evolve(sc, device=attrs.evolve(sc.device, sm_count=(sc.device.sm_count or 100) + 8))
    assert plan(faster).digest != p.digest  # FlashInfer's split sizes depend on it
    renamed = attrs.evolve(sc, device=attrs.evolve(sc.device, note="edited"), model=attrs.evolve(sc.model, source="x"))
    assert plan(renamed).digest == p.digest  # prose is not an input
