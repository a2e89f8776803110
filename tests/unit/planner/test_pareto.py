"""kvplan.planner.pareto: the front is the non-dominated set of the planner's own feasible candidates, checked by
brute force; each point's figures are the expected model's, recomputed here from kvplan.model.expected."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.lang import check_file
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, fragmentation
from kvplan.model.scenario import Scenario
from kvplan.planner import candidates, factors_for, pareto, plan
from tests.paths import ROOT

W2 = ROOT / "examples" / "w2-batch32.kvp"


def _scenario(path: Path = W2) -> Scenario:
    (sc,) = check_file(str(path)).scenarios
    return sc


def _brute_front(xs: list[float], ys: list[float]) -> list[bool]:
    """O(n²): i is on the front when no j is at least as good on both axes and better on one."""
    n = len(xs)
    return [not any(xs[j] >= xs[i] and ys[j] >= ys[i] and (xs[j] > xs[i] or ys[j] > ys[i]) for j in range(n))
            for i in range(n)]


# small integers make ties (equal x, equal y, equal points) common: the cases a sweep gets wrong
_coords = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=40)


@given(_coords)
def test_non_dominated_agrees_with_brute_force_ties_included(pts: list[tuple[int, int]]) -> None:
    xs, ys = [float(x) for x, _ in pts], [float(y) for _, y in pts]
    assert pareto.non_dominated(xs, ys) == _brute_front(xs, ys)


def test_non_dominated_keeps_equal_points_and_drops_a_tie_on_one_axis() -> None:
    # (2, 2) twice: neither dominates the other; (2, 1) loses to (2, 2) on y alone; (1, 3) is best on y
    assert pareto.non_dominated([2, 2, 2, 1, 0], [2, 2, 1, 3, 3]) == [True, True, False, True, False]


@pytest.fixture(scope="module")
def w2() -> pareto.Front:
    return pareto.front(_scenario())


def test_the_w2_front_is_the_brute_force_front_of_every_feasible_candidate(w2: pareto.Front) -> None:
    pts = w2.points
    want = _brute_front([p.per_user.value for p in pts], [p.per_device.value for p in pts])
    assert [p.front for p in pts] == want
    assert 1 < len(w2.on_front) < len(pts)
    for p in pts:  # a dominated point names a front point that does dominate it
        if not p.front:
            q = next(x for x in pts if x.number == p.beaten_by)
            assert q.front and pareto.dominates(q, p)


def test_the_points_are_exactly_the_candidates_the_planner_keeps(w2: pareto.Front) -> None:
    """The pool is the planner's: every evaluated candidate is a point or has the planner's rejection, and each
    point fits on its most loaded device."""
    cands = candidates(_scenario())
    ev = cands.evaluated
    assert sorted(p.candidate for p in w2.points) == list(cands.feasible)
    assert w2.evaluated == len(ev) == 140  # docs/planner.md: W2 evaluates 140 candidates
    for i in range(len(ev)):
        if i in cands.feasible:
            assert ev.reject[i] is None and ev.need_dev[i] <= ev.usable_dev[i]
        else:
            assert ev.reject[i] is not None


def test_advise_s_own_plan_is_the_point_marked_and_on_the_front(w2: pareto.Front) -> None:
    p = plan(_scenario())
    (chosen,) = [x for x in w2.points if x.number == w2.chosen]
    assert (chosen.kv_dtype, chosen.devices, chosen.tp, chosen.placement) == (p.kv_dtype.id, p.n_devices, p.tp,
                                                                              p.placement)
    assert chosen.front  # int4 on 4 B200s: the most tokens per device of all


def test_a_point_s_figures_are_the_expected_model_s(w2: pareto.Front) -> None:
    """1/T and b/(T·N), with T from kvplan.model.expected on an rf.Config built here, not from the search's arrays."""
    sc = _scenario()
    for p in w2.on_front:
        cfg = rf.Config(sc.model, sc.device, n_devices=p.devices, tp=p.tp, w_p=sc.weights.width,
                        w_kv=0.5 + 4 / 128,  # int4 as vLLM stores it: one fp32 scale per token-head and side
                        factors=KvFactors(1.0, 1.0, float(fragmentation(sc.context, 16))), placement=p.placement)
        assert p.kv_dtype == "int4"
        t = float(ex.expected_step(cfg, sc.batch, sc.context, factors_for(sc, "int4"),
                                   ex.link_bandwidth(sc.device)).step)
        assert p.per_user.value == pytest.approx(1 / t, rel=1e-9)
        assert p.per_device.value == pytest.approx(sc.batch / (t * p.devices), rel=1e-9)
        assert p.per_user.unit == p.per_device.unit == "tok/s"
        assert p.per_user.evidence.value == "derived"


def test_each_point_pins_the_axes_the_search_varied(w2: pareto.Front) -> None:
    """W2: no eviction and one placement were searched, so the pins are the dtype, the count and the split."""
    for p in w2.points:
        assert dict(p.pins) == {"kv_dtype": p.kv_dtype, "devices": str(p.devices), "tensor_parallel": str(p.tp),
                                "pipeline_parallel": str(p.pp)}
        assert p.tp * p.pp == p.devices
        block = p.pin_block("    ")
        assert block.startswith("    pin {\n") and block.endswith("    }\n")
        assert f"        devices           = {p.devices}\n" in block


def test_an_slo_removes_the_candidates_that_miss_it(tmp_path: Path) -> None:
    spec = tmp_path / "slo.kvp"
    whole = pareto.front(_scenario(W2))
    cut = sorted(p.step.value for p in whole.points)[len(whole.points) // 2]  # the median step of the whole front
    spec.write_text(W2.read_text(encoding="utf-8").replace("    expect {", f"    slo {{\n        step_time <= "
                                                           f"{cut * 1e3:.6f} ms\n    }}\n\n    expect {{"),
                    encoding="utf-8")
    f = pareto.front(_scenario(spec))
    assert f.points and all(p.step.value <= cut * (1 + 1e-6) for p in f.points)
    assert len(f.points) < len(whole.points)


def test_no_feasible_candidate_gives_an_empty_front_that_says_why(tmp_path: Path) -> None:
    spec = tmp_path / "one.kvp"
    spec.write_text(W2.read_text(encoding="utf-8").replace("devices   = auto", "devices   = 1"), encoding="utf-8")
    f = pareto.front(_scenario(spec))
    assert f.points == () and f.chosen == 0
    assert "no candidate passes" in f.gap and "fit" in f.gap


def test_a_request_workload_is_fronted_at_the_batch_advise_derives() -> None:
    sc = _scenario(ROOT / "examples" / "service-rate.kvp")
    q = plan(sc, suggest=False)
    f = pareto.front(sc)
    assert f.scenario.batch == q.scenario.batch != sc.batch
    chosen = next(p for p in f.points if p.number == f.chosen)
    assert (chosen.devices, chosen.tp, chosen.kv_dtype) == (q.n_devices, q.tp, q.kv_dtype.id)


def test_the_front_does_not_depend_on_the_minimum_gain() -> None:
    """The minimum gain is how advise chooses, not a filter: the points and the front stay; the mark may move."""
    a, b = pareto.front(_scenario()), pareto.front(_scenario(), min_gain=5.0)
    strip = [attrs.evolve(p, number=0) for p in a.points]
    assert strip == [attrs.evolve(p, number=0) for p in b.points]
