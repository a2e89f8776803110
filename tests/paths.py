"""Where the tests find the repository: one place, so a test file can sit at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

#: The repository root (pyproject.toml, kvplan/, docs/, examples/).
ROOT = Path(__file__).resolve().parent.parent
#: The golden and invalid-spec corpora and the other fixtures (tests/data/).
DATA = ROOT / "tests" / "data"
