"""The concurrency form of a workload (`concurrency = 64  input = 1k  output = 1k`, SPEC §13, docs/language.md):
what it lowers to, and the located errors of a workload that mixes it with another form, lacks a length, or has
a request of one output token; each fix kvplan offers checks clean once applied."""

from __future__ import annotations

import pytest

from kvplan.base import codes
from kvplan.lang import check_source
from kvplan.lang.fixes import apply


def _spec(workload: str) -> str:
    return (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n  workload {{\n{workload}\n'
            "  }\n}\n")


def _errors(source: str) -> list:
    return [d for d in check_source(source, "t.kvp").diagnostics if d.severity.value == "error"]


def test_the_concurrency_form_is_clients_and_lengths() -> None:
    r = check_source(_spec("    concurrency = 64\n    input = 1k\n    output = 1k"), "t.kvp")
    assert r.ok
    (sc,) = r.scenarios
    assert (sc.concurrency, sc.rate, sc.input_tokens, sc.output_tokens) == (64, None, 1000, 1000)
    assert sc.requests
    # the plan fits every running sequence at its last token: the context is input + output
    assert sc.context == 2000 and sc.max_context == 2000


def test_uniform_lengths_and_lists_of_clients() -> None:
    r = check_source(_spec("concurrency = [1, 8]\ninput = uniform(512, 1536)\noutput = 1k"), "t.kvp")
    assert r.ok
    assert [(s.name, s.concurrency, s.input_min, s.input_tokens) for s in r.scenarios] == [
        ("d[concurrency=1]", 1, 512, 1536), ("d[concurrency=8]", 8, 512, 1536)]


@pytest.mark.parametrize("extra, key, line", [("rate = 2/s", "rate", 9), ("batch = 8", "batch", 9),
                                               ("context = 4k", "context", 9)])
def test_a_key_of_another_form_is_located_and_its_fix_removes_it(extra: str, key: str, line: int) -> None:
    source = _spec(f"concurrency = 64\ninput = 1k\noutput = 1k\n{extra}")
    (d,) = _errors(source)
    assert (d.code, d.span.line, d.span.column) == (codes.UNKNOWN_KEY, line, 1)
    assert f"`{key}` belongs to the" in d.message and "concurrency/input/output" in d.message
    assert d.fixes
    fixed = apply(source, d.fixes[0].edits)
    assert check_source(fixed, "t.kvp").ok


def test_concurrency_after_a_rate_is_the_key_reported() -> None:
    (d,) = _errors(_spec("rate = 2/s\ninput = 1k\noutput = 1k\nconcurrency = 8"))
    assert (d.span.line, d.span.column) == (9, 1)
    assert "`concurrency` belongs to the concurrency/input/output form" in d.message
    assert "rate/input/output" in d.message


@pytest.mark.parametrize("missing", ["input", "output"])
def test_a_missing_length_is_reported_with_a_fix_that_checks_clean(missing: str) -> None:
    keys = {"input": "input = 1k", "output": "output = 1k"}
    source = _spec("concurrency = 64\n" + "\n".join(v for k, v in keys.items() if k != missing))
    (d,) = _errors(source)
    assert d.code == codes.MISSING_KEY and f"workload has no {missing}" in d.message
    assert (d.span.line, d.span.column) == (5, 3)
    assert check_source(apply(source, d.fixes[0].edits), "t.kvp").ok


@pytest.mark.parametrize("output, col", [("1", 1), ("uniform(1, 64)", 10)])
def test_a_request_of_one_output_token_has_no_tpot(output: str, col: int) -> None:
    source = _spec(f"concurrency = 64\ninput = 1k\noutput = {output}")
    (d,) = _errors(source)
    assert d.code == codes.OUT_OF_RANGE and (d.span.line, d.span.column) == (8, col)
    assert "no TPOT" in d.message and "at least 2 tokens" in (d.help or "")
    right = d.help.split("`")[1]  # the help names the line to write: it checks clean
    assert check_source(source.replace(f"output = {output}", right), "t.kvp").ok


@pytest.mark.parametrize("written, words", [("0", "between 1 and 1,048,576"), ("2.5", "whole"),
                                            ("2000000", "between 1 and 1,048,576")])
def test_a_count_of_clients_out_of_range_is_located(written: str, words: str) -> None:
    (d,) = _errors(_spec(f"concurrency = {written}\ninput = 1k\noutput = 1k"))
    assert (d.span.line, d.span.column) == (6, 15) and words in (d.message + " " + (d.help or "")).lower()
