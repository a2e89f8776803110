"""SLOs on a service (issue 13 item 3, docs/language.md `slo`): itl and rate for a request workload, in their units;
percentile keys and service SLOs on a batch are located errors naming what to write instead."""

from __future__ import annotations

import pytest

from kvplan.lang import check_source
from kvplan.lang import fixes as fx

REQUESTS = "    workload {\n        rate = 10/s\n        input = 4k\n        output = 512\n    }\n"
BATCH = "    workload {\n        batch = 8\n        context = 32k\n    }\n"


def _text(slo: str, workload: str = REQUESTS) -> str:
    return ('kvplan 1\ndeployment "d" {\n    model = llama-3.1-8b\n    device = h100-sxm\n' + workload
            + "    slo {\n" + "".join(f"        {line}\n" for line in slo.split("\n")) + "    }\n}\n")


@pytest.mark.parametrize(("slo", "itl", "rate", "ttft"), [
    ("itl <= 40 ms\nrate >= 20/s\nttft <= 1 s", 0.040, 20.0, 1.0),
    ("itl < 0.05 s\nrate > 1200 req/min", 0.05, 20.0, None),
    ("rate >= 30 /min", None, 0.5, None),
])
def test_itl_and_rate_are_read_in_their_units(slo: str, itl, rate, ttft) -> None:
    r = check_source(_text(slo), "t.kvp")
    assert r.ok, [d.message for d in r.diagnostics]
    (sc,) = r.scenarios
    assert sc.slo_itl == (pytest.approx(itl) if itl else None)
    assert sc.slo_rate == (pytest.approx(rate) if rate else None)
    assert sc.slo_ttft == ttft
    for key in ("itl", "rate"):
        assert (f"slo.{key}" in sc.spans) == (key in slo)


def _one(text: str):
    r = check_source(text, "t.kvp")
    errors = [d for d in r.diagnostics if d.severity.value == "error"]
    assert len(errors) == 1, [(d.code, d.message) for d in r.diagnostics]
    return errors[0]


@pytest.mark.parametrize(("line", "code", "fixed"), [
    ("rate <= 20/s", "KV115", "rate >= 20/s"),          # a lower bound
    ("itl >= 40 ms", "KV115", "itl <= 40 ms"),          # an upper bound
    ("rate >= 500 tok/s", "KV107", "rate >= 500/s"),    # a token rate is another quantity
    ("itl <= 40 GB", "KV106", None),                    # not a time
    ("ttft_p90 <= 1 s", "KV101", "ttft <= 1 s"),        # the model gives means
    ("itl_p99.9 <= 40 ms", "KV101", "itl <= 40 ms"),
])
def test_bad_service_slos_are_located_errors_with_the_fix_to_write(line: str, code: str, fixed) -> None:
    text = _text(line)
    d = _one(text)
    assert d.code == code and d.span is not None and d.span.line == 11
    if fixed is not None:
        after = fx.apply(text, d.fixes[0].edits)
        assert fixed in after and check_source(after, "t.kvp").ok


def test_a_percentile_says_the_model_gives_means_and_names_the_key() -> None:
    d = _one(_text("ttft_p90 <= 1 s"))
    assert "means only" in d.message and "`ttft`" in (d.help or "")


def test_a_percentile_beside_its_mean_is_removed_not_renamed() -> None:
    text = _text("ttft <= 1 s\nttft_p99 <= 2 s")
    d = _one(text)
    after = fx.apply(text, d.fixes[0].edits)
    assert "ttft_p99" not in after and check_source(after, "t.kvp").ok


@pytest.mark.parametrize(("line", "fixed"), [("itl <= 40 ms", "step_time <= 40 ms"), ("rate >= 20/s", None)])
def test_service_slos_on_a_batch_workload_are_located_errors(line: str, fixed) -> None:
    text = _text(line, BATCH)
    d = _one(text)
    assert d.code == "KV101" and "batch at a context" in d.message and d.span is not None and d.span.line == 10
    after = fx.apply(text, d.fixes[0].edits)
    assert check_source(after, "t.kvp").ok
    if fixed is not None:
        assert fixed in after
    else:
        assert "rate" not in after.split("slo {")[1]


def test_step_slos_and_ttft_stay_valid_on_both_forms() -> None:
    for workload in (REQUESTS, BATCH):
        r = check_source(_text("step_time <= 50 ms\nthroughput >= 500 tok/s\nttft <= 2 s", workload), "t.kvp")
        assert r.ok, [d.message for d in r.diagnostics]
