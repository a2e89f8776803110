"""The .kvp language front end: text → syntax tree → checked scenarios, with every problem as a Diagnostic.

    check_file(path)          read and check a file; never raises for bad input
    check_source(text, path)  the same for text in hand
    parse(text, path)         the syntax tree only; raises KvplanError on the first syntax error

Stages: kvplan.lang.syntax (grammar, parser, syntax errors), kvplan.lang.spec
(the typed tree), kvplan.lang.check (meaning, defaults, expansion),
kvplan.lang.scenario (what the planner consumes), kvplan.lang.codes (KV0xx,
KV1xx, KV9xx).
"""

from __future__ import annotations

import os

import attrs

from kvplan.diagnostics import Diagnostic, make
from kvplan.errors import Span
from kvplan.lang import codes
from kvplan.lang.check import check
from kvplan.lang.scenario import Choice, DeviceCount, Expectation, Pin, Scenario
from kvplan.lang.spec import Comment, SpecFile
from kvplan.lang.syntax import KvpSyntaxError, parse, parse_all

__all__ = [
    "CheckResult", "Choice", "Comment", "DeviceCount", "Expectation", "KvpSyntaxError", "MAX_FILE_CHARS", "Pin",
    "Scenario", "SpecFile", "check_file", "check_source", "parse",
]

#: A spec is written by hand (LANGUAGE.md's complete example has 2.5k characters); a larger
#: file is not one, and would take seconds to parse (about 3 µs a character).
MAX_FILE_CHARS = 256 * 1024


@attrs.frozen(slots=True)
class CheckResult:
    """A checked file: its text, syntax tree (None after a syntax error), scenarios and diagnostics."""

    path: str
    source: str
    file: SpecFile | None
    scenarios: tuple[Scenario, ...]
    diagnostics: tuple[Diagnostic, ...]
    comments: tuple[Comment, ...]

    @property
    def ok(self) -> bool:
        """No error (warnings allowed)."""
        return not any(d.severity.value == "error" for d in self.diagnostics)


def check_source(text: str, path: str) -> CheckResult:
    """Parse and check .kvp text. Never raises for bad input: every problem is a Diagnostic.

    `path` names the file in spans; model configs are read relative to its folder.
    """
    if len(text) > MAX_FILE_CHARS:
        lines = text.count("\n") + 1
        diag = make(codes.FILE_TOO_LARGE, f"the file has {len(text):,} characters; a spec has at most "
                    f"{MAX_FILE_CHARS:,}", Span(path, 1, 1, 1, 1),
                    help=f"split it; is it a .kvp file? ({lines:,} lines)")
        return CheckResult(path, text, None, (), (diag,), ())
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is not part of line 1's columns
    spec, errors = parse_all(text, path)
    if spec is None:
        diags = tuple(_syntax_diagnostic(e, path, text) for e in errors)
        return CheckResult(path, text, None, (), tuple(sorted(diags, key=Diagnostic.sort_key)), ())
    scenarios, diagnostics = check(spec, os.path.dirname(path) or ".", text)
    return CheckResult(path, text, spec, scenarios, diagnostics, spec.comments)


def check_file(path: str) -> CheckResult:
    """Read and check a .kvp file; an unreadable file or bad UTF-8 is a KV001/KV002 diagnostic."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        diag = make(codes.UNREADABLE_FILE, f"cannot read {path}: {reason}", Span(path, 1, 1, 1, 1))
        return CheckResult(path, "", None, (), (diag,), ())
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[:exc.start].decode("utf-8", errors="replace")
        line = good.count("\n") + 1
        col = len(good) - (good.rfind("\n") + 1) + 1
        diag = make(codes.NOT_UTF8, f"byte 0x{data[exc.start]:02x} is not UTF-8 text",
                    Span(path, line, col, line, col + 1), help="save the file as UTF-8")
        return CheckResult(path, "", None, (), (diag,), ())
    return check_source(text, path)


def _syntax_diagnostic(exc: KvpSyntaxError, path: str, text: str = "") -> Diagnostic:
    from kvplan.lang.fixes import syntax_fix

    span = exc.span or Span(path, 1, 1, 1, 1)
    fix = syntax_fix(exc.code, span, exc.help, text) if exc.help and text else None
    return make(exc.code, exc.message, span, exc.help, fixes=[fix])
