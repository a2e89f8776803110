"""The request form of a workload (`rate = 20/s  input = 4k  output = 512`, docs/language.md, docs/service.md):
what it means, and the located errors of a rate without a request unit, a missing key and a workload that mixes
the two forms."""

from __future__ import annotations

import math

import pytest

from kvplan.base import codes
from kvplan.lang import check_source
from kvplan.lang.fmt import format_source


def _spec(workload: str) -> str:
    return (f'kvplan 1\ndeployment "d" {{\n  model = llama-3.1-8b\n  device = h100-sxm\n  workload {{\n{workload}\n'
            "  }\n}\n")


def _diags(workload: str) -> list[tuple[str, int, int, str]]:
    r = check_source(_spec(workload), "t.kvp")
    return [(d.code, d.span.line, d.span.column, d.message) for d in r.diagnostics if d.severity.value == "error"]


def test_the_request_form_is_a_rate_per_second_and_fixed_lengths() -> None:
    r = check_source(_spec("    rate = 20/s\n    input = 4k\n    output = 512"), "t.kvp")
    assert r.ok
    (sc,) = r.scenarios
    assert (sc.rate, sc.input_tokens, sc.output_tokens) == (20.0, 4000, 512)
    # the mean context of a generating sequence is the scenario's context; its last token is the bound
    assert sc.context == 4000 + 256 and sc.max_context == 4512
    assert sc.batch == 1  # a starting point: the planner derives the batch from the rate


@pytest.mark.parametrize("written, per_second", [("20/s", 20.0), ("20 /s", 20.0), ("1.5 req/s", 1.5),
                                                 ("600/min", 10.0), ("90 req/min", 1.5)])
def test_a_rate_is_requests_per_time_in_any_of_its_units(written: str, per_second: float) -> None:
    r = check_source(_spec(f"rate = {written}\ninput = 1k\noutput = 100"), "t.kvp")
    assert r.ok and r.scenarios[0].rate == pytest.approx(per_second)


def test_the_batch_form_has_no_rate() -> None:
    r = check_source(_spec("batch = 8\ncontext = 4k"), "t.kvp")
    (sc,) = r.scenarios
    assert (sc.rate, sc.input_tokens, sc.output_tokens, sc.max_context) == (None, None, None, None)


def test_a_list_of_rates_expands_into_scenarios() -> None:
    r = check_source(_spec("rate = [1/s, 5/s]\ninput = 2k\noutput = [128, 512]"), "t.kvp")
    assert [(s.name, s.rate, s.output_tokens) for s in r.scenarios] == [
        ("d[rate=1/s,output=128]", 1.0, 128), ("d[rate=1/s,output=512]", 1.0, 512),
        ("d[rate=5/s,output=128]", 5.0, 128), ("d[rate=5/s,output=512]", 5.0, 512)]


def test_mixing_the_two_forms_names_the_key_of_the_other_form_and_removes_it() -> None:
    r = check_source(_spec("rate = 20/s\ninput = 4k\noutput = 512\nbatch = 32"), "t.kvp")
    (d,) = [d for d in r.diagnostics if d.severity.value == "error"]
    assert (d.code, d.span.line, d.span.column) == (codes.UNKNOWN_KEY, 9, 1)
    assert "`batch` belongs to the batch/context form" in d.message and "rate/input/output" in d.message
    assert d.fixes and not r.scenarios


def test_mixing_the_forms_reports_the_later_form_whichever_comes_first() -> None:
    got = _diags("batch = 32\ncontext = 4k\nrate = 2/s")
    assert [(c, line) for c, line, _, _ in got] == [(codes.UNKNOWN_KEY, 8)]
    assert "`rate` belongs to the rate/input/output form" in got[0][3]


@pytest.mark.parametrize("rate, code, col, words", [
    ("20 tok/s", codes.UNKNOWN_UNIT, 11, "got `tok/s`, a token rate"),
    ("20", codes.WRONG_DIMENSION, 8, "got a plain number"),
    ("20 GB", codes.UNKNOWN_UNIT, 11, "got `GB`"),
])
def test_a_rate_without_a_request_unit_is_a_located_error_with_the_fix(rate: str, code: str, col: int,
                                                                        words: str) -> None:
    r = check_source(_spec(f"rate = {rate}\ninput = 4k\noutput = 512"), "t.kvp")
    (d,) = [d for d in r.diagnostics if d.severity.value == "error"]
    assert (d.code, d.span.line, d.span.column) == (code, 6, col)
    assert words in d.message and "rate = 20/s" in (d.help or "")
    assert d.fixes[0].edits[0].text == "20/s"


def test_a_request_workload_needs_all_three_keys() -> None:
    got = _diags("rate = 20/s\ninput = 4k")
    assert [(c, m) for c, _, _, m in got] == [(codes.MISSING_KEY, "workload has no output")]


def test_a_prefix_longer_than_the_prompt_and_a_bound_below_the_longest_sequence_are_errors() -> None:
    got = _diags("rate = 2/s\ninput = 1k\noutput = 512\nprefix = 2k\nmax_context = 1200")
    assert [c for c, _, _, _ in got] == [codes.PREFIX_EXCEEDS_CONTEXT, codes.OUT_OF_RANGE]
    assert "1,512 tokens is longer than max_context 1200" in got[1][3]


def test_a_negative_or_zero_rate_is_out_of_range() -> None:
    assert [c for c, _, _, _ in _diags("rate = -1/s\ninput = 1k\noutput = 1")] == [codes.OUT_OF_RANGE]


def test_fmt_keeps_the_request_form() -> None:
    text = _spec("rate=20/s\ninput=4k\noutput=512")
    out = format_source(text, "t.kvp")
    assert "rate   = 20/s\n" in out and "input  = 4k\n" in out and "output = 512\n" in out
    assert format_source(out, "t.kvp") == out
    assert check_source(out, "t.kvp").scenarios[0].rate == 20.0


def test_uniform_lengths_lower_to_their_bounds_and_the_token_weighted_mean_context() -> None:
    r = check_source(_spec("    rate = 5/s\n    input = uniform(2k, 6k)\n    output = uniform(256, 768)"), "t.kvp")
    assert r.ok, r.diagnostics
    (sc,) = r.scenarios
    assert (sc.input_min, sc.input_tokens, sc.output_min, sc.output_tokens) == (2000, 6000, 256, 768)
    assert sc.inputs is not None and sc.inputs.mean == 4000.0 and sc.outputs is not None and sc.outputs.mean == 512.0
    assert sc.max_context == 6768  # the longest input + the longest output
    outs = range(256, 769)
    assert sc.context == math.ceil(4000 + sum(n * (n - 1) for n in outs) / (2 * sum(n - 1 for n in outs)))


def test_a_fixed_length_has_no_minimum() -> None:
    (sc,) = check_source(_spec("rate = 5/s\ninput = 4k\noutput = 512"), "t.kvp").scenarios
    assert (sc.input_min, sc.output_min) == (None, None)


def test_fmt_writes_a_uniform_length_canonically_and_round_trips() -> None:
    src = _spec("    rate = 5/s\n    input = uniform( 2k,6k )\n    output = uniform(256 ,768)")
    once = format_source(src, "t.kvp")
    assert "input  = uniform(2k, 6k)" in once and "output = uniform(256, 768)" in once
    assert format_source(once, "t.kvp") == once
    (a,), (b,) = check_source(once, "t.kvp").scenarios, check_source(src, "t.kvp").scenarios
    assert (a.input_min, a.input_tokens, a.output_min, a.output_tokens) == (b.input_min, b.input_tokens,
                                                                            b.output_min, b.output_tokens)


def test_a_prefix_longer_than_the_shortest_input_is_an_error() -> None:
    got = _diags("rate = 5/s\ninput = uniform(1k, 6k)\noutput = 512\nprefix = 2k")
    assert [(c, line) for c, line, _, _ in got] == [(codes.PREFIX_EXCEEDS_CONTEXT, 9)]
    assert "longer than the shortest input uniform(1k,6k)" in got[0][3]


def test_a_distribution_in_a_list_is_a_located_syntax_error() -> None:
    r = check_source(_spec("rate = 5/s\ninput = [uniform(1k, 2k)]\noutput = 512"), "t.kvp")
    (d,) = [d for d in r.diagnostics if d.severity.value == "error"]
    assert (d.span.line, d.span.column) == (7, 17) and not r.scenarios
