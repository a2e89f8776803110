"""A deployment's workload block: its form (a batch at a context, or requests at a rate), each key's values,
the lists expanded into combinations under the scenario caps, and each combination's consistency.
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping, Optional, Sequence

from kvplan.base import codes, limits
from kvplan.base.errors import Span
from kvplan.base.evidence import Value, assumed
from kvplan.base.records import record
from kvplan.base.units import Dim
from kvplan.catalog import settings
from kvplan.lang import fixes as fx
from kvplan.lang.spec import (
    Block,
    Bound,
    Call,
    Entry,
    ListValue,
    Quantity,
    Scalar,
)
from kvplan.lang.values import _Values
from kvplan.lang.words import (
    _source_text,
)
from kvplan.model.scenario import (
    Lengths,
    mean_context,
)

#: Workload lists may expand into at most this many scenarios; a file into at most MAX_FILE_SCENARIOS.
MAX_SCENARIOS = limits.MAX_SCENARIOS
MAX_FILE_SCENARIOS = limits.MAX_FILE_SCENARIOS
#: The three forms of a workload (docs/language.md): a batch at a context, requests at a rate, or a closed loop
#: of clients (SPEC §13), each form's first key naming it.
BATCH_FORM = ("batch", "context")
REQUEST_FORM = ("rate", "input", "output")
CONCURRENCY_FORM = ("concurrency", "input", "output")
FORMS = (BATCH_FORM, REQUEST_FORM, CONCURRENCY_FORM)
#: What each form is, in the words an error uses.
_FORM_WORDS = {"batch": "a batch at a context", "rate": "requests at a rate",
               "concurrency": "a closed loop of clients"}


@record
class _Element:
    """One value of a workload key: a scalar or one element of a list."""

    value: float
    text: str
    span: Span
    #: The shortest length of a uniform distribution (`value` is then the longest); None: one value.
    lo: Optional[float] = None



#: One workload combination: (scenario name, values, spans).
_Combo = tuple[str, dict[str, float], dict[str, Span]]


def _context_of(values: Mapping[str, float]) -> int:
    """The scenario's context: the batch form's, or for requests the mean context a running sequence holds,
    input + output/2 rounded up (kvplan.model.load; the tail, input + output, is the scenario's max_context)."""
    if "concurrency" in values:  # a closed loop's plan fits every running sequence at its last token
        return int(values["input"]) + int(values["output"])
    if "rate" not in values:
        return int(values["context"])
    if "input_lo" not in values and "output_lo" not in values:
        return int(values["input"]) + math.ceil(values["output"] / 2)
    lengths = [Lengths(int(values.get(f"{k}_lo", values[k])), int(values[k])) for k in ("input", "output")]
    return math.ceil(mean_context(*lengths) - 1e-9)


class _Workload(_Values):
    """The checks of a deployment's workload block and its expansion into scenarios."""

    # -------------------------------------------------------------- workload

    def _workload(self, block: Block, dep_name: str, notes: list[Value]) -> Optional[list[_Combo]]:
        """(scenario name, values, spans) per combination of the workload's lists."""
        entries = self._section(block, "workload")
        ok = self._one_form(entries, block)
        values: dict[str, list[_Element]] = {}
        for key, e in entries.items():
            elems = self._workload_values(key, e)
            if elems is None:
                ok = False
            else:
                values[key] = elems
        for row in settings.rows("workload"):
            key, default = row.key, row.default
            if default is not None and key not in entries:
                value, unit = float(default.value), "tokens" if row.dim is Dim.TOKENS else "1"
                notes.append(assumed(value, unit, f"default: workload.{key} = {value:g} ({default.source})"))
                values[key] = [_Element(value, f"{value:g}", block.name_span)]
        if not ok:
            return None
        # every entry was a `key = value`: those whose value is a list expand into scenarios
        listed = [key for key, e in entries.items() if isinstance(e.value, ListValue)]
        total = math.prod(len(values[k]) for k in listed)
        if not self._within_caps(total, block):
            return None
        self.expanded += total
        return self._combinations(values, listed, entries, block, dep_name)

    def _one_form(self, entries: Mapping[str, Entry], block: Block) -> bool:
        """Whether the workload is written in one form, batch/context, rate/input/output or
        concurrency/input/output, with all of its keys; a key of another form, or a missing one, is reported."""
        named = [e for e in entries.values() if e.key in ("batch", "context", "rate", "concurrency")]
        if not named:
            return self._has_required(entries, block, REQUEST_FORM if any(
                k in entries for k in ("input", "output")) else BATCH_FORM)
        first = min(named, key=lambda e: (e.span.line, e.span.column))
        form = next(f for f in FORMS if first.key in f)
        clash = [e for e in named if e.key not in form]
        for e in clash:
            other = next(f for f in FORMS if e.key in f)
            keep = "/".join(form)
            self.report(codes.UNKNOWN_KEY, f"`{e.key}` belongs to the {'/'.join(other)} form of a workload, and "
                        f"this one is written as {keep} (`{first.key}` at line {first.span.line})", e.key_span,
                        help=f"a workload is one of {', '.join(_FORM_WORDS.values())}: keep `{keep}` and remove "
                             f"`{e.key}` (the load model derives the batch from a rate or a concurrency; "
                             "docs/service.md)",
                        fixes=[f for f in [self._remove_line(e)] if f is not None])
        if form is BATCH_FORM:
            for k in ("input", "output"):
                if k in entries and not clash:
                    e = entries[k]
                    self.report(codes.UNKNOWN_KEY, f"`{k}` belongs to the rate/input/output and "
                                "concurrency/input/output forms of a workload, and this one is written as "
                                f"batch/context (`{first.key}` at line {first.span.line})", e.key_span,
                                help="a batch at a context has no request lengths: remove `{k}`, or write "
                                     "`rate` or `concurrency` in place of `batch` and `context`",
                                fixes=[f for f in [self._remove_line(e)] if f is not None])
                    clash.append(e)
        return not clash and self._has_required(entries, block, form)

    def _has_required(self, entries: Mapping[str, Entry], block: Block, keys: Sequence[str]) -> bool:
        """Whether the form's keys are there; a missing one is reported (unless a misspelt key stands for it)."""
        ok = True
        for key in keys:
            if key not in entries and key in self.hinted:
                ok = False
            elif key not in entries:
                example = settings.row(f"workload.{key}").example
                self.report(codes.MISSING_KEY, f"workload has no {key}", block.name_span,
                            help=f"add `{key} = {example}`", fixes=[self._set_in(block, key, example)])
                ok = False
        return ok

    def _workload_values(self, key: str, e: Entry) -> Optional[list[_Element]]:
        """The values of one workload key (one, or a list's elements), each checked; None after reporting."""
        v = self._assignment(e, "workload", calls=key in ("input", "output"))
        if isinstance(v, Call):
            return self._distribution(key, v)
        if v is None or isinstance(v, Bound):
            if isinstance(v, Bound):
                self.report(codes.WRONG_KIND, f"`{key}` takes a value, not a bound", v.span)
            return None
        if isinstance(v, ListValue) and not v.items:
            self.report(codes.WRONG_KIND, f"`{key}` is an empty list: no scenario to plan", v.span,
                        help=f"give at least one value: `{key} = [1, 8, 32]`")
            return None
        nodes: Sequence[Scalar] = v.items if isinstance(v, ListValue) else (v,)
        row = settings.row(f"workload.{key}")
        elems = []
        ok = True
        for node in nodes:  # every element is checked, so that each bad one is reported
            if row.units == "request-rate" and not self._request_rate_unit(node):
                ok = False
                continue
            value = self._quantity(node, row)
            if value is None:
                ok = False
                continue
            elems.append(_Element(value, node.text.replace(" ", "") if isinstance(node, Quantity) else "",
                                  node.span if isinstance(v, ListValue) else e.span))
        return elems if ok else None

    def _distribution(self, key: str, v: Call) -> Optional[list[_Element]]:
        """`uniform(lo, hi)`: request lengths uniform over the integers lo..hi inclusive (what vLLM's random
        dataset samples; docs/language.md), each bound a token count checked as a fixed length is, lo <= hi."""
        if v.name != "uniform":  # no fix: another family's arguments (a mean, a deviation) are no bounds
            self.report(codes.WRONG_KIND, f"unknown distribution `{v.name}` for {key}", v.name_span,
                        help="kvplan knows one distribution of lengths, uniform(lo, hi): the integers lo..hi, "
                             "inclusive, equally likely (docs/language.md)")
            return None
        if len(v.args) != 2:
            one = _source_text(v.args[0]) if len(v.args) == 1 else ""
            self.report(codes.WRONG_KIND, f"uniform takes two bounds (the shortest and the longest {key}, tokens), "
                        f"got {len(v.args)}", v.span,
                        help=f"one length is a fixed length: write `{key} = {one}`" if one else
                        "give the shortest and the longest: uniform(lo, hi) (docs/language.md)",
                        fixes=[fx.replace(v.span, one, f"{key} = {one}")] if one else [])
            return None
        row = settings.row(f"workload.{key}")
        bounds = [self._quantity(a, row) for a in v.args]
        if bounds[0] is None or bounds[1] is None:
            return None
        if bounds[0] > bounds[1]:
            a, b = v.args
            swapped = f"uniform({_source_text(b)}, {_source_text(a)})"
            self.report(codes.OUT_OF_RANGE, f"uniform's lower bound {_source_text(a)} is above its upper bound "
                        f"{_source_text(b)}", v.span, help=f"write the shorter first: `{key} = {swapped}`",
                        fixes=[fx.replace(v.span, swapped, f"{key} = {swapped}")])
            return None
        text = "uniform(" + ",".join(_source_text(a).replace(" ", "") for a in v.args) + ")"
        return [_Element(bounds[1], text, v.span, lo=bounds[0])]

    def _within_caps(self, total: int, block: Block) -> bool:
        """Whether `total` more scenarios fit the cap per deployment and the cap per file; reports when not."""
        if total > MAX_SCENARIOS:
            self.report(codes.TOO_MANY_SCENARIOS, f"workload lists expand into {total} scenarios", block.name_span,
                        help=f"at most {MAX_SCENARIOS}: split the deployment or shorten the lists")
            return False
        # A cap per file too: lint plans every scenario, and many deployments of 1,000 would run for minutes.
        if self.over_file_cap:
            return False
        if self.expanded + total > MAX_FILE_SCENARIOS:
            self.over_file_cap = True
            self.report(codes.TOO_MANY_SCENARIOS, f"with this deployment the file expands into more than "
                        f"{MAX_FILE_SCENARIOS:,} scenarios ({self.expanded:,} before it, {total:,} here); "
                        "it and the deployments after it are not planned", block.name_span,
                        help=f"a file expands into at most {MAX_FILE_SCENARIOS:,}: split it into several files")
            return False
        return True

    def _combinations(self, values: Mapping[str, list[_Element]], listed: Sequence[str],
                      entries: Mapping[str, Entry], block: Block, dep_name: str) -> Optional[list[_Combo]]:
        """Every combination of the listed values, each checked for consistency; None if any is not."""
        keys = list(values)
        combos = []
        failed = False
        for picked in itertools.product(*(values[k] for k in keys)):
            chosen = dict(zip(keys, picked, strict=True))
            if not self._consistent(chosen, entries, block):
                failed = True
                continue
            name = dep_name
            if listed:
                name += "[" + ",".join(f"{k}={chosen[k].text}" for k in listed) + "]"
            wspans = {f"workload.{k}": chosen[k].span for k in keys if k in entries}
            picked_values = {k: chosen[k].value for k in keys}
            for k in keys:
                lo = chosen[k].lo
                if lo is not None:
                    picked_values[f"{k}_lo"] = lo
            combos.append((name, picked_values, wspans))
        return None if failed else combos

    def _consistent(self, c: Mapping[str, _Element], entries: Mapping[str, Entry], block: Block) -> bool:
        if "concurrency" in c:
            return self._consistent_requests(c) and self._two_outputs(c)
        if "rate" in c:
            return self._consistent_requests(c)
        ok = True
        if c["prefix"].value > c["context"].value:
            self.report(codes.PREFIX_EXCEEDS_CONTEXT, f"prefix {c['prefix'].text} is longer than the context "
                        f"{c['context'].text}", c["prefix"].span, help="a shared prefix is part of each context")
            ok = False
        if "max_context" in c and c["context"].value > c["max_context"].value:
            self.report(codes.OUT_OF_RANGE, f"context {c['context'].text} is longer than max_context "
                        f"{c['max_context'].text}, the longest sequence the engine admits", c["context"].span,
                        help="the context is the typical sequence and max_context its bound: make the context "
                             "at most the bound, or raise the bound")
            ok = False
        if "fanout" in entries and c["fanout"].value > c["batch"].value:
            self.report(codes.FANOUT_EXCEEDS_BATCH, f"fanout {c['fanout'].text} exceeds batch {c['batch'].text}",
                        c["fanout"].span, help="only sequences in the same batch share cached prefix pages")
        if "fanout" in entries and c["fanout"].value > 1 and c["prefix"].value == 0:
            half = f"{int(c['context'].value) // 2}"  # any prefix up to the context is valid
            self.report(codes.NO_EFFECT, f"fanout {c['fanout'].text} shares no prefix", c["fanout"].span,
                        help=f"set `prefix` to the shared tokens, e.g. `prefix = {half}`",
                        fixes=[self._set_in(block, "prefix", half)] if "prefix" not in entries else [])
        return ok

    def _consistent_requests(self, c: Mapping[str, _Element]) -> bool:
        """A request workload's checks: the shared prefix is part of the prompt, and a request's longest
        sequence (input + output) is one the engine admits."""
        ok = True
        shortest = c["input"].value if c["input"].lo is None else c["input"].lo
        if c["prefix"].value > shortest:
            self.report(codes.PREFIX_EXCEEDS_CONTEXT, f"prefix {c['prefix'].text} is longer than the "
                        f"{'shortest ' if c['input'].lo is not None else ''}input {c['input'].text}",
                        c["prefix"].span, help="a shared prefix is part of each prompt")
            ok = False
        longest = c["input"].value + c["output"].value
        if "max_context" in c and longest > c["max_context"].value:
            self.report(codes.OUT_OF_RANGE, f"input {c['input'].text} + output {c['output'].text} = {longest:,.0f} "
                        f"tokens is longer than max_context {c['max_context'].text}, the longest sequence the engine "
                        "admits", c["max_context"].span,
                        help=f"raise the bound to at least {longest:.0f}, or shorten the input or the output")
            ok = False
        if longest > limits.MAX_TOKENS:
            self.report(codes.OUT_OF_RANGE, f"input + output = {longest:,.0f} tokens is over kvplan's limit of "
                        f"{limits.MAX_TOKENS:,}", c["output"].span, help="shorten the input or the output")
            ok = False
        return ok

    def _two_outputs(self, c: Mapping[str, _Element]) -> bool:
        """A closed loop's requests generate at least two tokens: its TPOT, (E2E − TTFT)/(output − 1), is what the
        benchmark tools print beside the TTFT (SPEC §13), and one token has none."""
        out = c["output"]
        shortest = out.value if out.lo is None else out.lo
        if shortest >= 2:
            return True
        right = "2" if out.lo is None else f"uniform(2, {out.value:g})"
        self.report(codes.OUT_OF_RANGE, f"output {out.text} has a request of one token, which has no TPOT "
                    "((E2E − TTFT) / (output − 1), what a closed-loop benchmark prints)", out.span,
                    help=f"a concurrency workload's requests generate at least 2 tokens: write `output = {right}`")
        return False
