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

import re
from typing import Callable, Optional, Sequence, Union

from kvplan.base.diagnostics import Edit, Fix
from kvplan.base.errors import Span
from kvplan.base.records import record
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


# ---------------------------------------------------------------- syntax errors

#: Characters that look like the .kvp syntax but are not ASCII (as the syntax explainer knows them).
LOOKALIKES = {"“": '"', "”": '"', "≤": "<=", "≥": ">=", "＝": "=", "–": "-", "—": "-", "×": "x", "：": ":"}


def _at(span: Span, line: int, column: int) -> Span:
    return Span(span.file, line, column, line, column)


def _pos(source: str, off: int) -> tuple[int, int]:
    """(line, column) of a character offset."""
    before = source[:off]
    line = before.count("\n") + 1
    return line, off - (before.rfind("\n") + 1) + 1


@record
class _Site:
    """Where a syntax error points: its span and help, the file's text, and the span's offsets in it."""

    span: Span
    help: str
    source: str
    start: int
    end: int

    @property
    def here(self) -> str:
        return self.source[self.start:self.end]


def syntax_fix(code: str, span: Span, help: str, source: str) -> Optional[Fix]:
    """The edit a syntax error's help describes, where it names one (the explainer in
    kvplan.lang.syntax words the help; this reads the same situation from the text)."""

    if not source or code not in _SYNTAX_FIXES:
        return None
    site = _Site(span, help, source, offset(source, span.line, span.column),
                 offset(source, span.end_line, span.end_column))
    return _SYNTAX_FIXES[code](site)


def _missing_equals(s: _Site) -> Optional[Fix]:  # KV006
    if s.here == ":":
        return replace(s.span, " =", s.help)
    if re.fullmatch(r"write `(.+?) = (.+?)`", s.help):
        return Fix(s.help, (Edit(_at(s.span, s.span.line, s.span.column), "= "),))
    return None


def _missing_comma(s: _Site) -> Optional[Fix]:  # KV007
    back = s.start
    while back > 0 and s.source[back - 1] in " \t":
        back -= 1
    line, col = _pos(s.source, back)
    return Fix("add `,` between the elements", (Edit(_at(s.span, line, col), ","),))


def _syntax_error(s: _Site) -> Optional[Fix]:  # KV003: a look-alike character, or `{` on the next line
    span, source = s.span, s.source
    if s.here in LOOKALIKES:
        edits = tuple(Edit(Span(span.file, *_pos(source, i), *_pos(source, i + 1)), LOOKALIKES[ch])
                      for i, ch in enumerate(source) if ch in LOOKALIKES)
        return Fix("write plain ASCII", edits)
    if s.help.startswith("open the block on the line of its name"):
        brace = source.find("{", s.start)
        if brace < 0 or source[s.start:brace].strip():
            return None
        return Fix("open the block on the line of its name",
                   (Edit(Span(span.file, span.line, span.column, *_pos(source, brace + 1)), " {"),))
    return None


def _unclosed_block(s: _Site) -> Optional[Fix]:  # KV004
    span, source, help = s.span, s.source, s.help
    close = "]" if s.here == "[" else "}"
    m2 = re.fullmatch(r"add `[}\]]` before `(\w+)`", help)
    if m2:  # at the start of the line where the next declaration begins
        nxt = re.compile(rf"^[ \t]*{re.escape(m2.group(1))}\b", re.M).search(source, s.end)
        if nxt is None:
            return None
        line, _ = _pos(source, nxt.start())
        return Fix(help, (Edit(_at(span, line, 1), close + "\n"),))
    if close == "]":  # after the last element: the end of the `[`'s line, before any comment
        eol = source.find("\n", s.start)
        eol = len(source) if eol < 0 else eol
        text = source[s.start:eol]
        cut = text.find("#")
        stop = s.start + len((text if cut < 0 else text[:cut]).rstrip())
        return Fix(help, (Edit(_at(span, *_pos(source, stop)), "]"),))
    tail = "" if source.endswith("\n") else "\n"
    return Fix(help, (Edit(_at(span, *_pos(source, len(source))), tail + "}\n"),))


def _unclosed_string(s: _Site) -> Optional[Fix]:  # KV005
    return Fix("close the string", (Edit(_at(s.span, s.span.end_line, s.span.end_column), '"'),))


def _missing_value(s: _Site) -> Optional[Fix]:  # KV009
    # `batch =` with the value on the next line: join them
    span, source, start, end = s.span, s.source, s.start, s.end
    eol = source.find("\n", end)
    if eol < 0:
        return None
    line_end = source.find("\n", eol + 1)
    line_end = len(source) if line_end < 0 else line_end
    value = source[eol + 1:line_end].strip()
    line_start = source.rfind("\n", 0, start) + 1
    km = re.search(r"(\w+)\s*=?\s*$", source[line_start:end])
    key = km.group(1) if km else ""
    example = re.search(r"e\.g\. `(\w+) = ([^`]+)`", s.help)
    if not re.fullmatch(r"[0-9][0-9.]*\s*[A-Za-z%/]*", value):
        if example and example.group(1) == key:  # no value anywhere: the example's
            return Fix(f"{key} = {example.group(2)}",
                       (Edit(_at(span, *_pos(source, end)), f" {example.group(2)}"),))
        return None
    return Fix(f"write the value on the same line: `{key} = {value}`",
               (Edit(Span(span.file, *_pos(source, end), *_pos(source, line_end)), f" {value}"),))


def _one_setting_per_line(s: _Site) -> Optional[Fix]:  # KV010
    span, source, start = s.span, s.source, s.start
    line_start = source.rfind("\n", 0, start) + 1
    indent = source[line_start:start][:len(source[line_start:start]) - len(source[line_start:start].lstrip())]
    back = start
    while back > line_start and source[back - 1] in " \t":
        back -= 1
    return Fix("one setting per line", (Edit(Span(span.file, *_pos(source, back), span.line, span.column),
                                             "\n" + indent),))


def _unquoted_name(s: _Site) -> Optional[Fix]:  # KV011
    if re.fullmatch(r"[\w.-]+", s.here):
        return replace(s.span, f'"{s.here}"', f'write `"{s.here}"`')
    return None


def _unknown_declaration(s: _Site) -> Optional[Fix]:  # KV012
    m3 = re.fullmatch(r"did you mean `(\w+)`\?", s.help)
    return replace(s.span, m3.group(1)) if m3 else None


def _unmatched_brace(s: _Site) -> Optional[Fix]:  # KV013
    return Fix("remove the `}`", (Edit(s.span, ""),)) if s.here == "}" else None


#: The fix for each syntax error code whose help can name one, as syntax.explain words it.
_SYNTAX_FIXES: dict[str, Callable[[_Site], Optional[Fix]]] = {
    "KV003": _syntax_error, "KV004": _unclosed_block, "KV005": _unclosed_string, "KV006": _missing_equals,
    "KV007": _missing_comma, "KV009": _missing_value, "KV010": _one_setting_per_line, "KV011": _unquoted_name,
    "KV012": _unknown_declaration, "KV013": _unmatched_brace,
}
