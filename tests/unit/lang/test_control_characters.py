"""KV019: no string of a spec holds a control, line-separator or bidirectional-formatting character.

A name, an id or a path ends up in the files `kvplan emit` writes (tests/unit/app/test_injection.py), and
`kvplan lint` showed a carriage return as a space. Each character class is refused in each kind of string, written
as it is or after a backslash, at the line and column of the character, without printing it; the fix (the string
without it) leaves the file as the same spec written without it would be.
"""

from __future__ import annotations

import pytest

from kvplan.base.diagnostics import Diagnostic
from kvplan.lang import check_source
from kvplan.lang.fixes import apply

#: One of each class: C0 (NUL, SOH, tab, vertical tab, form feed, carriage return, escape, US), DEL, C1 (PAD, NEL,
#: APC), the Arabic letter mark, LRM, RLM, the line and paragraph separators, the embeddings and overrides
#: (LRE, RLO, PDF) and the isolates (LRI, PDI).
CHARACTERS = ["\x00", "\x01", "\t", "\x0b", "\x0c", "\r", "\x1b", "\x1f", "\x7f", "\x80", "\x85", "\x9f", "\u061c",
              "\u200e", "\u200f", "\u2028", "\u2029", "\u202a", "\u202e", "\u202c", "\u2066", "\u2069",
              "\ufffe", "\uffff"]

#: A spec with a marker `@` in each kind of string: a deployment name, a model id, a model block's name and its
#: config path, a device block's name. Each test puts the hostile text at one marker, the others stay plain.
TEMPLATE = """kvplan 1

deployment "chat{0}" {{
    model  = "meta-llama/Llama-3.1-8B-Instruct{1}"
    device = h100-sxm

    workload {{
        batch   = 8
        context = 8k
    }}
}}

model "mine{2}" {{
    config = "models/mine{3}/config.json"
}}

device "gpu{4}" {{
    memory = 80 GB
}}
"""
PLACES = ("deployment name", "model id", "model block name", "config path", "device block name")


def _spec(place: int, text: str) -> str:
    return TEMPLATE.format(*(text if i == place else "" for i in range(len(PLACES))))


def _kv019(diagnostics: tuple[Diagnostic, ...]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == "KV019"]


@pytest.mark.parametrize("escaped", [False, True], ids=["as-is", "after-backslash"])
@pytest.mark.parametrize("place", range(len(PLACES)), ids=PLACES)
@pytest.mark.parametrize("ch", CHARACTERS, ids=[f"U+{ord(c):04X}" for c in CHARACTERS])
def test_a_control_character_in_any_string_is_located_and_fixed(ch: str, place: int, escaped: bool) -> None:
    hostile = ("\\" if escaped else "") + ch
    text = _spec(place, "a" + hostile + "b")
    result = check_source(text, "s.kvp")
    (diag,) = result.diagnostics  # the string refuses the file: nothing past it is checked
    assert diag.code == "KV019" and diag.severity.value == "error"
    offset = text.index(ch)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    assert diag.span is not None and (diag.span.file, diag.span.line, diag.span.column) == ("s.kvp", line, column)
    assert f"U+{ord(ch):04X}" in diag.message
    assert ch not in diag.message and ch not in (diag.help or "")
    assert not result.scenarios
    (fix,) = diag.fixes
    fixed = apply(text, fix.edits)
    assert fixed == _spec(place, "ab")  # the character gone with the backslash that escaped it, nothing else
    assert check_source(fixed, "s.kvp").diagnostics == check_source(_spec(place, "ab"), "s.kvp").diagnostics


def test_every_offending_character_of_a_string_is_counted_and_removed_by_one_fix() -> None:
    text = _spec(0, "\r\r---\rkind: Pod")
    (diag,) = check_source(text, "s.kvp").diagnostics
    assert diag.code == "KV019" and (diag.span.line, diag.span.column) == (3, 17)  # type: ignore[union-attr]
    assert diag.message.startswith("this string holds U+000D (carriage return) and 2 more: ")
    assert diag.help == 'remove them: write "chat---kind: Pod"'
    assert apply(text, diag.fixes[0].edits) == _spec(0, "---kind: Pod")


def test_each_declaration_reports_its_own_string() -> None:
    # one error per declaration: the syntax stage goes on with the next declaration (kvplan.lang.syntax.parse_all)
    text = _spec(0, "\u202e") .replace('device "gpu"', 'device "gpu\u2066"')
    found = _kv019(check_source(text, "s.kvp").diagnostics)
    assert [(d.span.line, d.span.column) for d in found] == [(3, 17), (17, 12)]  # type: ignore[union-attr]


def test_a_line_feed_ends_the_string_unclosed_at_its_quote() -> None:
    # a string cannot span lines: the grammar reads the line feed as the end of an unclosed string (KV005)
    text = _spec(0, "\ntouch PWNED\n#")
    (diag,) = check_source(text, "s.kvp").diagnostics
    assert diag.code == "KV005" and (diag.span.line, diag.span.column) == (3, 12)  # type: ignore[union-attr]


def test_plain_text_beyond_ascii_is_no_finding() -> None:
    # printable non-ASCII (accents, CJK, an emoji with a zero-width joiner) is not refused
    text = _spec(0, "-Чат-日本-é-👩\u200d💻")
    assert not _kv019(check_source(text, "s.kvp").diagnostics)


def test_syntax_errors_name_a_string_with_control_characters_escaped() -> None:
    text = 'kvplan 1\n\ndeployment "d" {\n    "x\ry"\n}\n'
    (diag,) = check_source(text, "s.kvp").diagnostics
    assert "\r" not in diag.message and "\\u000d" in diag.message
