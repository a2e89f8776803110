"""The typed syntax tree of a .kvp file: what was written, where, before any meaning is checked.

Every node carries a Span (kvplan.base.errors.Span): lines and columns count from
1, columns in Unicode characters, and `end_column` is the column just past
the node's last character. Items keep their source order and unknown keys and
blocks are kept, so a formatter can print the file back without losing
anything but layout.
"""

from __future__ import annotations

from typing import Optional, TypeVar, Union

from kvplan.base.errors import Span
from kvplan.base.records import record

# ------------------------------------------------------------------ values


@record
class Quantity:
    """A number with an optional unit: `128k`, `4.8 TB/s`, `60%`. `text` is the source as written."""

    number: float
    unit: str
    text: str
    span: Span

    @property
    def unit_span(self) -> Span:
        """Where the unit stands (the number's span when there is no unit)."""
        s = self.span
        if not self.unit:
            return s
        return Span(s.file, s.end_line, s.end_column - len(self.unit), s.end_line, s.end_column)


@record
class Ident:
    """A bare identifier: `llama-3-70b`, `near-lossless`, `on`."""

    name: str
    span: Span


@record
class String:
    """A double-quoted string; `value` has its escapes resolved."""

    value: str
    span: Span


def quote(text: str) -> str:
    """`text` as a .kvp string literal: in double quotes, `\\` and `"` escaped (the parser reads it back as `text`)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


Scalar = Union[Quantity, Ident, String]


@record
class ListValue:
    """`[1, 8, 32]`: in `workload`, one scenario per element."""

    items: tuple[Scalar, ...]
    span: Span


@record
class Bound:
    """An upper (or lower) bound as a value: the `<= 8` of `devices = <= 8`."""

    op: str
    limit: Quantity
    span: Span


@record
class Call:
    """A distribution as a value: `uniform(2k, 6k)` (the name and its arguments as written)."""

    name: str
    args: tuple[Scalar, ...]
    span: Span
    name_span: Span


ValueNode = Union[Quantity, Ident, String, ListValue, Bound, Call]


# ------------------------------------------------------------------- items


@record
class Entry:
    """One line of a block: `key = value`, `key OP value` (slo, expect) or a bare `key` (`fits`).

    `op` is "=" for an assignment, the comparison for a constraint, "" for a bare key.
    """

    key: str
    op: str
    value: Optional[ValueNode]
    span: Span
    key_span: Span


@record
class Block:
    """A nested `name { ... }` block. Known names get the subclasses below."""

    name: str
    items: tuple[Union[Entry, "Block"], ...]
    span: Span
    name_span: Span

    @property
    def entries(self) -> tuple[Entry, ...]:
        return tuple(i for i in self.items if isinstance(i, Entry))

    @property
    def blocks(self) -> tuple["Block", ...]:
        return tuple(i for i in self.items if isinstance(i, Block))


@record
class WorkloadDecl(Block):
    """`workload { batch = ..., context = ... }`."""


@record
class QualityDecl(Block):
    """`quality { budget = ..., eviction = ..., min_retention = ... }`."""


@record
class SloDecl(Block):
    """`slo { step_time <= ..., throughput >= ... }`."""


@record
class PinDecl(Block):
    """`pin { kv_dtype = fp8, ... }`: choices already made."""


@record
class SpeculativeDecl(Block):
    """`speculative { method = eagle3, draft_tokens = auto, acceptance = 0.7 }`: speculative decoding."""


@record
class ExpectDecl(Block):
    """`expect { regime == kv-bound, fits, ... }`: assertions on the plan."""


#: The nested blocks a deployment may hold, by name.
SECTIONS: dict[str, type[Block]] = {
    "workload": WorkloadDecl, "quality": QualityDecl, "slo": SloDecl, "pin": PinDecl,
    "speculative": SpeculativeDecl, "expect": ExpectDecl,
}

Item = Union[Entry, Block]
_B = TypeVar("_B", bound=Block)


# ----------------------------------------------------------- declarations


@record
class Declaration:
    """A top-level `KIND "name" { ... }`."""

    name: str
    name_span: Span
    items: tuple[Item, ...]
    span: Span

    kind = "declaration"

    @property
    def entries(self) -> tuple[Entry, ...]:
        return tuple(i for i in self.items if isinstance(i, Entry))

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(i for i in self.items if isinstance(i, Block))

    def _section(self, cls: type[_B]) -> Optional[_B]:
        for b in self.blocks:
            if isinstance(b, cls):
                return b
        return None


@record
class DeploymentDecl(Declaration):
    """`deployment "name" { ... }`: what to plan. Sections: the first block of each name."""

    kind = "deployment"

    @property
    def workload(self) -> Optional[WorkloadDecl]:
        return self._section(WorkloadDecl)

    @property
    def quality(self) -> Optional[QualityDecl]:
        return self._section(QualityDecl)

    @property
    def slo(self) -> Optional[SloDecl]:
        return self._section(SloDecl)

    @property
    def pin(self) -> Optional[PinDecl]:
        return self._section(PinDecl)

    @property
    def expect(self) -> Optional[ExpectDecl]:
        return self._section(ExpectDecl)


@record
class ModelDecl(Declaration):
    """`model "name" { config = "path" ... }`: a model beside the catalog."""

    kind = "model"


@record
class DeviceDecl(Declaration):
    """`device "name" { memory = ..., bandwidth = ..., compute = ... }`: a device beside the catalog."""

    kind = "device"


@record
class Version:
    """The `kvplan 1` line."""

    number: Quantity
    span: Span


@record
class Comment:
    """A `# ...` comment; `text` starts with `#`. Kept for the formatter."""

    text: str
    span: Span


@record
class SpecFile:
    """A parsed .kvp file: version lines and declarations in source order, and its comments."""

    path: str
    versions: tuple[Version, ...]
    declarations: tuple[Declaration, ...]
    comments: tuple[Comment, ...]
    span: Span

    @property
    def version(self) -> Optional[Version]:
        return self.versions[0] if self.versions else None

    @property
    def deployments(self) -> tuple[DeploymentDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, DeploymentDecl))

    @property
    def models(self) -> tuple[ModelDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, ModelDecl))

    @property
    def devices(self) -> tuple[DeviceDecl, ...]:
        return tuple(d for d in self.declarations if isinstance(d, DeviceDecl))
