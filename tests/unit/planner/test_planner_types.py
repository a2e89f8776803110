"""The planner's types at its seams (issue 10, build 2): the plan's figures as named records (a misspelt
figure is a type error), in the order the JSON contract has. That no parameter or field says `Any` is
checked for every layer by tests/project/test_code_shape.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.lang import check_file
from kvplan.planner import plans_for
from tests.paths import ROOT

GOLDEN = ROOT / "tests" / "data" / "golden" / "advise"


@pytest.mark.parametrize("name", ["w2-batch32", "deepseek-v3-mi300x", "llama-3.1-8b-h100-custom"])
def test_records_yield_the_contract_labels_in_order(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the golden JSON is the contract: each record's items() gives its keys, in order, and its values
    monkeypatch.chdir(ROOT)
    body = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    plans = plans_for(check_file(f"examples/{name}.kvp"))
    assert len(plans) == len(body["plans"])
    for p, want in zip(plans, body["plans"], strict=True):
        assert p.digest == want["digest"]
        for key, record in (("map_before", p.map_before), ("map_after", p.map_after), ("metrics", p.metrics),
                            ("baseline", p.baseline), ("byte_factors", p.byte_factors)):
            got = record.items()
            assert [k for k, _ in got] == list(want[key]), key
            assert all(v.to_json() == want[key][k] for k, v in got), key


def test_map_numbers_leave_out_a_map_without_a_device_count() -> None:
    from kvplan.base.evidence import derived
    from kvplan.planner.plan import ByteFactors, MapNumbers, Metrics, PlanMetrics

    figures = {k: derived(float(i), "x", k) for i, k in enumerate(
        ("kappa", "s_star", "s_cap", "context_over_s_star", "context_over_s_cap"))}
    one = MapNumbers(**figures)
    assert [k for k, _ in one.items()] == list(figures) and one.n_devices == 1
    four = MapNumbers(devices=derived(4, "1", "n0"), **figures)
    assert [k for k, _ in four.items()] == ["devices", *figures] and four.n_devices == 4
    assert [f.name for f in ByteFactors.__attrs_attrs__] == [
        "quantization", "eviction", "paging", "prefix_caching", "combined"]
    assert [f.name for f in PlanMetrics.__attrs_attrs__] == [f.name for f in Metrics.__attrs_attrs__] + ["speedup"]


@pytest.mark.slow
def test_a_misspelt_figure_or_override_is_a_type_error(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from kvplan.lang import CheckResult\n"
        "from kvplan.planner import plans_for\n"
        "from kvplan.planner.plan import Plan\n\n\n"
        "def good(p: Plan, r: CheckResult) -> float:\n"
        "    plans_for(r, None, reserve=0.1, activation_reserve=None)\n"
        "    return p.metrics.step_time.value + p.map_before.s_star.value + p.byte_factors.combined.value\n\n\n"
        "def bad(p: Plan, r: CheckResult) -> float:\n"
        "    plans_for(r, None, reserv=0.1)\n"
        "    return float(p.metrics.step_tme.value)\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(probe)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors = [ln for ln in r.stdout.splitlines() if ": error:" in ln]
    assert len(errors) == 2, r.stdout + r.stderr
    assert "probe.py:12:" in errors[0] and '"reserv"' in errors[0]
    assert "probe.py:13:" in errors[1] and '"PlanMetrics" has no attribute "step_tme"' in errors[1]
