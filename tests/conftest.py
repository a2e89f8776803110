"""Shared pytest set-up: the `--update-goldens` option and the `golden` fixture."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest


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
