"""The checker's ground floor: its state and reporting, and the checks of one value as the settings table says.

`_Values` holds what a check of one file accumulates (diagnostics, the model and device blocks, the keys a
"did you mean" already named) and checks single entries: known keys of a place, `key = value` forms, a
quantity's unit, dimension, whole number and range (`_quantity`, from its kvplan.catalog.settings row), a word
among choices, a switch, a dtype, a name. The parts of kvplan.lang.check build on it.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Optional, Sequence, Union

from kvplan import catalog
from kvplan.base import codes
from kvplan.base.diagnostics import Diagnostic, Fix, make
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Value, assumed
from kvplan.base.near import close_matches
from kvplan.base.records import record
from kvplan.base.units import UNITS, Dim, convert, dims_of_unit, suggest_unit
from kvplan.catalog import Device, Dtype, Model, settings
from kvplan.catalog.settings import REQUEST_RATE_UNITS, Setting, Takes
from kvplan.lang import fixes as fx
from kvplan.lang.spec import (
    Block,
    Bound,
    Call,
    Entry,
    Ident,
    ListValue,
    Quantity,
    Scalar,
    SpecFile,
    String,
    ValueNode,
)
from kvplan.lang.words import (
    _EXAMPLES,
    _did_you_mean,
    _dim_words,
    _meaning,
    _or,
    _range_words,
    _shown,
    _source_text,
    _unit_first,
    _unit_names,
)
from kvplan.model.scenario import (
    choice,
)

_COUNT = settings.COUNT_UNITS
#: Why a range ends where it does, for the help line.
_LIMIT = settings.LIMIT


@record
class _Model:
    model: Model
    assumptions: tuple[Value, ...] = ()


@record
class _Device:
    device: Device
    assumptions: tuple[Value, ...] = ()


class _Values:
    """A file's check state and the checks of one entry or value (the parts of kvplan.lang.check build on it)."""

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
        return "blocks go directly inside a deployment: " + ", ".join(settings.SECTIONS)

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
                example: Optional[str] = None, hi_open: bool = False) -> Optional[float]:
        """A quantity in base units, dimension-, integer- and range-checked; None after reporting.
        `op` is how the key is written (`step_time <= ...` in slo), so that examples are valid; a value out of
        range gets `example` as its fix where one is given."""
        what = what or key
        if not isinstance(node, Quantity):
            self._not_a_quantity(node, key, dim, what, op)
            return None
        value = self._in_base_units(node, key, dim, table if table is not None else UNITS[dim], what, op)
        if value is None or not self._in_range(node, value, key, dim, integer=integer, lo=lo, hi=hi,
                                               lo_open=lo_open, what=what, why=why, op=op, example=example,
                                               hi_open=hi_open):
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
                  example: Optional[str] = None, hi_open: bool = False) -> bool:
        """Whether `value` is finite, whole where `integer`, and within the bounds; reports when not."""
        written = _shown(node.text)
        words = _range_words(lo, hi, lo_open, dim, node.unit, hi_open)
        bounds = f"{what} must be {words}" + (f" ({why})" if why else "")
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
        high_bad = hi is not None and (value >= hi if hi_open else value > hi)
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
                            why=r.cited, op=op, example=r.suggest or None, hi_open=r.hi_open)

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

    def _section(self, block: Optional[Block], name: str) -> dict[str, Entry]:
        if block is None:
            return {}
        others = {f"the `{k}` block": v for k, v in settings.section_keys().items() if k != name}
        others["the deployment itself"] = settings.keys("deployment")
        return self._entries(block.items, name, settings.section_keys()[name], others)

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
