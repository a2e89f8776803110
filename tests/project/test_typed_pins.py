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


#: A pin looked up by a string key (`sc.pins["tier"].span`, `"replicas" in sc.pins`, `pins.get("devices")`): what
#: Pins.has/pin/span replaced, keyed by the settings row (issue 20).
BY_KEY = re.compile(r"""\bpins\s*(\[|\.get\(|\.pop\()\s*f?["']|["'][\w.]*["']\s+(not\s+)?in\s+[\w.]*\bpins\b""")


def test_no_module_looks_a_pin_up_by_a_string_key() -> None:
    found = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
             for f in sorted((ROOT / "kvplan").rglob("*.py"))
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if BY_KEY.search(line)]
    assert found == [], "look pins up by their settings row (Pins.has, .pin, .span):\n" + "\n".join(found)


def test_the_key_pattern_sees_the_old_forms() -> None:
    for line in ('sc.pins["tier"].span', '"replicas" in sc.pins', 'p.scenario.pins.get("devices")',
                 'pins.get("devices")', "if 'kv_dtype' not in self.scenario.pins:", 'r.pins["max_batched_tokens"] = x'):
        assert BY_KEY.search(line), line
    for line in ("sc.pinned.span(settings.pin(\"tier\"))", "pins.get(row.key)", "k in sc.pins"):
        assert not BY_KEY.search(line), line


def test_the_pattern_sees_the_old_forms() -> None:
    for line in ('int(float(sc.pins["max_batched_tokens"].value))', "def _pin(sc, key):",
                 'float(sc.pins.get("x").value)', 'str(sc.pins["kv_dtype"].value)'):
        assert UNTYPED.search(line), line
