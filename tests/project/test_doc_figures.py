"""The figures the docs quote from kvplan's output in their prose (README.md, docs/getting-started.md) are what
kvplan prints today: each row names the sentence, the command that makes the figure, and the output line that
holds it. (The fenced `$ kvplan` blocks are checked whole by tests/project/test_doc_snippets.py.)"""

from __future__ import annotations

import re
import shlex

import attrs
import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

MAP_B1 = "map --model llama-3-70b --device b200 --batch 1 --context 128k"
MAP_B32 = "map --model llama-3-70b --device b200 --batch 32 --context 128k"
MAP_B32_INT4_4 = "map --model llama-3-70b --device b200 --batch 32 --context 128k --devices 4 --kv-dtype int4"
ADVISE_W2 = "advise examples/w2-batch32.kvp"


@attrs.frozen
class Figure:
    """`value` as the page writes it (× for kvplan's x) in the sentence `said` of `page`, and in the line of
    `command`'s output that begins with `line`."""

    page: str
    said: str
    command: str
    line: str
    value: str


FIGURES = (
    Figure("README.md", "2-bit KV buys 1.25× at batch 1", MAP_B1, "int2 ", "1.25×"),
    Figure("README.md", "4.8× at batch 32", MAP_B32, "int2 ", "4.8×"),
    Figure("README.md", "1.342 TB of KV beside 141.1 GB of weights", MAP_B32, "KV bytes stored", "1.342 TB"),
    Figure("README.md", "1.342 TB of KV beside 141.1 GB of weights", MAP_B32, "weight bytes held", "141.1 GB"),
    Figure("docs/getting-started.md", "128k tokens is 9.51× past s*", MAP_B32, "context / s*", "9.51×"),
    Figure("docs/getting-started.md", "26.4× past s_cap", MAP_B32, "context / s_cap", "26.4×"),
    Figure("docs/getting-started.md", "1.483 TB against 192 GB", MAP_B32, "memory needed", "1.483 TB"),
    Figure("docs/getting-started.md", "1.483 TB against 192 GB", MAP_B32, "capacity (N·C)", "192 GB"),
    Figure("docs/getting-started.md", "the plan's s_cap (203k)", ADVISE_W2, "after the plan (R8)", "203k"),
    Figure("docs/getting-started.md", "below the 239.1k that `kvplan map --devices 4 --kv-dtype int4` prints",
           MAP_B32_INT4_4, "s_cap capacity crossover", "239.1k"),
)


def _output(command: str) -> list[str]:
    result = CliRunner().invoke(main, shlex.split(command))
    assert result.exit_code in (0, 1), result.output
    return [line.strip() for line in result.output.splitlines()]


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.page}:{f.value}")
def test_a_figure_in_the_prose_is_what_kvplan_prints(figure: Figure, monkeypatch: pytest.MonkeyPatch) -> None:
    text = re.sub(r"\s+", " ", (ROOT / figure.page).read_text(encoding="utf-8"))
    assert figure.said in text, f"{figure.page} no longer says {figure.said!r}: update this row with the page"
    assert figure.value in figure.said
    monkeypatch.chdir(ROOT)
    lines = [line for line in _output(figure.command) if line.startswith(figure.line)]
    assert lines, f"`kvplan {figure.command}` prints no line starting {figure.line!r}"
    printed = figure.value.replace("×", "x")
    assert any(re.search(rf"(?<![\d.]){re.escape(printed)}(?![\d])", line) for line in lines), (
        f"{figure.page} says {figure.value}; `kvplan {figure.command}` prints {lines}")
