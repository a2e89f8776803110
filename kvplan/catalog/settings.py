"""Every setting a user can write — a spec key, a pin — as one row of one literal table (shared/STYLE.md).

A row holds the setting's path (`workload.context`, `pin.kv_dtype`), what it takes (a quantity of a
dimension in a unit table, a word among choices, a switch, a dtype, a name or a path), its range with
the reason for each bound, its default with where the default comes from and its evidence class, one
line of doc, and for each engine how that engine carries it: the flag, how `kvplan import` reads it
and how `kvplan emit` writes it (or why it is not written).

Derived from the rows: the keys each place of a .kvp admits and the plain-key checks of
kvplan.lang.check, the typed pins of a scenario (kvplan.model.scenario.Pins), the importer's readers
of the engine pins, the writers' pass-through flags and their "not written by this engine"
warnings (kvplan.engines.common), and the key tables of docs/language.md and docs/engines.md
(`language_table`, `engines_table`; tests/unit/catalog/test_settings.py keeps the docs equal to them).

`SETTINGS` is a plain literal tuple that every reader looks up at call time, so that a test can add a
row with `monkeypatch.setattr(settings, "SETTINGS", (*SETTINGS, row))`. Adding a pin is one row.
"""

from __future__ import annotations

import enum
from typing import Mapping, Optional

from kvplan.base import limits
from kvplan.base.evidence import Evidence
from kvplan.base.records import field, record
from kvplan.base.units import Dim
from kvplan.catalog import MAX_PRICE_PER_HOUR
from kvplan.catalog.engines import ENGINES


class Takes(str, enum.Enum):
    """What a setting's value is written as."""

    QUANTITY = "quantity"    # a number with a unit of `dim` (`128k`, `50 ms`)
    WORD = "word"            # one of `choices`, a bare word (`host`)
    SWITCH = "switch"        # on/off, true/false (`prefix_caching = off`)
    DTYPE = "dtype"          # a catalog dtype id (`fp8`)
    NAME = "name"            # a catalog id, a block of the file or a hub repo id (`model`, `device`)
    PATH = "path"            # a quoted path inside the spec's folder (`config`, `calibration`)
    COUNT_OR_BOUND = "count-or-bound"  # `devices = 4`, `auto` or `<= 8`
    FLAG = "flag"            # a bare key (`expect { fits }`)


class Write(str, enum.Enum):
    """How an engine's writer carries a pinned setting (`kvplan emit`)."""

    PIN = "pin"          # the pinned value written as it is, under `flag` (with `also` beside it), unless at default
    SIZING = "sizing"    # the engine's own memory sizing reads the pin and writes the flag with its result
    PLAN = "plan"        # written from the plan, which the pin fixes (kv dtype, page size, the layout)
    NONE = "none"        # not written: emit warns, with `why`


class Read(str, enum.Enum):
    """How `kvplan import` reads an engine flag into the setting (kvplan.engines.flagparse)."""

    WHOLE = "whole"          # a whole number in the row's range; a token count as the engine reads it (`8k`)
    FRACTION = "fraction"    # a fraction in (0, 1] (`--gpu-memory-utilization 0.9`)
    DTYPE = "dtype"          # an engine dtype name, through the engine record's kv_reads (`fp8_e4m3`)
    LIMIT = "limit"          # a token limit as the engine reads it, how it read a binary suffix kept beside it
    SWITCH = "switch"        # switches without a value, each meaning on or off (Carrier.switch)
    BOOL = "bool"            # a config file's true or false (TensorRT-LLM's `enable_block_reuse: true`)
    OWN = "own"              # the engine module's own handler (TensorRT-LLM's YAML keys)
    NONE = "none"            # not read back


#: Units of a plain count (`batch = 1k`); `B` and `T` count parameters only.
COUNT_UNITS: Mapping[str, float] = {"": 1.0, "k": 1e3, "M": 1e6}
#: Units of a speedup (`speedup >= 1.5x`).
SPEEDUP_UNITS: Mapping[str, float] = {"": 1.0, "x": 1.0}
#: Units of a request rate (`rate = 20/s`): requests per second; a token rate (tok/s) is another quantity.
REQUEST_RATE_UNITS: Mapping[str, float] = {"/s": 1.0, "req/s": 1.0, "/min": 1 / 60, "req/min": 1 / 60}
#: Units of a price (`price = 2.50 USD/h`): US dollars per device-hour (docs/language.md, kvplan.planner.cost).
PRICE_UNITS: Mapping[str, float] = {"USD/h": 1.0, "USD/hr": 1.0, "USD/hour": 1.0}
#: A row's `units` names one of these; "" is every unit of the row's dimension (kvplan.base.units.UNITS).
UNIT_TABLES: Mapping[str, Mapping[str, float]] = {"count": COUNT_UNITS, "speedup": SPEEDUP_UNITS,
                                                   "request-rate": REQUEST_RATE_UNITS, "price": PRICE_UNITS}
#: The words of a switch, and what each means.
SWITCH_WORDS: Mapping[str, bool] = {"on": True, "off": False, "true": True, "false": False}

#: Why most ranges end where they do: kvplan's own limits (kvplan.base.limits), cited in the checker's help.
LIMIT = "kvplan's limit, docs/language.md"
#: The largest request rate a workload may declare, requests per second.
MAX_RATE = 1e6
#: The most tokens a draft may propose per verify step (`speculative { draft_tokens = ... }`).
MAX_DRAFT_TOKENS = 16
#: The words of `speculative { method = ... }`: auto lets the planner choose; off plans without a draft.
SPECULATIVE_METHODS = ("auto", "eagle3", "mtp", "ngram", "off")


@record
class Bound:
    """One end of a range: the value in base units and why the range ends there."""

    value: float
    why: str


@record
class Range:
    """The values a quantity may take; `lo_open`: the low end itself is excluded. `cited` is the reason the
    checker's help names after the range (`kvplan's limit, docs/language.md`), "" for none."""

    lo: Optional[Bound] = None
    hi: Optional[Bound] = None
    lo_open: bool = False
    #: the high end itself is excluded (an acceptance rate of 1 is a draft that is never wrong)
    hi_open: bool = False
    cited: str = LIMIT
    #: the value the checker offers as the fix of a value out of range ("": none)
    suggest: str = ""


@record
class Default:
    """What a setting is when a spec leaves it out, where that comes from, and its evidence class."""

    value: str
    source: str
    evidence: Evidence = Evidence.ASSUMED


@record
class Carrier:
    """How one engine carries a setting: its flag (or, `record`, the Engine.flags attribute naming it), how
    import reads it and how emit writes it. `also` is a switch written beside it (SGLang's
    --enable-dp-attention beside --dp-size); `why` says why it is not written (Write.NONE), `{value}` and
    `{n}` standing for the pinned value."""

    flag: str = ""
    read: Read = Read.OWN
    write: Write = Write.PIN
    record: str = ""
    also: str = ""
    why: str = ""
    #: what `kvplan import` says of the value beside the flag it came from (`a fraction of total memory`)
    note: str = ""
    #: other names the engine takes the flag under (vLLM's `-tp`), read as the flag
    aliases: tuple[str, ...] = ()
    #: for a setting import reads into its own field (the batch, the page, the layout): that field of
    #: kvplan.engines.flagparse.Read, whose range (flagparse.MAXIMUM) the value must be in; "": a pin of Read.pins
    into: str = ""
    #: the other flags (or keys) the writer writes for the setting beside `flag` (a tier's size beside its switch)
    writes: tuple[str, ...] = ()
    #: the engine's command-line name where it differs from its config key, `flag` (TensorRT-LLM's
    #: `--max_batch_size` beside `max_batch_size`): import reads both, the config file's over the command line's
    cli: str = ""
    #: Read.SWITCH: each switch import reads, and whether it means on (`--disable-radix-cache`: off); beside a
    #: value read (SGLang's deprecated --enable-dp-attention beside --attn-dp-size), the switches store into
    #: `switch_into`, a field of kvplan.engines.flagparse.Read
    switch: Mapping[str, bool] = field(factory=dict)
    switch_into: str = ""
    #: values import takes as "the engine's own choice" (`auto`, `-1`): nothing read, `off_note` said instead
    off: tuple[str, ...] = ()
    off_note: str = ""


@record
class Setting:
    """One row: a key a user can write, and everything kvplan derives from it."""

    path: str                       # `workload.context`, `pin.kv_dtype`; a deployment's own key has no section
    takes: Takes
    doc: str
    dim: Optional[Dim] = None       # a quantity's dimension
    units: str = ""                 # a UNIT_TABLES name; "": every unit of `dim`
    integer: bool = False
    range: Range = Range()
    choices: tuple[str, ...] = ()   # a word's choices
    what: str = ""                  # how messages name it where not by its key (`pinned placement`)
    default: Optional[Default] = None
    #: the operators an slo bound takes and an example value (`<=`, `50 ms`); a workload key's example
    ops: tuple[str, ...] = ()
    example: str = ""
    #: "not written" words between the value and the reason (`(SGLang's DP attention)`)
    aside: str = ""
    engines: Mapping[str, Carrier] = field(factory=dict)

    @property
    def section(self) -> str:
        """The place the key is written: `deployment`, `workload`, ..., `model`, `device`."""
        return self.path.partition(".")[0] if "." in self.path else "deployment"

    @property
    def key(self) -> str:
        """The key as written in its place: `context` of `workload.context`."""
        return self.path.rpartition(".")[2]

    def unit_table(self) -> Optional[Mapping[str, float]]:
        """The units the key takes beyond its dimension's (None: every unit of `dim`)."""
        return UNIT_TABLES[self.units] if self.units else None


def _whole(hi: float, why: str = LIMIT, lo: float = 1) -> Range:
    return Range(Bound(lo, "at least one" if lo == 1 else "none" if lo == 0 else LIMIT), Bound(hi, why))


def _share(cited: str = "") -> Range:
    return Range(Bound(0, "a share of nothing is no setting"), Bound(1, "all of it"), lo_open=True, cited=cited)


_DEVICES = _whole(limits.MAX_DEVICES)
_TOKENS = _whole(limits.MAX_TOKENS)
_BATCH = _whole(limits.MAX_BATCH)
_PARAMS = Range(Bound(limits.MIN_PARAMS, LIMIT), Bound(limits.MAX_PARAMS, LIMIT))
_UNITS = _whole(limits.MAX_UNITS)
_TIME = Range(Bound(limits.MIN_STEP_TIME, LIMIT), Bound(limits.MAX_STEP_TIME, LIMIT))
_POSITIVE_RATE = Range(Bound(0, "no requests: the load model has no steady state to plan"),
                       Bound(MAX_RATE, LIMIT), lo_open=True)
#: A workload's rate out of range is offered `20/s` in its place.
_WORKLOAD_RATE = Range(_POSITIVE_RATE.lo, _POSITIVE_RATE.hi, lo_open=True, suggest="20/s")
_THROUGHPUT = Range(Bound(0, "no tokens is no bound"), Bound(limits.MAX_THROUGHPUT, LIMIT), lo_open=True)


def _expect(hi: float) -> Range:
    return Range(Bound(0, "a metric is not negative"), Bound(hi, LIMIT))


def _device_range(lo: float, hi: float) -> Range:
    return Range(Bound(lo, LIMIT), Bound(hi, LIMIT))


_PREFIX_CACHING = ("prefix caching on or off; vLLM's and SGLang's own switch")
#: What `kvplan import` says of a per-step token limit (SGLang --chunked-prefill-size, TensorRT-LLM max_num_tokens).
CHUNK = "a per-iteration (prefill chunk) token limit; decode planning ignores it"
#: TensorRT-LLM's own fraction is of another quantity (shared/reference/engines.md § TensorRT-LLM; trtllm.py).
_WHY_TRT_FRACTION = ("TensorRT-LLM's kv_cache_config.free_gpu_memory_fraction is a share of the memory free after "
                     "the weights and the profiling run, not of total memory; the plan's pool is sized under the pin "
                     "and kvplan writes the fraction its own sizing gives (--sizing exact: max_tokens = that pool)")
_WHY_TRT_DP = ("kvplan writes no TensorRT-LLM data-parallel launch; run {n} copies of this config, each serving "
               "1/{n} of the rate")

#: The one table. Order is the order of each place's keys (its help lists them so) and of the docs' tables.
SETTINGS: tuple[Setting, ...] = (
    # -- the deployment's own keys
    Setting("model", Takes.NAME, "the model: a catalog id or alias, a model block, or a Hugging Face repo id"),
    Setting("checkpoint", Takes.PATH, "the checkpoint to serve: a repo id or a folder relative to the spec",
            default=Default("the model's own hf_id", "the catalog")),
    Setting("weights", Takes.DTYPE, "the weights' dtype",
            default=Default("bf16", "the checkpoint's own bytes where the model has them, else the paper's "
                                    "baseline (docs/weights.md)")),
    Setting("device", Takes.NAME, "the device: a catalog id or a device block of this file"),
    Setting("devices", Takes.COUNT_OR_BOUND, "how many devices in all (over the replicas): N, auto or <= N",
            dim=Dim.COUNT, units="count", integer=True, range=_DEVICES,
            default=Default("auto", "the planner chooses, at most 64 (docs/language.md)")),
    Setting("placement", Takes.WORD, "how KV pages lie over the devices",
            choices=("auto", "striped", "pinned", "affinity"), default=Default("auto", "docs/language.md")),
    Setting("engine", Takes.WORD, "the serving engine the plan is for (kvplan.catalog.engines)",
            default=Default("any", "docs/language.md")),
    Setting("objective", Takes.WORD, "what the planner optimizes among plans that fit",
            choices=("fewest-devices", "fastest", "most-headroom", "cheapest"),
            default=Default("fewest-devices", "fewest devices that fit and meet the SLOs; docs/language.md")),
    Setting("serving", Takes.WORD, "one engine for prefill and decode, separate prefill and decode pools, or the "
            "planner's choice (a request workload; docs/service.md, Disaggregated serving)",
            choices=("aggregated", "disaggregated", "auto"),
            default=Default("aggregated", "one engine serves both phases, as every plan before issue 23; "
                                          "docs/language.md")),
    Setting("calibration", Takes.PATH, "a calibration profile of the expected figures (docs/expected.md)",
            default=Default("none", "kvplan's default factors")),
    Setting("price", Takes.QUANTITY, "US dollars per device-hour, overriding the catalog's", dim=Dim.NUMBER,
            units="price", range=Range(Bound(0, "a price is paid"), Bound(MAX_PRICE_PER_HOUR, LIMIT), lo_open=True),
            default=Default("the device's catalog price", "the catalog", Evidence.REPORTED)),
    # -- workload
    Setting("workload.batch", Takes.QUANTITY, "sequences decoded together", dim=Dim.COUNT, units="count",
            integer=True, range=_BATCH, example="32",
            engines={"vllm": Carrier(record="batch", read=Read.WHOLE, write=Write.PLAN, into="batch"),
                     "sglang": Carrier(record="batch", read=Read.WHOLE, write=Write.PLAN, into="batch"),
                     "trtllm": Carrier(record="batch", read=Read.WHOLE, write=Write.PLAN, into="batch",
                                       cli="--max_batch_size")}),
    Setting("workload.context", Takes.QUANTITY, "tokens each sequence holds", dim=Dim.TOKENS, integer=True,
            range=_TOKENS, example="128k"),
    Setting("workload.rate", Takes.QUANTITY, "requests per second (the request form)", dim=Dim.RATE,
            units="request-rate", range=_WORKLOAD_RATE, example="20/s"),
    Setting("workload.concurrency", Takes.QUANTITY, "clients of a closed loop, each sending its next request "
            "when the last one ends (the concurrency form)", dim=Dim.COUNT, units="count", integer=True,
            range=_whole(limits.MAX_BATCH, "the most sequences a batch holds: C clients run at most C"),
            example="64"),
    Setting("workload.input", Takes.QUANTITY, "prompt tokens of each request, or uniform(lo, hi)", dim=Dim.TOKENS,
            integer=True, range=_TOKENS, example="4k"),
    Setting("workload.output", Takes.QUANTITY, "generated tokens of each request, or uniform(lo, hi)",
            dim=Dim.TOKENS, integer=True, range=_TOKENS, example="512"),
    Setting("workload.prefix", Takes.QUANTITY, "tokens of a prefix the sequences share", dim=Dim.TOKENS,
            integer=True, range=_whole(limits.MAX_TOKENS, lo=0),
            default=Default("0", "no shared prefix")),
    Setting("workload.fanout", Takes.QUANTITY, "sequences sharing each prefix", dim=Dim.COUNT, units="count",
            integer=True, range=_BATCH, default=Default("1", "no sharing")),
    Setting("workload.reuse", Takes.QUANTITY, "the share of contexts that come back", dim=Dim.FRACTION,
            range=Range(Bound(0, "none"), Bound(1, "all"), cited=""),
            default=Default("0", "no context comes back")),
    Setting("workload.max_context", Takes.QUANTITY, "the longest sequence the engine admits", dim=Dim.TOKENS,
            integer=True, range=_TOKENS,
            engines={"vllm": Carrier(record="context", read=Read.LIMIT, write=Write.PLAN, off=("auto", "-1"),
                                     off_note="vLLM derives the limit from the model config"),
                     "sglang": Carrier(record="context", read=Read.LIMIT, write=Write.PLAN),
                     "trtllm": Carrier(record="context", read=Read.LIMIT, write=Write.PLAN, cli="--max_seq_len")}),
    # -- quality
    Setting("quality.budget", Takes.WORD, "how much quality the KV may lose",
            choices=("lossless", "near-lossless", "moderate", "aggressive"),
            default=Default("lossless", "the conservative choice: no lossy domain unless the spec admits one; "
                                        "docs/language.md")),
    Setting("quality.eviction", Takes.WORD, "whether tokens may leave the cache", choices=("allowed", "forbidden"),
            default=Default("forbidden", "allowed under an aggressive budget; docs/language.md")),
    Setting("quality.min_retention", Takes.QUANTITY, "the least share of tokens eviction keeps", dim=Dim.FRACTION,
            range=Range(Bound(0.5, "rule R5"), Bound(1.0, "all of them"),
                        cited="rule R5: keep r ≥ 0.5, docs/rules/R5.md"),
            default=Default("0.5", "rule R5 floor, docs/rules/R5.md")),
    # -- slo
    Setting("slo.step_time", Takes.QUANTITY, "the longest decode step", dim=Dim.TIME, range=_TIME,
            ops=("<=", "<"), example="50 ms"),
    Setting("slo.throughput", Takes.QUANTITY, "the least decode throughput", dim=Dim.RATE, range=_THROUGHPUT,
            ops=(">=", ">"), example="500 tok/s"),
    Setting("slo.ttft", Takes.QUANTITY, "the longest time to first token (with a rate: the mean under load)",
            dim=Dim.TIME, range=_TIME, ops=("<=", "<"), example="2 s"),
    Setting("slo.itl", Takes.QUANTITY, "the longest mean inter-token latency under load (a request workload)",
            dim=Dim.TIME, range=_TIME, ops=("<=", "<"), example="40 ms"),
    Setting("slo.rate", Takes.QUANTITY, "the goodput the plan must reach (a request workload)", dim=Dim.RATE,
            units="request-rate", range=_POSITIVE_RATE, ops=(">=", ">"), example="20/s"),
    # -- pin: choices already made
    Setting("pin.kv_dtype", Takes.DTYPE, "the KV cache's dtype", what="kv",
            engines={"vllm": Carrier(record="kv_dtype", read=Read.DTYPE, write=Write.PLAN),
                     "sglang": Carrier(record="kv_dtype", read=Read.DTYPE, write=Write.PLAN),
                     "trtllm": Carrier(record="kv_dtype", read=Read.DTYPE, write=Write.PLAN)}),
    Setting("pin.retention", Takes.QUANTITY, "the share of tokens eviction keeps", dim=Dim.FRACTION,
            range=_share()),
    Setting("pin.block_size", Takes.QUANTITY, "tokens per KV page", dim=Dim.COUNT, units="count", integer=True,
            range=_TOKENS,
            engines={"vllm": Carrier(record="block", read=Read.WHOLE, write=Write.PLAN, into="block_size"),
                     "sglang": Carrier(record="block", read=Read.WHOLE, write=Write.PLAN, into="block_size"),
                     "trtllm": Carrier(record="block", read=Read.WHOLE, write=Write.PLAN, into="block_size")}),
    Setting("pin.prefix_caching", Takes.SWITCH, _PREFIX_CACHING, choices=tuple(SWITCH_WORDS),
            engines={"vllm": Carrier("--enable-prefix-caching", Read.SWITCH, Write.PLAN, into="prefix_caching",
                                     writes=("--disable-prefix-caching",),
                                     switch={"--enable-prefix-caching": True, "--no-enable-prefix-caching": False,
                                             "--disable-prefix-caching": False}),
                     "sglang": Carrier("--disable-radix-cache", Read.SWITCH, Write.PLAN, into="prefix_caching",
                                       switch={"--disable-radix-cache": False}),
                     "trtllm": Carrier("kv_cache_config.enable_block_reuse", Read.BOOL, Write.PLAN,
                                       into="prefix_caching")}),
    Setting("pin.tier", Takes.WORD, "the second KV tier", choices=("none", "host", "peer", "ssd", "remote"),
            engines={"vllm": Carrier("--kv-offloading-size", Read.OWN, Write.PLAN,
                                     writes=("--kv-offloading-backend", "--kv-transfer-config")),
                     "sglang": Carrier("--enable-hierarchical-cache", Read.OWN, Write.PLAN,
                                       writes=("--hicache-size", "--enable-lmcache", "--lmcache-config-file")),
                     "trtllm": Carrier("kv_cache_config.host_cache_size", Read.OWN, Write.PLAN)}),
    Setting("pin.placement", Takes.WORD, "how KV pages lie over the devices", choices=("striped", "pinned", "affinity"),
            what="pinned placement"),
    Setting("pin.devices", Takes.QUANTITY, "how many devices the deployment runs on", dim=Dim.COUNT, units="count",
            integer=True, range=_DEVICES),
    Setting("pin.tensor_parallel", Takes.QUANTITY, "the tensor-parallel size", dim=Dim.COUNT, units="count",
            integer=True, range=_DEVICES,
            engines={"vllm": Carrier(record="tp", read=Read.WHOLE, write=Write.PLAN, into="tp", aliases=("-tp",)),
                     "sglang": Carrier(record="tp", read=Read.WHOLE, write=Write.PLAN, into="tp", aliases=("--tp",)),
                     "trtllm": Carrier(record="tp", read=Read.WHOLE, write=Write.PLAN, into="tp", aliases=("tp_size",),
                                       cli="--tp_size")}),
    Setting("pin.pipeline_parallel", Takes.QUANTITY, "the pipeline-parallel size", dim=Dim.COUNT, units="count",
            integer=True, range=_DEVICES,
            engines={"vllm": Carrier(record="pp", read=Read.WHOLE, write=Write.PLAN, into="pp", aliases=("-pp",)),
                     "sglang": Carrier(record="pp", read=Read.WHOLE, write=Write.PLAN, into="pp", aliases=("--pp",)),
                     "trtllm": Carrier(record="pp", read=Read.WHOLE, write=Write.PLAN, into="pp", aliases=("pp_size",),
                                       cli="--pp_size")}),
    Setting("pin.memory_fraction", Takes.QUANTITY, "the share of each device's memory weights and the KV pool take",
            dim=Dim.FRACTION, range=_share(),
            engines={"vllm": Carrier("--gpu-memory-utilization", Read.FRACTION, Write.SIZING,
                                     note="weights + KV pool, a fraction of total memory"),
                     "sglang": Carrier("--mem-fraction-static", Read.FRACTION, Write.SIZING,
                                       note="weights + KV pool, a fraction of the memory free at start-up, which "
                                            "kvplan takes as total memory"),
                     "trtllm": Carrier(write=Write.NONE, why=_WHY_TRT_FRACTION)}),
    Setting("pin.max_batched_tokens", Takes.QUANTITY, "the most tokens one engine step takes", dim=Dim.TOKENS,
            integer=True, range=_TOKENS,
            engines={"vllm": Carrier("--max-num-batched-tokens", Read.WHOLE, Write.SIZING),
                     "sglang": Carrier("--chunked-prefill-size", Read.WHOLE, Write.PIN, off=("-1",),
                                       off_note="chunked prefill is off; " + CHUNK),
                     "trtllm": Carrier(write=Write.NONE, why="kvplan writes no TensorRT-LLM max_num_tokens")}),
    Setting("pin.replicas", Takes.QUANTITY, "independent copies of the deployment", dim=Dim.COUNT, units="count",
            integer=True, range=_DEVICES, default=Default("1", "one copy"),
            engines={"vllm": Carrier("--data-parallel-size", Read.WHOLE, Write.PIN, into="dp", aliases=("-dp",)),
                     "sglang": Carrier("--dp-size", Read.WHOLE, Write.PIN, into="dp", aliases=("--dp",)),
                     "trtllm": Carrier(write=Write.NONE, why=_WHY_TRT_DP)}),
    Setting("pin.attention_dp", Takes.QUANTITY, "attention data-parallel groups inside the tensor-parallel group",
            dim=Dim.COUNT, units="count", integer=True, range=_DEVICES, default=Default("1", "one group"),
            aside=" (SGLang's DP attention)",
            engines={"vllm": Carrier("--data-parallel-size", Read.NONE, Write.PLAN,
                                     note="for an MoE model vLLM's data-parallel ranks are attention groups whose "
                                          "expert layers run over DP × TP ranks: the writer writes "
                                          "--tensor-parallel-size tp/d --data-parallel-size d (pin.replicas' row "
                                          "reads the flag back)"),
                     # the deprecated spelling `--dp-size d --enable-dp-attention` is read too: --dp-size by
                     # pin.replicas' row, the switch beside it (switch_into) saying it is attention groups
                     "sglang": Carrier("--attn-dp-size", Read.WHOLE, Write.PIN, into="attn_dp",
                                       aliases=("--attention-data-parallel-size",),
                                       switch={"--enable-dp-attention": True}, switch_into="dp_attention"),
                     "trtllm": Carrier("enable_attention_dp", Read.BOOL, Write.PLAN, into="dp_attention",
                                       note="every tensor-parallel rank its own attention group (d = tp): "
                                            "tensorrt_llm/llmapi/llm_args.py enable_attention_dp")}),
    Setting("pin.expert_parallel", Takes.QUANTITY, "ranks the routed experts are split over (expert parallelism)",
            dim=Dim.COUNT, units="count", integer=True, range=_DEVICES, default=Default("1", "experts tensor-parallel"),
            aside=" (the MoE layers' all-to-all)",
            engines={"vllm": Carrier("--enable-expert-parallel", Read.SWITCH, Write.PLAN, into="expert_switch",
                                     switch={"--enable-expert-parallel": True},
                                     note="vLLM 0.33.0 splits the experts over all DP × TP ranks with it "
                                          "(vllm/config/parallel.py ParallelConfig.enable_expert_parallel)"),
                     "sglang": Carrier("--ep-size", Read.WHOLE, Write.PIN, aliases=("--expert-parallel-size", "--ep")),
                     "trtllm": Carrier("moe_expert_parallel_size", Read.WHOLE, Write.PLAN, into="ep",
                                       note="tensorrt_llm/llmapi/llm_args.py moe_expert_parallel_size")}),
    # -- expect: assertions on the plan
    # -- speculative: speculative decoding (SPEC §15, docs/speculative.md)
    Setting("speculative.method", Takes.WORD, "how drafts are proposed: the planner adopts the method or rejects it "
            "with the regime that makes it lose; auto: the planner chooses among the engine's methods",
            choices=SPECULATIVE_METHODS,
            default=Default("off", "speculation only when asked: its gain rests on an acceptance rate that depends on "
                                   "the traffic and its draft is another model to serve (docs/speculative.md)"),
            engines={"vllm": Carrier("--speculative-config", Read.OWN, Write.PLAN),
                     "sglang": Carrier("--speculative-algorithm", Read.OWN, Write.PLAN,
                                       writes=("--speculative-num-steps", "--speculative-eagle-topk",
                                               "--speculative-num-draft-tokens", "--speculative-draft-model-path")),
                     "trtllm": Carrier("speculative_config", Read.OWN, Write.PLAN)}),
    Setting("speculative.draft_tokens", Takes.QUANTITY, "tokens the draft proposes per verify step, k; auto: the "
            "planner chooses the k that gives the shortest time per token", dim=Dim.COUNT, units="count",
            integer=True, range=Range(Bound(1, "at least one"), Bound(MAX_DRAFT_TOKENS, LIMIT), suggest="auto"),
            example="3", default=Default("auto", "the planner chooses (docs/speculative.md)")),
    Setting("speculative.acceptance", Takes.QUANTITY, "the chance that each drafted token is kept, α",
            dim=Dim.FRACTION, range=Range(Bound(0, "a draft never kept gains nothing"),
                                          Bound(1, "a draft never wrong is the target itself"),
                                          lo_open=True, hi_open=True,
                                          cited="a chance per drafted token, docs/speculative.md"),
            default=Default("the catalog's", "kvplan/catalog/speculative.toml, per method and model family",
                            Evidence.REPORTED)),
    Setting("speculative.draft", Takes.NAME, "the draft model's Hugging Face repo id (EAGLE-3 heads; MTP and n-gram "
            "need none)", default=Default("the catalog's", "kvplan/catalog/speculative.toml; none known: the "
                                                             "spec must name one", Evidence.REPORTED)),
    Setting("expect.regime", Takes.WORD, "the regime the plan is in", choices=("weight-bound", "kv-bound",
                                                                              "capacity-bound")),
    Setting("expect.fits", Takes.FLAG, "the plan fits"),
    Setting("expect.speedup", Takes.QUANTITY, "the plan's speedup", dim=Dim.NUMBER, units="speedup",
            range=_expect(limits.MAX_SPEEDUP)),
    Setting("expect.step_time", Takes.QUANTITY, "the plan's decode step", dim=Dim.TIME,
            range=_expect(limits.MAX_STEP_TIME)),
    Setting("expect.throughput", Takes.QUANTITY, "the plan's throughput", dim=Dim.RATE,
            range=_expect(limits.MAX_THROUGHPUT)),
    Setting("expect.kv_bytes", Takes.QUANTITY, "the plan's KV bytes", dim=Dim.BYTES,
            range=_expect(limits.MAX_KV_BYTES)),
    Setting("expect.devices", Takes.QUANTITY, "the plan's devices in all (devices × replicas, as `devices = N` reads)",
            dim=Dim.COUNT, units="count", integer=True,
            range=_expect(float(limits.MAX_DEVICES))),
    # -- a model block
    Setting("model.config", Takes.PATH, "the path of a Hugging Face config.json"),
    Setting("model.params", Takes.QUANTITY, "parameters", dim=Dim.COUNT, range=_PARAMS),
    Setting("model.params_active", Takes.QUANTITY, "parameters read per token", dim=Dim.COUNT, range=_PARAMS),
    # -- a device block
    Setting("device.memory", Takes.QUANTITY, "memory per device", dim=Dim.BYTES,
            range=_device_range(limits.MIN_MEMORY, limits.MAX_MEMORY), example="80 GB"),
    Setting("device.bandwidth", Takes.QUANTITY, "memory bandwidth", dim=Dim.BANDWIDTH,
            range=_device_range(limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH), example="3.35 TB/s"),
    Setting("device.compute", Takes.QUANTITY, "dense 16-bit compute", dim=Dim.COMPUTE,
            range=_device_range(limits.MIN_COMPUTE, limits.MAX_COMPUTE), example="989 TFLOPS"),
    Setting("device.compute_fp8", Takes.QUANTITY, "dense FP8 compute", dim=Dim.COMPUTE,
            range=_device_range(limits.MIN_COMPUTE, limits.MAX_COMPUTE)),
    Setting("device.compute_fp4", Takes.QUANTITY, "dense FP4 compute", dim=Dim.COMPUTE,
            range=_device_range(limits.MIN_COMPUTE, limits.MAX_COMPUTE)),
    Setting("device.partitions", Takes.QUANTITY, "memory partitions", dim=Dim.COUNT, units="count", integer=True,
            range=_UNITS, default=Default("1", "one memory partition")),
    Setting("device.fabric", Takes.QUANTITY, "scale-up fabric bandwidth", dim=Dim.BANDWIDTH,
            range=_device_range(limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH)),
    Setting("device.sm_count", Takes.QUANTITY, "streaming multiprocessors", dim=Dim.COUNT, units="count",
            integer=True, range=_UNITS),
    Setting("device.link", Takes.QUANTITY, "the scale-up link: a catalog link id or its bandwidth",
            dim=Dim.BANDWIDTH, range=_device_range(limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH)),
    Setting("device.host_link", Takes.QUANTITY, "the host link: a catalog link id or its bandwidth",
            dim=Dim.BANDWIDTH, range=_device_range(limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH)),
    Setting("device.node", Takes.QUANTITY, "devices per scale-up domain (an HGX board: 8); needs scaleout_link",
            dim=Dim.COUNT, units="count", integer=True, range=_DEVICES, example="8"),
    Setting("device.scaleout_link", Takes.QUANTITY, "each device's link between nodes: a catalog link id or its "
            "bandwidth; needs node", dim=Dim.BANDWIDTH,
            range=_device_range(limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH), example="ib-ndr"),
    Setting("device.host", Takes.QUANTITY, "devices one host (a server, a Kubernetes node) holds: one launch file "
            "a host; a divisor or a multiple of node", dim=Dim.COUNT, units="count", integer=True, range=_DEVICES,
            example="8"),
)


# ------------------------------------------------------------------ derived

def rows(section: str) -> tuple[Setting, ...]:
    """The rows of one place (`deployment`, `workload`, `pin`, ..., `model`, `device`), in table order."""
    return tuple(s for s in SETTINGS if s.section == section)


def keys(section: str) -> tuple[str, ...]:
    """The keys one place admits, in table order."""
    return tuple(s.key for s in rows(section))


#: The last table indexed by path, and its index (the table is looked up at call time: a test may replace it).
_INDEX: list[tuple[tuple[Setting, ...], Mapping[str, Setting]]] = []


def row(path: str) -> Setting:
    """The row of `path` (`pin.replicas`); KeyError when there is none."""
    table = SETTINGS
    if not _INDEX or _INDEX[0][0] is not table:
        _INDEX[:] = [(table, {s.path: s for s in table})]
    return _INDEX[0][1][path]


def pin(key: str) -> Setting:
    """The row of one pin (`replicas`)."""
    return row(f"pin.{key}")


#: The places a deployment holds as blocks, in the order docs/language.md lists them.
SECTIONS = ("workload", "quality", "slo", "pin", "speculative", "expect")


def section_keys() -> Mapping[str, tuple[str, ...]]:
    """Each block's keys: {"workload": ("batch", ...), ...}."""
    return {name: keys(name) for name in SECTIONS}


def carried(engine: str) -> tuple[tuple[Setting, Carrier], ...]:
    """The pin rows `engine` has a carrier for, in table order."""
    return tuple((s, s.engines[engine]) for s in rows("pin") if engine in s.engines)


def _flag_name(c: Carrier, record_flags: Optional[object]) -> str:
    return c.flag or (str(getattr(record_flags, c.record)) if c.record and record_flags is not None else "")


def flag_names(engine: str, record_flags: Optional[object] = None) -> tuple[str, ...]:
    """Every flag name `engine` carries a setting under (each row's, or the engine record's `flags` attribute
    it names, with what the carrier writes beside it), in table order, without repeats."""
    out: list[str] = []
    for s in SETTINGS:
        c = s.engines.get(engine)
        if c is None or c.write is Write.NONE:
            continue
        for n in (_flag_name(c, record_flags), c.also, *c.writes):
            if n and n not in out:
                out.append(n)
    return tuple(out)


# ------------------------------------------------------------------ the docs' tables

#: The base unit a range is shown in, by dimension.
_BASE_UNITS = {Dim.TOKENS: " tokens", Dim.BYTES: " B", Dim.BANDWIDTH: " B/s", Dim.COMPUTE: " FLOP/s",
               Dim.TIME: " s", Dim.RATE: " tok/s"}


def _number_text(x: float, s: Setting) -> str:
    unit = ("/s" if s.units == "request-rate" else " USD/h" if s.units == "price" else
            _BASE_UNITS.get(s.dim, "") if s.dim is not None else "")
    if x != int(x):
        return f"{x:g}{unit}"
    exponent = len(str(int(x))) - 1
    if x >= 1e7 and int(x) == 10**exponent:
        return f"10^{exponent}{unit}"
    return f"{x:,.0f}{unit}"


def range_text(s: Setting) -> str:
    """A row's range in words with the reason of each bound: `1 to 4,096 (at least one; kvplan's limit)`."""
    r = s.range
    if s.dim is None or (r.lo is None and r.hi is None):
        return ""
    lo = None if r.lo is None else _number_text(r.lo.value, s)
    hi = None if r.hi is None else _number_text(r.hi.value, s)
    if lo is not None and hi is not None:
        words = (f"above {lo}, below {hi}" if r.lo_open and r.hi_open else f"above {lo}, at most {hi}" if r.lo_open
                 else f"{lo} to {hi}")
    elif lo is not None:
        words = f"{'above' if r.lo_open else 'at least'} {lo}"
    else:
        words = f"at most {hi}"
    whys = [b.why for b in (r.lo, r.hi) if b is not None]
    return f"{words} ({'; '.join(dict.fromkeys(whys))})"


def takes_text(s: Setting) -> str:
    """What a row's value is, in words."""
    if s.takes is Takes.QUANTITY:
        assert s.dim is not None
        kind = {Dim.COUNT: "a count", Dim.NUMBER: "a number", Dim.FRACTION: "a fraction"}.get(s.dim, s.dim.value)
        if s.units == "request-rate":
            kind = "requests per time"
        elif s.units == "price":
            kind = "USD per device-hour"
        return kind + (", whole" if s.integer and s.dim is not Dim.COUNT else "")
    if s.takes is Takes.WORD:
        return ", ".join(s.choices) if s.choices else "a word"
    return {Takes.SWITCH: "on or off", Takes.DTYPE: "a dtype", Takes.NAME: "a name", Takes.PATH: "a quoted path",
            Takes.COUNT_OR_BOUND: "N, auto or <= N", Takes.FLAG: "stands alone"}[s.takes]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def language_table() -> str:
    """The key table of docs/language.md: every row's path, what it takes, range, default and doc."""
    lines = ["| key | takes | range (why each end) | default (evidence: source) | what it is |",
             "|---|---|---|---|---|"]
    for s in SETTINGS:
        d = s.default
        default = "" if d is None else f"`{d.value}` ({d.evidence.value}: {d.source})"
        lines.append(f"| `{s.path}` | {_cell(takes_text(s))} | {_cell(range_text(s))} | {_cell(default)} | "
                     f"{_cell(s.doc)} |")
    return "\n".join(lines) + "\n"


def engine_flag(s: Setting, engine: str) -> str:
    """The flag (or config key) that carries row `s` in `engine`, "" where none does."""
    c = s.engines.get(engine)
    if c is None or c.write is Write.NONE:
        return ""
    return _flag_name(c, ENGINES[engine].flags if engine in ENGINES else None)


def engines_table() -> str:
    """The table of docs/engines.md: each setting an engine carries, with its flag, how import reads it and how
    emit writes it (or why it does not)."""
    names = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
    lines = ["| setting | " + " | ".join(names.values()) + " |", "|---|" + "---|" * len(names)]
    for s in SETTINGS:
        if not s.engines:
            continue
        cells = []
        for engine in names:
            c = s.engines.get(engine)
            if c is None:
                cells.append("—")
            elif c.write is Write.NONE:
                cells.append("not written: " + c.why.format(n="N", value="N"))
            else:
                also = f" with `{c.also}`" if c.also else ""
                cells.append(f"`{engine_flag(s, engine)}`{also} (read: {c.read.value}; written: {c.write.value})")
        lines.append(f"| `{s.path}` | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
