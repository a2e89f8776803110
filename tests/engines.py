"""The engines-marked tests' one rule for an engine that does not import (pyproject's `engines` marker).

Where vLLM, SGLang or LMCache are not installed (the default suite, .ci/run) those tests skip. The CI job that
installs the engines sets KVPLAN_REQUIRE_ENGINES=1: there an engine that does not import fails the test, so a
skip cannot hide a failure (docs/ci.md).
"""

from __future__ import annotations

import importlib
import os

import pytest


def require(engine: str) -> None:
    """Skip where `engine` does not import, unless KVPLAN_REQUIRE_ENGINES=1: then its ImportError fails the test."""
    if os.environ.get("KVPLAN_REQUIRE_ENGINES") == "1":
        importlib.import_module(engine)
    else:
        pytest.importorskip(engine)
