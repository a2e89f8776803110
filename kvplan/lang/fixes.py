"""Suggestions as edits: build the `Fix` a diagnostic carries, and apply fixes to spec text.

A suggestion that names a concrete change (`did you mean`, `write ...`, `add ...`, the
planner's "smallest change that fits") carries it as a `Fix`: the human text and the
edits to the file. Edits address the file by `Span` (lines and columns from 1, columns
in characters, end exclusive), so applying one needs only the text:

    apply(source, fix.edits) -> the edited text

The builders here take the syntax tree (`kvplan.lang.spec`) to find where a setting is
or where it would go; they never guess at text they have not parsed.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from kvplan.diagnostics import Edit, Fix
from kvplan.errors import Span
from kvplan.lang.spec import Block, Declaration, DeploymentDecl, Entry, SpecFile

Container = Union[Block, Declaration]


def offset(source: str, line: int, column: int) -> int:
    """The character offset of (line, column), both from 1; past the end clamps to the end."""
    pos = 0
    for _ in range(line - 1):
        nl = source.find("\n", pos)
        if nl < 0:
            return len(source)
        pos = nl + 1
    end = source.find("\n", pos)
    end = len(source) if end < 0 else end
    return min(pos + column - 1, end)


def apply(source: str, edits: Sequence[Edit]) -> str:
    """The text with every edit made; edits may not overlap (ValueError if they do)."""
    spans = sorted(((offset(source, e.span.line, e.span.column), offset(source, e.span.end_line, e.span.end_column),
                     e.text) for e in edits), reverse=True)
    out = source
    last = len(source) + 1
    for start, end, text in spans:
        if end > last:
            raise ValueError("overlapping edits")
        out = out[:start] + text + out[end:]
        last = start
    return out


def replace(span: Span, text: str, title: Optional[str] = None) -> Fix:
    """Replace what `span` covers with `text`."""
    return Fix(title or f"write `{text}`", (Edit(span, text),))


def deployment(spec: Optional[SpecFile], name: str) -> Optional[DeploymentDecl]:
    """The first deployment of that name (the one the checker read)."""
    if spec is None:
        return None
    return next((d for d in spec.deployments if d.name == name), None)


def _lines(source: str) -> list[str]:
    return source.split("\n")


def _indent_of(source: str, line: int) -> str:
    text = _lines(source)[line - 1] if 0 < line <= len(_lines(source)) else ""
    return text[:len(text) - len(text.lstrip(" \t"))]


def _item_indent(source: str, where: Container) -> str:
    for item in where.items:
        if item.span.line != where.span.line:
            return _indent_of(source, item.span.line)
    return _indent_of(source, where.span.line) + "    "


def _block(where: Container, name: str) -> Optional[Block]:
    return next((b for b in where.blocks if b.name == name), None)


def _entry(where: Container, key: str) -> Optional[Entry]:
    return next((e for e in where.entries if e.key == key), None)


def _insert_item(source: str, where: Container, lines: Sequence[str]) -> Edit:
    """Insert lines (already relative to the item indent) as the last items of a block."""
    s = where.span
    close = Span(s.file, s.end_line, s.end_column - 1, s.end_line, s.end_column - 1)
    indent = _item_indent(source, where)
    body = "".join(indent + ln + "\n" for ln in lines)
    before = _lines(source)[s.end_line - 1][:s.end_column - 2] if s.end_line <= len(_lines(source)) else ""
    if not before.strip():  # the `}` stands alone on its line: insert whole lines above it
        return Edit(Span(s.file, s.end_line, 1, s.end_line, 1), body)
    return Edit(close, "\n" + body + _indent_of(source, s.line))


def set_setting(source: str, dep: Optional[Container], path: str, value: str, op: str = "=",
                title: Optional[str] = None) -> Optional[Fix]:
    """Set `path` (`devices`, `quality.budget`, `expect.regime`, ...) of a deployment to `value`:
    rewrite the entry where it is, else add it to its block, else add the block."""
    if dep is None:
        return None
    section, _, key = path.rpartition(".")
    text = f"{key} {op} {value}" if op else key
    title = title or (f"{section} {{ {text} }}" if section else text)
    where: Container = dep
    if section:
        block = _block(dep, section)
        if block is None:
            return Fix(title, (_insert_item(source, dep, (f"{section} {{", f"    {text}", "}")),))
        where = block
    entry = _entry(where, key)
    if entry is not None:
        return Fix(title, (Edit(entry.span, text),))
    return Fix(title, (_insert_item(source, where, (text,)),))


def add_block(source: str, dep: Optional[Container], name: str, lines: Sequence[str]) -> Optional[Fix]:
    """Add `name { ... }` with these settings, one per line, as the last item of a declaration."""
    if dep is None:
        return None
    body = (f"{name} {{", *(f"    {ln}" for ln in lines), "}")
    return Fix(f"add a {name} block", (_insert_item(source, dep, body),))


def remove_entry(source: str, entry: Entry, title: Optional[str] = None) -> Optional[Fix]:
    """Delete the line that holds `entry`; None when something else shares its line."""
    s = entry.span
    lines = _lines(source)
    if s.line > len(lines):
        return None
    line = lines[s.line - 1]
    rest = line[s.end_column - 1:].strip() if s.end_line == s.line else "?"
    if line[:s.column - 1].strip() or (rest and not rest.startswith("#")):
        return None
    return Fix(title or f"remove `{entry.key}`", (Edit(Span(s.file, s.line, 1, s.line + 1, 1), ""),))


def remove_setting(source: str, dep: Optional[Container], path: str, title: Optional[str] = None
                   ) -> Optional[Fix]:
    """Delete the line that holds `path` (`pin.kv_dtype`); None when it shares its line."""
    if dep is None:
        return None
    section, _, key = path.rpartition(".")
    where: Optional[Container] = _block(dep, section) if section else dep
    entry = _entry(where, key) if where is not None else None
    if entry is None:
        return None
    return remove_entry(source, entry, title or f"remove `{path}`")
