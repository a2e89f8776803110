"""Every `kvplan <command>` that docs, examples, the README and the help texts mention exists.

A mention is a code span that starts with `kvplan WORD`, or a line of a code block, a help text
or a .kvp comment that runs `kvplan WORD` (optionally after `$ `). Prose ("kvplan does ...") is not
a mention. Every WORD must be one of the commands `kvplan --help` lists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

COMMANDS = set(main.commands)  # type: ignore[attr-defined]
SOURCES = sorted([*(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").glob("*.kvp"), ROOT / "README.md"])

#: `kvplan WORD ...` in a code span, or at the start of a line (after `$ `, `# ` or spaces).
MENTION = re.compile(r"`kvplan ([a-z][\w-]*)|^[ \t]*(?:\$ |#+ *)?kvplan ([a-z][\w-]*)", re.M)
#: Words that follow "kvplan" at the start of a line of prose, not commands.
PROSE = re.compile(r"^[ \t]*(?:#+ *)?kvplan (?:does|cannot|writes|prints|never|knows|keeps|sizes|takes|reads|needs|"
                   r"in|implements|goes|derives|computes|chooses|can|and|will|weighs|the|splits|shows|reports|"
                   r"relies|ports|points|plans|once|leaves|inverts|has|from|every|converts|counts|compares|"
                   r"carries|assumes|asks|is|uses|checks|gives|treats|turns|says|stops)\b", re.M)


def mentions(text: str) -> set[str]:
    prose = {m.start() for m in PROSE.finditer(text)}
    return {m.group(1) or m.group(2) for m in MENTION.finditer(text) if m.start() not in prose}


def _help_texts() -> list[tuple[str, str]]:
    out = [("kvplan --help", CliRunner().invoke(main, ["--help"]).output)]
    for cmd in sorted(COMMANDS):
        out.append((f"kvplan {cmd} --help", CliRunner().invoke(main, [cmd, "--help"]).output))
    return out


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_docs_examples_and_readme_name_only_real_commands(path: Path) -> None:
    unknown = mentions(path.read_text(encoding="utf-8")) - COMMANDS
    assert not unknown, f"{path.relative_to(ROOT)} mentions `kvplan {sorted(unknown)}`, not a command"


def test_help_texts_name_only_real_commands() -> None:
    bad = [(what, w) for what, text in _help_texts() for w in mentions(text) - COMMANDS]
    assert not bad


def test_lint_hints_name_only_real_commands(tmp_path: Path) -> None:
    spec = tmp_path / "s.kvp"
    spec.write_text('kvplan 1\n\n# kvplan: ignore[QQQQ] no such code\ndeployment "d" {\n    model = llama-3-8b\n'
                    '    device = h100\n    workload {\n        batch = 1\n        context = 4k\n    }\n}\n',
                    encoding="utf-8")
    out = CliRunner().invoke(main, ["lint", str(spec), "--output-format", "full"]).output
    assert "QQQQ" in out
    assert not mentions(out) - COMMANDS, out


def test_the_extractor_finds_what_it_is_for() -> None:
    assert mentions("catalog link ids: `kvplan links` (per direction)") == {"links"}
    assert mentions("```\n$ kvplan map --model x\n```") == {"map"}
    assert mentions("  kvplan emit     the plan as configs") == {"emit"}
    assert mentions("kvplan does not evict tokens") == set()
    assert mentions("kvplan 1\n\ndeployment") == set()
    assert "links" not in COMMANDS and "rules" not in COMMANDS
