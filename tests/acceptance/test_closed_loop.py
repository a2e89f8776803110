"""A closed-loop workload end to end (examples/service-concurrency.kvp, SPEC §13): advise prints the throughput,
mean TTFT and mean TPOT the benchmark tools print, JSON carries them with their evidence, the plan is sized at
the decode batch the load model derives, the SLOs are checked against the predictions, and report writes them.

Regenerate the golden with `python -m pytest tests/acceptance/test_closed_loop.py --update-goldens`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.acceptance.test_cli_core import check_contract
from tests.paths import DATA, ROOT

EXAMPLE = ROOT / "examples" / "service-concurrency.kvp"


def test_advise_prints_the_closed_loop_figures(golden: Callable[[Path, str], None],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["advise", "examples/service-concurrency.kvp"])
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    for label in ("throughput", "output tokens/s", "TTFT", "TPOT", "clients"):
        assert f"\n  {label} " in r.stdout, label
    golden(DATA / "golden" / "advise" / "service-concurrency.txt", r.stdout)


def test_json_carries_them_and_they_keep_the_closed_loop_identity() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE), "--format", "json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    check_contract(body)
    (p,) = body["plans"]
    ld = p["load"]
    for key, unit in (("rate", "req/s"), ("output_rate", "tok/s"), ("ttft", "s"), ("tpot", "s")):
        assert ld[key]["unit"] == unit and ld[key]["evidence"] == "derived", key
    x, ttft, tpot, c = (ld[k]["value"] for k in ("rate", "ttft", "tpot", "concurrency"))
    assert c == 64 and x * (ttft + (1000 - 1) * tpot) == pytest.approx(64, rel=1e-6)
    assert ld["output_rate"]["value"] == pytest.approx(x * 1000, rel=1e-12)
    # the plan is sized at the running sequences the loop holds, at the context input + output
    assert p["batch"] == math.ceil(ld["running"]["value"]) and p["context"] == 2000
    assert ld["running"]["value"] <= 64


def test_the_slos_are_checked_against_the_predictions(tmp_path: Path) -> None:
    tight = tmp_path / "tight.kvp"
    tight.write_text(EXAMPLE.read_text().replace("ttft <= 500 ms", "ttft <= 20 ms"))
    r = CliRunner().invoke(main, ["advise", str(tight)])
    assert r.exit_code == 1, r.output
    assert "TTFT under load" in r.stdout and "exceeds the SLO 20 ms" in r.stdout
    loose = tmp_path / "loose.kvp"
    loose.write_text(EXAMPLE.read_text().replace("itl  <= 20 ms", "itl  <= 5 ms"))
    r = CliRunner().invoke(main, ["advise", str(loose)])
    assert r.exit_code == 1 and "ITL under load" in r.stdout
    fast = tmp_path / "fast.kvp"  # slo.rate: the loop's throughput must reach it
    fast.write_text(EXAMPLE.read_text().replace("ttft <= 500 ms", "ttft <= 500 ms\n        rate >= 100/s"))
    r = CliRunner().invoke(main, ["lint", str(fast)])
    assert r.exit_code == 1 and "KV303 the closed loop's throughput" in r.stdout, r.output
    assert "below the SLO rate >= 100 req/s" in r.stdout


def test_report_writes_the_closed_loop_figures(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["report", str(EXAMPLE), "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    index = (tmp_path / "out" / "service-concurrency" / "index.md").read_text()
    for row in ("| ttft |", "| tpot |", "| output rate |", "| rate |"):
        assert row in index, row


@pytest.mark.parametrize("example", ["service-concurrency", "service-rate"])
def test_pareto_takes_request_workloads(example: str) -> None:
    r = CliRunner().invoke(main, ["pareto", str(ROOT / "examples" / f"{example}.kvp")])
    assert r.exit_code == 0, r.output
    assert "(advise)" in r.stdout


@pytest.mark.parametrize("example", ["service-rate", "service-slo", "service-concurrency"])
def test_a_request_front_point_s_pins_plan_exactly_it(example: str, tmp_path: Path) -> None:
    """Each point of a request workload's front is the plan advise makes with the point's pins written into the
    spec: the same layout and the same expected step; a layout with no steady state at the rate is no point."""
    from kvplan.lang import check_file
    from kvplan.planner import pareto

    path = ROOT / "examples" / f"{example}.kvp"
    (sc,) = check_file(path).scenarios
    front = pareto.front(sc)
    assert front.points and front.chosen
    text = path.read_text()
    for p in front.points:
        pinned = tmp_path / f"{example}-{p.number}.kvp"
        pinned.write_text(text[:text.rindex("}")] + p.pin_block("    ") + "}\n")
        r = CliRunner().invoke(main, ["advise", str(pinned), "--format", "json"])
        assert r.exit_code == 0, r.output  # the point's plan meets the spec
        (q,) = json.loads(r.stdout)["plans"]
        c = q["choices"]
        assert (c["kv_dtype"], c["devices"], c["tensor_parallel"], c["placement"]) == (
            p.kv_dtype, p.devices, p.tp, p.placement) and q["feasible"]
        assert q["metrics"]["step_time_expected"]["value"] == pytest.approx(p.step.value, rel=1e-12)


def test_clients_past_the_engines_cap_queue_and_the_launcher_writes_that_cap(tmp_path: Path) -> None:
    # 1,500 clients of 128-token requests on one H100: vLLM runs at most 1,024 at once (its default --max-num-seqs
    # there), the pool holds more, so the launcher writes 1,024, not 1,500, and the plan's TTFT counts the
    # 476 that wait: (C - C_run)/X by Little's law, the closed-loop identity X·(TTFT + (n_out - 1)·TPOT) = C kept
    spec = tmp_path / "many.kvp"
    spec.write_text(EXAMPLE.read_text().replace("concurrency = 64", "concurrency = 1500")
                    .replace("input       = 1k", "input       = 128").replace("output      = 1k", "output      = 128")
                    .replace("ttft <= 500 ms", "ttft <= 60 s").replace("itl  <= 20 ms", "itl  <= 1 s")
                    .replace("regime == kv-bound", "# regime"))
    r = CliRunner().invoke(main, ["advise", str(spec), "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    ld = json.loads(r.stdout)["plans"][0]["load"]
    x, ttft, tpot = (ld[k]["value"] for k in ("rate", "ttft", "tpot"))
    assert x * (ttft + 127 * tpot) == pytest.approx(1500, rel=1e-6)
    assert ttft > 476 / x  # the queue's wait is part of it
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["emit", str(spec), "--target", "vllm", "-o", str(out), "--allow-unmet"])
    assert r.exit_code == 0, r.output
    text = (out / "service-concurrency" / "vllm.sh").read_text()
    assert "--max-num-seqs 1024" in text and "vLLM's default --max-num-seqs" in text
