"""Where the tests find the repository: one place, so a test file can sit at any depth under tests/; the
repository's tools/ scripts, loaded as modules; and the engines-marked tests' rule for an engine that does not
import (`require_engine`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

#: The repository root (pyproject.toml, kvplan/, docs/, examples/).
ROOT = Path(__file__).resolve().parent.parent
#: The golden and invalid-spec corpora and the other fixtures (tests/data/).
DATA = ROOT / "tests" / "data"
#: Modules under kvplan/ that are lark's code, not kvplan's: the parser its standalone generator writes
#: (tools/build_parser.py). The checks of kvplan's own code (ruff, mypy, its shape, its imports) leave them out.
GENERATED = (ROOT / "kvplan" / "grammar" / "kvp_parser.py",)


def load_tool(name: str, folder: str = "tools") -> ModuleType:
    """tools/<name>.py (or `folder`/<name>.py: bench/) as a module (the scripts are not a package), registered
    under `name`."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def require_engine(engine: str) -> None:
    """Skip where `engine` (vllm, sglang, lmcache) does not import, unless KVPLAN_REQUIRE_ENGINES=1: then its
    ImportError fails the test. CI's engines job sets it (docs/ci.md), so a skip there cannot hide a failure."""
    if os.environ.get("KVPLAN_REQUIRE_ENGINES") == "1":
        importlib.import_module(engine)
    else:
        pytest.importorskip(engine)
