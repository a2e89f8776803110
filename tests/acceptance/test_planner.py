"""The planner: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/model/test_planner.py,
tests/unit/planner/test_planner.py; tests/unit/planner/test_planner.py says what they check.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.planner import DEFAULT_RESERVE, plan
from tests.unit.planner.test_planner import B200_MEM, KAPPA, WL, W, scenario, spec


def test_advise_json_contract_and_values(tmp_path: Any) -> None:
    text = spec(WL.format(b=32, s="128k"), extra="    quality { budget = near-lossless }")
    path = tmp_path / "w2.kvp"
    path.write_text(text)
    r = CliRunner().invoke(main, ["advise", str(path), "--format", "json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert body["format_version"] == "1"
    plan_json = body["plans"][0]
    for key in ("step_time", "throughput", "kv_bytes", "speedup"):
        q = plan_json["metrics"][key]
        assert set(q) - {"interval"} == {"value", "unit", "evidence", "source"} and q["evidence"] == "derived"
    assert plan_json["choices"]["kv_dtype"] == "int4"
    # int4 as vLLM (the one engine that stores it) does: 0.5 B a value and an fp32 scale per token-head and side,
    # 4 B per d_h = 128 values; κ is at 2 B a value
    assert plan_json["metrics"]["kv_bytes"]["value"] == pytest.approx(32 * 128_000 * KAPPA * (0.5 + 4 / 128) / 2)


def test_cannot_fit_exits_1_with_shortfall_and_smallest_change(tmp_path: Any) -> None:
    f = tmp_path / "big.kvp"
    f.write_text(spec(WL.format(b=500, s="128k") + "\ndevices = <= 2"))
    r = CliRunner().invoke(main, ["lint", "--output-format", "full", str(f)])
    assert r.exit_code == 1
    assert "KV301" in r.stdout
    sc = scenario(f.read_text())
    p = plan(sc)
    need = W + 500 * 128_000 * KAPPA * (p.kv_width / 2)
    short_gb = (need - 2 * B200_MEM * (1 - DEFAULT_RESERVE)) / 1e9
    unmet = p.unmet[0]
    assert unmet.constraint == "fits"
    assert unmet.shortfall.value / 1e9 == pytest.approx(short_gb)
    assert f"{short_gb:.4g}" in r.stdout.replace(",", "") or f"{short_gb / 1000:.4g} TB" in r.stdout
    # the smallest count whose most loaded device fits, over every split the search considers:
    # tp divides n and the 64 query heads and divides or is a multiple of the 8 KV heads, pp = n/tp ≤ 80
    # stages of ⌈80/pp⌉ layers; that device holds ⌈80/pp⌉/(80·tp) of weights and (replicated) KV
    def fits_on(n: int) -> bool:
        for t in (t for t in range(1, n + 1) if n % t == 0 and 64 % t == 0 and (8 % t == 0 or t % 8 == 0)
                  and n // t <= 80):
            kv = 500 * 128_000 * KAPPA * (p.kv_width / 2) * max(1.0, t / 8)
            if (W + kv) * math.ceil(80 / (n // t)) / (80 * t) <= B200_MEM * (1 - DEFAULT_RESERVE):
                return True
        return False

    n_needed = next(n for n in range(1, 1025) if fits_on(n))
    assert n_needed == 128  # 120 would fit on totals, but 120 = 8 × 15 stages puts 6 of 80 layers on one
    # only counts the search considers are suggested: the next power of two at or above it, as a new bound
    assert f"devices = <= {1 << (n_needed - 1).bit_length()}" in r.stdout


def test_a_spec_without_deployments_cannot_be_planned(tmp_path: Any) -> None:
    empty = tmp_path / "empty.kvp"
    empty.write_text("# nothing here yet\n")
    for cmd in (["advise", str(empty)], ["emit", str(empty)], ["report", str(empty), "-o", str(tmp_path / "o")]):
        r = CliRunner().invoke(main, cmd)
        assert r.exit_code == 2, (cmd, r.output)
        # one line: the finding lint reports (located, KV017: nothing but comments), as the refusal
        (first,) = r.stderr.strip().splitlines()
        assert first.startswith(f"kvplan: error: {empty}:1:1: KV017 ") and "declares no deployment" in first, r.stderr
