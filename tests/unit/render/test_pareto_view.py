"""kvplan.render.pareto_view and plot.pareto_figure: the same front as text, CSV, JSON and a picture, each number
with its unit and evidence, deterministic."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kvplan.lang import check_file
from kvplan.planner import pareto
from kvplan.render import pareto_view, plot
from tests.paths import ROOT

W2 = ROOT / "examples" / "w2-batch32.kvp"


@pytest.fixture(scope="module")
def w2() -> pareto.Front:
    (sc,) = check_file(str(W2)).scenarios
    return pareto.front(sc)


def test_csv_has_one_row_per_feasible_candidate_with_the_front_first(w2: pareto.Front) -> None:
    rows = list(csv.DictReader(io.StringIO(pareto_view.csv_text([w2]))))
    assert len(rows) == len(w2.points)
    assert tuple(rows[0]) == (*pareto_view.CSV_COLUMNS, "cost_devices", "cost_usd_per_1m_output")  # b200 is priced
    fronts = [r["front"] == "true" for r in rows]
    assert fronts == sorted(fronts, reverse=True) and sum(fronts) == len(w2.on_front)
    for r, p in zip(rows, w2.points):
        assert float(r["tokens_per_s_per_user"]) == p.per_user.value  # the shortest repr round-trips exactly
        assert float(r["tokens_per_s_per_device"]) == p.per_device.value
        assert int(r["devices"]) * 1 == int(r["tensor_parallel"]) * int(r["pipeline_parallel"])
        assert (r["beaten_by"] == "") == p.front
        assert int(r["cost_devices"]) == p.devices
    assert [r["advise_chooses"] for r in rows].count("true") == 1


def test_json_points_carry_values_with_unit_and_evidence_and_their_pins(w2: pareto.Front) -> None:
    doc = json.loads(pareto_view.json_text([w2], "kvplan advise examples/w2-batch32.kvp"))
    assert doc["format_version"] == "1" and doc["kind"] == "pareto"
    (f,) = doc["fronts"]
    assert f["candidates_evaluated"] == 140 and f["feasible"] == len(f["points"]) == len(w2.points)
    for pt in f["points"]:
        for key in ("tokens_per_s_per_user", "tokens_per_s_per_device", "step_time_expected", "step_time"):
            assert set(pt[key]) - {"interval"} == {"value", "unit", "evidence", "source"}
            assert pt[key]["evidence"] == "derived"
        assert pt["cost"]["devices"]["value"] == pt["choices"]["devices"]
        assert pt["pins"]["devices"] == str(pt["choices"]["devices"])
        assert pt["pin_block"].startswith("pin {\n")


def test_text_lists_the_front_its_pins_and_the_dominated_ones_with_units(w2: pareto.Front) -> None:
    out = pareto_view.text([w2], "kvplan advise examples/w2-batch32.kvp")
    assert out == pareto_view.text([w2], "kvplan advise examples/w2-batch32.kvp")  # deterministic
    assert "140 candidates evaluated, 112 pass the rules" in out
    assert f"{len(w2.on_front)} on the front" in out
    # advise plans int4 on 4 × b200, tp 4 (tests/data/golden/advise/w2-batch32.txt): that point's number
    (chosen,) = [p.number for p in w2.points if (p.kv_dtype, p.devices, p.tp, p.pp) == ("int4", 4, 4, 1)]
    assert w2.chosen == chosen and f"kvplan advise chooses point {chosen}" in out
    for p in w2.on_front:
        assert f"  {p.number}: {p.label}\n" + p.pin_block("    ") in out
        assert p.per_user.human in out and p.per_device.human in out
    assert f"dominated ({len(w2.points) - len(w2.on_front)};" in out
    assert " tok/s" in out and " ms" in out


def test_equal_points_share_one_label_naming_each_placement(tmp_path: Path) -> None:
    """Striped and affinity at one place (B200, batch 32: the same effective bandwidth) are one label, not two
    boxes on top of each other."""
    pytest.importorskip("matplotlib")
    spec = tmp_path / "evict.kvp"
    spec.write_text(W2.read_text(encoding="utf-8").replace("    placement = striped\n", "").replace(
        "near-lossless", "aggressive").replace("devices   = auto", "devices   = <= 8"), encoding="utf-8")
    (sc,) = check_file(str(spec)).scenarios
    f = pareto.front(sc)
    places = {(p.per_user.value, p.per_device.value) for p in f.on_front}
    assert len(places) < len(f.on_front)  # the front has equal points
    info = plot.pareto_figure(f, tmp_path / "evict.png")
    labels = [t for t in info.texts if ":" in t and "×" in t]
    assert len(labels) == len(places)
    assert any(t.startswith(("1, 2: ", "2, 1: ")) and t.endswith("striped = affinity") for t in labels), labels


def test_an_empty_front_says_why(w2: pareto.Front) -> None:
    import attrs

    empty = attrs.evolve(w2, points=(), chosen=0, gap="no candidate passes the rules, fits and meets the SLOs")
    assert "no front: no candidate passes" in pareto_view.text([empty])
    with pytest.raises(plot.PlotError, match="no front to draw"):
        plot.pareto_figure(empty, "/nonexistent/x.png")


def test_the_figure_labels_every_front_point_and_holds_every_candidate(w2: pareto.Front, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    info = plot.pareto_figure(w2, tmp_path / "front.png")
    assert (info.width, info.height) == (1000, 550)
    labels = [t for t in info.texts if ":" in t and "×" in t]
    assert labels == [f"{p.number}: {p.short}" for p in sorted(w2.on_front, key=lambda p: p.per_device.value)]
    assert info.legend == (f"dominated ({len(w2.points) - len(w2.on_front)})", f"front ({len(w2.on_front)})",
                           f"kvplan advise's plan (point {w2.chosen})")
    xs, ys = [p.per_user.value for p in w2.points], [p.per_device.value for p in w2.points]
    assert info.xlim[0] < min(xs) and max(xs) < info.xlim[1]  # every point inside the axes
    assert info.ylim[0] < min(ys) and max(ys) < info.ylim[1]
