"""Calibration profiles (docs/expected.md, "Calibration profiles"): the factors a user's own measurements fitted.

A profile is the TOML file `kvplan calibrate` writes and `--calibration FILE` / `calibration = "FILE"` reads:
a `[profile]` table and one `[[fit]]` table per (device, engine) the measurements covered, each with the
factors the data determined (η_w, t_fixed, the collective latency, t_layer, η_π) and a `[fit.kv_efficiency]` table per
KV dtype. `load_profile` reads one (through kvplan.base.files: a regular file, bounded, UTF-8) and refuses
anything else with the file, line and column; `factors` lays a profile's fit over kvplan's defaults.

A factor taken from a profile is `derived` (fitted to measurements), its source naming the profile and the
fit; the measurements themselves are `measured` and stay in the profile's inputs, never in a number here.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Mapping, Optional, Sequence

import attrs

from kvplan import catalog
from kvplan.base import files, limits
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Evidence, Value
from kvplan.base.json_types import ConfigValue
from kvplan.base.records import record
from kvplan.base.units import Dim, parse_quantity
from kvplan.model.factors import Factors

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: The engines a fit may name ("any": every engine on that device).
ENGINES = ("vllm", "sglang", "trtllm", "any")
#: The keys each table takes.
PROFILE_KEYS = ("name", "inputs")
FIT_KEYS = ("device", "engine", "eta_w", "t_fixed", "collective_latency", "t_layer", "eta_compute", "points",
            "rms_error", "kv_efficiency")
TOP_KEYS = ("profile", "fit")
_FRACTIONS = ("eta_w", "eta_compute")
_TIMES = ("t_fixed", "collective_latency", "t_layer", "rms_error")


class ProfileError(KvplanError):
    """A calibration profile kvplan cannot use: the message names the key, the span where it is."""


@record
class Fit:
    """One [[fit]] table: the factors the data determined for one (device, engine); None where it did not."""

    device: str
    engine: str
    eta_w: Optional[float] = None
    t_fixed: Optional[float] = None             # seconds
    collective_latency: Optional[float] = None  # seconds
    eta_compute: Optional[float] = None
    t_layer: Optional[float] = None             # seconds per layer per forward pass
    kv_efficiency: tuple[tuple[str, float], ...] = ()
    points: Optional[int] = None
    rms_error: Optional[float] = None           # seconds

    @property
    def label(self) -> str:
        return f"{self.device}/{self.engine}"


@record
class Profile:
    """A calibration profile: where it was read from, its name, the inputs it was fitted to, its fits."""

    path: str
    name: str
    inputs: tuple[str, ...]
    fits: tuple[Fit, ...]

    def fit_for(self, device: str, engine: str) -> Optional[Fit]:
        """The fit for a deployment: the device's with the engine exactly, else its `engine = "any"`, else None."""
        exact = next((f for f in self.fits if f.device == device and f.engine == engine), None)
        return exact or next((f for f in self.fits if f.device == device and f.engine == "any"), None)

    def fits_on(self, device: str, engine: str) -> tuple[Fit, ...]:
        """The fits a deployment's figures can use: fit_for's; for `engine = any`, which plans every engine's
        line beside its own (kvplan.planner.per_engine), every fit of the device, each engine's line taking its
        engine's."""
        if engine != "any":
            one = self.fit_for(device, engine)
            return () if one is None else (one,)
        return tuple(f for f in self.fits if f.device == device)


#: A `key =` at the start of a line (bare or quoted key), and a table header; compiled on first use (re caches
#: them), not at import: only a calibration profile read needs them.
_KEY = r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*="""
_HEADER = r"^\s*(\[\[?)\s*([^\]]*?)\s*\]\]?"
_TOML_AT = r"\s*\(at line (\d+), column (\d+)\)$"


@record
class _Places:
    """Where each table header and key is in the text, for located errors: keys by (table, fit index, key)."""

    keys: Mapping[tuple[str, int, str], Span]
    headers: Mapping[tuple[str, int], Span]
    path: str

    def key(self, table: str, index: int, key: str) -> Span:
        """Where `key` of that table is; a top-level table written as a header is found by its header."""
        top = self.headers.get((key, 0)) if table == "" else None
        return self.keys.get((table, index, key)) or top or self.header(table, index)

    def header(self, table: str, index: int) -> Span:
        return self.headers.get((table, index)) or files.start(self.path)


def _places(text: str, path: str) -> _Places:
    """Scan the lines for table headers and keys (what tomllib does not report); a key the scan cannot place
    (a dotted or inline-table key) is reported at its table's header."""
    keys: dict[tuple[str, int, str], Span] = {}
    headers: dict[tuple[str, int], Span] = {}
    table, fit = "", -1
    for n, line in enumerate(text.splitlines(), start=1):
        head = re.match(_HEADER, line)
        if head is not None and not re.match(_KEY, line):
            table = head.group(2).strip().strip('"')
            if head.group(1) == "[[" and table == "fit":
                fit += 1
            index = fit if table.startswith("fit") else 0
            col = line.index(head.group(1)) + 1
            headers.setdefault((table, index), Span(path, n, col, n, len(line.rstrip()) + 1))
            continue
        key = re.match(_KEY, line)
        if key is not None:
            word = key.group(1).strip("\"'")
            col = key.start(1) + 1
            keys.setdefault((table, fit if table.startswith("fit") else 0, word),
                            Span(path, n, col, n, col + len(key.group(1))))
    return _Places(keys, headers, path)


def _fail(message: str, span: Span, help: str) -> ProfileError:
    return ProfileError(message, span=span, help=help)


def _toml(text: str, path: str) -> dict[str, ConfigValue]:
    deep = limits.toml_too_deep(text)
    if deep is not None:  # tomllib recurses once per level: RecursionError past about a thousand
        line, col = limits.line_col(text, deep)
        raise _fail(f"the calibration profile nests arrays and tables more than {limits.MAX_JSON_DEPTH} levels "
                    "deep", Span(path, line, col, line, col + 1),
                    "a profile is what `kvplan calibrate` writes, two levels deep (docs/expected.md)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = re.search(_TOML_AT, message)
        span = files.start(path)
        if at is not None:
            line, col = int(at.group(1)), int(at.group(2))
            span, message = Span(path, line, col, line, col + 1), message[:at.start()]
        raise _fail(f"the calibration profile is not valid TOML: {message}", span,
                    "a profile is what `kvplan calibrate` writes (docs/expected.md)") from None


def _unknown(keys: Sequence[str], allowed: Sequence[str], where: str, places: _Places, table: str,
             index: int) -> None:
    for k in keys:
        if k not in allowed:
            raise _fail(f"unknown key `{k}` in {where}", places.key(table, index, k),
                        f"{where} takes {', '.join(allowed)}")


def _kind(raw: ConfigValue) -> str:
    """What a TOML value is, in words: messages name a value's type, never the text it holds (a spec may name
    any file in its folder, and its contents must not reach a CI log)."""
    return {bool: "a boolean", str: "a string", list: "an array", dict: "a table"}.get(type(raw), "a date or time")


def _fraction(raw: ConfigValue, what: str, span: Span) -> float:
    key = what.rpartition(".")[2]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise _fail(f"{what} is {_kind(raw)}: expected a fraction in (0, 1]", span, f"write e.g. `{key} = 0.87`")
    if not math.isfinite(raw) or not 0 < raw <= 1:
        raise _fail(f"{what} is {raw:g}: a fraction must be in (0, 1]", span, f"write e.g. `{key} = 0.87`")
    return float(raw)


def _time(raw: ConfigValue, what: str, span: Span) -> float:
    key = what.rpartition(".")[2]
    example = f'write e.g. `{key} = "1.2 ms"` or a number of seconds'
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise _fail(f"{what} is {_kind(raw)}: expected a time", span, example)
    try:
        value = float(raw) if not isinstance(raw, str) else parse_quantity(raw, Dim.TIME, what=what)
    except KvplanError:
        raise _fail(f"{what} is not a time with a unit (s, ms, us, ns)", span, example) from None
    if not math.isfinite(value) or value < 0:
        raise _fail(f"{what} is {value:g} s: a time must be finite and not negative", span, example)
    return value


def _fit(raw: ConfigValue, index: int, places: _Places) -> Fit:
    """One [[fit]] table checked: its keys, its device and engine, each factor's range."""
    where = f"[[fit]] #{index + 1}"
    head = places.header("fit", index)
    if not isinstance(raw, dict):
        raise _fail(f"{where} is not a table", head, "write `[[fit]]` and its keys below it")
    _unknown(list(raw), FIT_KEYS, "[[fit]]", places, "fit", index)
    got: dict[str, object] = {}
    for key in ("device", "engine"):
        v = raw.get(key)
        if not isinstance(v, str):
            raise _fail(f"{where} has no {key}" if v is None else f"{where}: {key} is {_kind(v)}, not a name",
                        places.key("fit", index, key) if v is not None else head,
                        f'add `{key} = "{"h100-sxm" if key == "device" else "vllm"}"`')
        got[key] = v
    if got["device"] not in catalog.devices():
        raise _fail(f"{where}: device is not a catalog device id", places.key("fit", index, "device"),
                    catalog.suggest(str(got["device"]), catalog.devices()) + " (`kvplan devices` lists them)")
    if got["engine"] not in ENGINES:
        raise _fail(f"{where}: engine is not one kvplan calibrates", places.key("fit", index, "engine"),
                    f"write one of {', '.join(ENGINES)}")
    for key in _FRACTIONS:
        if key in raw:
            got[key] = _fraction(raw[key], f"[[fit]].{key}", places.key("fit", index, key))
    for key in _TIMES:
        if key in raw:
            got[key] = _time(raw[key], f"[[fit]].{key}", places.key("fit", index, key))
    if "points" in raw:
        p = raw["points"]
        if isinstance(p, bool) or not isinstance(p, int) or p < 0:
            raise _fail("[[fit]].points is not a count of measurements (a whole number, 0 or more)",
                        places.key("fit", index, "points"),
                        "write e.g. `points = 12`")
        got["points"] = p
    got["kv_efficiency"] = _kv_efficiency(raw.get("kv_efficiency", {}), index, places)
    return Fit(**got)  # type: ignore[arg-type]  # each key checked above


def _kv_efficiency(raw: ConfigValue, index: int, places: _Places) -> tuple[tuple[str, float], ...]:
    table = "fit.kv_efficiency"
    if not isinstance(raw, dict):
        raise _fail(f"[[fit]].kv_efficiency is {_kind(raw)}: expected a table of KV dtype = fraction",
                    places.key("fit", index, "kv_efficiency"), "write `[fit.kv_efficiency]` and `fp8 = 0.93` below it")
    _unknown(list(raw), tuple(catalog.DTYPES), "[fit.kv_efficiency]", places, table, index)
    return tuple((k, _fraction(v, f"[fit.kv_efficiency].{k}", places.key(table, index, k))) for k, v in raw.items())


def load_profile(path: str) -> Profile:
    """Read and check a calibration profile; a ProfileError (or an InputFileError, an OSError) at the place
    in the file that is wrong, naming the key and what it takes."""
    text = files.read_text(path, what="the calibration profile")
    files.refuse_blank(text, path, what="the calibration profile",
                       holds="[[fit]] tables with device, engine and the fitted factors (docs/expected.md)")
    data = _toml(text, path)
    places = _places(text, path)
    _unknown(list(data), TOP_KEYS, "a calibration profile", places, "", 0)
    head = data.get("profile", {})
    if not isinstance(head, dict):
        raise _fail("`profile` is not a table", places.key("", 0, "profile"), "write `[profile]` and its keys")
    _unknown(list(head), PROFILE_KEYS, "[profile]", places, "profile", 0)
    name = head.get("name", files.stem(path))
    if not isinstance(name, str) or not name:
        raise _fail("[profile].name is not a name (a non-empty string)", places.key("profile", 0, "name"),
                    'write e.g. `name = "h100-vllm"`')
    inputs = head.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(x, str) for x in inputs):
        raise _fail("[profile].inputs is not a list of file names", places.key("profile", 0, "inputs"),
                    'write e.g. `inputs = ["latency.json"]`')
    raw_fits = data.get("fit", [])
    if not isinstance(raw_fits, list):
        raise _fail("`fit` is not an array of tables", places.key("", 0, "fit"), "write each as `[[fit]]`")
    fits: list[Fit] = []
    for i, raw in enumerate(raw_fits):
        fit = _fit(raw, i, places)
        twin = next((j for j, f in enumerate(fits) if (f.device, f.engine) == (fit.device, fit.engine)), None)
        if twin is not None:
            first = places.header("fit", twin)
            raise _fail(f"a second [[fit]] for {fit.label}", places.header("fit", i),
                        f"the first is at line {first.line}; one fit per device and engine")
        fits.append(fit)
    return Profile(path, name, tuple(str(x) for x in inputs), tuple(fits))


def _calibrated(profile: Profile, fit: Fit, name: str, value: float, unit: str) -> Value:
    n = "" if fit.points is None else f" from {fit.points} measurement{'s' if fit.points != 1 else ''}"
    return Value(value, unit, Evidence.DERIVED, f"{name} calibrated in {profile.path} [fit {fit.label}]{n}")


def factors(profile: Optional[Profile], device: str, kv_dtype: str, engine: str, defaults: Factors) -> Factors:
    """`defaults` with what the profile's fit for (device, engine) determined laid over them: each overridden
    factor derived, its source naming the profile and the fit; η_kv is η_w × the fit's kv_efficiency for the
    KV dtype, each taken from the fit where it has it, from the defaults where not; the Factors' `profile` names
    the profile and the fit ("h100-vllm [fit h100-sxm/vllm]"). No profile: the defaults.
    No fit for the device: the defaults, each source saying the profile has none."""
    if profile is None:
        return defaults
    fit = profile.fit_for(device, engine)
    if fit is None:
        others = [f.engine for f in profile.fits_on(device, engine)]
        lines = f" (its fits {', '.join(others)} calibrate those engines' lines)" if others else ""
        gap = f"; {profile.path} has no [[fit]] for {device} (engine {engine}){lines}: kvplan's default"
        return defaults.replaced({k: attrs.evolve(v, source=v.source + gap) for k, v in defaults.items()})
    out: dict[str, Value] = {}
    for key, unit in (("eta_w", "x"), ("eta_compute", "x"), ("t_fixed", "s"), ("collective_latency", "s"),
                      ("t_layer", "s")):
        got = getattr(fit, key)
        if got is not None:
            out[key] = _calibrated(profile, fit, key, float(got), unit)
    eff = dict(fit.kv_efficiency).get(kv_dtype)
    if "eta_w" in out or eff is not None:
        eta_w = out.get("eta_w", defaults.eta_w)
        # the default η_kv is η_w × the dtype's default kv_efficiency: recover that factor to keep it
        default_eff = defaults.eta_kv.value / defaults.eta_w.value
        k = default_eff if eff is None else eff
        words = (f"kv_efficiency({kv_dtype}) = {k:g} " + (f"calibrated in {profile.path} [fit {fit.label}]"
                                                          if eff is not None else "kvplan's default"))
        out["eta_kv"] = Value(eta_w.value * k, "x", Evidence.DERIVED,
                              f"η_w × kv_efficiency({kv_dtype}) = {eta_w.value:g} × {k:g} ({eta_w.source}; {words})")
    return defaults.replaced(out, f"{profile.name} [fit {fit.label}]")


def unmatched(profile: Profile, asked: Sequence[tuple[str, str]], per_engine: bool = True) -> Optional[str]:
    """Why the profile can calibrate none of the deployments `asked` ((device, engine) each), naming the fits it
    holds and what was asked; None when one of them has a fit (Profile.fits_on, or with `per_engine` False, where
    no engine's line is planned beside an `engine = any` deployment, Profile.fit_for)."""
    if any(profile.fits_on(device, engine) if per_engine else profile.fit_for(device, engine)
           for device, engine in asked):
        return None
    held = ", ".join(f.label for f in profile.fits) or "no [[fit]] at all"
    wanted = ", ".join(f"{device} (engine {engine})" for device, engine in dict.fromkeys(asked))
    return (f"the calibration profile {profile.path} has no fit for what the spec plans: it holds {held}; the "
            f"spec asks for {wanted}")


def missing_fit(profile: Optional[Profile], device: str, engine: str) -> str:
    """A note when the profile has no fit for the deployment (its defaults are used), else ""."""
    if profile is None or profile.fit_for(device, engine) is not None:
        return ""
    fitted = ", ".join(f.label for f in profile.fits) or "none"
    return (f"the calibration profile {profile.path} has no [[fit]] for {device} (engine {engine}; it fits "
            f"{fitted}): the expected figures use kvplan's default factors")


__all__ = ["ENGINES", "Fit", "Profile", "ProfileError", "factors", "load_profile", "missing_fit", "unmatched"]
