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
import textwrap
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Union

import attrs
import numpy as np
import numpy.typing as npt

from kvplan.base.errors import KvplanError
from kvplan.base.outputs import replaced_file
from kvplan.base.records import record
from kvplan.base.units import fmt_bytes, fmt_tokens
from kvplan.catalog import DTYPES
from kvplan.model import roofline as rf

if TYPE_CHECKING:  # matplotlib is optional and loaded by the drawing functions only; these are its types
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from kvplan.planner.pareto import Front, Point

#: Fill colours of the three regimes (ColorBrewer "Paired", light tones).
REGION_COLORS = {"weight-bound": "#a6cee3", "kv-bound": "#fdbf6f", "capacity-bound": "#fb9a99"}
_S_STAR_COLOR = "#1f4e79"
_S_CAP_COLOR = "#7f0000"
#: One line colour per KV dtype (dark tones, readable on every region fill); others cycle `_MORE_COLORS`.
_DTYPE_COLORS = {"fp32": "#525252", "bf16": "#111111", "fp16": "#4d4d4d", "fp8": "#6a3d9a", "int8": "#8c2d04",
                 "int4": "#b2182b", "fp4": "#01665e", "int2": "#1a7a1a"}
_MORE_COLORS = ("#2c7bb6", "#7b3294", "#a6611a")
#: The font every figure is drawn in: it ships with matplotlib, so a figure looks the same on every machine.
_FONT = "DejaVu Sans"
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
    (rows counted from the top); `xlim`/`ylim` are the data limits of log axes; `legend` the legend's
    entries and `texts` every other text drawn (curve labels, notes, point labels, the caption), in order.
    """

    path: str
    width: int
    height: int
    axes_box: tuple[float, float, float, float]
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    colors: tuple[tuple[str, str], ...] = ()
    legend: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

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


def _font() -> AbstractContextManager[None]:
    """The settings every figure is drawn under: the one font (`_FONT`) and a fixed SVG hash salt, so
    that the same numbers draw the same image."""
    _, _, matplotlib = _matplotlib()
    ctx: AbstractContextManager[None] = matplotlib.rc_context(
        {"font.family": "sans-serif", "font.sans-serif": [_FONT], "svg.hashsalt": "kvplan", "svg.fonttype": "path"})
    return ctx


def _new_figure(title: str, margins: Mapping[str, float] = _MARGINS) -> tuple[Figure, Axes]:
    Figure, FigureCanvasAgg, _ = _matplotlib()
    fig = Figure(figsize=_SIZE_IN, dpi=_DPI)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(**margins)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title, fontsize=10)
    return fig, ax


def _save(fig: Figure, ax: Axes, path: PathLike, colors: Sequence[tuple[str, str]] = ()) -> PlotInfo:
    """Save deterministically and report the axes' pixel box."""
    fmt = _format(path)
    with _font():
        fig.canvas.draw()
        box = ax.get_window_extent()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        with replaced_file(os.fspath(path)) as fh:  # kvplan.base.outputs: no link or device written through
            fig.savefig(fh, format=fmt, dpi=_DPI, metadata=metadata)
    width, height = (int(round(v)) for v in fig.canvas.get_width_height())
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    legend = ax.get_legend()
    labels = tuple(t.get_text() for t in legend.get_texts()) if legend is not None else ()
    texts = tuple(t.get_text() for t in (*ax.texts, *fig.texts) if t.get_text())
    return PlotInfo(path=os.fspath(path), width=width, height=height,
                    axes_box=(box.x0, height - box.y1, box.x1, height - box.y0),
                    xlim=(x0, x1), ylim=(y0, y1), colors=tuple(colors), legend=labels, texts=texts)


def _dtype_name(w_kv: float, names: Sequence[str]) -> str:
    for n in names:
        if DTYPES[n].width == w_kv:
            return n
    return f"{w_kv * 8:.3g}-bit"


#: The regime map's context axis ends here: 1,000× the longest context a spec may state (2^30
#: tokens), so every plannable point is inside and no crossover stretches the axis without bound.
_Y_TOP = 1e12
#: The batch axis spans this many octaves, from up to 16× below the deployment's batch.
_OCTAVES = 8
#: Each end of the context axis lies this factor beyond the outermost curve or point.
_Y_PAD = 1.6
#: The caption's lines are wrapped at this many characters (8-point DejaVu Sans across the figure).
_CAPTION_WIDTH = 160
_MAP_MARGINS = {"left": 0.08, "right": 0.70, "bottom": 0.20, "top": 0.92}


@record
class MapPoint:
    """A point marked on the regime map: batch, context (tokens per sequence; KV tokens held, when the plan
    evicts) and the words beside it."""

    batch: float
    context: float
    label: str
    key: str = ""  # its legend entry; empty: the label's first line


@record
class MapPicture:
    """What a regime map shows besides its layout (the `rf.Config` it is drawn on): the KV dtypes whose
    s*(b) and s_cap(b) it draws, each with its bytes per value, the first one shaded; the marked points,
    with an arrow from the first to the second when there are two; the caption's lines; the title."""

    widths: tuple[tuple[str, float], ...]
    points: tuple[MapPoint, ...]
    caption: tuple[str, ...]
    title: str
    y_label: str = "context (tokens per sequence)"
    block_size: Optional[int] = None


def _positive(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.where(np.isfinite(x) & (x > 0), x, np.nan)


def _batch_range(batch: float) -> tuple[float, float]:
    """Eight octaves of batch around the deployment's: from 16× below it (not below 1)."""
    lo = 2.0 ** max(0, math.floor(math.log2(batch)) - 4)
    return lo, lo * 2.0 ** _OCTAVES


def _curve_ends(cfgs: Mapping[str, rf.Config], b_ends: npt.NDArray[np.float64], fits: bool,
                block: Optional[int]) -> list[float]:
    ends: list[float] = []
    for c in cfgs.values():
        for v in (rf.s_star(c, b_ends), rf.s_cap(c, b_ends, block) if fits else np.array([np.nan])):
            ends.extend(float(x) for x in _positive(np.asarray(v, dtype=np.float64)) if np.isfinite(x))
    return ends


def _regime_y_range(ends: Sequence[float], floor: float = 1.0) -> tuple[float, float]:
    """The context axis: just beyond the curves' ends and the points (a crossover far beyond any
    context, s* of a 10^15-parameter model, is clipped at `_Y_TOP`; the axis starts at 1 token, or lower
    for a point below it, `floor`: the tokens eviction keeps of a one-token context). Floats: a power of
    ten as a Python int above 2^63 is no number to matplotlib."""
    clipped = [min(max(float(x), floor), _Y_TOP) for x in ends]
    lo, hi = max(floor, min(clipped) / _Y_PAD), min(_Y_TOP, max(clipped) * _Y_PAD)
    return (lo, hi) if hi > lo else (max(floor, lo / 10), min(_Y_TOP, hi * 10))


def _fill_regimes(ax: Axes, cfg: rf.Config, b: npt.NDArray[np.float64], y_lo: float, y_hi: float,
                  block: Optional[int]) -> None:
    """The three regimes of the shaded KV width, filled between s*(b) and s_cap(b)."""
    ss = np.clip(np.nan_to_num(rf.s_star(cfg, b), nan=y_hi, posinf=y_hi), y_lo, y_hi)
    sc_raw = rf.s_cap(cfg, b, block)
    sc = np.clip(np.where(sc_raw > 0, np.nan_to_num(sc_raw, posinf=y_hi), y_lo), y_lo, y_hi)
    ax.fill_between(b, y_lo, np.minimum(ss, sc), color=REGION_COLORS["weight-bound"], linewidth=0,
                    antialiased=False, zorder=1)
    ax.fill_between(b, ss, sc, where=(sc > ss).tolist(), color=REGION_COLORS["kv-bound"], linewidth=0,
                    antialiased=False, zorder=1)
    ax.fill_between(b, sc, y_hi, color=REGION_COLORS["capacity-bound"], linewidth=0, antialiased=False, zorder=1)
    ax.grid(True, which="major", color="white", linewidth=0.6, alpha=0.7, zorder=1.5)


def _color(name: str, i: int) -> str:
    return _DTYPE_COLORS.get(name, _MORE_COLORS[i % len(_MORE_COLORS)])


def _by_width(cfgs: Mapping[str, rf.Config]) -> dict[str, rf.Config]:
    """The dtypes of one width drawn once, named together (fp8 = int8): their curves are the same."""
    groups: dict[float, list[str]] = {}
    for name, c in cfgs.items():
        groups.setdefault(c.w_kv, []).append(name)
    return {" = ".join(names): cfgs[names[0]] for names in groups.values()}


def _regime_curves(ax: Axes, cfgs: Mapping[str, rf.Config], b: npt.NDArray[np.float64], fits: bool,
                   block: Optional[int]) -> list[tuple[float, str, str, bool]]:
    """s*(b) solid and s_cap(b) dashed per dtype, the shaded one (the first) thick; each curve's right
    end (its value at the last batch), label, colour and whether it is the shaded one's."""
    ends: list[tuple[float, str, str, bool]] = []
    for i, (name, c) in enumerate(_by_width(cfgs).items()):
        main, color = i == 0, _color(name.split(" = ")[0], i)
        lw, alpha, z = (2.4, 1.0, 3.0) if main else (1.2, 0.85, 2.5)
        curves = [("s*", "-", rf.s_star(c, b))] + ([("s_cap", "--", rf.s_cap(c, b, block))] if fits else [])
        for what, style, y in curves:
            yv = _positive(np.asarray(y, dtype=np.float64))
            ax.plot(b, yv, color=color, linestyle=style, linewidth=lw, alpha=alpha, zorder=z)
            if np.isfinite(yv[-1]):
                ends.append((float(yv[-1]), f"{what} {name}", color, main))
    return ends


def _direct_labels(ax: Axes, ends: Sequence[tuple[float, str, str, bool]], y_lo: float, y_hi: float) -> None:
    """Each curve's name beside its right end, outside the axes, pushed apart so that none overlap."""
    height_px = ax.get_window_extent().height
    gap = 12.0 / max(height_px, 1.0)  # a label's height in axes fractions
    span = math.log(y_hi / y_lo)
    items = sorted((min(max(math.log(max(y, y_lo) / y_lo) / span, 0.0), 1.0), label, color, main)
                   for y, label, color, main in ends)
    pos = [f for f, *_ in items]
    for i in range(1, len(pos)):
        pos[i] = max(pos[i], pos[i - 1] + gap)
    over = pos[-1] - 1.0 if pos else 0.0
    if over > 0:  # pushed past the top: shift the stack down, keeping the spacing
        pos = [max(p - over, 0.0) for p in pos]
    for p, (_, label, color, main) in zip(pos, items):
        ax.text(1.012, p, label, transform=ax.transAxes, va="center", ha="left", fontsize=7.5, color=color,
                fontweight="bold" if main else "normal", clip_on=False)


def _mark_points(ax: Axes, points: Sequence[MapPoint]) -> list[Artist]:
    """The points (a star, then a diamond) with their words, an arrow from the first to the second."""
    handles: list[Artist] = []
    styles = (("*", 16, "black", "black"), ("D", 8, "white", "black"))
    for i, pt in enumerate(points[:2]):
        marker, size, face, edge = styles[i]
        handles += ax.plot([pt.batch], [pt.context], marker=marker, markersize=size, markerfacecolor=face,
                           markeredgecolor=edge, markeredgewidth=1.4, color=edge, linestyle="none",
                           label=pt.key or pt.label.split("\n")[0], zorder=5)
    moved = len(points) > 1 and (abs(math.log(points[1].context / points[0].context)) > 0.01
                                 or abs(math.log(points[1].batch / points[0].batch)) > 0.01)
    if moved:
        a, b = points[0], points[1]
        ax.annotate("", xy=(b.batch, b.context), xytext=(a.batch, a.context), zorder=4.5,
                    arrowprops={"arrowstyle": "-|>", "color": "black", "linewidth": 1.6,
                                "shrinkA": 7, "shrinkB": 6, "mutation_scale": 14})
    # two points at one place (the plan moved the curves, not the point) share one label
    labels = [(pt, pt.label) for pt in points[:2]] if moved or len(points) == 1 else [
        (points[1], "\n".join(pt.label.replace("\n", ": ") for pt in points[:2]))]
    for i, (pt, text) in enumerate(labels):
        below = moved and i == 0 and points[1].context > pt.context
        ax.annotate(text, xy=(pt.batch, pt.context), xytext=(12, -14 if below else 10),
                    textcoords="offset points", fontsize=8, va="top" if below else "bottom", zorder=6,
                    bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "0.6", "alpha": 0.9})
    return handles


def _weights_note(ax: Axes, cfg: rf.Config, point_y: float) -> None:
    """The figure says, across its width, that the weights do not fit and so no s_cap curve exists: in
    the half of the axes the first point (at `point_y`, a fraction of the axes' height) is not in."""
    held, usable = rf.weight_bytes_held(cfg.model, cfg.w_p), cfg.capacity
    where = f"{cfg.n_devices} × {cfg.device.id}"
    why = (f"the weights do not fit: {fmt_bytes(held)} of weights, {fmt_bytes(usable)} usable on {where}"
           if held > usable else
           f"the weights leave no room for KV on the most loaded device of {where}")
    text = f"{why} (derived)\nevery point is capacity-bound: no s_cap(b) curve, no KV-bound region"
    ax.text(0.5, 0.2 if point_y > 0.5 else 0.8, text, transform=ax.transAxes, ha="center", va="center",
            fontsize=10, zorder=6,
            bbox={"boxstyle": "round,pad=0.5", "facecolor": "white", "edgecolor": _S_CAP_COLOR, "linewidth": 1.5})


def _map_legend(ax: Axes, fits: bool, kv_band: bool, points: list[Artist]) -> None:
    """Few entries: the regions shown, the two line styles drawn, the points."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    regions = [("weight-bound", "weight-bound (s < s*)"), ("kv-bound", "KV-bound (s* < s < s_cap)"),
               ("capacity-bound", "capacity-bound (s > s_cap)")] if fits else [("capacity-bound", "capacity-bound")]
    regions = [(k, t) for k, t in regions if k != "kv-bound" or kv_band]
    handles: list[Artist] = [Patch(facecolor=REGION_COLORS[k], label=t) for k, t in regions]
    handles.append(Line2D([], [], color="0.2", linestyle="-", linewidth=1.6, label="s*(b): traffic crossover"))
    if fits:
        handles.append(Line2D([], [], color="0.2", linestyle="--", linewidth=1.6, label="s_cap(b): capacity crossover"))
    ax.legend(handles=handles + points, loc="upper left", bbox_to_anchor=(1.125, 1.0), fontsize=8, frameon=False,
              borderaxespad=0.0)


def draw_regime_map(cfg: rf.Config, picture: MapPicture, path: PathLike) -> PlotInfo:
    """Context (log y) against batch (log x) on `cfg`'s layout: the three regimes filled for the
    picture's first KV width, s*(b) and s_cap(b) of each width labelled at their right ends, the
    points, the caption. When the weights leave no room, the field is capacity-bound and says so."""
    rf.check_batch_context(picture.points[0].batch, picture.points[0].context)
    if any(not (pt.batch >= 1 and pt.context > 0) for pt in picture.points):  # the plan's r·s may be below 1
        raise PlotError("a regime-map point needs a batch of at least 1 and a positive context")
    cfgs = {n: attrs.evolve(cfg, w_kv=w) for n, w in picture.widths}
    shaded, block = next(iter(cfgs.values())), picture.block_size
    b_lo, b_hi = _batch_range(picture.points[0].batch)
    b_lo /= 2.0 ** 0.25  # a quarter octave of room: a point at the smallest batch is whole, not cut by the axis
    b = np.geomspace(b_lo, b_hi, 512, dtype=np.float64)
    fits = bool(float(rf.s_cap(shaded, np.array([b_lo]), block)[0]) > 0)
    ends = _curve_ends(cfgs, np.array([b_lo, b_hi]), fits, block) + [pt.context for pt in picture.points]
    least = min(pt.context for pt in picture.points)
    y_lo, y_hi = _regime_y_range(ends, least / _Y_PAD if least < 1.0 else 1.0)
    with _font():
        fig, ax = _new_figure(picture.title, _MAP_MARGINS)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlim(b_lo, b_hi)
        ax.set_ylim(y_lo, y_hi)
        _fill_regimes(ax, shaded, b, y_lo, y_hi, block)
        _direct_labels(ax, _regime_curves(ax, cfgs, b, fits, block), y_lo, y_hi)
        marked = _mark_points(ax, picture.points)
        if not fits:
            y0 = picture.points[0].context
            _weights_note(ax, shaded, math.log(y0 / y_lo) / math.log(y_hi / y_lo))

        from matplotlib.ticker import FuncFormatter

        ax.set_xlabel("batch (concurrent sequences)")
        ax.set_ylabel(picture.y_label)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
        ax.yaxis.set_major_formatter(FuncFormatter(_tokens_label))
        kv_band = fits and bool(np.any(rf.s_cap(shaded, b, block) > rf.s_star(shaded, b)))
        _map_legend(ax, fits, kv_band, marked)
        lines = [w for line in picture.caption for w in textwrap.wrap(line, _CAPTION_WIDTH, subsequent_indent="  ")]
        fig.text(_MAP_MARGINS["left"], 0.012, "\n".join(lines), fontsize=8, ha="left", va="bottom")
        return _save(fig, ax, path, colors=tuple(REGION_COLORS.items()))


def _regime_words(s: float, s_star: float, s_cap: float) -> str:
    return str(rf.regime(s, s_star, s_cap))


def regime_map_figure(cfg: rf.Config, batch: int, context: int, kv_dtypes: Sequence[str], path: PathLike,
                      *, kv_name: Optional[str] = None) -> PlotInfo:
    """`kvplan map --plot`: the regime map of `cfg`'s layout with s*(b) and s_cap(b) for each dtype in
    `kv_dtypes`, the regimes shaded for the deployment's (`kv_name`, or the dtype of `cfg.w_kv`), the
    deployment's point, and a caption with s*, s_cap and the point's regime at its batch."""
    rf.check_batch_context(batch, context)
    names = [DTYPES[n].id for n in kv_dtypes]
    kv_name = kv_name or _dtype_name(cfg.w_kv, names)
    widths = {kv_name: cfg.w_kv, **{n: DTYPES[n].width for n in names if n != kv_name}}
    ss, sc = float(rf.s_star(cfg, batch)), float(rf.s_cap(cfg, batch))
    where = "capacity-bound" if sc <= 0 else _regime_words(context, ss, sc)
    cap_text = (f"s_cap = {fmt_tokens(sc)} (s/s_cap = {context / sc:.3g}×)" if sc > 0
                else "s_cap: none (the weights leave no room for KV)")
    caption = (f"derived at b = {batch} with {kv_name} KV (docs/model.md §5): s* = {fmt_tokens(ss)} "
               f"(s/s* = {context / ss:.3g}×), {cap_text}",
               f"the point b = {batch}, s = {fmt_tokens(context)} is {where}",
               "s*(b) = P·w_p/(b·κ), s_cap(b) = (N·C − P·w_p)/(b·κ); solid s*, dashed s_cap, one colour per "
               f"KV dtype; regions shaded for {kv_name}")
    title = (f"{cfg.model.id} on {cfg.n_devices} × {cfg.device.id}, weights {_dtype_name(cfg.w_p, list(DTYPES))}, "
             f"{cfg.placement}: regimes for {kv_name} KV")
    point = MapPoint(batch, context, f"deployment: b = {batch}, s = {_tokens_label(context)}\n{where}")
    return draw_regime_map(cfg, MapPicture(widths=tuple(widths.items()), points=(point,), caption=caption,
                                           title=title), path)


def roofline_figure(cfg: rf.Config, batch: int, context: int, path: PathLike) -> PlotInfo:
    """The classic roofline of one device: attainable FLOP/s against intensity, the ridge, the
    two intensity limits of decode (2b/w_p and 2g/w_kv) and the deployment's point."""
    rf.check_batch_context(batch, context)
    _matplotlib()  # the one-line error before anything is computed
    with _font():
        return _roofline(cfg, batch, context, path)


def _roofline(cfg: rf.Config, batch: int, context: int, path: PathLike) -> PlotInfo:
    d, m = cfg.device, cfg.model
    ridge = d.compute / d.bandwidth
    inten = float(rf.intensity(cfg, batch, context))
    short, long = rf.intensity_limits(m, batch, cfg.w_p, cfg.w_kv)
    short_v = float(short)
    t = rf.step_time(cfg, batch, context)
    achieved = float(rf.decode_flops(m, batch, context)) / (cfg.tp * float(t.step))
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


#: Colours of the Pareto figure: the front, the candidates it dominates, advise's own choice.
_FRONT_COLOR = "#b2182b"
_DOMINATED_COLOR = "#9e9e9e"
_PARETO_MARGINS = {"left": 0.09, "right": 0.74, "bottom": 0.17, "top": 0.91}


def _log_limits(values: Sequence[float]) -> tuple[float, float]:
    """A log axis a little beyond the values (a quarter of a decade each side; a decade around one value)."""
    lo, hi = min(values), max(values)
    pad = 10 ** 0.25 if hi > lo else 10 ** 0.5
    return lo / pad, hi * pad


#: The Pareto figure's labels: pixels from a point to its label's corner, a label's height and its width per
#: character (8-point DejaVu Sans at 100 dpi, its box's padding included; a little wide, so that boxes keep apart).
_LABEL_GAP_PX, _LABEL_HEIGHT_PX, _LABEL_CHAR_PX = 7.0, 15.0, 6.0
#: Characters of the Pareto figure's caption a line (8-point DejaVu Sans across its width).
_PARETO_CAPTION_WIDTH = 140


def _front_label_texts(on: Sequence[Point]) -> list[tuple[float, float, str]]:
    """One label per place on the front: the numbers of the points there and their choices (equal points share
    one: `1, 2: int2 r0.5 ×8 tp8 striped = affinity`); the placement is named where the front has more than one."""
    places = len({p.placement for p in on}) > 1
    groups: dict[tuple[float, float], list[Point]] = {}
    for p in on:
        groups.setdefault((p.per_user.value, p.per_device.value), []).append(p)
    out = []
    for (u, d), ps in groups.items():
        shorts = list(dict.fromkeys(p.short for p in ps))
        where = " " + " = ".join(dict.fromkeys(p.placement for p in ps)) if places else ""
        words = shorts[0] + where if len(shorts) == 1 else " = ".join(
            p.short + (f" {p.placement}" if places else "") for p in ps)
        out.append((u, d, ", ".join(str(p.number) for p in ps) + ": " + words))
    return out


def _front_labels(ax: Axes, on: Sequence[Point]) -> None:
    """Each place on the front labelled up and to the right of it: no point lies there (it would dominate the
    one labelled), so a label covers no point; a label that would meet one already placed moves up above it, with
    a leader to its point. Placed from the lowest point up."""
    placed: list[tuple[float, float, float, float]] = []  # (x0, x1, y0, y1) in pixels, y up
    box = {"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9}
    for u, d, text in sorted(_front_label_texts(on), key=lambda t: (t[1], -t[0])):
        x, y = ax.transData.transform((u, d))
        x0, x1 = x + _LABEL_GAP_PX, x + _LABEL_GAP_PX + _LABEL_CHAR_PX * len(text)
        y0 = y + _LABEL_GAP_PX
        for _ in range(len(placed) + 1):  # each move clears one placed box: bounded
            hit = [b for b in placed if b[0] < x1 and x0 < b[1] and b[2] < y0 + _LABEL_HEIGHT_PX and y0 < b[3]]
            if not hit:
                break
            y0 = max(b[3] for b in hit) + 1.0
        placed.append((x0, x1, y0, y0 + _LABEL_HEIGHT_PX))
        lead = y0 - y > 2 * _LABEL_GAP_PX
        ax.annotate(text, xy=(u, d), xytext=(_LABEL_GAP_PX, y0 - y), textcoords="offset pixels", fontsize=8,
                    ha="left", va="bottom", zorder=5, bbox=box,
                    arrowprops={"arrowstyle": "-", "color": "0.5", "linewidth": 0.6} if lead else None)


def pareto_figure(front: Front, path: PathLike) -> PlotInfo:
    """`kvplan pareto --plot`: tokens/s per device (log y) against tokens/s per user (log x), expected figures;
    the dominated candidates grey, the front as a red line through its points, each front point annotated with
    its choices and number, the point `kvplan advise` chooses ringed; a caption says what was evaluated."""
    if not front.points:
        raise PlotError(f"scenario {front.scenario.name} has no front to draw: {front.gap}")
    _matplotlib()
    sc = front.scenario
    pts = front.points
    on = sorted(front.on_front, key=lambda p: p.per_user.value)
    off = [p for p in pts if not p.front]
    xs, ys = [p.per_user.value for p in pts], [p.per_device.value for p in pts]
    with _font():
        fig, ax = _new_figure(f"{sc.name}: {sc.model.id} on {sc.device.id}, batch {sc.batch}, context "
                              f"{_tokens_label(sc.context)}: the Pareto front", _PARETO_MARGINS)
        ax.set_xscale("log")
        ax.set_yscale("log")
        x_lo, x_hi = _log_limits(xs)
        ax.set_xlim(x_lo, x_hi * 10 ** 0.2)  # room on the right for the labels of the front's rightmost points
        y_lo, y_hi = _log_limits(ys)
        ax.set_ylim(y_lo, y_hi * 10 ** 0.15)  # and above them, where the labels go
        ax.grid(True, which="major", color="0.9", linewidth=0.6, zorder=0)
        handles: list[Artist] = []
        if off:
            handles += ax.plot([p.per_user.value for p in off], [p.per_device.value for p in off], marker="o",
                               markersize=5, linestyle="none", color=_DOMINATED_COLOR, alpha=0.8, zorder=2,
                               label=f"dominated ({len(off)})")
        handles += ax.plot([p.per_user.value for p in on], [p.per_device.value for p in on], marker="o",
                           markersize=7, color=_FRONT_COLOR, linewidth=1.8, zorder=3,
                           label=f"front ({len(on)})")
        chosen = [p for p in pts if p.number == front.chosen]
        if chosen:
            handles += ax.plot([chosen[0].per_user.value], [chosen[0].per_device.value], marker="o", markersize=15,
                               markerfacecolor="none", markeredgecolor="black", markeredgewidth=1.6,
                               linestyle="none", zorder=4, label=f"kvplan advise's plan (point {chosen[0].number})")
        _front_labels(ax, on)
        from matplotlib.ticker import FuncFormatter

        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.set_xlabel("tokens/s per user = 1 / T_expected (tok/s, derived)")
        ax.set_ylabel("tokens/s per device = b / (T_expected · N) (tok/s, derived)")
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8, frameon=False)
        caption = (f"{front.evaluated} candidates evaluated, {len(pts)} pass the rules, fit and meet the SLOs, "
                   f"{len(on)} on the front (both axes maximized; expected figures, docs/expected.md). "
                   "Each front point is planned by `kvplan advise` with its pins (kvplan pareto prints them).")
        fig.text(_PARETO_MARGINS["left"], 0.012, "\n".join(textwrap.wrap(caption, _PARETO_CAPTION_WIDTH)), fontsize=8,
                 ha="left", va="bottom")
        return _save(fig, ax, path)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def embed_regime_map(cfg: rf.Config, picture: MapPicture, out_dir: PathLike) -> str:
    """Write the regime map as SVG into `out_dir` and return its path relative to `out_dir`
    (a name derived from the deployment, so that the same deployment writes the same file)."""
    pt = picture.points[0]
    name = (f"regime-map-{_slug(cfg.model.id)}-{cfg.n_devices}x{_slug(cfg.device.id)}-"
            f"kv{cfg.w_kv * 8:g}bit-b{round(pt.batch)}-s{round(pt.context)}.svg")
    os.makedirs(out_dir, exist_ok=True)
    draw_regime_map(cfg, picture, Path(out_dir) / name)
    return name


__all__ = ["MapPicture", "MapPoint", "PlotError", "PlotInfo", "REGION_COLORS", "draw_regime_map", "embed_regime_map",
           "pareto_figure", "regime_map_figure", "roofline_figure"]
