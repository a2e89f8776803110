"""`serving = aggregated | disaggregated | auto` (SPEC §14, docs/language.md): the default keeps every plan as it
was (no assumption note), the words lower to the scenario, and the located errors of a misspelt word and of
separate pools asked for a workload with no rate; the fix offered checks clean once applied."""

from __future__ import annotations

import pytest

from kvplan.base import codes
from kvplan.lang import check_source
from kvplan.lang.fixes import apply

_RATE = "    rate = 2/s\n    input = 4k\n    output = 1k"


def _spec(serving: str, workload: str = _RATE) -> str:
    line = f"  serving = {serving}\n" if serving else ""
    return (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n{line}  workload {{\n'
            f"{workload}\n  }}\n}}\n")


def _errors(source: str) -> list:
    return [d for d in check_source(source, "t.kvp").diagnostics if d.severity.value == "error"]


def test_the_default_is_aggregated_with_no_assumption_note() -> None:
    (sc,) = check_source(_spec(""), "t.kvp").scenarios
    assert sc.serving == "aggregated" and sc.pool == ""
    assert not any("serving" in v.source for v in sc.assumptions)


@pytest.mark.parametrize("word", ["aggregated", "disaggregated", "auto"])
def test_each_word_lowers_to_the_scenario(word: str) -> None:
    r = check_source(_spec(word), "t.kvp")
    assert r.ok
    (sc,) = r.scenarios
    assert sc.serving == word
    assert sc.spans["serving"].line == 5


def test_a_misspelt_word_is_located() -> None:
    (d,) = _errors(_spec("disagregated"))
    assert d.code == codes.UNKNOWN_VALUE
    assert (d.span.line, d.span.column) == (5, 13)


@pytest.mark.parametrize("workload, form", [("    batch = 8\n    context = 4k", "a batch workload"),
                                            ("    concurrency = 8\n    input = 1k\n    output = 1k",
                                             "a closed loop (`concurrency`)")])
@pytest.mark.parametrize("word", ["disaggregated", "auto"])
def test_pools_need_a_rate(word: str, workload: str, form: str) -> None:
    source = _spec(word, workload)
    (d,) = _errors(source)
    assert d.code == codes.MISSING_KEY
    assert (d.span.line, d.span.column) == (5, 13)
    assert form in d.message and "rate" in d.message
    fixed = apply(source, d.fixes[0].edits)
    assert check_source(fixed, "t.kvp").ok
    assert "serving = aggregated" in fixed


def test_aggregated_takes_any_workload() -> None:
    assert check_source(_spec("aggregated", "    batch = 8\n    context = 4k"), "t.kvp").ok
