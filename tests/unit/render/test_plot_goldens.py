"""Golden images, one per kind of figure kvplan draws: the regime map (`kvplan map --plot`), the roofline
(`kvplan map --roofline`), the report's picture of a plan (kvplan.render.report) and the Pareto front (`kvplan
pareto --plot`).

Each is drawn to PNG at its fixed size and DPI, in DejaVu Sans (it ships with matplotlib), on the Agg
canvas, with no date or software stamp, and compared with tests/data/golden/plots/ by
matplotlib.testing.compare.compare_images: tolerant of anti-aliasing noise between matplotlib builds
(root-mean-square difference below `TOLERANCE` on 0-255 channels), not of a region, a curve or a point
that moved. The images are compared without their text and legend: matplotlib 3.8 and 3.11 lay the same
strings out a few pixels apart (RMS 31-36 on these figures with text, 6-7 with the legend's handles alone,
tools/test-deps.sh min against newest), which no tolerance can tell from a moved curve. What the text and
the legend say is asserted in tests/unit/render/test_plot.py (the legend entries, labels and captions the
figure reports). `pytest --update-goldens` rewrites them; look at
each (and at the same figure with its text, `kvplan map --plot`) before committing. Skipped only where
matplotlib is not installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from kvplan import catalog
from kvplan.lang import check_file
from kvplan.model import roofline as rf
from kvplan.planner import pareto, plans_for
from kvplan.render import plot, report
from tests.paths import DATA, ROOT

# Slow: draws the figures with matplotlib and compares them with their goldens (about 2 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

GOLDEN = DATA / "golden" / "plots"
#: RMS over the image without its text, 0-255 per channel. Measured with matplotlib 3.11 (and checked below):
#: the map's point moved from 128k to 140k tokens differs by 3.3, to 160k by 4.1; int2's two curves left out
#: by 22.0. Below 3 passes lines anti-aliased a little differently by another matplotlib build.
TOLERANCE = 3.0

LLAMA = catalog.get_model("llama-3-70b")
B200 = catalog.get_device("b200")


def _map(path: Path) -> None:
    cfg = rf.Config(LLAMA, B200, n_devices=2, w_kv=1.0)
    plot.regime_map_figure(cfg, 8, 128_000, ["fp8", "bf16", "int4", "int2"], path, kv_name="fp8")


def _roofline(path: Path) -> None:
    plot.roofline_figure(rf.Config(LLAMA, B200, n_devices=2, w_kv=1.0), 8, 128_000, path)


def _report(path: Path) -> None:
    (p,) = plans_for(check_file(str(ROOT / "examples/w2-batch32.kvp")))
    cfg, picture = report.plan_picture(p)
    plot.draw_regime_map(cfg, picture, path)


def _pareto(path: Path) -> None:
    (sc,) = check_file(str(ROOT / "examples/w2-batch32.kvp")).scenarios
    plot.pareto_figure(pareto.front(sc), path)


KINDS: dict[str, Callable[[Path], None]] = {"regime-map": _map, "roofline": _roofline, "report-regime-map": _report,
                                            "pareto": _pareto}


@pytest.fixture(autouse=True)
def _without_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every figure these tests save is saved with its text and legend hidden (why: the module's docstring)."""
    matplotlib = pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    save = Figure.savefig

    def savefig(self: Figure, *args: object, **kwargs: object) -> None:
        for t in [*self.findobj(Text), *self.findobj(Legend)]:
            t.set_visible(False)
        save(self, *args, **kwargs)  # type: ignore[arg-type]

    assert matplotlib is not None
    monkeypatch.setattr(Figure, "savefig", savefig)


def _compare(expected: Path, actual: Path) -> str | None:
    from matplotlib.testing.compare import compare_images

    result: str | None = compare_images(str(expected), str(actual), tol=TOLERANCE)
    return result


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_figure_matches_its_golden_image(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pytest.importorskip("matplotlib")
    actual = tmp_path / f"{kind}.png"
    KINDS[kind](actual)
    golden = GOLDEN / f"{kind}.png"
    if request.config.getoption("--update-goldens"):
        GOLDEN.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(actual, golden)
        return
    if not golden.exists():
        pytest.fail(f"no golden image {golden}; run `pytest --update-goldens` and look at it")
    diff = _compare(golden, actual)
    assert diff is None, f"{kind} differs from {golden} (run `pytest --update-goldens` if the change is right): {diff}"


def test_the_tolerance_catches_a_curve_left_out_or_a_point_moved(tmp_path: Path) -> None:
    """The comparison is not so tolerant that it cannot fail: the golden map drawn without one dtype's
    two curves (int2), or with its point at 160k tokens instead of 128k, differs by more than TOLERANCE."""
    pytest.importorskip("matplotlib")
    full, less, moved = tmp_path / "full.png", tmp_path / "less.png", tmp_path / "moved.png"
    _map(full)
    cfg = rf.Config(LLAMA, B200, n_devices=2, w_kv=1.0)
    plot.regime_map_figure(cfg, 8, 128_000, ["fp8", "bf16", "int4"], less, kv_name="fp8")
    plot.regime_map_figure(cfg, 8, 160_000, ["fp8", "bf16", "int4", "int2"], moved, kv_name="fp8")
    assert _compare(full, less) is not None
    assert _compare(full, moved) is not None
    assert _compare(full, full) is None


def test_the_tolerance_catches_a_front_point_left_out(tmp_path: Path) -> None:
    """The Pareto golden is not so tolerant that it passes a front with one point fewer (point 1, 64 devices)."""
    pytest.importorskip("matplotlib")
    import attrs

    (sc,) = check_file(str(ROOT / "examples/w2-batch32.kvp")).scenarios
    f = pareto.front(sc)
    full, less = tmp_path / "full.png", tmp_path / "less.png"
    plot.pareto_figure(f, full)
    plot.pareto_figure(attrs.evolve(f, points=tuple(p for p in f.points if p.number != 1)), less)
    assert _compare(full, less) is not None
    assert _compare(full, full) is None
