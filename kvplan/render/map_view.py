"""Render a RegimeMap as text (fits 100 columns) or contract JSON."""

from __future__ import annotations

from kvplan.base.units import fmt_unit
from kvplan.model.regime import RegimeMap
from kvplan.render.common import clip, dump_json, table

#: Text lines are at most this wide; a long source is cut at a word boundary, with "…".
WIDTH = 100

_LABELS = {
    "kappa": "KV bytes per token (κ)",
    "kv_bytes_per_sequence": "KV bytes per sequence",
    "weight_bytes": "weight bytes held",
    "weight_bytes_read": "weight bytes read per step",
    "kv_bytes_read": "KV bytes read per step",
    "kv_bytes_stored": "KV bytes stored",
    "memory_needed": "memory needed",
    "capacity": "capacity (N·C)",
    "s_star": "s*  traffic crossover",
    "s_cap": "s_cap capacity crossover",
    "context_over_s_star": "context / s*",
    "context_over_s_cap": "context / s_cap",
    "flops_per_step": "FLOPs per step",
    "intensity": "arithmetic intensity",
    "intensity_short_limit": "  short-context limit 2b/w_p",
    "intensity_long_limit": "  long-context limit 2g/w_kv",
    "ridge": "device ridge π/β",
    "step_time_weights": "  weights stream",
    "step_time_kv": "  KV stream",
    "step_time_compute": "  compute",
    "step_time": "step time (lower bound)",
    "step_time_expected": "step time (expected)",
    "step_time_expected_comm": "  all-reduces (expected)",
    "throughput_expected": "decode throughput (expected)",
    "ttft_expected": "TTFT, one prompt (expected)",
    "ttft_expected_comm": "  all-reduces (expected)",
    "throughput": "decode throughput",
    "ceiling_rate": "ceiling R_∞ = β_eff/κ",
}

_ORDER = ["kappa", "kv_bytes_per_sequence", "weight_bytes", "weight_bytes_read", "kv_bytes_read",
          "kv_bytes_stored", "memory_needed", "capacity", "s_star", "s_cap", "context_over_s_star",
          "context_over_s_cap", "flops_per_step", "intensity", "intensity_short_limit",
          "intensity_long_limit", "ridge", "step_time", "step_time_weights", "step_time_kv",
          "step_time_compute", "step_time_expected", "step_time_expected_comm", "throughput", "throughput_expected",
          "ttft_expected", "ttft_expected_comm", "ceiling_rate"]


def _unit_text(value: float, unit: str) -> str:
    return fmt_unit(value, unit) if unit != "FLOP/B" else f"{value:.4g} FLOP/B"


def text(rm: RegimeMap) -> str:
    res = dict(rm.results)
    head = (f"{rm.model.id} on {rm.n_devices} × {rm.device.id} (tp {rm.tp}), weights {rm.weights.id}, "
            f"KV {rm.kv.id}, batch {rm.batch}, context {fmt_unit(rm.context, 'tokens')}, "
            f"placement {rm.placement}")
    lines = [head, f"regime: {rm.regime}", ""]
    width = max(len(_LABELS[k]) for k in _ORDER)
    for key in _ORDER:
        v = res[key]
        shown = v.absent or _unit_text(v.value, v.unit)
        lines.append(f"  {_LABELS[key].ljust(width)}  {shown:>16}  {v.evidence.value}")
    lines.append("")
    lines.append("effective bandwidth of the KV stream by placement:")
    for name, v in rm.bandwidth:
        mark = "  (upper bound)" if "upper bound" in v.source else ""
        lines.append(f"  {name:<9} {v.human:>12}  {v.evidence.value}{mark}")
    lines.append("")
    lines.append("by KV dtype (same batch, context, devices):")
    rows = [[r.dtype, r.kappa.human, r.s_star.human, r.s_cap.human, r.kv_bytes.human, r.regime,
             r.step_time.human, r.speedup.human, r.step_time_expected.human if r.step_time_expected else ""]
            for r in rm.dtypes]
    lines.append(table(["kv", "κ", "s*", "s_cap", "KV stored", "regime", "step ≥", "speedup", "expected"], rows,
                       right=(1, 2, 3, 4, 6, 7, 8)).rstrip("\n"))
    lines.append("  all figures derived (docs/model.md §2–7); inputs below are reported (catalog) or assumed (yours)")
    lines.append("")
    lines.append("factors of the expected figures (docs/expected.md):")
    clipped = False
    for key, v in rm.factors:
        lead = f"  {key:<18} {v.human:>10}  {v.evidence.value:<8}  "
        shown = clip(v.source, WIDTH - len(lead))
        clipped = clipped or shown != v.source
        lines.append((lead + shown).rstrip())
    lines.append("")
    lines.append("inputs:")
    for key, v in rm.inputs:
        lead = f"  {key:<14} {v.human:>14}  {v.evidence.value:<8}  "
        shown = clip(v.source, WIDTH - len(lead))
        clipped = clipped or shown != v.source
        lines.append((lead + shown).rstrip())
    if clipped:
        lines.append("  (… sources shortened: `--format json` prints each in full)")
    for n in rm.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines) + "\n"


def payload(rm: RegimeMap) -> dict[str, object]:
    return {
        "kind": "regime_map",
        "model": rm.model.id,
        "device": rm.device.id,
        "devices": rm.n_devices,
        "tensor_parallel": rm.tp,
        "weights_dtype": rm.weights.id,
        "kv_dtype": rm.kv.id,
        "placement": rm.placement,
        "regime": rm.regime,
        "inputs": dict(rm.inputs),
        "results": {**dict(rm.results), "expected_factors": dict(rm.factors)},
        "beta_eff": dict(rm.bandwidth),
        "by_kv_dtype": [
            {"kv_dtype": r.dtype, "kappa": r.kappa, "s_star": r.s_star, "s_cap": r.s_cap,
             "kv_bytes": r.kv_bytes, "regime": r.regime, "step_time": r.step_time, "speedup": r.speedup,
             "step_time_expected": r.step_time_expected}
            for r in rm.dtypes
        ],
        "notes": list(rm.notes),
    }


def json_text(rm: RegimeMap) -> str:
    return dump_json(payload(rm))
