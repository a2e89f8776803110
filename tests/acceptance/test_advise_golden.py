"""Golden files for `kvplan advise` (text, json, markdown) and `kvplan report` on three examples.

Regenerate with `python -m pytest tests/acceptance/test_advise_golden.py --update-goldens` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.acceptance.test_cli_core import check_contract
from tests.paths import DATA, ROOT

GOLDEN = DATA / "golden" / "advise"
EXAMPLES = ["w2-batch32", "deepseek-v3-mi300x", "llama-3.1-8b-h100-custom"]


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("fmt,ext", [("text", "txt"), ("json", "json"), ("markdown", "md")])
def test_advise_golden(name: str, fmt: str, ext: str, golden: Callable[[Path, str], None],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # spans and paths are relative, as a user would run it
    r = CliRunner().invoke(main, ["advise", f"examples/{name}.kvp", "--format", fmt])
    assert r.exit_code in (0, 1), r.output
    assert r.stderr == ""
    if fmt == "json":
        body = json.loads(r.stdout)
        check_contract(body)  # every quantity: value, unit, evidence class, source
        # exit 1 exactly when some plan has an unmet constraint
        assert (r.exit_code == 1) == any(p["unmet"] for p in body["plans"])
    if fmt == "text":
        assert max(len(line) for line in r.stdout.splitlines()) <= 100
    golden(GOLDEN / f"{name}.{ext}", r.stdout)


def test_report_writes_madr_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "rationale"
    r = CliRunner().invoke(main, ["report", "examples/w2-batch32.kvp", "-o", str(out)])
    assert r.exit_code == 0, r.output
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.md"))
    assert files and any(f.endswith("index.md") for f in files)
    records = [out / f for f in files if not f.endswith("index.md")]
    assert len(records) == 9  # one per decision domain
    for rec in records:
        text = rec.read_text()
        for section in ("## Context", "## Decision"):
            assert section in text, (rec, section)
        assert "Plan digest" in text
    # deterministic: a second run writes the same bytes
    again = tmp_path / "again"
    CliRunner().invoke(main, ["report", "examples/w2-batch32.kvp", "-o", str(again)])
    for f in files:
        if f.endswith(".md"):
            assert (out / f).read_text() == (again / f).read_text()
