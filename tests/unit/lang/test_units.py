"""Units never surprise: the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_units.py,
tests/unit/base/test_units.py, tests/unit/app/test_units.py; tests/acceptance/test_units.py says what
they check.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from kvplan.base.units import UNITS, Dim, parse_quantity
from kvplan.lang import check_source
from kvplan.lang.fmt import format_source
from kvplan.lang.spec import Block, Bound, Entry, ListValue, Quantity
from kvplan.lang.syntax import parse
from tests.paths import ROOT


def test_5gib_in_a_spec_suggests_gib_and_the_suggestion_reads_5_gibibytes() -> None:
    text = 'kvplan 1\ndevice "g" {\n    memory = 5GIB\n    bandwidth = 3 TB/s\n    compute = 900 TFLOPS\n}\n'
    (d,) = [d for d in check_source(text, "g.kvp").diagnostics if d.code == "KV107"]
    assert d.help == "did you mean `GiB`?"
    fixed = text.replace("5GIB", "5GiB")
    assert not [d for d in check_source(fixed, "g.kvp").diagnostics if d.code == "KV107"]
    assert parse_quantity("5GiB", Dim.BYTES) == 5 * 2**30


def test_a_count_in_upper_case_k_is_a_case_slip_not_a_wrong_dimension() -> None:
    text = ('kvplan 1\ndeployment "x" {\n    model = llama-3-8b\n    device = h100-sxm\n'
            '    workload {\n        batch = 1K\n        context = 8k\n    }\n}\n')
    (d,) = [d for d in check_source(text, "x.kvp").diagnostics if d.severity.value == "error"]
    assert (d.code, d.help) == ("KV107", "did you mean `k`?")


def test_a_bare_number_for_bytes_says_plain_number_not_tokens() -> None:
    text = 'kvplan 1\ndevice "g" {\n    memory = 80\n    bandwidth = 3 TB/s\n    compute = 900 TFLOPS\n}\n'
    (d,) = [d for d in check_source(text, "g.kvp").diagnostics if d.code == "KV106"]
    assert d.message == "memory takes bytes, got a plain number 80" and "tokens" not in d.message


# ------------------------------------------------------------------ KV125: `K`

def _spec(context: str, prefix: str = "0") -> str:
    return ('kvplan 1\n\ndeployment "chat" {\n    model = llama-3-8b\n    device = h100-sxm\n\n'
            f'    workload {{\n        batch = 1\n        context = {context}\n        prefix = {prefix}\n    }}\n}}\n')


def _kv125(text: str) -> list[Any]:
    return [d for d in check_source(text, "chat.kvp").diagnostics if d.code == "KV125"]


def _apply(text: str, span: Any, replacement: str) -> str:
    """The text with the diagnostic's span (one line) replaced."""
    lines = text.split("\n")
    ln = lines[span.line - 1]
    lines[span.line - 1] = ln[: span.column - 1] + replacement + ln[span.end_column - 1:]
    return "\n".join(lines)


def test_upper_case_k_warns_with_both_readings_and_each_suggestion_clears_it() -> None:
    text = _spec("128K")
    (d,) = _kv125(text)
    assert d.severity.value == "warning"
    assert "128,000" in d.message and "131,072" in d.message and "vLLM" in d.message
    spellings = re.findall(r"`([^`]+)` for ([\d,]+)", d.help or "")
    assert spellings == [("128k", "128,000"), ("128Ki", "131,072")]
    for spelling, tokens in spellings:
        fixed = _apply(text, d.span, spelling)
        result = check_source(fixed, "chat.kvp")
        assert not _kv125(fixed) and not [x for x in result.diagnostics if x.severity.value == "error"]
        (sc,) = result.scenarios
        assert sc.context == int(tokens.replace(",", ""))
    (sc,) = check_source(text, "chat.kvp").scenarios
    assert sc.context == 128_000                          # the warning changes nothing: kvplan still reads 1000


@pytest.mark.parametrize("written", ["1.5K", "2 K"])
def test_k_warning_for_decimals_and_spaced_units_offers_spellings_that_work(written: str) -> None:
    text = _spec("32k", prefix=written)
    (d,) = _kv125(text)
    for spelling, tokens in re.findall(r"`([^`]+)` for ([\d,]+)", d.help or ""):
        fixed = _apply(text, d.span, spelling)
        assert not _kv125(fixed)
        (sc,) = check_source(fixed, "chat.kvp").scenarios
        assert sc.prefix == int(tokens.replace(",", ""))


def test_lower_case_k_ki_and_m_do_not_warn() -> None:
    assert not _kv125(_spec("[128k, 128Ki, 1M, 2Mi, 4096]"))


# ------------------------------------------------------------------ fmt keeps values

def _quantities(text: str) -> list[tuple[str, float, str]]:
    """Every quantity of a file: (text as written, number, unit), in order."""
    def values(items: Any) -> Iterator[Quantity]:
        for item in items:
            if isinstance(item, Block):
                yield from values(item.items)
            elif isinstance(item, Entry) and item.value is not None:
                v = item.value
                for x in (v.items if isinstance(v, ListValue) else (v.limit if isinstance(v, Bound) else v,)):
                    if isinstance(x, Quantity):
                        yield x
    spec = parse(text, "x.kvp")
    return [(q.text.strip(), q.number, q.unit) for d in spec.declarations for q in values(d.items)]


def _every_unit_spelling() -> str:
    """A file holding every unit kvplan knows, glued and spaced, in scalars, lists and bounds."""
    units = sorted({u for table in UNITS.values() for u in table} | {"K", "x", "GIB", "MS"})
    lines = ['kvplan 1', '', 'deployment "u" {', '    every {']
    for i, u in enumerate(units):
        lines += [f"        glued{i} = 32{u}", f"        spaced{i} = 1.5 {u}", f"        listed{i} = [2{u}, 3  {u}]",
                  f"        bounded{i} = <= 4{u}", f"        compared{i} >= 5 {u}"]
    return "\n".join(lines + ["    }", "}", ""])


FMT_CORPUS = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in sorted(ROOT.glob("examples/**/*.kvp"))]
FMT_CORPUS += [("every-unit", _every_unit_spelling())]


@pytest.mark.parametrize("name, text", FMT_CORPUS, ids=[n for n, _ in FMT_CORPUS])
def test_fmt_prints_every_value_exactly_as_written(name: str, text: str) -> None:
    before = _quantities(text)
    assert before
    out = format_source(text, name)
    assert _quantities(out) == before                     # same tokens, same numbers, same units


def test_fmt_keeps_32k_upper_case_glued() -> None:
    out = format_source('deployment "x" {\n    workload {\n        context = 32K\n    }\n}\n', "x.kvp")
    assert "context = 32K\n" in out and "32 K" not in out
