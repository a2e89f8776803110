"""Fuzzers: the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_fuzz.py;
tests/acceptance/test_fuzz.py says what they check.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.base import limits
from kvplan.lang import check_source


def spec(*, batch: Any = 8, context: Any = "8k", devices: Any = 1, pin: str = "", extra: str = "",
         model: str = "llama-3-8b", device: str = "h100-sxm") -> str:
    return (f'kvplan 1\n\ndeployment "d" {{\n    model = {model}\n    device = {device}\n    devices = {devices}\n'
            f"    workload {{\n        batch = {batch}\n        context = {context}\n    }}\n{extra}"
            + (f"    pin {{\n        {pin}\n    }}\n" if pin else "") + "}\n")


@pytest.mark.parametrize("where", ["devices = <= 100000", "pin devices"])
def test_every_device_count_has_the_same_limit(where: str) -> None:
    text = spec(devices="<= 100000") if where.startswith("devices") else spec(pin="devices = 4097")
    result = check_source(text, "s.kvp")
    assert [d.code for d in result.diagnostics] == ["KV108"] and result.scenarios == ()
    assert "between 1 and 4,096" in (result.diagnostics[0].help or "")


def _many_scenarios(deployments: int) -> str:
    # 10 × 10 × 10 = 1,000 scenarios per deployment, the most one may have
    tens = "[" + ",".join(str(i) for i in range(1, 11)) + "]"
    dep = ('deployment "d{i}" {{\nmodel = qwen3-8b\ndevice = b200\nworkload {{\n'
           'batch = {t}\ncontext = {t}\nreuse = [0,.1,.2,.3,.4,.5,.6,.7,.8,.9]\n}}\n}}\n')
    return "kvplan 1\n" + "".join(dep.format(i=i, t=tens) for i in range(deployments))


def test_a_file_expands_into_at_most_2000_scenarios() -> None:
    # 300 deployments × 1,000 scenarios in 50 KB: the cap was per deployment only
    text = _many_scenarios(300)
    assert len(text) < 50 * 1024
    result = check_source(text, "many.kvp")
    assert len(result.scenarios) == limits.MAX_FILE_SCENARIOS == 2_000
    over = [d for d in result.diagnostics if d.code == "KV118"]
    assert len(over) == 1
    assert (over[0].span.line, over[0].span.column) == (1 + 2 * 9 + 4, 1)  # the 3rd deployment's workload
    assert "more than 2,000 scenarios (2,000 before it, 1,000 here)" in over[0].message
    # exactly at the cap is fine
    ok = check_source(_many_scenarios(2), "two.kvp")
    assert ok.ok and len(ok.scenarios) == 2_000


@pytest.mark.parametrize("where, entry, words", [
    ("device", "memory = 0.5 MB", "memory must be between 1 MB and 1000 TB"),
    ("device", "bandwidth = 2000 TB/s", "bandwidth must be between 1 MB/s and 1000 TB/s"),
    ("device", "compute = 1e19 FLOPS", "compute must be between 1 GFLOPS and 1000 PFLOPS"),
    ("device", "partitions = 2000000", "partitions must be between 1 and 1,048,576"),
    ("device", "host_link = 1e20 B/s", "host_link must be between 1 MB/s and 1000 TB/s"),
    ("slo", "step_time <= 0.1 us", "step_time must be between 1 us and 3600 s"),
    ("slo", "throughput >= 1e13 tok/s", "throughput must be above 0 tok/s and at most 1e12 tok/s"),
    ("expect", "kv_bytes <= 1e19 B", "kv_bytes must be between 0 B and 1e6 TB"),
    ("expect", "speedup >= 1e7", "speedup must be between 0 and 1,000,000"),
    ("workload", "prefix = 1073741825", "prefix must be between 0 and 1,073,741,824"),
])
def test_the_help_names_each_range_in_units_the_key_takes(where: str, entry: str, words: str) -> None:
    """The ends of each range as docs/language.md's table gives them, written as .kvp values."""
    figures = {"memory": "80 GB", "bandwidth": "3.35 TB/s", "compute": "989 TFLOPS"}
    if where == "device":
        key, _, value = entry.partition(" = ")
        figures[key] = value
    device = 'device "g" {\n' + "".join(f"    {k} = {v}\n" for k, v in figures.items()) + "}\n"
    text = spec(device="g", extra=f"    {where} {{\n        {entry}\n    }}\n" if where in ("slo", "expect") else "")
    if where == "workload":
        text = text.replace("        context = 8k\n", f"        context = 8k\n        {entry}\n")
    result = check_source(device + text.replace("kvplan 1\n", ""), "s.kvp")
    (d,) = [d for d in result.diagnostics if d.code == "KV108"]
    assert d.help == f"{words} (kvplan's limit, docs/language.md)"


def test_a_5000_digit_number_is_cut_in_the_message() -> None:
    digits = "7" * 5000
    result = check_source(spec(batch=digits), "s.kvp")
    (d,) = result.diagnostics
    assert d.code == "KV108" and d.message == "batch = 777777777777… (5,000 characters) is not a finite number"
