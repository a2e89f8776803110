"""The canonical layout of a .kvp file: `kvplan fmt` prints the syntax tree back, comments kept.

Layout: four spaces per level; `key = value` and `key <= value` with one space
around the operator, and the operators of consecutive settings in one column (as
`terraform fmt` does), their trailing comments lined up after the longest;
`name {` ... `}` with every item on its own line; exactly one blank line between
top-level declarations, and elsewhere at most one where the source had one (never
right after `{` or before `}`). Numbers keep the digits the user wrote, and a
value is printed exactly as written: `128K` stays `128K`, `50ms` stays `50ms`,
`128 k` stays `128 k`. The layout never touches a value's
text, so it can never change what a value means (a space or a case change is not
always harmless: `128K` and `128 k` read alike, but vLLM reads `128K` as 131,072).
Lists stay on one line unless a comment sits inside them, then one element per line.

Comments are all kept: a comment after code stays at the end of the line that
code lands on (two spaces before `#`), a comment on its own line stays on its
own line before what followed it, indented to its level.
"""

from __future__ import annotations

from typing import Iterator, Optional, Sequence, Union

import attrs

from kvplan.base.errors import Span
from kvplan.lang.spec import (
    Block,
    Bound,
    Call,
    Comment,
    Declaration,
    Entry,
    Ident,
    Item,
    ListValue,
    Quantity,
    SpecFile,
    String,
    ValueNode,
    Version,
)
from kvplan.lang.syntax import parse

INDENT = "    "


def format_source(text: str, path: str) -> str:
    """Text in the canonical layout; raises KvpSyntaxError (with a span) when it does not parse."""
    return _Printer(text, parse(text, path)).run()


@attrs.define
class _Line:
    depth: int
    text: str
    first: int           # the source lines this output line stands for
    last: int
    kind: str = "item"   # item | open | close | comment
    force_blank: bool = False
    key: Optional[str] = None  # set for `key = value` lines, whose `=` aligns with their neighbours


class _Printer:
    def __init__(self, text: str, spec: SpecFile) -> None:
        self.src = [ln.rstrip("\r") for ln in text.split("\n")]
        self.out: list[_Line] = []
        trailing: dict[int, Comment] = {}
        own: list[Comment] = []
        for c in spec.comments:
            before = self.src[c.span.line - 1][: c.span.column - 1]
            if not _blank(before):
                trailing[c.span.line] = c
            else:
                own.append(c)
        self.trailing = trailing
        self.own = sorted(own, key=lambda c: (c.span.line, c.span.column))
        self.spec = spec
        self._force_next = False

    # ------------------------------------------------------------------ walk

    def run(self) -> str:
        tops: list[Union[Version, Declaration]] = sorted(
            [*self.spec.versions, *self.spec.declarations], key=lambda n: (n.span.line, n.span.column))
        prev_end: Optional[int] = None
        for node in tops:
            # One blank line between top-level items: kept where the source has one, added if not.
            self._force_next = prev_end is not None and not self._blank_between(prev_end, node.span.line)
            self._comments_before(node.span.line, 0)
            if isinstance(node, Version):
                self._emit(0, f"kvplan {node.number.text}", node.span.line, node.span.end_line)
            else:
                self._block(0, f"{node.kind} {self._slice(node.name_span)}", node.items, node.span)
            prev_end = node.span.end_line
        self._comments_before(len(self.src) + 1, 0)
        return self._render()

    def _emit(self, depth: int, text: str, first: int, last: int, kind: str = "item") -> None:
        line = _Line(depth, text, first, last, kind)
        if self._force_next:
            line.force_blank, self._force_next = True, False
        self.out.append(line)

    def _comments_before(self, line: int, depth: int) -> None:
        while self.own and self.own[0].span.line < line:
            c = self.own.pop(0)
            self._emit(depth, c.text.strip(), c.span.line, c.span.line, "comment")

    def _block(self, depth: int, head: str, items: Sequence[Item], span: Span) -> None:
        # A loop over a stack of open blocks, not recursion: deep nesting must not exhaust Python's stack.
        self._emit(depth, f"{head} {{", span.line, span.line, "open")
        open_blocks: list[tuple[int, Iterator[Item], int]] = [(depth, iter(items), span.end_line)]
        while open_blocks:
            level, rest, end = open_blocks[-1]
            item = next(rest, None)
            if item is None:
                open_blocks.pop()
                self._comments_before(end, level + 1)
                self._emit(level, "}", end, end, "close")
                continue
            self._comments_before(item.span.line, level + 1)
            if isinstance(item, Block):
                self._emit(level + 1, f"{item.name} {{", item.span.line, item.span.line, "open")
                open_blocks.append((level + 1, iter(item.items), item.span.end_line))
            else:
                self._entry(level + 1, item)

    def _entry(self, depth: int, e: Entry) -> None:
        head = e.key if not e.op else f"{e.key} {e.op} "
        v = e.value
        if isinstance(v, ListValue) and v.items and self._comment_inside(v):
            self._emit(depth, f"{head}[", e.span.line, max(e.span.line, v.items[0].span.line - 1), "open")
            for x in v.items:
                self._comments_before(x.span.line, depth + 1)
                self._emit(depth + 1, f"{self._value(x)},", x.span.line, x.span.end_line)
            self._comments_before(v.span.end_line, depth + 1)
            self._emit(depth, "]", v.span.end_line, v.span.end_line, "close")
            return
        self._emit(depth, head + (self._value(v) if v is not None else ""), e.span.line, e.span.end_line)
        if e.op and v is not None:
            self.out[-1].key = e.key

    def _comment_inside(self, v: ListValue) -> bool:
        """A comment on a line of the list other than its last: the list cannot stay on one line."""
        lines = range(v.span.line, v.span.end_line)
        return any(n in self.trailing for n in lines) or any(v.span.line < c.span.line < v.span.end_line
                                                             for c in self.own)

    # ---------------------------------------------------------------- values

    def _slice(self, s: Span) -> str:
        return self.src[s.line - 1][s.column - 1: s.end_column - 1]

    def _value(self, v: ValueNode) -> str:
        if isinstance(v, Quantity):
            return quantity(v)
        if isinstance(v, Ident):
            return v.name
        if isinstance(v, String):
            return self._slice(v.span)
        if isinstance(v, ListValue):
            return "[" + ", ".join(self._value(x) for x in v.items) + "]"
        if isinstance(v, Bound):
            return f"{v.op} {quantity(v.limit)}"
        if isinstance(v, Call):
            return f"{v.name}(" + ", ".join(self._value(x) for x in v.args) + ")"
        raise TypeError(f"cannot print {v!r}")  # pragma: no cover - the tree has no other values

    # ---------------------------------------------------------------- render

    def _blank_between(self, after: int, before: int) -> bool:
        """Whether a blank source line lies strictly between two lines (1-based)."""
        return any(_blank(self.src[n - 1]) for n in range(after + 1, min(before, len(self.src) + 1)))

    def _render(self) -> str:
        # Each trailing comment goes to the last output line that stands for its source line.
        owner: dict[int, int] = {}
        for i, ln in enumerate(self.out):
            for n in range(ln.first, ln.last + 1):
                owner[n] = i
        tails: dict[int, str] = {}
        for n, c in self.trailing.items():
            if n not in owner:  # pragma: no cover - code precedes every trailing comment
                raise AssertionError(f"comment on line {n} lost")
            tails[owner[n]] = c.text.strip()
        blanks = [False] + [self._blank_before(i) for i in range(1, len(self.out))]
        bodies = self._aligned(blanks)
        # trailing comments line up within a run of `key = value` lines, two spaces past the longest
        comment_col: dict[int, int] = {}
        for run in self._runs(blanks):
            width = max(len(bodies[i]) for i in run) + 2
            for i in run:
                comment_col[i] = width
        text = []
        for i, body in enumerate(bodies):
            if blanks[i]:
                text.append("")
            if i in tails:
                body = body.ljust(comment_col.get(i, len(body) + 2)) + tails[i]
            text.append(body)
        return "\n".join(text) + "\n" if text else ""

    def _blank_before(self, i: int) -> bool:
        ln, prev = self.out[i], self.out[i - 1]
        if prev.kind == "open" or ln.kind == "close":
            return False
        return ln.force_blank or self._blank_between(prev.last, ln.first)

    def _runs(self, blanks: list[bool]) -> list[list[int]]:
        """Runs of consecutive `key = value` lines at one depth, not broken by a blank line."""
        runs: list[list[int]] = []
        for i, ln in enumerate(self.out):
            if ln.key is None:
                continue
            prev = runs[-1][-1] if runs else None
            if prev is not None and prev == i - 1 and not blanks[i] and self.out[prev].depth == ln.depth:
                runs[-1].append(i)
            else:
                runs.append([i])
        return runs

    def _aligned(self, blanks: list[bool]) -> list[str]:
        """Every output line's text, with the `=` of each run of settings in one column."""
        bodies = [INDENT * ln.depth + ln.text for ln in self.out]
        for run in self._runs(blanks):
            width = max(len(self.out[i].key or "") for i in run)
            for i in run:
                ln = self.out[i]
                key = ln.key or ""
                bodies[i] = INDENT * ln.depth + key.ljust(width) + ln.text[len(key):]  # " = v", " <= v"
        return bodies


def _blank(text: str) -> bool:
    """Only what the grammar skips as space (WS): a byte-order mark counts, though str.strip keeps it."""
    return not text.replace("\ufeff", "").strip()


def quantity(q: Quantity) -> str:
    """A quantity exactly as the source wrote it: digits, unit and the space between them."""
    return q.text.strip()
