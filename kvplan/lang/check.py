"""Typed syntax tree → scenarios in base units, and every meaning problem found on the way.

Resolves catalog ids and the file's own model/device blocks, converts and
dimension-checks units, checks ranges, applies documented defaults (each
recorded as an `assumed` value naming where it came from) and expands
workload lists into one scenario per combination. It reports every problem it
finds rather than stopping at the first; a deployment with an error yields no
scenario.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional, Sequence, TypeVar, Union

from kvplan import catalog
from kvplan.base import codes, limits
from kvplan.base.diagnostics import Diagnostic, Edit, Fix
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Value, assumed
from kvplan.base.near import close_matches
from kvplan.base.outputs import folder_name
from kvplan.base.units import Dim
from kvplan.catalog import Dtype, Model, settings, weight_bytes
from kvplan.catalog import engines as engine_catalog
from kvplan.catalog.settings import PRICE_UNITS
from kvplan.lang import checkpoint as ck
from kvplan.lang import fixes as fx
from kvplan.lang.blocks import _Blocks
from kvplan.lang.sections import SERVICE_SLOS, _Sections
from kvplan.lang.spec import (
    SECTIONS,
    Block,
    Bound,
    Call,
    Declaration,
    DeploymentDecl,
    Entry,
    ListValue,
    Quantity,
    SpecFile,
    String,
)
from kvplan.lang.values import _COUNT, _LIMIT, _Device, _Model
from kvplan.lang.words import _meaning
from kvplan.lang.workload import _context_of, _Workload
from kvplan.model.scenario import (
    AUTO_DEVICE_LIMIT,
    DeviceCount,
    Scenario,
    choice,
)

#: What other modules and tests read from here: each place's keys, the words' suggestions, the service SLOs.
__all__ = ["DEPLOYMENT_KEYS", "DEVICE_KEYS", "LANGUAGE_VERSION", "MODEL_KEYS", "OBJECTIVES", "PLACEMENTS",
           "SECTION_KEYS", "SERVICE_SLOS", "check", "_meaning"]

LANGUAGE_VERSION = 1

# The words and keys of each place, from the one settings table (kvplan.catalog.settings). The checker reads
# the table at call time; these names are the table's words for the help lines and for other modules.
PLACEMENTS = settings.row("placement").choices
OBJECTIVES = settings.row("objective").choices
SERVINGS = settings.row("serving").choices
DEPLOYMENT_KEYS = settings.keys("deployment")
SECTION_KEYS: Mapping[str, tuple[str, ...]] = settings.section_keys()
MODEL_KEYS = settings.keys("model")
DEVICE_KEYS = settings.keys("device")

_W = TypeVar("_W")  # what a deployment holds: _Model or _Device
_X = TypeVar("_X")  # what the catalog holds: Model or Device


def _without_pinned_defaults(notes: list[Value], pins: Mapping[str, object], top: Mapping[str, object]
                             ) -> list[Value]:
    """A pin stands in for the deployment setting it fixes: the default it replaces is no assumption."""
    for key in ("devices", "placement"):
        if key in pins and key not in top:
            notes = [a for a in notes if not str(a.source).startswith(f"default: {key} = ")]
    return notes


def _has_rate(workload: Optional[Block]) -> bool:
    """Whether a workload block is written as requests, at a rate or from a closed loop of clients (its slo block
    may then hold itl and rate)."""
    return workload is not None and any(isinstance(i, Entry) and i.key in ("rate", "concurrency")
                                        for i in workload.items)


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


class _Checker(_Workload, _Sections, _Blocks):
    """The whole file's check: versions, names, each deployment's settings resolved and its scenarios built."""

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

    # ----------------------------------------------------------- deployments

    # one pass over the deployment's settings in the order the scenario takes them: split, it would thread them all
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
        serving = self._serving(top.get("serving"), where, spans, sections.get("workload"))

        quality = self._quality(sections.get("quality"), spans, notes)
        slo = self._slo(sections.get("slo"), spans, _has_rate(sections.get("workload")))
        calibration = self._calibration(top.get("calibration"), spans)
        pins = self._pins(sections.get("pin"), spans, devices, placement, top)
        notes = _without_pinned_defaults(notes, pins, top)
        expects = self._expects(sections.get("expect"))
        speculative = self._speculative(sections.get("speculative"), spans)
        workload = sections.get("workload")
        if workload is None:
            self._missing_workload(dep, where)
            return []
        combos = self._workload(workload, dep.name, notes)
        price = self._priced(top, spans, objective, device)
        if None in (model, device, weights, devices, placement, engine, objective, quality, slo, combos, serving) or (
                calibration is False or price is False or speculative is False):
            return []
        assert model and device and weights and devices and placement and engine and objective and serving
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
                int(values["input"] + values["output"]) if "input" in values else None,
                rate=values.get("rate"), concurrency=int(values["concurrency"]) if "concurrency" in values else None,
                input_tokens=int(values["input"]) if "input" in values else None,
                output_tokens=int(values["output"]) if "output" in values else None,
                input_min=int(values["input_lo"]) if "input_lo" in values else None,
                output_min=int(values["output_lo"]) if "output_lo" in values else None,
                price=price if isinstance(price, float) else None, serving=serving,
                speculative=speculative if not isinstance(speculative, bool) else None,
            ))
        return out

    def _serving(self, e: Optional[Entry], where: str, spans: dict[str, Span], workload: Optional[Block]
                 ) -> Optional[str]:
        """`serving = aggregated | disaggregated | auto` (docs/service.md, Disaggregated serving); aggregated when
        not written, with no assumption note, so that every plan made before the key existed is unchanged. Separate
        prefill and decode pools need requests at a rate: reported at the value otherwise."""
        if e is None:
            return SERVINGS[0]  # the row's default, aggregated, is its first choice
        spans["serving"] = e.span
        word = self._word(self._scalar(e, where), "serving", SERVINGS)
        if word is None or word == "aggregated":
            return word
        if workload is None or not any(isinstance(i, Entry) and i.key == "rate" for i in workload.items):
            closed = workload is not None and any(isinstance(i, Entry) and i.key == "concurrency"
                                                  for i in workload.items)
            form = "a closed loop (`concurrency`)" if closed else "a batch workload"
            self.report(codes.MISSING_KEY, f"serving = {word} needs a workload rate: it sizes prefill and decode "
                        f"pools for requests at a rate, and {where} declares {form}",
                        e.value.span if e.value is not None else e.span,
                        help="write the workload as `rate = 10/s  input = 4k  output = 1k`, or `serving = aggregated`"
                             " (docs/service.md, Disaggregated serving)",
                        fixes=[fx.replace(e.value.span, "aggregated", "serving = aggregated")
                               if e.value is not None else None])
            return None
        return word

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
