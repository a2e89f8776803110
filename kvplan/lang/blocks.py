"""A file's own model and device blocks, and the paths a spec names (a model's config, a calibration profile)."""

from __future__ import annotations

import math
import os
from typing import Mapping, Optional, Union

import attrs

from kvplan import catalog
from kvplan.base import codes, files, limits
from kvplan.base.errors import KvplanError, Span
from kvplan.base.evidence import Value, assumed
from kvplan.base.units import Dim
from kvplan.catalog import Device, Model, hub, settings
from kvplan.lang import checkpoint as ck
from kvplan.lang import fixes as fx
from kvplan.lang.spec import (
    DeviceDecl,
    Entry,
    Ident,
    ModelDecl,
    Quantity,
    Scalar,
    String,
    quote,
)
from kvplan.lang.values import _LIMIT, _Device, _Model, _Values
from kvplan.lang.words import (
    _source_text,
)
from kvplan.model.profile import Profile, load_profile

#: The keys of a device block that name a catalog link (an id or its bandwidth, _link).
_LINK_KEYS = ("link", "host_link", "scaleout_link")


class _Blocks(_Values):
    """The checks of `model "NAME" { ... }` and `device "NAME" { ... }` blocks and of the files they name."""

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
            node = self._scalar(e, where) if e is not None and row.key not in _LINK_KEYS else None
            value = self._quantity(node, row) if node is not None else None
            if value is not None:
                got[row.key] = value
        for key in ("memory", "bandwidth", "compute"):
            if key not in entries:
                example = settings.row(f"device.{key}").example
                self.report(codes.MISSING_KEY, f"{where} has no {key}", decl.name_span, help=f"add `{key} = {example}`",
                            fixes=[fx.set_setting(self.spec_source, decl, key, example)])
        ints = {key: int(got[key]) for key in ("partitions", "sm_count", "node", "host") if key in got}
        notes: list[Value] = []
        partitions = settings.row("device.partitions").default
        if "partitions" not in entries and partitions is not None:
            notes.append(assumed(int(partitions.value), "1",
                                 f"{where}: partitions = {partitions.value} (default: {partitions.source})"))
        links = {key: self._link(entries.get(key), key, where, notes) for key in _LINK_KEYS}
        self._node_pair(decl, entries, where)
        self._host_fits(entries, ints.get("host"), ints.get("node"), where)
        if self._errors() > before:
            return None
        device = Device(
            id=decl.name, name=decl.name, memory=got["memory"], bandwidth=got["bandwidth"], compute=got["compute"],
            compute_fp8=got.get("compute_fp8"), compute_fp4=got.get("compute_fp4"),
            partitions=ints.get("partitions", 1), fabric=got.get("fabric"),
            sm_count=ints.get("sm_count"), host_link=links["host_link"], scaleup_link=links["link"],
            source=f"{where} in {os.path.basename(self.spec.path)}", confidence="U",
            note="described by the user in a .kvp device block",
            node=ints.get("node"), scaleout_link=links["scaleout_link"], host=ints.get("host"),
        )
        return _Device(device, tuple(notes))

    def _node_pair(self, decl: DeviceDecl, entries: Mapping[str, Entry], where: str) -> None:
        """`node` and `scaleout_link` come together (SPEC §12): a node without its way out would charge a group
        across nodes nothing for the crossing, a way out without a node size never applies."""
        for key, other in (("node", "scaleout_link"), ("scaleout_link", "node")):
            if key in entries and other not in entries:
                example = settings.row(f"device.{other}").example
                self.report(codes.MISSING_KEY, f"{where} has {key} but no {other}: a group across nodes needs both",
                            entries[key].span, help=f"add `{other} = {example}`",
                            fixes=[fx.set_setting(self.spec_source, decl, other, example)])

    def _host_fits(self, entries: Mapping[str, Entry], host: Optional[int], node: Optional[int], where: str) -> None:
        """A host holds a whole scale-up domain or a whole fraction of one (the catalog's rule, kvplan.catalog)."""
        if host is not None and node is not None and node % host and host % node:
            self.report(codes.OUT_OF_RANGE, f"{where}: host = {host} and node = {node}, and neither divides the other",
                        entries["host"].span, help="a host holds a whole node or a whole fraction of one (an NVL72 "
                                                   "rack of 72 is 18 hosts of 4)")

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
