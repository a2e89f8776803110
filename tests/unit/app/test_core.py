"""The commands' core without click: a request in, the lines it says and its exit code out."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Generator, TypeVar

import pytest

from kvplan.app import requests as rq
from kvplan.app.fmt import fmt
from kvplan.app.output import EXIT_CLEAN, EXIT_FINDINGS, Line, Stop
from kvplan.app.plans import advise, advise_command
from kvplan.app.spec import checked
from kvplan.lang.fmt import format_source
from tests.paths import ROOT

T = TypeVar("T")
SPEC = ROOT / "examples" / "w2-batch32.kvp"


def said(gen: Generator[Line, None, T]) -> tuple[list[Line], T]:
    """Every line a core says, and its value."""
    lines: list[Line] = []
    while True:
        try:
            lines.append(next(gen))
        except StopIteration as done:
            return lines, done.value


def test_planner_options_hand_on_only_what_was_given() -> None:
    assert rq.PlannerOptions().overrides() == {}
    given = rq.PlannerOptions(reserve=0.1, eta=0.5, runtime_reserve=0.0, slo_on="bound", calibration="p.toml")
    # 0 is a value given (a runtime reserve of 0 bytes), not a missing one; slo_on and calibration are not overrides
    assert given.overrides() == {"reserve": 0.1, "eta": 0.5, "runtime_reserve": 0.0}


def test_deploy_names_the_flags_given_in_the_order_of_emits_help() -> None:
    assert rq.Deploy().given() == []
    assert rq.Deploy(gpu_resource="amd.com/gpu", image="x:1", shm_size=1.0).given() == [
        "--image", "--shm-size", "--gpu-resource"]


def test_fmt_rewrites_a_file_and_says_so_on_stderr(tmp_path: Path) -> None:
    messy = tmp_path / "messy.kvp"
    text = SPEC.read_text(encoding="utf-8").replace("\n", "\n\n\n", 3)
    messy.write_text(text, encoding="utf-8")
    lines, code = said(fmt(rq.FmtRequest((str(messy),), check=False, diff=False)))
    assert code == EXIT_CLEAN
    assert messy.read_text(encoding="utf-8") == format_source(text, str(messy)) != text
    assert lines == [Line("1 file reformatted, 0 unchanged", err=True)]


def test_fmt_check_writes_nothing_and_finds_the_change(tmp_path: Path) -> None:
    messy = tmp_path / "messy.kvp"
    text = SPEC.read_text(encoding="utf-8").replace("\n", "\n\n\n", 3)
    messy.write_text(text, encoding="utf-8")
    lines, code = said(fmt(rq.FmtRequest((str(messy),), check=True, diff=False)))
    assert code == EXIT_FINDINGS and messy.read_text(encoding="utf-8") == text
    assert [line.err for line in lines] == [False, True]
    assert lines[0].text == f"would reformat {messy}"


def test_a_spec_with_errors_says_them_then_stops(tmp_path: Path) -> None:
    bad = tmp_path / "bad.kvp"
    bad.write_text(SPEC.read_text(encoding="utf-8").replace("batch   =", "bacth   =", 1), encoding="utf-8")
    gen = checked(str(bad))
    first = next(gen)
    assert first.err and "bacth" in first.text
    with pytest.raises(Stop, match=r"has 1 error; `kvplan lint .*bad\.kvp` shows each in its line"):
        next(gen)


def test_an_unreadable_spec_is_one_line() -> None:
    with pytest.raises(Stop, match="KV0"):
        said(checked(str(ROOT / "no-such-spec.kvp")))


def test_advise_says_the_plan_on_stdout_and_exits_clean_when_it_meets_the_spec() -> None:
    lines, code = said(advise(rq.AdviseRequest(str(SPEC), "text", None, rq.PlannerOptions(), ())))
    assert code == EXIT_CLEAN
    assert "plan for w2-batch32" in lines[0].text and not lines[0].err


def test_advise_exits_with_findings_when_a_plan_does_not_fit() -> None:
    # a reserve of 99% of each device leaves no room for the weights: the plan misses the fit
    _, code = said(advise(rq.AdviseRequest(str(SPEC), "text", None, rq.PlannerOptions(reserve=0.99), ())))
    assert code == EXIT_FINDINGS


def test_the_advise_command_of_a_pareto_point_reads_back_as_the_options_given() -> None:
    req = rq.ParetoRequest("my spec.kvp", "text", None, None,
                           rq.PlannerOptions(reserve=0.1, activation_reserve=5e9, slo_on="bound"), ("a dir",))
    args = shlex.split(advise_command(req, "w2[batch=32]"))
    assert args == ["kvplan", "advise", "my spec.kvp", "--scenario", "w2[batch=32]", "--reserve", "0.1",
                    "--activation-reserve", "5000000000", "--slo-on", "bound", "--allow-path", "a dir"]

