"""A request workload through the CLI (docs/service.md): advise prints the concurrency, ITL, TTFT and saturation
rate with their evidence, in text and JSON; past saturation advise and lint say so and name the rate; a workload
that mixes the two forms cannot be planned (exit 2, located)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "service-rate.kvp"


def _saturated(tmp_path: Path) -> Path:
    text = EXAMPLE.read_text().replace("rate   = 5/s", "rate   = 50/s").replace("devices = auto  ", "devices = 1     ")
    path = tmp_path / "sat.kvp"
    path.write_text(text)
    return path


def test_advise_prints_the_service_figures_with_their_evidence() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    for label in ("concurrency", "ITL", "TTFT", "saturation rate"):
        assert re.search(rf"^  {label} +\S+ \S+ +\(derived\)$", r.stdout, re.M), label
    assert "5 req/s of 4,000 input and 512 output tokens" in r.stdout


def test_advise_json_carries_the_load_figures() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE), "--format", "json"])
    assert r.exit_code == 0, r.output
    (p,) = json.loads(r.stdout)["plans"]
    load = p["load"]
    assert load["saturated"] is False and load["rate"]["value"] == 5
    for key in ("concurrency", "itl", "ttft", "saturation_rate"):
        assert load[key]["evidence"] == "derived" and "λ = 5/s" in load[key]["source"]
    assert load["itl"]["unit"] == "s" and load["saturation_rate"]["unit"] == "req/s"
    assert p["batch"] == p["choices"]["batch"] >= load["running"]["value"] > p["batch"] - 1


def test_past_saturation_advise_and_lint_say_so_and_name_the_rate(tmp_path: Path) -> None:
    path = _saturated(tmp_path)
    r = CliRunner().invoke(main, ["advise", str(path)])
    assert r.exit_code == 1, r.output
    m = re.search(r"SATURATED: the rate 50 req/s is past the saturation rate (\S+ req/s) \(derived\)", r.stdout)
    assert m and re.search(rf"^  saturation rate +{re.escape(m.group(1))} +\(derived\)$", r.stdout, re.M)
    lint = CliRunner().invoke(main, ["lint", str(path)])
    assert lint.exit_code == 1
    assert re.search(rf"sat\.kvp:14:\d+: KV303 the rate 50 req/s is past the saturation rate {m.group(1)}", lint.output)


def test_a_workload_of_both_forms_cannot_be_planned(tmp_path: Path) -> None:
    path = tmp_path / "mixed.kvp"
    path.write_text(EXAMPLE.read_text().replace("output = 512", "output = 512\n        batch = 8"))
    r = CliRunner().invoke(main, ["advise", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lint = CliRunner().invoke(main, ["lint", str(path)])
    assert re.search(r"mixed\.kvp:17:9: KV101 `batch` belongs to the batch/context form", lint.output), lint.output


def test_advise_markdown_has_the_service_table() -> None:
    r = CliRunner().invoke(main, ["advise", str(EXAMPLE), "--format", "markdown"])
    assert r.exit_code == 0, r.output
    assert "| service (load model) | value |" in r.stdout
    assert re.search(r"^\| saturation rate \| [\d.]+ req/s \*\(derived\)\* \|$", r.stdout, re.M), r.stdout
