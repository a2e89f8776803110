"""What docs/getting-started.md says of the suite and the install is true: the default run and the whole suite
(tests/conftest.py: `python -m pytest` leaves out the tests marked slow, `--run-slow`, which the README's test
command, `.ci/run` and CI pass, runs them too, `-m` chooses for itself), the counts it gives for both, and the
dependencies it lists, which are pyproject.toml's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomli is kvplan's dependency on 3.10
    import tomli as tomllib

import pytest

from tests.paths import ROOT

_PROBE = """
import pytest

@pytest.mark.slow
def test_slow():
    pass

def test_quick():
    pass

def test_also_quick():
    pass
"""


def _pytest(args: list[str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    """A suite of three tests, one slow, under the project's conftest hooks."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_addoption, "
                                          "pytest_collection_modifyitems  # noqa: F401\n", encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: probe\n", encoding="utf-8")
    (tmp_path / "test_probe.py").write_text(_PROBE, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(("args", "ran"), [
    ([], "2 passed, 1 deselected"),
    (["--run-slow"], "3 passed"),
    (["-m", "slow"], "1 passed, 2 deselected"),
    (["-m", "not slow", "--run-slow"], "2 passed, 1 deselected"),
])
def test_the_default_run_leaves_out_the_slow_tests_and_run_slow_keeps_them(probe: Path, args: list[str],
                                                                          ran: str) -> None:
    assert re.search(rf"[= ]{ran} in ", _pytest(args, probe))


def _collected(args: list[str]) -> int:
    """The tests `python -m pytest --collect-only` with `args` would run (the suite's -q and this -q make it list
    `file: count` lines)."""
    out = _pytest(["--collect-only", "-q", *args], ROOT)
    counts = [int(n) for n in re.findall(r"^tests/\S+\.py: (\d+)$", out, re.M)]
    assert counts, out[-2000:]
    return sum(counts)


@pytest.mark.slow
def test_getting_started_states_the_suites_counts() -> None:
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8"))
    default, everything = _collected([]), _collected(["--run-slow"])
    slow = everything - default
    assert slow > 0
    assert f"{everything:,} tests" in text, f"getting-started.md should say the whole suite is {everything:,} tests"
    assert f"{default:,} tests" in text and f"{slow:,} marked slow" in text, (default, slow)


def _names(requirements: list[str]) -> list[str]:
    """The distribution names of requirement strings, once each, as pyproject.toml spells them."""
    names = [re.match(r"[A-Za-z0-9_.-]+", r) for r in requirements]
    assert all(names), requirements
    return list(dict.fromkeys(m.group(0) for m in names if m))


def _paragraph(text: str, opening: str) -> str:
    at = text.index(opening)
    return text[at:text.find("\n\n", at)]


def test_getting_started_lists_the_dependencies_pyproject_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    runtime = _paragraph(text, "`pip install .` installs kvplan and its")
    test_extra = _paragraph(text, "The test extra adds")
    for name in _names(project["dependencies"]):
        assert re.search(rf"\b{re.escape(name)}\b", runtime, re.I), f"getting-started.md does not list {name}"
    for name in _names(project["optional-dependencies"]["test"]):
        assert re.search(rf"\b{re.escape(name)}\b", test_extra, re.I), f"getting-started.md does not list {name}"
    count = len(_names(project["dependencies"])) - 1  # tomli is 3.10's only
    words = {4: "four", 5: "five", 6: "six", 7: "seven"}
    assert f"its {words.get(count, str(count))} runtime dependencies" in runtime
