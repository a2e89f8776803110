"""No placeholder links in what users read: the docs, the README, pyproject.toml and the examples name real
places or none (a `github.com/OWNER/kvplan` or an `example.com` reads as a link and leads nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import ROOT

FILES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md", ROOT / "pyproject.toml",
                *(p for p in (ROOT / "examples").rglob("*") if p.is_file())])
URL = re.compile(r"https?://[^\s)\]>\"'`]*")
#: A host reserved for examples (RFC 2606) or one's own machine, or a placeholder word or template in a URL.
PLACEHOLDER = re.compile(r"https?://(?:[^/\s]*\.)?(?:example|test|invalid|localhost)(?:\.[a-z]+)?(?::\d+)?(?:/|$)"
                         r"|/(?:OWNER|ORG|USER|YOUR[-_]?\w*|REPO|NAME|TODO|FIXME|XXX+|\.\.\.|…)(?:/|$)"
                         r"|[<>{}]|TODO|FIXME|\*\*\*", re.IGNORECASE)
#: A markdown link with nothing, a `#` alone or a to-do for its target.
EMPTY_LINK = re.compile(r"\]\((?:\s*|#|TODO|FIXME|url|link)\)", re.IGNORECASE)


def placeholders(text: str) -> list[str]:
    """The placeholder URLs and empty link targets of `text`, each with its line number."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        found += [f"{n}: {m.group(0)}" for m in URL.finditer(line) if PLACEHOLDER.search(m.group(0))]
        found += [f"{n}: {m.group(0)}" for m in EMPTY_LINK.finditer(line)]
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_placeholder_url(path: Path) -> None:
    found = placeholders(path.read_text(encoding="utf-8", errors="replace"))
    assert found == [], f"{path.relative_to(ROOT)}: placeholder links (name the real place, or none):\n" + \
        "\n".join(found)


@pytest.mark.parametrize("text", [
    "repo: https://github.com/OWNER/kvplan", "see https://example.com/docs", "http://www.example.org",
    "(https://huggingface.co/<hf_id>/blob/main/config.json)", "https://github.com/your-org/kvplan",
    "[the docs](TODO)", "[x]()", "https://github.com/ORG/REPO", "http://localhost:8000/v1",
    "https://docs.vllm.ai/TODO", "https://github.com/.../kvplan",
])
def test_the_check_sees_a_placeholder(text: str) -> None:
    assert placeholders(text), text


@pytest.mark.parametrize("text", [
    "https://github.com/kubernetes-sigs/lws", "https://huggingface.co/openai/gpt-oss-120b",
    "https://huggingface.co/deepseek-ai/DeepSeek-V3/tree/afb92e1fa402c2be2a9eb085312bb02e0384d6c7",
    "[R7](rules/R7.md)", "org/name", "https://docs.cloud.google.com/tpu/docs/v6e.",
])
def test_the_check_passes_a_real_link(text: str) -> None:
    assert placeholders(text) == [], text
