"""Write the rationale documents: per plan, an index and one MADR record per decision.

Deterministic: no timestamps, no absolute paths, names from the scenario; the
regime-map picture is embedded when the plot extra is installed.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path
from typing import Sequence

from kvplan.base import controls
from kvplan.base.outputs import OutputTree, file_name, folder_name, scenario_folders
from kvplan.base.units import fmt_tokens
from kvplan.catalog import DTYPES
from kvplan.catalog.engines import kv_width
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors
from kvplan.planner.plan import Plan
from kvplan.render import plan_view, plot


def slug(text: str) -> str:
    """A scenario's folder name (kvplan.base.outputs.folder_name); kept for callers of the old name."""
    return folder_name(text)


def write(plans: Sequence[Plan], out_dir: str, spec_path: str) -> list[str]:
    """Write the documents and return their paths, relative to the working directory.

    Through kvplan.base.outputs: one folder per scenario (two scenarios that would share one are refused
    before anything is written), no symlink followed."""
    folders = scenario_folders(plans, out_dir)
    tree = OutputTree(out_dir)
    written: list[str] = []
    for p in plans:
        where = folders[p.scenario.name]
        image = _regime_map_image(p)
        if image is not None:
            tree.write((where, image[0]), image[1])
        index = plan_view.index_markdown(p)
        lines = [index.rstrip("\n"), "", _spec_line(Path(spec_path).name), "", *slo_table(p)]
        if image:
            lines += ["## Regime map", "", f"![regime map]({image[0]})", ""]
        lines += ["## Decision records", ""]
        records = []
        for i, dec in enumerate(p.decisions, 1):
            name = file_name(f"{i:02d}-{folder_name(dec.domain)}.md")
            records.append(tree.write((where, name), plan_view.decision_markdown(p, dec, i)))
            lines.append(f"{i}. [{dec.title}: {dec.choice}]({name})")
        written.append(tree.write((where, "index.md"), "\n".join(lines) + "\n"))
        written.extend(records)
    return written


def slo_table(p: Plan) -> list[str]:
    """The index's SLO section: each SLO the spec sets beside the plan's prediction, met or UNMET (Plan.verdict),
    then what else the plan misses."""
    v = p.verdict()
    out = ["## Service-level objectives", ""]
    if v.rows:
        out += ["| SLO | bound | predicted | met |", "|---|---|---|---|"]
        out += [f"| {r.name} | {r.bound} | {r.got} | {'met' if r.met else '**UNMET**'} |" for r in v.rows]
    else:
        out.append("The spec sets no SLO.")
    if v.others:
        out += ["", "Also unmet: " + ", ".join(v.others) + " (`kvplan advise` says by how much)."]
    return out + [""]


def _code(text: str) -> str:
    """A Markdown code span of `text`: fenced by one backtick more than the longest run in it (CommonMark)."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _spec_line(name: str) -> str:
    """The index's line naming the spec file and the command that regenerates the documents. The name is a
    literal where it is not plain text (kvplan.base.controls), so a file named `x<LF># heading.kvp` adds no line."""
    again = (f" Regenerate with {_code(f'kvplan report {shlex.quote(name)} -o <dir>')}."
             if controls.first(name) is None else "")
    return f"Spec: {_code(controls.literal(name))}.{again}"


def _regime_map_image(p: Plan) -> tuple[str, bytes] | None:
    """The regime-map SVG (its file name and bytes), drawn in a private temporary directory so that
    the output tree is written only through kvplan.base.outputs; None without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None

    cfg, picture = plan_picture(p)
    with tempfile.TemporaryDirectory(prefix="kvplan-") as tmp:
        name = str(plot.embed_regime_map(cfg, picture, tmp))
        data = (Path(tmp) / name).read_bytes()
    return file_name(name), data


def _candidates(p: Plan) -> list[str]:
    """The KV dtypes the search evaluated on the plan's layout: the plan's, 16-bit (the spec as written),
    and each option of the quantization decision that carries figures; widest first after the plan's."""
    q = next((d for d in p.decisions if d.domain == "quantization"), None)
    tried = [o.choice for o in (q.options if q is not None else ()) if o.numbers]
    rest = sorted(set(["bf16", *tried]) - {p.kv_dtype.id}, key=lambda n: (-DTYPES[n].width, n))
    return [p.kv_dtype.id, *rest]


def plan_picture(p: Plan) -> tuple[rf.Config, plot.MapPicture]:
    """The report's regime map: on the plan's layout (devices, tp, placement, reserves, pages, sharing),
    s*(b) and s_cap(b) of each KV dtype the search evaluated at the engine's width, the regions shaded for
    the plan's; the spec's point (b, s) and the plan's (b, r·s: the tokens eviction keeps, so that the
    curves need no retention) with an arrow between; the caption with the plan's own R1 and R8 figures."""
    sc = p.scenario
    reserved = sum(v.value for v in p.reserves.resolve(sc.device.memory))
    phi = p.byte_factors.paging.value - 1.0
    cfg = rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=sc.weights.width, w_kv=p.kv_width,
                    factors=KvFactors(1.0, p.sharing, phi), placement=p.placement, reserved=reserved,
                    attention_dp=sc.attention_dp,
                    expert_parallel=sc.expert_parallel)
    widths = tuple((n, p.kv_width if n == p.kv_dtype.id else kv_width(sc.engine, n, sc.model))
                   for n in _candidates(p))
    mb, ma, kv, r = p.map_before, p.map_after, p.kv_dtype.id, p.retention
    n0 = int(mb.devices.value) if mb.devices is not None else 1
    dev, b, s = sc.device.id, sc.batch, sc.context
    kept = f", r = {r:g}" if r < 1.0 else ""
    spec = plot.MapPoint(b, s, f"spec as written (R1): 16-bit KV on {n0} × {dev}\n{p.regime_before}",
                         key="spec as written (R1)")
    planned = plot.MapPoint(b, s * r, f"plan (R8): {kv} KV{kept} on {p.n_devices} × {dev}\n{p.regime_after}",
                            key="the plan (R8)")
    held = f" ({fmt_tokens(s * r)} kept)" if r < 1.0 else ""
    caption = (
        f"plan (R8, derived): {kv} KV{kept} on {p.n_devices} × {dev} at b = {b}: s* = {ma.s_star.human}, "
        f"s_cap = {ma.s_cap.human}; s = {fmt_tokens(s)}{held} is {p.regime_after}",
        f"spec as written (R1, derived): 16-bit KV on {n0} × {dev}: s* = {mb.s_star.human}, "
        f"s_cap = {mb.s_cap.human}; s = {fmt_tokens(s)} is {p.regime_before}",
        "solid s*(b), dashed s_cap(b), one colour per KV dtype the search evaluated, on the plan's layout; "
        f"regions shaded for {kv}" + ("; y is r·s, the tokens eviction keeps" if r < 1.0 else ""))
    title = f"{sc.name}: {sc.model.id} on {p.n_devices} × {dev}, the plan's regime map ({kv} KV)"
    y_label = "KV tokens kept per sequence (r·s)" if r < 1.0 else "context (tokens per sequence)"
    return cfg, plot.MapPicture(widths=widths, points=(spec, planned), caption=caption, title=title,
                                y_label=y_label, block_size=p.block_size)
