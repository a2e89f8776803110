"""`pin { tensor_parallel = 8  pipeline_parallel = 1 }`: the split a deployment runs (docs/language.md `pin`).
The check takes them as whole counts whose product is the device count; the search keeps only the pinned
split; lint reports a split the model's heads do not take (KV305, at the pin)."""

from __future__ import annotations

import re

import pytest

from kvplan.base.codes import Severity
from kvplan.lang import check_source
from kvplan.planner import plan
from kvplan.planner.lint import findings
from tests.unit.planner.test_engine_pins import scenario


def spec(pin: str = "", model: str = "deepseek-v3", devices: int = 8, engine: str = "sglang") -> str:
    return f"""kvplan 1
deployment "d" {{
    model = {model}
    device = h200
    weights = fp8
    engine = {engine}
    quality {{ budget = near-lossless }}
    workload {{
        batch = 64
        context = 32k
    }}
    pin {{
        kv_dtype = fp8
        devices = {devices}
        {pin}
    }}
}}
"""


def errors(text: str) -> list[tuple[str, int, int]]:
    """(code, line, column) of each error: the check's, else the planner's lint on the scenario."""
    result = check_source(text, "d.kvp")
    found = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    if not found:
        sc = result.scenarios[0]
        found = [d for d in findings(sc, plan(sc)) if d.severity is Severity.ERROR]
    return [(d.code, d.span.line, d.span.column) for d in found if d.span is not None]


def test_the_pin_keeps_only_its_split() -> None:
    # unpinned, DeepSeek-V3's latent on every tensor-parallel rank makes pipeline stages the better split
    free = plan(scenario(spec()))
    assert (free.tp, free.pp) != (8, 1)
    pinned = plan(scenario(spec("tensor_parallel = 8\n        pipeline_parallel = 1")))
    assert (pinned.tp, pinned.pp, pinned.n_devices) == (8, 1, 8)
    devices = next(d for d in pinned.decisions if d.domain == "devices")
    assert devices.pinned and "pinned split: tensor parallel 8 × pipeline parallel 1" in devices.context
    # every other split of the 8 devices is absent from the options, not rejected
    assert not [o for o in devices.options if o.choice.startswith("8 ×")]
    # one of the two alone keeps the splits it allows
    alone = plan(scenario(spec("pipeline_parallel = 2")))
    assert (alone.tp, alone.pp) == (4, 2)


def test_the_pin_alone_chooses_the_device_count() -> None:
    text = spec("tensor_parallel = 4\n        pipeline_parallel = 2").replace("        devices = 8\n", "")
    p = plan(scenario(text))
    assert (p.n_devices, p.tp, p.pp) == (8, 4, 2)


@pytest.mark.parametrize(("pin", "devices", "code", "at_value"), [
    ("tensor_parallel = 0", 8, "KV108", True),                            # a count is at least 1
    ("tensor_parallel = 1.5", 8, "KV109", True),                          # and whole
    ("tensor_parallel = 4\n        pipeline_parallel = 1", 8, "KV108", False),  # 4 × 1 is not the 8 devices
    ("pipeline_parallel = 3", 8, "KV108", False),                         # 3 does not divide 8
    ("tensor_parallel = 6\n        pipeline_parallel = 1", 6, "KV305", False),  # 6 does not divide 64 query heads
])
def test_a_bad_layout_pin_is_one_error_at_the_pin(pin: str, devices: int, code: str, at_value: bool) -> None:
    text = spec(pin, model="llama-3-70b", devices=devices, engine="vllm")
    first = f"        {pin.splitlines()[0]}"
    line = text.splitlines().index(first) + 1
    assert errors(text) == [(code, line, first.index("= ") + 3 if at_value else 9)]



def test_a_devices_suggestion_removes_the_pins_of_the_old_split() -> None:
    # 64 sequences of 32k on Llama-3-70B do not fit one H100: the suggested count would contradict a split
    # pinned for one device (KV108), so the suggestion removes it, and says so
    text = spec("tensor_parallel = 1\n        pipeline_parallel = 1", model="llama-3-70b", devices=1,
                engine="vllm").replace("h200", "h100-sxm")
    p = plan(scenario(text))
    unmet = next(u for u in p.unmet if u.constraint == "fits")
    said = re.match(r"pin devices = (\d+) and remove the tensor_parallel and pipeline_parallel pins ",
                    unmet.suggestions[0].text)
    assert said is not None and int(said.group(1)) > 1, unmet.suggestions
    paths = {(c.path, c.op) for c in unmet.suggestions[0].changes}
    assert {("pin.devices", "="), ("pin.tensor_parallel", ""), ("pin.pipeline_parallel", "")} <= paths
