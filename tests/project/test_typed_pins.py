"""Pins are read typed (kvplan.model.scenario.Pins), never converted from a string-keyed value at the reader."""

from __future__ import annotations

import re

from tests.paths import ROOT

#: A pin's value read by key and converted at the reader: what Pins replaced (issue 20).
UNTYPED = re.compile(r"int\(float\([^()]*\.value\)\)|\bdef _pin\(|pins\.get\([^()]*\)\.value|pins\[[^]]*\]\.value")


def test_no_module_converts_a_pin_value_it_read_by_key() -> None:
    found = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
             for f in sorted((ROOT / "kvplan").rglob("*.py"))
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if UNTYPED.search(line)]
    assert found == [], "read pins through Scenario.pinned:\n" + "\n".join(found)


def test_the_pattern_sees_the_old_forms() -> None:
    for line in ('int(float(sc.pins["max_batched_tokens"].value))', "def _pin(sc, key):",
                 'float(sc.pins.get("x").value)', 'str(sc.pins["kv_dtype"].value)'):
        assert UNTYPED.search(line), line
