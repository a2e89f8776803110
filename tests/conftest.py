"""Shared pytest set-up: the `--update-goldens` option and the `golden` fixture, and `--run-slow`: the default
`python -m pytest` leaves out the tests marked `slow` (a contributor's run stays under 3 minutes on 2 cores);
the README's test command, `.ci/run` and CI pass --run-slow and run them all. `-m` chooses for itself."""

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
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (the README's test command and CI do)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --run-slow or a -m of the caller's own, leave out the tests marked slow (said as deselected)."""
    if config.getoption("--run-slow") or config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


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
