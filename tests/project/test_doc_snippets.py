"""The docs quote kvplan truly: every fenced block that shows `$ kvplan ...` is run, and what it shows is what
kvplan prints today (stdout and stderr as a terminal interleaves them); every number, digest and figure in such a
block is checked by that. A line `...` (or `…`) stands for lines left out. A block the harness cannot run (it
names a file the page only describes) says so on the line above it: `<!-- not run: why -->`. A `$ echo $?` after
a command shows its exit code, which is checked too; a command shown without output must run (exit 0 or 1).

`python -m pytest --update-goldens tests/project/test_doc_snippets.py` rewrites the blocks that have no `...`
from kvplan's output (review the diff); a block with `...` is refreshed by hand.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Optional

import attrs
import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```\n", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->\n\Z")
ELIDED = {"...", "…"}
#: A command line of a block: `$ kvplan ...`, or the README's `$ pip install . && kvplan ...`.
PROMPT = re.compile(r"\$ (pip install \S+ && )?kvplan ")


@attrs.frozen
class Shown:
    """One `$ kvplan ...` command of a page and the lines the page shows under it."""

    page: Path
    line: int          # of the `$` line
    command: str
    lines: tuple[str, ...]
    exit: Optional[int] = None  # what a `$ echo $?` after it shows

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _commands(page: Path) -> list[Shown]:
    """The `$ kvplan` commands of a page's fenced blocks (a block may hold several), less the blocks marked not
    run; a command continued with a trailing backslash is joined."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        body = m.group(1).split("\n")[:-1]
        if not body or not PROMPT.match(body[0]) or NOT_RUN.search(text[:m.start()]):
            continue
        first = text[:m.start()].count("\n") + 2
        i = 0
        while i < len(body):
            at, command = i, body[i][2:]
            i += 1
            installed = PROMPT.match(body[at])
            if installed and installed.group(1):  # `pip install . && kvplan ...`: pip's lines are not kvplan's
                command = command[command.index("kvplan "):]
                i = next(j for j in range(i, len(body)) if body[j].startswith("Successfully installed ")) + 1
            while command.endswith("\\"):
                command, i = command[:-1] + " " + body[i].strip(), i + 1
            start = i
            while i < len(body) and not body[i].startswith("$ "):
                i += 1
            exit_code = None
            if body[i:i + 1] == ["$ echo $?"]:
                exit_code, i = int(body[i + 1]), i + 2
            found.append(Shown(page, first + at, command, tuple(body[start:i - (2 if exit_code is not None else 0)]),
                               exit_code))
    return found


SHOWN = [s for page in PAGES for s in _commands(page)]


def matches(shown: tuple[str, ...], got: list[str]) -> bool:
    """Whether the output lines `got` are the `shown` lines, where each `...` line stands for any lines (none
    too): the runs between them appear in order, the first at the start unless `...` opens, the last at the end
    unless `...` closes."""
    runs: list[list[str]] = [[]]
    for line in shown:
        if line.strip() in ELIDED:
            runs.append([])
        else:
            runs[-1].append(line)
    if len(runs) == 1:
        return list(shown) == got
    head, *middle, tail = runs
    if got[:len(head)] != head or (tail and got[len(got) - len(tail):] != tail):
        return False
    at, end = len(head), len(got) - len(tail)
    for run in middle:
        if not run:
            continue
        hit = next((i for i in range(at, end - len(run) + 1) if got[i:i + len(run)] == run), None)
        if hit is None:
            return False
        at = hit + len(run)
    return at <= end


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the repository's examples, where the commands run (report and emit -o write here)."""
    where = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "examples", where / "examples")
    return where


def _run(command: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], int]:
    """The command's output lines (stdout and stderr interleaved) and exit code, run in `workdir`."""
    monkeypatch.chdir(workdir)
    result = CliRunner().invoke(main, shlex.split(command)[1:], terminal_width=100)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    out = result.output
    return (out[:-1] if out.endswith("\n") else out).split("\n") if out else [], result.exit_code


def test_the_pages_quote_commands() -> None:
    assert len(SHOWN) >= 20 and {s.page.name for s in SHOWN} >= {"README.md", "cli.md", "getting-started.md"}


@pytest.mark.parametrize("shown", SHOWN, ids=lambda s: s.where)
def test_a_quoted_command_prints_what_the_page_shows(shown: Shown, workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                                     request: pytest.FixtureRequest) -> None:
    got, code = _run(shown.command, workdir, monkeypatch)
    if shown.exit is not None:
        assert code == shown.exit, f"{shown.where}: `{shown.command}` exits {code}, the page says {shown.exit}"
    if not shown.lines:
        assert code in (0, 1), f"{shown.where}: `{shown.command}` exits {code}:\n" + "\n".join(got)
        return
    if request.config.getoption("--update-goldens") and not any(ln.strip() in ELIDED for ln in shown.lines):
        _rewrite(shown, got)
        return
    assert matches(shown.lines, got), (f"{shown.where}: `{shown.command}` prints\n" + "\n".join(got)
                                       + "\n\nbut the page shows\n" + "\n".join(shown.lines))


def _rewrite(shown: Shown, got: list[str]) -> None:
    """Replace the lines a page shows under a command with `got`."""
    lines = shown.page.read_text(encoding="utf-8").split("\n")
    at = shown.line  # the line after the `$` line (1-based `line` is the `$` line's index + 1)
    while lines[at - 1].endswith("\\"):
        at += 1
    lines[at:at + len(shown.lines)] = got
    shown.page.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.parametrize(("shown", "got", "expected"), [
    (("a", "b"), ["a", "b"], True),
    (("a", "b"), ["a", "b", "c"], False),
    (("a", "...", "c"), ["a", "b", "x", "c"], True),
    (("a", "...", "c"), ["a", "b", "c", "d"], False),
    (("a", "...", "c", "..."), ["a", "b", "c", "d"], True),
    (("...", "b", "...", "d"), ["a", "b", "c", "d"], True),
    (("...", "d", "...", "b", "..."), ["a", "b", "c", "d", "e"], False),
    (("a", "  ...", "b"), ["a", "b"], True),
    (("a", "…"), ["b"], False),
])
def test_the_match_reads_an_elision_as_any_lines_in_order(shown: tuple[str, ...], got: list[str],
                                                          expected: bool) -> None:
    assert matches(shown, got) is expected
