"""Figures: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/render/test_plot.py;
tests/unit/render/test_plot.py says what they check.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT
from tests.unit.render.test_plot import png_size

# Slow: draws the figures of map, pareto and report with matplotlib (about 2 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

MAP_ARGS = ["map", "--model", "llama-3-70b", "--device", "b200", "--devices", "2", "--batch", "8",
            "--context", "128k"]


def test_map_cli_writes_both_figures(tmp_path: Path) -> None:
    plain = CliRunner().invoke(main, MAP_ARGS)
    r = CliRunner().invoke(main, [*MAP_ARGS, "--plot", str(tmp_path / "m.svg"), "--roofline", str(tmp_path / "r.png")])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == plain.stdout  # the text report does not change
    assert (tmp_path / "m.svg").read_text(encoding="utf-8").count("<svg") == 1
    assert png_size((tmp_path / "r.png").read_bytes())[0] > 0


def test_map_cli_rejects_unknown_extension(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, [*MAP_ARGS, "--plot", str(tmp_path / "m.pdf")])
    assert r.exit_code == 2
    assert "m.pdf" in r.stderr and ".png or .svg" in r.stderr
    assert not (tmp_path / "m.pdf").exists()


def test_missing_matplotlib_is_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError):
        import matplotlib  # noqa: F401  (the patch really hides it)
    r = CliRunner().invoke(main, [*MAP_ARGS, "--plot", str(tmp_path / "m.png")])
    assert r.exit_code == 2
    assert r.stderr == "kvplan: error: plotting needs matplotlib: pip install matplotlib\n"
    assert not (tmp_path / "m.png").exists()
    ok = CliRunner().invoke(main, MAP_ARGS)  # the map itself never needs matplotlib
    assert ok.exit_code == 0 and "regime:" in ok.stdout


# `kvplan[...]` names an unrelated PyPI project: kvplan's distribution is kvcache-planner, and it is
# not on PyPI yet, so an install hint must work as written (`pip install matplotlib`, `.[plot]`).
_WRONG_DIST = re.compile(r"kvplan\[")


def test_install_hints_name_an_installable_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = ROOT
    texts = {str(f.relative_to(root)): f.read_text(encoding="utf-8")
             for pattern in ("docs/**/*.md", "README.md", "kvplan/**/*.py")
             for f in sorted(root.glob(pattern))}
    assert len(texts) > 20
    texts["kvplan map --help"] = CliRunner().invoke(main, ["map", "--help"], terminal_width=400).output
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for flag in ("--plot", "--roofline"):
        r = CliRunner().invoke(main, [*MAP_ARGS, flag, str(tmp_path / "m.png")])
        assert r.exit_code == 2 and "pip install matplotlib" in r.stderr, r.output
        texts[f"kvplan map {flag}"] = r.output
    bad = [where for where, text in texts.items() if _WRONG_DIST.search(text)]
    assert not bad, bad
    assert "pip install matplotlib" in texts["kvplan map --help"]
