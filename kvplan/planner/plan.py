"""The plan: choices, the numbers behind each, the rules that drove them, what was turned down."""

from __future__ import annotations

import enum
import hashlib
import json
import weakref
from typing import Any, ClassVar, Literal, Optional, Union

import attrs

from kvplan.base.diagnostics import Diagnostic
from kvplan.base.evidence import Value
from kvplan.base.json_types import JSONValue
from kvplan.base.records import record
from kvplan.base.units import fmt_unit
from kvplan.catalog import Device, Dtype, Link, Model, get_link
from kvplan.catalog.engines import kv_width
from kvplan.model.kernels.flashinfer import plan_kernel
from kvplan.model.memory import Reserves
from kvplan.model.scenario import Scenario

#: Why a candidate left the search when no design rule removed it.
Cause = Literal["rule", "fit", "layout", "slo", "objective", "more-devices"]
#: Labelled figures whose labels vary from record to record (a decision's, an option's, a
#: rejection's numbers), printed in this order; the plan's fixed sets of figures are records below.
Numbers = tuple[tuple[str, Value], ...]


class _Figures:
    """A fixed set of figures, one attrs field each, named as the JSON contract labels it."""

    __slots__ = ()
    __attrs_attrs__: ClassVar[tuple[attrs.Attribute[Optional[Value]], ...]]  # set by attrs on each record

    def items(self) -> Numbers:
        """(label, Value) in field order, the order the renderers print and the digest hashes; a
        figure the record does not have (None) is left out."""
        return tuple((f.name, v) for f in attrs.fields(type(self)) if isinstance(v := getattr(self, f.name), Value))


@record(kw_only=True)
class MapNumbers(_Figures):
    """A regime map's figures (R1 before the plan, R8 after it). `devices` is the R1 map's device
    count when it is drawn on more than one device or on none that holds the weights, else None."""

    devices: Optional[Value] = None
    kappa: Value
    s_star: Value
    s_cap: Value
    context_over_s_star: Value
    context_over_s_cap: Value

    @property
    def n_devices(self) -> int:
        """The device count the map is drawn on (1 when `devices` is None or absent)."""
        return int(self.devices.value) if self.devices is not None and not self.devices.absent else 1


@record(kw_only=True)
class Metrics(_Figures):
    """What one layout predicts (docs/model.md §3–6): the baseline's figures, and the plan's before its speedup."""

    step_time: Value             # the lower bound (docs/model.md §4)
    step_time_expected: Value    # what an engine is expected to achieve (docs/expected.md)
    throughput: Value
    throughput_expected: Value
    ttft: Value                  # the lower bound of one prompt of the context's prefill
    ttft_expected: Value
    kv_bytes: Value
    weight_bytes: Value
    memory_needed: Value
    memory_usable: Value
    device_need: Value
    headroom: Value
    kv_bytes_read: Value

    def with_speedup(self, speedup: Value) -> PlanMetrics:
        """These metrics as a plan's, with its speedup over the baseline."""
        return PlanMetrics(**attrs.asdict(self, recurse=False), speedup=speedup)


@record(kw_only=True)
class PlanMetrics(Metrics):
    """The plan's metrics and its speedup over the baseline (printed last)."""

    speedup: Value


@record(kw_only=True)
class ByteFactors(_Figures):
    """What each KV domain multiplies the 16-bit footprint by, and their product (docs/model.md §3)."""

    quantization: Value
    eviction: Value
    paging: Value
    prefix_caching: Value
    combined: Value


@record(kw_only=True)
class SpeculativeFigures(_Figures):
    """Speculative decoding weighed on the plan's layout (kvplan.planner.speculative, docs/speculative.md): the
    method and k with the shortest time per output token, whether the plan adopts it (its speedup beats 1, its
    draft fits), the draft's repo id ("" where none is loaded), the regime of its verify step, and its figures."""

    method: str
    adopted: bool
    draft_model: str
    regime: str
    speedup: Value                # speculative_speedup: time per token without over with speculation (x)
    time_per_token: Value         # (T_verify + k · T_draft)/τ, s
    time_per_token_plain: Value   # the expected step without speculation, s
    tau: Value                    # tokens kept per verify step
    acceptance: Value             # α per drafted token
    draft_tokens: Value           # k
    verify_time: Value            # T_verify at b·(k+1) query tokens, s
    draft_time: Value             # one draft forward, s
    draft_memory: Value           # the draft's weights and KV, B


@record(kw_only=True)
class LoadFigures(_Figures):
    """A request workload's service figures (kvplan.model.load, docs/service.md): at the declared rate, the
    concurrency, the running sequences the plan's batch is sized to, ITL and TTFT, and the saturation rate. The
    figures of the steady state are absent (None) when the rate is past saturation."""

    rate: Value                     # the declared rate, or a closed loop's throughput X (derived)
    #: A closed loop's (workload.concurrency, SPEC §13): the output tokens per second, and the mean TPOT =
    #: (E2E − TTFT)/(n_out − 1) as the benchmark tools print it; None for a rate.
    output_rate: Optional[Value] = None
    batch: Value                    # the plan's batch, derived from the rate
    concurrency: Optional[Value] = None
    running: Optional[Value] = None
    itl: Optional[Value] = None
    ttft: Optional[Value] = None
    tpot: Optional[Value] = None
    prefill_wait: Optional[Value] = None
    prefill_utilization: Optional[Value] = None
    saturation_rate: Value
    #: The largest rate at which the plan's layout meets the service SLOs (mean TTFT, ITL), below saturation
    #: (kvplan.model.load.goodput); None when the spec sets neither. `goodput_slo` names what binds it: ttft,
    #: itl, or saturation (both hold up to the saturation rate).
    goodput: Optional[Value] = None
    batch_limit: Value
    mean_context: Value
    tail_context: Value
    kv_bytes_mean: Optional[Value] = None
    kv_bytes_tail: Optional[Value] = None
    chunk: Value
    saturated: bool
    binding: str
    #: P, seconds: one prompt's expected prefill less t_fixed (kvplan.model.load.Load.chunk_time), per second of
    #: rate λ·P of the engine's time; not printed, the cost split reads it (kvplan.planner.cost).
    prefill_time: float = 0.0

    goodput_slo: Optional[str] = None


@record(kw_only=True)
class CostFigures(_Figures):
    """What a plan costs (kvplan.planner.cost, docs/service.md "Cost"): the price of a device-hour, the devices paid
    for, the deployment's $/hour, and $/1M tokens: for a request workload at a rate (the declared one, or any other
    kvplan.planner.cost.at_rate is asked for), output and input split by the engine's time shares; for the batch
    form, output tokens at the plan's expected throughput. A figure past saturation is absent (Value.absent)."""

    price: Value                               # USD/h per device: the spec's (assumed) or the catalog's (reported)
    devices: Value                             # devices × replicas: what is paid for
    hourly: Value                              # USD/h of the deployment
    rate: Optional[Value] = None               # the request rate the figures are at (request workloads)
    prefill_share: Optional[Value] = None      # λ·P per replica: the engine's time spent prefilling
    per_million_input: Optional[Value] = None  # request workloads only: the batch form has no prompts at a rate
    per_million_output: Value


@record
class Rejection:
    """Why the search turned a candidate down: the design rule that removed it (None when it does
    not fit, misses an SLO or loses on the objective), the reason in words, the numbers behind it.
    Code reads `rule` and `cause`, never the words; renderers format the record."""

    rule: Optional[str]               # R1..R8, or a registered rule's id
    reason: str
    numbers: Numbers = ()
    cause: Cause = "rule"

    def __attrs_post_init__(self) -> None:
        if (self.rule is None) == (self.cause == "rule"):
            raise ValueError("a rejection names its rule exactly when its cause is a rule")


@record
class Option:
    """An option considered for a decision and why it was or was not taken (a Rejection when the
    search turned it down, words when it never reached the search)."""

    choice: str
    reason: Union[str, Rejection]
    numbers: Numbers = ()


@record
class Decision:
    """One MADR-shaped record: context (facts), the decision, evidence, options considered."""

    #: regime | quantization | eviction | paging | prefix-caching | tiering | placement | devices
    domain: str
    title: str
    choice: str
    rules: tuple[str, ...]            # R1..R8
    context: tuple[str, ...]          # facts only
    decision: str                     # "We will ..."
    numbers: Numbers
    evidence: tuple[Value, ...] = ()  # reported results, never mixed with derived numbers
    options: tuple[Option, ...] = ()
    consequences: tuple[str, ...] = ()
    pinned: bool = False
    reported_text: tuple[str, ...] = ()  # reported results with no single number, or gaps, as written


@record
class Change:
    """One concrete change to a deployment, e.g. Change("pin.devices", "=", "8"): the setting's path,
    the operator written before the value, and the value as the spec writes it (None removes the
    setting). kvplan.planner.lint turns changes into edits of the file."""

    path: str
    op: str
    value: Optional[str]


@record
class Suggestion:
    """A suggestion's text and the changes it is made of (none: a statement, not a change)."""

    text: str
    changes: tuple[Change, ...] = ()


class Constraint(str, enum.Enum):
    """What an unmet constraint is about. The value is the name the JSON contract, the digest and lint's spans
    use (`slo.<value>` for an SLO); a str so that it serializes as that name."""

    FITS = "fits"                 # memory: the chosen candidate does not fit
    LAYOUT = "layout"             # no tensor × pipeline split of the model takes the device count
    ENGINE = "engine"             # the engine cannot run the count (no pipeline stages, heads that do not split)
    STEP_TIME = "step_time"
    THROUGHPUT = "throughput"
    TTFT = "ttft"
    ITL = "itl"                   # a request workload's ITL under load
    RATE = "rate"                 # a request workload's rate past saturation
    GOODPUT = "goodput"           # a request workload's goodput below slo.rate

    def __str__(self) -> str:  # the name, in f-strings too (a str-mixin Enum formats as `Constraint.FITS`)
        return str.__str__(self)


@record
class Unmet:
    """A constraint the best plan misses, by how much, and what would meet it: each suggestion carries its text
    and the changes it is made of, verified by planning them (kvplan.planner.suggest)."""

    constraint: Constraint = attrs.field(validator=attrs.validators.instance_of(Constraint))
    message: str
    shortfall: Value
    suggestions: tuple[Suggestion, ...] = ()


@record
class TierPlan:
    tier: str                         # none | host | ssd | remote
    link: Optional[str]
    bytes: Optional[Value]
    prefill_time: Optional[Value]
    fetch_time: Optional[Value]


@record(kw_only=True)
class PoolFigures(_Figures):
    """A disaggregated plan's figures (SPEC §14, kvplan.planner.disagg): the KV transfer between the pools, the
    end-to-end TTFT it joins, the ITL of the decode pool, each pool's worker rate and the deployment's totals."""

    ttft: Optional[Value] = None             # TTFT_prefill + transfer + the decode pool's join; None: saturated
    ttft_prefill: Optional[Value] = None     # the prefill pool's TTFT at its share of the rate, queueing included
    transfer_bytes: Value                    # n_in · κ at the decode pool's KV dtype
    transfer_time: Value                     # n_in · κ / β_link
    ttft_decode: Optional[Value] = None      # the decode pool's wait for the iteration in progress, T/2
    itl: Optional[Value] = None              # the decode pool's ITL: no prefill chunk in its steps
    prefill_worker_rate: Value               # one prefill worker's goodput (or saturation rate), req/s
    decode_worker_rate: Value                # one decode worker's
    goodput: Value                           # the lesser pool's: what both carry within the SLOs
    devices: Value                           # x·n_p + y·n_d
    goodput_per_device: Value


@record
class Pools:
    """x prefill workers and y decode workers (SPEC §14): each pool's settled service plan (its scenario's replicas
    are the workers), the link the KV crosses and the figures of the whole."""

    prefill: "Plan"
    decode: "Plan"
    prefill_workers: int
    decode_workers: int
    link: str                # links.toml id of the link between the pools
    same_node: bool          # every worker in one scale-up domain: the scale-up link, else the scale-out link
    figures: PoolFigures

    @property
    def ratio(self) -> str:
        """`x:y`, prefill workers to decode workers."""
        return f"{self.prefill_workers}:{self.decode_workers}"

    def canonical(self) -> dict[str, JSONValue]:
        """What a disaggregated plan's digest adds: both pools' own digests, x:y, the link and the figures."""
        return {"prefill": self.prefill.digest, "decode": self.decode.digest, "ratio": self.ratio,
                "link": self.link, "figures": [[k, _val(v)] for k, v in self.figures.items()]}


@record
class Plan:
    scenario: Scenario
    kv_dtype: Dtype
    retention: float
    block_size: int
    prefix_caching: bool
    sharing: float
    placement: str
    n_devices: int
    tp: int
    pp: int
    tier: TierPlan
    regime_before: str
    regime_after: str
    map_before: MapNumbers
    map_after: MapNumbers
    metrics: PlanMetrics
    baseline: Metrics
    byte_factors: ByteFactors
    decisions: tuple[Decision, ...]
    unmet: tuple[Unmet, ...]
    assumptions: tuple[Value, ...]
    candidates_evaluated: int
    feasible: bool
    reserves: Reserves = Reserves()   # the memory model's reserves this plan was sized with
    #: The planner options given (plan()'s keywords: reserve, min_gain, eta, activation_reserve,
    #: runtime_reserve), so that the scenario can be planned again for another engine with the same ones.
    options: tuple[tuple[str, float], ...] = ()
    #: `engine = any`: the plan made under each engine's own capabilities (kvplan.planner.with_engines), side by
    #: side; empty until asked for, and for a plan made for one engine. Neither field is in the digest: each
    #: engine's plan has its own.
    engines: tuple["Plan", ...] = ()
    #: The engine the spec names, when this plan was made for another one (kvplan.planner.for_engine), else "".
    spec_engine: str = ""
    #: The factors of the plan's expected figures (kvplan.model.expected.Factors.items()), by name.
    expected_factors: Numbers = ()
    #: A request workload's service figures (`workload { rate = ... }`); None for the batch form.
    load: Optional[LoadFigures] = None
    #: What the plan costs (kvplan.planner.cost); None where no price is known (the spec's `price`, else the
    #: device's catalog price). Not in the digest: it guards the engine configuration, which no price changes.
    cost: Optional[CostFigures] = None
    #: The cost figures at the plan's goodput (a request workload with service SLOs and a price), else None.
    cost_at_goodput: Optional[CostFigures] = None
    #: Without a price: the one line that says how to give one (kvplan.planner.cost.no_price); else "".
    cost_absent: str = ""
    #: Speculative decoding as weighed for a spec with a `speculative` block (kvplan.planner.speculative); None
    #: without one. In the digest: an adopted draft changes the engine configuration.
    speculative: Optional[SpeculativeFigures] = None
    #: `serving = disaggregated` (or `auto` that chose it): the two pools; this plan is then the decode pool's,
    #: its load's TTFT the end-to-end one (kvplan.planner.disagg). None: one engine serves both phases.
    pools: Optional[Pools] = None

    def metric(self, key: str) -> Value:
        """A metric by its label, for a name the user wrote (`expect { step_time < 30ms }`); KeyError
        for one the plan has not. Code that knows which metric it wants reads the field."""
        return dict(self.metrics.items())[key]

    @property
    def kv_width(self) -> float:
        """Bytes per KV value as the plan's engine stores its dtype, scales included (catalog.engines.kv_width):
        the width its KV bytes are counted at."""
        return kv_width(self.scenario.engine, self.kv_dtype.id, self.scenario.model)

    @property
    def choices(self) -> dict[str, JSONValue]:
        """The decisions an engine config is made of."""
        return {
            "kv_dtype": self.kv_dtype.id, "retention": self.retention, "block_size": self.block_size,
            "prefix_caching": self.prefix_caching, "placement": self.placement, "devices": self.n_devices,
            "tensor_parallel": self.tp, "pipeline_parallel": self.pp, "tier": self.tier.tier,
            "tier_bytes": None if self.tier.bytes is None or self.tier.tier == "none" else round(self.tier.bytes.value),
            "model": self.scenario.model.id, "device": self.scenario.device.id,
            "weights": self.scenario.weights.id, "batch": self.scenario.batch, "context": self.scenario.context,
        }

    @property
    def kernel(self) -> dict[str, Any]:
        """The decode-kernel settings one tensor-parallel rank runs (FlashInfer), as the plan JSON's
        `kernel` key; derived from the choices, so not part of the digest."""
        return plan_kernel(self)

    def canonical(self) -> dict[str, JSONValue]:
        """What the digest covers: the plan's outcome and everything it was made from, in a form that
        does not depend on how a choice was reached. In: the choices, σ, the regime maps, every metric
        and byte factor, the tier and its figures, what is unmet and by how much, every assumption
        (the spec's defaults, the planner's assumed defaults and overrides: reserves, min gain,
        prefill efficiency), each decision's choice, numbers and reported evidence (the quality
        entries used), and the catalog records (model, device, dtypes, the tier's link) the plan used.
        Out: explanation that a pin changes without changing the plan (rationale text, options turned
        down, which choices were pinned, how many candidates were searched), the wording of sources,
        and the names of the spec file and scenario. Pinning the plan's own choices keeps the digest."""

        sc = self.scenario
        link = None if self.tier.link is None else _record(get_link(self.tier.link))
        tier: dict[str, JSONValue] = {"tier": self.tier.tier, "link": self.tier.link,
                "bytes": None if self.tier.tier == "none" else _val(self.tier.bytes),
                "prefill_time": _val(self.tier.prefill_time), "fetch_time": _val(self.tier.fetch_time)}
        return {
            "choices": self.choices, "sharing": _num(self.sharing), "feasible": self.feasible,
            "regime": [self.regime_before, self.regime_after],
            **{name: [[k, _val(v)] for k, v in record.items()] for name, record in (
                ("map_before", self.map_before), ("map_after", self.map_after), ("metrics", self.metrics),
                ("baseline", self.baseline), ("byte_factors", self.byte_factors))},
            "tier": tier,
            "expected_factors": [[k, _val(v)] for k, v in self.expected_factors],
            "unmet": [[u.constraint.value, _val(u.shortfall)] for u in self.unmet],
            # only a request workload has them: the batch form's digests stay as they were
            **({"load": [[k, _val(v)] for k, v in self.load.items()]} if self.load is not None else {}),
            # only a spec with a speculative block has them: every other digest stays as it was
            **({"speculative": [self.speculative.method, self.speculative.adopted, self.speculative.draft_model,
                                [[k, _val(v)] for k, v in self.speculative.items()]]}
               if self.speculative is not None else {}),
            # `devices = auto` and `placement = auto` (with its device cap) only say the planner chooses:
            # the choice is in `choices`, and pinning it drops the default (typed keys come with issue 10)
            "assumptions": [_val(v) for v in self.assumptions if not _auto_default(v)],
            "decisions": [[d.domain, d.choice, [[k, _val(v)] for k, v in d.numbers],
                           [[*_figure(v), v.source] for v in d.evidence], list(d.reported_text)]
                          for d in self.decisions],
            "catalog": {"model": _record(sc.model), "device": _record(sc.device), "weights": _record(sc.weights),
                        "kv_dtype": _record(self.kv_dtype), "link": link},
            # only a disaggregated plan has them: every other digest stays as it was
            **({"pools": self.pools.canonical()} if self.pools is not None else {}),
        }

    def verdict(self) -> "Verdict":
        """The plan against its spec's SLOs: one row per SLO (its bound, the prediction, met), and what else it
        misses (the planner's Unmet constraints, which decide `met`)."""
        return _verdict(self)

    @property
    def digest(self) -> str:
        """A short stable hash of the plan's canonical form (`canonical`), for stale-config detection.
        Computed once per plan (a frozen record): advise prints each plan's and compares each engine's with it."""
        known = _DIGESTS.get(id(self))
        if known is None:
            blob = json.dumps(self.canonical(), sort_keys=True, ensure_ascii=True, allow_nan=True).encode()
            known = _DIGESTS[id(self)] = "sha256:" + hashlib.sha256(blob).hexdigest()[:16]
            weakref.finalize(self, _DIGESTS.pop, id(self), None)  # dropped with the plan, before its id is reused
        return known


#: Each live plan's digest, by id (a record has no slot to keep it in).
_DIGESTS: dict[int, str] = {}


#: Catalog fields that are prose, not inputs: editing them does not change a plan.
_PROSE = frozenset({"name", "source", "note", "confidence", "aliases", "hf_ids"})
#: A device's price (kvplan.planner.cost): an input of the cost figures, which are not in the digest, never of the
#: engine configuration the digest guards; an objective it changes (`cheapest`) changes `choices`, which are.
_PRICE = frozenset({"price_per_hour", "price_source", "price_date"})
#: Catalog fields that are inputs only when set (a model's exact weight bytes, its architecture, a device's node and
#: scale-out link, and its host size, which decides the launch files a host): absent, the record is as before.
_WHEN_SET = frozenset({"weight_bytes", "architecture", "node", "scaleout_link", "host"})


def _auto_default(v: Value) -> bool:
    """An assumption that a choice is left to the planner (`devices = auto`, `placement = auto`)."""
    return v.source.startswith(("default: devices = auto", "default: placement = auto"))


def _num(x: JSONValue) -> JSONValue:
    """A number rounded to 12 significant digits (the digest must not see float noise); words pass."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    return float(f"{float(x):.12g}")


def _figure(v: Value) -> list[JSONValue]:
    """A Value as [number, unit, evidence]: its source is wording."""
    return [_num(v.value), v.unit, v.evidence.value]


def _val(v: Optional[Value]) -> Optional[list[JSONValue]]:
    """_figure, or None for no Value."""
    return None if v is None else _figure(v)


def _record(obj: Union[Model, Device, Dtype, Link, None]) -> Optional[dict[str, JSONValue]]:
    """A catalog record's fields, prose left out."""
    if obj is None:
        return None
    out: dict[str, Any] = {}
    for k, v in attrs.asdict(obj, recurse=False).items():
        if k in _PROSE or k in _PRICE or (k in _WHEN_SET and v in (None, "")):
            continue
        out[k] = (list(v) if isinstance(v, tuple) else _record(v) if attrs.has(type(v)) else _num(v))
    return out


@record
class PlanResult:
    """A plan and the findings lint reports for it (pinned choices, SLOs, expectations)."""

    plan: Plan
    findings: tuple[Diagnostic, ...]


# ---------------------------------------------------------------- the plan against its SLOs

@record
class SloRow:
    """One SLO of the spec beside the plan's prediction: `bound` as the spec states it (`<= 50 ms`), `predicted`
    the figure it is checked against (None past saturation: no steady state), `met` the planner's verdict."""

    name: str
    bound: str
    predicted: Optional[Value]
    met: bool

    @property
    def got(self) -> str:
        """The prediction with its evidence class, or why there is none."""
        v = self.predicted
        return "no steady state" if v is None else f"{v.human} ({v.evidence.value})"

    @property
    def text(self) -> str:
        return f"{self.name} {self.got}, SLO {self.bound}: {'met' if self.met else 'UNMET'}"


@record
class Verdict:
    """The plan's service verdict: the SLO rows, and the constraints it misses that no row shows (fits, layout)."""

    rows: tuple[SloRow, ...]
    others: tuple[str, ...]
    met: bool

    @property
    def line(self) -> str:
        """One line: MET or UNMET, then each SLO row, then any other constraint missed."""
        parts = [r.text for r in self.rows] or ["the spec sets no SLO"]
        parts += [f"{c}: UNMET" for c in self.others]
        return f"service verdict: {'met' if self.met else 'UNMET'} ({'; '.join(parts)})"


def _verdict(p: Plan) -> Verdict:
    sc = p.scenario
    missed = {u.constraint for u in p.unmet}
    shown: set[Constraint] = set()
    rows: list[SloRow] = []

    def row(name: str, bound: str, got: Optional[Value], *keys: Constraint) -> None:
        shown.update(keys)
        # past saturation there is no steady state: no latency SLO holds, though the planner names only the rate
        rows.append(SloRow(name, bound, got, got is not None and not any(k in missed for k in keys)))

    on_bound = sc.slo_on == "bound"
    m = p.metrics
    ld = p.load
    if sc.rate is not None and ld is not None:
        sat = None if ld.saturated else ld.saturation_rate
        if sc.slo_rate is not None:
            row("rate (goodput)" if ld.goodput is not None else "rate (saturation)",
                f">= {fmt_unit(sc.slo_rate, 'req/s')}", ld.goodput or sat, Constraint.GOODPUT, Constraint.RATE)
        else:
            row("rate (saturation)", f"> {fmt_unit(sc.rate, 'req/s')}, the declared rate", ld.saturation_rate,
                Constraint.RATE)
        if sc.slo_itl is not None:
            row("ITL", f"<= {fmt_unit(sc.slo_itl, 's')}", ld.itl, Constraint.ITL)
        if sc.slo_ttft is not None:
            row("TTFT", f"<= {fmt_unit(sc.slo_ttft, 's')}", ld.ttft, Constraint.TTFT)
    else:
        if sc.slo_step_time is not None:
            row("step time", f"<= {fmt_unit(sc.slo_step_time, 's')}",
                m.step_time if on_bound else m.step_time_expected, Constraint.STEP_TIME)
        if sc.slo_throughput is not None:
            row("throughput", f">= {fmt_unit(sc.slo_throughput, m.throughput.unit)}",
                m.throughput if on_bound else m.throughput_expected, Constraint.THROUGHPUT)
        if sc.slo_ttft is not None:
            row("TTFT", f"<= {fmt_unit(sc.slo_ttft, 's')}", m.ttft if on_bound else m.ttft_expected, Constraint.TTFT)
    others = tuple(dict.fromkeys(u.constraint.value for u in p.unmet if u.constraint not in shown))
    return Verdict(tuple(rows), others, not p.unmet)
