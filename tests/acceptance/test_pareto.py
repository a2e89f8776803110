"""`kvplan pareto`: every front point of W2 is what `kvplan advise` plans once the point's pins are added to the
spec (same choices, same figures, from advise's JSON); the formats, the exit codes and bad input (exit 2, one line);
and advise itself never loads the pareto modules."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

W2 = ROOT / "examples" / "w2-batch32.kvp"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def w2_json() -> dict[str, Any]:
    r = run("pareto", str(W2), "--format", "json")
    assert r.exit_code == 0, r.output
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def _with_pins(block: str, tmp_path: Path, name: str) -> Path:
    spec = tmp_path / f"{name}.kvp"
    indented = "".join("    " + line + "\n" for line in block.splitlines())
    spec.write_text(W2.read_text(encoding="utf-8").replace("    expect {", indented + "\n    expect {", 1),
                    encoding="utf-8")
    return spec


def _reproduced(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The front, and of the dominated points the first of each KV dtype and the first with pipeline stages: W2's
    front points are each advise's own choice on their device count (the widest split), so the dominated ones
    show that the split and the dtype pins are needed and work."""
    out = [p for p in points if p["front"]]
    beaten = [p for p in points if not p["front"]]
    firsts = {p["choices"]["kv_dtype"]: p for p in reversed(beaten)}
    staged = next(p for p in beaten if p["choices"]["pipeline_parallel"] > 1)
    return out + sorted({p["point"]: p for p in [*firsts.values(), staged]}.values(), key=lambda p: p["point"])


def test_every_front_point_is_what_advise_plans_with_its_pins(w2_json: dict[str, Any], tmp_path: Path) -> None:
    (front,) = w2_json["fronts"]
    points = _reproduced(front["points"])
    # W2's front: two layouts inside one node; TP beyond a node pays its scale-out link (SPEC §12) and is beaten
    assert len([p for p in points if p["front"]]) >= 2 and len(points) > 6
    for p in points:
        spec = _with_pins(p["pin_block"], tmp_path, f"point{p['point']}")
        r = run("advise", str(spec), "--format", "json")
        assert r.exit_code == 0, r.output
        (plan,) = json.loads(r.stdout)["plans"]
        got = {k: plan["choices"][k] for k in p["choices"]}
        assert got == p["choices"]
        m = plan["metrics"]
        assert m["step_time_expected"]["value"] == pytest.approx(p["step_time_expected"]["value"], rel=1e-12)
        assert m["step_time"]["value"] == pytest.approx(p["step_time"]["value"], rel=1e-12)
        assert 1 / m["step_time_expected"]["value"] == pytest.approx(p["tokens_per_s_per_user"]["value"], rel=1e-12)
        assert m["throughput_expected"]["value"] / plan["choices"]["devices"] == pytest.approx(
            p["tokens_per_s_per_device"]["value"], rel=1e-12)


def test_the_point_advise_marks_is_advise_s_plan_without_pins(w2_json: dict[str, Any]) -> None:
    r = run("advise", str(W2), "--format", "json")
    (plan,) = json.loads(r.stdout)["plans"]
    (front,) = w2_json["fronts"]
    (mark,) = [p for p in front["points"] if p["advise_chooses"]]
    assert mark["point"] == front["advise_chooses"]
    assert {k: plan["choices"][k] for k in mark["choices"]} == mark["choices"]


def test_no_point_of_the_json_is_dominated_unless_it_says_so(w2_json: dict[str, Any]) -> None:
    pts = w2_json["fronts"][0]["points"]
    u = [p["tokens_per_s_per_user"]["value"] for p in pts]
    d = [p["tokens_per_s_per_device"]["value"] for p in pts]
    for i, p in enumerate(pts):
        beaten = any(u[j] >= u[i] and d[j] >= d[i] and (u[j] > u[i] or d[j] > d[i]) for j in range(len(pts)))
        assert p["front"] is not beaten


def test_text_is_the_default_and_csv_parses(tmp_path: Path) -> None:
    r = run("pareto", str(W2))
    assert r.exit_code == 0 and r.stdout.startswith("pareto front for w2-batch32: llama-3-70b on b200")
    assert "pin {\n" in r.stdout and "tok/s" in r.stdout
    c = run("pareto", str(W2), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    assert c.exit_code == 0 and len(rows) == 112 and rows[0]["front"] == "true"


def test_the_advise_line_carries_the_options_given(tmp_path: Path) -> None:
    r = run("pareto", str(W2), "--format", "json", "--reserve", "0.123456789", "--runtime-reserve", "2GiB",
            "--slo-on", "bound")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["advise"] == (f"kvplan advise {W2} --reserve 0.123456789 --runtime-reserve "
                                              "2147483648 --slo-on bound")


def test_plot_writes_the_figure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "front.png"
    r = run("pareto", str(W2), "--plot", str(out), "--format", "csv")
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nothing_feasible_is_exit_1_and_says_so(tmp_path: Path) -> None:
    spec = tmp_path / "one.kvp"
    spec.write_text(W2.read_text(encoding="utf-8").replace("devices   = auto", "devices   = 1"), encoding="utf-8")
    r = run("pareto", str(spec))
    assert r.exit_code == 1, r.output
    assert "no front: no candidate passes the rules, fits and meets the SLOs" in r.stdout


def _two_scenarios(tmp_path: Path) -> Path:
    spec = tmp_path / "two.kvp"
    spec.write_text(W2.read_text(encoding="utf-8").replace("batch   = 32", "batch   = [16, 32]"), encoding="utf-8")
    return spec


def test_a_list_workload_gets_one_front_per_scenario(tmp_path: Path) -> None:
    r = run("pareto", str(_two_scenarios(tmp_path)), "--format", "json")
    assert r.exit_code == 0, r.output
    names = [f["scenario"] for f in json.loads(r.stdout)["fronts"]]
    assert len(names) == 2 and names[0] != names[1]


@pytest.mark.parametrize("case,needle", [
    ("two-plots", "--plot draws one scenario's front"),
    ("scenario", "no scenario 'nope'"),
    ("ext", "cannot write a figure to"),
    ("missing", "no-such.kvp"),
])
def test_bad_input_is_one_line_and_exit_2(case: str, needle: str, tmp_path: Path) -> None:
    args = {"two-plots": ["pareto", str(_two_scenarios(tmp_path)), "--plot", str(tmp_path / "x.png")],
            "scenario": ["pareto", str(W2), "--scenario", "nope"],
            "ext": ["pareto", str(W2), "--plot", str(tmp_path / "x.gif")],
            "missing": ["pareto", str(tmp_path / "no-such.kvp")]}[case]
    if case == "ext":
        pytest.importorskip("matplotlib")
    r = run(*args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout and r.stdout == ""


def test_advise_does_not_load_the_pareto_modules() -> None:
    code = ("import json, sys\nfrom kvplan.cli import main\ntry:\n    main(['advise', sys.argv[1]])\n"
            "except SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, str(W2)], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=120)
    modules = json.loads(done.stderr.strip().splitlines()[-1])
    assert "kvplan.planner" in modules
    assert not [m for m in modules if m in ("kvplan.planner.pareto", "kvplan.render.pareto_view")]


def test_a_priced_front_carries_the_cost_advise_prints_for_each_point(tmp_path: Path) -> None:
    """With `price` in the spec, each front point's $/1M output tokens is the figure advise's JSON gives for the
    same pins, and it is H / (b/T · 3600) · 10^6 by hand."""
    priced = tmp_path / "w2-priced.kvp"
    priced.write_text(W2.read_text(encoding="utf-8").replace("    expect {", "    price = 4 USD/h\n\n    expect {", 1),
                      encoding="utf-8")
    r = run("pareto", str(priced), "--format", "json")
    assert r.exit_code == 0, r.output
    (front,) = json.loads(r.stdout)["fronts"]
    tops = [p for p in front["points"] if p["front"]]
    assert tops
    for p in tops:
        cost = p["cost"]["usd_per_1m_output"]
        n, t = p["choices"]["devices"], p["step_time_expected"]["value"]
        assert cost["value"] == pytest.approx(4 * n / (32 / t * 3600) * 1e6, rel=1e-12)
        assert cost["evidence"] == "derived" and cost["unit"] == "USD/1M tokens"
        text = priced.read_text(encoding="utf-8")
        spec = tmp_path / f"priced{p['point']}.kvp"
        indented = "".join("    " + line + "\n" for line in p["pin_block"].splitlines())
        spec.write_text(text.replace("    expect {", indented + "\n    expect {", 1), encoding="utf-8")
        a = run("advise", str(spec), "--format", "json")
        assert a.exit_code == 0, a.output
        (plan,) = json.loads(a.stdout)["plans"]
        assert plan["cost"]["per_million_output"]["value"] == pytest.approx(cost["value"], rel=1e-12)


def test_without_a_price_the_front_has_no_money_column(tmp_path: Path) -> None:
    spec = tmp_path / "unpriced.kvp"  # W2 on a device the catalog has no price for (docs/catalog.md, Gaps)
    spec.write_text(W2.read_text(encoding="utf-8").replace("device    = b200", "device    = gaudi3"), encoding="utf-8")
    r = run("pareto", str(spec), "--format", "csv")
    assert r.exit_code == 0, r.output
    header = next(csv.reader(io.StringIO(r.stdout)))
    assert "cost_devices" in header and not any("usd" in h for h in header)
