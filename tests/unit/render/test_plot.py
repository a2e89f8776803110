"""Figures: valid PNG/SVG files, regions drawn where SPEC's crossovers put them, the missing-matplotlib path."""

from __future__ import annotations

import math
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from kvplan import catalog
from kvplan.model import roofline as rf
from kvplan.render import plot
from tests.paths import ROOT

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
