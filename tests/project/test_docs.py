"""The documentation pages: one per diagnostic code and per design rule, and their examples
are real — each `.kvp` example, linted, produces the page's code and the very line pasted
under it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.base.codes import CODES, Stage
from kvplan.cli import main
from kvplan.planner.rules import RULES
from tests.paths import ROOT

RULE_DIR = ROOT / "docs" / "rules"
CODE_SECTIONS = ("## What it finds", "## Why it matters", "## Example", "## Instead")
RULE_SECTIONS = ("## What the rule says", "## Why", "## How the planner applies it", "## Lint code", "## Example",
                 "## Fix")

KVP_BLOCK = re.compile(r"^```kvp\n(.*?)^```\n", re.M | re.S)
LINT_CMD = re.compile(r"^\$ kvplan lint (\S+\.kvp)\n(.*?)^```", re.M | re.S)


def _sections_in_order(text: str, sections: tuple[str, ...]) -> list[int]:
    lines = text.splitlines()
    return [lines.index(s) if s in lines else -1 for s in sections]


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_has_a_page_in_the_house_format(code: str) -> None:
    rule = CODES[code]
    page = RULE_DIR / f"{code}.md"
    assert page.is_file(), f"no docs/rules/{code}.md"
    text = page.read_text(encoding="utf-8")
    assert text.splitlines()[0] == f"# {code} {rule.name}"
    at = _sections_in_order(text, CODE_SECTIONS)
    assert -1 not in at, f"{page.name} lacks {[s for s, i in zip(CODE_SECTIONS, at) if i < 0]}"
    assert at == sorted(at), f"{page.name}: sections out of order"


@pytest.mark.parametrize("code", sorted(c for c in CODES if c[:3] in ("KV2", "KV3")))
def test_planner_code_pages_state_the_registered_severity(code: str) -> None:
    text = (RULE_DIR / f"{code}.md").read_text(encoding="utf-8")
    assert f"Severity: {CODES[code].severity.value}." in text.splitlines()[2]


@pytest.mark.parametrize("rid", sorted(RULES))
def test_every_design_rule_has_a_page_naming_its_code(rid: str) -> None:
    rule = RULES[rid]
    page = ROOT / rule.doc
    assert page == RULE_DIR / f"{rid}.md" and page.is_file()
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {rid} ")
    assert f"> {rule.title} (paper §6.2, rule {rid[1:]})" in text
    at = _sections_in_order(text, RULE_SECTIONS)
    assert -1 not in at and at == sorted(at), f"{page.name}: sections {RULE_SECTIONS} missing or out of order"
    lint_part = text.split("## Lint code", 1)[1].split("## Example", 1)[0]
    assert f"[{rule.code}]({rule.code}.md)" in lint_part and CODES[rule.code].stage is Stage.RULE


def _example_pages() -> list[tuple[str, str]]:
    """(page name, code its examples must produce) for the planner's code pages and the rule pages."""
    pages = [(p.name, p.stem) for p in sorted(RULE_DIR.glob("KV[23]*.md"))]
    pages += [(f"{rid}.md", RULES[rid].code) for rid in sorted(RULES)]
    return pages


@pytest.mark.parametrize("page,code", _example_pages())
def test_kvp_examples_produce_their_code_and_the_pasted_line(page: str, code: str, tmp_path: Path,
                                                             monkeypatch: Any) -> None:
    text = (RULE_DIR / page).read_text(encoding="utf-8")
    blocks = [(m.start(), m.group(1)) for m in KVP_BLOCK.finditer(text)]
    assert blocks, f"{page} has no ```kvp example"
    monkeypatch.chdir(tmp_path)
    for start, spec in blocks:
        shown = LINT_CMD.search(text, start)
        assert shown is not None, f"{page}: no `$ kvplan lint FILE.kvp` output after the example"
        name, pasted = shown.group(1), shown.group(2)
        (tmp_path / name).write_text(spec, encoding="utf-8")
        r = CliRunner().invoke(main, ["lint", name])
        assert r.exit_code in (0, 1), r.output
        got = r.stdout.splitlines()
        codes = {ln.split(" ")[1] for ln in got}
        assert code in codes, f"{page}: the example produces {sorted(codes)}, not {code}"
        # every diagnostic line pasted in the page is what lint prints today
        for line in pasted.splitlines():
            if line.startswith(f"{name}:"):
                assert line in got, f"{page}: stale diagnostic line\n  page: {line}\n  lint: {got}"


def test_model_page_worked_example_matches_the_arithmetic() -> None:
    """The worked example's numbers, recomputed here from SPEC §3/§5 and from the catalog."""
    from kvplan.catalog import get_model

    text = (ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    kappa = 2 * 80 * 8 * 128 * 2
    assert f"{kappa:,} B" in text
    assert f"{140e9 / kappa / 1e3:.1f}k" in text                  # s*(1) with the paper's P = 70e9
    p = get_model("llama-3-70b").params
    assert f"{p:,.0f}" in text
    assert f"{2 * p / kappa / 1e3:.1f}k" in text                  # s*(1) with the catalog's count
    k1 = 128_000 * kappa / 1e9
    assert f"{(140 + k1) / (140 + k1 / 8):.2f}×" in text           # 2-bit at W1 (SPEC §5)
    assert f"{(140 + 32 * k1) / (140 + 32 * k1 / 8):.2f}×" in text  # 2-bit at W2
