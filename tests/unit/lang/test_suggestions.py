"""Every suggestion kvplan prints that names a concrete change works: the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_suggestions.py,
tests/unit/planner/test_suggestions.py; tests/unit/planner/test_suggestions.py says what they check.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from kvplan.base.codes import Severity
from kvplan.lang import check_source
from tests.paths import ROOT


def test_negated_words_never_get_the_choice_they_negate() -> None:
    from kvplan.lang.check import _meaning

    for word in ("not-allowed", "unallowed", "disallowed", "non-allowed"):
        assert _meaning(word, "eviction", ("allowed", "forbidden"), "eviction")[1] in ((), ("forbidden",)), word
    assert _meaning("lossless-ish", "budget", ("lossless", "near-lossless", "moderate", "aggressive"),
                    "budget")[1] != ("moderate",)


def test_opposites_are_never_suggested() -> None:
    from kvplan.lang.check import _meaning

    assert _meaning("lossy", "budget", ("lossless",), "budget")[1] == ()
    assert _meaning("unpinned", "placement", ("striped", "pinned", "affinity"), "placement")[1] != ("pinned",)
    assert _meaning("stripped", "placement", ("striped", "pinned", "affinity"), "placement")[1] == ("striped",)


# ------------------------------------------------------------------ examples in help texts and docs

from kvplan.lang.check import DEPLOYMENT_KEYS, DEVICE_KEYS, MODEL_KEYS, SECTION_KEYS, SERVICE_SLOS  # noqa: E402

TEMPLATE_ITEMS = {"model": "llama-3-8b", "device": "h100"}
TEMPLATE_WORKLOAD = {"batch": "8", "context": "128k"}
#: The workload of an example with a service SLO (itl, rate): requests at a rate (docs/service.md).
TEMPLATE_REQUESTS = {"rate": "10/s", "input": "4k", "output": "512"}
TEMPLATE_DEVICE = {"memory": "80 GB", "bandwidth": "3.35 TB/s", "compute": "989 TFLOPS"}
_SETTING = re.compile(r"^\s*(\w+)\s*(==|<=|>=|=|<|>)\s*((?:<=\s*)?[^=<>\s].*?)\s*(#.*)?$|^\s*(fits)\s*(#.*)?$")
#: Codes an example cannot be held to: a config path is a placeholder for the user's file.
_NOT_THE_EXAMPLE = ("KV119",)


def _place(key: str, op: str) -> str:
    """Where a `key op value` example goes: the deployment, a section, a model or a device block."""
    if op != "=":
        return "slo" if key in SECTION_KEYS["slo"] else "expect"
    if key in DEPLOYMENT_KEYS:
        return "deployment"
    for section in ("workload", "quality", "pin"):
        if key in SECTION_KEYS[section]:
            return section
    if key in DEVICE_KEYS:
        return "device"
    if key in MODEL_KEYS:
        return "model"
    return "deployment"  # an unknown key: let lint say so


def spec_for_example(fragment: str) -> tuple[str, set[int]]:  # noqa: C901  one case per kind of docs example fragment
    """A whole spec around an example, and the lines of the spec that are the example's."""
    lines = fragment.strip("\n").split("\n")
    head = lines[0].lstrip()
    code = "\n".join(ln.split("#", 1)[0] for ln in lines)  # braces in comments do not count
    opens = code.count("{") - code.count("}")
    body = ["    model   = llama-3-8b", "    device  = h100", "    workload {", "        batch   = 8",
            "        context = 128k", "    }"]
    if head.startswith("kvplan "):
        return fragment.strip("\n") + '\ndeployment "t" {\n' + "\n".join(body) + "\n}\n", set(range(1, len(lines) + 1))
    if re.match(r'(deployment|model|device) "', head):
        if opens > 0:  # a declaration's first line: give it a body
            return "\n".join(lines + body + ["}"] * opens) + "\n", set(range(1, len(lines) + 1))
        return fragment.strip("\n") + "\n", set(range(2, len(lines)))  # a whole declaration: its body
    if re.match(r"\w+\s*\{", head):  # a section block
        name = head.split("{")[0].strip()
        keep = body[:2] if name == "workload" else body
        block = lines + (["        batch = 8", "        context = 128k", "    }"] if opens > 0 else [])
        text = 'deployment "t" {\n' + "\n".join(keep) + "\n" + "\n".join("    " + ln for ln in block) + "\n}\n"
        first = len(keep) + 2
        return text, set(range(first, first + len(lines)))
    placed: dict[str, list[str]] = collections.defaultdict(list)
    for ln in lines:
        m = _SETTING.match(ln)
        assert m, f"not a setting: {ln!r}"
        key, op = (m.group(1), m.group(2)) if m.group(1) else ("fits", "")
        placed[_place(key, op or "==")].append(ln.strip())
    out: list[str] = []
    mine: set[int] = set()

    def emit(text: str, sec: str = "", i: int = -1) -> None:
        out.append(text)
        if sec:
            mine.add(len(out))

    if placed["model"]:
        emit('model "m" {')
        for i, ln in enumerate(placed["model"]):
            emit("    " + ln, "model", i)
        emit("}")
    if placed["device"]:
        emit('device "dv" {')
        given = {(_SETTING.match(ln) or re.match("", "")).group(1) for ln in placed["device"]}
        for k, v in TEMPLATE_DEVICE.items():
            if k not in given:
                emit(f"    {k} = {v}")
        for i, ln in enumerate(placed["device"]):
            emit("    " + ln, "device", i)
        emit("}")
    emit('deployment "t" {')
    given_top = {(_SETTING.match(ln) or re.match("", "")).group(1) for ln in placed["deployment"]}
    for k, v in TEMPLATE_ITEMS.items():
        if k not in given_top:
            emit(f"    {k} = {'dv' if k == 'device' and placed['device'] else v}")
    for i, ln in enumerate(placed["deployment"]):
        emit("    " + ln, "deployment", i)
    given_wl = {(_SETTING.match(ln) or re.match("", "")).group(1) for ln in placed["workload"]}
    emit("    workload {")
    service = any((_SETTING.match(ln) or re.match("", "")).group(1) in SERVICE_SLOS for ln in placed["slo"]) or bool(
        given_wl & {"rate", "input", "output"})  # a request workload's own key: the request form around it
    for k, v in (TEMPLATE_REQUESTS if service else TEMPLATE_WORKLOAD).items():  # itl, rate: SLOs on a service
        if k not in given_wl:
            emit(f"        {k} = {v}")
    for i, ln in enumerate(placed["workload"]):
        emit("        " + ln, "workload", i)
    emit("    }")
    for sec in ("quality", "slo", "pin", "expect"):
        if placed[sec]:
            emit(f"    {sec} {{")
            for i, ln in enumerate(placed[sec]):
                emit("        " + ln, sec, i)
            emit("    }")
    emit("}")
    return "\n".join(out) + "\n", mine


def example_errors(fragment: str, path: str) -> list[str]:
    """Front-end errors (KV0xx, KV1xx) an example causes on its own lines. Settings that repeat
    a key are alternatives (`context = 128k` or `context = 128Ki`): each is linted on its own."""
    keys = [m.group(1) for m in map(_SETTING.match, fragment.strip("\n").split("\n")) if m and m.group(1)]
    if len(keys) != len(set(keys)) and len(keys) == len(fragment.strip("\n").split("\n")):
        return [e for ln in fragment.strip("\n").split("\n") for e in example_errors(ln + "\n", path)]
    text, mine = spec_for_example(fragment)
    diags = check_source(text, path).diagnostics
    return [f"{d.code} {d.message} (line {d.span.line if d.span else '?'} of\n{text})" for d in diags
            if d.severity is Severity.ERROR and d.code.startswith(("KV0", "KV1")) and d.code not in _NOT_THE_EXAMPLE
            and (d.span is None or d.span.line in mine or d.code.startswith("KV0"))]


def _instead_examples() -> list[tuple[str, str]]:
    out = []
    for page in sorted((ROOT / "docs" / "rules").glob("KV[01]*.md")):
        text = page.read_text(encoding="utf-8")
        part = text.split("## Instead", 1)[1] if "## Instead" in text else ""
        # .kvp examples: untagged or `kvp` blocks (a `toml` block is pyproject.toml, checked elsewhere)
        for i, block in enumerate(re.findall(r"^```(?:kvp)?\n(.*?)^```", part, re.M | re.S)):
            if "..." not in block:
                out.append((f"{page.stem}-{i}", block))
    return out


@pytest.mark.parametrize("name,fragment", _instead_examples(), ids=[n for n, _ in _instead_examples()])
def test_every_instead_example_in_the_rule_pages_lints_clean(name: str, fragment: str, tmp_path: Path) -> None:
    assert not example_errors(fragment, str(tmp_path / "t.kvp")), example_errors(fragment, str(tmp_path / "t.kvp"))


def test_the_example_linter_catches_the_old_kv106_example(tmp_path: Path) -> None:
    """`step_time = 50 ms` (KV106's old help) fails KV115 where an slo needs `<=`."""
    assert any("KV115" in e for e in example_errors("slo {\n    step_time = 50 ms\n}", str(tmp_path / "t.kvp")))
