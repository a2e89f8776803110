"""The grid a sweep covers: the lists of device counts, KV dtypes, batches and contexts read from the command
line (`1..1024:x2`, `8k,32k`) or from a checked .kvp file's deployments, each bounded, as `SweepSpec`s
(kvplan.model.sweep evaluates and writes them)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Optional, Sequence

from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.base.records import record
from kvplan.base.units import MAX_EXACT, Dim, parse_quantity
from kvplan.catalog import DTYPES, Device, Dtype, Model, dtype
from kvplan.catalog.weight_bytes import planned
from kvplan.model import roofline as rf
from kvplan.model.profile import Profile

if TYPE_CHECKING:
    from kvplan.model.scenario import DeviceCount, Scenario

#: The longest list one option may expand to (a range like 1..1e12 is a typo, not a sweep).
MAX_LIST = 10**7


class SweepError(KvplanError):
    """A sweep list kvplan cannot read."""


# ------------------------------------------------------------------ lists

_RANGE = re.compile(r"^(?P<lo>.*?)\.\.(?P<hi>[^:]*)(?::(?P<op>[x*+])(?P<step>.*))?$")


def _example(kind: str) -> str:
    return {"tokens": "4k..1M:x2, 8k..128k:+8k or 1k,32k,128k", "int": "1..64, 1..1024:x2 or 1,8,32"}[kind]


def _number(text: str, kind: str, what: str) -> float:
    if kind == "tokens":
        return parse_quantity(text, Dim.TOKENS, what=what)
    try:
        return float(text)
    except ValueError:
        raise SweepError(f"{what}: cannot read '{text}' as a number", help=f"write e.g. {_example(kind)}") from None


def _whole(x: float, text: str, what: str) -> int:
    if not math.isfinite(x) or abs(x - round(x)) > 1e-9 * max(1.0, abs(x)):
        raise SweepError(f"{what}: '{text}' is not a whole number", help="batch, context and device counts are counts")
    n = int(round(x))
    if n < 1:
        raise SweepError(f"{what}: '{text}' must be at least 1")
    top = _LIMITS.get(what, MAX_EXACT)
    if n > top:
        raise SweepError(f"{what}: '{text}' is above {top:,}, kvplan's limit for {what} (docs/language.md#ranges)")
    return n


#: The same limits as a spec's (kvplan.base.limits): a sweep point is a deployment a spec could state.
_LIMITS = {"devices": limits.MAX_DEVICES, "batch": limits.MAX_BATCH, "context": limits.MAX_TOKENS}


def _expand_range(item: str, m: re.Match[str], kind: str, what: str) -> list[int]:
    lo_t, hi_t, op, step_t = m.group("lo").strip(), m.group("hi").strip(), m.group("op"), m.group("step")
    if not lo_t or not hi_t:
        raise SweepError(f"{what}: range '{item}' needs both ends", help=f"write e.g. {_example(kind)}")
    lo = _whole(_number(lo_t, kind, what), lo_t, what)
    hi = _whole(_number(hi_t, kind, what), hi_t, what)
    if lo > hi:
        raise SweepError(f"{what}: range '{item}' runs downward", help=f"write the smaller end first: {hi_t}..{lo_t}")
    step, factor = 1, 0.0
    if op == "+":
        step_x = _number(step_t.strip(), kind, what) if step_t.strip() else 0.0
        if not (step_x >= 1 and step_x == int(step_x)):
            raise SweepError(f"{what}: range '{item}' needs a whole step of at least 1 after ':+'",
                             help=f"write e.g. {_example(kind)}")
        step = int(step_x)
    elif op is not None:
        try:
            factor = float(step_t)
        except ValueError:
            factor = float("nan")
        if not factor > 1 or not math.isfinite(factor):
            raise SweepError(f"{what}: range '{item}' needs a factor above 1 after ':x'", help="write e.g. 1..1024:x2")
    geometric = factor > 1
    count = (int(math.floor(math.log(hi / lo) / math.log(factor) + 1e-9)) + 1 if geometric
             else (hi - lo) // step + 1)
    if count > MAX_LIST:
        raise SweepError(f"{what}: range '{item}' expands to {count:,} values, more than {MAX_LIST:,}",
                         help="use a geometric step (:x2) or a coarser one (:+N)")
    if not geometric:
        return list(range(lo, hi + 1, step))
    return [v for v in (int(round(lo * factor**k)) for k in range(count)) if v <= hi]


def parse_list(text: str, kind: str, what: str) -> tuple[int, ...]:
    """Read '1,8,32', '1..64', '1..1024:x2', '8k..128k:+8k' into whole numbers, duplicates dropped,
    first occurrence kept. `kind` is 'int' (plain numbers) or 'tokens' (k, M, Ki, Mi allowed)."""
    out: dict[int, None] = {}
    if not text.strip():
        raise SweepError(f"{what}: empty list", help=f"write e.g. {_example(kind)}")
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise SweepError(f"{what}: empty item in '{text}'", help=f"write e.g. {_example(kind)}")
        m = _RANGE.match(item)
        if m is not None:
            vals = _expand_range(item, m, kind, what)
        elif ".." in item:
            raise SweepError(f"{what}: cannot read range '{item}'", help=f"write e.g. {_example(kind)}")
        else:
            vals = [_whole(_number(item, kind, what), item, what)]
        for v in vals:
            out[v] = None
        if len(out) > MAX_LIST:
            raise SweepError(f"{what}: the list has more than {MAX_LIST:,} values")
    return tuple(out)


def parse_dtypes(text: str, what: str = "kv-dtype") -> tuple[str, ...]:
    """Read 'bf16,fp8,int4' into catalog dtype ids (aliases resolved, duplicates dropped)."""
    names = [t.strip() for t in text.split(",")]
    if not text.strip() or not all(names):
        raise SweepError(f"{what}: empty item in '{text}'", help="write e.g. bf16,fp8,int4,int2")
    return tuple(dict.fromkeys(dtype(n).id for n in names))


# ------------------------------------------------------------------ the grid

@record
class SweepSpec:
    """One deployment and the lists it is swept over. `name` is set for sweeps of a .kvp file."""

    model: Model
    device: Device
    weights: Dtype
    placement: str
    devices: tuple[int, ...]
    kv_dtypes: tuple[str, ...]
    batch: tuple[int, ...]
    context: tuple[int, ...]
    name: str = ""
    #: The engine (its t_fixed) and calibration profile of the expected step (docs/expected.md).
    engine: str = "any"
    calibration: Optional[Profile] = None

    def __attrs_post_init__(self) -> None:
        if self.placement not in rf.PLACEMENTS:
            raise SweepError(f"unknown placement '{self.placement}'", help="use striped, pinned or affinity")
        for label, values in (("devices", self.devices), ("kv-dtype", self.kv_dtypes), ("batch", self.batch),
                              ("context", self.context)):
            if not values:
                raise SweepError(f"{label}: empty list")
        for n in self.devices:  # reject a bad configuration before any row is written
            self.config(n, self.kv_dtypes[0])

    @property
    def points(self) -> int:
        return len(self.devices) * len(self.kv_dtypes) * len(self.batch) * len(self.context)

    def config(self, n_devices: int, kv: str) -> rf.Config:
        return rf.Config(self.model, self.device, n_devices=n_devices, w_p=self.weights.width,
                         w_kv=DTYPES[kv].width, placement=self.placement)


def spec_from_flags(model: Model, device: Device, *, weights: Optional[str] = None, placement: str = "striped",
                    devices: str = "1", kv_dtypes: str = "bf16", batch: str = "1", context: str = "128k") -> SweepSpec:
    """A SweepSpec from the command line's list texts; without `weights`, the checkpoint's own bytes where the
    model has them, else bf16 (kvplan.catalog.weight_bytes.planned)."""
    model, w = planned(model, dtype(weights) if weights else None)
    return SweepSpec(model=model, device=device, weights=w, placement=placement,
                     devices=parse_list(devices, "int", "devices"), kv_dtypes=parse_dtypes(kv_dtypes),
                     batch=parse_list(batch, "int", "batch"), context=parse_list(context, "tokens", "context"))


def _device_counts(count: "DeviceCount", pinned: Optional[int]) -> tuple[int, ...]:
    """A spec's device count as a list: a fixed or pinned count itself; `auto` or `<= N`,
    the powers of two up to N and N itself (the counts a node is usually cut into)."""
    if pinned is not None:
        return (pinned,)
    if count.mode == "fixed":
        return (count.n,)
    return tuple(dict.fromkeys([*(2**k for k in range(count.n.bit_length())), count.n]))


def specs_from_scenarios(scenarios: Sequence["Scenario"], *, weights: Optional[str] = None,
                         placement: Optional[str] = None, devices: Optional[str] = None,
                         kv_dtypes: Optional[str] = None, batch: Optional[str] = None,
                         context: Optional[str] = None) -> list[SweepSpec]:
    """One SweepSpec per deployment of a checked .kvp file.

    A list given here replaces the file's; otherwise the lists are the values the
    deployment's scenarios take (batch and context in the order written), its pinned
    kv_dtype (else bf16) and device count (`auto`/`<= N`: powers of two up to N).
    `placement = auto` sweeps striped, what SPEC rule 7 chooses on multi-die packages.
    """
    groups: dict[str, list["Scenario"]] = {}
    for sc in scenarios:
        groups.setdefault(sc.deployment, []).append(sc)
    out = []
    for name, scs in groups.items():
        first = scs[0]
        model, w = planned(first.model, dtype(weights)) if weights else (first.model, first.weights)
        pins = first.pinned
        place = placement or pins.placement or first.placement
        out.append(SweepSpec(
            model=model, device=first.device, weights=w,
            placement="striped" if place == "auto" else place,
            devices=(parse_list(devices, "int", "devices") if devices
                     else _device_counts(first.devices, pins.devices)),
            kv_dtypes=parse_dtypes(kv_dtypes) if kv_dtypes else (dtype(pins.kv_dtype or "bf16").id,),
            batch=(parse_list(batch, "int", "batch") if batch
                   else tuple(dict.fromkeys(int(sc.batch) for sc in scs))),
            context=(parse_list(context, "tokens", "context") if context
                     else tuple(dict.fromkeys(int(sc.context) for sc in scs))),
            name=name, engine=first.engine, calibration=first.calibration,
        ))
    return out

