"""Issue 21 item 2: the layout search of a request workload (SPEC §12, docs/service.md) covers replicas × tensor ×
pipeline for every total the spec allows, `devices` being the total over the replicas; it compares layouts at
equal totals, and when none meets the plan is the best within the bound, unmet, with the smallest verified change.
The issue's three specs are tests/data/fleet/*.kvp. (`kvplan map --devices 16 --tp 16` stepping slower than
`--devices 8 --tp 8` on H100 is tests/acceptance/test_nodes.py's.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from kvplan.base.limits import MAX_DEVICES, MAX_LAYOUTS
from kvplan.catalog import get_device
from kvplan.cli import main
from kvplan.lang import check_file, check_source
from kvplan.model.scenario import DeviceCount, Pin, Scenario
from kvplan.planner import serving
from kvplan.planner.entry import plan
from kvplan.planner.plan import Plan
from tests.acceptance.test_service import _applied
from tests.paths import ROOT

FLEET = ROOT / "tests" / "data" / "fleet"
#: `2 replicas × 8 × h100-sxm (tp 8), 16 in all` or `8 × h100-sxm (tp 8)`: the layout words of a suggestion
LAYOUT = re.compile(r"(?:(\d+) replicas × )?(\d+) × ([\w-]+) \(tp (\d+)(?: × pp (\d+))?\)")


def _scenario(name: str) -> Scenario:
    (sc,) = check_file(str(FLEET / name)).scenarios
    return sc


def _total(p: Plan) -> int:
    return p.scenario.replicas * p.n_devices


def _goodput(p: Plan) -> float:
    assert p.load is not None
    g = p.load.goodput
    return g.value if g is not None else 0.0


def _layout(sc: Scenario, replicas: int, per: int) -> Plan:
    """The plan of `replicas` × `per` devices, planned on its own: the total fixed, the replicas pinned."""
    pins = dict(sc.pins)
    pins["replicas"] = Pin("replicas", float(replicas), sc.spans["deployment"])
    return plan(attrs.evolve(sc, devices=DeviceCount("fixed", replicas * per), pins=pins), suggest=False)


def _splits(total: int) -> list[tuple[int, int]]:
    """Every (replicas, devices per replica) of `total`, the per-replica count a power of two (a TP group)."""
    return [(total // n, n) for n in (1, 2, 4, 8, 16, 32, 64) if n <= total and total % n == 0]


def test_at_most_8_plans_8_in_all_unmet_the_best_of_its_splits() -> None:
    # issue 21: `devices = <= 8` planned 2 GPUs saturating at 0.45 req/s ("the 2 that suffice")
    sc = _scenario("h100-le8.kvp")
    p = plan(sc)
    assert _total(p) == 8 and not p.feasible
    assert p.load is not None and p.load.saturated
    # the most goodput of every split of the 8 (and of any fewer), each planned on its own
    others = [_layout(sc, r, n) for total in (2, 4, 8) for r, n in _splits(total)]
    assert all(_goodput(q) <= _goodput(p) for q in others), [(_total(q), q.tp, _goodput(q)) for q in others]
    (dev,) = [d for d in p.decisions if d.domain == "devices"]
    assert "saturates at" in dev.decision and "for the declared 10 req/s" in dev.decision


def test_at_most_8_suggests_16_in_all_whose_replan_meets_and_is_what_it_says(tmp_path: Path) -> None:
    path = FLEET / "h100-le8.kvp"
    text = path.read_text()
    diags = json.loads(CliRunner().invoke(main, ["lint", str(path), "--output-format", "json"]).stdout)["diagnostics"]
    fixes = [f for d in diags if d["code"] == "KV303" for f in d["fixes"] if f["title"].startswith("devices = ")]
    assert [f["title"].split(" (")[0] for f in fixes] == ["devices = <= 16"], fixes
    fixed = tmp_path / "fixed.kvp"
    fixed.write_text(_applied(text, fixes[0]))
    again = CliRunner().invoke(main, ["advise", str(fixed), "--format", "json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["plans"][0]["unmet"] == []
    (q,) = [plan(sc) for sc in check_file(str(fixed)).scenarios]
    m = LAYOUT.search(fixes[0]["title"].split("service SLOs: ", 1)[1])
    assert m is not None, fixes[0]["title"]
    words = (int(m.group(1) or 1), int(m.group(2)), m.group(3), int(m.group(4)), int(m.group(5) or 1))
    assert words == (q.scenario.replicas, q.n_devices, "h100-sxm", q.tp, q.pp)
    assert _total(q) == 16 and q.feasible


@pytest.mark.parametrize("name", ["h100-auto.kvp", "h200-auto.kvp"])
def test_auto_plans_tp_at_most_8_per_replica_the_least_total_that_meets(name: str) -> None:
    # issue 21: `devices = auto` planned TP16 across two 8-GPU nodes, its all-reduces at NVLink speed
    sc = _scenario(name)
    p = plan(sc)
    assert p.feasible and p.tp <= 8 and p.tp * p.pp == p.n_devices
    total = _total(p)
    # at the same total no split carries more within the SLOs; no power-of-two total below it meets
    same = [_layout(sc, r, n) for r, n in _splits(total) if (r, n) != (p.scenario.replicas, p.n_devices)]
    assert all(_goodput(q) <= _goodput(p) or not q.feasible for q in same)
    below = [_layout(sc, r, n) for t in (1, 2, 4, 8, 16, 32) if t < total for r, n in _splits(t)]
    assert not any(q.feasible for q in below), [(_total(q), q.tp) for q in below if q.feasible]


def test_replicas_share_the_rate_goodput_is_r_times_one_replica_at_its_share() -> None:
    sc = _scenario("h100-auto.kvp")
    p = plan(sc)
    r = p.scenario.replicas
    assert r > 1
    assert sc.rate is not None
    one = plan(attrs.evolve(sc, rate=sc.rate / r, devices=DeviceCount("fixed", p.n_devices)), suggest=False)
    assert one.scenario.replicas == 1 and one.tp == p.tp
    assert _goodput(p) == pytest.approx(r * _goodput(one), rel=1e-9)
    assert p.load is not None and one.load is not None
    assert p.load.saturation_rate.value == pytest.approx(r * one.load.saturation_rate.value, rel=1e-9)


def test_h200_20_per_s_cheapest_meets_on_16_to_64_with_tp_at_most_8() -> None:
    # issue 21: an unmet 2-GPU plan whose suggestion `pin replicas = 2` re-planned into 2 replicas of TP64
    p = plan(_scenario("h200-cheapest.kvp"))
    assert p.feasible and 16 <= _total(p) <= 64 and p.tp <= 8
    assert p.cost is not None
    assert p.cost.devices.value == _total(p)
    price = get_device("h200").price_per_hour  # the catalog's cited price (docs/catalog.md, "Prices")
    assert price is not None and p.cost.hourly.value == pytest.approx(price * _total(p))  # × the devices in all


def test_a_pin_replicas_suggestion_says_the_layout_its_replan_chooses() -> None:
    # an engine that writes no data-parallel size searches one replica; `pin replicas` lifts that, and its words
    # are the layout the re-plan takes (issue 21: "on 2 × h200" re-planned into 2 replicas of TP64)
    src = (FLEET / "h100-le8.kvp").read_text().replace("engine  = vllm", "engine  = trtllm").replace(
        "devices = <= 8", "devices = <= 16")
    (sc,) = check_source(src, "trt.kvp").scenarios
    p = plan(sc)
    assert not p.feasible and p.scenario.replicas == 1
    said = [s for u in p.unmet for s in u.suggestions if s.text.startswith("pin replicas = ")]
    assert said, [s.text for u in p.unmet for s in u.suggestions]
    m = LAYOUT.search(said[0].text)
    assert m is not None, said[0].text
    r = int(said[0].text.split()[3])
    pins = dict(sc.pins)
    pins["replicas"] = Pin("replicas", float(r), sc.spans["deployment"])
    q = plan(attrs.evolve(sc, pins=pins))
    assert q.feasible and _total(q) <= 16
    assert (int(m.group(1) or 1), int(m.group(2)), int(m.group(4))) == (q.scenario.replicas, q.n_devices, q.tp)


@pytest.mark.parametrize("devices", [f"<= {MAX_DEVICES}", str(MAX_DEVICES), "auto"])
def test_the_layouts_planned_stay_bounded_whatever_the_cap(monkeypatch: pytest.MonkeyPatch, devices: str) -> None:
    calls: list[int] = []
    settle = serving._service

    def counted(sc: Scenario, at: object) -> object:
        calls.append(sc.devices.n)
        return settle(sc, at)  # type: ignore[arg-type]

    monkeypatch.setattr(serving, "_service", counted)
    src = (FLEET / "h100-le8.kvp").read_text().replace("devices = <= 8", f"devices = {devices}")
    (sc,) = check_source(src, "big.kvp").scenarios
    p = plan(sc, suggest=False)
    assert 0 < len(calls) <= MAX_LAYOUTS
    assert _total(p) <= MAX_DEVICES


REPLICATED = """kvplan 1

deployment "rep" {
    model   = llama-3-70b
    device  = h100-sxm
    engine  = vllm
    devices = 16

    workload {
        batch   = 32
        context = 4k
    }

    pin {
        replicas = 2
    }
}
"""


def test_a_fixed_count_with_pinned_replicas_is_the_total_in_the_plan_and_the_files(tmp_path: Path) -> None:
    # `devices = 16` with `pin replicas = 2` is 2 replicas of 8 (it was 2 of 16): the vLLM command and the k8s
    # pods say so
    (sc,) = check_source(REPLICATED, "rep.kvp").scenarios
    p = plan(sc)
    assert (p.scenario.replicas, p.n_devices) == (2, 8) and _total(p) == 16
    path = tmp_path / "rep.kvp"
    path.write_text(REPLICATED)
    sh = CliRunner().invoke(main, ["emit", str(path), "--target", "vllm"]).stdout
    assert re.search(r"--tensor-parallel-size 8\b", sh) and re.search(r"--data-parallel-size 2\b", sh), sh
    k8s = CliRunner().invoke(main, ["emit", str(path), "--target", "k8s"]).stdout
    assert re.search(r"^  replicas: 2$", k8s, re.M) and re.findall(r"nvidia.com/gpu: (\d+)", k8s) == ["8"], k8s


def test_pinned_replicas_that_do_not_divide_the_total_are_located_and_say_what_would() -> None:
    src = REPLICATED.replace("devices = 16", "devices = 12").replace("replicas = 2", "replicas = 5")
    diags = [d for d in check_source(src, "rep.kvp").diagnostics if d.code == "KV108"]
    assert len(diags) == 1
    (d,) = diags
    line = src.splitlines().index("        replicas = 5") + 1
    assert d.span is not None and (d.span.file, d.span.line, d.span.column) == ("rep.kvp", line, 9)
    assert "does not divide devices = 12" in d.message and "set devices = 10 (2 per replica)" in (d.help or "")
    fixed = src.replace("devices = 12", "devices = 10")
    assert not [d for d in check_source(fixed, "rep.kvp").diagnostics if d.code == "KV108"]


def test_engine_any_says_each_engines_replicas_beside_the_spec_plan(tmp_path: Path) -> None:
    # the spec's plan (engine any) writes no data-parallel size; vLLM's own plan takes replicas and says so
    path = tmp_path / "any.kvp"
    path.write_text((FLEET / "h100-auto.kvp").read_text().replace("    engine  = vllm\n", ""))
    out = CliRunner().invoke(main, ["advise", str(path)]).stdout
    (sc,) = check_file(str(path)).scenarios
    vllm = plan(attrs.evolve(sc, engine="vllm"))
    assert vllm.scenario.replicas > 1
    said = " ".join(out.split())  # the text view wraps lines
    assert (f"vllm: planned for vllm (vLLM {said.split('(vLLM ')[1].split(')')[0]}): bf16 KV on "
            f"{vllm.scenario.replicas} replicas × {vllm.n_devices} × h100-sxm (tp {vllm.tp} × pp {vllm.pp}), "
            f"{_total(vllm)} in all") in said, said
