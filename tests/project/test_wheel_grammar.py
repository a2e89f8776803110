"""The grammar file: the repository check.

Split by layer from the tests of the same subject in tests/unit/lang/test_grammar.py;
tests/unit/lang/test_grammar.py says what they check.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.unit.lang.test_grammar import EXAMPLE

# Slow: builds the wheel and installs it into a fresh virtual environment (about 3 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow


def test_wheel_ships_the_grammar_and_parses_from_the_installed_copy(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist)], check=True, cwd=tmp_path, timeout=120)
    (wheel,) = dist.glob("*.whl")  # one wheel, whatever the distribution is named (pyproject.toml)
    with zipfile.ZipFile(wheel) as zf:
        assert "kvplan/grammar/kvp.lark" in zf.namelist()
        assert "kvplan/grammar/__init__.py" in zf.namelist()
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                    str(wheel)], check=True, cwd=tmp_path, timeout=120)
    probe = (
        "import sys, kvplan.lang as L\n"
        "assert kvplan_path_ok(L.__file__), L.__file__\n"
        "r = L.check_source(sys.stdin.read(), 'ref.kvp')\n"
        "print(L.__file__); print(len(r.scenarios), r.scenarios[0].context, r.scenarios[0].budget)\n"
        "from kvplan.lang import syntax; print(syntax.parser().__class__.__module__)\n"
    ).replace("kvplan_path_ok(L.__file__)", f"L.__file__.startswith({str(target)!r})")
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", probe], input=EXAMPLE.read_text(encoding="utf-8"), env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    where, summary, origin = out.stdout.splitlines()
    assert where.startswith(str(target))
    assert summary == "1 128000 near-lossless"
    assert origin == "kvplan.grammar.kvp_parser"  # the wheel's standalone parser (tools/build_parser.py)
