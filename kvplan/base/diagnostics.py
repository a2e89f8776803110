"""Diagnostics: coded findings with a span, collected and handed to a renderer.

What each code means is in the one table, kvplan.base.codes.
"""

from __future__ import annotations

from typing import Optional, Sequence

from kvplan.base.codes import CODES, Code, Severity
from kvplan.base.errors import Span
from kvplan.base.records import record


@record
class Edit:
    """Replace the text of `span` with `text`; an empty span (end = start) inserts at it."""

    span: Span
    text: str


@record
class Fix:
    """A concrete change a diagnostic suggests, as data a tool (or a test) can apply.

    `title` is the human text (it also appears in the help line); `edits` change the file.
    Every fix kvplan prints is verified by tests/unit/planner/test_suggestions.py: applied to the file,
    the finding it addresses is gone and no new error appears.
    """

    title: str
    edits: tuple[Edit, ...]


@record
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Optional[Span]
    help: Optional[str] = None
    fixes: tuple[Fix, ...] = ()

    @property
    def rule(self) -> Code:
        return CODES[self.code]

    def sort_key(self) -> tuple[str, int, int, str]:
        s = self.span
        return (s.file, s.line, s.column, self.code) if s else ("", 0, 0, self.code)


def make(code: str, message: str, span: Optional[Span], help: Optional[str] = None,
         severity: Optional[Severity] = None, fixes: Sequence[Optional[Fix]] = ()) -> Diagnostic:
    rule = CODES[code]
    return Diagnostic(code, severity or rule.severity, message, span, help,
                      tuple(f for f in fixes if f is not None))
