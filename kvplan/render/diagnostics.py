"""Diagnostic renderers: concise, full, json, github and sarif text from checked files.

Every renderer takes the checked files (anything with `path`, `source` and
`diagnostics`, such as a `CheckResult` or a lint `FileReport`) and returns text
that ends with a newline, or "" when there is nothing to say. Output is sorted by
path, line, column and code, and holds no timestamps or absolute paths of its own.

Spans count lines and columns from 1, columns in Unicode characters, and end
one past the last character (the lark convention, and SARIF's `endColumn`).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Callable, Iterator, Optional, Protocol, Sequence
from urllib.parse import quote

from kvplan import __version__
from kvplan.base import controls
from kvplan.base.codes import CODES, Code, Severity
from kvplan.base.diagnostics import Diagnostic
from kvplan.base.errors import Span
from kvplan.render.common import dump_json

FORMATS = ("concise", "full", "json", "github", "sarif")

# Where the rule pages live once published; SARIF needs absolute URIs here.
PROJECT_URL = "https://github.com/kvplan/kvplan"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


class CheckedFile(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def diagnostics(self) -> Sequence[Diagnostic]: ...


def docs_path(code: str) -> str:
    """The rule page of a code, relative to the repository root."""
    return f"docs/rules/{code}.md"


def render(fmt: str, files: Sequence[CheckedFile]) -> str:
    """Render in one of FORMATS."""
    renderers: dict[str, Callable[[Sequence[CheckedFile]], str]] = {
        "concise": concise, "full": full, "json": to_json, "github": github, "sarif": sarif,
    }
    try:
        return renderers[fmt](files)
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}") from None


# --------------------------------------------------------------------------- shared

class _Item:
    """One diagnostic with the file it was found in; the unit every renderer walks."""

    __slots__ = ("path", "lines", "diag")

    def __init__(self, path: str, lines: Optional[list[str]], diag: Diagnostic) -> None:
        self.path = path
        self.lines = lines      # the source's lines when the span points into it
        self.diag = diag

    @property
    def span(self) -> Optional[Span]:
        return self.diag.span

    def key(self) -> tuple[str, int, int, str, str]:
        s = self.span
        return (self.path, s.line if s else 0, s.column if s else 0, self.diag.code, self.diag.message)

    def line_text(self) -> Optional[str]:
        """The source line the span starts on, without its line ending."""
        s = self.span
        if s is None or self.lines is None or s.line < 1:
            return None
        return self.lines[s.line - 1] if s.line <= len(self.lines) else ""


def _items(files: Sequence[CheckedFile]) -> list[_Item]:
    out: list[_Item] = []
    for f in files:
        # No source (unreadable, not UTF-8): no snippet rather than a misleading empty line.
        lines = [ln.rstrip("\r") for ln in f.source.split("\n")] if f.diagnostics and f.source else None
        for d in f.diagnostics:
            own = d.span is None or d.span.file == f.path
            out.append(_Item(f.path if own else d.span.file, lines if own else None, d))  # type: ignore[union-attr]
    out.sort(key=_Item.key)
    return out


def _one_line(text: str) -> str:
    return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text


def _where(it: _Item) -> str:
    s = it.span
    return f"{it.path}:{s.line}:{s.column}" if s else it.path


def _namer() -> Callable[[str], str]:
    """code -> kebab-case rule name, from the code table."""
    rules = CODES
    return lambda code: rules[code].name if code in rules else code


def _highlight(line: str, span: Span) -> tuple[int, int]:
    """0-based character offsets [start, end) of the span within its first line."""
    start = min(max(span.column - 1, 0), len(line))
    end = span.end_column - 1 if span.end_line == span.line else len(line)
    end = min(max(end, start), len(line))
    return start, end


def _width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _underline(line: str, span: Span) -> str:
    """Spaces (tabs kept, wide characters doubled) up to the span, then ^~~~ under it."""
    start, end = _highlight(line, span)
    pad = "".join("\t" if c == "\t" else " " * _width(c) for c in line[:start])
    width = sum(max(_width(c), 1) for c in line[start:end])
    return pad + "^" + "~" * max(width - 1, 0)


# --------------------------------------------------------------------------- concise

def concise(files: Sequence[CheckedFile]) -> str:
    """`path:line:col: CODE message`, one per line (ruff's concise format)."""
    return "".join(f"{_where(it)}: {it.diag.code} {_one_line(it.diag.message)}\n" for it in _items(files))


def inline(files: Sequence[CheckedFile], floor: Severity = Severity.WARNING) -> str:
    """`path:line:col: CODE message (help: ...)`, one per line, for the diagnostics at `floor` or above: the concise
    format with the fix lint's full format says, for what advise and emit print on stderr beside their output."""
    return "".join(f"{_where(it)}: {it.diag.code} {_one_line(it.diag.message)}"
                   + (f" (help: {_one_line(it.diag.help)})" if it.diag.help else "") + "\n"
                   for it in _items(files) if it.diag.severity.rank >= floor.rank)


# --------------------------------------------------------------------------- full

def full(files: Sequence[CheckedFile]) -> str:
    """A header, the source line with the span underlined, the help and the rule page."""
    blocks = []
    for it in _items(files):
        d = it.diag
        out = [f"{_where(it)}: {d.code} [{d.severity.value}] {d.message}"]
        text, s = it.line_text(), it.span
        if text is not None and s is not None:
            text = controls.visible(text)  # a carriage return or an override in the line would rewrite it on screen
            gutter = " " * len(str(s.line))
            out += [f"{gutter} |", f"{s.line} | {text}".rstrip(" "), f"{gutter} | {_underline(text, s)}"]
            tail_prefix = f"{gutter} = "
        else:
            tail_prefix = "  = "
        if d.help:
            lead = f"{tail_prefix}help: "
            out.append(lead + ("\n" + " " * len(lead)).join(d.help.splitlines()))
        out.append(f"{tail_prefix}see: {docs_path(d.code)}")
        blocks.append("\n".join(out) + "\n")
    return "\n".join(blocks)


# --------------------------------------------------------------------------- json

def _counts(items: Sequence[_Item]) -> dict[str, int]:
    counts = {s: 0 for s in Severity}
    for it in items:
        counts[it.diag.severity] += 1
    return {"errors": counts[Severity.ERROR], "warnings": counts[Severity.WARNING],
            "infos": counts[Severity.INFO]}


def to_json(files: Sequence[CheckedFile]) -> str:
    """A versioned document (Terraform `validate -json` style): summary, then diagnostics."""
    items, name = _items(files), _namer()
    by_code: dict[str, int] = {}
    for it in items:
        by_code[it.diag.code] = by_code.get(it.diag.code, 0) + 1
    diagnostics = []
    for it in items:
        d, s = it.diag, it.span
        rng = snippet = None
        if s is not None:
            rng = {"start": {"line": s.line, "column": s.column},
                   "end": {"line": s.end_line, "column": s.end_column}}
            text = it.line_text()
            if text is not None:
                a, b = _highlight(text, s)
                snippet = {"start_line": s.line, "code": text,
                           "highlight_start_offset": a, "highlight_end_offset": b}
        diagnostics.append({
            "code": d.code, "name": name(d.code), "severity": d.severity.value,
            "message": d.message, "help": d.help, "path": it.path, "range": rng,
            "snippet": snippet, "docs": docs_path(d.code),
            "fixes": [{"title": f.title, "edits": [
                {"range": {"start": {"line": e.span.line, "column": e.span.column},
                           "end": {"line": e.span.end_line, "column": e.span.end_column}}, "text": e.text}
                for e in f.edits]} for f in d.fixes],
        })
    summary = {"files": len(files), **_counts(items), "by_code": dict(sorted(by_code.items()))}
    return dump_json({"summary": summary, "diagnostics": diagnostics})


# --------------------------------------------------------------------------- github

_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github(files: Sequence[CheckedFile]) -> str:
    """GitHub Actions workflow commands: one annotation per diagnostic."""
    lines, name = [], _namer()
    for it in _items(files):
        d, s = it.diag, it.span
        props = [f"file={_gh_prop(it.path)}"]
        if s is not None:
            props += [f"line={s.line}", f"col={s.column}", f"endLine={s.end_line}", f"endColumn={s.end_column}"]
        props.append(f"title={_gh_prop(f'{d.code} {name(d.code)}')}")
        message = d.message + (f"\nhelp: {d.help}" if d.help else "")
        lines.append(f"::{_GITHUB_LEVEL[d.severity]} {','.join(props)}::{_gh_data(message)}\n")
    return "".join(lines)


# --------------------------------------------------------------------------- sarif

_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _uri(path: str) -> str:
    """A relative URI with forward slashes; GitHub resolves it against the repository root."""

    p = path.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return quote(p, safe="/")


def _fingerprints(items: Sequence[_Item]) -> Iterator[str]:
    """`hash:n` per item: code, path and the stripped source line; n tells repeats apart.

    Line numbers stay out so that an edit above a finding does not make it new.
    """

    seen: dict[str, int] = {}
    for it in items:
        h = hashlib.sha256()
        for part in (it.diag.code, _uri(it.path), (it.line_text() or it.diag.message).strip()):
            h.update(part.encode("utf-8"))
            h.update(b"\x00")
        digest = h.hexdigest()[:16]
        seen[digest] = seen.get(digest, 0) + 1
        yield f"{digest}:{seen[digest]}"


def _sarif_rule(rule: Code) -> dict[str, object]:
    page = docs_path(rule.code)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": f"{rule.title} ({rule.code} {rule.name}; see {page})"},
        "help": {"text": f"See {page} for what {rule.code} means and how to fix it.",
                 "markdown": f"See [{page}]({PROJECT_URL}/blob/main/{page})."},
        "helpUri": f"{PROJECT_URL}/blob/main/{page}",
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {"problem.severity": rule.severity.value if rule.severity != Severity.INFO
                       else "recommendation"},
    }


def sarif(files: Sequence[CheckedFile]) -> str:
    """SARIF 2.1.0 with what GitHub code scanning requires (rules, regions, fingerprints)."""
    rules = list(CODES.values())
    index = {r.code: i for i, r in enumerate(rules)}
    items = _items(files)
    results = []
    for it, fingerprint in zip(items, _fingerprints(items)):
        d, s = it.diag, it.span
        if s is not None:
            region = {"startLine": s.line, "startColumn": s.column,
                      "endLine": s.end_line, "endColumn": s.end_column}
        else:  # a finding about the whole file: GitHub still wants a region
            region = {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1}
        result: dict[str, object] = {"ruleId": d.code}
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        result.update({
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": d.message + (f"\nhelp: {d.help}" if d.help else "")},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(it.path)},
                                                "region": region}}],
            "partialFingerprints": {"primaryLocationLineHash": fingerprint},
        })
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kvplan",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": PROJECT_URL,
                "rules": [_sarif_rule(r) for r in rules],
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
