"""kvplan.base.controls: the characters refused in a spec's strings and escaped in every emitted file."""

from __future__ import annotations

import json
import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from kvplan.base import controls

#: Every character the module must catch, listed from the Unicode categories it stands for rather than its table.
EXPECTED = {chr(n) for n in range(0x110000)
            if unicodedata.category(chr(n)) == "Cc"                                   # C0, DEL, C1
            or chr(n) in "\u2028\u2029"                                                # Zl, Zp
            or unicodedata.bidirectional(chr(n)) in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")
            or chr(n) in "\u200e\u200f\u061c"                                          # the three marks
            or (n & 0xFFFF) >= 0xFFFE and n <= 0xFFFF}                               # BMP noncharacters

TEXT = st.text(st.one_of(st.sampled_from(sorted(EXPECTED)), st.characters()), max_size=40)


def test_the_class_is_every_control_separator_and_bidirectional_formatting_character() -> None:
    found = {chr(n) for n in range(0x110000) if re.fullmatch(controls.CONTROL, chr(n))}
    assert found == EXPECTED


@given(TEXT)
def test_a_literal_is_one_plain_line_that_reads_back(text: str) -> None:
    lit = controls.literal(text)
    assert controls.first(lit) is None and lit.isprintable() and len(lit.splitlines()) <= 1
    assert (json.loads(lit) if lit != text else lit) == text
    assert (lit == text) == controls.plain(text)


@given(TEXT)
def test_escaped_and_dumps_leave_none_and_read_back(text: str) -> None:
    assert controls.first(controls.escaped(text)) is None
    unquoted = text.replace('"', "").replace("\\", "")  # what a JSON string holds as it is
    assert json.loads(f'"{controls.escaped(unquoted)}"') == unquoted
    dumped = controls.dumps({"k": text}, indent=2)
    assert json.loads(dumped) == {"k": text}
    assert all(controls.first(line) is None for line in dumped.split("\n"))


@given(TEXT)
def test_visible_keeps_one_character_for_one(text: str) -> None:
    shown = controls.visible(text)
    assert len(shown) == len(text)
    assert controls.first(shown.replace("\t", " ")) is None
    assert controls.count(text) == sum(1 for a, b in zip(text, shown) if a != b) + text.count("\t")


def test_describe_names_a_character_without_printing_it() -> None:
    assert controls.describe("\r") == "U+000D (carriage return)"
    assert controls.describe("\u202e") == "U+202E (right-to-left override)"
    assert controls.describe("\x81") == "U+0081 (C1 control)"
