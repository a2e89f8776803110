"""The .kvp front end: meaning of the reference example, defaults, expansion, spans, every diagnostic, goldens."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan import catalog
from kvplan.base import codes
from kvplan.base.codes import CODES
from kvplan.base.diagnostics import Diagnostic
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Evidence
from kvplan.lang import MAX_FILE_CHARS, CheckResult, Choice, check_file, check_source, parse
from kvplan.lang.spec import Entry, Quantity, WorkloadDecl
from kvplan.lang.syntax import KvpSyntaxError
from tests.paths import DATA, ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.kvp"))
VALID = sorted((DATA / "valid").glob("*.kvp"))
INVALID = sorted((DATA / "invalid").glob("*.kvp"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # spans name files relative to the repository, as a user's CI would


def _ok(text: str, path: str = "t.kvp") -> CheckResult:
    r = check_source(text, path)
    assert r.ok, [f"{d.code} {d.message}" for d in r.diagnostics]
    return r


def _codes(text: str) -> list[str]:
    return [d.code for d in check_source(text, "t.kvp").diagnostics]


def _deployment(body: str, workload: str = "batch = 32\ncontext = 128k") -> str:
    return f'deployment "d" {{\nmodel = llama-3-70b\ndevice = b200\n{body}\nworkload {{\n{workload}\n}}\n}}\n'


# --------------------------------------------------------------- the reference example

def test_reference_example_has_the_meaning_language_md_states() -> None:
    r = check_file("examples/language-reference.kvp")
    assert r.ok and r.file is not None
    (s,) = r.scenarios
    assert (s.deployment, s.name) == ("chat-70b", "chat-70b")
    assert s.model == catalog.get_model("llama-3-70b") and s.device == catalog.get_device("b200")
    assert s.weights == catalog.dtype("bf16")
    assert (s.devices.mode, s.devices.n) == ("auto", 64)
    assert (s.placement, s.engine, s.objective) == ("auto", "vllm", "fewest-devices")
    assert (s.batch, s.context, s.prefix, s.fanout) == (32, 128_000, 96_000, 8)
    assert s.reuse == pytest.approx(0.6)
    assert (s.budget, s.eviction_allowed, s.min_retention) == ("near-lossless", True, 0.5)
    assert s.slo_step_time == pytest.approx(0.050) and s.slo_throughput == pytest.approx(500.0)
    assert {k: p.value for k, p in s.pins.items()} == {"kv_dtype": "fp8", "block_size": 16.0, "prefix_caching": True}
    assert [(e.metric, e.op, e.value) for e in s.expects] == [
        ("regime", "==", "kv-bound"), ("fits", "is", True), ("speedup", ">=", 1.5)]
    # Everything the example states is written, so nothing was assumed.
    assert s.assumptions == ()
    # The side blocks lower too: the model from its config.json, the device from its numbers.
    assert [m.name for m in r.file.models] == ["my-7b"] and [d.name for d in r.file.devices] == ["my-gpu"]


def test_reference_example_spans_point_at_what_was_written() -> None:
    r = check_file("examples/language-reference.kvp")
    lines = r.source.split("\n")
    s = r.scenarios[0]
    for key, span in s.spans.items():
        assert span.file == "examples/language-reference.kvp"
        text = lines[span.line - 1][span.column - 1:span.end_column - 1]
        leaf = key.split(".")[-1]
        assert text.startswith(leaf if key != "deployment" else '"chat-70b"'), (key, text)
    for e in s.expects:
        assert lines[e.span.line - 1][e.span.column - 1:].startswith(e.metric)


# ---------------------------------------------------------------------- units and values

@pytest.mark.parametrize("glued, spaced", [("128k", "128 k"), ("96Ki", "96 Ki"), ("1.5e3", "1.5e3 tokens")])
def test_glued_and_spaced_units_mean_the_same(glued: str, spaced: str) -> None:
    a = _ok(_deployment("", f"batch = 1\ncontext = {glued}")).scenarios[0]
    b = _ok(_deployment("", f"batch = 1\ncontext = {spaced}")).scenarios[0]
    assert a.context == b.context


def test_units_convert_to_base_units() -> None:
    r = _ok((DATA / "valid" / "units-glued-and-spaced.kvp").read_text(encoding="utf-8"), "tests/data/valid/u.kvp")
    glued, spaced = r.scenarios
    assert glued.context == spaced.context == 128 * 1024
    assert glued.prefix == spaced.prefix == 1500 and glued.batch == spaced.batch == 16
    assert glued.reuse == spaced.reuse == 0.25
    assert glued.slo_step_time == pytest.approx(spaced.slo_step_time) == pytest.approx(0.040)
    assert glued.slo_throughput == pytest.approx(spaced.slo_throughput) == pytest.approx(1200)
    d = glued.device
    assert (d.memory, d.bandwidth, d.compute, d.compute_fp8) == (141e9, 4.8e12, 989e12, pytest.approx(1.979e15))
    assert (d.partitions, d.fabric, d.sm_count, d.host_link, d.scaleup_link) == (2, 10e12, 132, "pcie5-x16", "nvlink4")
    assert (glued.devices.mode, glued.devices.n, spaced.devices.mode, spaced.devices.n) == ("max", 8, "fixed", 2)
    kv = {e.metric: e.value for e in glued.expects}
    assert kv == {"kv_bytes": 40e9, "step_time": 0.5, "devices": 4.0, "speedup": 1.1}


def test_context_in_bytes_names_key_dimension_and_unit() -> None:
    (d,) = check_source(_deployment("", "batch = 1\ncontext = 40 GB"), "t.kvp").diagnostics
    assert (d.code, d.message) == (codes.WRONG_DIMENSION, "context takes tokens, got bytes")


def test_model_params_in_billions() -> None:
    text = 'model "m" {\nconfig = "models/tiny/config.json"\nparams = 70B\n}\n' + _deployment(
        "", "batch = 32\ncontext = 4096").replace("llama-3-70b", "m")
    s = _ok(text, "examples/x.kvp").scenarios[0]
    assert s.model.id == "m" and s.model.params == 70e9 and s.model.params_active == 70e9


# ------------------------------------------------------------------------------- defaults

DEFAULTS = {  # what LANGUAGE.md (or docs/language.md where it is silent) says an absent key means
    "weights": "bf16", "devices": 64.0, "placement": "auto", "engine": "any", "objective": "fewest-devices",
    "quality.budget": "lossless", "quality.eviction": "forbidden", "quality.min_retention": 0.5,
    "workload.prefix": 0.0, "workload.fanout": 1.0, "workload.reuse": 0.0,
}


def test_every_default_is_applied_and_recorded_as_assumed() -> None:
    s = _ok(_deployment("")).scenarios[0]
    assert (s.weights.id, s.devices, s.placement, s.engine, s.objective) == (
        "bf16", s.devices.__class__("auto", 64), "auto", "any", "fewest-devices")
    assert (s.budget, s.eviction_allowed, s.min_retention, s.prefix, s.fanout, s.reuse) == (
        "lossless", False, 0.5, 0, 1, 0.0)
    assert s.slo_step_time is None and s.slo_throughput is None and not s.pins and not s.expects
    recorded = {}
    for v in s.assumptions:
        assert v.evidence is Evidence.ASSUMED
        m = re.match(r"default: ([\w.]+) = ", v.source)
        assert m, v.source
        recorded[m.group(1)] = v.value
    assert recorded == DEFAULTS
    assert all(isinstance(v, Choice) == isinstance(v.value, str) for v in s.assumptions)
    assert {v.to_json()["value"] for v in s.assumptions if isinstance(v, Choice)} >= {"lossless", "any"}


def test_a_written_key_is_not_assumed() -> None:
    s = _ok(_deployment("engine = sglang\nweights = fp8")).scenarios[0]
    sources = " ".join(v.source for v in s.assumptions)
    assert "engine" not in sources and "weights" not in sources and s.engine == "sglang"


def test_aggressive_budget_admits_eviction_unless_forbidden() -> None:
    q = "quality {{\nbudget = aggressive\n{}\n}}"
    assert _ok(_deployment(q.format(""))).scenarios[0].eviction_allowed is True
    assert _ok(_deployment(q.format("eviction = forbidden"))).scenarios[0].eviction_allowed is False


# ---------------------------------------------------------------------------- expansion

def test_workload_lists_expand_into_every_combination() -> None:
    r = _ok(_deployment("", "batch = [1, 8, 32]\ncontext = [32k, 128k]\nreuse = [0, 50%]"))
    assert len(r.scenarios) == 3 * 2 * 2
    combos = {(s.batch, s.context, s.reuse) for s in r.scenarios}
    assert combos == {(b, c, u) for b in (1, 8, 32) for c in (32_000, 128_000) for u in (0.0, 0.5)}
    assert r.scenarios[0].name == "d[batch=1,context=32k,reuse=0]"
    assert len({s.name for s in r.scenarios}) == 12
    # Each scenario's span points at its own list element.
    for s in r.scenarios:
        span = s.spans["workload.batch"]
        assert r.source.split("\n")[span.line - 1][span.column - 1:span.end_column - 1] == str(s.batch)


def test_prefix_longer_than_one_context_of_a_list_is_reported_once() -> None:
    r = check_source(_deployment("", "batch = [1, 8]\ncontext = [32k, 128k]\nprefix = 96k"), "t.kvp")
    assert [d.code for d in r.diagnostics] == [codes.PREFIX_EXCEEDS_CONTEXT] and r.scenarios == ()


# ------------------------------------------------------------------- many problems, one pass

def test_every_problem_is_collected() -> None:
    text = _deployment("engine = vlm\nplacement = stripped\nmistake = 1", "batch = 0\ncontext = 40 GB\nreuse = 2")
    assert _codes(text) == [codes.UNKNOWN_VALUE, codes.UNKNOWN_VALUE, codes.UNKNOWN_KEY, codes.OUT_OF_RANGE,
                            codes.WRONG_DIMENSION, codes.OUT_OF_RANGE]


def test_a_deployment_with_an_error_yields_no_scenario_but_the_others_do() -> None:
    good = _deployment("")
    bad = _deployment("").replace('"d"', '"e"').replace("batch = 32", "batch = -1")
    r = check_source(good + bad, "t.kvp")
    assert [s.deployment for s in r.scenarios] == ["d"] and [d.code for d in r.diagnostics] == [codes.OUT_OF_RANGE]


def test_suggestions_name_the_nearest_choice() -> None:
    r = check_source(_deployment("quality {\nbudget = lossles\n}"), "t.kvp")
    assert [d.help for d in r.diagnostics] == ["did you mean `lossless`?"]
    r = check_source(_deployment("").replace("b200", "b20"), "t.kvp")
    assert r.diagnostics[0].code == codes.UNKNOWN_DEVICE and "`b200`" in (r.diagnostics[0].help or "")


def test_a_local_block_resolves_before_the_catalog() -> None:
    text = 'device "b200" {\nmemory = 1 GB\nbandwidth = 1 TB/s\ncompute = 1 TFLOPS\n}\n' + _deployment("")
    s = _ok(text).scenarios[0]
    assert s.device.memory == 1e9
    assert any(v.source.startswith('device "b200": partitions = 1') for v in s.assumptions)


# -------------------------------------------------------------------------------- syntax

def test_parse_raises_a_kvplan_error_with_a_span() -> None:
    with pytest.raises(KvplanError) as info:
        parse('deployment "d" {\n  batch 32\n}\n', "t.kvp")
    assert isinstance(info.value, KvpSyntaxError) and info.value.code == codes.MISSING_EQUALS
    assert info.value.span == Span("t.kvp", 2, 9, 2, 11)


def test_an_error_raised_while_building_the_tree_is_not_wrapped() -> None:
    with pytest.raises(KvpSyntaxError) as info:  # raised inside the Transformer: lark wraps it in VisitError
        parse('deploy "d" {\n}\n', "t.kvp")
    assert info.value.code == codes.UNKNOWN_DECLARATION and info.value.help == "did you mean `deployment`?"


def test_messages_name_terminals_as_written() -> None:
    (d,) = check_source('deployment "d"\n{\n}\n', "t.kvp").diagnostics
    assert d.message == "expected `{`, found end of line"
    for d in (check_source(p.read_text(encoding="utf-8"), "t.kvp").diagnostics[0] for p in INVALID
              if p.name != "not-utf8.kvp"):
        assert not re.search(r"\b(RBRACE|LBRACE|LSQB|RSQB|_NL|\$END|NAME|NUMBER|STRING|EQUAL)\b", d.message)


def test_recovery_reports_errors_of_separate_declarations() -> None:
    text = ('deployment "a" {\n  batch 1\n}\n'
            'deployment "b" {\n  model: x\n}\n'
            'deployment "c" {\n}\n')
    r = check_source(text, "t.kvp")
    assert [(d.code, d.span.line if d.span else 0) for d in r.diagnostics] == [
        (codes.MISSING_EQUALS, 2), (codes.MISSING_EQUALS, 5)]
    assert r.file is None and r.scenarios == ()


def test_no_recovery_without_a_next_declaration() -> None:
    r = check_source('deployment "a" {\n  batch 1\n  model: x\n}\n', "t.kvp")
    assert [d.code for d in r.diagnostics] == [codes.MISSING_EQUALS]


def test_columns_count_unicode_characters() -> None:
    text = 'deployment "café" { model = x\n}\n'
    spec = parse(text, "t.kvp")
    (entry,) = spec.declarations[0].entries
    assert entry.key_span.column == text.index("model") + 1 == 21  # é is one column
    assert spec.declarations[0].name_span == Span("t.kvp", 1, 12, 1, 18)


def test_comments_are_kept_with_their_lines() -> None:
    spec = parse('# one\ndeployment "d" { # two\n  model = x  # three\n}\n# four', "t.kvp")
    assert [(c.text, c.span.line, c.span.column) for c in spec.comments] == [
        ("# one", 1, 1), ("# two", 2, 18), ("# three", 3, 14), ("# four", 5, 1)]
    assert check_source('# one\n', "t.kvp").comments[0].text == "# one"


def test_tree_keeps_unknown_items_in_source_order() -> None:
    spec = parse('deployment "d" {\n  zeta = 1\n  workload {\n    batch = 2\n  }\n  alpha = "x"\n}\n', "t.kvp")
    (dep,) = spec.deployments
    assert [type(i).__name__ for i in dep.items] == ["Entry", "WorkloadDecl", "Entry"]
    assert isinstance(dep.workload, WorkloadDecl) and dep.workload.entries[0].key == "batch"
    q = dep.workload.entries[0].value
    assert isinstance(q, Quantity) and (q.number, q.unit, q.text) == (2.0, "", "2")


# ----------------------------------------------------------------------- files on disk

def test_unreadable_file_is_a_diagnostic(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.kvp", tmp_path):
        r = check_file(str(path))
        assert [d.code for d in r.diagnostics] == [codes.UNREADABLE_FILE] and r.file is None


def test_bad_utf8_points_at_the_byte() -> None:
    r = check_file("tests/data/invalid/not-utf8.kvp")
    (d,) = r.diagnostics
    raw = (DATA / "invalid" / "not-utf8.kvp").read_bytes()
    line = raw[:raw.index(b"\xe9")].count(b"\n") + 1
    col = len(raw[:raw.index(b"\xe9")].split(b"\n")[-1]) + 1
    assert (d.code, d.span.line if d.span else 0, d.span.column if d.span else 0) == (codes.NOT_UTF8, line, col)


def test_a_huge_file_is_refused_quickly() -> None:
    text = "# " + "x" * (10 * 1024 * 1024) + "\n"
    (d,) = check_source(text, "big.kvp").diagnostics
    assert d.code == codes.FILE_TOO_LARGE and f"{MAX_FILE_CHARS:,}" in d.message


def test_invalid_goldens_cover_many_distinct_mistakes() -> None:
    assert len(INVALID) >= 25
    seen = {check_file(_rel(p)).diagnostics[0].code for p in INVALID}
    assert len(seen) >= 25  # distinct codes, not 25 files of one mistake


# ------------------------------------------------------------------- robustness (hypothesis)

_SEEDS = [p.read_text(encoding="utf-8") for p in EXAMPLES + VALID]
_TOKEN = re.compile(r'"[^"\n]*"|#[^\n]*|\s+|[A-Za-z][\w.\-]*|\d[\w.%/]*|.', re.S)


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    tokens = _TOKEN.findall(draw(st.sampled_from(_SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(tokens) - 1))
        op = draw(st.sampled_from(["delete", "double", "swap", "text", "bytes", "long", "nest"]))
        if op == "delete":
            del tokens[i]
        elif op == "double":
            tokens.insert(i, tokens[i])
        elif op == "swap" and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif op == "text":
            tokens.insert(i, draw(st.text(max_size=12)))
        elif op == "bytes":
            tokens.insert(i, draw(st.binary(max_size=12)).decode("latin-1"))
        elif op == "long":
            tokens.insert(i, "x" * draw(st.integers(1000, 50_000)))
        elif op == "nest":
            n = draw(st.integers(1, 400))
            tokens.insert(i, "a {\n" * n + "}\n" * draw(st.integers(0, n)))
        if not tokens:
            tokens = [""]
    return "".join(tokens)


def _law(r: CheckResult, text: str) -> None:
    assert isinstance(r, CheckResult)
    errors = [d for d in r.diagnostics if d.severity.value == "error"]
    assert r.ok == (not errors)
    if r.file is None:
        assert errors, "a file that did not parse must say why"
    if r.ok:
        assert len(r.scenarios) >= len(r.file.deployments if r.file else ())
    lines = text.split("\n")
    for d in r.diagnostics:
        assert isinstance(d, Diagnostic) and d.code in CODES and d.message
        assert d.span is not None and d.span.file == "fuzz.kvp"
        assert 1 <= d.span.line <= len(lines) and 1 <= d.span.column <= len(lines[d.span.line - 1]) + 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_mutated())
def test_mutated_files_always_give_a_result(text: str) -> None:
    _law(check_source(text, "fuzz.kvp"), text)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_always_gives_a_result(text: str) -> None:
    _law(check_source(text, "fuzz.kvp"), text)


@pytest.mark.slow
def test_deep_nesting_and_a_just_small_enough_file() -> None:
    deep = 'deployment "d" {\n' + "a {\n" * 3000 + "}\n" * 3001
    _law(check_source(deep, "fuzz.kvp"), deep)
    body = "".join(f"  k{i} = {i}k\n" for i in range(MAX_FILE_CHARS // 16))
    big = ('deployment "d" {\n' + body + "}\n")[:MAX_FILE_CHARS]
    _law(check_source(big, "fuzz.kvp"), big)


def test_entry_spans_start_at_their_key() -> None:
    for text in _SEEDS:
        spec = parse(text, "t.kvp")
        lines = text.split("\n")
        for decl in spec.declarations:
            stack: list[Any] = list(decl.items)
            while stack:
                item = stack.pop()
                if isinstance(item, Entry):
                    s = item.span
                    assert lines[s.line - 1][s.column - 1:].startswith(item.key)
                    assert math.isfinite(s.end_column)
                else:
                    stack += item.items
