"""The code passes ruff with the configuration in pyproject.toml ([tool.ruff]): pyflakes, pycodestyle, isort,
bugbear and complexity. ruff is in the test extra, so CI runs this; it skips only where ruff is not installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.paths import ROOT


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (it is in the test extra: pip install -e '.[test]')")
def test_ruff_check_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "kvplan", "tests", "tools", "bench"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
