"""A deployment's quality, slo, pin and expect blocks: each key checked as its settings row says, then the rules
across keys (eviction and the budget, a pinned layout and the devices, attention groups, service SLOs).
"""

from __future__ import annotations

import re
from typing import Mapping, Optional, Union

from kvplan.base import codes
from kvplan.base.diagnostics import Fix
from kvplan.base.errors import Span
from kvplan.base.evidence import Value
from kvplan.base.near import close_matches
from kvplan.base.records import record
from kvplan.catalog import settings
from kvplan.lang import fixes as fx
from kvplan.lang.spec import (
    Block,
    Entry,
    Ident,
    Quantity,
    String,
)
from kvplan.lang.values import _Values
from kvplan.lang.words import (
    _source_text,
)
from kvplan.model.scenario import (
    DeviceCount,
    Expectation,
    Pin,
    Pins,
    Speculation,
    choice,
)

BUDGETS = settings.row("quality.budget").choices
EVICTION = settings.row("quality.eviction").choices
REGIMES = settings.row("expect.regime").choices
TIERS = settings.pin("tier").choices
PIN_PLACEMENTS = settings.pin("placement").choices
SPECULATIVE_METHODS = settings.row("speculative.method").choices
BOOLEANS = settings.SWITCH_WORDS
_COMPARISONS = ("==", "<=", ">=", "<", ">")
#: itl and rate are SLOs on a service (a request workload only); ttft is, with a rate, the mean TTFT under load.
SERVICE_SLOS = ("itl", "rate")
#: A percentile form of a latency SLO (`ttft_p90`, `itl_p99.9`): the load model gives means only.
_PERCENTILE = re.compile(r"^(ttft|itl)_p[0-9]+(?:\.[0-9]+)?$")


@record
class _Slos:
    """The slo block's bounds in base units (seconds, tok/s, requests/s); None where not set."""

    step_time: Optional[float] = None
    throughput: Optional[float] = None
    ttft: Optional[float] = None
    itl: Optional[float] = None
    rate: Optional[float] = None


class _Sections(_Values):
    """The checks of a deployment's quality, slo, pin and expect blocks."""

    # -------------------------------------------------------------- sections

    def _quality(self, block: Optional[Block], spans: dict[str, Span], notes: list[Value]
                 ) -> Optional[tuple[str, bool, float]]:
        entries = self._section(block, "quality")
        for k, e in entries.items():
            spans[f"quality.{k}"] = e.span
        budget: Optional[str] = "lossless"
        if "budget" in entries:
            budget = self._word(self._scalar(entries["budget"], "quality"), "budget", BUDGETS)
        else:
            notes.append(self._default_of("quality.budget"))
        eviction: Optional[str] = None
        if "eviction" in entries:
            eviction = self._word(self._scalar(entries["eviction"], "quality"), "eviction", EVICTION)
            if eviction is None:
                return None
        min_retention: Optional[float] = 0.5
        if "min_retention" in entries:
            node = self._scalar(entries["min_retention"], "quality")
            min_retention = None if node is None else self._quantity(node, settings.row("quality.min_retention"))
        else:
            notes.append(self._default_of("quality.min_retention"))
        if budget is None or min_retention is None:
            return None
        if eviction is None:
            allowed = budget == "aggressive"
            notes.append(choice("allowed" if allowed else "forbidden",
                                "default: quality.eviction = " + ("allowed (the aggressive budget admits eviction)"
                                                                  if allowed else "forbidden (docs/language.md)")))
        else:
            allowed = eviction == "allowed" and budget != "lossless"
            if eviction == "allowed" and budget == "lossless":
                self.report(codes.CONFLICTING_SETTINGS, "eviction is allowed but the budget is lossless",
                            entries["eviction"].span,
                            help="a lossless budget admits no eviction: write `eviction = forbidden`, or raise "
                                 "the budget to one that admits eviction",
                            fixes=[fx.replace(entries["eviction"].span, "eviction = forbidden")])
        if not allowed and "min_retention" in entries:
            can_allow = budget != "lossless"
            self.report(codes.NO_EFFECT, "min_retention has no effect: eviction is not allowed",
                        entries["min_retention"].span,
                        help=("set `eviction = allowed`, or remove min_retention" if can_allow else
                              "remove min_retention (the lossless budget admits no eviction)"),
                        fixes=[self._set_in(block, "eviction", "allowed") if can_allow else None,
                               self._remove_line(entries["min_retention"])])
        return budget, allowed, min_retention

    def _slo(self, block: Optional[Block], spans: dict[str, Span], request: bool) -> Optional[_Slos]:
        """The slo block: step_time, throughput and ttft for every workload; itl and rate for a request workload
        (`request`: its workload has a rate), where ttft is the mean TTFT under load (docs/service.md)."""
        items = [] if block is None else self._no_percentiles(block)
        entries = self._entries(items, "slo", settings.section_keys()["slo"],
                                {**{f"the `{k}` block": v for k, v in settings.section_keys().items() if k != "slo"},
                                 "the deployment itself": settings.keys("deployment")})
        ok = len(items) == (0 if block is None else len(block.items))
        found: dict[str, Optional[float]] = dict.fromkeys(settings.section_keys()["slo"])
        for row in settings.rows("slo"):
            key, ops, example = row.key, row.ops, row.example
            e = entries.get(key)
            if e is None:
                continue
            spans[f"slo.{key}"] = e.span
            if key in SERVICE_SLOS and not request:
                self._service_slo_on_batch(e)
                ok = False
                continue
            if e.op not in ops:
                bound = "a lower bound" if ops[0] == ">=" else "an upper bound"
                right = f"{key} {ops[0]} {_source_text(e.value) or example}"
                self.report(codes.WRONG_OPERATOR, f"slo {key} is {bound}: `{ops[0]}`, not `{e.op or 'nothing'}`",
                            e.span, help=f"write `{right}`", fixes=[fx.replace(e.span, right)])
                ok = False
                continue
            node = e.value
            if not isinstance(node, (Quantity, Ident, String)):  # the grammar gives a comparison one scalar
                ok = False
                continue
            requests = row.units == "request-rate"
            value = (self._quantity(node, row, e.op) if not requests or self._request_rate_unit(node, e.op)
                     else None)
            ok = ok and value is not None
            found[key] = value
        return _Slos(**found) if ok else None

    def _no_percentiles(self, block: Block) -> list[Union[Entry, Block]]:
        """The slo block's items but its percentile keys (`ttft_p90`, `itl_p99`), each reported: the load model
        gives means (its M/D/1 prefill queue's waiting-time tail is not in the closed form), with the fix that
        writes the mean's key."""
        out: list[Union[Entry, Block]] = []
        keys = {i.key for i in block.items if isinstance(i, Entry)}
        for item in block.items:
            m = _PERCENTILE.match(item.key) if isinstance(item, Entry) else None
            if m is None:
                out.append(item)
                continue
            assert isinstance(item, Entry)
            base = m.group(1)
            self.report(codes.UNKNOWN_KEY, f"`{item.key}` is a percentile, and the load model gives means only: its "
                        "M/D/1 prefill queue's waiting-time tail is not in the closed form (docs/service.md)",
                        item.key_span, help=f"write `{base}` for the mean {base.upper()} under load: "
                        f"`{base} {item.op or '<='} {_source_text(item.value) or settings.row('slo.' + base).example}`",
                        fixes=[self._remove_line(item) if base in keys else fx.replace(item.key_span, base)])
        return out

    def _service_slo_on_batch(self, e: Entry) -> None:
        """Report `itl` or `rate` in the slo block of a batch/context workload: they are SLOs on a service."""
        value = _source_text(e.value) or settings.row(f"slo.{e.key}").example
        fix: Optional[Fix]
        if e.key == "itl":
            help, fix = (f"a batch's inter-token latency is its step: write `step_time <= {value}`, or write the "
                         "workload as requests at a rate: rate, input and output (docs/service.md)",
                         fx.replace(e.span, f"step_time <= {value}"))
        else:
            help, fix = ("a batch has no request rate: bound its tokens with `throughput >= 500 tok/s`, or write the "
                         "workload as requests at a rate: rate, input and output (docs/service.md)",
                         self._remove_line(e))
        self.report(codes.UNKNOWN_KEY, f"slo `{e.key}` is an SLO on a service at a request rate, and this workload "
                    "is a batch at a context", e.key_span, help=help, fixes=[f for f in [fix] if f is not None])

    def _speculative(self, block: Optional[Block], spans: dict[str, Span]) -> Union[Speculation, None, bool]:
        """The speculative block (SPEC §15): its method, draft tokens (`auto` or 1..16), acceptance in (0, 1) and
        draft repo id, each checked as its settings row says. None without a block; False after reporting."""
        if block is None:
            return None
        entries = self._section(block, "speculative")
        for k, e in entries.items():
            spans[f"speculative.{k}"] = e.span
        before = self._errors()
        method: Optional[str] = None
        if "method" in entries:
            method = self._word(self._scalar(entries["method"], "speculative"), "method", SPECULATIVE_METHODS)
        else:
            self.report(codes.MISSING_KEY, "the speculative block names no method", block.name_span,
                        help="write `method = eagle3` (or mtp, ngram, auto: the planner chooses; off: none)",
                        fixes=[self._set_in(block, "method", "auto")])
        draft_tokens = self._draft_tokens(entries.get("draft_tokens"))
        acceptance: Optional[float] = None
        if "acceptance" in entries:
            node = self._scalar(entries["acceptance"], "speculative")
            acceptance = None if node is None else self._quantity(node, settings.row("speculative.acceptance"))
        draft = self._draft_repo(entries.get("draft"))
        if method is None or self._errors() > before:
            return False
        self._speculative_effects(method, entries, block)
        return Speculation(method, draft_tokens, acceptance, draft)

    def _draft_tokens(self, e: Optional[Entry]) -> Optional[int]:
        """`draft_tokens = auto` (None: the planner chooses) or a whole number of the row's range."""
        if e is None:
            return None
        node = self._scalar(e, "speculative")
        if node is None or isinstance(node, Ident) and node.name == "auto":
            return None
        value = self._quantity(node, settings.row("speculative.draft_tokens"))
        return None if value is None else int(value)

    def _draft_repo(self, e: Optional[Entry]) -> Optional[str]:
        """`draft = "owner/name"`: a Hugging Face repo id, as the engines load it."""
        if e is None:
            return None
        node = self._scalar(e, "speculative")
        name = self._name(node, "draft") if node is not None else None
        if name is None:
            return None
        owner, slash, repo = name.partition("/")
        if not slash or not owner or not repo or "/" in repo:
            assert node is not None
            self.report(codes.UNKNOWN_VALUE, f"draft `{name}` is not a Hugging Face repo id", node.span,
                        help='name the draft as the engines load it: `draft = "owner/name"`, e.g. '
                             '"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"')
            return None
        return name

    def _speculative_effects(self, method: str, entries: Mapping[str, Entry], block: Block) -> None:
        """Keys the method makes moot: any beside `method = off`, a draft for n-gram (it drafts from the context),
        and an acceptance beside `method = auto` (an acceptance is one method's; the planner takes it for each)."""
        for key, e in entries.items():
            if key == "method":
                continue
            if method == "off":
                self.report(codes.NO_EFFECT, f"{key} has no effect: speculation is off", e.span,
                            help="remove it, or name a method", fixes=[self._remove_line(e)])
            elif method == "ngram" and key == "draft":
                self.report(codes.NO_EFFECT, "draft has no effect: n-gram drafts from the context, with no model",
                            e.span, help="remove it, or choose eagle3", fixes=[self._remove_line(e)])
            elif method == "auto" and key == "acceptance":
                self.report(codes.CONFLICTING_SETTINGS, "acceptance is one method's, and method = auto weighs each: "
                            "it is taken for all of them", e.span,
                            help="name the method the acceptance was measured with, e.g. `method = eagle3`",
                            fixes=[self._set_in(block, "method", "eagle3")])

    def _pins(self, block: Optional[Block], spans: dict[str, Span], devices: Optional[DeviceCount],
              placement: Optional[str], top: Mapping[str, Entry]) -> Mapping[str, Pin]:
        entries = self._section(block, "pin")
        pins: dict[str, Pin] = {}
        for key, e in entries.items():
            spans[f"pin.{key}"] = e.span
            node = self._scalar(e, "pin")
            if node is None:
                continue
            value = self._plain(node, settings.pin(key), e)
            if value is not None:
                pins[key] = Pin(key, value, e.span)
        pd = Pins(pins).pin(settings.pin("devices"))
        if pd is not None and devices is not None and devices.mode != "auto" and "devices" in top:
            limit_ok = pd.value == devices.n if devices.mode == "fixed" else float(pd.value) <= devices.n
            if not limit_ok:
                agree = f"{'<= ' if devices.mode == 'max' else ''}{pd.value:g}"
                self.report(codes.CONFLICTING_SETTINGS, f"pin devices = {pd.value:g} contradicts "
                            f"devices = {'<= ' if devices.mode == 'max' else ''}{devices.n}", pd.span,
                            help=f"the pin wins; make them agree: `devices = {agree}`",
                            fixes=[fx.replace(top["devices"].span, f"devices = {agree}")])
        self._attention_dp(pins)
        self._layout(pins, devices)
        self._replicas(pins, devices)
        pp = Pins(pins).pin(settings.pin("placement"))
        if pp is not None and placement not in (None, "auto", pp.value):
            fix = fx.replace(top["placement"].span, f"placement = {pp.value}") if "placement" in top else None
            self.report(codes.CONFLICTING_SETTINGS, f"pin placement = {pp.value} contradicts placement = {placement}",
                        pp.span, help=f"the pin wins; make them agree: `placement = {pp.value}`", fixes=[fix])
        return pins

    def _layout(self, pins: Mapping[str, Pin], devices: Optional[DeviceCount]) -> None:
        """A pinned tensor × pipeline split takes the deployment's devices: with both pinned their product is
        the pinned or fixed count (at most a `<=` one), one alone divides it. Whether the model's heads take
        the split is the planner's layout rule, reported by lint on the pin (kvplan.planner.lint)."""
        typed = Pins(pins)
        tp, pp = typed.pin(settings.pin("tensor_parallel")), typed.pin(settings.pin("pipeline_parallel"))
        if tp is None and pp is None:
            return
        pd = typed.pin(settings.pin("devices"))
        n = float(pd.value) if pd is not None else (
            float(devices.n) if devices is not None and devices.mode == "fixed" else None)
        what = "pin devices" if pd is not None else "devices"
        rep = typed.pin(settings.pin("replicas"))
        r = float(rep.value) if rep is not None else 1.0
        if n is not None and r > 1:  # the count is the total over the replicas: each replica takes 1/r of it
            what, n = f"{what} = {n:g} over replicas = {r:g}: per replica", n / r
        pin = pp if tp is None else tp
        assert pin is not None
        if tp is not None and pp is not None:
            product = float(tp.value) * float(pp.value)
            words = f"pin tensor_parallel = {tp.value:g} × pipeline_parallel = {pp.value:g} is {product:g} devices"
            if n is not None and product != n:
                self.report(codes.OUT_OF_RANGE, f"{words}, not {what} = {n:g}", tp.span,
                            help=f"make tensor_parallel × pipeline_parallel = {n:g}, or set "
                                 f"{'pin devices' if pd is not None else 'devices'} = {product * r:g}")
            elif n is None and devices is not None and devices.mode == "max" and product > devices.n:
                self.report(codes.OUT_OF_RANGE, f"{words}, more than devices = <= {devices.n}", tp.span,
                            help=f"allow them: `devices = <= {product:g}`")
        elif n is not None and n % float(pin.value):
            self.report(codes.OUT_OF_RANGE, f"pin {pin.key} = {pin.value:g} does not divide {what} = {n:g}: "
                        "the devices are tensor_parallel × pipeline_parallel", pin.span,
                        help=f"pin a divisor of {n:g}")

    def _replicas(self, pins: Mapping[str, Pin], devices: Optional[DeviceCount]) -> None:
        """A device count is the total over the replicas (docs/service.md): with a fixed count, `pin replicas`
        divides it, each replica taking the same devices."""
        typed = Pins(pins)
        rep, pd = typed.pin(settings.pin("replicas")), typed.pin(settings.pin("devices"))
        n = float(pd.value) if pd is not None else (
            float(devices.n) if devices is not None and devices.mode == "fixed" else None)
        if rep is None or n is None or not n % float(rep.value):
            return
        what = "pin devices" if pd is not None else "devices"
        r = float(rep.value)
        self.report(codes.OUT_OF_RANGE, f"pin replicas = {r:g} does not divide {what} = {n:g}: the devices are the "
                    "total over the replicas, the same on each", rep.span,
                    help=f"set {what} = {max(r, (n // r) * r):g} ({max(1.0, n // r):g} per replica), or pin a "
                         f"divisor of {n:g}")

    def _attention_dp(self, pins: Mapping[str, Pin]) -> None:
        """Attention data-parallel groups split the tensor-parallel group: their count divides it."""
        typed = Pins(pins)
        dp, n = typed.pin(settings.pin("attention_dp")), typed.pin(settings.pin("devices"))
        if dp is not None and n is not None and float(n.value) % float(dp.value):
            self.report(codes.CONFLICTING_SETTINGS, f"pin attention_dp = {dp.value:g} does not divide pin devices = "
                        f"{n.value:g}: each attention group takes an equal share of the tensor-parallel ranks",
                        dp.span, help="make attention_dp a divisor of devices (SGLang requires --dp to divide --tp)")

    def _expects(self, block: Optional[Block]) -> tuple[Expectation, ...]:
        if block is None:
            return ()
        out: list[Expectation] = []
        keys = settings.section_keys()["expect"]
        for item in block.items:
            if isinstance(item, Block):
                self.report(codes.UNKNOWN_BLOCK, f"`expect` holds no blocks; found `{item.name}`", item.name_span)
                continue
            e = item
            if e.key not in keys:
                close = close_matches(e.key, keys, n=1, cutoff=0.6)
                self.report(codes.UNKNOWN_METRIC, f"the plan has no metric `{e.key}`", e.key_span,
                            help=f"did you mean `{close[0]}`?" if close else f"metrics: {', '.join(keys)}",
                            fixes=[fx.replace(e.key_span, close[0])] if close else [])
                continue
            if e.key == "fits":
                if e.op:
                    self.report(codes.WRONG_OPERATOR, "`fits` stands alone", e.span, help="write `fits`",
                                fixes=[fx.replace(e.span, "fits")])
                else:
                    out.append(Expectation("fits", "is", True, e.span))
                continue
            if e.op not in _COMPARISONS:
                example = "regime == kv-bound" if e.key == "regime" else f"{e.key} >= ..."
                self.report(codes.WRONG_OPERATOR, f"`{e.key}` needs a comparison" if not e.op
                            else f"assertions compare with ==, <=, >=, < or >, not `{e.op}`", e.span,
                            help=f"write `{example}`")
                continue
            node = e.value
            if not isinstance(node, (Quantity, Ident, String)):
                continue
            if e.key == "regime":
                if e.op != "==":
                    right = f"regime == {_source_text(node)}"
                    self.report(codes.WRONG_OPERATOR, f"regimes are compared with `==`, not `{e.op}`", e.span,
                                help=f"write `{right}`", fixes=[fx.replace(e.span, right)])
                    continue
                word = self._word(node, "regime", REGIMES)
                if word is not None:
                    out.append(Expectation("regime", "==", word, e.span))
                continue
            value = self._quantity(node, settings.row(f"expect.{e.key}"), e.op)
            if value is not None:
                out.append(Expectation(e.key, e.op, value, e.span))
        return tuple(out)
