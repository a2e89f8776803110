"""Write the rationale documents: per plan, an index and one MADR record per decision.

Deterministic: no timestamps, no absolute paths, names from the scenario; the
regime-map picture is embedded when the plot extra is installed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from kvplan.planner.plan import Plan
from kvplan.render import plan_view


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "plan"


def write(plans: Sequence[Plan], out_dir: str, spec_path: str) -> list[str]:
    """Write the documents and return their paths, relative to the working directory."""
    written: list[str] = []
    root = Path(out_dir)
    for p in plans:
        d = root / slug(p.scenario.name)
        d.mkdir(parents=True, exist_ok=True)
        image = _regime_map_image(p, d)
        index = plan_view.index_markdown(p)
        spec_name = Path(spec_path).name
        lines = [index.rstrip("\n"), "", f"Spec: `{spec_name}`. Regenerate with `kvplan report {spec_name} -o <dir>`.", ""]
        if image:
            lines += ["## Regime map", "", f"![regime map]({image})", ""]
        lines += ["## Decision records", ""]
        for i, dec in enumerate(p.decisions, 1):
            name = f"{i:02d}-{slug(dec.domain)}.md"
            (d / name).write_text(plan_view.decision_markdown(p, dec, i), encoding="utf-8")
            written.append(os.path.normpath(str(d / name)))
            lines.append(f"{i}. [{dec.title}: {dec.choice}]({name})")
        (d / "index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.insert(len(written) - len(p.decisions), os.path.normpath(str(d / "index.md")))
    return written


def _regime_map_image(p: Plan, d: Path) -> str | None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    from kvplan import roofline as rf
    from kvplan.footprint import KvFactors
    from kvplan.render import plot

    sc = p.scenario
    cfg = rf.Config(sc.model, sc.device, n_devices=p.n_devices, tp=p.tp, w_p=sc.weights.width,
                    w_kv=p.kv_dtype.width, factors=KvFactors(p.retention, p.sharing, 0.0), placement=p.placement)
    kv = list(dict.fromkeys(["bf16", p.kv_dtype.id]))
    return str(plot.embed_regime_map(cfg, sc.batch, sc.context, kv, str(d)))
