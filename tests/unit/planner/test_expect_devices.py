"""`expect devices` reads the total over the replicas, as `devices = N` does (docs/language.md): a spec that pins
2 replicas on 4 devices in all expects 4, not the 2 of one replica."""

from __future__ import annotations

import pytest

from kvplan.lang import check_source
from kvplan.planner import lint, plan


def _spec(expect: str) -> str:
    return ('kvplan 1\ndeployment "d" {\n  model = llama-3.1-8b\n  device = h100-sxm\n  engine = vllm\n'
            "  devices = 4\n  workload {\n    rate = 2/s\n    input = 2k\n    output = 256\n  }\n"
            f"  pin {{\n    replicas = 2\n  }}\n  expect {{\n    {expect}\n  }}\n}}\n")


def _kv304(expect: str) -> list[str]:
    r = check_source(_spec(expect), "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    sc = r.scenarios[0]
    p = plan(sc)
    assert p.n_devices == 2 and sc.replicas == 2  # one replica's devices, and the replicas: 4 in all
    return [d.message for d in lint.findings(sc, p) if d.code == "KV304"]


@pytest.mark.parametrize("expect", ["devices == 4", "devices >= 4", "devices <= 4"])
def test_the_total_over_the_replicas_meets_an_expectation_of_the_total(expect: str) -> None:
    assert _kv304(expect) == []


def test_one_replica_s_count_is_not_the_total() -> None:
    assert _kv304("devices == 2") == ["expected devices == 2, the plan gives 4"]
