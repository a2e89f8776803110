"""Typed syntax tree → scenarios in base units, and every meaning problem found on the way.

Resolves catalog ids and the file's own model/device blocks, converts and
dimension-checks units, checks ranges, applies documented defaults (each
recorded as an `assumed` value naming where it came from) and expands
workload lists into one scenario per combination. It reports every problem it
finds rather than stopping at the first; a deployment with an error yields no
scenario.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from typing import Callable, Iterable, Mapping, Optional, Sequence, TypeVar, Union

import attrs

from kvplan import catalog
from kvplan.base import codes, files, limits
from kvplan.base.diagnostics import Diagnostic, Edit, Fix, make
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Value, assumed
from kvplan.base.near import close_matches
from kvplan.base.outputs import folder_name
from kvplan.base.records import record
from kvplan.base.units import UNITS, Dim, convert, dims_of_unit, fmt_unit, suggest_unit
from kvplan.catalog import Device, Dtype, Model, hub, settings, weight_bytes
from kvplan.catalog import engines as engine_catalog
from kvplan.catalog.settings import PRICE_UNITS, REQUEST_RATE_UNITS, Setting, Takes
from kvplan.lang import checkpoint as ck
from kvplan.lang import fixes as fx
from kvplan.lang.spec import (
    SECTIONS,
    Block,
    Bound,
    Call,
    Declaration,
    DeploymentDecl,
    DeviceDecl,
    Entry,
    Ident,
    ListValue,
    ModelDecl,
    Quantity,
    Scalar,
    SpecFile,
    String,
    ValueNode,
    quote,
)
from kvplan.model.profile import Profile, load_profile
from kvplan.model.scenario import (
    AUTO_DEVICE_LIMIT,
    DeviceCount,
    Expectation,
    Lengths,
    Pin,
    Scenario,
    choice,
    mean_context,
)

#: Workload lists may expand into at most this many scenarios; a file into at most MAX_FILE_SCENARIOS.
MAX_SCENARIOS = limits.MAX_SCENARIOS
MAX_FILE_SCENARIOS = limits.MAX_FILE_SCENARIOS

LANGUAGE_VERSION = 1

# The words and keys of each place, from the one settings table (kvplan.catalog.settings). The checker reads
# the table at call time; these names are the table's words for the help lines and for other modules.
PLACEMENTS = settings.row("placement").choices
BUDGETS = settings.row("quality.budget").choices
EVICTION = settings.row("quality.eviction").choices
OBJECTIVES = settings.row("objective").choices
REGIMES = settings.row("expect.regime").choices
TIERS = settings.pin("tier").choices
PIN_PLACEMENTS = settings.pin("placement").choices
BOOLEANS = settings.SWITCH_WORDS
DEPLOYMENT_KEYS = settings.keys("deployment")
SECTION_KEYS: Mapping[str, tuple[str, ...]] = settings.section_keys()
MODEL_KEYS = settings.keys("model")
DEVICE_KEYS = settings.keys("device")

_COUNT = settings.COUNT_UNITS
#: Why a range ends where it does, for the help line.
_LIMIT = settings.LIMIT
_COMPARISONS = ("==", "<=", ">=", "<", ">")
#: itl and rate are SLOs on a service (a request workload only); ttft is, with a rate, the mean TTFT under load.
SERVICE_SLOS = ("itl", "rate")
#: A percentile form of a latency SLO (`ttft_p90`, `itl_p99.9`): the load model gives means only.
_PERCENTILE = re.compile(r"^(ttft|itl)_p[0-9]+(?:\.[0-9]+)?$")
#: The two forms of a workload (docs/language.md): a batch at a context, or requests at a rate.
BATCH_FORM = ("batch", "context")
REQUEST_FORM = ("rate", "input", "output")

_W = TypeVar("_W")  # what a deployment holds: _Model or _Device
_X = TypeVar("_X")  # what the catalog holds: Model or Device


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


def _without_pinned_defaults(notes: list[Value], pins: Mapping[str, object], top: Mapping[str, object]
                             ) -> list[Value]:
    """A pin stands in for the deployment setting it fixes: the default it replaces is no assumption."""
    for key in ("devices", "placement"):
        if key in pins and key not in top:
            notes = [a for a in notes if not str(a.source).startswith(f"default: {key} = ")]
    return notes


def _has_rate(workload: Optional[Block]) -> bool:
    """Whether a workload block is written as requests at a rate (its slo block may then hold itl and rate)."""
    return workload is not None and any(isinstance(i, Entry) and i.key == "rate" for i in workload.items)


@record
class _Slos:
    """The slo block's bounds in base units (seconds, tok/s, requests/s); None where not set."""

    step_time: Optional[float] = None
    throughput: Optional[float] = None
    ttft: Optional[float] = None
    itl: Optional[float] = None
    rate: Optional[float] = None


@record
class _Model:
    model: Model
    assumptions: tuple[Value, ...] = ()


@record
class _Device:
    device: Device
    assumptions: tuple[Value, ...] = ()


def check(spec: SpecFile, base_dir: str = ".", source: str = "", allow_paths: Sequence[str] = ()
          ) -> tuple[tuple[Scenario, ...], tuple[Diagnostic, ...]]:
    """Scenarios of every error-free deployment, and all diagnostics sorted by position.

    `base_dir` is where `config = "..."` paths of model blocks are relative to; they must lie in it
    (or below it) or in one of the folders `allow_paths`: a spec is often untrusted input (a pull
    request in CI), and may not make kvplan read files elsewhere. `source`, the file's text, lets
    suggestions carry their edits (kvplan.lang.fixes).
    """
    checker = _Checker(spec, base_dir, source, allow_paths)
    scenarios = checker.run()
    unique = {(d.code, d.span, d.message): d for d in checker.diagnostics}
    return tuple(scenarios), tuple(sorted(unique.values(), key=Diagnostic.sort_key))


class _Checker:
    def __init__(self, spec: SpecFile, base_dir: str, source: str = "", allow_paths: Sequence[str] = ()) -> None:
        self.spec = spec
        self.base_dir = base_dir
        self.spec_source = source
        self.allow_paths = tuple(allow_paths)
        self.diagnostics: list[Diagnostic] = []
        self.models: dict[str, Optional[_Model]] = {}
        self.devices: dict[str, Optional[_Device]] = {}
        # Keys and blocks a "did you mean" already pointed at: their absence is not reported again.
        self.hinted: set[str] = set()
        # Scenarios the file's workloads expanded into so far, against MAX_FILE_SCENARIOS.
        self.expanded = 0
        self.over_file_cap = False

    # ------------------------------------------------------------ reporting

    def report(self, code: str, message: str, span: Optional[Span], help: Optional[str] = None,
               fixes: Sequence[Optional[Fix]] = ()) -> None:
        self.diagnostics.append(make(code, message, span, help, fixes=fixes))

    def _set_in(self, where: Optional[fx.Container], key: str, value: str) -> Optional[Fix]:
        return fx.set_setting(self.spec_source, where, key, value) if where is not None else None

    def _remove_line(self, e: Entry) -> Optional[Fix]:
        return fx.remove_entry(self.spec_source, e) if self.spec_source else None

    def _errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity.value == "error")

    # ------------------------------------------------------------------ file

    def run(self) -> list[Scenario]:
        self._versions()
        self._names()
        for m in self.spec.models:
            if m.name not in self.models:
                self.models[m.name] = self._model_block(m)
        for d in self.spec.devices:
            if d.name not in self.devices:
                self.devices[d.name] = self._device_block(d)
        scenarios: list[Scenario] = []
        if not self.spec.deployments:
            # lint and advise alike: a file with nothing to plan is an error at its first line
            self.report(codes.MISSING_KEY, "this file declares no deployment: there is nothing to plan",
                        Span(self.spec.path, 1, 1, 1, 1),
                        help='add a `deployment "NAME" { ... }` block; examples/w2-batch32.kvp is one to copy')
        for dep in self.spec.deployments:
            before = self._errors()
            found = self._deployment(dep)
            if self._errors() == before:
                scenarios += found
        self._folders(scenarios)
        return scenarios

    def _folders(self, scenarios: Sequence[Scenario]) -> None:
        """Two scenarios whose names give one output folder (`Chat` and `chat`, `straße` and
        `strasse`): `emit -o`/`report -o` refuse them (kvplan.outputs.folder_names), so lint reports
        them at the second deployment, with the function those commands use."""
        taken: dict[str, Scenario] = {}
        told: set[tuple[str, str]] = set()
        for s in scenarios:
            folder = folder_name(s.name)
            first = taken.setdefault(folder, s)
            if first.name == s.name or first.deployment == s.deployment:
                continue
            if (first.deployment, s.deployment) in told:
                continue
            told.add((first.deployment, s.deployment))
            span = s.spans["deployment"]
            line = first.spans["deployment"].line
            self.report(codes.DUPLICATE_NAME,
                        f"deployment `{s.deployment}` writes the same output folder `{folder}/` "
                        f"as `{first.deployment}` "
                        f"(line {line}): folder names are case-folded and Unicode-normalized, punctuation becomes '-'",
                        span, help="rename one of them so that `kvplan emit -o` and `kvplan report -o` can write both")

    def _versions(self) -> None:
        first_decl = self.spec.declarations[0].span if self.spec.declarations else None
        for i, v in enumerate(self.spec.versions):
            if i > 0:
                self.report(codes.BAD_VERSION, "a second version line", v.span, help="keep one `kvplan 1`, first")
                continue
            if first_decl is not None and (first_decl.line, first_decl.column) < (v.span.line, v.span.column):
                s = v.span
                move = Fix("move the version line first", (
                    Edit(Span(s.file, 1, 1, 1, 1), f"kvplan {v.number.text}\n"),
                    Edit(Span(s.file, s.line, 1, s.line + 1, 1), ""))) if self.spec_source else None
                self.report(codes.BAD_VERSION, "the version line comes after a declaration", v.span,
                            help="put `kvplan 1` first in the file", fixes=[move])
            if v.number.number != LANGUAGE_VERSION:
                self.report(codes.BAD_VERSION, f"language version {v.number.text} is not supported",
                            v.number.span, help=f"this kvplan reads `kvplan {LANGUAGE_VERSION}`",
                            fixes=[fx.replace(v.number.span, str(LANGUAGE_VERSION), f"kvplan {LANGUAGE_VERSION}")])

    def _names(self) -> None:
        seen: dict[tuple[str, str], Declaration] = {}
        for decl in self.spec.declarations:
            key = (decl.kind, decl.name)
            if key in seen:
                first = seen[key]
                self.report(codes.DUPLICATE_NAME, f"a second {decl.kind} named `{decl.name}`", decl.name_span,
                            help=f"the first is at line {first.name_span.line}; names are unique per kind")
            else:
                seen[key] = decl
            if not decl.name.strip():
                self.report(codes.OUT_OF_RANGE, f"a {decl.kind} needs a name", decl.name_span,
                            help=f'e.g. {decl.kind} "chat" {{')

    # --------------------------------------------------------- common parts

    def _entries(self, items: Iterable[Union[Entry, Block]], where: str, keys: Sequence[str],
                 others: Mapping[str, Sequence[str]] = {}) -> dict[str, Entry]:
        """Known entries by key; unknown, duplicate and nested-block items reported."""
        out: dict[str, Entry] = {}
        for item in items:
            if isinstance(item, Block):
                self.report(codes.UNKNOWN_BLOCK, f"`{where}` holds no blocks; found `{item.name}`", item.name_span,
                            help=self._block_help(item.name, keys))
                continue
            if item.key not in keys:
                close = close_matches(item.key, keys, n=1, cutoff=0.6)
                self.report(codes.UNKNOWN_KEY, f"unknown key `{item.key}` in {where}", item.key_span,
                            help=self._key_help(item.key, keys, others),
                            fixes=[fx.replace(item.key_span, close[0])] if close else [])
                self.hinted.update(close_matches(item.key, keys, n=1, cutoff=0.6) or [item.key])
                continue
            if item.key in out:
                self.report(codes.DUPLICATE_KEY, f"`{item.key}` is set twice in {where}", item.key_span,
                            help=f"the first is at line {out[item.key].span.line}; keep one",
                            fixes=[self._remove_line(item), self._remove_line(out[item.key])])
                continue
            out[item.key] = item
        return out

    @staticmethod
    def _key_help(key: str, keys: Sequence[str], others: Mapping[str, Sequence[str]]) -> str:
        close = close_matches(key, keys, n=1, cutoff=0.6)
        if close:
            return f"did you mean `{close[0]}`?"
        for place, their in others.items():
            if key in their:
                return f"`{key}` belongs in {place}"
        return "known keys: " + ", ".join(keys)

    @staticmethod
    def _block_help(name: str, keys: Sequence[str]) -> str:
        if name in keys:
            return f"`{name}` is a setting: write `{name} = ...`"
        return "blocks go directly inside a deployment: workload, quality, slo, pin, expect"

    def _assignment(self, e: Entry, where: str, calls: bool = False) -> Optional[ValueNode]:
        """The value of a `key = value` entry, or None after reporting a comparison, a bare key or a distribution
        (`uniform(lo, hi)`) where `calls` does not allow one."""
        if e.op == "=" and isinstance(e.value, Call) and not calls:
            self.report(codes.WRONG_KIND, f"`{e.key}` takes one value, not a distribution `{e.value.name}(...)`",
                        e.value.span, help="only workload.input and workload.output take a distribution: "
                                           "`input = uniform(2k, 6k)` (docs/language.md)")
            return None
        if e.op == "=":
            assert e.value is not None
            return e.value
        if e.op == "":
            self.report(codes.MISSING_VALUE, f"`{e.key}` has no value", e.key_span,
                        help=f"write `{e.key} = value`")
        else:
            shown = _source_text(e.value)
            self.report(codes.WRONG_OPERATOR, f"{where} settings take `=`, not `{e.op}`", e.span,
                        help=f"write `{e.key} = {shown or '...'}`",
                        fixes=[fx.replace(e.span, f"{e.key} = {shown}")] if shown else [])
        return None

    def _scalar(self, e: Entry, where: str) -> Optional[Scalar]:
        v = self._assignment(e, where)
        if isinstance(v, ListValue):
            self.report(codes.LIST_NOT_ALLOWED, f"`{e.key}` takes one value, not a list", v.span,
                        help="lists expand into scenarios only in `workload`")
            return None
        if isinstance(v, Bound):
            self.report(codes.WRONG_KIND, f"`{e.key}` takes a value, not a bound `{v.op} ...`", v.span,
                        help="only `devices` takes a bound: `devices = <= 8`")
            return None
        assert not isinstance(v, Call)  # _assignment reported it
        return v

    def _number(self, node: Scalar, key: str, dim: Dim, table: Optional[Mapping[str, float]] = None,
                *, integer: bool = False, lo: Optional[float] = None, hi: Optional[float] = None,
                lo_open: bool = False, what: Optional[str] = None, why: str = "", op: str = "=",
                example: Optional[str] = None) -> Optional[float]:
        """A quantity in base units, dimension-, integer- and range-checked; None after reporting.
        `op` is how the key is written (`step_time <= ...` in slo), so that examples are valid; a value out of
        range gets `example` as its fix where one is given."""
        what = what or key
        if not isinstance(node, Quantity):
            self._not_a_quantity(node, key, dim, what, op)
            return None
        value = self._in_base_units(node, key, dim, table if table is not None else UNITS[dim], what, op)
        if value is None or not self._in_range(node, value, key, dim, integer=integer, lo=lo, hi=hi,
                                               lo_open=lo_open, what=what, why=why, op=op, example=example):
            return None
        if dim is Dim.TOKENS and node.unit == "K":
            self._ambiguous_k(node, what)
        return value

    def _not_a_quantity(self, node: Union[Ident, String], key: str, dim: Dim, what: str, op: str) -> None:
        """Report a name or a string where a number was wanted (with the fix `50ms` → `50 ms`)."""
        example = _EXAMPLES.get(dim, "1")
        shown = f"`{node.name}`" if isinstance(node, Ident) else f'the string "{node.value}"'
        help = f"write a number, e.g. `{key} {op} {example}`"
        fix = fx.replace(node.span, example, f"{key} {op} {example}")
        first = _unit_first(node.name, dim) if isinstance(node, Ident) else None
        if first:
            help = f"the number comes first: `{first}`"
            fix = fx.replace(node.span, first)
        self.report(codes.WRONG_KIND, f"{what} takes {_dim_words(dim)}, got {shown}", node.span, help=help,
                    fixes=[fix])

    def _in_base_units(self, node: Quantity, key: str, dim: Dim, table: Mapping[str, float], what: str,
                       op: str) -> Optional[float]:
        """The quantity converted by its unit (`table` first, then every unit of `dim`); None after reporting."""
        if node.unit in table:
            return node.number * table[node.unit]
        try:
            value = convert(node.number, node.unit, dim, what=what)
        except KvplanError:
            self._bad_unit(node, key, dim, table, what, op)
            return None
        if dim in (Dim.COUNT,) and node.unit in ("B", "T"):  # convert() accepted a parameter count unit
            self.report(codes.UNKNOWN_UNIT, f"`{node.unit}` counts parameters, not {what}", node.unit_span,
                        help=f"use {_unit_names(table)}")
            return None
        return value

    def _bad_unit(self, node: Quantity, key: str, dim: Dim, table: Mapping[str, float], what: str, op: str) -> None:
        """Report a unit that does not convert: a case slip, a missing unit, another dimension, or unknown."""
        example = _EXAMPLES.get(dim, "1")
        wrong = [d for d in dims_of_unit(node.unit) if d is not dim]
        slip = suggest_unit(node.unit, table)
        if slip is not None and slip.casefold() == node.unit.casefold():  # `1K` for a count, `50 MS`
            self.report(codes.UNKNOWN_UNIT, f"unknown unit `{node.unit}` for {what}", node.unit_span,
                        help=f"did you mean `{slip}`?", fixes=[fx.replace(node.unit_span, slip)])
        elif not node.unit:  # a bare number where a unit is needed: it has no dimension yet
            self.report(codes.WRONG_DIMENSION, f"{what} takes {dim.value}, got a plain number {node.text}",
                        node.span, help=f"add its unit, e.g. `{key} {op} {example}`",
                        fixes=[fx.replace(node.span, example, f"{key} {op} {example}")])
        elif wrong:
            self.report(codes.WRONG_DIMENSION, f"{what} takes {dim.value}, got {wrong[0].value}", node.span,
                        help=f"write {_dim_words(dim)}, e.g. `{key} {op} {example}`",
                        fixes=[fx.replace(node.span, example, f"{key} {op} {example}")])
        else:
            close = suggest_unit(node.unit, table)
            hint = f"did you mean `{close}`?" if close else f"use {_unit_names(table)}"
            self.report(codes.UNKNOWN_UNIT, f"unknown unit `{node.unit}` for {what}", node.unit_span,
                        help=hint, fixes=[_did_you_mean(node.unit_span, hint)])

    def _in_range(self, node: Quantity, value: float, key: str, dim: Dim, *, integer: bool, lo: Optional[float],
                  hi: Optional[float], lo_open: bool, what: str, why: str, op: str,
                  example: Optional[str] = None) -> bool:
        """Whether `value` is finite, whole where `integer`, and within the bounds; reports when not."""
        written = _shown(node.text)
        bounds = f"{what} must be {_range_words(lo, hi, lo_open, dim, node.unit)}" + (f" ({why})" if why else "")
        if not math.isfinite(value):
            self.report(codes.OUT_OF_RANGE, f"{what} = {written} is not a finite number", node.span,
                        help=bounds if lo is not None or hi is not None else None)
            return False
        if integer and value != int(value):
            whole = str(max(1, round(value)))
            self.report(codes.NOT_AN_INTEGER, f"{what} must be a whole number, got {written}", node.span,
                        help=f"e.g. `{key} {op} {whole}`", fixes=[fx.replace(node.span, whole, f"{key} {op} {whole}")])
            return False
        low_bad = lo is not None and (value <= lo if lo_open else value < lo)
        high_bad = hi is not None and value > hi
        if low_bad or high_bad:
            self.report(codes.OUT_OF_RANGE, f"{what} = {written} is out of range", node.span,
                        help=bounds if example is None else f"{bounds}, e.g. `{key} {op} {example}`",
                        fixes=[] if example is None else [fx.replace(node.span, example, f"{key} {op} {example}")])
            return False
        return True

    def _quantity(self, node: Scalar, row: Setting, op: str = "=", table: Optional[Mapping[str, float]] = None
                  ) -> Optional[float]:
        """A quantity checked as its settings row says: dimension, units (`table` in place of the row's),
        whole number, range and the reason cited; None after reporting."""
        assert row.dim is not None, row.path
        r = row.range
        return self._number(node, row.key, row.dim, table if table is not None else row.unit_table(),
                            integer=row.integer, lo=None if r.lo is None else r.lo.value,
                            hi=None if r.hi is None else r.hi.value, lo_open=r.lo_open, what=row.what or None,
                            why=r.cited, op=op, example=r.suggest or None)

    def _plain(self, node: Scalar, row: Setting, e: Entry) -> Union[str, float, bool, None]:
        """The value of a plain key (a quantity, a word, a switch, a dtype), checked as its row says; None after
        reporting."""
        if row.takes is Takes.DTYPE:
            name = self._name(node, row.key)
            dt = self._dtype(name, e, row.what or row.key) if name is not None else None
            return dt.id if dt is not None else None
        if row.takes is Takes.SWITCH:
            word = self._word(node, row.key, tuple(settings.SWITCH_WORDS))
            return None if word is None else settings.SWITCH_WORDS[word]
        if row.takes is Takes.WORD:
            return self._word(node, row.key, row.choices, what=row.what or None)
        return self._quantity(node, row)

    @staticmethod
    def _default_of(path: str) -> Value:
        """The assumption a left-out key stands for, as its settings row gives it: `default: KEY = VALUE (WHY)`."""
        row = settings.row(path)
        assert row.default is not None, path
        d = row.default
        source = f"default: {path} = {d.value} ({d.source})"
        return assumed(float(d.value), "1", source) if row.takes is Takes.QUANTITY else choice(d.value, source)

    def _ambiguous_k(self, node: Quantity, what: str) -> None:
        """`128K`: 128,000 tokens here, 131,072 to vLLM (human_readable_int reads K as 2^10)."""
        digits = node.text[: len(node.text) - len(node.unit)].strip()
        ours, binary = node.number * 1e3, node.number * 1024
        spellings = [f"`{digits}k` for {ours:,.0f} (what kvplan reads now)"]
        if binary == int(binary):
            spellings.append(f"`{digits}Ki` for {binary:,.0f}" + (" (what vLLM reads)" if digits.isdigit() else ""))
        ours_words = f"{what} = {node.text} is {ours:,.0f} tokens to kvplan"
        if digits.isdigit():
            message = f"{ours_words} but {binary:,.0f} to vLLM, which reads `K` as 1024"
        else:  # vLLM's human_readable_int refuses a decimal before a binary suffix
            message = f"{ours_words}; vLLM reads `K` as 1024 and refuses `{digits}K`"
        self.report(codes.AMBIGUOUS_UNIT, message, node.span, help="write " + " or ".join(spellings))

    def _word(self, node: Optional[Scalar], key: str, choices: Sequence[str], what: Optional[str] = None
              ) -> Optional[str]:
        """One of `choices`, written as a bare word (or a string); None after reporting."""
        if node is None:
            return None
        what = what or key
        if isinstance(node, Quantity):
            self.report(codes.WRONG_KIND, f"{what} takes one of {_or(choices)}, got {node.text}", node.span)
            return None
        word = node.name if isinstance(node, Ident) else node.value
        if word in choices:
            return word
        help, meant = _meaning(word, key, choices, what)
        self.report(codes.UNKNOWN_VALUE, f"unknown {what} `{word}`", node.span, help=help,
                    fixes=[fx.replace(node.span, m) for m in meant])
        return None

    def _name(self, node: Optional[Scalar], key: str) -> Optional[str]:
        if node is None:
            return None
        if isinstance(node, Quantity):
            self.report(codes.WRONG_KIND, f"{key} takes a name, got {node.text}", node.span,
                        help=f"`kvplan {key}s` lists the catalog")
            return None
        return node.name if isinstance(node, Ident) else node.value

    # ---------------------------------------------------------- model blocks

    def _spec_path(self, node: Scalar, key: str, example: str, in_folder: str = "") -> Optional[str]:
        """The path a `key = "PATH"` names, relative to the spec's folder, when it is quoted, holds no NUL and
        lies in the spec's folder (or below it) or an allowed one (--allow-path, allow-paths); else None, reported.
        A folder stands for the file `in_folder` in it (a model's config.json)."""
        if not isinstance(node, String):
            quoted = quote(_source_text(node))
            self.report(codes.WRONG_KIND, f"{key} takes a quoted path", node.span,
                        help=f"quote it: `{key} = {quoted}`", fixes=[fx.replace(node.span, quoted)])
            return None
        path = os.path.join(self.base_dir, node.value)  # an absolute value stays absolute
        if "\0" in path:
            self.report(codes.CONFIG_ERROR, f"the {key} path holds a NUL character", node.span,
                        help=f'write `{key} = "{example}"`')
            return None
        target = os.path.join(path, in_folder) if in_folder and os.path.isdir(path) else path
        if not files.within(target, (self.base_dir, *self.allow_paths)):
            self.report(codes.CONFIG_ERROR, f"`{node.value}` is outside the folder of the spec", node.span,
                        help=f"a spec names {key} files in its folder or below it; to allow another folder, "
                             'pass --allow-path DIR or set allow-paths = ["DIR"] under [tool.kvplan] '
                             "(docs/cli-lint.md)")
            return None
        return path

    def _calibration(self, e: Optional[Entry], spans: dict[str, Span]) -> Union[Profile, None, bool]:
        """`calibration = "FILE"`: the calibration profile of the expected figures (docs/expected.md), read
        and checked; None when the deployment has none, False when it cannot be used (reported)."""
        if e is None:
            return None
        spans["calibration"] = e.span
        node = self._scalar(e, "deployment")
        path = None if node is None else self._spec_path(node, "calibration", "h100-vllm.toml")
        if path is None or node is None:
            return False
        try:
            return load_profile(path)
        except KvplanError as exc:
            inside = exc.span is not None and (exc.span.line, exc.span.column) != (1, 1)
            at = f" (line {exc.span.line}, column {exc.span.column})" if inside and exc.span is not None else ""
            self.report(codes.CONFIG_ERROR, f"cannot use the calibration profile `{_source_text(node)}`{at}: "
                        f"{exc.message}", node.span, help=exc.help)
        except OSError as exc:
            self.report(codes.CONFIG_ERROR, f"cannot read the calibration profile `{_source_text(node)}`: "
                        f"{exc.strerror or exc}", node.span, help="the path is relative to the .kvp file")
        return False

    def _model_block(self, decl: ModelDecl) -> Optional[_Model]:
        entries = self._entries(decl.items, f'model "{decl.name}"', settings.keys("model"))
        before = self._errors()
        config = entries.get("config")
        if config is None:
            self.report(codes.MISSING_KEY, f'model "{decl.name}" has no config', decl.name_span,
                        help='add `config = "..."`: the path of a Hugging Face config.json')
            return None
        node = self._scalar(config, "model")
        params = self._count(entries.get("params"), "params", "model")
        active = self._count(entries.get("params_active"), "params_active", "model")
        if node is None:
            return None
        path = self._spec_path(node, "config", "models/my-7b/config.json", "config.json")
        if path is None or not isinstance(node, String):
            return None
        try:
            # the checkpoint's weight bytes too, as through --model-config or a hub id (docs/weights.md)
            model: Model = hub.resolve_path(path).model
        except ImportError:
            self.report(codes.CONFIG_ERROR, f"cannot read `{node.value}`: this kvplan has no config reader",
                        node.span)
            return None
        except KvplanError as exc:
            inside = exc.span is not None and (exc.span.line, exc.span.column) != (1, 1)
            at = f" (line {exc.span.line}, column {exc.span.column})" if inside and exc.span is not None else ""
            self.report(codes.CONFIG_ERROR, f"cannot use `{node.value}`{at}: {exc.message}", node.span, help=exc.help)
            return None
        except OSError as exc:
            self.report(codes.CONFIG_ERROR, f"cannot read `{node.value}`: {exc.strerror or exc}", node.span,
                        help="the path is relative to the .kvp file")
            return None
        except ValueError as exc:  # malformed JSON
            self.report(codes.CONFIG_ERROR, f"cannot read `{node.value}`: {exc}", node.span)
            return None
        if self._errors() > before:
            return None
        model = attrs.evolve(model, id=decl.name)
        if params is not None:  # a dense model reads all its parameters per token
            model = attrs.evolve(model, params=params, params_active=params if not model.is_moe else
                                 model.params_active)
        if active is not None:
            model = attrs.evolve(model, params_active=active)
        return _Model(model, ck.weight_notes(model))

    def _count(self, e: Optional[Entry], key: str, where: str) -> Optional[float]:
        if e is None:
            return None
        node = self._scalar(e, where)
        return None if node is None else self._quantity(node, settings.row(f"model.{key}"))

    # --------------------------------------------------------- device blocks

    def _device_block(self, decl: DeviceDecl) -> Optional[_Device]:
        where = f'device "{decl.name}"'
        entries = self._entries(decl.items, where, settings.keys("device"))
        before = self._errors()
        got: dict[str, float] = {}
        # the quantities of a device block; a link is a catalog id or a bandwidth (_link)
        for row in settings.rows("device"):
            e = entries.get(row.key)
            node = self._scalar(e, where) if e is not None and row.key not in ("link", "host_link") else None
            value = self._quantity(node, row) if node is not None else None
            if value is not None:
                got[row.key] = value
        for key in ("memory", "bandwidth", "compute"):
            if key not in entries:
                example = settings.row(f"device.{key}").example
                self.report(codes.MISSING_KEY, f"{where} has no {key}", decl.name_span, help=f"add `{key} = {example}`",
                            fixes=[fx.set_setting(self.spec_source, decl, key, example)])
        ints = {key: int(got[key]) for key in ("partitions", "sm_count") if key in got}
        notes: list[Value] = []
        partitions = settings.row("device.partitions").default
        if "partitions" not in entries and partitions is not None:
            notes.append(assumed(int(partitions.value), "1",
                                 f"{where}: partitions = {partitions.value} (default: {partitions.source})"))
        links = {key: self._link(entries.get(key), key, where, notes) for key in ("link", "host_link")}
        if self._errors() > before:
            return None
        device = Device(
            id=decl.name, name=decl.name, memory=got["memory"], bandwidth=got["bandwidth"], compute=got["compute"],
            compute_fp8=got.get("compute_fp8"), partitions=ints.get("partitions", 1), fabric=got.get("fabric"),
            sm_count=ints.get("sm_count"), host_link=links["host_link"], scaleup_link=links["link"],
            source=f"{where} in {os.path.basename(self.spec.path)}", confidence="U",
            note="described by the user in a .kvp device block",
        )
        return _Device(device, tuple(notes))

    def _link(self, e: Optional[Entry], key: str, where: str, notes: list[Value]) -> Optional[str]:
        """A catalog link id: named (`host_link = pcie5-x16`) or the first catalog link of the same
        per-direction bandwidth (Device holds link ids; the planner reads bandwidths through them)."""
        if e is None:
            return None
        node = self._scalar(e, where)
        if node is None:
            return None
        table = catalog.links()
        if not isinstance(node, Quantity):
            name = node.name if isinstance(node, Ident) else node.value
            if name in table:
                return name
            self.report(codes.UNKNOWN_LINK, f"unknown link `{name}`", node.span,
                        help=f"{catalog.suggest(name, table)}; or write its bandwidth, e.g. `64 GB/s`")
            return None
        bw = self._number(node, key, Dim.BANDWIDTH, lo=limits.MIN_BANDWIDTH, hi=limits.MAX_BANDWIDTH, why=_LIMIT)
        if bw is None:
            return None
        for lid, link in sorted(table.items()):
            if math.isclose(bw, link.bandwidth, rel_tol=1e-3):
                notes.append(assumed(bw, "B/s", f"{where}: {key} {node.text} per direction, "
                                                f"taken as catalog link {lid}"))
                return lid
        known = ", ".join(f"{lid} ({link.bandwidth / 1e9:g} GB/s)" for lid, link in sorted(table.items()))
        self.report(codes.LINK_NOT_IN_CATALOG, f"no catalog link runs at {node.text}; kvplan cannot plan over it",
                    node.span, help=f"name a catalog link (per direction): {known}")
        return None

    # ----------------------------------------------------------- deployments

    def _deployment(self, dep: DeploymentDecl) -> list[Scenario]:
        """The deployment's scenarios: its sections and settings checked, then one per workload combination."""
        where = f'deployment "{dep.name}"'
        self.hinted = set()
        sections = self._sections(dep, where)
        top = self._top_settings(dep, where)
        spans: dict[str, Span] = {"deployment": dep.name_span}
        notes: list[Value] = []

        model = self._model(top, dep, spans)
        device = self._resolve(top.get("device"), dep, spans, "device", self.devices, catalog.devices(),
                               catalog.get_device, codes.UNKNOWN_DEVICE, _Device)
        weights = self._weights(top.get("weights"), spans, notes, model.model if model is not None else None)
        if model is not None and weights is not None and "weights" in top:  # declared: it wins (docs/weights.md)
            model = _Model(*ck.declared_weights(model.model, model.assumptions, weights))
        devices = self._device_count(top.get("devices"), spans, notes)
        placement = self._choice(top.get("placement"), "placement", PLACEMENTS, where, spans, notes)
        engine = self._choice(top.get("engine"), "engine", engine_catalog.engine_ids(), where, spans, notes)
        objective = self._choice(top.get("objective"), "objective", OBJECTIVES, where, spans, notes)

        quality = self._quality(sections.get("quality"), spans, notes)
        slo = self._slo(sections.get("slo"), spans, _has_rate(sections.get("workload")))
        calibration = self._calibration(top.get("calibration"), spans)
        pins = self._pins(sections.get("pin"), spans, devices, placement, top)
        notes = _without_pinned_defaults(notes, pins, top)
        expects = self._expects(sections.get("expect"))
        workload = sections.get("workload")
        if workload is None:
            self._missing_workload(dep, where)
            return []
        combos = self._workload(workload, dep.name, notes)
        price = self._priced(top, spans, objective, device)
        if None in (model, device, weights, devices, placement, engine, objective, quality, slo, combos) or (
                calibration is False or price is False):
            return []
        assert model and device and weights and devices and placement and engine and objective
        assert quality is not None and slo is not None and combos is not None
        out = []
        for name, values, wspans in self._within_limit(combos, model.model, spans):
            out.append(Scenario(
                deployment=dep.name, name=name, model=model.model, device=device.device, weights=weights,
                devices=devices, placement=placement, engine=engine,
                batch=int(values.get("batch", 1)), context=_context_of(values), prefix=int(values["prefix"]),
                fanout=int(values["fanout"]), reuse=values["reuse"],
                budget=quality[0], eviction_allowed=quality[1], min_retention=quality[2],
                slo_step_time=slo.step_time, slo_throughput=slo.throughput, slo_ttft=slo.ttft,
                slo_itl=slo.itl, slo_rate=slo.rate, objective=objective,
                calibration=calibration if not isinstance(calibration, bool) else None,
                pins=pins, expects=expects, spans={**spans, **wspans},
                assumptions=tuple(notes) + model.assumptions + device.assumptions,
                max_context=int(values["max_context"]) if "max_context" in values else
                int(values["input"] + values["output"]) if "rate" in values else None,
                rate=values.get("rate"), input_tokens=int(values["input"]) if "input" in values else None,
                output_tokens=int(values["output"]) if "output" in values else None,
                input_min=int(values["input_lo"]) if "input_lo" in values else None,
                output_min=int(values["output_lo"]) if "output_lo" in values else None,
                price=price if isinstance(price, float) else None,
            ))
        return out

    def _price(self, e: Optional[Entry], spans: dict[str, Span]) -> Union[float, None, bool]:
        """`price = 2.50 USD/h`: US dollars per device-hour, overriding the catalog's (kvplan.planner.cost); None
        when not written, False when it is wrong (reported: a bare number, another unit, out of range)."""
        if e is None:
            return None
        spans["price"] = e.span
        node = self._scalar(e, "deployment")
        if node is None:
            return False
        if isinstance(node, Quantity) and node.unit not in PRICE_UNITS:
            got = f"a plain number {node.text}" if not node.unit else f"`{node.unit}`"
            example = f"{node.text[: len(node.text) - len(node.unit)].strip()} USD/h"
            self.report(codes.WRONG_DIMENSION if not node.unit else codes.UNKNOWN_UNIT,
                        f"price takes US dollars per device-hour, got {got}",
                        node.unit_span if node.unit else node.span,
                        help=f"write `price = {example}` ({', '.join(PRICE_UNITS)})",
                        fixes=[fx.replace(node.span, example, f"price = {example}")])
            return False
        value = self._quantity(node, settings.row("price"))
        return False if value is None else value

    def _priced(self, top: Mapping[str, Entry], spans: dict[str, Span], objective: Optional[str],
                device: Optional[_Device]) -> Union[float, None, bool]:
        """The deployment's `price` (_price), and False where `objective = cheapest` has neither it nor a catalog
        price for the device to rank plans by (reported at the objective)."""
        price = self._price(top.get("price"), spans)
        if objective != "cheapest" or price is not None or device is None or device.device.price_per_hour is not None:
            return price
        e, d = top["objective"], device.device
        where = "has no catalog price" if d.id in catalog.devices() else "is a device block, which has no price"
        self.report(codes.MISSING_KEY, f"objective = cheapest needs a price per device-hour: device `{d.id}` "
                    f"{where}", e.value.span if e.value is not None else e.span,
                    help="write the price you pay in the deployment, e.g. `price = 2.50 USD/h` (per device-hour; "
                         "docs/language.md), or choose another objective",
                    # a price is the user's to give: the only edit offered is the other objective's
                    fixes=[fx.replace(e.value.span, "fewest-devices", "objective = fewest-devices")
                           if e.value is not None else None])
        return False

    def _sections(self, dep: DeploymentDecl, where: str) -> dict[str, Block]:
        """The deployment's blocks by name; an unknown or a second block of a name is reported."""
        sections: dict[str, Block] = {}
        for block in dep.blocks:
            if block.name not in SECTIONS:
                close = close_matches(block.name, list(SECTIONS), n=1, cutoff=0.6)
                self.hinted.update(close)
                own = settings.keys("deployment")
                help = f"did you mean `{close[0]}`?" if close else self._block_help(block.name, own)
                if block.name in own:
                    help = self._block_help(block.name, own)
                self.report(codes.UNKNOWN_BLOCK, f"unknown block `{block.name}` in {where}", block.name_span,
                            help=help, fixes=[fx.replace(block.name_span, close[0])]
                            if close and block.name not in own else [])
            elif block.name in sections:
                self.report(codes.DUPLICATE_KEY, f"a second `{block.name}` block in {where}", block.name_span,
                            help=f"the first is at line {sections[block.name].span.line}; merge them")
            else:
                sections[block.name] = block
        return sections

    def _top_settings(self, dep: DeploymentDecl, where: str) -> dict[str, Entry]:
        """The deployment's own settings by key; a section written as a setting is reported."""
        top_entries = [e for e in dep.entries if e.key not in SECTIONS]
        for e in dep.entries:
            if e.key in SECTIONS:
                self.report(codes.UNKNOWN_KEY, f"`{e.key}` is a block, not a setting", e.key_span,
                            help=f"write `{e.key} {{ ... }}`")
        return self._entries(top_entries, where, settings.keys("deployment"),
                             {f"the `{k}` block": v for k, v in settings.section_keys().items()})

    def _missing_workload(self, dep: DeploymentDecl, where: str) -> None:
        """Report a deployment without a workload, unless a misspelt block was already taken for one."""
        if "workload" in self.hinted:
            return
        self.report(codes.MISSING_KEY, f"{where} has no workload", dep.name_span,
                    help="add a workload block with `batch = 32` and `context = 128k`, one setting per line",
                    fixes=[fx.add_block(self.spec_source, dep, "workload", ("batch = 32", "context = 128k"))])

    def _resolve(self, e: Optional[Entry], dep: DeploymentDecl, spans: dict[str, Span], key: str,
                 local: Mapping[str, Optional[_W]], table: Mapping[str, _X], get: Callable[[str], _X],
                 code: str, wrap: Callable[[_X], _W]) -> Optional[_W]:
        if e is None:
            if key in self.hinted:
                return None
            self.report(codes.MISSING_KEY, f'deployment "{dep.name}" has no {key}', dep.name_span,
                        help=f"add `{key} = ...` (`kvplan {key}s` lists the catalog)")
            return None
        spans[key] = e.span
        name = self._name(self._scalar(e, "deployment"), key)
        if name is None:
            return None
        if name in local:
            return local[name]  # None when the block had errors, reported there
        try:
            return wrap(get(name))
        except KvplanError as exc:
            if key == "model" and ("/" in name or os.sep in name):  # a hub repo id or a path: the hub's own words
                problem = ck.problem_of(exc, name)
                assert e.value is not None
                self.report(problem.code, problem.message, e.value.span, help=problem.help)
                return None
            known = sorted(set(table) | set(local))
            close = close_matches(name.lower(), known, n=1, cutoff=0.5)
            assert e.value is not None
            self.report(code, f"unknown {key} `{name}`", e.value.span,
                        help=(f"did you mean `{close[0]}`? " if close else "")
                        + f"`kvplan {key}s` lists the catalog; a `{key}` block in this file also works",
                        fixes=[fx.replace(e.value.span, close[0])] if close else [])
            return None

    def _model(self, top: Mapping[str, Entry], dep: DeploymentDecl, spans: dict[str, Span]) -> Optional[_Model]:
        """The deployment's model (a catalog id or alias, a model block, a hub repo id) as its checkpoint serves it."""
        model = self._resolve(top.get("model"), dep, spans, "model", self.models, catalog.models(),
                              ck.resolve_model, codes.UNKNOWN_MODEL, lambda m: _Model(m, ck.weight_notes(m)))
        if model is not None and "checkpoint" in top:
            return self._checkpoint(top["checkpoint"], model, spans)
        return model

    def _within_limit(self, combos: list[tuple[str, dict[str, float], dict[str, Span]]], model: Model,
                      spans: Mapping[str, Span]) -> list[tuple[str, dict[str, float], dict[str, Span]]]:
        """The workload combinations whose context the model admits; KV126 for each other one."""
        kept = []
        for name, values, wspans in combos:
            longest = values["context"] if "context" in values else values["input"] + values["output"]
            over = ck.context_problem(model, int(longest))
            if over is None:
                kept.append((name, values, wspans))
                continue
            at = wspans.get("workload.context", wspans.get("workload.input", spans.get("model")))
            fixes = [fx.replace(at, str(int(model.max_context or 0)))] if "workload.context" in wspans and at else []
            self.report(over.code, over.message, at, help=over.help, fixes=fixes)
        return kept

    def _checkpoint(self, e: Entry, model: _Model, spans: dict[str, Span]) -> Optional[_Model]:
        """`checkpoint = "org/name"` or a path: what emit serves, and the weight bytes its files give."""
        spans["checkpoint"] = e.span
        node = self._scalar(e, "deployment")
        if node is None:
            return None
        if not isinstance(node, String):
            self.report(codes.WRONG_KIND, "checkpoint takes a quoted repo id or path", node.span,
                        help='write `checkpoint = "org/name"`')
            return None
        served, notes, problem = ck.checkpoint(node.value, self.base_dir, model.model, self.allow_paths)
        if problem is not None:
            self.report(problem.code, problem.message, node.span, help=problem.help)
            return None
        return _Model(served, notes or model.assumptions)

    def _weights(self, e: Optional[Entry], spans: dict[str, Span], notes: list[Value], model: Optional[Model] = None
                 ) -> Optional[Dtype]:
        own = weight_bytes.checkpoint_dtype(model) if e is None and model is not None else None
        if own is not None:  # the checkpoint's own bytes and format (fp8, mxfp4), cited by the model (docs/weights.md)
            return own
        if e is None:
            notes.append(choice("bf16", "default: weights = bf16 (the paper's baseline, docs/language.md)"))
            return catalog.dtype("bf16")
        spans["weights"] = e.span
        name = self._name(self._scalar(e, "deployment"), "weights")
        return None if name is None else self._dtype(name, e, "weights")

    def _dtype(self, name: str, e: Entry, key: str) -> Optional[Dtype]:
        try:
            return catalog.dtype(name)
        except KvplanError:
            # a spelling match that changes the bit count changes the meaning (int3 is not int2)
            close = [c for c in (catalog.close_dtype(name),) if c]
            assert e.value is not None
            self.report(codes.UNKNOWN_VALUE, f"unknown {key} dtype `{name}`", e.value.span,
                        help=f"did you mean `{close[0]}`?" if close else f"choose {_or(list(catalog.DTYPES))}",
                        fixes=[fx.replace(e.value.span, close[0])] if close else [])
            return None

    def _device_count(self, e: Optional[Entry], spans: dict[str, Span], notes: list[Value]) -> Optional[DeviceCount]:
        if e is None:
            notes.append(assumed(AUTO_DEVICE_LIMIT, "1",
                                 f"default: devices = auto (the planner chooses, at most {AUTO_DEVICE_LIMIT})"))
            return DeviceCount("auto", AUTO_DEVICE_LIMIT)
        spans["devices"] = e.span
        v = self._assignment(e, "deployment")
        if v is None:
            return None
        if isinstance(v, Bound):
            if v.op not in ("<=",):
                # `>= 4` means at least 4: `<= 4` would mean the opposite, so the suggestion is `auto`
                right = "auto" if v.op in (">=", ">") else f"<= {v.limit.text}"
                self.report(codes.WRONG_OPERATOR, f"devices takes an upper bound `<= N`, not `{v.op}`", v.span,
                            help=(f"write `devices = auto` (the planner takes the fewest that fit, up to "
                                  f"{AUTO_DEVICE_LIMIT}), a count, or an upper bound `<= N`"
                                  if right == "auto" else f"write `devices = {right}`"),
                            fixes=[fx.replace(v.span, right, f"devices = {right}")])
                return None
            n = self._number(v.limit, "devices", Dim.COUNT, _COUNT, integer=True, lo=1, hi=limits.MAX_DEVICES,
                             why=_LIMIT)
            return None if n is None else DeviceCount("max", int(n))
        if isinstance(v, ListValue):
            self.report(codes.LIST_NOT_ALLOWED, "devices takes one value, not a list", v.span,
                        help="write a number, `auto` or `<= 8`")
            return None
        if isinstance(v, Quantity):
            n = self._number(v, "devices", Dim.COUNT, _COUNT, integer=True, lo=1, hi=limits.MAX_DEVICES, why=_LIMIT)
            return None if n is None else DeviceCount("fixed", int(n))
        assert not isinstance(v, Call)  # _assignment reported it
        word = self._word(v, "devices", ("auto",))
        return None if word is None else DeviceCount("auto", AUTO_DEVICE_LIMIT)

    def _choice(self, e: Optional[Entry], key: str, choices: Sequence[str], where: str,
                spans: dict[str, Span], notes: list[Value]) -> Optional[str]:
        if e is None:
            note = self._default_of(key)
            notes.append(note)
            return str(note.value)
        spans[key] = e.span
        return self._word(self._scalar(e, where), key, choices)

    # -------------------------------------------------------------- sections

    def _section(self, block: Optional[Block], name: str) -> dict[str, Entry]:
        if block is None:
            return {}
        others = {f"the `{k}` block": v for k, v in settings.section_keys().items() if k != name}
        others["the deployment itself"] = settings.keys("deployment")
        return self._entries(block.items, name, settings.section_keys()[name], others)

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
        pd = pins.get("devices")
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
        pp = pins.get("placement")
        if pp is not None and placement not in (None, "auto", pp.value):
            fix = fx.replace(top["placement"].span, f"placement = {pp.value}") if "placement" in top else None
            self.report(codes.CONFLICTING_SETTINGS, f"pin placement = {pp.value} contradicts placement = {placement}",
                        pp.span, help=f"the pin wins; make them agree: `placement = {pp.value}`", fixes=[fix])
        return pins

    def _layout(self, pins: Mapping[str, Pin], devices: Optional[DeviceCount]) -> None:
        """A pinned tensor × pipeline split takes the deployment's devices: with both pinned their product is
        the pinned or fixed count (at most a `<=` one), one alone divides it. Whether the model's heads take
        the split is the planner's layout rule, reported by lint on the pin (kvplan.planner.lint)."""
        tp, pp = pins.get("tensor_parallel"), pins.get("pipeline_parallel")
        if tp is None and pp is None:
            return
        pd = pins.get("devices")
        n = float(pd.value) if pd is not None else (
            float(devices.n) if devices is not None and devices.mode == "fixed" else None)
        what = "pin devices" if pd is not None else "devices"
        pin = pp if tp is None else tp
        assert pin is not None
        if tp is not None and pp is not None:
            product = float(tp.value) * float(pp.value)
            words = f"pin tensor_parallel = {tp.value:g} × pipeline_parallel = {pp.value:g} is {product:g} devices"
            if n is not None and product != n:
                self.report(codes.OUT_OF_RANGE, f"{words}, not {what} = {n:g}", tp.span,
                            help=f"make tensor_parallel × pipeline_parallel = {n:g}, or set {what} = {product:g}")
            elif n is None and devices is not None and devices.mode == "max" and product > devices.n:
                self.report(codes.OUT_OF_RANGE, f"{words}, more than devices = <= {devices.n}", tp.span,
                            help=f"allow them: `devices = <= {product:g}`")
        elif n is not None and n % float(pin.value):
            self.report(codes.OUT_OF_RANGE, f"pin {pin.key} = {pin.value:g} does not divide {what} = {n:g}: "
                        "the devices are tensor_parallel × pipeline_parallel", pin.span,
                        help=f"pin a divisor of {n:g}")

    def _attention_dp(self, pins: Mapping[str, Pin]) -> None:
        """Attention data-parallel groups split the tensor-parallel group: their count divides it."""
        dp, n = pins.get("attention_dp"), pins.get("devices")
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
        """Whether the workload is written in one form, batch/context or rate/input/output, with all of its keys;
        a key of the other form, or a missing one, is reported."""
        requests = [k for k in REQUEST_FORM if k in entries]
        batch = [k for k in BATCH_FORM if k in entries]
        if requests and batch:
            first = min((entries[k] for k in (*requests, *batch)), key=lambda e: (e.span.line, e.span.column))
            form, other = (REQUEST_FORM, BATCH_FORM) if first.key in REQUEST_FORM else (BATCH_FORM, REQUEST_FORM)
            for k in other:
                if k in entries:
                    self.report(codes.UNKNOWN_KEY, f"`{k}` belongs to the {'/'.join(other)} form of a "
                                f"workload, and this one is written as {'/'.join(form)} (`{first.key}` at line "
                                f"{first.span.line})", entries[k].key_span,
                                help="a workload is a batch at a context or requests at a rate, not both: keep one "
                                     "form (the load model derives the batch from the rate; docs/service.md)",
                                fixes=[f for f in [self._remove_line(entries[k])] if f is not None])
            return False
        return self._has_required(entries, block, REQUEST_FORM if requests else BATCH_FORM)

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

    def _request_rate_unit(self, node: Scalar, op: str = "=") -> bool:
        """Whether a `rate` is written in requests per time (`20/s`); reports a bare number, a token rate or
        another unit (a name or string is left to _number, which says the rate takes a number)."""
        if not isinstance(node, Quantity) or node.unit in REQUEST_RATE_UNITS:
            return True
        got = "a plain number" if not node.unit else f"`{node.unit}`" + (
            ", a token rate" if node.unit in UNITS[Dim.RATE] else "")
        example = f"{node.text.replace(' ', '').removesuffix(node.unit)}/s"
        self.report(codes.UNKNOWN_UNIT if node.unit else codes.WRONG_DIMENSION,
                    f"rate takes requests per second, got {got}", node.unit_span if node.unit else node.span,
                    help=f"write requests per time, e.g. `rate {op} {example}` ({', '.join(REQUEST_RATE_UNITS)})",
                    fixes=[fx.replace(node.span, example, f"rate {op} {example}")])
        return False

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


# ------------------------------------------------------------------ words

def _context_of(values: Mapping[str, float]) -> int:
    """The scenario's context: the batch form's, or for requests the mean context a running sequence holds,
    input + output/2 rounded up (kvplan.model.load; the tail, input + output, is the scenario's max_context)."""
    if "rate" not in values:
        return int(values["context"])
    if "input_lo" not in values and "output_lo" not in values:
        return int(values["input"]) + math.ceil(values["output"] / 2)
    lengths = [Lengths(int(values.get(f"{k}_lo", values[k])), int(values[k])) for k in ("input", "output")]
    return math.ceil(mean_context(*lengths) - 1e-9)


def _did_you_mean(span: Span, help: str) -> Optional[Fix]:
    """The fix of a help that reads "did you mean `X`?": X in place of the span."""

    m = re.match(r"did you mean `([^`]+)`\?", help)
    return fx.replace(span, m.group(1)) if m else None


def _source_text(node: Optional[ValueNode]) -> str:
    """A scalar value as it would be written back; "" for anything else."""
    if isinstance(node, Quantity):
        return node.text
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, String):
        return node.value
    return ""


#: Words people write for a choice, by what they mean: a suggestion goes by meaning, never by
#: spelling alone. A tuple of several choices lists them all (`lossy` is any of the lossy budgets).
SYNONYMS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "budget": {"lossy": ("near-lossless", "moderate", "aggressive"), "exact": ("lossless",),
               "none": ("lossless",), "no-loss": ("lossless",), "medium": ("moderate",)},
    "eviction": {"on": ("allowed",), "yes": ("allowed",), "true": ("allowed",), "allow": ("allowed",),
                 "enabled": ("allowed",), "off": ("forbidden",), "no": ("forbidden",), "false": ("forbidden",),
                 "forbid": ("forbidden",), "disabled": ("forbidden",), "none": ("forbidden",)},
    "prefix_caching": {"yes": ("on",), "enabled": ("on",), "enable": ("on",), "no": ("off",),
                       "disabled": ("off",), "disable": ("off",)},
    "placement": {"stripe": ("striped",), "interleaved": ("striped",), "pin": ("pinned",)},
    "objective": {"fewest": ("fewest-devices",), "cheap": ("cheapest",), "fast": ("fastest",),
                  "latency": ("fastest",), "headroom": ("most-headroom",)},
    "regime": {"memory-bound": ("weight-bound", "kv-bound"), "bandwidth-bound": ("weight-bound", "kv-bound"),
               "oom": ("capacity-bound",), "capacity": ("capacity-bound",)},
    "tier": {"cpu": ("host",), "dram": ("host",), "disk": ("ssd",), "nvme": ("ssd",), "off": ("none",)},
}
#: Word parts that carry a meaning wherever they stand in a word (`lossy-ish`, `lossy_ok`,
#: `lossier`, `lossful`): any word containing one means those choices, whatever it is spelled like.
STEMS: Mapping[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = {
    "budget": ((("lossy", "lossier", "lossiest", "lossful"), ("near-lossless", "moderate", "aggressive")),),
    "eviction": ((("disallow", "forbid", "prohibit", "deny"), ("forbidden",)),),
}


def _synonyms(key: str) -> Mapping[str, tuple[str, ...]]:
    """SYNONYMS of `key`; an engine's are the aliases in its catalog record (kvplan.catalog.engines)."""
    if key == "engine":
        return {a: (e.id,) for e in engine_catalog.ENGINES.values() for a in e.aliases}
    return SYNONYMS.get(key, {})
#: Pairs that look alike and mean the opposite.
OPPOSITES = frozenset({frozenset(p) for p in (("lossy", "lossless"), ("on", "off"), ("true", "false"),
                                               ("allowed", "forbidden"), ("enabled", "disabled"))})
_NEGATIONS = ("un", "non-", "non", "no-", "not-", "dis", "in")


def _opposite(a: str, b: str) -> bool:
    """Whether a and b look alike but mean the opposite: a known pair, one the other negated,
    or the `-y` and `-less` forms of one root (lossy / lossless)."""
    a, b = a.lower(), b.lower()
    if frozenset((a, b)) in OPPOSITES:
        return True
    # a word built on one side of a pair (`lossy-ish`, `not-allowed`) and a choice built on the other
    for pair in OPPOSITES:
        for x, y in itertools.permutations(sorted(pair)):
            if len(x) >= 5 and x in a and y not in a and y in b and x not in b:
                return True
    if any(a.startswith(n) and b == a[len(n):].strip("-_") or b.startswith(n) and a == b[len(n):].strip("-_")
           for n in _NEGATIONS):
        return True
    if any(a == n + b or b == n + a for n in _NEGATIONS):
        return True
    return any(x.endswith("y") and y.endswith("less") and x[:-1] == y[:-4] for x, y in ((a, b), (b, a)))


def _meaning(word: str, key: str, choices: Sequence[str], what: str) -> tuple[str, tuple[str, ...]]:
    """The help for an unknown choice and the choices it may have meant: synonyms first; a
    spelling match only when it does not mean something else."""
    meant = tuple(c for c in _synonyms(key).get(word.lower(), ()) if c in choices)
    if not meant:
        meant = next((tuple(c for c in means if c in choices) for stems, means in STEMS.get(key, ())
                      if any(s in word.lower() for s in stems)), ())
    if len(meant) > 1:
        return f"`{word}` is not one {what}: it could be {_or(meant)}", meant
    if meant:
        return f"did you mean `{meant[0]}`?", meant
    close = [c for c in close_matches(word, choices, n=3, cutoff=0.5) if not _opposite(word, c)][:1]
    if close:
        return f"did you mean `{close[0]}`?", (close[0],)
    return f"choose {_or(choices)}", ()


_EXAMPLES = {Dim.TOKENS: "128k", Dim.COUNT: "32", Dim.BYTES: "80 GB", Dim.BANDWIDTH: "3.35 TB/s",
             Dim.COMPUTE: "989 TFLOPS", Dim.TIME: "50 ms", Dim.RATE: "500 tok/s", Dim.FRACTION: "60%",
             Dim.NUMBER: "1.5"}


def _dim_words(dim: Dim) -> str:
    return {Dim.COUNT: "a count", Dim.NUMBER: "a number", Dim.FRACTION: "a fraction"}.get(dim, dim.value)


def _unit_names(table: Mapping[str, float]) -> str:
    units = [f"`{u}`" for u in table if u]
    plain = "" in table
    if not units:
        return "a plain number"
    return ", ".join(units[:16]) + (" or a plain number" if plain else "")


def _unit_first(word: str, dim: Dim) -> Optional[str]:
    """'128k' for the identifier 'k128' when `k` is a unit of `dim`: a unit written before its number."""
    for unit in sorted(UNITS[dim], key=len, reverse=True):
        if unit and word.startswith(unit):
            rest = word[len(unit):]
            try:
                float(rest)
            except ValueError:
                continue
            return f"{rest}{unit}"
    return None


#: Units a range's ends are written in, by dimension: each one the key itself takes.
_BOUND_UNITS: Mapping[Dim, Mapping[str, float]] = {
    Dim.BYTES: {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12},
    Dim.BANDWIDTH: {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12},
    Dim.COMPUTE: {"FLOPS": 1.0, "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15},
    Dim.TIME: {"us": 1e-6, "ms": 1e-3, "s": 1.0},
    Dim.RATE: {"tok/s": 1.0},
}

#: The range of a device block's quantity, by dimension (kvplan.base.limits).
_DEVICE_RANGE = {Dim.BYTES: (limits.MIN_MEMORY, limits.MAX_MEMORY),
                 Dim.BANDWIDTH: (limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH),
                 Dim.COMPUTE: (limits.MIN_COMPUTE, limits.MAX_COMPUTE)}


def _shown(text: str) -> str:
    """A value as written, cut when it is too long to repeat whole (`99999…` (400 characters))."""
    text = " ".join(text.split())
    return text if len(text) <= 24 else f"{text[:12]}… ({len(text):,} characters)"


def _range_words(lo: Optional[float], hi: Optional[float], lo_open: bool, dim: Dim, unit: str) -> str:
    def show(x: float) -> str:
        if unit == "%":
            return f"{x * 100:g}%"
        if dim is Dim.RATE and unit in REQUEST_RATE_UNITS:  # requests, not tokens, per second
            return f"{x:g}".replace("e+0", "e").replace("e+", "e") + "/s"
        if dim is Dim.COUNT and x >= 1e12:
            return fmt_unit(x, "1")                      # parameters: `1000T`
        if dim in (Dim.COUNT, Dim.TOKENS, Dim.NUMBER, Dim.FRACTION):
            return f"{x:,.0f}" if x == int(x) else f"{x:g}"
        # as a .kvp value: the largest unit the key takes that leaves a number of at least 1
        units = sorted(((f, u) for u, f in _BOUND_UNITS[dim].items()), reverse=True)
        factor, name = next(((f, u) for f, u in units if abs(x) >= f), units[-1])
        return f"{x / factor:g}".replace("e+0", "e").replace("e+", "e") + f" {name}"
    if lo is not None and hi is not None:
        if lo_open:
            return f"above {show(lo)} and at most {show(hi)}"
        return f"between {show(lo)} and {show(hi)}"
    if lo is not None:
        return f"{'above' if lo_open else 'at least'} {show(lo)}"
    return f"at most {show(hi or 0)}"


def _or(words: Sequence[str]) -> str:
    quoted = [f"`{w}`" for w in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
