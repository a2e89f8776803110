"""`kvplan calibrate`'s output: the fit's report (text) and the calibration profile (TOML; docs/calibrate.md).

The profile follows the format kvplan's reader takes (docs/calibrate.md, "The profile"): a comment header
naming the inputs, `[profile]`, then one `[[fit]]` per (device, engine) with the parameters the data
determined (absent: the default is used) and `[fit.kv_efficiency]`. The order is fixed and numbers are
written with 12 significant digits, so the same measurements always give the same bytes.
"""

from __future__ import annotations

from typing import Sequence

from kvplan.base import controls
from kvplan.base.evidence import Value
from kvplan.base.files import name as file_name
from kvplan.base.files import stem
from kvplan.base.units import fmt_unit
from kvplan.model.calibrate import Fit
from kvplan.render.common import table

#: The profile keys of the fitted parameters, in the order a [[fit]] writes them, with the unit a time takes.
PROFILE_KEYS = (("eta_w", ""), ("t_fixed", "ms"), ("collective_latency", "us"), ("t_layer", "us"), ("eta_compute", ""))


def _num(x: float) -> str:
    """A TOML number: 12 significant digits, always with a decimal point or exponent (a float)."""
    text = format(x, ".12g")
    return text if any(c in text for c in ".en") else text + ".0"


def _str(text: str) -> str:
    """A TOML basic string: JSON's escapes, DEL escaped too (kvplan.base.controls)."""
    return controls.dumps(text, ascii=True)


def _time(seconds: float, unit: str) -> str:
    scale = {"ms": 1e3, "us": 1e6}[unit]
    return _str(f"{format(seconds * scale, '.12g')} {unit}")


def profile(fits: Sequence[Fit], inputs: Sequence[str], path: str) -> str:
    """The TOML text of the profile at `path` for the fits that determined anything, inputs named as given."""
    kept = [f for f in fits if f.written]
    names = ", ".join(controls.literal(file_name(p) or p) for p in inputs)  # a file's name is no line of its own
    out = [f"# written by kvplan calibrate from {len(inputs)} file{'s' if len(inputs) != 1 else ''}: {names}",
           "# A parameter absent from a [[fit]] was held or not determined by the measurements: kvplan uses its "
           "default.",
           "# docs/calibrate.md describes the format and the fit.",
           "",
           "[profile]",
           f"name = {_str(stem(path) or 'profile')}",
           "inputs = [" + ", ".join(_str(p) for p in inputs) + "]"]
    for f in kept:
        got = dict(f.fitted)
        out += ["", "[[fit]]", f"device = {_str(f.device)}", f"engine = {_str(f.engine)}"]
        for key, unit in PROFILE_KEYS:
            if key in got:
                v = got[key].value
                out.append(f"{key} = {_time(v, unit) if unit else _num(v)}")
        out += [f"points = {f.points}", f"rms_error = {_time(f.rms.value, 'ms')}"]
        for name, why in f.left_out:
            out.append(f"# {name}: {controls.escaped(why)}")
        if f.kv_efficiency:
            out += ["", "[fit.kv_efficiency]", *(f"{k} = {_num(v.value)}" for k, v in f.kv_efficiency)]
    return "\n".join(out) + "\n"


def _shown(v: Value) -> str:
    return f"{fmt_unit(v.value, v.unit)} ({v.evidence.value})"


def text(fits: Sequence[Fit], notes: Sequence[str]) -> str:
    """The report: per fit, the parameters fitted and left out, each measured time beside the fitted one, and
    the RMS; then the notes (what kvplan assumed for a file)."""
    out = []
    for f in fits:
        out.append(f"fit {f.device}/{f.engine}: {f.points} measured time{'s' if f.points != 1 else ''}")
        rows = [[n.replace("eta_kv:", "eta_kv "), _shown(v)] for n, v in f.fitted]
        rows += [[f"kv_efficiency {k}", _shown(v)] for k, v in f.kv_efficiency]
        if rows:
            out.append(_indent(table(["fitted", "value"], rows)))
        for name, why in f.left_out:
            out.append(f"  left out (default used): {name.replace('eta_kv:', 'eta_kv ')}: {why}")
        res = [[str(r.span), r.kind, _shown(r.measured), _shown(r.fitted), f"{r.error * 100:+.2f}%"]
               for r in f.residuals]
        out.append(_indent(table(["measurement", "kind", "measured", "fitted", "error (derived)"], res,
                                 right=(2, 3, 4))))
        out.append(f"  rms error {_shown(f.rms)}, {fmt_unit(f.rms_relative.value, '%')} relative (derived)"
                   + ("" if f.written else "; nothing determined: not written to the profile"))
        out.append("")
    out += [f"note: {n}" for n in notes]
    return "\n".join(out).rstrip("\n") + "\n"


def _indent(block: str) -> str:
    return "".join(f"  {ln}\n" if ln else "\n" for ln in block.rstrip("\n").split("\n")).rstrip("\n")


__all__ = ["PROFILE_KEYS", "profile", "text"]
