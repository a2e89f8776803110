"""Write the rationale documents: per plan, an index and one MADR record per decision.

Deterministic: no timestamps, no absolute paths, names from the scenario; the
regime-map picture is embedded when the plot extra is installed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

from kvplan.base.outputs import OutputTree, file_name, folder_name, scenario_folders
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
        spec_name = Path(spec_path).name
        lines = [index.rstrip("\n"), "",
                 f"Spec: `{spec_name}`. Regenerate with `kvplan report {spec_name} -o <dir>`.", ""]
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


def _regime_map_image(p: Plan) -> tuple[str, bytes] | None:
    """The regime-map SVG (its file name and bytes), drawn in a private temporary directory so that
    the output tree is written only through kvplan.base.outputs; None without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None


    sc = p.scenario
    cfg = rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=sc.weights.width,
                    w_kv=p.kv_width, factors=KvFactors(p.retention, p.sharing, 0.0), placement=p.placement,
                    attention_dp=sc.attention_dp)
    kv = list(dict.fromkeys(["bf16", p.kv_dtype.id]))
    with tempfile.TemporaryDirectory(prefix="kvplan-") as tmp:
        name = str(plot.embed_regime_map(cfg, sc.batch, sc.context, kv, tmp))
        data = (Path(tmp) / name).read_bytes()
    return file_name(name), data
