"""Every transcript in the README and docs/*.md — a `$ kvplan ...` line in a code block and the
lines under it — is what the command prints today (issue 9: the README said "4.8× at batch 32
(KV-bound)" where `kvplan map` prints capacity-bound).

How a transcript is read: the command runs from a folder holding `examples/` (the repository's),
so paths print as the page shows them; `| head -N` keeps the first N lines; a line that is `...`
(indented or not) stands for any number of lines; every other line must be a line of the output
(stdout and stderr as the terminal shows them, or one of the two where the page shows them apart),
in order, and lines not separated by `...` must be adjacent there. `$ echo $?` checks the exit
status of the command before it. Plan digests (`sha256:` and 16 hex digits) are compared by shape
only: they change with any change to the planner's inputs, and `tests/unit/render/test_digest.py` checks them.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Transcripts of files a page describes but does not ship (the reader's own specs): not run.
#: Each is listed so that a new transcript is checked unless it is added here, with its reason.
ILLUSTRATIVE = {
    ("cli-lint.md", "kvplan lint specs/"): "the reader's own specs/ folder",
    ("cli.md", "kvplan advise e.kvp"):
        "a spec with a misspelt device, checked by tests/acceptance/test_inline_findings.py",
    ("cli-sweep.md", "kvplan sweep chat.kvp --devices 2 | head -3"): "a chat.kvp the page describes",
    ("config-json.md", "kvplan map --model-config config.json --device h100-sxm"):
        "a config.json with num_hidden_layers = 10^9, described in the text",
    ("getting-started.md", "kvplan lint --output-format full chat-32k.kvp"):
        "docs/rules/KV207.md's example, checked by tests/project/test_docs.py",
}
_DIGEST = re.compile(r"sha256:[0-9a-f]{16}")
_FENCE = re.compile(r"^```")


class Transcript(NamedTuple):
    page: str
    line: int
    command: str
    expected: list[str]
    status: Optional[int]  # from a following `$ echo $?`


def transcripts() -> Iterator[Transcript]:
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        fenced, i = False, 0
        while i < len(lines):
            ln = lines[i]
            if _FENCE.match(ln):
                fenced = not fenced
                i += 1
                continue
            if not (fenced and ln.startswith("$ kvplan ")):
                i += 1
                continue
            start, command = i + 1, ln[2:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            i += 1
            expected: list[str] = []
            while i < len(lines) and not _FENCE.match(lines[i]) and not lines[i].startswith("$ "):
                expected.append(lines[i].rstrip())
                i += 1
            status = None
            if i < len(lines) and lines[i].strip() == "$ echo $?":
                status = int(lines[i + 1])
                i += 2
            yield Transcript(page.name, start, " ".join(command.split()), expected, status)


ALL = list(transcripts())


def _matches(expected: list[str], got: list[str]) -> Optional[str]:
    """None when `expected` (with `...` elisions) is found in `got`; else the first line not found."""
    groups: list[list[str]] = [[]]
    for e in expected:
        if e.strip() == "...":
            groups.append([])
        else:
            groups[-1].append(e)
    at = 0
    for n, group in enumerate(groups):
        if not group:
            continue
        anchored = n == 0  # the first lines start the output
        for j in range(at, len(got) - len(group) + 1):
            if got[j:j + len(group)] == group:
                at = j + len(group)
                break
            if anchored:
                return group[0]
        else:
            return next((g for g in group if g not in got[at:]), group[0])
    if groups[-1] and at != len(got):  # no trailing `...`: the output ends there
        return f"(the output goes on after {groups[-1][-1]!r})"
    return None


def test_transcripts_are_found_and_the_illustrative_ones_exist() -> None:
    keys = {(t.page, t.command) for t in ALL}
    assert len(ALL) >= 30 and ("README.md", "kvplan map --model llama-3-70b --device b200 --batch 1 --context 128k") \
        in keys
    assert set(ILLUSTRATIVE) <= keys, set(ILLUSTRATIVE) - keys


@pytest.mark.parametrize("t", [t for t in ALL if (t.page, t.command) not in ILLUSTRATIVE],
                         ids=lambda t: f"{t.page}:{t.line}")
def test_transcript_is_what_the_command_prints(t: Transcript, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.symlink(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    command, head = t.command, None
    piped = re.fullmatch(r"(.*?)\s*\|\s*head -(\d+)", command)
    if piped:
        command, head = piped[1], int(piped[2])
    args = shlex.split(command)
    assert args[0] == "kvplan", t
    r = CliRunner().invoke(main, args[1:])
    assert r.exception is None or isinstance(r.exception, SystemExit), (t, repr(r.exception))
    expected = [_DIGEST.sub("sha256:…", e) for e in t.expected]
    miss: Optional[str] = ""
    # what the terminal shows, or one of its two streams where the page shows them apart
    for text in (r.output, r.stdout, r.stderr):
        got = [_DIGEST.sub("sha256:…", ln.rstrip()) for ln in text.splitlines()]
        if head is not None:
            got = got[:head]
        miss = _matches(expected, got)
        if miss is None:
            break
    got = r.output.splitlines()
    assert miss is None, f"{t.page}:{t.line}: `$ {t.command}`: not printed: {miss!r}\n--- printed:\n" + "\n".join(got)
    if t.status is not None:
        assert r.exit_code == t.status, (t, r.exit_code)


def test_the_matcher_finds_a_stale_line() -> None:
    out = ["a", "b", "c", "d"]
    assert _matches(["a", "...", "c", "d"], out) is None
    assert _matches(["a", "b", "..."], out) is None
    assert _matches(["a", "c", "..."], out) == "a"  # adjacent lines must be adjacent
    assert _matches(["a", "...", "x"], out) == "x"
    assert _matches(["a", "b"], out) is not None  # without `...` the output ends there


def test_the_readme_names_the_regime_map_prints_for_each_speedup_it_quotes() -> None:
    """"2-bit KV buys 1.25× at batch 1 (weight-bound) and 4.8× at batch 32 (KV-bound)": map labels the
    batch-32 row capacity-bound. Each "N× at batch B (... REGIME" is checked against map's int2 row."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    claims = re.findall(r"([\d.]+)× at batch (\d+) \((?:`--batch \d+`: )?([a-zA-Z]+-bound)", text)
    assert len(claims) == 2, claims
    for speedup, batch, regime in claims:
        r = CliRunner().invoke(main, ["map", "--model", "llama-3-70b", "--device", "b200", "--batch", batch,
                                      "--context", "128k"])
        row = next(ln.split() for ln in r.stdout.splitlines() if ln.startswith("int2 "))
        # ... regime, step ≥ (2 words), speedup, expected step (2 words)
        assert (row[-3], row[-6]) == (f"{speedup}x", regime), (batch, row)
