"""Figures of the regime map and the roofline, drawn with matplotlib (the optional `plot` extra).

matplotlib is imported inside the drawing functions only, so the rest of kvplan
starts without it. Figures are built on `matplotlib.figure.Figure` with the Agg
canvas rather than through pyplot: no global figure state, and no switching of
a backend someone else (a notebook, say) has chosen. Output is deterministic:
fixed size and layout, a fixed SVG hash salt, no dates or software stamps.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Union

import attrs
import numpy as np
import numpy.typing as npt

from kvplan.base.errors import KvplanError
from kvplan.base.records import record
from kvplan.catalog import DTYPES
from kvplan.model import roofline as rf

if TYPE_CHECKING:  # matplotlib is optional and loaded by the drawing functions only; these are its types
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

#: Fill colours of the three regimes (ColorBrewer "Paired", light tones).
REGION_COLORS = {"weight-bound": "#a6cee3", "kv-bound": "#fdbf6f", "capacity-bound": "#fb9a99"}
_S_STAR_COLOR = "#1f4e79"
_S_CAP_COLOR = "#7f0000"
#: matplotlib linestyles: a named one, or (offset, (on, off, ...)) dash lengths in points.
_LINESTYLES: tuple[Union[str, tuple[int, tuple[int, ...]]], ...] = (
    "-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 3)))
_SIZE_IN = (10.0, 5.5)
_DPI = 100
_MARGINS = {"left": 0.09, "right": 0.64, "bottom": 0.11, "top": 0.91}  # fixed: pixel positions are stable

PathLike = Union[str, "os.PathLike[str]"]


class PlotError(KvplanError):
    """A figure kvplan cannot draw (matplotlib missing, an unknown file type)."""


@record
class PlotInfo:
    """Where a figure went and how data maps to its pixels.

    `axes_box` is (left, top, right, bottom) of the plotting area in image pixels
    (rows counted from the top); `xlim`/`ylim` are the data limits of log axes.
    """

    path: str
    width: int
    height: int
    axes_box: tuple[float, float, float, float]
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    colors: tuple[tuple[str, str], ...] = ()

    def pixel(self, x: float, y: float) -> tuple[int, int]:
        """(column, row) of the data point (x, y) in the saved image."""
        left, top, right, bottom = self.axes_box
        fx = (math.log10(x) - math.log10(self.xlim[0])) / (math.log10(self.xlim[1]) - math.log10(self.xlim[0]))
        fy = (math.log10(y) - math.log10(self.ylim[0])) / (math.log10(self.ylim[1]) - math.log10(self.ylim[0]))
        return int(left + fx * (right - left)), int(bottom - fy * (bottom - top))


def _matplotlib() -> tuple[type[Figure], type[FigureCanvasAgg], ModuleType]:
    """(Figure, FigureCanvasAgg, matplotlib) or the one-line error the CLI prints."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install matplotlib") from None
    return Figure, FigureCanvasAgg, matplotlib


def _format(path: PathLike) -> str:
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in ("png", "svg"):
        raise PlotError(f"cannot write a figure to '{os.fspath(path)}'", help="name a .png or .svg file")
    return ext


def _tokens_label(x: float, _pos: object = None) -> str:
    for f, u in ((1e6, "M"), (1e3, "k")):
        if x >= f:
            return f"{x / f:g}{u}"
    return f"{x:g}"


def _new_figure(title: str) -> tuple[Figure, Axes]:
    Figure, FigureCanvasAgg, _ = _matplotlib()
    fig = Figure(figsize=_SIZE_IN, dpi=_DPI)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(**_MARGINS)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title, fontsize=10)
    return fig, ax


def _save(fig: Figure, ax: Axes, path: PathLike, colors: Sequence[tuple[str, str]] = ()) -> PlotInfo:
    """Save deterministically and report the axes' pixel box."""
    _, _, matplotlib = _matplotlib()
    fmt = _format(path)
    with matplotlib.rc_context({"svg.hashsalt": "kvplan", "svg.fonttype": "path"}):
        fig.canvas.draw()
        box = ax.get_window_extent()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(os.fspath(path), format=fmt, dpi=_DPI, metadata=metadata)
    width, height = (int(round(v)) for v in fig.canvas.get_width_height())
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    return PlotInfo(path=os.fspath(path), width=width, height=height,
                    axes_box=(box.x0, height - box.y1, box.x1, height - box.y0),
                    xlim=(x0, x1), ylim=(y0, y1), colors=tuple(colors))


def _dtype_name(w_kv: float, names: Sequence[str]) -> str:
    for n in names:
        if DTYPES[n].width == w_kv:
            return n
    return f"{w_kv * 8:g}-bit"


#: The regime map's context axis ends here: 1,000× the longest context a spec may state (2^30
#: tokens), so every plannable point is inside and no crossover stretches the axis without bound.
_Y_TOP = 1e12


def _positive(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.where(np.isfinite(x) & (x > 0), x, np.nan)


def _regime_y_range(cfg: rf.Config, cfgs: Sequence[rf.Config], context: int, b_max: float) -> tuple[float, float]:
    """The context axis: from the deployment's context and every curve's ends, padded to powers of ten."""
    ends = [float(context)]
    for c in [cfg, *cfgs]:
        for f in (rf.s_star, rf.s_cap):
            v = _positive(f(c, np.array([1.0, b_max])))
            ends.extend(float(x) for x in v if np.isfinite(x))
    # floats (a power of ten as a Python int above 2^63 is no number to matplotlib), and bounded: a
    # crossover far beyond any context (s* of a 10^15-parameter model) is clipped at the axis' top
    ends = [min(max(x, 1.0), _Y_TOP) for x in ends]
    y_lo = max(1.0, 10.0 ** math.floor(math.log10(min(ends) / 2)))
    y_hi = min(_Y_TOP, 10.0 ** math.ceil(math.log10(max(ends) * 2)))
    return y_lo, y_hi


def _fill_regimes(ax: Axes, cfg: rf.Config, b: npt.NDArray[np.float64], y_lo: float, y_hi: float) -> None:
    """The three regimes of the deployment's KV width, filled between s*(b) and s_cap(b)."""
    ss = np.clip(np.nan_to_num(rf.s_star(cfg, b), nan=y_hi, posinf=y_hi), y_lo, y_hi)
    sc_raw = rf.s_cap(cfg, b)
    sc = np.clip(np.where(sc_raw > 0, np.nan_to_num(sc_raw, posinf=y_hi), y_lo), y_lo, y_hi)
    ax.fill_between(b, y_lo, np.minimum(ss, sc), color=REGION_COLORS["weight-bound"], linewidth=0,
                    antialiased=False, zorder=1)
    ax.fill_between(b, ss, sc, where=(sc > ss).tolist(), color=REGION_COLORS["kv-bound"], linewidth=0,
                    antialiased=False, zorder=1)
    ax.fill_between(b, sc, y_hi, color=REGION_COLORS["capacity-bound"], linewidth=0, antialiased=False, zorder=1)
    ax.grid(True, which="major", color="white", linewidth=0.6, alpha=0.7, zorder=1.5)


def _regime_curves(ax: Axes, cfgs: Mapping[str, rf.Config], kv_name: str, b: npt.NDArray[np.float64],
                   batch: int, context: int) -> list[Artist]:
    """The legend's patches, then s*(b) and s_cap(b) of each dtype and the deployment's point."""
    from matplotlib.patches import Patch

    handles: list[Artist] = [
        Patch(facecolor=REGION_COLORS["weight-bound"], label="weight-bound (s < s*)"),
        Patch(facecolor=REGION_COLORS["kv-bound"], label="KV-bound (s* < s < s_cap)"),
        Patch(facecolor=REGION_COLORS["capacity-bound"], label="capacity-bound (s > s_cap)")]
    for i, (name, c) in enumerate(cfgs.items()):
        style = _LINESTYLES[i % len(_LINESTYLES)]
        lw = 2.2 if name == kv_name else 1.3
        handles += ax.plot(b, _positive(rf.s_star(c, b)), color=_S_STAR_COLOR, linestyle=style, linewidth=lw,
                           label=f"s*(b)  {name}", zorder=3)
        handles += ax.plot(b, _positive(rf.s_cap(c, b)), color=_S_CAP_COLOR, linestyle=style, linewidth=lw,
                           label=f"s_cap(b)  {name}", zorder=3)
    handles += ax.plot([batch], [context], marker="*", markersize=15, color="black", linestyle="none",
                       label=f"deployment: b = {batch}, s = {_tokens_label(context)}", zorder=4)
    return handles


def regime_map_figure(cfg: rf.Config, batch: int, context: int, kv_dtypes: Sequence[str], path: PathLike,
                      *, kv_name: Optional[str] = None) -> PlotInfo:
    """Context (log y) against batch (log x): the three regimes filled for the deployment's KV
    width, s*(b) and s_cap(b) for each dtype in `kv_dtypes`, and the deployment's point."""
    rf.check_batch_context(batch, context)
    names = [DTYPES[n].id for n in kv_dtypes]
    kv_name = kv_name or _dtype_name(cfg.w_kv, names)
    if kv_name not in names and kv_name in DTYPES:
        names.insert(0, kv_name)
    cfgs = {n: attrs.evolve(cfg, w_kv=DTYPES[n].width) for n in names}
    b_max = float(2 ** math.ceil(math.log2(max(256, 8 * batch))))
    b = np.geomspace(1.0, b_max, 512, dtype=np.float64)
    y_lo, y_hi = _regime_y_range(cfg, list(cfgs.values()), context, b_max)

    fig, ax = _new_figure(f"{cfg.model.id} on {cfg.n_devices} × {cfg.device.id}, weights "
                             f"{_dtype_name(cfg.w_p, list(DTYPES))}, {cfg.placement} — regimes for {kv_name} KV")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(1.0, b_max)
    ax.set_ylim(y_lo, y_hi)
    _fill_regimes(ax, cfg, b, y_lo, y_hi)
    handles = _regime_curves(ax, cfgs, kv_name, b, batch, context)

    from matplotlib.ticker import FuncFormatter

    ax.set_xlabel("batch (concurrent sequences)")
    ax.set_ylabel("context (tokens per sequence)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(_tokens_label))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8, frameon=False)
    fig.text(0.66, 0.04, "curves derived (docs/model.md §5):\ns* = P·w_p/(b·κ), s_cap = (N·C − P·w_p)/(b·κ)",
             fontsize=7, ha="left")
    return _save(fig, ax, path, colors=tuple(REGION_COLORS.items()))


def roofline_figure(cfg: rf.Config, batch: int, context: int, path: PathLike) -> PlotInfo:
    """The classic roofline of one device: attainable FLOP/s against intensity, the ridge, the
    two intensity limits of decode (2b/w_p and 2g/w_kv) and the deployment's point."""
    rf.check_batch_context(batch, context)
    d, m = cfg.device, cfg.model
    ridge = d.compute / d.bandwidth
    inten = float(rf.intensity(cfg, batch, context))
    short, long = rf.intensity_limits(m, batch, cfg.w_p, cfg.w_kv)
    short_v = float(short)
    t = rf.step_time(cfg, batch, context)
    achieved = float(rf.decode_flops(m, batch, context)) / (cfg.tp * float(t["step"]))
    beta_kv, upper = rf.beta_eff(d, cfg.placement, batch)

    x_lo = 10 ** math.floor(math.log10(min(short_v, long, inten, 1.0) / 2))
    x_hi = 10 ** math.ceil(math.log10(max(ridge, long, inten) * 4))
    x = np.geomspace(x_lo, x_hi, 400)

    fig, ax = _new_figure(f"roofline: {m.id} on {d.id}, batch {batch}, context {_tokens_label(context)}, "
                             f"KV {cfg.w_kv * 8:g}-bit")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    handles = ax.plot(x, np.minimum(d.compute, d.bandwidth * x), color="black", linewidth=2,
                      label=f"roof: min(π, β·I), β = {d.bandwidth / 1e12:g} TB/s")
    if float(beta_kv) != d.bandwidth:
        handles += ax.plot(x, np.minimum(d.compute, float(beta_kv) * x), color="0.4", linewidth=1.2, linestyle="--",
                           label=f"{cfg.placement} β_eff = {float(beta_kv) / 1e12:.3g} TB/s"
                                 + (" (upper bound)" if upper else ""))
    handles.append(ax.axvline(ridge, color="0.3", linestyle=":", linewidth=1.2,
                              label=f"ridge π/β = {ridge:.3g} FLOP/B"))
    handles.append(ax.axvline(short_v, color=_S_STAR_COLOR, linestyle="--", linewidth=1.2,
                              label=f"short-context limit 2b/w_p = {short_v:.3g} FLOP/B"))
    handles.append(ax.axvline(long, color=_S_CAP_COLOR, linestyle="--", linewidth=1.2,
                              label=f"long-context limit 2g/w_kv = {long:.3g} FLOP/B"))
    handles += ax.plot([inten], [achieved], marker="*", markersize=15, color="black", linestyle="none",
                       label=f"deployment: I = {inten:.3g} FLOP/B, {achieved / 1e12:.3g} TFLOP/s", zorder=4)
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _p: f"{y / 1e12:g}T"))
    ax.set_xlabel("arithmetic intensity I = F/M (FLOP/B)")
    ax.set_ylabel("attainable compute per device (FLOP/s)")
    ax.grid(True, which="major", color="0.9", linewidth=0.6)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8, frameon=False)
    fig.text(0.66, 0.04, "derived (docs/model.md §4): F = 2·P_active·b + 4·b·s·L·n_q·d_h,\nM = P·w_p + b·s·κ; "
             "the point is F / (tp·T_step)", fontsize=7, ha="left")
    return _save(fig, ax, path)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def embed_regime_map(cfg: rf.Config, batch: int, context: int, kv_dtypes: Sequence[str],
                     out_dir: PathLike, *, kv_name: Optional[str] = None) -> str:
    """Write the regime map as SVG into `out_dir` and return its path relative to `out_dir`
    (a name derived from the deployment, so that the same deployment writes the same file)."""
    name = (f"regime-map-{_slug(cfg.model.id)}-{cfg.n_devices}x{_slug(cfg.device.id)}-"
            f"kv{cfg.w_kv * 8:g}bit-b{batch}-s{context}.svg")
    os.makedirs(out_dir, exist_ok=True)
    regime_map_figure(cfg, batch, context, kv_dtypes, Path(out_dir) / name, kv_name=kv_name)
    return name


__all__ = ["PlotError", "PlotInfo", "REGION_COLORS", "embed_regime_map", "regime_map_figure", "roofline_figure"]
