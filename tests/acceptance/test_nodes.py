"""Nodes and links through the CLI (issue 21 item 1, SPEC §12): a layout across nodes pays its scale-out link."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plan

AUTO = """kvplan 1
deployment "svc" {
    model   = llama-3.1-70b
    device  = h100-sxm
    devices = auto
    engine  = vllm
    workload {
        rate   = 10/s
        input  = 2k
        output = 512
    }
    slo {
        ttft <= 1 s
        itl  <= 50 ms
    }
}
"""


def _map(devices: int, tp: int) -> dict[str, float]:
    r = CliRunner().invoke(main, ["map", "--model", "llama-3.1-70b", "--device", "h100-sxm", "--devices", str(devices),
                                  "--tp", str(tp), "--batch", "128", "--context", "4k", "--format", "json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["results"]
    return {k: res[k]["value"] for k in ("step_time_expected", "step_time_expected_comm")} | {
        "source": res["step_time_expected_comm"]["source"]}


def test_tp16_across_two_nodes_steps_slower_than_tp8_in_one() -> None:
    sixteen, eight = _map(16, 16), _map(8, 8)
    assert sixteen["step_time_expected"] > eight["step_time_expected"]
    assert "ib-ndr" in sixteen["source"] and "nvlink4" in eight["source"]
    # the all-reduces alone: 160 of them, each 2·15/16 of 128 · 8192 · 2 B at 50 GB/s, plus 10 µs each
    assert sixteen["step_time_expected_comm"] == pytest.approx(160 * (1e-5 + 2 * 15 / 16 * 128 * 8192 * 2 / 50e9),
                                                               rel=1e-12)


def test_auto_no_longer_plans_tp16_across_two_h100_nodes() -> None:
    # issue 21: `devices = auto` took TP16 over two 8-GPU nodes with its all-reduces at NVLink speed
    (sc,) = check_source(AUTO, "svc.kvp").scenarios
    p = plan(sc)
    assert p.tp <= 8
