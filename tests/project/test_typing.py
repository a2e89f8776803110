"""The package type-checks under mypy --strict (STYLE.md: strict typing; pyproject [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT


def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout
