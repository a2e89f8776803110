"""Figures: valid PNG/SVG files, regions drawn where SPEC's crossovers put them, the missing-matplotlib path."""

from __future__ import annotations

import math
import struct
from collections import Counter
from pathlib import Path

import attrs
import numpy as np
import pytest
from PIL import Image

from kvplan import catalog
from kvplan.base.errors import ModelInputError
from kvplan.lang import check_file
from kvplan.model import roofline as rf
from kvplan.planner import plans_for
from kvplan.planner.plan import Plan
from kvplan.render import plot, report
from tests.paths import ROOT

# Slow: draws the figures with matplotlib at the corners of the ranges (about 12 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

LLAMA = catalog.get_model("llama-3-70b")
B200 = catalog.get_device("b200")


def hex_rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def mode_color(img: Image.Image, col: int, row: int, r: int = 3) -> tuple[int, int, int]:
    """The commonest colour around a pixel: a thin grid line through it does not change the answer."""
    px = Counter(img.getpixel((c, w))[:3] for c in range(col - r, col + r + 1) for w in range(row - r, row + r + 1))
    return px.most_common(1)[0][0]


def data_pixel(info: plot.PlotInfo, x: float, y: float) -> tuple[int, int]:
    """Recompute the pixel of a data point from the axes box and log limits (rows from the top)."""
    left, top, right, bottom = info.axes_box
    fx = math.log(x / info.xlim[0]) / math.log(info.xlim[1] / info.xlim[0])
    fy = math.log(y / info.ylim[0]) / math.log(info.ylim[1] / info.ylim[0])
    return round(left + fx * (right - left)), round(bottom - fy * (bottom - top))


def test_regime_map_png_regions_at_formula_points(tmp_path: Path) -> None:
    cfg = rf.Config(LLAMA, B200, n_devices=2)
    info = plot.regime_map_figure(cfg, 8, 128_000, ["bf16", "int4"], tmp_path / "map.png", kv_name="bf16")
    data = (tmp_path / "map.png").read_bytes()
    assert len(data) > 30_000
    assert png_size(data) == (info.width, info.height) == (1000, 550)

    # SPEC §5 by hand: W = P·w_p, κ = 2·L·n_kv·d_h·w_kv, N = 2 devices of C = 192 GB.
    W, k, NC = LLAMA.params * 2, 2 * 80 * 8 * 128 * 2, 2 * 192e9
    b = 3  # between the batch grid lines at 2 and 4
    s_star, s_cap = W / (b * k), (NC - W) / (b * k)
    assert s_star < s_cap  # two B200s: a KV-bound band exists between the crossovers
    points = {
        "weight-bound": s_star / 8,
        "kv-bound": math.sqrt(s_star * s_cap),  # the band's middle on the log axis
        "capacity-bound": s_cap * 8,
    }
    img = Image.open(tmp_path / "map.png").convert("RGB")
    seen = {}
    for region, s in points.items():
        col, row = data_pixel(info, b, s)
        assert max(abs(col - info.pixel(b, s)[0]), abs(row - info.pixel(b, s)[1])) <= 1  # rounding
        seen[region] = mode_color(img, col, row)
        assert seen[region] == hex_rgb(plot.REGION_COLORS[region]), region
    assert len(set(seen.values())) == 3

    # the deployment's star is drawn at (b, s) = (8, 128k)
    assert img.getpixel(data_pixel(info, 8, 128_000)) == (0, 0, 0)


def test_single_b200_has_no_kv_bound_band(tmp_path: Path) -> None:
    """One B200 holds 141 GB of weights in 192 GB: s_cap(b) < s*(b) for every b, so no KV-bound
    pixels; just above s_cap is capacity-bound, just below is weight-bound."""
    cfg = rf.Config(LLAMA, B200)
    info = plot.regime_map_figure(cfg, 1, 64_000, ["bf16"], tmp_path / "one.png")
    img = Image.open(tmp_path / "one.png").convert("RGB")
    W, k = LLAMA.params * 2, 327_680
    for b in (6, 12, 48, 150):  # right of the point's label
        s_cap = (192e9 - W) / (b * k)
        assert s_cap < W / (b * k)
        assert mode_color(img, *data_pixel(info, b, s_cap * 1.6)) == hex_rgb(plot.REGION_COLORS["capacity-bound"])
        assert mode_color(img, *data_pixel(info, b, s_cap / 1.6)) == hex_rgb(plot.REGION_COLORS["weight-bound"])
    left, top, right, bottom = (int(v) for v in info.axes_box)
    inside = np.asarray(img)[top + 2:bottom - 2, left + 2:right - 2].reshape(-1, 3)
    kv_rgb = np.array(hex_rgb(plot.REGION_COLORS["kv-bound"]))
    assert not np.any(np.all(inside == kv_rgb, axis=1))
    # no region in the legend that the figure does not have: no KV-bound patch anywhere in the image
    assert not np.any(np.all(np.asarray(img).reshape(-1, 3) == kv_rgb, axis=1))
    assert not any(e.startswith("KV-bound") for e in info.legend), info.legend
    assert info.legend[:2] == ("weight-bound (s < s*)", "capacity-bound (s > s_cap)")


def test_roofline_point_sits_at_spec_intensity(tmp_path: Path) -> None:
    cfg = rf.Config(LLAMA, B200)
    b, s = 4, 32_000
    info = plot.roofline_figure(cfg, b, s, tmp_path / "roof.png")
    assert png_size((tmp_path / "roof.png").read_bytes()) == (info.width, info.height)
    P, k = LLAMA.params, 327_680
    F = 2 * P * b + 4 * b * s * 80 * 64 * 128
    M = 2 * P + b * s * k
    inten = F / M
    assert inten < B200.compute / B200.bandwidth  # memory-bound: achieved = β·I on the roof
    img = Image.open(tmp_path / "roof.png").convert("RGB")
    assert img.getpixel(data_pixel(info, inten, B200.bandwidth * inten)) == (0, 0, 0)
    assert info.xlim[0] < inten < B200.compute / B200.bandwidth < info.xlim[1]


def test_svg_is_deterministic(tmp_path: Path) -> None:
    cfg = rf.Config(LLAMA, B200, n_devices=2, w_kv=1.0)
    texts = []
    for name in ("a.svg", "b.svg"):
        plot.regime_map_figure(cfg, 16, 256_000, ["bf16", "fp8", "int2"], tmp_path / name)
        texts.append((tmp_path / name).read_text(encoding="utf-8"))
    assert texts[0] == texts[1]
    assert texts[0].lstrip().startswith("<?xml") and "<svg" in texts[0]
    assert "<dc:date>" not in texts[0]


def test_embed_regime_map_returns_relative_name(tmp_path: Path) -> None:
    cfg = rf.Config(LLAMA, B200, n_devices=4)
    out = tmp_path / "report" / "img"
    picture = plot.MapPicture(widths=(("bf16", 2.0), ("int4", 0.5)), points=(plot.MapPoint(32, 128_000, "here"),),
                              caption=("a caption",), title="a title")
    rel = plot.embed_regime_map(cfg, picture, out)
    assert not Path(rel).is_absolute() and rel.endswith(".svg")
    first = (out / rel).read_bytes()
    assert plot.embed_regime_map(cfg, picture, out) == rel
    assert (out / rel).read_bytes() == first


@pytest.mark.parametrize("params, memory, bandwidth, compute, batch, context", [
    (1e15, 1e6, 1e6, 1e9, 2**20, 2**30),  # s* at b = 1 is 2·10^15/2048 ≈ 10^12 tokens
    (1.0, 1e15, 1e15, 1e18, 1, 1),
    (1e15, 1e15, 1e15, 1e18, 1, 2**30),
])
def test_figures_at_the_corners_of_the_ranges_have_finite_bounded_axes(
        tmp_path: Path, params: float, memory: float, bandwidth: float, compute: float, batch: int,
        context: int) -> None:
    import attrs

    from kvplan.catalog.hf_config import resolve_model

    # the examples' 4-layer config, κ = 2 KB: s* of 10^15 parameters at b = 1 is about 10^12 tokens
    tiny = resolve_model(None, str(ROOT / "examples/models/tiny/config.json"))
    model = attrs.evolve(tiny, params=params, params_active=params)
    device = attrs.evolve(B200, memory=memory, bandwidth=bandwidth, compute=compute)
    cfg = rf.Config(model, device, n_devices=1)
    info = plot.regime_map_figure(cfg, batch, context, ["bf16", "int2"], tmp_path / "m.svg")
    lo, hi = info.ylim
    assert all(isinstance(v, float) and math.isfinite(v) for v in (lo, hi)), info.ylim
    assert 1.0 <= lo <= context <= hi <= 1e12 and lo < hi  # the deployment's point is on the axes, and they are bounded
    roof = plot.roofline_figure(cfg, batch, context, tmp_path / "r.svg")
    assert all(math.isfinite(v) for v in (*roof.xlim, *roof.ylim)), (roof.xlim, roof.ylim)


def test_regime_map_axes_end_just_beyond_the_curves(tmp_path: Path) -> None:
    """The context axis is bounded by the curves it draws (not rounded out to 100M tokens): SPEC §5 by
    hand at the two ends of the batch axis, a quarter octave below b = 1 and at b = 256."""
    cfg = rf.Config(LLAMA, B200, n_devices=2, w_kv=1.0)
    info = plot.regime_map_figure(cfg, 8, 128_000, ["fp8", "bf16", "int4", "int2"], tmp_path / "m.png",
                                  kv_name="fp8")
    W, NC = LLAMA.params * 2, 2 * 192e9
    b_lo, b_hi = 2 ** -0.25, 256
    kappa = {w: 2 * 80 * 8 * 128 * w for w in (2.0, 1.0, 0.5, 0.25)}
    top = (NC - W) / (b_lo * kappa[0.25])      # s_cap of int2 at the smallest batch: the highest curve
    bottom = W / (b_hi * kappa[2.0])           # s* of bf16 at the largest: the lowest
    assert info.xlim == pytest.approx((b_lo, b_hi))
    assert info.ylim == pytest.approx((bottom / 1.6, top * 1.6), rel=1e-9)
    assert info.ylim[1] < 2e7  # the old map ran to 1e8


def test_regime_map_legend_is_short_and_curves_are_labelled_at_their_ends(tmp_path: Path) -> None:
    cfg = rf.Config(LLAMA, B200, n_devices=2, w_kv=1.0)
    info = plot.regime_map_figure(cfg, 8, 128_000, ["fp8", "bf16", "int4", "int2"], tmp_path / "m.png",
                                  kv_name="fp8")
    assert info.legend == ("weight-bound (s < s*)", "KV-bound (s* < s < s_cap)", "capacity-bound (s > s_cap)",
                           "s*(b): traffic crossover", "s_cap(b): capacity crossover", "deployment: b = 8, s = 128k")
    for name in ("fp8", "bf16", "int4", "int2"):
        assert f"s* {name}" in info.texts and f"s_cap {name}" in info.texts
    # the caption: s* = P·w_p/(b·κ) and s_cap = (N·C − P·w_p)/(b·κ) at b = 8 with κ = 163,840 B (fp8)
    W, k = LLAMA.params * 2, 163_840
    s_star, s_cap = W / (8 * k), (2 * 192e9 - W) / (8 * k)
    assert round(s_star, -2) == 107_700 and round(s_cap, -2) == 185_300
    caption = info.texts[-1]
    assert "s* = 107.7k tokens" in caption and "s_cap = 185.3k tokens" in caption
    assert f"(s/s* = {128_000 / s_star:.3g}×)" in caption
    assert "the point b = 8, s = 128k tokens is kv-bound" in caption and "derived" in caption


def test_dtypes_of_one_width_are_one_curve() -> None:
    cfg = rf.Config(LLAMA, B200)
    cfgs = {n: attrs.evolve(cfg, w_kv=w) for n, w in (("fp8", 1.0), ("bf16", 2.0), ("int8", 1.0))}
    assert list(plot._by_width(cfgs)) == ["fp8 = int8", "bf16"]


H100 = catalog.get_device("h100-sxm")


def test_weights_that_do_not_fit_are_said_and_only_drawn_curves_are_listed(tmp_path: Path) -> None:
    """141 GB of 16-bit weights on one 80 GB H100: s_cap(b) < 0 for every b, so no s_cap curve, no
    weight- or KV-bound pixel; the legend lists only what is drawn and the figure says why."""
    cfg = rf.Config(LLAMA, H100)
    assert LLAMA.params * 2 > H100.memory
    info = plot.regime_map_figure(cfg, 4, 32_000, ["bf16", "fp8", "int4", "int2"], tmp_path / "no.png")
    assert info.legend == ("capacity-bound", "s*(b): traffic crossover", "deployment: b = 4, s = 32k")
    assert not any(t.startswith("s_cap ") for t in info.texts)
    note = next(t for t in info.texts if "do not fit" in t)
    assert "141.1 GB of weights, 80 GB usable on 1 × h100-sxm" in note and "capacity-bound" in note
    img = np.asarray(Image.open(tmp_path / "no.png").convert("RGB"))
    left, top, right, bottom = (int(v) for v in info.axes_box)
    inside = img[top + 2:bottom - 2, left + 2:right - 2].reshape(-1, 3)
    for region in ("weight-bound", "kv-bound"):
        assert not np.any(np.all(inside == np.array(hex_rgb(plot.REGION_COLORS[region])), axis=1)), region
    assert "s_cap: none" in info.texts[-1] and "is capacity-bound" in info.texts[-1]


_EVICT = """kvplan 1
deployment "evict" {
    model   = llama-3-70b
    device  = b200
    devices = 2
    workload {
        batch   = 16
        context = 128k
    }
    quality {
        budget        = aggressive
        eviction      = allowed
        min_retention = 0.5
    }
    pin {
        kv_dtype  = fp8
        retention = 0.5
    }
}
"""


def _plans(path: Path) -> list[Plan]:
    return plans_for(check_file(str(path)))


def test_report_picture_curves_pass_through_the_plans_own_figures() -> None:
    """The report's map is drawn on the plan's layout: at the plan's batch, its dtype's curves give the
    s* and s_cap the plan prints (R8), and bf16 and every dtype the search evaluated are drawn too."""
    (p,) = _plans(ROOT / "examples/w2-batch32.kvp")
    cfg, pic = report.plan_picture(p)
    names = [n for n, _ in pic.widths]
    assert names[0] == p.kv_dtype.id and "bf16" in names
    q = next(d for d in p.decisions if d.domain == "quantization")
    assert {o.choice for o in q.options if o.numbers} <= set(names)
    main = attrs.evolve(cfg, w_kv=pic.widths[0][1])
    b = p.scenario.batch
    assert float(rf.s_star(main, b)) == pytest.approx(p.map_after.s_star.value * p.retention, rel=1e-9)
    assert float(rf.s_cap(main, b, pic.block_size)) == pytest.approx(p.map_after.s_cap.value, rel=1e-9)
    assert [(pt.batch, pt.context) for pt in pic.points] == [(b, p.scenario.context)] * 2  # r = 1: the curves move
    assert p.map_after.s_star.human in pic.caption[0] and p.map_before.s_cap.human in pic.caption[1]
    assert p.regime_after in pic.caption[0] and p.regime_before in pic.caption[1]


def test_report_picture_moves_the_point_by_what_eviction_keeps(tmp_path: Path) -> None:
    spec = tmp_path / "evict.kvp"
    spec.write_text(_EVICT, encoding="utf-8")
    (p,) = _plans(spec)
    assert p.retention == 0.5
    cfg, pic = report.plan_picture(p)
    spec_pt, plan_pt = pic.points
    assert (spec_pt.context, plan_pt.context) == (128_000, 64_000)
    # the plan's point against its dtype's curves (no retention in them) is the plan's R8 regime
    main = attrs.evolve(cfg, w_kv=pic.widths[0][1])
    s_star, s_cap = float(rf.s_star(main, 16)), float(rf.s_cap(main, 16, pic.block_size))
    assert str(rf.regime(plan_pt.context, s_star, s_cap)) == p.regime_after == "kv-bound"
    assert plan_pt.context / s_star == pytest.approx(p.map_after.context_over_s_star.value, rel=1e-9)
    info = plot.draw_regime_map(cfg, pic, tmp_path / "evict.png")
    assert info.legend[-2:] == ("spec as written (R1)", "the plan (R8)")
    assert "64k tokens kept" in info.texts[-1]
    img = Image.open(tmp_path / "evict.png").convert("RGB")
    assert img.getpixel(data_pixel(info, 16, 128_000)) == (0, 0, 0)  # the star
    # the arrow's shaft, black, between the star (above) and the diamond
    col, row_star = data_pixel(info, 16, 128_000)
    _, row_plan = data_pixel(info, 16, 64_000)
    mid = (row_star + row_plan) // 2
    assert any(img.getpixel((c, mid)) == (0, 0, 0) for c in range(col - 2, col + 3))


def test_a_point_below_one_token_is_on_the_axes(tmp_path: Path) -> None:
    """Eviction at r = 0.5 of a one-token context keeps half a token: the plan's point is drawn, and the
    context axis reaches below it instead of refusing it (a deployment's own context stays at least 1)."""
    cfg = rf.Config(LLAMA, B200, n_devices=2)
    pic = plot.MapPicture(widths=(("bf16", 2.0),), caption=("c",), title="t",
                          points=(plot.MapPoint(1, 1, "spec"), plot.MapPoint(1, 0.5, "plan")))
    info = plot.draw_regime_map(cfg, pic, tmp_path / "half.png")
    assert info.ylim[0] == pytest.approx(0.5 / 1.6)  # the point inside, with the same room as any other
    with pytest.raises(ModelInputError):
        plot.draw_regime_map(cfg, attrs.evolve(pic, points=(plot.MapPoint(1, 0.5, "spec"),)), tmp_path / "x.png")
    with pytest.raises(plot.PlotError):
        plot.draw_regime_map(cfg, attrs.evolve(pic, points=(plot.MapPoint(1, 1, "a"), plot.MapPoint(1, 0, "b"))),
                             tmp_path / "y.png")
