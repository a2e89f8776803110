"""What the planner consumes: one resolved deployment scenario, in base units, with its spans and assumptions."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from kvplan.base.errors import Span
from kvplan.base.evidence import Evidence, Value
from kvplan.base.records import record
from kvplan.catalog import Device, Dtype, Model, settings
from kvplan.catalog.settings import Setting, Takes
from kvplan.model.profile import Profile

#: `devices = auto` lets the planner choose up to this many devices (LANGUAGE.md).
AUTO_DEVICE_LIMIT = 64
#: What a pin or an expectation holds: a word ('fp8', 'host'), a number in base units, or a switch.
PinValue = Union[str, float, bool]


@record
class DeviceCount:
    """`devices = 4` (fixed), `auto` (n = 64, the most the planner may choose) or `<= 8` (max)."""

    mode: str
    n: int


@record
class Pin:
    """A choice the operator already made: kv_dtype 'fp8', block_size 16.0, prefix_caching True,
    retention 0.75, tier 'host', placement 'striped', devices 4.0."""

    key: str
    value: PinValue
    span: Span


@record
class Pins:
    """A scenario's pins, typed: one attribute per pin of the settings table (kvplan.catalog.settings), None
    where not pinned (replicas and attention_dp: 1, their default). `value(row)` reads any pin by its row, typed
    as the row takes it (a count an int, a fraction a float, a switch a bool, a word a str), so that a pin added
    to the table is carried with no other edit; `pins` keeps each Pin with its span."""

    pins: Mapping[str, Pin]

    def value(self, row: Setting) -> Optional[PinValue]:
        """The pinned value of `row` as its row takes it; None where not pinned."""
        pin = self.pins.get(row.key)
        if pin is None:
            return None
        v = pin.value
        if row.takes is Takes.QUANTITY and not isinstance(v, (str, bool)):
            return int(v) if row.integer else float(v)
        return v

    def text(self, row: Setting) -> Optional[str]:
        """The pinned value as a .kvp or a flag writes it: `8192`, `0.9`, `on`, `fp8`; None where not pinned."""
        v = self.value(row)
        if v is None:
            return None
        if isinstance(v, bool):
            return "on" if v else "off"
        return f"{v:g}" if isinstance(v, float) else str(v)

    def at_default(self, row: Setting) -> bool:
        """Whether `row` is unpinned or pinned to its default (replicas = 1): nothing for a writer to say."""
        text = self.text(row)
        return text is None or row.default is not None and text == row.default.value

    def __contains__(self, row: object) -> bool:
        return isinstance(row, Setting) and row.key in self.pins

    def has(self, row: Setting) -> bool:
        """Whether the spec pins `row` (at any value, its default included)."""
        return row.key in self.pins

    def pin(self, row: Setting) -> Optional[Pin]:
        """The Pin of `row` as written, with its span; None where not pinned."""
        return self.pins.get(row.key)

    def span(self, row: Setting) -> Optional[Span]:
        """Where the spec pins `row`; None where it does not."""
        pin = self.pins.get(row.key)
        return None if pin is None else pin.span

    def _word(self, key: str) -> Optional[str]:
        v = self.value(settings.pin(key))
        return None if v is None else str(v)

    def _count(self, key: str) -> Optional[int]:
        v = self.value(settings.pin(key))
        return None if v is None or isinstance(v, (str, bool)) else int(v)

    def _share(self, key: str) -> Optional[float]:
        v = self.value(settings.pin(key))
        return None if v is None or isinstance(v, (str, bool)) else float(v)

    @property
    def kv_dtype(self) -> Optional[str]:
        return self._word("kv_dtype")

    @property
    def retention(self) -> Optional[float]:
        return self._share("retention")

    @property
    def block_size(self) -> Optional[int]:
        return self._count("block_size")

    @property
    def prefix_caching(self) -> Optional[bool]:
        v = self.value(settings.pin("prefix_caching"))
        return v if isinstance(v, bool) else None

    @property
    def tier(self) -> Optional[str]:
        return self._word("tier")

    @property
    def placement(self) -> Optional[str]:
        return self._word("placement")

    @property
    def devices(self) -> Optional[int]:
        return self._count("devices")

    @property
    def tensor_parallel(self) -> Optional[int]:
        return self._count("tensor_parallel")

    @property
    def pipeline_parallel(self) -> Optional[int]:
        return self._count("pipeline_parallel")

    @property
    def memory_fraction(self) -> Optional[float]:
        return self._share("memory_fraction")

    @property
    def max_batched_tokens(self) -> Optional[int]:
        return self._count("max_batched_tokens")

    @property
    def replicas(self) -> int:
        return self._count("replicas") or 1

    @property
    def attention_dp(self) -> int:
        return self._count("attention_dp") or 1

    @property
    def expert_parallel(self) -> int:
        return self._count("expert_parallel") or 1


@record
class Expectation:
    """An `expect` assertion. `value` is in base units (s, tok/s, B), a word, or True for `fits`
    (whose op is 'is')."""

    metric: str
    op: str
    value: PinValue
    span: Span


@record
class Lengths:
    """Request lengths, tokens: uniform over the integers lo..hi inclusive (`uniform(2k, 6k)`, what
    `vllm bench serve --dataset-name random --random-range-ratio` samples); lo == hi is a fixed length."""

    lo: int
    hi: int

    @property
    def fixed(self) -> bool:
        return self.lo == self.hi

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2.0

    @property
    def second(self) -> float:
        """E[n²] of the discrete uniform: Var + mean², Var = ((hi − lo + 1)² − 1)/12."""
        width = self.hi - self.lo + 1
        return (width * width - 1) / 12.0 + self.mean * self.mean

    def text(self) -> str:
        """`4,096` for a fixed length, `uniform 2,000–6,000 (mean 4,000)` for a range (tokens)."""
        if self.fixed:
            return f"{self.lo:,}"
        return f"uniform {self.lo:,}–{self.hi:,} (mean {self.mean:,.6g})"


def mean_context(n_in: Lengths, n_out: Lengths) -> float:
    """s̄, the time-averaged context a generating sequence holds (tokens): a request of n_in, n_out generates
    n_out − 1 tokens after the first at contexts n_in + 1 … n_in + n_out − 1, whose mean is n_in + n_out/2; weighted
    by the tokens each request generates, s̄ = E[(n_out − 1)(n_in + n_out/2)] / E[n_out − 1], which for independent
    lengths is E[n_in] + E[n_out(n_out − 1)]/(2·E[n_out − 1]). Fixed lengths: n_in + n_out/2. With one output token
    everywhere (no decode stage) it is E[n_in] + E[n_out]/2."""
    if n_out.fixed or n_out.hi == 1:
        return n_in.mean + n_out.mean / 2.0
    return n_in.mean + (n_out.second - n_out.mean) / (2.0 * (n_out.mean - 1.0))


@record
class Speculation:
    """What a spec's `speculative` block asks: the method (auto, eagle3, mtp, ngram, off), the draft tokens k
    (None: auto, the planner's to choose), the per-token acceptance α (None: the catalog's) and the draft's Hugging
    Face repo id (None: the catalog's)."""

    method: str
    draft_tokens: Optional[int] = None
    acceptance: Optional[float] = None
    draft: Optional[str] = None

    @property
    def on(self) -> bool:
        """Whether the spec asks for speculation at all (`method = off` plans as without the block)."""
        return self.method != "off"


@record
class Scenario:
    """One deployment (or one combination of its workload lists), resolved and in base units.

    `spans` maps 'deployment', 'model', 'workload.batch', 'slo.step_time',
    'pin.kv_dtype', ... to where each was written; a default has no span and is
    in `assumptions` instead.
    """

    deployment: str
    name: str
    model: Model
    device: Device
    weights: Dtype
    devices: DeviceCount
    placement: str
    engine: str
    batch: int
    context: int
    prefix: int
    fanout: int
    reuse: float
    budget: str
    eviction_allowed: bool
    min_retention: float
    slo_step_time: Optional[float]
    slo_throughput: Optional[float]
    objective: str
    pins: Mapping[str, Pin]
    expects: tuple[Expectation, ...]
    spans: Mapping[str, Span]
    assumptions: tuple[Value, ...]
    #: workload.max_context: the longest sequence the engine admits (vLLM --max-model-len, SGLang
    #: --context-length); None when the spec does not say, and then the context is the bound.
    max_context: Optional[int] = None
    #: slo.ttft: the longest time to first token of one prompt of the context, seconds (with a rate: the mean TTFT
    #: under load); None when not set.
    slo_ttft: Optional[float] = None
    #: The calibration profile of the expected figures (`calibration = "FILE"`, --calibration); None: defaults.
    calibration: Optional[Profile] = None
    #: What the SLOs are checked against: "expected" (the default) or "bound" (--slo-on bound).
    slo_on: str = "expected"
    #: workload.rate: requests per second (the request form, docs/service.md); None for the batch form. With a
    #: rate, `batch` is the planner's to derive (kvplan.model.load) and `context` is the mean context a running
    #: sequence holds, input + output/2; max_context is input + output unless the spec bounds it.
    rate: Optional[float] = None
    #: workload.input and workload.output: the prompt's and the generation's tokens of each request (a fixed
    #: length, or the longest of a uniform one: input_min, output_min); None for the batch form.
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    #: `price`: US dollars per device-hour as the spec writes it (an input, assumed), overriding the device's
    #: catalog price; None when not written (kvplan.planner.cost).
    price: Optional[float] = None
    #: slo.itl: the longest mean inter-token latency under load, seconds (a request workload only); None when not
    #: set. With a rate, slo.ttft is the mean TTFT under load, queueing included (docs/service.md).
    slo_itl: Optional[float] = None
    #: slo.rate: the goodput the plan must reach, requests per second (a request workload only); None when not set.
    slo_rate: Optional[float] = None
    #: `input = uniform(lo, hi)`, `output = uniform(lo, hi)`: the shortest lengths (input_tokens and output_tokens
    #: are then the longest); None for a fixed length.
    input_min: Optional[int] = None
    output_min: Optional[int] = None
    #: workload.concurrency: the clients of a closed loop (SPEC §13, docs/service.md); None for the other forms
    #: (`rate` is then None: the throughput is the load model's). `context` is input + output, the batch the
    #: planner's to derive.
    concurrency: Optional[int] = None
    #: The requests a closed-loop benchmark run sends in all (`--num-prompts`), the first C of them together at its
    #: start (kvplan.model.load.run_mean); None: the steady state alone. Set by bench/serving.py for the public
    #: ledger; no workload key carries it yet.
    prompts: Optional[int] = None
    #: The `speculative` block (SPEC §15, docs/speculative.md); None without one (speculation off, the default).
    speculative: Optional[Speculation] = None
    #: `serving`: "aggregated" (one engine serves both phases, the default), "disaggregated" (x prefill workers and
    #: y decode workers, kvplan.planner.disagg) or "auto" (the planner decides between the two; SPEC §14).
    serving: str = "aggregated"
    #: The pool this scenario plans inside a disaggregated plan: "prefill" (prompts only: one output token each),
    #: "decode" (no prefill chunks: the KV arrives over the link), or "" (an engine that serves both phases).
    pool: str = ""

    @property
    def requests(self) -> bool:
        """Whether the workload is one of requests (at a rate or from a closed loop), planned with the load model."""
        return self.rate is not None or self.concurrency is not None

    @property
    def inputs(self) -> Optional[Lengths]:
        """The prompt lengths of a request workload (lo == hi: fixed); None for the batch form."""
        if self.input_tokens is None:
            return None
        return Lengths(self.input_tokens if self.input_min is None else self.input_min, self.input_tokens)

    @property
    def outputs(self) -> Optional[Lengths]:
        """The output lengths of a request workload (lo == hi: fixed); None for the batch form."""
        if self.output_tokens is None:
            return None
        return Lengths(self.output_tokens if self.output_min is None else self.output_min, self.output_tokens)

    @property
    def context_bound(self) -> int:
        """The longest sequence the deployment must admit: workload.max_context, else the context."""
        return self.context if self.max_context is None else self.max_context

    @property
    def pinned(self) -> Pins:
        """The pins, typed (Pins): `sc.pinned.kv_dtype`, `sc.pinned.value(row)`."""
        return Pins(self.pins)

    @property
    def attention_dp(self) -> int:
        """pin.attention_dp: attention data-parallel groups inside the tensor-parallel group (SGLang
        --enable-dp-attention --dp N); each group holds its own sequences' KV. 1 when not pinned."""
        return self.pinned.attention_dp

    @property
    def expert_parallel(self) -> int:
        """pin.expert_parallel: ranks the routed experts are split over, each MoE layer an all-to-all dispatch
        and combine among them (SPEC §14); 1 (experts tensor-parallel) when not pinned."""
        return self.pinned.expert_parallel

    @property
    def replicas(self) -> int:
        """pin.replicas: independent copies of the deployment (vLLM --data-parallel-size, SGLang --dp
        without DP attention); they multiply the devices and the throughput. 1 when not pinned."""
        return self.pinned.replicas

    @property
    def memory_fraction(self) -> Optional[float]:
        """pin.memory_fraction: the share of each device's memory weights and the KV pool may take
        (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static); None when not pinned."""
        return self.pinned.memory_fraction


@record
class Choice(Value):
    """An assumed default that is a word, not a number (`engine = any`).

    evidence.Value is typed for numbers; a choice keeps its word in `value`
    and prints it as it is. `to_json` gives {"value": "any", "unit": "", ...}.
    """

    def text(self) -> str:
        return f"{self.value} ({self.evidence.value})"

    @property
    def human(self) -> str:
        return str(self.value)


def choice(word: str, source: str) -> Value:
    """An assumed default choice, e.g. choice('any', 'default: engine = any (LANGUAGE.md)')."""
    word_as_value: Any = word  # Value.value is typed float; see Choice
    return Choice(word_as_value, "", Evidence.ASSUMED, source)
