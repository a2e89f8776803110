"""Shared pytest set-up: the `--update-goldens` option and the `golden` fixture."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

# No test reaches the Hugging Face hub: a repo id outside the catalog resolves from a cache the test builds
# (tests/acceptance/test_hub.py), or fails at once instead of retrying the network.
os.environ["HF_HUB_OFFLINE"] = "1"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files from the current output instead of comparing (review the diff)")


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[Path, str], None]:
    """golden(path, text): assert `text` equals the golden file at `path`, or rewrite it with --update-goldens."""
    update = bool(request.config.getoption("--update-goldens"))

    def check(path: Path, text: str) -> None:
        path = Path(path)
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"no golden file {path}; run `pytest --update-goldens` and review it")
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"output differs from {path} (run `pytest --update-goldens` if the change is right)"

    return check
